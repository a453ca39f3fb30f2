"""Per-app pipeline balance (paper 000 §III-A) and a PP vs master-worker vs tree comparison.

For each application, runs it traced on P ranks under each reduction paradigm and prints, from
the trace: mean T_comp (region ``task``), mean and max T_merge (region ``merge``), message sizes
(bytes of point-to-point sends with a payload) and the mean time spent in ``Recv`` (an upper
bound on T_comm, since it includes waiting for the sender); and, untraced, the wall time of the
parallel phase as printed by the app, against the P = 1 run (T_seq). The pipeline is balanced
when T_merge and T_comm are bounded by T_comp.

    .venv/bin/python benchmarks/apps_balance.py [-n 4] [--apps sorting,components,feature_extraction]
"""
from __future__ import annotations

import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

import pandas as pd
import pyarrow.parquet as pq

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.dirname(sys.executable)
ARGS = {
    "sorting": ["--arrays", "32", "--array-size", "65536"],
    "components": ["--graph", "rmat", "--scale", "15", "--edges-per-task", "16384"],
    "feature_extraction": ["--docs", "2000", "--docs-per-task", "25"],
}


def run(app: str, nprocs: int, paradigm: str, trace: str | None) -> tuple[float, str]:
    cmd = [os.path.join(BIN, "mpiexec"), "-n", str(nprocs), sys.executable, "-m", f"apps.{app}",
           "--paradigm", paradigm, *ARGS[app]]
    if trace:
        cmd += ["--trace", trace]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    if r.returncode:
        raise SystemExit(f"{app} {paradigm} P={nprocs} failed:\n{r.stderr}")
    m = re.search(r", ([0-9.]+) s: verified", r.stderr)
    return float(m.group(1)), r.stderr.strip().splitlines()[-1]


def balance(trace: str) -> dict[str, float]:
    t = pd.concat([pq.read_table(f).to_pandas() for f in sorted(glob.glob(f"{trace}/rank-*.parquet"))])
    reg = t[t.op == "region"].assign(ms=lambda d: (d.t_end - d.t_start) / 1e6)
    sends = t[t.op.isin(["Send", "Isend"]) & (t.nbytes > 0)]
    recvs = t[t.op == "Recv"].assign(ms=lambda d: (d.t_end - d.t_start) / 1e6)
    out = {"T_comp ms": reg[reg.region == "task"].ms.mean(),
           "T_merge ms": reg[reg.region == "merge"].ms.mean(),
           "T_merge max": reg[reg.region == "merge"].ms.max(),
           "msgs": len(sends), "msg KiB mean": sends.nbytes.mean() / 1024,
           "msg KiB max": sends.nbytes.max() / 1024,
           "Recv ms mean": recvs.ms.mean()}
    return {k: round(float(v), 2) for k, v in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=4)
    ap.add_argument("--apps", default="sorting,components,feature_extraction")
    ap.add_argument("--repeat", type=int, default=3, help="untraced timing repetitions (min)")
    a = ap.parse_args()
    rows = []
    for app in a.apps.split(","):
        t_seq = min(run(app, 1, "pipeline", None)[0] for _ in range(a.repeat))
        for paradigm in ("pipeline", "master-worker", "tree"):
            with tempfile.TemporaryDirectory() as d:
                run(app, a.n, paradigm, os.path.join(d, "t"))
                b = balance(os.path.join(d, "t"))
            wall = min(run(app, a.n, paradigm, None)[0] for _ in range(a.repeat))
            rows.append({"app": app, "paradigm": paradigm, "P": a.n, "T_seq s": round(t_seq, 3),
                         "T_par s": round(wall, 3), "speedup": round(t_seq / wall, 2), **b})
            print(rows[-1], flush=True)
    print(pd.DataFrame(rows).to_string(index=False))


if __name__ == "__main__":
    main()
