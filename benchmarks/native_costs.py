"""A fine C program predicted with and without the profile's costs of calls made from C.

    python benchmarks/native_costs.py [--rounds 7] [--configs 256:20000,4096:5000,65536:400]

Builds tests/programs/jacobi1d.c (a 1-D Jacobi solver: two `MPI_Sendrecv`, an 8-byte
`MPI_Allreduce` and an `MPI_Iprobe` an iteration), calibrates shared memory (`hindsight
calibrate -n 2`, whose profile has the native probe's `[native]` and `[native_shared_flag]`),
then per configuration (points a rank : iterations) runs it ``--rounds`` times traced by the PMPI
library and untraced, alternating (traced, untraced, traced, ...), and replays every traced run
under LogGPS with the profile as written (rule native_call_costs) and with those two sections
taken out (rule binding_in_bursts: the costs measured through mpi4py less mpi4py's own). Prints
per configuration the untraced median (min-max), the traced median and both predictions' median
with its error against the untraced median, and the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from instrument.native import NativeError, compiled  # noqa: E402

SOURCE = ROOT / "tests" / "programs" / "jacobi1d.c"
HINDSIGHT = [sys.executable, "-m", "hindsight.cli"]
#: the profile's sections rule native_call_costs reads
NATIVE_SECTIONS = ("native", "native_shared_flag")


def _hindsight(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*HINDSIGHT, *args], capture_output=True, text=True, cwd=ROOT)


def _without_native(profile: Path, out: Path) -> Path:
    import tomllib

    import tomli_w
    doc = tomllib.loads(profile.read_text())
    out.write_text(tomli_w.dumps({k: v for k, v in doc.items() if k not in NATIVE_SECTIONS}))
    return out


def _makespan_s(run: Path) -> float:
    return json.loads((run / "manifest.json").read_text())["makespan_ns"] / 1e9


def _predicted_s(trace: Path, profile: Path) -> float:
    r = _hindsight("replay", str(trace), "--profile", str(profile), "--json")
    if r.returncode != 0:
        raise SystemExit(f"Error: replay of {trace} failed: {r.stderr.strip()}")
    return json.loads(r.stdout)["predicted_makespan_s"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--configs", default="256:20000,4096:5000,65536:400",
                    help="POINTS:ITERATIONS,... (points a rank)")
    a = ap.parse_args()
    configs = [tuple(int(x) for x in c.split(":")) for c in a.configs.split(",")]
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="hindsight-native-costs-") as tmp:
        tmp = Path(tmp)
        try:
            exe = compiled(SOURCE, tmp, "jacobi1d", ("-O2",), "", "this benchmark")
        except NativeError as exc:
            raise SystemExit(f"Error: {exc}") from None
        prof = tmp / "shm.toml"
        r = _hindsight("calibrate", "-n", "2", "--accept-noisy", "--out", str(prof))
        if r.returncode != 0:
            raise SystemExit(f"Error: calibrate failed: {r.stderr.strip() or r.returncode}")
        quality = "noisy" if "warning: profile" in r.stderr else "ok"
        plain = _without_native(prof, tmp / "shm-without-native.toml")
        print(f"profile: {quality}; " + "; ".join(
            line.strip() for line in r.stdout.splitlines()
            if line.strip().startswith(("native", "nflags"))))
        print(f"{'points':>7} {'us/iter':>8} {'untraced ms (min-max)':>24} {'traced ms':>10} "
              f"{'native':>9} {'without':>9}")
        for points, iters in configs:
            untraced, traced, disturbed = [], [], 0
            for k in range(a.rounds):
                for kind, runs in (("traced", traced), ("untraced", untraced)):
                    out = tmp / f"{kind}-{points}-{k}"
                    flags = ["--untraced"] if kind == "untraced" else []
                    r = _hindsight("collect", "-n", "2", *flags, "--program", str(exe),
                                   "--out", str(out), "--", str(points), str(iters))
                    if r.returncode != 0:
                        raise SystemExit(f"Error: collect failed: {r.stderr.strip()}")
                    disturbed += "disturbed" in r.stderr
                    runs.append(out)
            truth = statistics.median(_makespan_s(u) for u in untraced)
            spread = [_makespan_s(u) for u in untraced]
            pred = {name: statistics.median(_predicted_s(t, p) for t in traced)
                    for name, p in (("native", prof), ("without", plain))}
            print(f"{points:>7} {truth / iters * 1e6:>8.1f} "
                  f"{truth * 1e3:>9.1f} ({min(spread) * 1e3:.1f}-{max(spread) * 1e3:.1f})"
                  f"{statistics.median(_makespan_s(t) for t in traced) * 1e3:>11.1f} "
                  + " ".join(f"{100 * (pred[n] - truth) / truth:>+8.1f}%"
                             for n in ("native", "without"))
                  + (f"   ({disturbed} runs disturbed: read under load)" if disturbed else ""))
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
