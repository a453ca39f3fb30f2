"""The report's charts (inline SVG, report_svg.py), each with a sentence when there is nothing to
draw, so that an absent chart is explained rather than silently missing.

Speedup and efficiency use each paradigm's own smallest-P run as the baseline: S(P) = T(P0) /
T(P), E(P) = S(P) / (P / P0), where P0 is the smallest P measured for that app, paradigm, size
and network (P0 = 1 for the P = 1 baseline runs, which are pipeline runs). A paradigm is thus
compared with itself, not with another paradigm's sequential run."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from validation.report_svg import PALETTE, Point, Ref, Series, chart
from validation.report_tables import TARGET_CELL, predictor_name, predictor_order


@dataclass
class Plot:
    name: str                  # file stem
    title: str
    svg: str | None            # None: nothing to draw, ``note`` says why
    note: str = ""


def _colors(preds) -> dict[str, str]:
    """One colour per predictor in every chart, so that charts can be compared at a glance."""
    return {p: PALETTE[i % len(PALETTE)] for i, p in enumerate(predictor_order(preds))}


def _marker(pred: str) -> str:
    return "square" if pred.startswith("analytic") else "circle"


def _config(r, many_sizes: bool, many_nets: bool) -> str:
    s = f"{r['app']}/{r['paradigm']} P={int(r['ranks'])}"
    if many_sizes:
        s += f" {r['size']}"
    if many_nets:
        s += f" {r['network']}"
    return s


def _cell_tip(r) -> str:
    return (f"measured {r['actual_s']:.4f} s (sd {r['actual_sd_s']:.4f} s)")


def error_plot(err: pd.DataFrame) -> Plot:
    """Signed relative error per configuration, one marker per predictor (paper 000 Figs. 5-6)."""
    title = "Relative error per cell"
    if err.empty or err.rel_error_pct.isna().all():
        return Plot("rel_error", title, None, "No predictions to plot.")
    many_sizes = err.groupby("app")["size"].nunique().max() > 1
    many_nets = err.network.nunique() > 1
    e = err.assign(config=[_config(r, many_sizes, many_nets) for _, r in err.iterrows()])
    e = e.sort_values(["app", "paradigm", "ranks", "size", "network"])
    configs = list(dict.fromkeys(e.config))
    col = _colors(e.predictor)
    series = []
    for pred in predictor_order(e.predictor):
        g = e[e.predictor == pred]
        s = Series(predictor_name(pred), col[pred], line=False, marker=_marker(pred))
        for _, r in g.iterrows():
            s.points.append(Point(configs.index(r.config), r.rel_error_pct,
                                  f"{r.config}\n{predictor_name(pred)}: error "
                                  f"{r.rel_error_pct:+.1f} %, predicted {r.predicted_s:.4f} s\n"
                                  + _cell_tip(r)))
        series.append(s)
    svg = chart(series, title=title + " ((predicted - measured) / measured)",
                xlabel="cell (app/paradigm, ranks P)", ylabel="relative error (%)",
                categories=configs,
                refs=[Ref(0.0, "0 %", "#222", legend=False),
                      Ref(TARGET_CELL, f"±{TARGET_CELL:g} % cell target", "#c00"),
                      Ref(-TARGET_CELL, f"-{TARGET_CELL:g} % cell target", "#c00", legend=False)])
    return Plot("rel_error", title, svg)


def _groups(df: pd.DataFrame):
    return df.groupby(["app", "paradigm", "size", "network"], sort=True)


def _labeller(df: pd.DataFrame):
    """A group's label (``_groups``' key): app/paradigm, with the size where an app ran at
    several and the network where there are several, so no two groups read alike."""
    many_sizes = df.groupby("app")["size"].nunique().max() > 1
    many_nets = df.network.nunique() > 1
    return lambda app, par, size, net: (f"{app}/{par}" + (f" {size}" if many_sizes else "")
                                        + (f" {net}" if many_nets else ""))


def time_vs_ranks(err: pd.DataFrame, cells: list[dict]) -> list[Plot]:
    """Measured (mean ± sd) and predicted time against P for every app x paradigm x size x
    network measured at two or more P (paper 003 Figs. 1-3); a sentence when none was."""
    meas = pd.DataFrame([{k: c.get(k) for k in ("app", "paradigm", "size", "network", "ranks",
                                                "actual_s", "actual_sd_s")} for c in cells]) \
        if cells else err.drop_duplicates(["app", "paradigm", "size", "network", "ranks"])
    title = "Time vs ranks P"
    if meas.empty:
        return [Plot("time_vs_ranks", title, None, "No cells.")]
    col = _colors(err.predictor)
    plots, single = [], []
    label = _labeller(meas)
    for (app, par, size, net), g in _groups(meas):
        ps = sorted(set(g.ranks))
        if len(ps) < 2:
            single.append(f"{label(app, par, size, net)} (P = {ps[0]})")
            continue
        m = g.groupby("ranks").first().reset_index()
        series = [Series("measured (mean ± sd)", "#000", [
            Point(r.ranks, r.actual_s, f"{app}/{par} P={r.ranks}: measured {r.actual_s:.4f} s "
                  f"(sd {r.actual_sd_s:.4f} s)", err=r.actual_sd_s) for _, r in m.iterrows()])]
        e = err[(err.app == app) & (err.paradigm == par) & (err["size"] == size)
                & (err.network == net)]
        for pred in predictor_order(e.predictor):
            gp = e[e.predictor == pred]
            series.append(Series(predictor_name(pred), col[pred], [
                Point(r.ranks, r.predicted_s, f"{app}/{par} P={r.ranks}: {predictor_name(pred)} "
                      f"{r.predicted_s:.4f} s, error {r.rel_error_pct:+.1f} %")
                for _, r in gp.iterrows()], dash=pred.startswith("analytic"),
                marker=_marker(pred)))
        name = f"time_vs_ranks-{app}-{par}-{size}-{net}".replace("/", "_")
        plots.append(Plot(name, f"{app} / {par}, {size}, {net}: time vs P", chart(
            series, title=f"{app} / {par} ({size}, {net})", xlabel="ranks P",
            ylabel="time (s)", xticks=ps, y_from_zero=True)))
    note = ""
    if single:
        note = ("Measured at one P only, so no time-vs-ranks chart: " + ", ".join(single)
                + ". Their times are in the tables above.")
    if not plots:
        return [Plot("time_vs_ranks", title, None, note)]
    plots[0].note = note
    return plots


def speedup(cells: list[dict]) -> list[Plot]:
    """Measured speedup and efficiency against P, each paradigm relative to its own smallest-P
    run (module docstring); every point inside the axes, superlinear ones included."""
    rows, single = [], []
    df = pd.DataFrame([{k: c.get(k) for k in ("app", "paradigm", "size", "network", "ranks",
                                              "actual_s")} for c in cells])
    if df.empty:
        return [Plot("speedup", "Speedup and efficiency", None, "No cells.")]
    label = _labeller(df)
    for (app, par, size, net), g in _groups(df):
        t = g.groupby("ranks")["actual_s"].mean()
        if len(t) < 2:
            single.append(f"{label(app, par, size, net)} (P = {t.index[0]})")
            continue
        p0 = int(t.index.min())
        for p, tp in t.items():
            s = t[p0] / tp
            rows.append({"label": label(app, par, size, net),
                         "P": int(p), "P0": p0, "T0": t[p0], "T": tp, "S": s,
                         "E": s / (p / p0)})
    note = ("Measured at one P only, so no speedup: " + ", ".join(single) + "."
            if single else "")
    if not rows:
        return [Plot("speedup", "Speedup and efficiency", None, note)]
    r = pd.DataFrame(rows)
    labels = list(dict.fromkeys(r.label))
    sp, ef = [], []
    for i, label in enumerate(labels):
        g = r[r.label == label].sort_values("P")
        c = PALETTE[i % len(PALETTE)]
        tips = [f"{label}: P={x['P']}, T={x['T']:.4f} s; T(P0={x['P0']})={x['T0']:.4f} s; "
                f"speedup {x['S']:.2f}, efficiency {x['E']:.2f}" for _, x in g.iterrows()]
        sp.append(Series(label, c, [Point(x['P'], x['S'], tip) for (_, x), tip in zip(g.iterrows(),
                                                                                 tips)]))
        ef.append(Series(label, c, [Point(x['P'], x['E'], tip) for (_, x), tip in zip(g.iterrows(),
                                                                                 tips)]))
    ps = sorted(set(r.P))
    p0s = set(r.P0)
    refs = [Ref(0, f"linear (P / {next(iter(p0s))})", "#222", slope=1 / next(iter(p0s)))] \
        if len(p0s) == 1 else []
    return [Plot("speedup", "Speedup, each paradigm against its own smallest P", chart(
                sp, title="Speedup T(P0) / T(P), P0 = the paradigm's smallest P",
                xlabel="ranks P", ylabel="speedup (×)", xticks=ps, refs=refs,
                y_from_zero=True), note),
            Plot("efficiency", "Efficiency", chart(
                ef, title="Efficiency speedup / (P / P0) (above 1: superlinear)",
                xlabel="ranks P", ylabel="efficiency", xticks=ps,
                refs=[Ref(1.0, "ideal (1)", "#222")], y_from_zero=True))]


def paradigms(cells: list[dict]) -> list[Plot]:
    """Measured time (mean ± sd) of the paradigms side by side per app, size and network (paper
    000 Tables VI-XI); only where two or more paradigms were measured."""
    df = pd.DataFrame([c for c in cells if not c.get("baseline")])
    out = []
    if df.empty:
        return out
    for (app, size, net), g in df.groupby(["app", "size", "network"]):
        pars = sorted(set(g.paradigm))
        if len(pars) < 2:
            continue
        ps = sorted(set(g.ranks))
        series = []
        for i, par in enumerate(pars):
            gp = g[g.paradigm == par]
            series.append(Series(par, PALETTE[i % len(PALETTE)], [
                Point(ps.index(r.ranks), r.actual_s, f"{app}/{par} P={r.ranks}: measured "
                      f"{r.actual_s:.4f} s (sd {r.actual_sd_s:.4f} s)", err=r.actual_sd_s)
                for _, r in gp.iterrows()], line=False))
        out.append(Plot(f"paradigms-{app}-{size}-{net}".replace("/", "_"),
                        f"{app}: paradigms compared ({size}, {net})", chart(
                            series, title=f"{app}: measured time per paradigm ({size}, {net})",
                            xlabel="ranks", ylabel="measured time (s)",
                            categories=[f"P={p}" for p in ps], y_from_zero=True)))
    return out
