"""hindsight report: header facts, section order, per-app tables, charts that show every point,
and the page in a real headless browser."""

import json
import re
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from validation.errors_table import write_errors
from validation.report import report
from validation.report_plots import error_plot, speedup, time_vs_ranks
from validation.report_svg import nice_ticks

CHROMIUM = Path("/usr/bin/chromium")
SVG = "{http://www.w3.org/2000/svg}"


def _cell(app, paradigm, ranks, actual, preds=None, *, sd=0.01, load=(), baseline=False,
          size="s", network="shm", runs=("traces", "untraced")):
    key = f"{app}-{paradigm}-n{ranks}-{size}-{network}"
    return key, {
        "app": app, "paradigm": paradigm, "ranks": ranks, "size": size, "network": network,
        "baseline": baseline, "actual_s": actual, "actual_sd_s": sd, "replayed_rep": 0,
        "ground_truth": "untraced", "traced_s": actual * 1.02, "perturbation_pct": 2.0,
        "untraced_runs_s": [actual], "traced_runs_s": [actual * 1.02],
        "under_load": list(load), "profile": f"profiles/{network}.toml",
        "traces": [f"{runs[0]}/{key}/rep0"], "untraced": [f"{runs[1]}/{key}/rep0"],
        "predictions": [{"predictor": k, "predicted_s": v,
                         "rel_error_pct": (v - actual) / actual * 100}
                        for k, v in (preds or {}).items()]}


def _manifest(path: Path, *, start, load, wait, problems=()):
    path.mkdir(parents=True, exist_ok=True)
    path.joinpath("manifest.json").write_text(json.dumps({
        "start_unix": start, "end_unix": start + 1.0, "git_revision": "abcdef1234567890",
        "hosts": {"node7": [0, 1]}, "cores": 2, "mpi_library": "MPICH Version:   5.0.2",
        "oversubscribed": False,
        "conditions": {"loadavg_1m_before": load, "steal_fraction": 0.01,
                       "rank_run_queue_wait": [wait], "problems": list(problems)}}))


PROFILE = """format = "hindsight-profile/1"
quality = "ok"
[measured_on]
date = "2026-01-02T03:04:05+00:00"
api = "pickle"
[loggps]
L = 1e-6
o_send = 2e-6
o_recv = 3e-6
G = 1e-10
S = 4096.0
[fit]
r2_loggp = 0.9876
r2_hockney = 0.9543
[fit.check]
residual_worst = 0.25
residual_worst_size = 2097152
residual_median = 0.125
misses = []
"""


@pytest.fixture
def vdir(tmp_path):
    """A validation folder as `hindsight validate` leaves it, without traces: two apps, sorting
    at P = 1 (baseline), 2 and 4, one cell under load."""
    v = tmp_path / "v"
    cells = [
        _cell("sorting", "pipeline", 1, 1.0, baseline=True),
        _cell("sorting", "pipeline", 2, 0.6, {"replay:loggps": 0.63, "analytic:paper000": 0.3}),
        _cell("sorting", "pipeline", 4, 0.2, {"replay:loggps": 0.21, "analytic:paper000": 0.1},
              sd=0.002),
        _cell("sorting", "master-worker", 2, 0.5, {"replay:loggps": 0.52, "replay:hockney": 0.4},
              load=["rank 1 waited for a core 12.5 % of the time"], sd=0.05),
        _cell("components", "hypercube", 2, 0.05, {"replay:loggps": 0.055}, sd=0.001),
    ]
    (v / "cells").mkdir(parents=True)
    for i, (key, c) in enumerate(cells):
        (v / "cells" / f"{key}.json").write_text(json.dumps(c))
        _manifest(v / c["traces"][0], start=1_700_000_000 + 60 * i, load=0.5 + i, wait=0.01)
        _manifest(v / c["untraced"][0], start=1_700_000_030 + 60 * i, load=0.4, wait=0.02 * i,
                  problems=c["under_load"])
    write_errors(v)
    (v / "profiles").mkdir()
    (v / "profiles" / "shm.toml").write_text(PROFILE)
    (v / "spec.toml").write_text('name = "tiny"\nrepetitions = 1\nreplay_rep = "all"\n'
                                 '[networks.shm]\ntransport = "shm"\n')
    return v


