"""Hold-out evidence for `hindsight predict`.

For each case: collect traces at small sizes (P = 1 and 2), fit the cost models on them, then
predict a larger size at P = 2 that was *not* fitted and compare with a measured run of it. The
runs are made round by round (each round: every fitted configuration, then every held-out size),
so that a drift of the machine's speed over the minutes of a case falls on both.
Also synthesize every fitted P = 2 configuration and compare with its own measured trace
(in-sample: how close synthesis + replay come to the run they were fitted from).

Times compared are makespans from the trace's first event to its last (what replay predicts).
Three numbers per row: measured; the replay of the measured trace under the same network model
(the replay engine's own error, for reference); the replay of the synthesized trace (the
prediction). The last three columns repeat the comparison for a dedicated machine: block costs
fitted from CPU time (``hindsight predict --cpu-time``) against the measured trace replayed with
``--cpu-time`` (bursts scaled by their region's CPU/wall ratio), which removes the preemption
by other processes on this shared 2-core machine from both sides. Network: loggps with the calibrated shared-memory profile of this machine
(docs/calibration/shm-pickle.toml, `hindsight calibrate --api pickle`), the network the measured runs
used.

    python benchmarks/predict_holdout.py [--work DIR] [--reuse] [--repeat R] [--fit-repeat F]
                                         [--case NAME] [--set NAME=VALUE]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import replay  # noqa: E402
from hindsight import trace as tf  # noqa: E402
from predict import costmodel as C  # noqa: E402
from predict import synthesize as S  # noqa: E402
from predict.config import spec_from_manifest  # noqa: E402
from replay import models as M  # noqa: E402

PROFILE = ROOT / "docs" / "calibration" / "shm-pickle.toml"   # `calibrate --api pickle`: the apps send objects

# name: (app, paradigm, fixed flags, size flag, fitted sizes, held-out sizes)
CASES = {
    "sorting-tree": ("sorting", "tree", ["--array-size", "65536"], "--arrays", [8, 16, 32], [64, 128]),
    "sorting-pipeline": ("sorting", "pipeline", ["--array-size", "65536"], "--arrays",
                         [8, 16, 32], [64, 128]),
    "sorting-master-worker": ("sorting", "master-worker", ["--array-size", "65536",
                                                           "--block-size", "16384"], "--arrays",
                              [8, 16, 32], [64, 128]),
    "fe-tree": ("feature_extraction", "tree", ["--docs-per-task", "25"], "--docs",
                [200, 400, 800], [1600]),
    "fe-master-worker": ("feature_extraction", "master-worker", ["--docs-per-task", "25"],
                         "--docs", [200, 400, 800], [1600]),
    "components-hypercube": ("components", "hypercube", ["--graph", "gnm", "--vertices", "65536"],
                             "--edges", [65536, 131072, 262144], [524288]),
}


def collect(work: Path, app: str, paradigm: str, P: int, flags: list[str], reuse: bool,
            tag: str) -> Path:
    out = work / f"{app}-{paradigm}-{tag}-n{P}"
    if reuse and (out / tf.MANIFEST_NAME).is_file():
        return out
    cmd = [sys.executable, "-m", "hindsight.cli", "collect", app, "-n", str(P), "--paradigm",
           paradigm, "--out", str(out), "--force", "--", *flags]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"collect failed: {' '.join(cmd)}\n{r.stderr}")
    return out


def makespans(trace: Path | tf.Trace, mod, prof, cpu_time: bool = False,
              params: list[tuple[str, str]] | None = None) -> tuple[float, float]:
    prep = replay.prepare(trace, use_cache=False)
    res = replay.run(prep, mod, params or [], profile=prof, record=False, cpu_time=cpu_time)
    return prep.measured_makespan_ns / 1e9, res.makespan_ns / 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/hindsight-predict-holdout"))
    ap.add_argument("--reuse", action="store_true", help="reuse traces already collected")
    ap.add_argument("--repeat", type=int, default=1, help="measured runs per held-out size")
    ap.add_argument("--fit-repeat", type=int, default=1,
                    help="runs per fitted (P, size): more samples per point on a noisy machine")
    ap.add_argument("--case", action="append", choices=sorted(CASES), help="only these cases")
    ap.add_argument("--profile", type=Path, default=PROFILE,
                    help="network profile (default: the committed shm-pickle profile; a profile "
                         "calibrated on this machine with `hindsight calibrate --api pickle` "
                         "prices the calls at its speed)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="a loggps parameter over the profile's (e.g. ack_cells=inf: without "
                         "rule ack_cells)")
    ns = ap.parse_args()
    params = [tuple(s.split("=", 1)) for s in ns.set]
    ns.work.mkdir(parents=True, exist_ok=True)
    mod = M.get_model("loggps")
    prof = M.load_profile(ns.profile, mod)
    print(f"<!-- load average before {os.getloadavg()[0]:.2f} -->")
    print("| case | P | N | role | measured s | replay of measured s | synthesized s | "
          "error vs measured | replay of measured, CPU time s | synthesized, CPU-time fit s | "
          "error vs CPU-time replay |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in ns.case or list(CASES):
        app, paradigm, fixed, size_flag, fit_sizes, held = CASES[name]
        # Round by round, every fitted configuration and then every held-out one: the VM's
        # speed drifts over minutes, and fitting on the first minutes to predict runs made
        # later would measure the drift as the model's error.
        fit_dirs, held_dirs = [], []
        for k in range(max(ns.fit_repeat, ns.repeat)):
            fit_dirs += [collect(ns.work, app, paradigm, P, fixed + [size_flag, str(n)],
                                 ns.reuse, f"{n}" if k == 0 else f"{n}-f{k}")
                         for n in fit_sizes for P in (1, 2) if k < ns.fit_repeat]
            held_dirs += [collect(ns.work, app, paradigm, 2, fixed + [size_flag, str(n)],
                                  ns.reuse, f"{n}-r{k}") for n in held if k < ns.repeat]
        cm = C.fit_traces(fit_dirs)
        cm_cpu = C.fit_traces(fit_dirs, cpu_time=True)
        rows = [(d, "in-sample") for d in fit_dirs if tf.read_manifest(d)["ranks"] == 2]
        rows += [(d, "held out") for d in held_dirs]
        by_cfg: dict[tuple, list] = {}
        for d, role in rows:
            man = tf.read_manifest(d)
            spec = spec_from_manifest(man, str(d))
            meas, rep = makespans(d, mod, prof, params=params)
            _, rep_cpu = makespans(d, mod, prof, cpu_time=True, params=params)
            _, syn = makespans(S.trace(spec, cm.cost), mod, prof, params=params)
            _, syn_cpu = makespans(S.trace(spec, cm_cpu.cost), mod, prof, params=params)
            by_cfg.setdefault((spec.P, spec.N, role), []).append(
                (meas, rep, syn, rep_cpu, syn_cpu))
        for (P, N, role), vals in by_cfg.items():
            meas, rep, syn, rep_cpu, syn_cpu = (statistics.median(v[i] for v in vals)
                                                for i in range(5))
            err = 100 * (syn - meas) / meas
            err_cpu = 100 * (syn_cpu - rep_cpu) / rep_cpu
            runs = f" (median of {len(vals)})" if len(vals) > 1 else ""
            print(f"| {name} | {P} | {N} | {role} | {meas:.4f}{runs} | {rep:.4f} | {syn:.4f} | "
                  f"{err:+.1f} % | {rep_cpu:.4f} | {syn_cpu:.4f} | {err_cpu:+.1f} % |",
                  flush=True)
        for c, label in ((cm, "wall-time fit"), (cm_cpu, "CPU-time fit")):
            errors, warnings = c.check(0.25)
            for w in errors:
                print(f"<!-- {name}, {label}: BAD FIT extrapolated (hindsight predict would "
                      f"refuse without --accept-bad-fit): {w} -->")
            for w in warnings:
                print(f"<!-- {name}, {label}: {w} -->")

    print(f"<!-- load average after {os.getloadavg()[0]:.2f} -->")


if __name__ == "__main__":
    main()
