"""The Python tracer's probe (part of `hindsight calibrate`) and its fit: the tracer's own time per
call outside the interval it records (rule ``python_tracer_in_bursts``, ``replay.tracer_cost``).

The Python tracer (instrument.comm) takes a call's t_start and t_end right around the mpi4py
call. Its own work is outside them: the traced method's dispatch before t_start, packing the
record into its staging file after t_end. A trace of the
Python tracer therefore has that work in its bursts, where the replay takes it for the program's
compute, although the untraced program does not do it.

The probe runs ``PROGRAM`` under the tracer (``python -m instrument.run --trace TMP --recorder
python tracer_probe.py OUT``, 2 ranks, the bench's transport) and reads its trace back. Each
rank makes ``TRACER_BATCH * (TRACER_BATCHES + 1)`` calls of each form
of ``FORMS`` in a loop with nothing else in it: point-to-point calls to ``MPI.PROC_NULL`` (where
MPI does nothing), an 8-byte Allreduce and a Barrier of the two ranks. The gap before a row,
t_start of the row less t_end of the rank's row before it, is the loop's own iteration plus the
tracer's work after the previous call and before this one. The fit takes, per form, the median
gap over both ranks' rows (the first batch of each form left out: a warm-up) less the median time
per iteration of the same loop calling an empty function (``loop_s``), floored at 0.

A program's bursts are not the probe's: a burst of real compute is not changed by the tracer's
work around it, only lengthened by it, which is what the rule takes off.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Callable

import numpy as np

#: calls per batch; the first batch of each form is a warm-up
TRACER_BATCH = 200
TRACER_BATCHES = 10
_TAG = 61
#: the forms timed, in the order the program makes them; the profile's key per form
FORMS = {"Send": "send", "Recv": "recv", "Isend": "isend", "Irecv": "irecv",
         "Allreduce": "collective", "Barrier": "barrier"}
#: the Wait after an Isend / an Irecv: the profile's keys
WAITS = {"Isend": "wait_send", "Irecv": "wait_recv"}
#: the section's keys, seconds per call (replay.tracer_cost.KEYS): the forms' but the Barrier's
#: (evidence only: the rule prices a collective by the Allreduce's), and ``other``, the smallest
#: of them, for calls of kinds the probe does not make (every recorded call costs at least the
#: wrapper and the record)
KEYS = ("send", "recv", "isend", "irecv", "wait_send", "wait_recv", "collective", "other")


#: the probe program, written to a folder of its own and run under the tracer (its folder goes
#: first on the program's sys.path, so it must not be this package's, whose queue.py would shadow
#: the standard library's)
PROGRAM = f"""
import json, sys, time
import numpy as np
from mpi4py import MPI

comm, null = MPI.COMM_WORLD, MPI.PROC_NULL      # the traced COMM_WORLD
buf, rbuf = np.zeros(1), np.zeros(1)
n = {TRACER_BATCH} * ({TRACER_BATCHES} + 1)
items = range(n)
calls = [lambda: comm.Send(buf, null, {_TAG}), lambda: comm.Recv(buf, null, {_TAG}),
         lambda: comm.Isend(buf, null, {_TAG}).Wait(), lambda: comm.Irecv(buf, null, {_TAG}).Wait(),
         lambda: comm.Allreduce(buf, rbuf), lambda: comm.Barrier()]   # FORMS, in order


def empty():
    return None


loops = []
for _ in range({TRACER_BATCHES}):
    t0 = time.perf_counter_ns()
    for _ in items:
        empty()
    loops.append((time.perf_counter_ns() - t0) / n)
t0 = time.perf_counter()
for call in calls:
    for _ in items:
        call()
took = time.perf_counter() - t0
with open(sys.argv[1] + "." + str(comm.Get_rank()), "w") as f:
    json.dump({{"loop_s": float(np.median(loops)) / 1e9, "took_s": took}}, f)
