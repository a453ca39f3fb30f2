"""`hindsight report`: Markdown and a self-contained HTML page from a validation directory.

Reading order, the same in both: a header (when, on what, from which revision, under what load,
how well each network profile fits), the verdict and a summary per predictor, one table per
application (predictors as columns), cross-network predictions, charts and a measured vs
replayed timeline per cell (inline SVG with each point's or bar's numbers on hover; SVG files
beside the Markdown), the tracing perturbation per cell and how the numbers were formed.
Tables: report_tables.py; charts: report_plots.py, report_svg.py; header: report_facts.py;
timelines: report_timeline.py."""

from __future__ import annotations

import html
import json
import math
import statistics
from pathlib import Path

import pandas as pd

from hindsight.errors import DataError
from hindsight.system import write_text_atomic
from validation.matrix import load_summary
from validation.report_facts import header_items, profile_facts, spec_facts
from validation.report_plots import Plot, error_plot, paradigms, speedup, time_vs_ranks
from validation.report_tables import (
    NOISY_SPREAD_PCT,
    TARGET_CELL,
    TARGET_MEAN,
    Table,
    Td,
    app_tables,
    fmt_pct,
    predictor_name,
    predictor_summary,
    summary_table,
)
from validation.report_timeline import cell_timelines

PAPERS = "paper 000: 11.5 % (feature extraction), 15.8 % (sorting); paper 002: 8.8 %; " \
         "paper 003: under 6 % in most cells; paper 004: 3-10 %"
TARGET_CROSS = 10.0     # cross-network mean |error| per model

__all__ = [
    "ReportError",
    "cross_summary",
    "cross_table",
    "perturbation_table",
    "predictor_summary",
    "report",
    "split_cross",
]


class ReportError(DataError, ValueError):
    """Missing or unreadable validation directory; one readable line."""


#: what ``load_results`` reads: errors.csv's rows, DIR/cells/*.json, DIR/failed/*.json
Results = tuple[pd.DataFrame, list[dict], list[dict]]


def load_results(vdir: Path | str) -> Results:
    """(errors.csv's rows, the cells' results, the failed cells' records) of a validation
    directory; ReportError when it holds neither a row nor a failed cell."""
    vdir = Path(vdir)
    if not vdir.is_dir():
        raise ReportError(f"{vdir}: no such folder (a validation folder: `hindsight validate "
                          f"SPEC --out {vdir}` makes one)")
    if not (vdir / "errors.csv").is_file():
        raise ReportError(f"{vdir}: no errors.csv (run `hindsight validate --out {vdir}` first)")
    try:
        err = pd.read_csv(vdir / "errors.csv")
        cells = [json.loads(f.read_text()) for f in sorted((vdir / "cells").glob("*.json"))]
        failed = [json.loads(f.read_text()) for f in sorted((vdir / "failed").glob("*.json"))]
    except (OSError, ValueError) as exc:
        raise ReportError(f"{vdir}: unreadable results ({exc})") from None
    if err.empty and not failed:
        raise ReportError(f"{vdir}: errors.csv has no rows yet")
    # an errors.csv without the ground-truth columns measured the traced runs only
    if "ground_truth" not in err.columns:
        err = err.assign(ground_truth="traced", traced_s=err["actual_s"], perturbation_pct=math.nan)
    if "predicted_min_s" not in err.columns:
        err = err.assign(predicted_min_s=err["predicted_s"], predicted_max_s=err["predicted_s"])
    return err, cells, failed


