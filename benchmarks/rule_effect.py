"""What a change of profile does to the predictions of runs already measured.

Re-predicts the stored runs of a `hindsight validate` output directory (its cells/ and cross/
results, the traces they replayed and their ground truth) with two sets of profiles, A and B,
one per network, exactly as `validate` predicts them (``validation.matrix.replay_predictions``,
the lead-in and tail added alike), and prints each cell's error under both and the mean
absolute errors on the traced network and across networks, split by recorder. The runs are not
repeated, so the difference is the profiles' alone (a new rule's section, a re-calibrated
parameter), not the machine's mood.

    python benchmarks/rule_effect.py RUNS --a shm=docs/calibration/shm.toml \\
        --a tcp=docs/calibration/tcp.toml --b shm=new-shm.toml --b tcp=new-tcp.toml

Only the LogGPS replay is re-predicted (``--model`` to choose another). A spec with
``replay_rep = "all"`` is re-predicted as validate predicts it: every run from its own trace, the
median prediction (the mean where the spec's ``actual`` is the mean).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hindsight import trace as tf  # noqa: E402
from validation.matrix import add_tail, replay_predictions  # noqa: E402
from validation.profiles import read_profile  # noqa: E402


def _profiles(items: list[str], flag: str) -> dict[str, Path]:
    out = {}
    for item in items:
        net, _, path = item.partition("=")
        if not path or not Path(path).is_file():
            sys.exit(f"Error: {flag} {item}: expected NETWORK=PROFILE.toml, an existing file")
        out[net] = Path(path)
    return out


def _predict(runs: Path, trace: str, network: str, trace_network: str,
             profiles: dict[str, Path], model: str, placed_like: dict | None,
             to_end: bool) -> float:
    m = tf.read_manifest(runs / trace)
    spec = SimpleNamespace(replay=[model], replay_set={})
    path = profiles[network]
    source = read_profile(profiles[trace_network]) if trace_network != network else None
    preds = replay_predictions(runs / trace, m, read_profile(path), spec, path,
                               placed_like=placed_like, trace_profile=source)
    return add_tail(preds, m, to_end)[0]["predicted_s"]


def _aggregate(cell: dict):
    """How validate combines the predictions of several runs of a cell: as its spec's
    ``actual`` combines the runs (median or mean)."""
    actual = (cell.get("spec_inputs") or {}).get("actual", "median")
    return (lambda xs: statistics.fmean(list(xs))) if actual == "mean" else \
        (lambda xs: statistics.median(list(xs)))


def _err(pred: float, actual: float) -> float:
    return (pred - actual) / actual * 100 if actual > 0 and not math.isnan(pred) else math.nan


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", type=Path, help="a `hindsight validate --out` directory")
    ap.add_argument("--a", action="append", default=[], metavar="NET=PROFILE", required=True)
    ap.add_argument("--b", action="append", default=[], metavar="NET=PROFILE", required=True)
    ap.add_argument("--model", default="loggps")
    args = ap.parse_args(argv)
    A, B = _profiles(args.a, "--a"), _profiles(args.b, "--b")
    cells = sorted((args.runs / "cells").glob("*.json"))
    if not cells:
        sys.exit(f"Error: {args.runs}: no cells/*.json (not a validate output directory?)")
    rows = []
    for path in cells:
        c = json.loads(path.read_text())
        if c.get("baseline") or c["network"] not in A or c["network"] not in B:
            continue
        # replay_rep "all": every run predicted from its own trace, the median prediction
        traces = c["traces"] if (c.get("spec_inputs") or {}).get("replay_rep") == "all" \
            else [c["traces"][c["replayed_rep"]]]
        to_end = c.get("ground_truth", "traced") == "untraced"
        agg = _aggregate(c)
        errs = [_err(agg(
            _predict(args.runs, t, c["network"], c["network"], P, args.model, None, to_end)
            for t in traces), c["actual_s"]) for P in (A, B)]
        rows.append(("same", path.stem, c["actual_s"], *errs))
    for path in sorted((args.runs / "cross").glob("*.json")):
        c = json.loads(path.read_text())
        net, src = c["network"], c["trace_network"]
        if not all(n in P for n in (net, src) for P in (A, B)):
            continue
        other = json.loads((args.runs / c["actual_cell"]).read_text())
        target = tf.read_manifest(args.runs / other["traces"][other["replayed_rep"]])
        to_end = c.get("ground_truth", "traced") == "untraced"
        traces = c["trace"] if isinstance(c["trace"], list) else [c["trace"]]
        agg = _aggregate(other)
        errs = [_err(agg(_predict(args.runs, t, net, src, P, args.model, target, to_end)
                         for t in traces), c["actual_s"]) for P in (A, B)]
        rows.append(("cross", path.stem, c["actual_s"], *errs))
    print(f"{'kind':6s} {'cell':44s} {'actual s':>9s} {'A %':>8s} {'B %':>8s}")
    for kind, name, act, ea, eb in rows:
        print(f"{kind:6s} {name:44s} {act:9.4f} {ea:+8.2f} {eb:+8.2f}")
    print()
    for kind in ("same", "cross"):
        for label, keep in (("all", lambda n: True), ("library", lambda n: "-lib" in n),
                            ("python", lambda n: "-lib" not in n)):
            sel = [r for r in rows if r[0] == kind and keep(r[1])]
            if not sel:
                continue
            ma = statistics.fmean(abs(r[3]) for r in sel)
            mb = statistics.fmean(abs(r[4]) for r in sel)
            wa = max(abs(r[3]) for r in sel)
            wb = max(abs(r[4]) for r in sel)
            print(f"{kind:6s} {label:8s} {len(sel):3d} cells: mean |error| A {ma:6.2f} % "
                  f"(worst {wa:5.1f})  B {mb:6.2f} % (worst {wb:5.1f})")


if __name__ == "__main__":
    main()
