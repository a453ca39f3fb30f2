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
from hindsight.trace.write import INT_FIELDS, write_trace

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
        "makespan_ns": max((max(c["t_end"]) for c in ranks if c["t_end"]), default=0),
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


def _rows_from_simulation(s: Schedule, sim: SimResult) -> list[dict[str, list]]:
    """Linearise each rank's simulated operations into trace rows.

    Sends become Isend and receives Irecv at their simulated start; each request gets a Wait row
    right before the first operation that requires it (or at the end), ending when the operation
    completed; calcs become ``calc`` region rows (the time between MPI rows is compute)."""
    ranks = []
    off = s.rank_off
    req_deps: dict[int, list[int]] = {}
    for a, b, st in zip(s.dep_op.tolist(), s.dep_on.tolist(), s.dep_start.tolist()):
        if not st:
            req_deps.setdefault(a, []).append(b)
    for r in range(s.nranks):
        c = {c: [] for c in ("op", "region", *INT_FIELDS)}
        lo, hi = int(off[r]), int(off[r + 1])
        order = sorted(range(lo, hi), key=lambda i: (sim.op_start[i], i))
        # request ids are the operation's index on its rank: a replay of the trace under
        # --model loggopsim maps rows back to the schedule's operations through them
        request: dict[int, int] = {}
        waited: set[int] = set()
        busy = 0.0      # end of the last MPI row: MPI calls of one rank never overlap

        def row(op, t0, t1, peer=-1, tag=-1, nbytes=-1, req=-1, region=None, cpu=-1, comm=0):
            c["op"].append(op), c["region"].append(region)
            c["t_start"].append(int(round(t0))), c["t_end"].append(int(round(max(t1, t0))))
            c["cpu_ns"].append(cpu), c["peer"].append(peer), c["tag"].append(tag)
            c["comm"].append(comm), c["nbytes"].append(nbytes), c["request"].append(req)
            c["root"].append(-1)

        def wait(ys):
            """One Wait (Waitall for several) from the end of the last call until the last of
            the operations completed; one row per request, as the collector records them."""
            nonlocal busy
            t0 = busy
            t1 = max([t0] + [float(sim.op_end[y]) for y in ys])
            name = "Wait" if len(ys) == 1 else "Waitall"
            for y in ys:
                m = int(sim.match[y])
                if s.kind[y] == RECV:
                    row(name, t0, t1, int(s.rank[m]), int(s.tag[m]), int(s.size[m]), request[y])
                else:
                    row(name, t0, t1, req=request[y])
                waited.add(y)
            busy = t1

        for i in order:
            ys = [y for y in req_deps.get(i, []) if y in request and y not in waited]
            if ys:
                wait(sorted(set(ys)))
            k = int(s.kind[i])
            t0, t1 = sim.op_start[i], sim.op_end[i]
            if k == CALC:
                row("region", t0, t1, region="calc", cpu=int(round(s.size[i])), comm=-1)
                continue
            t0 = max(t0, busy)
            request[i] = i - lo
            if k == SEND:
                t1 = max(t1, t0)
                row("Isend", t0, t1, int(s.peer[i]), int(s.tag[i]), int(s.size[i]), request[i])
            else:
                src = int(s.peer[i]) if s.peer[i] != ANY else tf.ANY_SOURCE
                tag = int(s.tag[i]) if s.tag[i] != ANY else tf.ANY_TAG
                t1 = t0
                row("Irecv", t0, t1, src, tag, int(s.size[i]), request[i])
            busy = t1
        rest = [y for y in sorted(request) if y not in waited]
        if rest:
            wait(rest)
        ranks.append(c)
    return ranks
