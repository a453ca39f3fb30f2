"""hindsight report: header facts, section order, per-app tables, charts that show every point,
the measured vs replayed timeline per cell, and the page in a real headless browser."""

import json
import re
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from hindsight import trace as tf
from validation.errors_table import write_errors
from validation.report import report
from validation.report_plots import error_plot, speedup, time_vs_ranks
from validation.report_svg import nice_ticks
from validation.report_timeline import MAX_LANE_RECTS, cell_timeline

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
# what a replay needs of a calibrated profile: the whole LogGPS section
FULL_PROFILE = PROFILE.replace("S = 4096.0", "S = 4096.0\ng = 0.0\nO = 0.0\no_b = 0.0")


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


# Two small programs (ns) that use every kind a timeline tells apart: compute, point-to-point,
# collective, wait.
P2_PROGRAMS = [
    [("compute", 2_000_000, "task"), ("isend", 1, 8192), ("compute", 1_000_000), ("wait", [0]),
     ("coll", "Allreduce", 8), ("sendrecv", 1, 1024, 1), ("compute", 500_000, "merge")],
    [("compute", 1_000_000), ("recv", 0), ("compute", 2_000_000, "task"),
     ("coll", "Allreduce", 8), ("sendrecv", 0, 1024, 0), ("compute", 200_000)],
]
P4_PROGRAMS = [[op for _ in range(3) for op in (("compute", 300_000 * (r + 1)),
                                                ("sendrecv", (r + 1) % 4, 4096, (r - 1) % 4),
                                                ("coll", "Barrier", 0))] for r in range(4)]
TRACED = {"sorting-pipeline-n2-s-shm": P2_PROGRAMS, "sorting-pipeline-n4-s-shm": P4_PROGRAMS,
          "components-hypercube-n2-s-shm": [
              [("compute", 1_500_000 * (r + 1)), ("sendrecv", 1 - r, 2048, 1 - r),
               ("coll", "Bcast", 64, 0), ("compute", 400_000)] for r in range(2)]}


@pytest.fixture
def traced_vdir(vdir):
    """``vdir`` with real (synthetic) trace files for three of its cells; the master-worker cell
    keeps a manifest only, the P = 1 baseline has nothing to replay."""
    from synthetic import simulate_to_dir

    (vdir / "profiles" / "shm.toml").write_text(FULL_PROFILE)
    for key, programs in TRACED.items():
        d = vdir / "traces" / key / "rep0"
        simulate_to_dir(d, programs, manifest=json.loads((d / "manifest.json").read_text()))
    return vdir


def _timelines(page: str) -> list[ET.Element]:
    return [ET.fromstring(m) for m in re.findall(r"<svg[^>]*class=\"timeline\".*?</svg>", page,
                                                 re.S)]


def _lanes(svg: ET.Element) -> dict[tuple[int, str], ET.Element]:
    return {(int(g.get("data-rank")), g.get("data-run")): g for g in svg.iter(f"{SVG}g")
            if g.get("class") == "lane"}


def _tips(lane: ET.Element) -> list[tuple[str, str]]:
    """(class of the bar, hover text) of every bar of a lane (a stacked bar: class "mix")."""
    out = []
    for el in lane:
        t = el.find(f"{SVG}title")
        out.append((el.get("class"), t.text if t is not None else ""))
    return out


_UNIT = {"ms": 1e6, "µs": 1e3, "ns": 1.0}
_KINDS = ("compute", "point-to-point / one-sided", "collective", "wait / test")


def _ns(value: str, unit: str) -> float:
    return float(value) * _UNIT[unit]


def _kind_times(lane: ET.Element) -> list[float]:
    """Time per kind (ns) as the lane's hover texts give it."""
    tot = [0.0] * 4
    kinds = "|".join(re.escape(k) for k in _KINDS)
    for cls, tip in _tips(lane):
        if m := re.search(r"duration ([\d.]+) (ms|µs|ns)", tip):
            tot[int(cls[2:])] += _ns(*m.groups())
        elif m := re.search(rf"of which ({kinds}) ([\d.]+) (ms|µs|ns)", tip):
            tot[_KINDS.index(m[1])] += _ns(m[2], m[3])
        else:
            for k, v, u in re.findall(rf"({kinds}) ([\d.]+) (ms|µs|ns) \(", tip):
                tot[_KINDS.index(k)] += _ns(v, u)
    return tot


