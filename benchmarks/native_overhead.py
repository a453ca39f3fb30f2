"""Per-call overhead of the PMPI tracing library (instrument/pmpi/), in ns.

    python benchmarks/native_overhead.py [--rounds 5] [--iters 200000]

Runs tests/programs/overhead.c on 2 ranks untraced (A) and traced (B), alternating A B A B
so that drift in the machine's state falls on both alike, and prints the median ns per
MPI_Send to MPI_PROC_NULL and per message of a 0-byte ping-pong, and their differences (what
tracing adds to one call).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from instrument import native


def _run(exe: Path, iters: int, env: dict) -> tuple[float, float]:
    cmd = native.command(2, str(exe), [str(iters)])
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=True)
    fields = out.stdout.split()
    return float(fields[1]), float(fields[3])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=200000)
    opts = ap.parse_args()
    mpicc = native.find_mpicc()
    if mpicc is None:
        sys.exit("no mpicc: nothing to measure")
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "overhead"
        subprocess.run([mpicc, "-O2", "-o", str(exe), str(ROOT / "tests/programs/overhead.c")],
                       check=True)
        results: dict[str, list[tuple[float, float]]] = {"untraced": [], "traced": []}
        for _ in range(opts.rounds):
            results["untraced"].append(_run(exe, opts.iters, dict(os.environ)))
            env = dict(os.environ)
            env.update(native.prepare(Path(tmp) / "trace", 2, str(exe), [str(opts.iters)]))
            results["traced"].append(_run(exe, opts.iters, env))
    med = {k: (statistics.median(v[0] for v in runs), statistics.median(v[1] for v in runs))
           for k, runs in results.items()}
    print(f"{'':10} {'PROC_NULL send':>15} {'ping-pong msg':>15}   (ns per call, median of "
          f"{opts.rounds} runs x 5 loops x {opts.iters} calls)")
    for k, (a, b) in med.items():
        print(f"{k:10} {a:15.1f} {b:15.1f}")
    print(f"{'overhead':10} {med['traced'][0] - med['untraced'][0]:15.1f} "
          f"{med['traced'][1] - med['untraced'][1]:15.1f}")


if __name__ == "__main__":
    main()
