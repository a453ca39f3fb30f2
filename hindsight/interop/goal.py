"""GOAL schedules (LogGOPSim's input) to and from traces: ``export_goal`` and ``import_goal``.

Export writes the schedule ``--model loggopsim`` replays (``replay.loggopsim.schedule``:
collectives expanded into the point-to-point messages of their algorithms, compute bursts as
``calc``). Import parses a schedule (``replay.loggopsim.goal``), simulates it with LogGOPSim's
rules to get a timeline, and writes that as an ordinary trace; the schedule itself is kept next to
it (``schedule.goal``) so ``--model loggopsim`` replays it exactly, dependency graph and all.
"""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from collections.abc import Sequence
from typing import Any, Mapping

import numpy as np

from hindsight import trace as tf
from hindsight.jit import njit
from replay import models as M
from replay.loggopsim.goal import GoalError, read_goal, write_goal
from replay.loggopsim.schedule import (SIDECAR, cache_schedule, schedule_from_trace,
                                       sidecar_schedule)
from replay.loggopsim.simulator import (
    ANY,
    CALC,
    RECV,
    SEND,
    Schedule,
    ScheduleError,
    SimResult,
    schedule_buckets,
    simulate,
)
from replay.models.loggopsim import params_from_values
from hindsight.trace.core import OP_CODE
from hindsight.trace.write import INT_FIELDS, RankEvents, write_trace

# LogGOPSim's own defaults (its simulator.ggo), used when importing without parameters.
LOGGOPSIM_DEFAULTS = {"L": "2500ns", "o": "1500ns", "g": "1000ns", "G": "6ns", "O": "0ns",
                      "S": "65535B"}


# ------------------------------------------------------------------------------------------------
# Export


def export_goal(trace_dir: Path | str, out: Path | str, *, compute_scale: float = 1.0,
                algorithms: Mapping[str, str] | None = None) -> Schedule:
    """Write the GOAL schedule of a trace to ``out`` (a trace imported from GOAL gives back its
    schedule)."""
    # the replay's engine, which only an export needs, is not loaded by an import
    from replay.engine import scale_array
    from replay.prepare import prepare

    trace_dir = Path(trace_dir)
    prep = prepare(trace_dir)
    side = sidecar_schedule(prep)
    if side is not None:
        sched = side
        header = f"hindsight export of {trace_dir} (the schedule it was imported from)"
    else:
        scale = scale_array(prep, compute_scale, None)
        sched = schedule_from_trace(prep, scale, cpu_time=False,
                                    algorithms=algorithms).schedule
        header = (f"hindsight export of {trace_dir} ({prep.nranks} ranks, "
                  f"{sched.nops} operations; collectives as point-to-point messages)")
    write_goal(sched, out, header)
    return sched


# ------------------------------------------------------------------------------------------------
# Import: schedule -> simulated timeline -> trace rows


def import_values(params: Mapping[str, Any] | list[tuple[str, Any]] | None = None
                  ) -> dict[str, Any]:
    """The LogGOPSim model's values an import simulates with: LogGOPSim's defaults, then
    ``params`` (``import --set``). A bad name or value raises ``ParamError``."""
    assign = dict(LOGGOPSIM_DEFAULTS)
    assign.update(dict(params or {}))
    return M.resolve(M.get_model("loggopsim"), list(assign.items()))