def _failed_section(failed: list[dict], tables: bool = True) -> tuple[str, Table]:
    """Every cell without results and why (DIR/failed/<cell>.json): in no prediction, chart
    or errors.csv row, so listed here (``tables``: the application tables have its row)."""
    n = len(failed)
    text = (f"{n} cell{'s' * (n != 1)} of the spec {'have' if n != 1 else 'has'} no results "
            "because a run failed: no prediction, chart or errors.csv row has "
            f"{'them' if n != 1 else 'it'}" + (" (the application's table says `failed`)"
                                               if tables else "") + ". The next "
            "`hindsight validate` over this folder runs "
            f"{'them' if n != 1 else 'it'} again; DIR/failed/<cell>.json holds the reason.")
    t = Table(["cell", "P", "network", "why it failed"], [False, True, False, False])
    for f in failed:
        t.rows.append([Td(str(f.get("cell", "?"))), Td(str(f.get("ranks", "?"))),
                       Td(str(f.get("network", "?"))), Td(str(f.get("reason", "?")),
                                                          cls="miss")])
    return text, t


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


def _cross_section(same: pd.DataFrame, cross: pd.DataFrame) -> tuple[str, list[Table]]:
    summ, tab = cross_summary(same, cross), cross_table(same, cross)
    text = ("A trace collected on the *trace network*, replayed with the profile of the "
            "*predicted network*, compared with the run measured on the predicted network. "
            "*same*: the predicted network's own trace and profile; *cross*: the other "
            f"network's trace. Target: cross-network mean |error| <= {TARGET_CROSS:g} %.")
    t1 = Table(["model", "same-network rows", "same mean |error| %", "same worst |error| %",
                "cross-network rows", "cross mean |error| %", "cross worst |error| %",
                f"cross rows > {TARGET_CROSS:g} %", "target"], [False] + [True] * 7 + [False])
    for _, r in summ.iterrows():
        ok = r.cross_mean_abs_pct <= TARGET_CROSS
        t1.rows.append([Td(predictor_name(r.model), title=r.model)] + [Td(x) for x in (
            str(r.same_rows), f"{r.same_mean_abs_pct:.2f}", f"{r.same_max_abs_pct:.2f}",
            str(r.cross_rows), f"{r.cross_mean_abs_pct:.2f}", f"{r.cross_max_abs_pct:.2f}",
            str(r.cross_over_10pct))] + [Td("met" if ok else "NOT met", strong=not ok,
                                            cls="" if ok else "miss")])
    models = [c[:-len("_same_pct")] for c in tab.columns if c.endswith("_same_pct")]
    t2 = Table(["app", "paradigm", "P", "size", "trace network", "predicted network",
                "measured (s)"] + [f"{predictor_name('replay:' + m)} {k} error %"
                                   for m in models for k in ("same", "cross")],
               [False, False, True, False, False, False, True] + [True] * (2 * len(models)))
    for _, r in tab.sort_values(["app", "paradigm", "network", "trace_network"]).iterrows():
        t2.rows.append([Td(str(x)) for x in (r.app, r.paradigm, r.ranks, r["size"],
                                            r.trace_network, r.network)]
                       + [Td(f"{r.actual_s:.4f}")]
                       + [Td(fmt_pct(r[f"{m}_{k}_pct"])) for m in models
                          for k in ("same", "cross")])
    return text, [t1, t2]


def perturbation_table(cells: list[dict]) -> pd.DataFrame:
    """One row per cell with untraced runs: the untraced and traced median times and the tracing
    perturbation (median traced / median untraced - 1, in %)."""
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
                     "under_load": load_summary(c.get("under_load") or []),
                     "under_load_all": "; ".join(c.get("under_load") or []),
                     "oversubscribed": bool(c.get("oversubscribed"))})
    return pd.DataFrame(rows)