def test_header_says_when_where_what_and_how_well_the_profile_fits(vdir, tmp_path):
    report(vdir, tmp_path / "rep")
    md = (tmp_path / "rep" / "report.md").read_text()
    header = md.split("## Verdict")[0]
    assert "2023-11-14 22:13 UTC" in header          # the first run's start
    assert "10 traced and 10 untraced runs" not in header and "5 traced and 5 untraced" in header
    assert "tiny (DIR/spec.toml): 1 repetitions" in header
    assert "abcdef123456" in header and "node7; 2 usable cores; MPICH Version: 5.0.2" in header
    assert "load average 0.40-4.50 when runs began" in header
    assert "1 of 10 runs under load" in header
    # the profile's fit: R², residuals, where it came from, judged ok
    assert ("| shm | profiles/shm.toml | calibrated 2026-01-02T03:04:05+00:00, pickle API | ok "
            "| 0.9876 | 0.9543 | 12.5 | +25.0 at 2097152 B |") in header


def test_verdict_and_summary_come_first_then_one_table_per_app(vdir, tmp_path):
    report(vdir, tmp_path / "rep")
    md = (tmp_path / "rep" / "report.md").read_text()
    order = [md.index(h) for h in ("# Validation report: tiny", "## Verdict",
                                   "## Summary per predictor", "## Results per application",
                                   "### components", "### sorting", "## Charts",
                                   "## Tracing perturbation", "## Method")]
    assert order == sorted(order)
    verdict = md.split("## Verdict")[1].split("##")[0]
    assert "Target met: LogGPS replay mean |error| 6.0 %" not in verdict
    # LogGPS errors +5, +5, +4, +10: mean 6.0, worst 10.0 -> mean above 5 %
    assert "Target NOT met: LogGPS replay mean |error| 6.0 %" in verdict
    assert "worst 10.0 %" in verdict and "under load" in verdict
    assert "4 predicted cells and 1 P = 1 baseline runs in 2 apps" in verdict
    assert "1 of 5 cells under load" in verdict and "1 with runs spread above 5 %" in verdict
    # predictors as columns with human names and units; rows paradigm x P; no summary rows
    sorting = md.split("### sorting")[1].split("##")[0]
    assert ("| paradigm | P | measured (s) | sd (s) | Tracing % | LogGPS replay error % | "
            "Hockney replay error % | paper 000 model error % | notes |") in sorting
    assert "| pipeline | 1 | 1.0000 | 0.0100 | +2.0 |  |  |  | P = 1 baseline, no predictions |" \
        in sorting
    assert "| pipeline | 4 | 0.2000 | 0.0020 | +2.0 | +5.0 |  | **-50.0** |  |" in sorting
    assert ("| master-worker | 2 | 0.5000 | 0.0500 | +2.0 | +4.0 | **-20.0** |  | "
            "under load, runs spread 10 % |") in sorting
    assert "Average" not in md and "mean_abs_pct" not in md
    assert "| LogGPS replay | 4 | 0 | 6.0 | 10.0 | 0 | +6.0 |" in md


def _plot_box(svg: str) -> tuple[float, float, float, float]:
    root = ET.fromstring(svg)
    box = next(r for r in root.iter(f"{SVG}rect") if r.get("stroke") == "#444")
    x, y = float(box.get("x")), float(box.get("y"))
    return x, y, x + float(box.get("width")), y + float(box.get("height"))


def _points(svg: str) -> list[tuple[float, float, str]]:
    """(x, y, hover text) of every data point (a <g class="pt"> with a <title>)."""
    out = []
    for g in ET.fromstring(svg).iter(f"{SVG}g"):
        if g.get("class") != "pt":
            continue
        m = next(iter(g.iter(f"{SVG}circle")), None)
        if m is None:
            r = next(iter(g.iter(f"{SVG}rect")))
            x, y = float(r.get("x")) + 4, float(r.get("y")) + 4
        else:
            x, y = float(m.get("cx")), float(m.get("cy"))
        out.append((x, y, g.find(f"{SVG}title").text))
    return out


