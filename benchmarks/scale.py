"""Scale: check, load and replay traces of 1e6, 1e7 and (with --huge) 1e8 events, in memory
and streamed; and (with --out-of-core) a trace larger than memory, streamed only.

Each trace is a 256-rank ring (compute, then Sendrecv to the right neighbour), written one rank at
a time so that writing needs memory for one rank only. Every step runs in a fresh process so that
its peak resident memory (``ru_maxrss``) is its own; the figures printed are events/s and peak
bytes per event. The streamed steps (``stream-check``, ``stream-replay``: ``trace check`` and
``replay`` with ``--window``) read the trace a window of rows per rank at a time, the window this
machine's memory gives (``replay.budget.window_for``, or ``--window``); ``export-otf2`` reads it
one rank at a time (the archive is written to a temporary folder and removed); the out-of-core
size (default 5e8 events: an in-memory replay would need about 70 GiB) runs those steps only.

    .venv/bin/python benchmarks/scale.py                     # 1e6 and 1e7 events
    .venv/bin/python benchmarks/scale.py --huge              # also 1e8 (about 10 min)
    .venv/bin/python benchmarks/scale.py --out-of-core 5e8   # and 5e8, streamed (about 30 min)
    .venv/bin/python benchmarks/scale.py --dir /tmp/hs       # keep the traces there
    .venv/bin/python benchmarks/scale.py --huge --steps export-otf2   # some steps only
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STEPS = {
    # name: code run in a fresh interpreter with `d` = trace directory; it sets `n` (events)
    "info": "from hindsight.info import trace_info; n = trace_info(d)['events']",
    "check": "from hindsight.check import check_trace; p = check_trace(d); assert not p, p[:3]; "
             "from hindsight import trace as tf; "
             "n = sum(tf.read_manifest(d)['events'])",
    "prepare": "import replay; p = replay.prepare(d, use_cache=False); st = p.stream(True); "
               "n = p.nrows",
    "replay": "import replay; p = replay.prepare(d, use_cache=False); "
              "r = replay.run(p, 'loggps', {'S': '64KiB'}, record=False); n = p.nrows; "
              "m = r.makespan_ns",
    "stream-check": "from hindsight.check import check_trace; p = check_trace(d, w); "
                    "assert not p, p[:3]; from hindsight import trace as tf; "
                    "n = sum(tf.read_manifest(d)['events'])",
    "stream-replay": "from replay.streamed import run_streamed; "
                     "r = run_streamed(d, 'loggps', {'S': '64KiB'}, window=w); n = r.events; "
                     "m = r.makespan_ns",
    # (one rank at a time: hindsight.interop.otf2_export)
    "export-otf2": "import tempfile; from hindsight.interop.otf2_export import write_otf2\n"
                   "with tempfile.TemporaryDirectory(prefix='scale-otf2-') as o:\n"
                   "    n = write_otf2(d, o + '/a')[1]",
}
#: the steps that hold the whole trace in memory (not run at the out-of-core size)
IN_MEMORY = ("check", "prepare", "replay")

CHILD = """
import json, resource, sys, time
sys.path.insert(0, {root!r})
d = {d!r}
w = {w!r}
t = time.perf_counter()
{code}
dt = time.perf_counter() - t
print(json.dumps(dict(n=int(n), seconds=dt, makespan=globals().get("m"),
                      peak=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)))
"""


def write_ring(d: Path, events: int, P: int = 256) -> None:
    from tests.synthetic import ring_rank_columns, write_trace

    iters = events // (2 * P)

    class Lazy:  # write_trace walks it rank by rank: one rank's columns in memory at a time
        def __len__(self):
            return P

        def __getitem__(self, r):
            if r >= P:
                raise IndexError(r)
            return ring_rank_columns(r, P, iters)

    write_trace(d, Lazy())


def run_step(d: Path, step: str, window: int) -> dict:
    code = CHILD.format(root=str(ROOT), d=str(d), w=window, code=STEPS[step])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--huge", action="store_true", help="also 1e8 events")
    ap.add_argument("--out-of-core", type=float, default=None, metavar="EVENTS",
                    help="also a trace of EVENTS events (5e8: larger than this machine's "
                         "memory), streamed steps only")
    ap.add_argument("--window", type=int, default=None,
                    help="rows per rank of a streamed window (default: what memory gives)")
    ap.add_argument("--dir", type=Path, default=None, help="where to write the traces")
    ap.add_argument("--steps", nargs="+", choices=list(STEPS), default=list(STEPS),
                    help="the steps to run (default: all)")
    args = ap.parse_args()
    from hindsight.system import available_memory
    from replay.budget import window_for
    window = args.window or window_for(256, available_memory())
    print(f"streamed window: {window} rows per rank; {available_memory() / 2**30:.1f} GiB "
          f"available; load {os.getloadavg()[0]:.2f}")
    sizes = [10**6, 10**7] + ([10**8] if args.huge else [])
    huge = int(args.out_of_core) if args.out_of_core else None
    if huge:
        sizes.append(huge)
    base = args.dir or Path(tempfile.mkdtemp(prefix="hindsight-scale-"))
    print(f"{'events':>12} {'step':>13} {'seconds':>9} {'M events/s':>11} {'peak GiB':>9} "
          f"{'B/event':>8}")
    for n in sizes:
        d = base / f"ring-{n}"
        if not (d / "manifest.json").is_file():
            t = time.perf_counter()
            write_ring(d, n)
            size = sum(p.stat().st_size for p in d.glob("rank-*.parquet"))
            print(f"{n:>12,} {'write':>13} {time.perf_counter() - t:9.1f}   "
                  f"({size / n:.1f} bytes/event on disk)", flush=True)
        makespans = {}
        for step in args.steps:
            if n == huge and step in IN_MEMORY:
                continue
            r = run_step(d, step, window)
            if r.get("makespan") is not None:
                makespans[step] = r["makespan"]
            if "error" in r:
                print(f"{n:>12,} {step:>13}  FAILED: {r['error']}", flush=True)
                continue
            print(f"{r['n']:>12,} {step:>13} {r['seconds']:9.2f} "
                  f"{r['n'] / r['seconds'] / 1e6:11.2f} {r['peak'] / 2**30:9.2f} "
                  f"{r['peak'] / r['n']:8.1f}", flush=True)
        if len(makespans) == 2:
            same = makespans["replay"] == makespans["stream-replay"]
            print(f"{'':>12} streamed makespan {makespans['stream-replay']:.0f} ns, in memory "
                  f"{makespans['replay']:.0f} ns: {'identical' if same else 'DIFFERENT'}")
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