def test_one_timeline_per_cell_with_a_trace(traced_vdir, tmp_path):
    """Every cell with its trace has a timeline: a measured and a replayed lane per rank whose
    bars' hover texts name each MPI call with its start (measured, and replayed as the replay
    engine computes it) and whose bars tile the rank's time; the cells without one are named
    once; the Markdown links each timeline's SVG file."""
    import replay
    from hindsight.trace import read_manifest
    from validation.profiles import read_profile, replay_kwargs

    report(traced_vdir, tmp_path / "rep")
    page = (tmp_path / "rep" / "report.html").read_text()
    md = (tmp_path / "rep" / "report.md").read_text()
    svgs = _timelines(page)
    titles = [s.find(f"{SVG}title").text for s in svgs]
    assert len(svgs) == 3 and sorted(titles) == sorted(
        f"{c}: measured vs replayed (LogGPS), rep0" for c in (
            "components / hypercube, P = 2, s, shm", "sorting / pipeline, P = 2, s, shm",
            "sorting / pipeline, P = 4, s, shm"))
    for doc in (page, md):
        assert doc.count("No timeline for") == 1
        assert ("No timeline for 1 cell(s) whose trace or profile is not in the validation folder "
                "(sorting / master-worker, P = 2, s, shm); the 1 P = 1 baseline run(s)") in doc
    prof = traced_vdir / "profiles" / "shm.toml"
    for svg, title in zip(svgs, titles):
        key = next(k for k in TRACED if title.startswith(
            "{} / {}, P = {}".format(*k.split("-")[:2], k.split("-")[2][1:])))
        assert f"![{title}](timeline-{key}.svg)" in md
        assert (tmp_path / "rep" / f"timeline-{key}.svg").read_text().startswith("<svg")
        prep = replay.prepare(traced_vdir / "traces" / key / "rep0")
        # the prediction's replay, the profile's rules for the trace included
        kw, _ = replay_kwargs("loggps", read_profile(prof), prof,
                              read_manifest(traced_vdir / "traces" / key / "rep0"))
        res = replay.run(prep, "loggps", **kw)
        lanes = _lanes(svg)
        assert set(lanes) == {(r, run) for r in range(prep.nranks)
                              for run in ("measured", "replayed")}
        rows = prep.rows
        times = {"measured": (rows.t_start - prep.t0, rows.t_end - prep.t0),
                 "replayed": (res.row_start_ns, res.row_end_ns)}
        kinds_seen = set()
        for (rank, run), lane in lanes.items():
            tips = _tips(lane)
            kinds_seen |= {c for c, _ in tips}
            assert all(t.startswith(f"rank {rank} {run}: ") for _, t in tips)
            start, end = times[run]
            mine = rows.rank == rank
            for i in np.flatnonzero(mine & (rows.op > 0)):
                op = tf.OPS[rows.op[i]]
                assert any(op in t and f"start {start[i] / 1e6:.3f} ms" in t for _, t in tips), \
                    (run, rank, op)
            # compute bursts and calls tile the rank's time, first row to last
            span = end[mine].max() - start[mine].min()
            assert sum(_kind_times(lane)) == pytest.approx(span, rel=1e-3, abs=300)
        if key == "sorting-pipeline-n2-s-shm":
            assert kinds_seen == {"tk0", "tk1", "tk2", "tk3"}  # compute, p2p, collective, wait
            assert any("compute (region task)" in t for _, t in _tips(lanes[0, "measured"]))
    caption = page.split("timeline-sorting-pipeline-n2-s-shm'>")[1].split("</figcaption>")[0]
    assert "replayed under LogGPS with profiles/shm.toml" in caption
    assert "Coarsened" not in caption


def test_timeline_of_a_big_trace_is_bounded_and_keeps_the_times(tmp_path):
    """120,000 rows: each lane is coarsened to at most MAX_LANE_RECTS rects, the caption says
    so, the page stays small, and the hover texts still add up to each kind's time."""
    from synthetic import ring_columns, write_trace

    iters, compute, step = 20_000, 5000, 3000
    v = tmp_path / "v"
    write_trace(v / "traces" / "ring" / "rep0", ring_columns(2, iters, compute_ns=compute,
                                                             step_ns=step, allreduce=True))
    (v / "profiles").mkdir()
    (v / "profiles" / "shm.toml").write_text(FULL_PROFILE)
    plot = cell_timeline(v, {"app": "ring", "paradigm": "program", "ranks": 2, "size": "big",
                             "network": "shm", "traces": ["traces/ring/rep0"],
                             "profile": "profiles/shm.toml", "replayed_rep": 0})
    assert "Coarsened: 4 of 4 lanes would have had more than 2,000 rects" in plot.note
    assert "120,000 trace rows" in plot.note
    assert len(plot.svg) < 1_500_000
    svg = ET.fromstring(plot.svg)
    lanes = _lanes(svg)
    assert len(lanes) == 4
    for (rank, run), lane in lanes.items():
        assert 0 < len(list(lane.iter(f"{SVG}rect"))) <= MAX_LANE_RECTS
        tips = [t for c, t in _tips(lane) if c == "mix"]
        assert tips and all("events merged (coarsened)" in t for t in tips)
        if run == "measured":   # the recorded schedule: every iteration compute, step, 2 steps
            c, p2p, coll, wait = _kind_times(lane)
            assert c == pytest.approx((iters - 1) * compute, rel=2e-3)
            assert p2p == pytest.approx(iters * step, rel=2e-3)
            assert coll == pytest.approx(iters * 2 * step, rel=2e-3)
            assert wait == 0