def test_speedup_baseline_is_each_paradigms_own_smallest_p_and_nothing_is_clipped():
    """pipeline: P0 = 1; master-worker: P0 = 2 (not the pipeline's P = 1 run). A superlinear
    point (efficiency 1.25) lies inside the efficiency chart's axes."""
    cells = [_cell("sorting", "pipeline", 1, 1.0, baseline=True)[1],
             _cell("sorting", "pipeline", 2, 0.4)[1],
             _cell("sorting", "master-worker", 2, 0.5)[1],
             _cell("sorting", "master-worker", 4, 0.2)[1],
             _cell("sorting", "tree", 2, 0.7)[1]]
    sp, ef = speedup(cells)
    tips = [t for _, _, t in _points(ef.svg)]
    assert any("sorting/pipeline: P=2" in t and "T(P0=1)=1.0000 s" in t
               and "speedup 2.50, efficiency 1.25" in t for t in tips)
    assert any("sorting/master-worker: P=4" in t and "T(P0=2)=0.5000 s" in t
               and "speedup 2.50, efficiency 1.25" in t for t in tips)
    assert "tree (P = 2)" in sp.note and "one P only" in sp.note
    for plot in (sp, ef):
        x0, y0, x1, y1 = _plot_box(plot.svg)
        pts = _points(plot.svg)
        assert len(pts) == 4
        assert all(x0 < x < x1 and y0 < y < y1 for x, y, _ in pts)


def test_no_time_vs_ranks_chart_with_one_p_and_it_says_so(vdir):
    import pandas as pd

    err = pd.read_csv(vdir / "errors.csv")
    one_p = err[err.app == "components"]
    cells = [json.loads(p.read_text()) for p in (vdir / "cells").glob("components-*.json")]
    (plot,) = time_vs_ranks(one_p, cells)
    assert plot.svg is None and "one P only" in plot.note and "components/hypercube" in plot.note
    # sorting/pipeline has P = 1, 2, 4: a chart whose markers all lie inside the axes
    cells = [json.loads(p.read_text()) for p in (vdir / "cells").glob("sorting-pipeline-*.json")]
    (plot,) = time_vs_ranks(err[(err.app == "sorting") & (err.paradigm == "pipeline")], cells)
    x0, y0, x1, y1 = _plot_box(plot.svg)
    pts = _points(plot.svg)
    assert len(pts) == 3 + 2 + 2 and all(x0 < x < x1 and y0 < y < y1 for x, y, _ in pts)


def test_error_chart_hover_gives_the_cells_numbers(vdir):
    import pandas as pd

    plot = error_plot(pd.read_csv(vdir / "errors.csv"))
    tips = [t for _, _, t in _points(plot.svg)]
    assert any("sorting/pipeline P=4" in t and "paper 000 model: error -50.0 %" in t
               and "predicted 0.1000 s" in t and "measured 0.2000 s" in t for t in tips)
    _x0, y0, _x1, y1 = _plot_box(plot.svg)
    assert all(y0 < y < y1 for _, y, _ in _points(plot.svg))   # -50 % is not cut off


def test_nice_ticks_cover_the_range():
    t = nice_ticks(-53.2, 12.0)
    step = t[1] - t[0]
    assert t == [-40.0, -20.0, 0.0] and t[0] - step < -53.2 and t[-1] + step > 12.0
    assert nice_ticks(0.0, 1.25) == [0.0, 0.25, 0.5, 0.75, 1.0, 1.25]


def test_html_is_self_contained(vdir, tmp_path):
    paths = report(vdir, tmp_path / "rep")
    page = (tmp_path / "rep" / "report.html").read_text()
    assert "<script" not in page and "<link" not in page and "src='http" not in page
    assert not re.search(r"(?:src|href)=['\"](?!data:|#)", page)
    assert page.count("<svg") >= 3 and "<title>" in page
    assert all(p.exists() and p.stat().st_size > 0 for p in paths)
    assert (tmp_path / "rep" / "rel_error.svg").read_text().startswith("<svg")


@pytest.mark.skipif(not CHROMIUM.exists(),
                    reason="/usr/bin/chromium not installed (Debian package chromium)")
def test_report_renders_in_a_headless_browser(vdir, tmp_path):
    from PIL import Image

    report(vdir, tmp_path / "rep")
    shot = tmp_path / "shot.png"
    with tempfile.TemporaryDirectory() as profile:
        r = subprocess.run(
            [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu",
             "--disable-background-networking", "--disable-component-update", "--no-first-run",
             f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
             f"--screenshot={shot}", "--window-size=1280,2000",
             (tmp_path / "rep" / "report.html").as_uri()],
            capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    console = [ln for ln in r.stderr.splitlines() if ":CONSOLE" in ln]
    assert console == [], console
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(shot) as im:
        assert im.size == (1280, 2000)
        colours = im.convert("RGB").getcolors(maxcolors=1 << 16)
    assert colours is None or len(colours) > 1
    shutil.rmtree(tmp_path / "rep")
