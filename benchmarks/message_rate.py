"""Message rate under tracing: untraced, recorded in Python, recorded by the PMPI library.

    python benchmarks/message_rate.py [--rounds 5] [--blocks 7] [--windows 20]

Runs benchmarks/osu_bw.py (an osu_bw-style windowed `Isend`/`Irecv` test, 32 B to 4 KiB) on 2
ranks, each round three runs one after the other in a rotating order, so that a drift of the
machine's speed falls on all three alike:

    untraced:  mpiexec -n 2 python benchmarks/osu_bw.py                 (the truth)
    python:    hindsight collect -n 2 --program benchmarks/osu_bw.py
    pmpi:      hindsight collect -n 2 --program benchmarks/osu_bw.py --recorder pmpi

and prints, per message size, each variant's median bandwidth [min, max] over the rounds and the
median of the per-round ratios traced / untraced (issue #23's target: at least 0.8), with the
load (1-minute load average, hypervisor steal) over the benchmark; a figure taken while the
machine was not quiet is labelled so.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "benchmarks" / "osu_bw.py"
VARIANTS = ("untraced", "python", "pmpi")
TARGET = 0.8
sys.path.insert(0, str(ROOT))

from hindsight import conditions  # noqa: E402  (standard library only)
from hindsight.collect import find_mpiexec, launch_env  # noqa: E402

_BW = re.compile(r"^bw (\d+) ([0-9.]+)$", re.M)


def run(variant: str, args: list[str], out: Path) -> dict[int, float]:
    """One run of the program; its bandwidth per size in MB/s."""
    if variant == "untraced":
        cmd = [find_mpiexec(), "-n", "2", sys.executable, str(PROGRAM), *args]
    else:
        cmd = [sys.executable, "-m", "hindsight.cli", "collect", "-n", "2", "--program",
               str(PROGRAM), "--out", str(out), "--force", "--recorder", variant, "--", *args]
    done = subprocess.run(cmd, env=launch_env(2), capture_output=True, text=True, cwd=ROOT,
                          timeout=600)
    if done.returncode != 0:
        tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-3:])
        raise SystemExit(f"message_rate: {variant} run failed (exit {done.returncode}): {tail}")
    return {int(s): float(v) for s, v in _BW.findall(done.stdout)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--blocks", type=int, default=7, help="timed blocks per size in a run")
    p.add_argument("--windows", type=int, default=20, help="windows of 64 messages per block")
    ns = p.parse_args(argv)
    if ns.rounds < 1 or ns.blocks < 1 or ns.windows < 1:
        p.error("--rounds, --blocks and --windows must be positive")
    args = [str(ns.blocks), str(ns.windows)]
    results: dict[str, list[dict[int, float]]] = {v: [] for v in VARIANTS}
    before = conditions.snapshot()
    with tempfile.TemporaryDirectory(prefix="hindsight-rate-") as tmp:
        for k in range(ns.rounds):
            order = VARIANTS[k % 3:] + VARIANTS[:k % 3]
            for v in order:
                results[v].append(run(v, args, Path(tmp) / v))
            print(f"round {k + 1}/{ns.rounds} done", file=sys.stderr, flush=True)
    cond = conditions.between(before, conditions.snapshot())
    problems = conditions.load_problems(cond)
    print(f"message rate, osu_bw style (window 64, {ns.blocks} blocks of {ns.windows} windows per "
          f"size), 2 ranks, {ns.rounds} rounds of 3 runs in rotating order")
    print(f"conditions: {conditions.describe(cond)}"
          + ("; TAKEN UNDER LOAD: " + "; ".join(problems) if problems else ""))
    print(f"{'size':>6}  {'untraced MB/s':>22}  {'python / untraced':>24}  "
          f"{'pmpi / untraced':>24}")
    for size in sorted(results["untraced"][0]):
        base = [r[size] for r in results["untraced"]]
        cols = [f"{statistics.median(base):8.1f} [{min(base):.1f}, {max(base):.1f}]"]
        for v in ("python", "pmpi"):
            ratios = [t[size] / u[size] for t, u in zip(results[v], results["untraced"])]
            ok = "ok" if statistics.median(ratios) >= TARGET else "MISS"
            cols.append(f"{statistics.median(ratios):.2f} [{min(ratios):.2f}, "
                        f"{max(ratios):.2f}] {ok:>4}")
        print(f"{size:>6}  {cols[0]:>22}  {cols[1]:>24}  {cols[2]:>24}")
    print(f"ratio: median [min, max] of the per-round bandwidth ratios; target >= {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
