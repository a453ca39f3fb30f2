"""GOAL schedules (LogGOPSim's input) to and from traces: ``export_goal`` and ``import_goal``.

Export writes the schedule ``--model loggopsim`` replays (``replay.loggopsim.schedule``:
collectives expanded into the point-to-point messages of their algorithms, compute bursts as
``calc``). Import parses a schedule (``replay.loggopsim.goal``), simulates it with LogGOPSim's
rules to get a timeline, and writes that as an ordinary trace; the schedule itself is kept next to
it (``schedule.goal``) so ``--model loggopsim`` replays it exactly, dependency graph and all.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Mapping

import numba as nb
import numpy as np

from hindsight import trace as tf
from replay import models as M
from replay.engine import scale_array
from replay.loggopsim.goal import GoalError, format_goal, read_goal
from replay.loggopsim.schedule import SIDECAR, schedule_from_trace, sidecar_schedule
from replay.loggopsim.simulator import (
    ANY,
    CALC,
    RECV,
    SEND,
    Schedule,
    ScheduleError,
    SimResult,
    simulate,
)
from replay.models.loggopsim import params_from_values
from replay.prepare import prepare
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
    Path(out).write_text(format_goal(sched, header))
    return sched


# ------------------------------------------------------------------------------------------------
# Import: schedule -> simulated timeline -> trace rows


def import_goal(path: Path | str, out: Path | str,
                params: Mapping[str, Any] | list[tuple[str, Any]] | None = None) -> Path:
    """Parse a GOAL schedule, simulate it (LogGOPSim rules, LogGOPSim's default parameters unless
    ``params`` overrides them, hindsight units) and write the timeline as a trace in ``out``."""
    path = Path(path)
    sched = read_goal(path)
    mod = M.get_model("loggopsim")
    assign = dict(LOGGOPSIM_DEFAULTS)
    assign.update(dict(params or {}))
    values = M.resolve(mod, list(assign.items()))
    try:
        sim = simulate(sched, params_from_values(values, sched.nranks))
    except ScheduleError as exc:
        raise GoalError(f"{path}: {exc}") from None
    ranks = _rows_from_simulation(sched, sim)
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise GoalError(f"{out}: exists and is not empty (choose a new --out)")
    write_trace(out, ranks, manifest={
        "app": path.stem, "paradigm": None,
        "import": {"skipped": skipped_by_kind(sched)},
        # the makespan from the epoch (time 0, where the simulation starts)
        "makespan_ns": max((int(ev.ints["t_end"].max()) for ev in ranks if len(ev)), default=0),
        "origin": {"format": "goal", "source": str(path), "schedule": SIDECAR,
                   "timeline": "simulated with LogGOPSim rules",
                   "params_ns": {k: (v if np.isfinite(v) else "inf") if isinstance(v, float)
                                 else v for k, v in values.items()}}})
    shutil.copyfile(path, out / SIDECAR)
    return out


def skipped_by_kind(s: Schedule) -> dict[str, int]:
    """What the trace's rows cannot say about schedule ``s``, by kind: which CPU or NIC of its
    host an operation used (a non-zero ``cpu``/``nic``; only the schedule kept beside the trace,
    which ``--model loggopsim`` replays, says it)."""
    n = int(np.count_nonzero((np.asarray(s.cpu) != 0) | (np.asarray(s.nic) != 0)))
    return {"GOAL cpu/nic field": n} if n else {}


def _rows_from_simulation(s: Schedule, sim: SimResult) -> list[RankEvents]:
    """Linearise each rank's simulated operations into trace rows.

    Sends become Isend and receives Irecv at their simulated start; each request gets a Wait row
    right before the first operation that requires it (or at the end), ending when the operation
    completed; calcs become ``calc`` region rows (the time between MPI rows is compute). Request
    ids are the operation's index on its rank: a replay of the trace under ``--model loggopsim``
    maps rows back to the schedule's operations through them."""
    n = s.nops
    kind = np.asarray(s.kind, np.int64)
    rank = np.asarray(s.rank, np.int64)
    # each rank's operations by simulated start (ties: schedule order)
    order = np.lexsort((np.arange(n), sim.op_start, rank))
    comp = ~np.asarray(s.dep_start, bool)
    dep_op = np.asarray(s.dep_op, np.int64)[comp]
    dep_on = np.asarray(s.dep_on, np.int64)[comp]
    by_op = np.lexsort((dep_on, dep_op))
    dep_off = np.searchsorted(dep_op[by_op], np.arange(n + 1)).astype(np.int64)
    codes = np.array([OP_CODE[o] for o in ("region", "Isend", "Irecv", "Wait", "Waitall")],
                     np.int8)
    out = _linearise(s.rank_off, order, kind, np.asarray(s.size, np.float64),
                     np.asarray(s.peer, np.int64), np.asarray(s.tag, np.int64), rank,
                     sim.match, sim.op_start, sim.op_end, dep_off, dep_on[by_op], codes,
                     tf.ANY_SOURCE, tf.ANY_TAG)
    row_off, op, region, ints = out[0], out[1], out[2], out[3:]
    ranks = []
    for r in range(s.nranks):
        lo, hi = int(row_off[r]), int(row_off[r + 1])
        reg = region[lo:hi]
        cols = {c: a[lo:hi] for c, a in zip(INT_FIELDS, ints)}
        ranks.append(RankEvents(r, op[lo:hi], reg, cols, ["calc"] if (reg >= 0).any() else []))
    return ranks


@nb.njit(cache=True)
def _linearise(rank_off, order, kind, size, peer, tag, rank, match, op_start, op_end, dep_off,
               dep_on, codes, any_source, any_tag):
    """The rows of ``_rows_from_simulation``, all ranks, as flat columns (INT_FIELDS order)."""
    n = len(kind)
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
    posted = np.zeros(n, np.bool_)
    waited = np.zeros(n, np.bool_)
    ys = np.empty(n, np.int64)
    P = len(rank_off) - 1
    row_off = np.zeros(P + 1, np.int64)
    nr = 0
    for r in range(P):
        lo = rank_off[r]
        busy = 0.0      # end of the last MPI row: MPI calls of one rank never overlap
        for j in range(rank_off[r], rank_off[r + 1] + 1):
            last = j == rank_off[r + 1]
            ny = 0
            if last:
                # every request not yet waited for, at the end
                for y in range(rank_off[r], rank_off[r + 1]):
                    if posted[y] and not waited[y]:
                        ys[ny] = y
                        ny += 1
            else:
                i = order[j]
                for k in range(dep_off[i], dep_off[i + 1]):
                    y = dep_on[k]
                    if posted[y] and not waited[y] and (ny == 0 or ys[ny - 1] != y):
                        ys[ny] = y
                        ny += 1
            if ny:
                # one Wait (Waitall for several) from the end of the last call until the last of
                # the operations completed; one row per request, as the collector records them
                t1 = busy
                for q in range(ny):
                    t1 = max(t1, op_end[ys[q]])
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
                    waited[y] = True
                    nr += 1
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
                nr += 1
                continue
            t0 = max(t0, busy)
            posted[i] = True
            request[nr] = i - lo
            nbytes[nr] = int(size[i])
            r_tag[nr] = tag[i]
            r_peer[nr] = peer[i]
            if kind[i] == SEND:
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
            nr += 1
            busy = t1
        row_off[r + 1] = nr
    return (row_off, op[:nr], region[:nr], t_start[:nr], t_end[:nr], cpu_ns[:nr], r_peer[:nr],
            r_tag[:nr], comm[:nr], nbytes[:nr], request[:nr], root[:nr])