"""


def run_probe(env: dict[str, str], mpiexec: str, run_job: Callable[..., tuple[str, str, int]],
              timeout: float = 120.0) -> dict:
    """Run the probe program under the Python tracer (2 ranks, environment ``env``: the bench's
    transport) and return what `fit_tracer` reads: each rank's loop time and its rows' gaps per
    form. ``run_job`` runs the job as the benchmark's are run (``run.run_job``: its own session,
    stopped with every rank on a timeout or Ctrl-C; passed in, as that module imports this
    one). Raises RuntimeError with the job's last line when it fails; ``run_job``'s error when
    the job made no progress for ``timeout`` seconds."""
    from hindsight.trace.columns import read_columns

    with tempfile.TemporaryDirectory(prefix="hindsight-tracer-probe-") as tmp:
        trace, out = Path(tmp) / "trace", Path(tmp) / "probe"
        program = Path(tmp) / "program" / "tracer_probe.py"
        program.parent.mkdir()
        program.write_text(PROGRAM)
        cmd = [mpiexec, "-n", "2", sys.executable, "-m", "instrument.run", "--trace", str(trace),
               "--recorder", "python", str(program), str(out)]
        root = str(Path(__file__).resolve().parents[2])
        full = dict(env, PYTHONPATH=os.pathsep.join([root] + [p for p in [
            env.get("PYTHONPATH")] if p]))
        _, stderr, rc = run_job(cmd, full, timeout, "the Python tracer's probe")
        if rc != 0:
            last = (stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"the Python tracer's probe failed (exit code {rc}): {last}")
        cols = read_columns(trace, ["rank", "op", "t_start", "t_end"]).arrays
        ranks = [json.loads(Path(f"{out}.{r}").read_text()) for r in range(2)]
    return {"batch": TRACER_BATCH, "batches": TRACER_BATCHES, "ranks": ranks,
            "gaps_s": _gaps(cols)}


def _gaps(cols: dict) -> dict[str, list[float]]:
    """Per form (and per Wait after Isend / Irecv), the gaps before its rows after the warm-up
    batch, over both ranks, in seconds."""
    from hindsight.trace.core import OPS

    rank, op = np.asarray(cols["rank"]), np.asarray(cols["op"])
    ts, te = np.asarray(cols["t_start"], np.int64), np.asarray(cols["t_end"], np.int64)
    names = np.asarray(OPS + ("?",), dtype=object)[np.where(op < 0, len(OPS), op)]
    out: dict[str, list[float]] = {k: [] for k in list(FORMS.values()) + list(WAITS.values())}
    for r in np.unique(rank):
        sel = rank == r
        nm, s, e = names[sel], ts[sel], te[sel]
        gap = (s[1:] - e[:-1]) / 1e9
        for form, key in FORMS.items():
            idx = np.flatnonzero(nm[1:] == form)[TRACER_BATCH:]
            out[key] += gap[idx].tolist()
        for form, key in WAITS.items():
            idx = np.flatnonzero((nm[1:] == "Wait") & (nm[:-1] == form))[TRACER_BATCH:]
            out[key] += gap[idx].tolist()
    return out


def fit_tracer(probe: dict) -> tuple[dict, dict, list[str]]:
    """(params, evidence, notes): params the ``[python_tracer]`` section (``KEYS``, seconds per
    call, >= 0); evidence each form's median gap, its interquartile range and the loop's time."""
    loop = float(np.median([r["loop_s"] for r in probe["ranks"]]))
    params: dict = {}
    evidence: dict = {"batch": int(probe["batch"]), "batches": int(probe["batches"]),
                      "loop_s": loop}
    notes: list[str] = []
    for key, gaps in probe["gaps_s"].items():
        if not gaps:
            notes.append(f"Python tracer probe: no rows of {key} in its trace: 0 kept")
            params[key] = 0.0
            continue
        a = np.asarray(gaps, np.float64)
        med = float(np.median(a)) - loop
        evidence[key] = {"median_gap_s": float(np.median(a)), "rows": int(len(a)),
                         "iqr_s": float(np.percentile(a, 75) - np.percentile(a, 25))}
        if med < 0:
            notes.append(f"Python tracer probe: {key} no longer than the empty loop: 0 kept")
            med = 0.0
        params[key] = med
    params["other"] = min(params[k] for k in KEYS if k != "other")
    evidence["barrier_s"] = params["barrier"]
    return {k: params[k] for k in KEYS}, evidence, notes


def tracer_probe(transport: str, run_job: Callable[..., tuple[str, str, int]],
                 progress: Callable[[str], None], notes: list[str]
                 ) -> tuple[dict, dict, list[str]] | None:
    """The probe on this host, 2 ranks on ``transport`` (the tracer's cost is its CPU's, the
    network's only through the calls, which it leaves out; ``run_job``: as ``run_probe``'s); its
    fit, or None with a note in ``notes`` when its job failed."""
    from hindsight.collect import find_mpiexec, launch_env
    from hindsight.errors import UserError

    progress("the Python tracer's own time per call (2 ranks, a few seconds)")
    try:
        fit = fit_tracer(run_probe(launch_env(2, transport), find_mpiexec(), run_job))
    except (RuntimeError, OSError, UserError) as exc:   # (a failed or stalled job)
        notes.append(f"Python tracer probe: {exc}; no [python_tracer] section")
        return None
    notes.extend(fit[2])
    return fit
