"""DIR/errors.csv of a validation run: one row per (cell, predictor) and per cross-network
prediction, rebuilt from the per-cell results so that it is always consistent with them."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

from hindsight.system import write_atomic

#: `network` is where the actual run and the profile come from; `trace_network` is where the
#: replayed trace was collected (equal for same-network rows, different for cross-network rows);
#: `ground_truth` says whose times `actual_s` is ("untraced" or "traced" runs), `traced_s` is the
#: traced runs' time over the same interval (same statistic), `traced_makespan_s` their makespan
#: (start barrier to the last event) and `perturbation_pct` the tracing perturbation of the
#: network's cell (median traced / median untraced - 1, in %)
ERRORS_COLUMNS = ["app", "paradigm", "ranks", "size", "network", "predictor", "actual_s",
                  "actual_sd_s", "predicted_s", "rel_error_pct", "trace_network", "ground_truth",
                  "traced_s", "traced_makespan_s", "perturbation_pct", "predicted_min_s",
                  "predicted_max_s"]


def write_errors(out: Path) -> Path:
    """Rebuild DIR/errors.csv from every DIR/cells/*.json and DIR/cross/*.json (so it is always
    consistent)."""
    rows = []
    files = sorted((out / "cells").glob("*.json")) + sorted((out / "cross").glob("*.json"))
    for f in files:
        c = json.loads(f.read_text())
        # A cell written without untraced runs measured the traced ones.
        truth = c.get("ground_truth", "traced")
        traced = c.get("traced_s", c["actual_s"] if truth == "traced" else math.nan)
        makespan = c.get("traced_makespan_s", traced)
        for p in c.get("predictions", []):
            # Each repetition predicted from its own trace: the predictions' range, not only
            # their mean (equal to it when one trace was replayed).
            reps = [v for v in p.get("per_rep_s") or [p["predicted_s"]] if not math.isnan(v)]
            lo, hi = (min(reps), max(reps)) if reps else (math.nan, math.nan)
            rows.append({"app": c["app"], "paradigm": c["paradigm"], "ranks": c["ranks"],
                         "size": c["size"], "network": c["network"], "predictor": p["predictor"],
                         "actual_s": f"{c['actual_s']:.6f}", "actual_sd_s": f"{c['actual_sd_s']:.6f}",
                         "predicted_s": f"{p['predicted_s']:.6f}",
                         "rel_error_pct": f"{p['rel_error_pct']:.3f}",
                         "trace_network": c.get("trace_network", c["network"]),
                         "ground_truth": truth, "traced_s": f"{traced:.6f}",
                         "traced_makespan_s": f"{makespan:.6f}",
                         "perturbation_pct": f"{c.get('perturbation_pct', math.nan):.3f}",
                         "predicted_min_s": f"{lo:.6f}", "predicted_max_s": f"{hi:.6f}"})
    def write(tmp: Path) -> None:
        with open(tmp, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=ERRORS_COLUMNS)
            w.writeheader()
            w.writerows(rows)

    path = out / "errors.csv"
    write_atomic(path, write)
    return path
