"""`hindsight report`: Markdown and a self-contained HTML page (images embedded as base64) from
a validation directory, with the papers' table layout and plots."""

from __future__ import annotations

import base64
import html
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
from hindsight.errors import DataError

TARGET_MEAN, TARGET_CELL = 5.0, 15.0
PAPERS = "paper 000: 11.5 % (feature extraction), 15.8 % (sorting); paper 002: 8.8 %; " \
         "paper 003: under 6 % in most cells; paper 004: 3-10 %"


class ReportError(DataError, ValueError):
    """Missing or unreadable validation directory; one readable line."""


def _load(vdir: Path) -> tuple[pd.DataFrame, list[dict]]:
    vdir = Path(vdir)
    if not (vdir / "errors.csv").is_file():
        raise ReportError(f"{vdir}: no errors.csv (run `hindsight validate --out {vdir}` first)")
    err = pd.read_csv(vdir / "errors.csv")
    cells = [json.loads(f.read_text()) for f in sorted((vdir / "cells").glob("*.json"))]
    if err.empty:
        raise ReportError(f"{vdir}: errors.csv has no rows yet")
    # an errors.csv without the ground-truth columns measured the traced runs only
    if "ground_truth" not in err.columns:
        err = err.assign(ground_truth="traced", traced_s=err["actual_s"], perturbation_pct=math.nan)
    if "predicted_min_s" not in err.columns:
        err = err.assign(predicted_min_s=err["predicted_s"], predicted_max_s=err["predicted_s"])
    return err, cells


TARGET_CROSS = 10.0     # cross-network mean |error| per model