def import_goal(path: Path | str, out: Path | str,
                params: Mapping[str, Any] | list[tuple[str, Any]] | None = None) -> Path:
    """Parse a GOAL schedule, simulate it (LogGOPSim rules, LogGOPSim's default parameters unless
    ``params`` overrides them, hindsight units) and write the timeline as a trace in ``out``."""
    path = Path(path)
    values = import_values(params)
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise GoalError(f"{out}: exists and is not empty (choose a new --out)")
    sched = read_goal(path)
    skipped = skipped_by_kind(sched)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    # The schedule is kept beside the trace, as text (``schedule.goal``, the user's to edit) and
    # parsed (``cache_schedule``: a replay under --model loggopsim maps its arrays instead of
    # parsing the text again). Both are written on a thread while the simulation runs on the
    # parsed arrays: they are 0.2-0.6 s at 5 M operations of writing pages, the simulation as
    # long of computing. Its matching buckets are numbered first, for both to use.
    sched.buckets = schedule_buckets(sched)
    failed = None
    # (leaving the block waits for the thread, whatever ends the simulation: nothing is
    # removed or replaced at ``out`` while the thread still writes there)
    with ThreadPoolExecutor(1) as pool:
        keeping = pool.submit(_keep_beside, path, out / SIDECAR, sched)
        # (and the rows' grouping of the waits, which needs the schedule only)
        waits = pool.submit(_waits_by_op, sched.nops, sched.dep_op, sched.dep_on, sched.dep_start)
        try:
            sim = simulate(sched, params_from_values(values, sched.nranks))
        except ScheduleError as exc:
            failed = exc
    if failed is not None:
        # nothing is left behind by an import that fails
        if created:
            shutil.rmtree(out, ignore_errors=True)
        else:
            for p in out.iterdir():
                shutil.rmtree(p) if p.is_dir() else p.unlink()
        raise GoalError(f"{path}: {failed}") from None
    keeping.result()                    # (raises what the writing raised)
    ranks = RankRows(sched, sim, waits.result())
    del sched, sim          # the rows keep what they need; each rank's rows live one at a time
    # the manifest's makespan is the last row's end, from the epoch (time 0, where the
    # simulation starts), as write_trace takes it from the rows
    write_trace(out, ranks, manifest={
        "app": path.stem, "paradigm": None,
        "import": {"skipped": skipped},
        "origin": {"format": "goal", "source": str(path), "schedule": SIDECAR,
                   "timeline": "simulated with LogGOPSim rules",
                   "params_ns": {k: (v if np.isfinite(v) else "inf") if isinstance(v, float)
                                 else v for k, v in values.items()}}})
    return out


def _keep_beside(source: Path, goal: Path, sched: Schedule) -> None:
    """The schedule file ``source`` copied to ``goal`` beside a trace, and ``sched``, parsed
    from it, kept in the trace's cache (``cache_schedule``)."""
    shutil.copyfile(source, goal)
    cache_schedule(sched, goal)


def skipped_by_kind(s: Schedule) -> dict[str, int]:
    """What the trace's rows cannot say about schedule ``s``, by kind: which CPU or NIC of its
    host an operation used (a non-zero ``cpu``/``nic``; only the schedule kept beside the trace,
    which ``--model loggopsim`` replays, says it)."""
    n = int(np.count_nonzero((np.asarray(s.cpu) != 0) | (np.asarray(s.nic) != 0)))
    return {"GOAL cpu/nic field": n} if n else {}


class RankRows(Sequence[RankEvents]):
    """Each rank's simulated operations linearised into trace rows, made when the rank is asked
    for (a writer going through the ranks holds one rank's rows at a time).

    Sends become Isend rows ending at their simulated end, or when the rank's next operation
    started if that was earlier (rule ``send_row_until_next``), receives zero-length Irecv rows;
    each request gets a Wait row right before the first operation that requires it (or at the
    end), ending when the operation completed; calcs become ``calc`` region rows of their
    simulated duration. Rule ``rows_without_gaps`` (``_linearise``): the time outside calc rows
    is inside MPI rows, so the compute a replay finds is the schedule's calcs. Request ids are
    the operation's index on its rank: a replay of the trace under ``--model loggopsim`` maps
    rows back to the schedule's operations through them."""

    def __init__(self, s: Schedule, sim: SimResult,
                 waits: tuple[np.ndarray, np.ndarray] | None = None):
        n = s.nops
        self.nranks = s.nranks
        self.rank_off = s.rank_off
        # the schedule's own arrays, whatever their integer widths (the parser's or the cache's):
        # a widened copy of each would add some 30 bytes per operation to the import's peak
        self.kind, self.rank, self.size = s.kind, s.rank, s.size
        self.peer, self.tag = s.peer, s.tag
        # per rank, whether all its operations run on CPU 0 (rule rows_without_gaps), not the
        # cpu column itself: the schedule's other arrays are freed while the rows are written
        self.one_cpu = _one_cpu(np.asarray(s.cpu), np.asarray(s.rank_off))
        self.match, self.op_start, self.op_end = sim.match, sim.op_start, sim.op_end
        # (``waits``: ``_waits_by_op`` of ``s``, when the caller made it meanwhile)
        self.dep_off, self.dep_on = waits or _waits_by_op(n, s.dep_op, s.dep_on, s.dep_start)
        self.codes = np.array([OP_CODE[o] for o in ("region", "Isend", "Irecv", "Wait",
                                                    "Waitall")], np.int8)

    def __len__(self) -> int:
        return self.nranks

    def __getitem__(self, r):
        if not 0 <= r < self.nranks:
            raise IndexError(r)
        lo, hi = int(self.rank_off[r]), int(self.rank_off[r + 1])
        # the rank's operations by simulated start (ties: schedule order)
        order = lo + np.argsort(self.op_start[lo:hi], kind="stable")
        one_cpu = bool(self.one_cpu[r])
        out = _linearise(lo, hi, order, self.kind, self.size, self.peer, self.tag, self.rank,
                         self.match, self.op_start, self.op_end, self.dep_off, self.dep_on,
                         self.codes, tf.ANY_SOURCE, tf.ANY_TAG, one_cpu)
        op, region, ints = out[0], out[1], out[2:]
        cols = dict(zip(INT_FIELDS, ints))
        return RankEvents(r, op, region, cols, ["calc"] if (region >= 0).any() else [])