def _perturbation_section(tab: pd.DataFrame) -> tuple[str, Table | None]:
    if tab.empty:
        return (("No untraced runs (spec `ground_truth = \"traced\"`, or results written before "
                "untraced runs were measured): the actual times are the traced runs' and the "
                "tracer's effect on them is not measured."), None)
    p = tab.perturbation_pct.dropna()
    text = ("How much slower (+) or faster (-) the traced runs were than the untraced runs of "
            "the same cell, launched alternately: median traced / median untraced - 1. The "
            "tables' measured times are the untraced runs'; a prediction replays a traced run's "
            "trace, so a perturbation shows up in its error. "
            + (f"Mean |perturbation| {p.abs().mean():.1f} %, worst "
               f"{fmt_pct(p.loc[p.abs().idxmax()])} % ({len(p)} cells)." if len(p) else ""))
    t = Table(["app", "paradigm", "P", "size", "network", "runs", "untraced median (s)",
               "traced median (s)", "perturbation %", "under load"],
              [False, False, True, False, False, True, True, True, True, False])
    for _, r in tab.sort_values(["app", "paradigm", "ranks", "size", "network"]).iterrows():
        t.rows.append([Td(str(x)) for x in (r.app, r.paradigm, r.ranks, r["size"], r.network,
                                            r.runs)]
                      + [Td(f"{r.untraced_median_s:.4f}"), Td(f"{r.traced_median_s:.4f}"),
                         Td(fmt_pct(r.perturbation_pct)),
                         Td(r.under_load or ("waits not judged (oversubscribed)"
                                             if r.oversubscribed else "no"),
                            title=r.under_load_all, cls="warn" if r.under_load else "")])
    return text, t


def _perturbation_md(tab: pd.DataFrame) -> list[str]:
    text, t = _perturbation_section(tab)
    return ["## Tracing perturbation", "", text, ""] + (t.markdown() + [""] if t else [])


def _method_text(vdir: Path) -> str:
    """How actual and predicted times were formed, from the spec the validation ran."""
    raw = spec_facts(vdir)
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
    return (f"Relative error = (predicted - measured) / measured × 100; measured = {stat} {runs} "
            f"over the repetitions (sd shown); {how}. Speedup and efficiency take each "
            "paradigm's own smallest-P run as the baseline: S = T(P0) / T(P), E = S / (P / P0).")


def _failed_text(failed: list[dict]) -> str:
    n = len(failed)
    return (f" {n} cell{'s' * (n != 1)} failed and {'are' if n != 1 else 'is'} not judged "
            f"({', '.join(str(f.get('cell')) for f in failed)}: see Failed cells)." if n else "")


def _verdict(err: pd.DataFrame, cells: list[dict], profiles,
             failed: list[dict]) -> tuple[str, bool | None, str]:
    """(verdict line, met? (None: not judged), the counts in one paragraph)."""
    summ = predictor_summary(err)
    lg = summ[summ.predictor == "replay:loggps"]
    # (a predictor that predicted nothing, its replays failed, has a NaN mean: not judged)
    lg = lg[lg.mean_abs_pct.notna()]
    if len(lg):
        r = lg.iloc[0]
        ok = bool(r.mean_abs_pct <= TARGET_MEAN and r.max_abs_pct <= TARGET_CELL)
        verdict = (f"Target {'met' if ok else 'NOT met'}: LogGPS replay mean |error| "
                   f"{r.mean_abs_pct:.1f} % (target <= {TARGET_MEAN:g} %), worst "
                   f"{r.max_abs_pct:.1f} % (no cell may exceed {TARGET_CELL:g} %), "
                   f"cells above {TARGET_CELL:g} %: {r.cells_over_15pct}.")
        if any(c.get("under_load") for c in cells):
            verdict += " Judged on cells taken under load, not a quiet machine's figures."
    else:
        ok, verdict = None, ("Target not judged: no replay:loggps predictions in this run "
                             "(the target is LogGPS with the calibrated profile; a replay that "
                             "failed says why in its cell's note).")
    verdict += _failed_text(failed)
    keys = {(r.app, r.paradigm, r.ranks, r["size"], r.network) for _, r in err.iterrows()}
    base = [c for c in cells if c.get("baseline")]
    loaded = [c for c in cells if c.get("under_load")]
    noisy = [c for c in cells if c.get("actual_s", 0) > 0
             and c.get("actual_sd_s", 0) / c["actual_s"] * 100 > NOISY_SPREAD_PCT]
    bad_prof = [p.network for p in profiles if p.quality.startswith("noisy")]
    miss = int((err.rel_error_pct.abs() > TARGET_CELL).sum())
    counts = (f"{len(keys)} predicted cells" + (f" and {len(base)} P = 1 baseline runs"
                                                 if base else "")
              + f" in {err.app.nunique()} apps on {err.network.nunique()} network(s); "
              f"{len(loaded)} of {len(cells) or len(keys)} cells under load, {len(noisy)} with "
              f"runs spread above {NOISY_SPREAD_PCT:g} % (sd / measured); "
              + (f"noisy profiles: {', '.join(bad_prof)}. " if bad_prof else
                 f"{len(profiles)} network profile(s), none noisy. " if profiles else "")
              + f"Cells worse than {TARGET_CELL:g} %: {miss} of {len(err)} rows. "
              f"The papers' own figures: {PAPERS}.")
    return verdict, ok, counts