def split_cross(err: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(same-network rows, cross-network rows); an errors.csv without the `trace_network`
    column has only same-network rows."""
    if "trace_network" not in err.columns:
        return err, err.iloc[0:0].assign(trace_network=[])
    tn = err["trace_network"].fillna(err["network"])
    cross = tn != err["network"]
    return err[~cross].drop(columns="trace_network"), err[cross].assign(trace_network=tn[cross])


def cross_table(same: pd.DataFrame, cross: pd.DataFrame) -> pd.DataFrame:
    """One row per (cell, trace network -> predicted network): the measured time on the
    predicted network and, per replay model, the error of predicting it from its own trace
    (same) and from the other network's trace (cross)."""
    rows = []
    keys = ["app", "paradigm", "ranks", "size"]
    for (app, par, ranks, size, tnet, net), g in cross.groupby(keys + ["trace_network", "network"]):
        own = same[(same.app == app) & (same.paradigm == par) & (same.ranks == ranks)
                   & (same["size"] == size) & (same.network == net)]
        row = {"app": app, "paradigm": par, "ranks": ranks, "size": size, "trace_network": tnet,
               "network": net, "actual_s": g.actual_s.iloc[0]}
        for _, r in g.iterrows():
            model = r.predictor.split(":", 1)[-1]
            o = own[own.predictor == r.predictor]
            row[f"{model}_same_pct"] = o.rel_error_pct.iloc[0] if len(o) else math.nan
            row[f"{model}_cross_pct"] = r.rel_error_pct
        rows.append(row)
    return pd.DataFrame(rows)


def cross_summary(same: pd.DataFrame, cross: pd.DataFrame) -> pd.DataFrame:
    """Per replay model: mean and max |error| same-network (on the networks predicted) and
    cross-network, and the cross-network rows above TARGET_CROSS."""
    out = []
    nets = set(cross.network)
    for pred, g in cross.groupby("predictor"):
        s = same[(same.predictor == pred) & same.network.isin(nets)].rel_error_pct.abs().dropna()
        c = g.rel_error_pct.abs().dropna()
        out.append({"model": pred, "same_rows": len(s), "same_mean_abs_pct": s.mean(),
                    "same_max_abs_pct": s.max(), "cross_rows": len(c),
                    "cross_no_prediction": len(g) - len(c), "cross_mean_abs_pct": c.mean(),
                    "cross_max_abs_pct": c.max(),
                    "cross_over_10pct": int((c > TARGET_CROSS).sum())})
    return pd.DataFrame(out)


def _cross_md(same: pd.DataFrame, cross: pd.DataFrame) -> list[str]:
    summ, tab = cross_summary(same, cross), cross_table(same, cross)
    md = ["## Cross-network predictions", "",
          "A trace collected on the *trace network*, replayed with the profile of the *predicted "
          "network*, compared with the run measured on the predicted network. *same*: the "
          "predicted network's own trace and profile; *cross*: the other network's trace. "
          f"Target: cross-network mean |error| <= {TARGET_CROSS:g} %.", "",
          "| model | same rows | same mean abs % | same max abs % | cross rows | "
          "cross mean abs % | cross max abs % | cross rows > 10 % | target |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for _, r in summ.iterrows():
        ok = r.cross_mean_abs_pct <= TARGET_CROSS
        md.append(f"| {r.model} | {r.same_rows} | {r.same_mean_abs_pct:.2f} | "
                  f"{r.same_max_abs_pct:.2f} | {r.cross_rows} | {r.cross_mean_abs_pct:.2f} | "
                  f"{r.cross_max_abs_pct:.2f} | {r.cross_over_10pct} | "
                  f"{'met' if ok else 'NOT met'} |")
    models = [c[:-len("_same_pct")] for c in tab.columns if c.endswith("_same_pct")]
    md += ["", "| app | paradigm | P | size | trace net | predicted net | actual (s) | "
           + " | ".join(f"{m} same % | {m} cross %" for m in models) + " |",
           "|---|---|---:|---|---|---|---:|" + "---:|" * (2 * len(models))]
    for _, r in tab.sort_values(["app", "paradigm", "network", "trace_network"]).iterrows():
        md.append(f"| {r.app} | {r.paradigm} | {r.ranks} | {r['size']} | {r.trace_network} | "
                  f"{r.network} | {r.actual_s:.4f} | "
                  + " | ".join(f"{r[m + '_same_pct']:+.1f} | {r[m + '_cross_pct']:+.1f}"
                               for m in models) + " |")
    return md + [""]


def _summary_rows(e: pd.Series) -> list[tuple[str, float]]:
    e = e.dropna()
    if e.empty:
        return []
    return [("Average Relative Error", e.mean()), ("Average Absolute Relative Error", e.abs().mean()),
            ("Minimum Relative Error", e.min()), ("Maximum Relative Error", e.max())]


def _pct(v: float) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:+.1f}"


def _table_md(g: pd.DataFrame) -> str:
    lines = ["| Num Proc | Input Size | Network | Actual (s) | sd (s) | Tracing % | Pred (s) | "
             "Pred range (s) | Rel Error % |", "|---:|---|---|---:|---:|---:|---:|---|---:|"]
    for _, r in g.sort_values(["ranks", "size", "network"]).iterrows():
        spread = ("-" if r.predicted_min_s == r.predicted_max_s or math.isnan(r.predicted_min_s)
                  else f"{r.predicted_min_s:.4f}-{r.predicted_max_s:.4f}")
        lines.append(f"| {r.ranks} | {r['size']} | {r.network} | {r.actual_s:.4f} | "
                     f"{r.actual_sd_s:.4f} | {_pct(r.perturbation_pct)} | {r.predicted_s:.4f} | "
                     f"{spread} | {r.rel_error_pct:+.2f} |")
    for name, v in _summary_rows(g["rel_error_pct"]):
        lines.append(f"| {name} | | | | | | | | {v:.2f} |" if "Absolute" in name
                     else f"| {name} | | | | | | | | {v:+.2f} |")
    return "\n".join(lines)


def perturbation_table(cells: list[dict]) -> pd.DataFrame:
    """One row per cell with untraced runs: the untraced and traced median times and the tracing
    perturbation (median traced / median untraced - 1, in %)."""
    import statistics

    rows = []
    for c in cells:
        un, tr = c.get("untraced_runs_s") or [], c.get("traced_runs_s") or []
        if not un or not tr:
            continue
        rows.append({"app": c["app"], "paradigm": c["paradigm"], "ranks": c["ranks"],
                     "size": c["size"], "network": c["network"], "runs": len(un),
                     "untraced_median_s": statistics.median(un),
                     "traced_median_s": statistics.median(tr),
                     "perturbation_pct": c.get("perturbation_pct", math.nan),
                     "under_load": "; ".join(c.get("under_load") or [])})
    return pd.DataFrame(rows)


def _perturbation_md(tab: pd.DataFrame) -> list[str]:
    if tab.empty:
        return ["## Tracing perturbation", "",
                "No untraced runs (spec `ground_truth = \"traced\"`, or results written before "
                "untraced runs were measured): the actual times are the traced runs' and the "
                "tracer's effect on them is not measured.", ""]
    p = tab.perturbation_pct.dropna()
    md = ["## Tracing perturbation", "",
          "How much slower (+) or faster (-) the traced runs were than the untraced runs of the "
          "same cell, launched alternately: median traced / median untraced - 1. The error "
          "tables' actual times are the untraced runs'; a prediction replays a traced run's "
          "trace, so a "
          "perturbation shows up in its error. "
          + (f"Mean |perturbation| {p.abs().mean():.1f} %, worst "
             f"{_pct(p.loc[p.abs().idxmax()])} % ({len(p)} cells)." if len(p) else ""), "",
          "| app | paradigm | P | size | network | runs | untraced median (s) | "
          "traced median (s) | perturbation % | under load |",
          "|---|---|---:|---|---|---:|---:|---:|---:|---|"]
    for _, r in tab.sort_values(["app", "paradigm", "ranks", "size", "network"]).iterrows():
        md.append(f"| {r.app} | {r.paradigm} | {r.ranks} | {r['size']} | {r.network} | {r.runs} | "
                  f"{r.untraced_median_s:.4f} | {r.traced_median_s:.4f} | "
                  f"{_pct(r.perturbation_pct)} | {r.under_load or 'no'} |")
    return md + [""]


def _cross_html(same: pd.DataFrame, cross: pd.DataFrame) -> str:
    fmt = lambda v: f"{v:.2f}"  # noqa: E731
    return ("<h2>Cross-network predictions</h2><p>Trace collected on the trace network, replayed "
            "with the predicted network's profile, compared with the run on the predicted "
            f"network; target: cross-network mean |error| &lt;= {TARGET_CROSS:g} %.</p>"
            + cross_summary(same, cross).to_html(index=False, float_format=fmt)
            + cross_table(same, cross).to_html(index=False, float_format=fmt))


def _table_html(g: pd.DataFrame) -> str:
    rows = ["<tr><th>Num Proc</th><th>Input Size</th><th>Network</th><th>Actual (s)</th>"
            "<th>sd (s)</th><th>Tracing %</th><th>Pred (s)</th><th>Rel Error %</th></tr>"]
    for _, r in g.sort_values(["ranks", "size", "network"]).iterrows():
        bad = ' class="miss"' if abs(r.rel_error_pct) > TARGET_CELL else ""
        rows.append(f"<tr><td>{r.ranks}</td><td>{html.escape(str(r['size']))}</td>"
                    f"<td>{r.network}</td><td>{r.actual_s:.4f}</td><td>{r.actual_sd_s:.4f}</td>"
                    f"<td>{_pct(r.perturbation_pct)}</td>"
                    f"<td>{r.predicted_s:.4f}</td><td{bad}>{r.rel_error_pct:+.2f}</td></tr>")
    for name, v in _summary_rows(g["rel_error_pct"]):
        rows.append(f'<tr class="sum"><td colspan="7">{name}</td><td>{v:+.2f}</td></tr>')
    return "<table>" + "".join(rows) + "</table>"


def predictor_summary(err: pd.DataFrame) -> pd.DataFrame:
    """Per predictor: cells with a prediction, cells without (model failed, e.g. a saturated
    M/M/1 queue: the note is in the cell JSON), mean |error|, max |error|, cells above 15 %."""
    out = []
    for pred, g in err.groupby("predictor"):
        a = g["rel_error_pct"].abs().dropna()
        out.append({"predictor": pred, "cells": len(a), "no_prediction": len(g) - len(a),
                    "mean_abs_pct": a.mean(),
                    "max_abs_pct": a.max(), "cells_over_15pct": int((a > TARGET_CELL).sum()),
                    "mean_signed_pct": g["rel_error_pct"].mean()})
    return pd.DataFrame(out)


# -- plots ---------------------------------------------------------------------------------------


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update({"font.size": 10, "axes.grid": True, "grid.alpha": 0.3})
    return plt


def plot_time_vs_ranks(err: pd.DataFrame, cells: list[dict], path: Path) -> Path:
    """Paper 003 Figs. 1-3: measured (mean ± sd) and predicted time vs rank count."""
    plt = _plt()
    groups = sorted({(r.app, r.paradigm, r["size"], r.network) for _, r in err.iterrows()})
    # One colour per predictor in every panel, so panels can be compared at a glance.
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    color = {p: palette[i % len(palette)] for i, p in enumerate(sorted(err.predictor.unique()))}
    ncol = min(3, len(groups))
    nrow = math.ceil(len(groups) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(5.2 * ncol, 3.8 * nrow), squeeze=False)
    for ax, (app, par, size, net) in zip(axes.flat, groups):
        g = err[(err.app == app) & (err.paradigm == par) & (err["size"] == size)
                & (err.network == net)]
        m = g.drop_duplicates("ranks").sort_values("ranks")
        ax.errorbar(m.ranks, m.actual_s, yerr=m.actual_sd_s, fmt="o-k", lw=2, capsize=4,
                    label="measured (mean ± sd)")
        for pred, gp in g.groupby("predictor"):
            gp = gp.sort_values("ranks")
            ax.plot(gp.ranks, gp.predicted_s, "s--" if pred.startswith("analytic") else ".-",
                    label=pred, color=color[pred])
        ax.set_title(f"{app} / {par}\n{size}, {net}", fontsize=10)
        ax.set_xlabel("ranks P")
        ax.set_ylabel("time (s)")
        ax.set_xticks(sorted(m.ranks))
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(groups):]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_rel_error(err: pd.DataFrame, path: Path) -> Path:
    """Paper 000 Figs. 5-6: relative error per configuration, one bar per predictor."""
    plt = _plt()
    err = err.copy()
    err["config"] = err.app.str.slice(0, 10) + "/" + err.paradigm + " P=" + err.ranks.astype(str)
    configs = list(dict.fromkeys(err.sort_values(["app", "paradigm", "ranks"]).config))
    preds = sorted(err.predictor.unique())
    w = 0.8 / max(len(preds), 1)
    fig, ax = plt.subplots(figsize=(max(8, 0.55 * len(configs) * max(len(preds), 2) / 2 + 3), 5))
    x = np.arange(len(configs))
    for i, pred in enumerate(preds):
        g = err[err.predictor == pred].groupby("config")["rel_error_pct"].mean()
        ax.bar(x + i * w - 0.4 + w / 2, [g.get(c, np.nan) for c in configs], w, label=pred)
    ax.axhline(0, color="k", lw=0.8)
    for y in (TARGET_CELL, -TARGET_CELL):
        ax.axhline(y, color="r", ls=":", lw=1)
    ax.set_xticks(x, configs, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("relative error % ((pred - actual)/actual)")
    ax.set_title("Relative error per configuration (red: ±15 % cell target)")
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_speedup(cells: list[dict], path: Path) -> Path | None:
    """Paper 001: speedup S = T_1/T_P and efficiency E = S/P vs P (measured means)."""
    base = {(c["app"], c["size"], c["network"]): c["actual_s"] for c in cells if c["baseline"]}
    rows = [c for c in cells if not c["baseline"] and (c["app"], c["size"], c["network"]) in base]
    if not rows:
        return None
    plt = _plt()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
    df = pd.DataFrame([{"label": f"{c['app']}/{c['paradigm']}", "P": c["ranks"],
                        "S": base[(c["app"], c["size"], c["network"])] / c["actual_s"]}
                       for c in rows])
    for label, g in df.groupby("label"):
        g = g.groupby("P")["S"].mean().reset_index()
        a1.plot(g.P, g.S, "o-", label=label)
        a2.plot(g.P, g.S / g.P, "o-", label=label)
    ps = sorted(df.P.unique())
    a1.plot([1] + ps, [1] + ps, "k:", label="linear")
    a1.set(xlabel="ranks P", ylabel="speedup T_1/T_P", title="Speedup (measured)")
    a2.set(xlabel="ranks P", ylabel="efficiency S/P", title="Efficiency (measured)")
    a2.set_ylim(0, 1.1)
    for a in (a1, a2):
        a.set_xticks(ps)
    a1.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_paradigms(cells: list[dict], path: Path) -> Path | None:
    """Paper 000 Tables VI-XI: pipeline vs master/worker vs reduction tree (measured)."""
    df = pd.DataFrame([c for c in cells if not c["baseline"]
                       and c["paradigm"] in ("pipeline", "master-worker", "tree")])
    if df.empty:
        return None
    plt = _plt()
    apps = sorted(df.app.unique())
    fig, axes = plt.subplots(1, len(apps), figsize=(5.5 * len(apps), 4), squeeze=False)
    for ax, app in zip(axes.flat, apps):
        g = df[df.app == app]
        ps = sorted(g.ranks.unique())
        pars = [p for p in ("pipeline", "master-worker", "tree") if p in set(g.paradigm)]
        w = 0.8 / len(pars)
        for i, par in enumerate(pars):
            gp = g[g.paradigm == par].groupby("ranks")
            m, s = gp["actual_s"].mean(), gp["actual_sd_s"].mean()
            ax.bar(np.arange(len(ps)) + i * w - 0.4 + w / 2, [m.get(p, np.nan) for p in ps], w,
                   yerr=[s.get(p, 0) for p in ps], capsize=3, label=par)
        ax.set_xticks(np.arange(len(ps)), [f"P={p}" for p in ps])
        ax.set(ylabel="measured time (s)", title=f"{app}: paradigms compared")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _method_text(vdir: Path) -> str:
    """How actual and predicted times were formed, from the spec the validation ran."""
    import tomllib

    try:
        raw = tomllib.loads((vdir / "spec.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError):
        raw = {}
    stat = "median" if raw.get("actual") == "median" else "mean"
    truth = raw.get("ground_truth", "untraced")
    rep = raw.get("replay_rep", 0)
    if rep == "all":
        how = (f"every repetition is predicted from its own trace and the prediction is the {stat} "
               "of those (cells/*.json `per_rep_s`)")
    elif rep == "median":
        how = "replay and analytic predictions use the trace of the median run"
    else:
        how = f"replay and analytic predictions use the trace of repetition {rep}"
    runs = ("wall time (start barrier to the end of the program) of the untraced runs (each "
            "launched right after the traced run of its repetition; Tracing % = median traced / "
            "median untraced wall time - 1)" if truth == "untraced" else
            "makespan of the traced runs (spec ground_truth = \"traced\": the tracer's effect "
            "is not measured)")
    return (f"Relative error = (predicted - actual) / actual × 100; actual = {stat} {runs} over "
            f"the repetitions (sd shown); {how}.")


def plot_gantt(vdir: Path, cells: list[dict], path: Path) -> Path | None:
    """Measured vs replayed (LogGPS) per-rank timeline of one run."""
    import replay
    from hindsight import trace as tf
    from validation.profiles import read_profile, replay_params

    cand = [c for c in cells if not c["baseline"] and c["ranks"] >= 2]
    if not cand:
        return None
    c = max(cand, key=lambda c: (c["ranks"], c["paradigm"] == "pipeline"))
    trace = Path(vdir) / c["traces"][c["replayed_rep"]]
    prep = replay.prepare(trace)
    prof_path = Path(vdir) / c["profile"]
    res = replay.run(prep, "loggps",
                     profile=replay_params("loggps", read_profile(prof_path), prof_path))
    ev = res.events_frame()
    tab = tf.read_trace(trace, columns=["rank", "seq", "region"]).to_pandas()
    ev = ev.merge(tab, on=["rank", "seq"], how="left")
    plt = _plt()
    colors = {"task": "tab:green", "merge": "tab:blue", "io": "tab:gray", "divide": "tab:olive",
              "conquer": "tab:green", "combine": "tab:blue", "send_to_server": "tab:purple"}
    fig, axes = plt.subplots(2, 1, figsize=(11, 2.2 + 0.9 * prep.nranks), sharex=True)
    for ax, (s, e, title) in zip(axes, (("measured_start_ns", "measured_end_ns", "measured"),
                                        ("start_ns", "end_ns", "replayed (loggps)"))):
        for _, r in ev.iterrows():
            if r.op == "region":
                col = colors.get(str(r.region), "tab:cyan")
                y, h = r["rank"] - 0.35, 0.7
            else:
                col = "tab:red" if r.op in ("Recv", "Wait", "Waitall", "Sendrecv_recv",
                                             "Sendrecv_send", "Bcast", "Comm_split") else "tab:orange"
                y, h = r["rank"] - 0.15, 0.3
            ax.broken_barh([(r[s] / 1e6, max((r[e] - r[s]) / 1e6, 0.001))], (y, h), color=col)
        ax.set_yticks(range(prep.nranks), [f"rank {i}" for i in range(prep.nranks)])
        ax.invert_yaxis()
        ax.set_title(f"{title}: {c['app']} / {c['paradigm']} P={c['ranks']} "
                     f"({c['traces'][c['replayed_rep']]})", fontsize=9)
    axes[-1].set_xlabel("time since the first event (ms)")
    from matplotlib.patches import Patch
    handles = [Patch(color=v, label=k) for k, v in colors.items()
               if k in set(ev.region.dropna().astype(str))]
    handles += [Patch(color="tab:red", label="MPI wait/receive/collective"),
                Patch(color="tab:orange", label="MPI send")]
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.legend(handles=handles, fontsize=8, ncol=len(handles), loc="lower center")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _safe_gantt(vdir: Path, cells: list[dict], path: Path) -> Path | None:
    """The timeline needs the trace and profile files; a report of a copied errors.csv and
    cells/ without them simply has no timeline."""
    try:
        return plot_gantt(vdir, cells, path)
    except Exception as exc:  # noqa: BLE001 - any missing/unreadable input: skip the plot
        print(f"report: no timeline plot ({type(exc).__name__}: {exc})")
        return None


# -- assembling ----------------------------------------------------------------------------------


def report(vdir: Path | str, out: Path | str) -> list[Path]:
    vdir, out = Path(vdir), Path(out)
    err, cells = _load(vdir)
    err, cross = split_cross(err)
    out.mkdir(parents=True, exist_ok=True)
    summ = predictor_summary(err)
    plots: list[tuple[str, Path | None]] = [
        ("Predicted and measured time vs rank count (paper 003 Figs. 1-3 style)",
         plot_time_vs_ranks(err, cells, out / "time_vs_ranks.png")),
        ("Relative error per configuration (paper 000 Figs. 5-6 style)",
         plot_rel_error(err, out / "rel_error.png")),
        ("Speedup and efficiency vs P (paper 001)", plot_speedup(cells, out / "speedup.png")),
        ("Pipeline vs master/worker vs reduction tree (paper 000 §VI-C, D)",
         plot_paradigms(cells, out / "paradigms.png")),
        ("Measured vs replayed per-rank timeline", _safe_gantt(vdir, cells, out / "gantt.png")),
    ]
    plots = [(t, p) for t, p in plots if p is not None]
    lg = summ[summ.predictor == "replay:loggps"]
    target = ""
    if len(lg):
        r = lg.iloc[0]
        ok = r.mean_abs_pct <= TARGET_MEAN and r.max_abs_pct <= TARGET_CELL
        target = (f"Target (replay:loggps, calibrated profile of the trace's network): mean |error| "
                  f"<= {TARGET_MEAN:g} %, no cell worse than {TARGET_CELL:g} %. Measured: mean "
                  f"{r.mean_abs_pct:.1f} %, worst {r.max_abs_pct:.1f} %, "
                  f"{r.cells_over_15pct} cells above 15 %: **{'met' if ok else 'NOT met'}**. "
                  f"The papers' own figures: {PAPERS}.")
    method = _method_text(Path(vdir))
    md = [f"# Validation report: {vdir}", "", method, "", target, "",
          "## Summary per predictor", "",
          "| predictor | cells | no prediction | mean abs % | max abs % | cells > 15 % | "
          "mean signed % |", "|---|---:|---:|---:|---:|---:|---:|"]
    for _, r in summ.iterrows():
        md.append(f"| {r.predictor} | {r.cells} | {r.no_prediction} | {r.mean_abs_pct:.2f} | "
                  f"{r.max_abs_pct:.2f} | "
                  f"{r.cells_over_15pct} | {r.mean_signed_pct:+.2f} |")
    miss = err[err.rel_error_pct.abs() > TARGET_CELL].sort_values("rel_error_pct")
    md += ["", f"Cells worse than {TARGET_CELL:g} %: {len(miss)} of {len(err)} rows.", ""]
    body_html = []
    cross_md = _cross_md(err, cross) if len(cross) else []
    md += cross_md
    pert = perturbation_table(cells)
    md += _perturbation_md(pert)
    md += ["## Error tables (one per app × paradigm × predictor)", ""]
    for (app, par, pred), g in err.groupby(["app", "paradigm", "predictor"]):
        md += [f"### {app} / {par} / {pred}", "", _table_md(g), ""]
        body_html.append(f"<h3>{html.escape(f'{app} / {par} / {pred}')}</h3>{_table_html(g)}")
    md += ["## Plots", ""]
    for title, p in plots:
        md += [f"### {title}", "", f"![{title}]({p.name})", ""]
    md_path = out / "report.md"
    md_path.write_text("\n".join(md))
    # HTML: the same content, images embedded, tables styled
    summ_html = summ.to_html(index=False, float_format=lambda v: f"{v:.2f}")
    imgs = "".join(f"<h3>{html.escape(t)}</h3><img alt='{html.escape(t)}' src='data:image/png;"
                   f"base64,{base64.b64encode(p.read_bytes()).decode()}'>" for t, p in plots)
    target_html = html.escape(target).replace("**", "")
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>Validation report</title>
<style>body{{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em}}
table{{border-collapse:collapse;margin:.5em 0 1.5em}}td,th{{border:1px solid #bbb;padding:3px 8px;
text-align:right}}th{{background:#eee}}tr.sum td{{font-weight:bold;background:#f6f6f6}}
td.miss{{color:#b00;font-weight:bold}}img{{max-width:100%;border:1px solid #ddd}}</style></head>
<body><h1>Validation report: {html.escape(str(vdir))}</h1>
<p>{html.escape(method)} Red: a cell worse than {TARGET_CELL:g} %.</p><p>{target_html}</p>
<h2>Summary per predictor</h2>{summ_html}{_cross_html(err, cross) if len(cross) else ''}
<h2>Tracing perturbation</h2>{pert.to_html(index=False, float_format=lambda v: f"{v:.4f}")
                              if len(pert) else "<p>No untraced runs.</p>"}
<h2>Error tables</h2>{''.join(body_html)}
<h2>Plots</h2>{imgs}</body></html>"""
    html_path = out / "report.html"
    html_path.write_text(page)
    return [md_path, html_path] + [p for _, p in plots]
