"""Export and import throughput: trace rows per second for each interop format and size.

A synthetic trace (written with ``hindsight.trace.write.write_trace``) of 8 ranks whose every
iteration is a region, an Irecv and an Isend to the neighbours, a Waitall of both (two rows), a
Sendrecv (two rows) and an Allreduce: eight rows of the kinds the exporters treat differently.
``import-otf2`` imports the trace's OTF2 export, ``import-goal`` its GOAL export (rows: the
imported trace's), as ``hindsight import`` does: converting, then checking the written trace and
caching its prepared form (``hindsight.interop.cli.import_checked``; the check's share and
the conversion's rate alone are printed too). Each format's conversion runs in a fresh process
(so that one case's memory does not weigh on the next), started as every CLI command starts
(``hindsight.cli.main``: glibc keeps freed memory, numba skips its BLAS check); the time covers
what ``hindsight export``/``import`` do after reading the trace's manifest: importing the
format's modules (numba's cache of compiled functions loaded on first call), reading the rows,
converting, writing the output. Rows/s are given by wall-clock time and by the process's CPU
time (which another process on a shared machine takes less of).

    .venv/bin/python benchmarks/interop_speed.py                       # 1e5, 1e6, 4e6 rows
    .venv/bin/python benchmarks/interop_speed.py --rows 100000 --formats perfetto pipit
    .venv/bin/python benchmarks/interop_speed.py --revision HEAD~3 --repeat 3

``--revision REV`` runs the same cases with the code of git revision REV (checked out in a
temporary ``git worktree``), alternating old and new (A B A B ...), and prints the medians, the
min/max and the ratio new/old in rows/s. Each case runs once untimed first, per code (numba
compiles what its cache lacks then). It prints the load average and the machine's yardstick
(``yardstick.py``) before and after, because the machine may be shared and its speed differs
from day to day: compare absolute rates of different days by the yardstick.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
from yardstick import line as yardstick_line  # noqa: E402
FORMATS = ("perfetto", "pipit", "otf2", "goal", "import-otf2", "import-goal")
ROWS_PER_ITER = 8


def synthetic_columns(nranks: int, iters: int) -> list[dict[str, np.ndarray]]:
    """Per-rank columns of the benchmark's trace (see the module docstring); lock-step times, so
    that every receive ends after its message was sent."""
    from hindsight import trace as tf

    k = ROWS_PER_ITER
    n = k * iters
    it = np.arange(iters, dtype=np.int64)
    period = 17000
    t = it * period
    a = t + 10000                       # the end of the iteration's region
    spans = [(t, a), (a, a + 100), (a + 100, a + 400), (a + 400, a + 3000), (a + 400, a + 3000),
             (a + 3000, a + 5000), (a + 3000, a + 5000), (a + 5000, a + 7000)]
    ops = ["region", "Irecv", "Isend", "Waitall", "Waitall", "Sendrecv_send", "Sendrecv_recv",
           "Allreduce"]
    out = []
    for r in range(nranks):
        right, left = (r + 1) % nranks, (r - 1) % nranks
        c = {"op": np.zeros(n, np.int8), "t_start": np.zeros(n, np.int64),
             "t_end": np.zeros(n, np.int64), "cpu_ns": np.full(n, -1, np.int64),
             "peer": np.full(n, -1, np.int64), "tag": np.full(n, -1, np.int64),
             "comm": np.zeros(n, np.int64), "nbytes": np.full(n, -1, np.int64),
             "request": np.full(n, -1, np.int64), "root": np.full(n, -1, np.int64)}
        for j, (name, (s, e)) in enumerate(zip(ops, spans)):
            c["op"][j::k] = tf.OP_CODE[name]
            c["t_start"][j::k] = s
            c["t_end"][j::k] = e
        c["cpu_ns"][0::k] = 9000
        c["nbytes"][0::k] = 1 << 20                     # the region's work size
        c["cpu_ns"][3::k] = 2500
        req = 2 * it
        c["peer"][1::k], c["tag"][1::k], c["request"][1::k] = left, 5, req
        c["peer"][2::k], c["tag"][2::k], c["nbytes"][2::k] = right, 5, 4096
        c["request"][2::k] = req + 1
        c["peer"][3::k], c["tag"][3::k], c["nbytes"][3::k] = left, 5, 4096
        c["request"][3::k] = req
        c["request"][4::k] = req + 1
        c["peer"][5::k], c["tag"][5::k], c["nbytes"][5::k] = right, 7, 1024
        c["peer"][6::k], c["tag"][6::k], c["nbytes"][6::k] = left, 7, 1024
        c["nbytes"][7::k] = 8
        region = np.full(n, -1, np.int64)
        region[0::k] = 0
        c["region"] = region
        c["region_names"] = ["work"]
        out.append(c)
    return out


def make_trace(where: Path, rows: int, nranks: int = 8) -> Path:
    from hindsight.trace.write import write_trace

    iters = max(1, rows // (nranks * ROWS_PER_ITER))
    return write_trace(where, synthetic_columns(nranks, iters), manifest={"app": "interop-bench"})


def run_case(fmt: str, trace: Path, scratch: Path) -> dict:
    """Convert ``trace`` to ``fmt`` (or import its OTF2 or GOAL export) in this process; time
    and peak memory (max RSS) of what the command does after reading the manifest: importing the
    format's modules, reading the rows, converting, writing."""
    from hindsight import trace as tf
    from hindsight.compiling import skip_blas_check
    from hindsight.system import keep_freed_memory

    # the start-up of every CLI command (hindsight.cli.main)
    keep_freed_memory()
    skip_blas_check()
    rows = sum(tf.read_manifest(trace)["events"])
    out = scratch / f"out-{fmt}"
    if fmt in ("import-otf2", "import-goal"):
        # the input is made in another process, so that this one starts as the command does
        src = scratch / f"{fmt}-{trace.name}"                  # one per trace size
        if not src.exists():
            code = ("import sys; from hindsight.interop import formats as F; "
                    "from hindsight import trace as tf; t = sys.argv[1]; tr = tf.read_trace(t);"
                    "F.EXPORTERS[sys.argv[2]].write(F.ExportJob(t, table=tr.table, "
                    "manifest=tr.manifest, nranks=tr.nranks), sys.argv[3])")
            subprocess.run([sys.executable, "-c", code, str(trace), fmt.split("-")[1], str(src)],
                           check=True)
        import hindsight.check as C

        checking = []               # the check's own share: timed around its function
        real_check = C.check_and_prepare

        def timed(*a, **kw):
            t = time.perf_counter()
            try:
                return real_check(*a, **kw)
            finally:
                checking.append(time.perf_counter() - t)

        C.check_and_prepare = timed
        t0, c0 = time.perf_counter(), time.process_time()
        from hindsight.interop import cli, formats as F

        if hasattr(cli, "import_checked"):
            cli.import_checked(fmt.split("-")[1], src, out, [])
        else:   # (a revision from before import_checked: what its command did)
            from hindsight.system import release_freed_memory

            F.IMPORTERS[fmt.split("-")[1]].read(src, out, [])
            release_freed_memory()
            C.check_and_prepare(out)
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        # the rows of the imported trace (for GOAL: Isend/Irecv, Wait, calc), not of the exported
        rows = sum(tf.read_manifest(out)["events"])
        return {"seconds": dt, "cpu_seconds": dc, "rows": rows, "check_seconds": sum(checking),
                "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    else:
        t0, c0 = time.perf_counter(), time.process_time()
        from hindsight.interop.formats import EXPORTERS, ExportJob

        if fmt == "goal":
            job = ExportJob(trace)
        elif getattr(EXPORTERS[fmt], "by_rank", False):      # (as the command: it reads ranks)
            m = tf.read_manifest(trace)
            job = ExportJob(trace, manifest=m, nranks=int(m["ranks"]))
        else:
            tr = tf.read_trace(trace)
            job = ExportJob(trace, table=tr.table, manifest=tr.manifest, nranks=tr.nranks)
        EXPORTERS[fmt].write(job, out)
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
    return {"seconds": dt, "cpu_seconds": dc, "rows": rows,
            "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _one(src: Path, fmt: str, trace: Path, scratch: Path) -> dict:
    """Run one case in a fresh interpreter on the code under ``src``."""
    scratch.mkdir(parents=True, exist_ok=True)
    for p in scratch.glob("out-*"):
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    # started as a command starts: hindsight's own settings first, where the code has them
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2]);"
            "import hindsight; getattr(hindsight, 'own_settings', lambda: None)();"
            "import interop_speed as b; from pathlib import Path;"
            "print(json.dumps(b.run_case(sys.argv[3], Path(sys.argv[4]), Path(sys.argv[5]))))")
    env = dict(os.environ, PYTHONPATH=str(src))
    res = subprocess.run([sys.executable, "-c", code, str(src), str(ROOT / "benchmarks"), fmt,
                          str(trace), str(scratch)], capture_output=True, text=True, env=env,
                         cwd=src)
    if res.returncode:
        raise SystemExit(f"{fmt} on {src} failed:\n{res.stderr}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000, 4_000_000])
    ap.add_argument("--formats", nargs="+", choices=FORMATS, default=list(FORMATS))
    ap.add_argument("--revision", help="also run git revision REV and print new/old ratios")
    ap.add_argument("--repeat", type=int, default=3, help="runs per case and code [3]")
    args = ap.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="interop-speed-"))
    sources = {"new": ROOT}
    try:
        if args.revision:
            old = tmp / "old-src"
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(old),
                            args.revision], check=True, capture_output=True)
            # byte-compiled as `make` compiles the project (where PYTHONDONTWRITEBYTECODE is
            # set, Python would compile every module of the old code at every start)
            subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", "0", *(
                str(old / d) for d in ("hindsight", "instrument", "apps", "replay", "validation",
                                       "predict") if (old / d).is_dir())],
                           check=True, capture_output=True)
            sources = {"old": old, "new": ROOT}
        print(f"load average before: {_load()}")
        print(yardstick_line("before"), flush=True)
        for rows in args.rows:
            trace = make_trace(tmp / f"trace-{rows}", rows)
            for fmt in args.formats:
                times: dict[str, list[float]] = {k: [] for k in sources}
                cpu: dict[str, list[float]] = {k: [] for k in sources}
                rss: dict[str, float] = {k: 0.0 for k in sources}
                check: dict[str, list[float]] = {k: [] for k in sources}
                n = 0
                for key, src in sources.items():
                    # untimed: numba compiles what its cache lacks (after an edit, 10-60 s)
                    _one(src, fmt, trace, tmp / f"scratch-{key}")
                for _ in range(args.repeat):
                    for key, src in sources.items():         # alternating: A B A B ...
                        r = _one(src, fmt, trace, tmp / f"scratch-{key}")
                        times[key].append(r["seconds"])
                        cpu[key].append(r.get("cpu_seconds", float("nan")))
                        rss[key] = max(rss[key], r["max_rss_mb"])
                        if "check_seconds" in r:
                            check[key].append(r["check_seconds"])
                        n = r["rows"]
                line = [f"{fmt:12s} {n:>9d} rows"]
                for key, ts in times.items():
                    med = statistics.median(ts)
                    line.append(f"{key}: {n / med:>12,.0f} rows/s (median {med:.3f} s, "
                                f"min {min(ts):.3f}, max {max(ts):.3f}; max RSS "
                                f"{rss[key]:.0f} MB; CPU time: "
                                f"{n / statistics.median(cpu[key]):,.0f} rows/s)")
                    if check[key]:
                        c = statistics.median(check[key])
                        line.append(f"  of which check and cache {c:.3f} s (the conversion "
                                    f"alone: {n / (med - c):,.0f} rows/s)")
                if "old" in times:
                    ratio = statistics.median(times["old"]) / statistics.median(times["new"])
                    line.append(f"new/old speed {ratio:.1f}x")
                print("  ".join(line), flush=True)
            shutil.rmtree(trace)
        print(f"load average after: {_load()}")
        print(yardstick_line("after"))
    finally:
        if args.revision:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                            str(tmp / "old-src")], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
