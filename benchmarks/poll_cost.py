"""What an unsuccessful poll costs traced (format 1.3's `Poll` rows): ns per `Iprobe` that finds
nothing and per `Test` of a pending `Irecv`, untraced, under the Python tracer and under the PMPI
library.

    python benchmarks/poll_cost.py [--rounds 5] [--calls 200000]

Each round runs this file on one rank three times, through `hindsight collect`: `--untraced`,
`--recorder python`, `--recorder pmpi`, in an order rotated every round (drift in the machine's
state falls on all alike). Each run times blocks of polls by the thread's CPU time (a
preempted rank's wait is not counted: the machine is shared) and prints its median ns per call.
Printed: per variant the median (min-max) over the rounds, and what tracing adds per poll. The
load (uptime) is printed before and after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCK = 10000


def _worker(calls: int) -> None:
    import numpy as np
    from mpi4py import MPI

    c = MPI.COMM_WORLD
    buf = np.zeros(1)
    req = c.Irecv(buf, source=0, tag=99)       # pending until the end: every Test fails
    probe, test = [], []
    for _ in range(max(1, calls // BLOCK)):
        t0 = time.thread_time_ns()
        for _ in range(BLOCK):
            c.Iprobe(0, 98)
        t1 = time.thread_time_ns()
        for _ in range(BLOCK):
            req.Test()
        t2 = time.thread_time_ns()
        probe.append((t1 - t0) / BLOCK)
        test.append((t2 - t1) / BLOCK)
    c.Send(np.zeros(1), 0, 99)
    req.Wait()
    print(f"POLLCOST {statistics.median(probe):.1f} {statistics.median(test):.1f}", flush=True)


def _run(variant: list[str], calls: int, tmp: Path) -> tuple[float, float]:
    out = tmp / f"t{time.monotonic_ns()}"
    cmd = [sys.executable, "-m", "hindsight.cli", "collect", "-n", "1", "--program", __file__,
           "--out", str(out), *variant, "--", "--worker", str(calls)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    for line in done.stdout.splitlines() + done.stderr.splitlines():
        if line.startswith("POLLCOST"):
            _, a, b = line.split()
            return float(a), float(b)
    raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=200000)
    ap.add_argument("--worker", type=int)
    a = ap.parse_args()
    if a.worker is not None:
        _worker(a.worker)
        return
    variants = {"untraced": ["--untraced"], "python": ["--recorder", "python"],
                "pmpi": ["--recorder", "pmpi"]}
    got: dict[str, list[tuple[float, float]]] = {k: [] for k in variants}
    print("load before:", os.getloadavg())
    with tempfile.TemporaryDirectory() as tmp:
        names = list(variants)
        for r in range(a.rounds):
            for k in names[r % 3:] + names[:r % 3]:
                got[k].append(_run(variants[k], a.calls, Path(tmp)))
    print("load after: ", os.getloadavg())
    base = {j: statistics.median(x[j] for x in got["untraced"]) for j in (0, 1)}
    for k, xs in got.items():
        for j, call in enumerate(("Iprobe (nothing there)", "Test (pending)")):
            v = [x[j] for x in xs]
            med = statistics.median(v)
            add = "" if k == "untraced" else f"  added {med - base[j]:+.0f} ns"
            print(f"{k:9s} {call:23s} {med:7.0f} ns/call ({min(v):.0f}-{max(v):.0f}){add}")


if __name__ == "__main__":
    main()
