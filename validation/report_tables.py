"""The report's tables, each built once and rendered as Markdown and as HTML: the summary per
predictor and one table per application (rows: paradigm x P x size x network, one column per
predictor), with human column names and units."""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field

import pandas as pd

TARGET_MEAN, TARGET_CELL = 5.0, 15.0
#: A cell whose runs spread (sd / actual) more than this is labelled noisy: a prediction cannot be
#: judged finer than the runs agree with each other (the target mean error).
NOISY_SPREAD_PCT = TARGET_MEAN

_MODEL_NAMES = {"loggps": "LogGPS", "loggp": "LogGP", "hockney": "Hockney", "mm1": "M/M/1",
                "measured": "measured-times", "loggopsim": "LogGOPSim"}


def predictor_name(pred: str) -> str:
    """'replay:loggps' -> 'LogGPS replay', 'analytic:paper000' -> 'paper 000 model'."""
    kind, _, name = pred.partition(":")
    if kind == "replay":
        return f"{_MODEL_NAMES.get(name, name)} replay"
    if kind == "analytic" and name.startswith("paper"):
        return f"paper {name[5:]} model"
    return pred


def predictor_order(preds) -> list[str]:
    """Replay models first (LogGPS leading: the target is judged on it), then analytic ones."""
    rank = {k: i for i, k in enumerate(_MODEL_NAMES)}
    return sorted(set(preds), key=lambda p: (not p.startswith("replay:"),
                                             rank.get(p.partition(":")[2], 99), p))


@dataclass
class Td:
    """One table cell: its text, an optional hover text (HTML title) and CSS class; ``strong``
    cells are bold in Markdown too."""
    text: str
    title: str = ""
    cls: str = ""
    strong: bool = False


@dataclass
class Table:
    headers: list[str]
    numeric: list[bool]            # right-aligned columns
    rows: list[list[Td]] = field(default_factory=list)

    def markdown(self) -> list[str]:
        out = ["| " + " | ".join(h.replace("|", "\\|") for h in self.headers) + " |",
               "|" + "|".join("---:" if n else "---" for n in self.numeric) + "|"]
        for r in self.rows:
            out.append("| " + " | ".join(f"**{c.text}**" if c.strong and c.text != "-" else c.text
                                         for c in r) + " |")
        return out

    def html(self) -> str:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in self.headers)
        body = []
        for r in self.rows:
            tds = []
            for c, num in zip(r, self.numeric):
                cls = " ".join(x for x in (c.cls, "num" if num else "") if x)
                attrs = (f' class="{cls}"' if cls else "") + \
                    (f' title="{html.escape(c.title)}"' if c.title else "")
                tds.append(f"<td{attrs}>{html.escape(c.text)}</td>")
            body.append("<tr>" + "".join(tds) + "</tr>")
        return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def fmt_pct(v: float, signed: bool = True) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:+.1f}" if signed else f"{v:.1f}"


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


def summary_table(err: pd.DataFrame) -> Table:
    summ = predictor_summary(err).set_index("predictor")
    t = Table(["predictor", "cells", "no prediction", "mean |error| %", "worst |error| %",
               f"cells > {TARGET_CELL:g} %", "mean signed error %"],
              [False, True, True, True, True, True, True])
    for pred in predictor_order(summ.index):
        r = summ.loc[pred]
        t.rows.append([Td(predictor_name(pred), title=pred), Td(str(int(r.cells))),
                       Td(str(int(r.no_prediction))), Td(fmt_pct(r.mean_abs_pct, False)),
                       Td(fmt_pct(r.max_abs_pct, False), cls="miss" if r.max_abs_pct > TARGET_CELL
                          else ""),
                       Td(str(int(r.cells_over_15pct))), Td(fmt_pct(r.mean_signed_pct))])
    return t


def cell_notes(cell: dict | None, actual: float, sd: float) -> tuple[str, str]:
    """(short note, full reasons) for a table row: under load, runs spread beyond
    NOISY_SPREAD_PCT."""
    short, full = [], []
    load = (cell or {}).get("under_load") or []
    if load:
        short.append("under load")
        full.append("under load: " + "; ".join(load))
    spread = sd / actual * 100 if actual > 0 and not math.isnan(sd) else math.nan
    if spread > NOISY_SPREAD_PCT:
        short.append(f"runs spread {spread:.0f} %")
        full.append(f"the runs' sd is {spread:.1f} % of the actual time (noisy above "
                    f"{NOISY_SPREAD_PCT:g} %)")
    return ", ".join(short), "; ".join(full)


def _key(r) -> tuple:
    return (r["paradigm"], int(r["ranks"]), str(r["size"]), r["network"])


