"""Per-call overhead of the PMPI tracing library (instrument/pmpi/), in ns.

    python benchmarks/native_overhead.py [--rounds 5] [--iters 200000] [--against REV]

Runs tests/programs/overhead.c on 2 ranks untraced (A) and traced (B), alternating A B A B
so that drift in the machine's state falls on both alike, and prints the median (min-max) ns
per MPI_Send to MPI_PROC_NULL and per message of a 0-byte ping-pong, and their differences
(what tracing adds to one call). With ``--against REV`` the library built from the source at git
revision REV is run too, in the same alternation (A, REV, B, A, REV, B ...), to see what a change
of the library costs a call.
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


def _build_at(rev: str, mpicc: str, tmp: Path) -> Path:
    """The library built from instrument/pmpi/hindsight_pmpi.c as it was at git revision REV."""
    src = tmp / "baseline.c"
    src.write_bytes(subprocess.run(["git", "-C", str(ROOT), "show",
                                    f"{rev}:instrument/pmpi/hindsight_pmpi.c"],
                                   capture_output=True, check=True).stdout)
    lib = tmp / "baseline.so"
    subprocess.run([mpicc, *native.CFLAGS, "-o", str(lib), str(src)], check=True)
    return lib


def _stats(values: list[float]) -> str:
    return f"{statistics.median(values):9.1f} ({min(values):.0f}-{max(values):.0f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=200000)
    ap.add_argument("--against", metavar="REV", default=None,
                    help="also run the library as it was at this git revision")
    opts = ap.parse_args()
    mpicc = native.find_mpicc()
    if mpicc is None:
        sys.exit("no mpicc: nothing to measure")
    current = native.library()
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "overhead"
        subprocess.run([mpicc, "-O2", "-o", str(exe), str(ROOT / "tests/programs/overhead.c")],
                       check=True)
        kinds = ["untraced"] + ([f"at {opts.against}"] if opts.against else []) + ["traced"]
        libs = {"traced": current}
        if opts.against:
            libs[kinds[1]] = _build_at(opts.against, mpicc, Path(tmp))
        results: dict[str, list[tuple[float, float]]] = {k: [] for k in kinds}
        for _ in range(opts.rounds):
            for kind in kinds:
                env = dict(os.environ)
                if kind != "untraced":
                    env.update(native.prepare(Path(tmp) / "trace", 2, str(exe), [str(opts.iters)]))
                    env["LD_PRELOAD"] = env["LD_PRELOAD"].replace(str(current), str(libs[kind]))
                results[kind].append(_run(exe, opts.iters, env))
    print(f"load: {os.getloadavg()[0]:.2f} (1 min)")
    print(f"{'':12} {'PROC_NULL send':>22} {'ping-pong msg':>22}   (ns per call, median (min-max) "
          f"of {opts.rounds} runs, each the median of 5 loops x {opts.iters} calls)")
    for k, runs in results.items():
        print(f"{k:12} {_stats([r[0] for r in runs]):>22} {_stats([r[1] for r in runs]):>22}")
    med = {k: (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs))
           for k, runs in results.items()}
    for k in kinds[1:]:
        print(f"{'+ ' + k:12} {med[k][0] - med['untraced'][0]:22.1f} "
              f"{med[k][1] - med['untraced'][1]:22.1f}   (median minus untraced median)")


if __name__ == "__main__":
    main()