def _profiles_table(profiles) -> Table:
    t = Table(["network", "profile", "source", "quality", "R² LogGP", "R² Hockney",
               "median |residual| %", "worst residual %", "LogGPS parameters"],
              [False, False, False, False, True, True, True, True, False])
    for p in profiles:
        worst = fmt_pct(p.residual_worst_pct) + (f" at {p.residual_worst_size} B"
                                                 if p.residual_worst_size else "")
        t.rows.append([Td(p.network), Td(p.path), Td(p.source),
                       Td(p.quality, cls="warn" if p.quality != "ok" else "",
                          strong=p.quality.startswith("noisy")),
                       Td("-" if math.isnan(p.r2_loggp) else f"{p.r2_loggp:.4f}"),
                       Td("-" if math.isnan(p.r2_hockney) else f"{p.r2_hockney:.4f}"),
                       Td(fmt_pct(p.residual_median_pct, False)), Td(worst), Td(p.params)])
    return t


_CSS = """body{font-family:sans-serif;max-width:1200px;margin:1.5em auto;padding:0 1em;color:#222}
h1{margin-bottom:.2em}h2{border-bottom:1px solid #ccc;padding-bottom:.15em;margin-top:1.6em}
table{border-collapse:collapse;margin:.4em 0 1.2em;font-size:14px}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f0f0}td.num{text-align:right;font-variant-numeric:tabular-nums}
td[title]{cursor:help}td.miss{color:#b00;font-weight:bold}td.warn{color:#a60}
table.facts td:first-child{font-weight:bold;white-space:nowrap}
.verdict{font-size:1.15em;padding:.6em 1em;border-radius:6px;margin:.6em 0}
.met{background:#e6f4e6;border:1px solid #7b7}.notmet{background:#fbe9e9;border:1px solid #d88}
.nojudge{background:#f3f3f3;border:1px solid #bbb}.note{color:#555;font-style:italic}
figure{margin:1em 0}svg{max-width:100%;height:auto;border:1px solid #ddd}
figcaption{color:#555;font-size:13px;margin-top:.3em}"""


_TIMELINE_TEXT = (
    "Per cell, the traced run its predictions replay: each rank's measured timeline (upper lane) "
    "and the one replayed under LogGPS with the cell's network profile (lower lane, grey), on "
    "one time axis. MPI calls are coloured by kind; between them the compute bursts, which "
    "replay keeps as measured.")


def _html_text(text: str) -> str:
    """Markdown's *emphasis* and `code` of the report's sentences, as HTML."""
    import re
    t = html.escape(text)
    t = re.sub(r"`([^`]+)`", r"<code>\1</code>", t)
    return re.sub(r"\*([^*]+)\*", r"<em>\1</em>", t)