@njit(cache=True, nogil=True)
def _waits_by_op(n, dep_op, dep_on, dep_start):
    """The completion dependencies (``requires``, not ``irequires``) grouped by the operation
    that waits, each group in the order of the operations waited for: ``(off, on)``, operation
    i waiting for ``on[off[i]:off[i + 1]]``. A counting sort: linear, and no sorted copy of
    every dependency column."""
    off = np.zeros(n + 1, np.int64)
    for k in range(len(dep_op)):
        if not dep_start[k]:
            off[dep_op[k] + 1] += 1
    for i in range(n):
        off[i + 1] += off[i]
    on = np.empty(off[n], np.int64)
    at = off[:n].copy()
    for k in range(len(dep_op)):
        if not dep_start[k]:
            on[at[dep_op[k]]] = dep_on[k]
            at[dep_op[k]] += 1
    # small groups sorted in place by insertion: most are a few entries, often out of order
    # (``l5 requires l4`` before ``l5 requires l3``), where an np.sort call per group cost ten
    # times the whole counting sort; large ones (quadratic by insertion) by np.sort
    for i in range(n):
        if off[i + 1] - off[i] > 32:
            on[off[i]:off[i + 1]] = np.sort(on[off[i]:off[i + 1]])
            continue
        for j in range(off[i] + 1, off[i + 1]):
            x = on[j]
            k = j - 1
            while k >= off[i] and on[k] > x:
                on[k + 1] = on[k]
                k -= 1
            on[k + 1] = x
    return off, on


def _one_cpu(cpu: np.ndarray, rank_off: np.ndarray) -> np.ndarray:
    """Per rank (operations rank_off[r]..rank_off[r + 1]), whether none of its operations names
    a CPU other than 0."""
    other = np.flatnonzero(cpu != 0)
    out = np.ones(len(rank_off) - 1, np.bool_)
    out[np.searchsorted(rank_off, other, side="right") - 1] = False
    return out


@njit(cache=True, nogil=True, _nrt=False)
def _pack_calcs(t_start, t_end, lo, hi, call_lo, call_hi, first_start, last_end, dur):
    """Rule ``rows_without_gaps`` for the calc rows lo..hi (written since the rank's last MPI
    call, rows call_lo..call_hi; none: call_lo < 0), which ran for ``dur`` in all between their
    simulated ``first_start`` and ``last_end``: they are packed back to back, and the MPI work
    the CPU did among them goes into an MPI call. After a call they end at ``last_end`` and the
    call's rows are extended to their start (a Waitall's rows together), so every row after
    them keeps its simulated times; before any call (the rank's start) they start at
    ``first_start``, and the work goes into the next call. Returns where they end."""
    at = first_start
    if call_lo >= 0:
        at = max(last_end - dur, float(t_end[call_lo]))
        for k in range(call_lo, call_hi):
            t_end[k] = round(at)
    for k in range(lo, hi):
        d = t_end[k] - t_start[k]           # (each row holds its own simulated duration)
        t_start[k] = round(at)
        at += d
        t_end[k] = round(at)
    return at


