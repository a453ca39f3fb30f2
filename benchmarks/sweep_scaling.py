"""Sweep scaling: configurations per second of `hindsight sweep` per executor and worker count.

One sweep (the same trace, model and grid) runs as:

* ``local w=N``: ``--executor local --workers N`` (N threads of one process);
* ``mpi host K``: ``mpiexec -n K+1 python -m mpi4py.futures -m hindsight.cli sweep ...
  --executor mpi``, every rank on this host (MPI over shared memory);
* ``mpi testbed K``: the same job with its ranks spread over the nodes of a testbed
  (docs/testbed.md) by the launch `hindsight collect --testbed` uses
  (`hindsight.collect.testbed_launch`, cyclic placement: rank r on node r mod N), so MPI runs
  on TCP through the nodes' veth links. Needs root; the testbed is brought up and always taken
  down here.

Rank 0 of an MPI job reads the trace and hands out configurations; K ranks are workers. The
variants alternate within each round (the order rotates every round); each figure is the median
of the rounds with min and max. The time is the whole command's wall time (start-up, reading the
trace, sending it to the workers, the sweep, writing the CSV), as a user waits for it. Every
run's CSV must equal the local executor's byte for byte. Each round also runs every variant on
a grid of one configuration: its time is the variant's fixed cost F (start-up, reading and
sending the trace), and (N - 1) / (T - F), with the medians of T and F, is the rate of the sweep
itself. A variant that runs more processes (or
threads) than the machine has cores is labelled oversubscribed.

    .venv/bin/python benchmarks/sweep_scaling.py                      # 3 rounds, K = 1..4
    .venv/bin/python benchmarks/sweep_scaling.py --rounds 5 --no-testbed
    .venv/bin/python benchmarks/sweep_scaling.py --trace TRACE --vary L=1us..50us:log:40
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hindsight import conditions  # noqa: E402
from hindsight.collect import find_mpiexec, launch_env, testbed_launch  # noqa: E402
from hindsight.system import usable_cores  # noqa: E402

TESTBED = "hssweep"
DEFAULT_VARY = ["L=1us..50us:log:40", "G=0.01ns..10ns:log:10"]


def make_trace(d: Path, nranks: int, iters: int) -> None:
    """A synthetic ring (compute, then Sendrecv to the right neighbour), as benchmarks/scale.py."""
    from tests.synthetic import ring_rank_columns, write_trace

    write_trace(d, [ring_rank_columns(r, nranks, iters) for r in range(nranks)])


def sweep_args(trace: Path, vary: list[str], out: Path) -> list[str]:
    args = ["-m", "hindsight.cli", "sweep", str(trace), "--model", "loggps", "--out", str(out),
            "--force", "--quiet"]
    for v in vary:
        args += ["--vary", v]
    return args


def variant_command(kind: str, n: int, trace: Path, vary: list[str], out: Path,
                    testbed: str) -> tuple[list[str], dict, dict | None]:
    """(command, environment, testbed state or None) of one variant."""
    py = sys.executable
    if kind == "local":
        return ([py] + sweep_args(trace, vary, out) + ["--executor", "local", "--workers", str(n)],
                launch_env(1), None)
    nprocs = n + 1                       # rank 0 + n workers
    cmd = [find_mpiexec(), "-n", str(nprocs), py, "-m", "mpi4py.futures"] + \
        sweep_args(trace, vary, out) + ["--executor", "mpi"]
    if kind == "host":
        return cmd, launch_env(nprocs), None
    cmd, env, state, _ = testbed_launch(cmd, launch_env(nprocs, "tcp"), nprocs, testbed,
                                        placement="cyclic")
    return cmd, env, state


def run_once(kind: str, n: int, trace: Path, vary: list[str], out: Path, testbed: str) -> dict:
    from hindsight import testbed as tb

    cmd, env, state = variant_command(kind, n, trace, vary, out, testbed)
    out.unlink(missing_ok=True)
    before_bytes = tb.counters(state) if state else None
    before = conditions.snapshot()
    t = time.perf_counter()
    res = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    seconds = time.perf_counter() - t
    cond = conditions.between(before, conditions.snapshot())
    if res.returncode != 0 or "Traceback" in res.stderr:
        raise SystemExit(f"{kind} {n} failed (exit {res.returncode}):\n{res.stderr[-3000:]}")
    row = {"seconds": seconds, "conditions": cond, "problems": conditions.load_problems(cond)}
    if state:
        # Evidence that the job's MPI traffic crossed the nodes' veth links.
        row["veth_bytes"] = tb.counters_delta(before_bytes, tb.counters(state))
    return row


def label(kind: str, n: int) -> str:
    return f"local w={n}" if kind == "local" else f"mpi {kind} K={n}"


def busy(kind: str, n: int) -> int:
    """Processes (or threads) the variant keeps running: rank 0 + K workers for MPI."""
    return n if kind == "local" else n + 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", type=Path, help="a trace to sweep (default: a synthetic ring)")
    ap.add_argument("--ranks", type=int, default=64, help="ranks of the synthetic ring")
    ap.add_argument("--iters", type=int, default=4000, help="iterations of the synthetic ring")
    ap.add_argument("--vary", action="append", help=f"sweep axis (default {DEFAULT_VARY})")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", default="1,2,3,4", help="MPI worker counts K")
    ap.add_argument("--no-testbed", action="store_true", help="skip the testbed variants")
    ap.add_argument("--rate", default="10gbit", help="testbed link rate")
    ap.add_argument("--json", type=Path, help="write every run's figures here")
    args = ap.parse_args()
    vary = args.vary or DEFAULT_VARY
    # the first value of the first axis alone: one configuration, the variant's fixed cost
    one = [vary[0].split("=", 1)[0] + "=" + vary[0].split("=", 1)[1].split("..")[0].split(",")[0]
           .split(":")[0]]
    ks = [int(k) for k in args.workers.split(",")]
    cores = usable_cores()

    from hindsight import testbed as tb
    testbed_ok, why_not = not args.no_testbed, "--no-testbed"
    if testbed_ok and os.geteuid() != 0:
        testbed_ok, why_not = False, "not root (the testbed needs network namespaces)"

    with tempfile.TemporaryDirectory(prefix="hs-sweep-") as tmp:
        tmp = Path(tmp)
        trace = args.trace
        if trace is None:
            trace = tmp / "ring"
            make_trace(trace, args.ranks, args.iters)
        variants = [("local", 1), ("local", cores)] + [("host", k) for k in ks]
        up = False
        try:
            if testbed_ok:
                tb.down(TESTBED)                 # leftovers of an interrupted earlier run
                tb.up(TESTBED, nodes=2, rate=args.rate)
                up = True
                variants += [("testbed", k) for k in ks]
            else:
                print(f"testbed variants skipped: {why_not}")
            ref = tmp / "ref.csv"
            # Warm-up (not timed): the prepared-trace cache and the compiled kernel on disk.
            run_once("local", 1, trace, vary, ref, TESTBED)
            ncfg = sum(1 for _ in ref.open()) - 1
            print(f"trace {trace}: {ncfg} configurations per sweep, {cores} cores, "
                  f"{args.rounds} rounds of {len(variants)} variants")
            total_before = conditions.snapshot()
            runs: dict[tuple[str, int], list[dict]] = {v: [] for v in variants}
            for rnd in range(args.rounds):
                order = variants[rnd % len(variants):] + variants[:rnd % len(variants)]
                for kind, n in order:
                    out = tmp / f"{kind}{n}.csv"
                    row = run_once(kind, n, trace, vary, out, TESTBED)
                    row["csv_equal"] = out.read_bytes() == ref.read_bytes()
                    row["fixed_seconds"] = run_once(kind, n, trace, one, tmp / "one.csv",
                                                    TESTBED)["seconds"]
                    runs[(kind, n)].append(row)
                    print(f"  round {rnd + 1} {label(kind, n):16s} {row['seconds']:6.2f} s "
                          f"(1 configuration {row['fixed_seconds']:5.2f} s)  "
                          f"{conditions.describe(row['conditions'])}"
                          + ("" if row["csv_equal"] else "  CSV DIFFERS"), flush=True)
            total = conditions.between(total_before, conditions.snapshot())
        finally:
            if up:
                tb.down(TESTBED)
    report(runs, variants, ncfg, cores, total, args.json)


def report(runs: dict, variants: list, ncfg: int, cores: int, total: dict,
           json_path: Path | None) -> None:
    print(f"\n{ncfg} configurations per sweep; cfg/s = configurations / wall time of the command, "
          "median (min-max) of the rounds; speed-up vs K=1 of the same placement (medians)")
    print("| variant | processes | cfg/s | speed-up | fixed cost F | sweep cfg/s without F | "
          "speed-up | CSV = local |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    med, net = {}, {}
    for v in variants:
        med[v] = statistics.median(ncfg / r["seconds"] for r in runs[v])
        t = statistics.median(r["seconds"] for r in runs[v])
        f = statistics.median(r["fixed_seconds"] for r in runs[v])
        net[v] = (ncfg - 1) / (t - f) if t > f else float("nan")
    for kind, n in variants:
        v = (kind, n)
        rates = [ncfg / r["seconds"] for r in runs[v]]
        fixed = [r["fixed_seconds"] for r in runs[v]]
        base = (kind, 1)
        over = " (oversubscribed)" if busy(kind, n) > cores else ""
        what = "threads" if kind == "local" else "ranks"
        print(f"| {label(kind, n)} | {busy(kind, n)} {what}{over} | {med[v]:.1f} "
              f"({min(rates):.1f}-{max(rates):.1f}) | {med[v] / med[base]:.2f} | "
              f"{statistics.median(fixed):.2f} s ({min(fixed):.2f}-{max(fixed):.2f}) | "
              f"{net[v]:.1f} | {net[v] / net[base]:.2f} | "
              f"{'yes' if all(r['csv_equal'] for r in runs[v]) else 'NO'} |")
    problems = sorted({p for rs in runs.values() for r in rs for p in r["problems"]})
    print(f"\nconditions over all runs: {conditions.describe(total)}")
    print("load problems: " + ("; ".join(problems) if problems else "none"))
    veth = [r["veth_bytes"] for (k, _), rs in runs.items() if k == "testbed" for r in rs]
    if veth:
        tx = [sum(c["tx"] for c in v.values()) for v in veth]
        print(f"testbed runs: {min(tx) / 1e6:.1f}-{max(tx) / 1e6:.1f} MB sent over the nodes' "
              "veth links per run")
    if json_path:
        json_path.write_text(json.dumps(
            {"configurations": ncfg, "cores": cores, "conditions": total,
             "runs": {label(*v): runs[v] for v in variants}}, indent=1))
    if not all(r["csv_equal"] for rs in runs.values() for r in rs):
        raise SystemExit("a variant's CSV differs from the local executor's")


if __name__ == "__main__":
    main()