def _failures_report(vdir: Path, out: Path, cells: list[dict], failed: list[dict]) -> list[Path]:
    """The report of a folder where no cell has a prediction: the header, why every cell
    failed, the method; no tables or charts (nothing to draw)."""
    items = header_items(vdir, cells)
    profiles = profile_facts(vdir)
    text, t = _failed_section(failed, tables=False)
    verdict = ("Target not judged: no cell has a prediction." + _failed_text(failed)
               + (f" {len(cells)} P = 1 baseline cell(s) ran; they have no predictions."
                  if cells else ""))
    name = spec_facts(vdir).get("name", "")
    title = f"Validation report{': ' + name if name else ''}"
    method = _method_text(vdir)
    md = [f"# {title}", ""] + [f"* **{k}**: {v}" for k, v in items] + [""]
    if profiles:
        md += ["Network profiles (the fit of each against its own measurements):", ""]
        md += _profiles_table(profiles).markdown() + [""]
    md += ["## Verdict", "", f"**{verdict}**", "", "## Failed cells", "", text, ""]
    md += t.markdown() + ["", "## Method", "", method, ""]
    e = html.escape
    body = [f"<h1>{e(title)}</h1><table class='facts'>"
            + "".join(f"<tr><td>{e(k)}</td><td>{e(v)}</td></tr>" for k, v in items) + "</table>"]
    if profiles:
        body.append("<p>Network profiles (the fit of each against its own measurements):</p>"
                    + _profiles_table(profiles).html())
    body.append(f"<h2>Verdict</h2><div class='verdict nojudge'>{e(verdict)}</div>"
                f"<h2>Failed cells</h2><p>{_html_text(text)}</p>{t.html()}"
                f"<h2>Method</h2><p>{_html_text(method)}</p>")
    return _write_pages(out, title, md, body)


def _write_pages(out: Path, title: str, md: list[str], body: list[str]) -> list[Path]:
    """report.md and report.html (self-contained) in ``out``; their paths."""
    md_path, html_path = out / "report.md", out / "report.html"
    write_text_atomic(md_path, "\n".join(md))
    e = html.escape
    write_text_atomic(html_path, f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
                                 f"<title>{e(title)}</title><style>{_CSS}</style></head><body>"
                                 f"{''.join(body)}</body></html>")
    return [md_path, html_path]