@njit(cache=True, nogil=True)
def _linearise(lo, hi, order, kind, size, peer, tag, rank, match, op_start, op_end, dep_off,
               dep_on, codes, any_source, any_tag, one_cpu):
    """The rows of ``RankRows`` of the rank whose operations are lo..hi (``order``: them by
    simulated start) as columns: op, region, then INT_FIELDS. A request is waited for once:
    the requests a rank waits for are its own operations.

    Rule ``rows_without_gaps`` (``one_cpu``: the rank's operations all run on CPU 0): each MPI
    row starts where the rank's previous row ended, and the calc rows between two MPI calls
    are packed (``_pack_calcs``). One CPU runs a rank's calcs and its MPI work (the receive
    charges of arriving messages, a send's wait for the NIC) one after the other, so the time
    outside calcs is all MPI: it falls inside MPI rows, and a replay (which takes the time
    between MPI rows as compute) finds exactly the calcs as compute, not LogGOPSim's own costs
    a second time. A rank that runs calcs on several CPUs at once keeps the simulated times of
    its calcs (they overlap), its MPI rows starting at the end of the previous MPI row."""
    n = hi - lo
    cap = 2 * n
    op = np.empty(cap, np.int8)
    region = np.full(cap, -1, np.int64)
    t_start = np.empty(cap, np.int64)
    t_end = np.empty(cap, np.int64)
    cpu_ns = np.full(cap, -1, np.int64)
    r_peer = np.full(cap, -1, np.int64)
    r_tag = np.full(cap, -1, np.int64)
    comm = np.zeros(cap, np.int64)
    nbytes = np.full(cap, -1, np.int64)
    request = np.full(cap, -1, np.int64)
    root = np.full(cap, -1, np.int64)
    posted = np.zeros(n, np.bool_)         # by operation - lo
    waited = np.zeros(n, np.bool_)
    ys = np.empty(n, np.int64)
    nr = 0
    busy = 0.0      # end of the last MPI row: MPI calls of one rank never overlap
    call_lo = -1    # the last MPI call's rows (a Waitall's share one interval)
    call_hi = -1
    chain_lo = -1   # the calc rows since then, their simulated span and their total duration
    chain_t0 = 0.0
    chain_t1 = 0.0
    chain_dur = 0.0
    for j in range(n + 1):
        last = j == n
        ny = 0
        if last:
            # every request not yet waited for, at the end
            for y in range(lo, hi):
                if posted[y - lo] and not waited[y - lo]:
                    ys[ny] = y
                    ny += 1
        else:
            i = order[j]
            for k in range(dep_off[i], dep_off[i + 1]):
                y = dep_on[k]
                if posted[y - lo] and not waited[y - lo] and (ny == 0 or ys[ny - 1] != y):
                    ys[ny] = y
                    ny += 1
        if chain_lo >= 0 and (ny or last or kind[order[j]] != CALC):
            busy = _pack_calcs(t_start, t_end, chain_lo, nr, call_lo, call_hi, chain_t0,
                               chain_t1, chain_dur)
            chain_lo = -1
        if ny:
            # one Wait (Waitall for several) from the end of the last call until the last of
            # the operations completed; one row per request, as the collector records them
            t1 = busy
            for q in range(ny):
                t1 = max(t1, op_end[ys[q]])
            call_lo = nr
            for q in range(ny):
                y = ys[q]
                op[nr] = codes[3] if ny == 1 else codes[4]
                t_start[nr] = round(busy)
                t_end[nr] = round(t1)
                request[nr] = y - lo
                if kind[y] == RECV:
                    m = match[y]
                    r_peer[nr] = rank[m]
                    r_tag[nr] = tag[m]
                    nbytes[nr] = int(size[m])
                waited[y - lo] = True
                nr += 1
            call_hi = nr
            busy = t1
        if last:
            break
        t0 = op_start[i]
        t1 = op_end[i]
        if kind[i] == CALC:
            op[nr] = codes[0]
            region[nr] = 0
            t_start[nr] = round(t0)
            t_end[nr] = round(max(t1, t0))
            cpu_ns[nr] = round(size[i])
            comm[nr] = -1
            if one_cpu:
                if chain_lo < 0:
                    chain_lo, chain_t0, chain_dur = nr, t0, 0.0
                chain_t1 = max(t1, t0)
                chain_dur += max(t1, t0) - t0
            nr += 1
            continue
        t0 = max(t0, busy) if not one_cpu else busy
        posted[i - lo] = True
        request[nr] = i - lo
        nbytes[nr] = int(size[i])
        r_tag[nr] = tag[i]
        r_peer[nr] = peer[i]
        if kind[i] == SEND:
            # rule send_row_until_next: the call ends no later than the rank's next operation
            # starts (its next MPI operation, with calcs on several CPUs), for the CPU has
            # moved on by then; a rendezvous send completes much later, and that is its Wait's
            for k in range(j + 1, n):
                if one_cpu or kind[order[k]] != CALC:
                    t1 = min(t1, op_start[order[k]])
                    break
            t1 = max(t1, t0)
            op[nr] = codes[1]
        else:
            t1 = t0
            op[nr] = codes[2]
            if peer[i] == ANY:
                r_peer[nr] = any_source
            if tag[i] == ANY:
                r_tag[nr] = any_tag
        t_start[nr] = round(t0)
        t_end[nr] = round(max(t1, t0))
        call_lo, call_hi = nr, nr + 1
        nr += 1
        busy = t1
    return (op[:nr], region[:nr], t_start[:nr], t_end[:nr], cpu_ns[:nr], r_peer[:nr],
            r_tag[:nr], comm[:nr], nbytes[:nr], request[:nr], root[:nr])