def app_tables(err: pd.DataFrame, cells: list[dict],
               failed: list[dict] = ()) -> list[tuple[str, str, Table]]:
    """(app, what all its rows share, table) per application: one row per paradigm x P x size x
    network (the P = 1 baseline runs included, without predictions, and the ``failed`` cells,
    without results, their note the reason), one column per predictor
    with the signed relative error; a predictor's cell hovers its predicted time and range.
    Size and network columns are left out when they are the same on every row of the app."""
    by_key = {(c["app"],) + _key(c): c for c in cells}
    out = []
    for app in sorted(set(err.app) | {c["app"] for c in cells} | {f["app"] for f in failed}):
        e = err[err.app == app]
        preds = predictor_order(e.predictor)
        rows: dict[tuple, dict] = {}
        for _, r in e.iterrows():
            rows.setdefault(_key(r), {"actual": r.actual_s, "sd": r.actual_sd_s,
                                      "pert": r.perturbation_pct, "pred": {}})["pred"][
                r.predictor] = r
        for c in cells:
            if c["app"] == app and _key(c) not in rows:
                rows[_key(c)] = {"actual": c["actual_s"], "sd": c.get("actual_sd_s", math.nan),
                                 "pert": c.get("perturbation_pct", math.nan), "pred": {},
                                 "baseline": True}
        for f in failed:
            if f["app"] == app and _key(f) not in rows:
                rows[_key(f)] = {"actual": math.nan, "sd": math.nan, "pert": math.nan,
                                 "pred": {}, "failed": f.get("reason", "")}
        sizes = {k[2] for k in rows}
        nets = {k[3] for k in rows}
        shared = ([f"size {next(iter(sizes))}"] if len(sizes) == 1 else []) + \
            ([f"network {next(iter(nets))}"] if len(nets) == 1 else [])
        headers = ["paradigm", "P"] + (["size"] if len(sizes) > 1 else []) + \
            (["network"] if len(nets) > 1 else []) + \
            ["measured (s)", "sd (s)", "Tracing %"] + \
            [f"{predictor_name(p)} error %" for p in preds] + ["notes"]
        t = Table(headers, [False, True] + [False] * (len(headers) - 6 - len(preds))
                  + [True] * (3 + len(preds)) + [False])
        for k in sorted(rows):
            v = rows[k]
            row = [Td(k[0]), Td(str(k[1]))] + ([Td(k[2])] if len(sizes) > 1 else []) + \
                ([Td(k[3])] if len(nets) > 1 else [])
            row += [Td(_num(v["actual"])), Td(_num(v["sd"])), Td(fmt_pct(v["pert"]),
                    title="median traced / median untraced wall time - 1")]
            for p in preds:
                row.append(_pred_td(v["pred"].get(p), p, v["actual"]))
            cell = by_key.get((app,) + k)
            note, why = cell_notes(cell, v["actual"], v["sd"])
            if v.get("baseline"):
                note = "P = 1 baseline, no predictions" + (f", {note}" if note else "")
            cls = "warn" if why else ""
            if "failed" in v:
                note, why, cls = f"failed: {v['failed']}", v["failed"], "miss"
            elif (cell or {}).get("note"):
                # calls replay left out (matrix.untraced_note): said in full, a fact of the cell
                note = ", ".join(filter(None, [note, cell["note"]]))
                why = "; ".join(filter(None, [why, cell["note"]]))
                cls = cls or "warn"
            # a program's cell: no analytic model (a fact about the cell, not a warning)
            if (cell or {}).get("analytic_note"):
                note = ", ".join(filter(None, [note, "no analytic model"]))
                why = "; ".join(filter(None, [why, cell["analytic_note"]]))
            row.append(Td(note, title=why, cls=cls))
            t.rows.append(row)
        out.append((app, ", ".join(shared), t))
    return out


def _num(v: float) -> str:
    return "-" if v is None or math.isnan(v) else f"{v:.4f}"


def _pred_td(r, pred: str, actual: float) -> Td:
    if r is None:
        return Td("", title=f"{predictor_name(pred)}: not predicted for this cell")
    e = r.rel_error_pct
    if math.isnan(e):
        return Td("-", title=f"{predictor_name(pred)}: no prediction (the cell's JSON has the "
                  "model's note)")
    title = f"{predictor_name(pred)}: predicted {r.predicted_s:.4f} s, measured {actual:.4f} s"
    lo, hi = r.get("predicted_min_s", math.nan), r.get("predicted_max_s", math.nan)
    if not (math.isnan(lo) or math.isnan(hi)) and lo != hi:
        title += f"; the runs' own traces predicted {lo:.4f}-{hi:.4f} s"
    bad = abs(e) > TARGET_CELL
    return Td(fmt_pct(e), title=title, cls="miss" if bad else "", strong=bad)