def report(vdir: Path | str, out: Path | str, results: Results | None = None) -> list[Path]:
    """Write DIR's report into ``out`` (report.md, report.html, the charts' and the timelines'
    SVG files); returns their paths. ``results``: DIR's ``load_results``, if already read."""
    vdir, out = Path(vdir), Path(out)
    err, cells, failed = results if results is not None else load_results(vdir)
    out.mkdir(parents=True, exist_ok=True)
    if err.empty:
        return _failures_report(vdir, out, cells, failed)
    err, cross = split_cross(err)
    profiles = profile_facts(vdir)
    items = header_items(vdir, cells)
    verdict, ok, counts = _verdict(err, cells, profiles, failed)
    failed_sec = _failed_section(failed) if failed else None
    summ = summary_table(err)
    apps = app_tables(err, cells, failed)
    cross_sec = _cross_section(err, cross) if len(cross) else None
    plots: list[Plot] = [error_plot(err), *time_vs_ranks(err, cells), *speedup(cells),
                         *paradigms(cells)]
    files = []
    for p in plots:
        if p.svg:
            files.append(out / f"{p.name}.svg")
            write_text_atomic(files[-1], p.svg)
    timelines, no_timeline = cell_timelines(vdir, cells)
    for p in timelines:
        files.append(out / f"{p.name}.svg")
        write_text_atomic(files[-1], p.svg)
    pert_text, pert_t = _perturbation_section(perturbation_table(cells))
    method = _method_text(vdir)
    name = spec_facts(vdir).get("name", "")
    title = f"Validation report{': ' + name if name else ''}"

    md = [f"# {title}", ""] + [f"* **{k}**: {v}" for k, v in items] + [""]
    if profiles:
        md += ["Network profiles (the fit of each against its own measurements):", ""]
        md += _profiles_table(profiles).markdown() + [""]
    md += ["## Verdict", "", f"**{verdict}**", "", counts, ""]
    if failed_sec:
        md += ["## Failed cells", "", failed_sec[0], ""] + failed_sec[1].markdown() + [""]
    md += ["## Summary per predictor", ""] + summ.markdown() + [""]
    legend = (f"Each predictor's column is its signed relative error in %; **bold**: a cell "
              f"worse than {TARGET_CELL:g} %; Tracing %: median traced / median untraced wall "
              "time - 1; notes: cells under load or whose runs spread above "
              f"{NOISY_SPREAD_PCT:g} %. Predicted times are in errors.csv (and on hover in "
              "report.html).")
    md += ["## Results per application", "", legend, ""]
    for app, shared, t in apps:
        md += [f"### {app}" + (f" ({shared})" if shared else ""), ""] + t.markdown() + [""]
    if cross_sec:
        md += ["## Cross-network predictions", "", cross_sec[0], ""]
        for t in cross_sec[1]:
            md += t.markdown() + [""]
    md += ["## Charts", ""]
    for p in plots:
        if p.note:
            md += [p.note, ""]
        if p.svg:
            md += [f"### {p.title}", "", f"![{p.title}]({p.name}.svg)", ""]
    md += ["### Measured vs replayed timelines", "", _TIMELINE_TEXT, ""]
    md += [no_timeline, ""] if no_timeline else []
    for p in timelines:
        md += [f"#### {p.title}", "", f"![{p.title}]({p.name}.svg)", "", p.note, ""]
    md += _perturbation_md(perturbation_table(cells))
    md += ["## Method", "", method, ""]

    e = html.escape
    cls = {True: "met", False: "notmet", None: "nojudge"}[ok]
    body = [f"<h1>{e(title)}</h1><table class='facts'>"
            + "".join(f"<tr><td>{e(k)}</td><td>{e(v)}</td></tr>" for k, v in items) + "</table>"]
    if profiles:
        body.append("<p>Network profiles (the fit of each against its own measurements):</p>"
                    + _profiles_table(profiles).html())
    body.append(f"<h2>Verdict</h2><div class='verdict {cls}'>{e(verdict)}</div><p>{e(counts)}</p>")
    if failed_sec:
        body.append(f"<h2>Failed cells</h2><p>{_html_text(failed_sec[0])}</p>"
                    f"{failed_sec[1].html()}")
    body.append(f"<h2>Summary per predictor</h2>{summ.html()}")
    body.append(f"<h2>Results per application</h2><p>{e(legend).replace('**bold**', '<b>red</b>')}"
                "</p>")
    for app, shared, t in apps:
        body.append(f"<h3>{e(app)}{' (' + e(shared) + ')' if shared else ''}</h3>{t.html()}")
    if cross_sec:
        body.append(f"<h2>Cross-network predictions</h2><p>{_html_text(cross_sec[0])}</p>"
                    + "".join(t.html() for t in cross_sec[1]))
    body.append("<h2>Charts</h2><p class='note'>Hover over a point for its numbers.</p>")
    for p in plots:
        if p.note:
            body.append(f"<p class='note'>{e(p.note)}</p>")
        if p.svg:
            body.append(f"<figure><h3>{e(p.title)}</h3>{p.svg}</figure>")
    body.append(f"<h3>Measured vs replayed timelines</h3><p>{e(_TIMELINE_TEXT)} Hover over a "
                "bar for the call, its start and its duration.</p>")
    if no_timeline:
        body.append(f"<p class='note'>{e(no_timeline)}</p>")
    for p in timelines:
        body.append(f"<figure id='{e(p.name)}'>{p.svg}<figcaption>{e(p.note)}</figcaption>"
                    "</figure>")
    body.append(f"<h2>Tracing perturbation</h2><p>{_html_text(pert_text)}</p>"
                + (pert_t.html() if pert_t else ""))
    body.append(f"<h2>Method</h2><p>{_html_text(method)}</p>")
    return _write_pages(out, title, md, body) + files