@pytest.mark.skipif(not CHROMIUM.exists(),
                    reason="/usr/bin/chromium not installed (Debian package chromium)")
def test_report_renders_in_a_headless_browser(traced_vdir, tmp_path):
    """The whole page (the timelines at its end included) in a real browser."""
    from PIL import Image

    from validation.report_timeline import COLOURS

    report(traced_vdir, tmp_path / "rep")
    shot = tmp_path / "shot.png"
    with tempfile.TemporaryDirectory() as profile:
        r = subprocess.run(
            [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu",
             "--disable-background-networking", "--disable-component-update", "--no-first-run",
             f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
             f"--screenshot={shot}", "--window-size=1280,6000",
             (tmp_path / "rep" / "report.html").as_uri()],
            capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    console = [ln for ln in r.stderr.splitlines() if ":CONSOLE" in ln]
    assert console == [], console
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(shot) as im:
        assert im.size == (1280, 6000)
        pixels = np.asarray(im.convert("RGB"))
    assert (pixels != pixels[0, 0]).any()
    # the timelines' compute bars (a colour no other chart uses) were drawn
    compute = tuple(int(COLOURS[0][i:i + 2], 16) for i in (1, 3, 5))
    assert (pixels == compute).all(axis=-1).sum() > 1000
    shutil.rmtree(tmp_path / "rep")


def test_groups_at_one_p_are_named_apart_and_oversubscribed_waits_are_not_judged():
    """Two sizes of one program measured at one P are two entries of the one-P notes (their
    sizes said); the perturbation table says an oversubscribed cell's waits were not judged."""
    import pandas as pd

    from validation.report import _perturbation_section, perturbation_table

    cells = [_cell("stencil", "program", 2, 0.4, size="100k")[1],
             _cell("stencil", "program", 2, 1.6, size="400k")[1],
             _cell("farm", "program", 3, 0.5, size="t40")[1]]
    cells[2]["oversubscribed"] = True
    (sp,) = speedup(cells)
    assert "stencil/program 100k (P = 2), stencil/program 400k (P = 2)" in sp.note, sp.note
    err = pd.DataFrame([{**{k: c[k] for k in ("app", "paradigm", "size", "network", "ranks")},
                         "predictor": "replay:loggps", "predicted_s": 1.0,
                         "rel_error_pct": 0.0} for c in cells])
    (plot,) = time_vs_ranks(err, cells)
    assert "stencil/program 100k (P = 2), stencil/program 400k (P = 2)" in plot.note
    _, table = _perturbation_section(perturbation_table(cells))
    column = {row[0].text: row[-1].text for row in table.rows}
    assert column == {"farm": "waits not judged (oversubscribed)", "stencil": "no"}


def test_report_keeps_its_default_folder_fresh_and_a_named_one_only_with_force(vdir, tmp_path):
    """The default DIR/report is rewritten on every run; an --out folder that holds files is
    refused (exit 2, nothing written) unless --force, which writes the report into it and
    leaves its other files; an empty one is taken."""
    from click.testing import CliRunner

    from hindsight.cli import main

    def run(*args):
        return CliRunner().invoke(main, ["report", str(vdir), *map(str, args)])

    assert run().exit_code == 0 and run().exit_code == 0
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    r = run("--out", mine)
    assert r.exit_code == 2 and r.output.strip() == (f"Error: --out {mine}: holds files; --force "
                                                     "writes the report into it (its other "
                                                     "files stay)")
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    assert run("--out", mine, "--force").exit_code == 0
    assert (mine / "report.md").is_file() and (mine / "notes.txt").read_text() == "keep"
    (tmp_path / "empty").mkdir()
    assert run("--out", tmp_path / "empty").exit_code == 0
