"""hindsight validate / report: spec checking, errors.csv, resume, report, one tiny real run."""

import dataclasses
import json
import math
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from hindsight.cli import main as cli
from validation.errors_table import ERRORS_COLUMNS, write_errors
from validation.profiles import ensure_profile, read_profile
from validation.spec import SpecError, load_spec
from validation.validate import validate

SPEC = """
name = "t"
repetitions = 1
[networks.shm]
transport = "shm"
profile = "prof.toml"
[predictors]
replay = ["loggps", "hockney"]
[[experiment]]
app = "sorting"
paradigms = ["pipeline"]
ranks = [2]
baseline = false
[experiment.sizes]
"4x8192" = ["--arrays", "4", "--array-size", "8192"]
"""

PROFILE = {"loggps": {"L": 5e-6, "o_send": 2e-6, "o_recv": 2e-6, "g": 0.0, "G": 2e-9,
                      "S": 65536.0},
           "hockney": {"l": 9e-6, "g": 2e-9}, "mm1": {"C": 5e8, "tau": 9e-6},
           "measured_on": {"transport": "shm"}}


def write_profile(path: Path, sections: dict) -> None:
    """A flat profile file (model sections, no format tag)."""
    import tomli_w
    path.write_text(tomli_w.dumps(sections))


def _spec(tmp_path, text=SPEC):
    write_profile(tmp_path / "prof.toml", PROFILE)
    p = tmp_path / "spec.toml"
    p.write_text(text)
    return p


def test_default_spec_parses():
    sp = load_spec(None)
    assert sp.cells and sp.repetitions >= 2
    assert any(c.baseline for c in sp.cells) and any(c.paradigm == "hypercube" for c in sp.cells)


@pytest.mark.parametrize("edit,msg", [
    (('app = "sorting"', 'app = "nope"'), "unknown app"),
    (('ranks = [2]', 'ranks = [1]'), "ranks must be"),
    (('paradigms = ["pipeline"]', 'paradigms = ["hypercube"]'), None),
    (('replay = ["loggps", "hockney"]', 'replay = ["warp"]'), "unknown replay model"),
    # a model named twice would be counted twice in the report's summary
    (('replay = ["loggps", "hockney"]', 'replay = ["loggps", "hockney", "loggps"]'),
     r"\[predictors\]: replay names 'loggps' twice"),
    (('profile = "prof.toml"', 'profile = "missing.toml"'), "profile not found"),
    (('repetitions = 1', 'repetitions = = 1'), "not valid TOML"),
    (('repetitions = 1', 'repetitions = 1\nground_truth = "wall"'), "ground_truth must be"),
    (('repetitions = 1', 'repetitions = 1\norder = "random"'), "order must be"),
    # set.MODEL is checked as `replay --set` is, before any run
    (('replay = ["loggps", "hockney"]', 'replay = ["loggps"]\nset.loggps = ["Q=1us"]'),
     r"\[predictors\]: set.loggps: .*Q"),
    (('replay = ["loggps", "hockney"]', 'replay = ["loggps"]\nset.loggps = ["L=abc"]'),
     r"\[predictors\]: set.loggps: .*abc"),
    (('replay = ["loggps", "hockney"]', 'replay = ["loggps"]\nset.hockney = ["l"]'),
     r"\[predictors\]: set.hockney: 'l' is not NAME=VALUE"),
])
def test_bad_specs_are_one_line_errors(tmp_path, edit, msg):
    p = _spec(tmp_path, SPEC.replace(*edit))
    if msg is None:
        assert load_spec(p).cells[0].paradigm == "hypercube"
        return
    with pytest.raises(SpecError, match=msg):
        load_spec(p)


@pytest.mark.parametrize("edit,table,key,near", [
    (("repetitions = 1", "repetiton = 1"), "top level", "repetiton", "repetitions"),
    (('transport = "shm"', 'transport = "shm"\ncalibrat = "pickle"'), "[networks.shm]",
     "calibrat", "calibrate"),
    (('replay = ["loggps", "hockney"]', 'replay = ["loggps"]\nanalitic = false'),
     "[predictors]", "analitic", "analytic"),
    (('replay = ["loggps", "hockney"]', 'replay = ["loggps"]\nset.logps = ["S=1"]'),
     "[predictors.set]", "logps", "loggps"),
    (("ranks = [2]", "ranks = [2]\nranks2 = 1"), "[[experiment]] 1", "ranks2", "ranks"),
    (("baseline = false", "baseline = false\npredict_onn = []"), "[[experiment]] 1",
     "predict_onn", "predict_on"),
])
def test_unknown_spec_keys_are_refused(tmp_path, edit, table, key, near):
    """A misspelt key is an error naming the file, the table and the key, never ignored."""
    p = _spec(tmp_path, SPEC.replace(*edit))
    with pytest.raises(SpecError) as exc:
        load_spec(p)
    assert str(exc.value) == (f"spec {p}: {table}: unknown key '{key}' (did you mean "
                              f"'{near}'?)")
    r = CliRunner().invoke(cli, ["validate", str(p), "--out", str(tmp_path / "v")])
    assert r.exit_code == 1 and r.output.strip() == f"Error: {exc.value}"
    assert not (tmp_path / "v").exists()


@pytest.mark.parametrize("edit,msg", [
    (('replay = ["loggps", "hockney"]', 'replay = "loggps"'),
     r"\[predictors\]: 'replay' must be a list of strings"),
    (('replay = ["loggps", "hockney"]', 'replay = ["loggps"]\nanalytic = "false"'),
     r"'analytic' must be true or false, not 'false'"),
    (('replay = ["loggps", "hockney"]', 'replay = ["loggps"]\nset.loggps = "S=1"'),
     r"\[predictors\] set: 'loggps' must be a list of strings"),
    (("repetitions = 1", 'repetitions = "3"'), r"top level: 'repetitions' must be a whole"),
    (("repetitions = 1", "repetitions = 1\ntimeout = 0"), r"'timeout' must be a number > 0"),
    (("baseline = false", 'baseline = "no"'), r"experiment 1: 'baseline' must be true or"),
    (("baseline = false", 'baseline = false\npredict_on = "shm"'),
     r"experiment 1: 'predict_on' must be a list of strings"),
])
def test_spec_values_of_the_wrong_type_are_refused(tmp_path, edit, msg):
    """A value of the wrong TOML type is refused in one line, never read another way (a string
    iterated by character, "false" taken as true)."""
    p = _spec(tmp_path, SPEC.replace(*edit))
    with pytest.raises(SpecError, match=msg):
        load_spec(p)
    r = CliRunner().invoke(cli, ["validate", str(p), "--out", str(tmp_path / "v")])
    assert r.exit_code == 1 and r.output.count("Error:") == 1


def test_a_bare_number_for_a_time_in_set_is_noted(tmp_path):
    """``set.loggps = ["L=5"]`` is 5 s, as ``replay --set L=5`` is: said before any run (here
    an --out inside a file stops the command right after)."""
    p = _spec(tmp_path, SPEC.replace('replay = ["loggps", "hockney"]',
                                     'replay = ["loggps"]\nset.loggps = ["L=5", "S=64KiB"]'))
    (tmp_path / "v").write_text("")
    r = CliRunner().invoke(cli, ["validate", str(p), "--out", str(tmp_path / "v" / "out")])
    assert r.exit_code != 0 and "Error: --out" in r.output
    notes = [line for line in r.output.splitlines() if line.startswith("note:")]
    assert notes == [f"note: spec {p}: set.loggps: L=5: a number without a unit is in s (5 s); "
                     "write e.g. 5us for microseconds"]


def test_unknown_testbed_key_is_refused(tmp_path):
    p = _spec(tmp_path, SPEC.replace('transport = "shm"',
                                     'transport = "tcp"\ntestbed = {nodes = 2, rat = "1gbit"}'))
    with pytest.raises(SpecError, match=r"\[networks.shm\] testbed: unknown key 'rat' \(did "
                                        r"you mean 'rate'\?\)"):
        load_spec(p)


def test_every_shipped_spec_loads():
    for p in sorted((Path(__file__).resolve().parent.parent / "specs").glob("*.toml")):
        assert load_spec(p).cells, p


def test_cli_errors_have_no_traceback(tmp_path):
    r = CliRunner().invoke(cli, ["validate", str(tmp_path / "none.toml"), "--out", str(tmp_path)])
    assert r.exit_code == 1 and "spec not found" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(cli, ["report", str(tmp_path / "missing")])
    assert r.exit_code == 1 and "no such folder" in r.output
    (tmp_path / "empty").mkdir()
    r = CliRunner().invoke(cli, ["report", str(tmp_path / "empty")])
    assert r.exit_code == 1 and "no errors.csv" in r.output


def test_profile_roundtrip(tmp_path):
    write_profile(tmp_path / "p.toml", PROFILE)
    assert read_profile(tmp_path / "p.toml")["loggps"]["G"] == 2e-9
    # a JSON parameter file given as a network's profile is copied as a TOML one
    (tmp_path / "p.json").write_text(json.dumps({"models": PROFILE}))
    net = {"profile": str(tmp_path / "p.json"), "accept_noisy_profiles": True}
    dest = ensure_profile(tmp_path / "v", "shm", net, lambda m: None)
    copied = read_profile(dest)
    assert copied["loggps"] == PROFILE["loggps"] and copied["mm1"] == PROFILE["mm1"]
    assert copied["validation_source"]["profile"] == str(tmp_path / "p.json")


def _fake_cell(out: Path, key: str, actual: float, preds: dict[str, float], ranks=2):
    c = {"app": "sorting", "paradigm": "pipeline", "ranks": ranks, "size": "s", "network": "shm",
         "baseline": False, "actual_s": actual, "actual_sd_s": 0.01, "replayed_rep": 0,
         "traces": [], "profile": "profiles/shm.toml",
         "predictions": [{"predictor": k, "predicted_s": v,
                          "rel_error_pct": (v - actual) / actual * 100} for k, v in preds.items()]}
    (out / "cells").mkdir(parents=True, exist_ok=True)
    (out / "cells" / f"{key}.json").write_text(json.dumps(c))


def test_errors_csv_and_report_tables(tmp_path):
    import pandas as pd
    from validation.report import report

    _fake_cell(tmp_path, "a", 2.0, {"replay:loggps": 2.2, "analytic:paper000": 1.0})
    _fake_cell(tmp_path, "b", 4.0, {"replay:loggps": 3.8, "analytic:paper000": 5.0}, ranks=4)
    write_errors(tmp_path)
    df = pd.read_csv(tmp_path / "errors.csv")
    assert list(df.columns) == ERRORS_COLUMNS and len(df) == 4
    lg = df[df.predictor == "replay:loggps"].set_index("ranks")["rel_error_pct"]
    assert lg[2] == pytest.approx(10.0) and lg[4] == pytest.approx(-5.0)
    paths = report(tmp_path, tmp_path / "rep")
    md = (tmp_path / "rep" / "report.md").read_text()
    # one summary per predictor: mean |error| 7.5, worst 10, mean signed +2.5
    assert "| LogGPS replay | 2 | 0 | 7.5 | 10.0 | 0 | +2.5 |" in md
    assert "Average Relative Error" not in md
    # cells without untraced runs measured the traced ones; no perturbation to show
    assert set(df.ground_truth) == {"traced"} and df.perturbation_pct.isna().all()
    assert "| pipeline | 2 | 2.0000 | 0.0100 | - | +10.0 | **-50.0** |  |" in md
    assert "No untraced runs" in md
    page = (tmp_path / "rep" / "report.html").read_text()
    assert "<svg" in page and "src='rel_error" not in page
    assert all(p.exists() and p.stat().st_size > 0 for p in paths)


def test_tiny_real_validation_and_resume(tmp_path):
    """One real cell end to end (collect, replay, analytic), then a re-run that reuses it.
    ``ground_truth = "traced"``: the traced runs are the actual time, no untraced runs."""
    sp = load_spec(_spec(tmp_path, SPEC.replace("repetitions = 1",
                                                'repetitions = 1\nground_truth = "traced"')
                         .replace('replay = ["loggps", "hockney"]',
                                  'replay = ["loggps", "hockney"]\nset.loggps = ["L=3us"]')))
    out = tmp_path / "v"
    s1 = validate(sp, out, progress=False, log=lambda m: None)
    assert s1["run"] == 1 and s1["failed"] == 0
    cell = json.loads(next((out / "cells").glob("*.json")).read_text())
    assert cell["ground_truth"] == "traced" and not (out / "untraced").exists()
    assert cell["actual_runs_s"] == cell["traced_runs_s"] and cell["untraced"] == []
    assert math.isnan(cell["perturbation_pct"])
    assert (out / cell["traces"][0] / "manifest.json").is_file()
    assert (out / "profiles" / "shm.toml").is_file()
    preds = {p["predictor"]: p for p in cell["predictions"]}
    assert {"replay:loggps", "replay:hockney", "analytic:paper000"} <= set(preds)
    for p in preds.values():
        if not math.isnan(p["predicted_s"]):
            assert p["predicted_s"] > 0
            assert p["rel_error_pct"] == pytest.approx(
                (p["predicted_s"] - cell["actual_s"]) / cell["actual_s"] * 100)
    assert preds["analytic:paper000"]["inputs"]["N"] == 4        # 4 tasks measured
    # each prediction's parameters are those it ran with: the profile's, then set.MODEL's
    assert preds["replay:loggps"]["set"] == ["L=3us"]
    assert preds["replay:loggps"]["params"]["L"] == pytest.approx(3e-6)
    assert preds["replay:loggps"]["params"]["G"] == pytest.approx(PROFILE["loggps"]["G"])
    assert preds["replay:hockney"]["params"]["l"] == pytest.approx(PROFILE["hockney"]["l"])
    s2 = validate(sp, out, progress=False, log=lambda m: None)
    assert s2["run"] == 0 and s2["skipped"] == 1
    # an interrupted cell (no cell json, partial trace dir) is redone on the next run
    (out / "cells" / next((out / "cells").glob("*.json")).name).unlink()
    shutil.rmtree(out / cell["traces"][0])
    (out / cell["traces"][0]).mkdir(parents=True)
    s3 = validate(sp, out, progress=False, log=lambda m: None)
    assert s3["run"] == 1


def test_every_run_predicted_from_its_own_trace(tmp_path, run_hindsight):
    """replay_rep = "all": each repetition is replayed from its own trace and the prediction is
    the mean of those; the network is calibrated by `hindsight calibrate --api pickle`, and the
    profile it leaves is one `hindsight replay --profile` reads."""
    # accept_noisy_profiles: other work on the machine may make the profile noisy; what
    # validate does with a noisy one is tested in test_calibration_quality.py
    text = "accept_noisy_profiles = true\n" + (
        SPEC.replace('profile = "prof.toml"', 'calibrate = "pickle"')
        .replace("repetitions = 1", 'repetitions = 2\nreplay_rep = "all"'))
    p = tmp_path / "spec.toml"
    p.write_text(text)
    sp = load_spec(p)
    assert sp.replay_all
    out = tmp_path / "v"
    s = validate(sp, out, progress=False, log=lambda m: None)
    assert s["failed"] == 0
    cell = json.loads(next((out / "cells").glob("*.json")).read_text())
    prof = out / "profiles" / "shm.toml"
    assert read_profile(prof)["measured_on"]["api"] == "pickle"
    import replay
    from hindsight import trace as tf
    from validation.profiles import replay_kwargs
    for pred in cell["predictions"]:
        if pred["predictor"] != "replay:loggps":
            continue
        assert len(pred["per_rep_s"]) == 2
        assert pred["predicted_s"] == pytest.approx(sum(pred["per_rep_s"]) / 2)
        for k, q in enumerate(pred["per_rep_s"]):
            prep = replay.prepare(out / cell["traces"][k])
            m = tf.read_manifest(out / cell["traces"][k])
            # the application's trace is the Python tracer's: its own time per call is taken
            # off the bursts (rule python_tracer_in_bursts, the profile's [python_tracer])
            kw, rules = replay_kwargs("loggps", read_profile(prof), prof, m)
            assert rules.tracer is not None and kw["tracer_cost"] is not None
            r = replay.run(prep, "loggps", **kw)
            mk = m["makespan_ns"]
            lead = (mk - prep.measured_makespan_ns) / 1e9
            # the actual time is the untraced runs' wall time (start barrier to the end of the
            # program): the traced run's time after its last event is added to the prediction
            tail = (m["wall_ns"] - mk) / 1e9
            assert tail >= 0
            assert q == pytest.approx(r.makespan_ns / 1e9 + lead + tail)
    trace = out / cell["traces"][1]
    r = run_hindsight("replay", str(trace), "--model", "loggps", "--profile", str(prof), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["predicted_makespan_s"] > 0


def test_actual_time_is_the_untraced_runs(tmp_path):
    """The default ground truth: every repetition is a traced run followed by an untraced one
    (DIR/untraced/<cell>/rep<k>/manifest.json, traced = false); the actual time, the errors and
    the tracing perturbation are computed from the untraced runs' manifests; errors.csv and the
    report carry the perturbation; a re-run reuses every run."""
    import statistics

    import pandas as pd

    from hindsight import trace as tf
    from validation.report import report

    sp = load_spec(_spec(tmp_path, SPEC.replace("repetitions = 1",
                                                'repetitions = 2\nactual = "median"')))
    assert sp.ground_truth == "untraced"
    out = tmp_path / "v"
    s1 = validate(sp, out, progress=False, log=lambda m: None)
    assert s1["run"] == 1 and s1["failed"] == 0
    cell = json.loads(next((out / "cells").glob("*.json")).read_text())
    assert cell["ground_truth"] == "untraced" and len(cell["untraced"]) == 2
    untraced, traced, makespans = [], [], []
    for k in range(2):
        u = out / cell["untraced"][k]
        m = json.loads((u / "manifest.json").read_text())
        assert m["traced"] is False and m["complete"] and m["makespan_ns"] > 0
        assert u == out / "untraced" / cell_key(cell) / f"rep{k}"
        assert not list(u.glob("rank-*.parquet"))
        untraced.append(m["makespan_ns"] / 1e9)
        assert m["makespan_ns"] == m["wall_ns"]
        mt = tf.read_manifest(out / cell["traces"][k])
        assert mt["traced"] is True
        # the same interval of the traced run: start barrier to the end of the program
        assert mt["wall_ns"] >= mt["makespan_ns"]
        traced.append(mt["wall_ns"] / 1e9)
        makespans.append(mt["makespan_ns"] / 1e9)
        # interleaved: the untraced run of a repetition started after its traced run ended
        assert m["start_unix"] >= mt["end_unix"]
    assert cell["actual_runs_s"] == pytest.approx(untraced)
    assert cell["actual_s"] == pytest.approx(statistics.median(untraced))
    assert cell["traced_s"] == pytest.approx(statistics.median(traced))
    pert = (statistics.median(traced) / statistics.median(untraced) - 1) * 100
    assert cell["perturbation_pct"] == pytest.approx(pert)
    df = pd.read_csv(out / "errors.csv")
    assert list(df.columns) == ERRORS_COLUMNS
    for p in cell["predictions"]:
        row = df[df.predictor == p["predictor"]].iloc[0]
        assert row.actual_s == pytest.approx(statistics.median(untraced), abs=1e-6)
        assert row.traced_s == pytest.approx(statistics.median(traced), abs=1e-6)
        assert row.traced_makespan_s == pytest.approx(statistics.median(makespans), abs=1e-6)
        assert row.perturbation_pct == pytest.approx(pert, abs=1e-3)
        assert row.ground_truth == "untraced"
        if not math.isnan(p["predicted_s"]):
            assert row.rel_error_pct == pytest.approx(
                (p["predicted_s"] - statistics.median(untraced)) / statistics.median(untraced)
                * 100, abs=1e-3)
    report(out, out / "report")
    md = (out / "report" / "report.md").read_text()
    assert "## Tracing perturbation" in md and "Tracing %" in md
    assert f"| {pert:+.1f} |" in md
    # the run's real trace replayed into the cell's timeline: both lanes of both ranks
    page = (out / "report" / "report.html").read_text()
    assert page.count('class="timeline"') == 1 and "No timeline" not in page
    assert all(f'data-rank="{r}" data-run="{run}"' in page for r in (0, 1)
               for run in ("measured", "replayed"))
    s2 = validate(sp, out, progress=False, log=lambda m: None)
    assert s2["run"] == 0 and s2["skipped"] == 1


def cell_key(cell: dict) -> str:
    return f"{cell['app']}-{cell['paradigm']}-n{cell['ranks']}-{cell['size']}-{cell['network']}"


def test_cells_taken_under_load_are_labelled():
    """A run's recorded load problems reach its cell (and the report's perturbation table)."""
    from validation.report import _perturbation_md, perturbation_table
    from validation.matrix import under_load

    quiet = {"conditions": {"problems": []}}
    loaded = {"conditions": {"problems": ["load average 3.10 on 2 cores when it began"]}}
    assert under_load([quiet, {}]) == []
    assert under_load([quiet, loaded, loaded]) == ["load average 3.10 on 2 cores when it began"]
    cell = {"app": "a", "paradigm": "p", "ranks": 2, "size": "s", "network": "shm",
            "untraced_runs_s": [1.0], "traced_runs_s": [1.1], "perturbation_pct": 10.0,
            "under_load": under_load([loaded])}
    md = "\n".join(_perturbation_md(perturbation_table([cell])))
    assert "load average 3.10 on 2 cores" in md


def test_errors_csv_gives_the_range_of_the_repetitions_predictions(tmp_path):
    """Every repetition predicted from its own trace: errors.csv carries their range beside the
    mean, and the report prints it."""
    import csv

    from validation.report import load_results
    from validation.report_tables import app_tables

    (tmp_path / "cells").mkdir()
    cell = {"app": "a", "paradigm": "p", "ranks": 2, "size": "s", "network": "shm",
            "actual_s": 1.0, "actual_sd_s": 0.1, "ground_truth": "untraced", "traced_s": 1.05,
            "perturbation_pct": 5.0,
            "predictions": [{"predictor": "replay:loggps", "predicted_s": 0.95,
                             "per_rep_s": [0.9, 0.95, 1.0], "rel_error_pct": -5.0}]}
    (tmp_path / "cells" / "a.json").write_text(json.dumps(cell))
    write_errors(tmp_path)
    row = next(csv.DictReader(open(tmp_path / "errors.csv")))
    assert float(row["predicted_min_s"]) == 0.9 and float(row["predicted_max_s"]) == 1.0
    err, _, _ = load_results(tmp_path)
    assert "0.9000-1.0000" in app_tables(err, [])[0][2].html()


# -- resuming: a cell is reused only when it was made with the same spec inputs ------------------

def _fake_run_cell(monkeypatch, calls: list):
    """validate with every cell 'run' instantly: one traced run dir and a cell result."""
    import validation.validate as V

    def run_cell(cell, spec, out, profile_path):
        calls.append(cell.key)
        rep = out / "traces" / cell.key / "rep0"
        rep.mkdir(parents=True, exist_ok=True)
        (rep / "manifest.json").write_text(json.dumps({"args": {"argv": cell.args}}))
        return {"app": cell.app, "paradigm": cell.paradigm, "ranks": cell.ranks,
                "size": cell.size, "args": cell.args, "network": cell.network,
                "baseline": cell.baseline, "repetitions": spec.repetitions,
                "ground_truth": spec.ground_truth, "actual_s": 1.0, "actual_sd_s": 0.0,
                "predictions": [{"predictor": "replay:loggps", "predicted_s": 1.1,
                                 "rel_error_pct": 10.0}]}
    monkeypatch.setattr(V, "run_cell", run_cell)


def _validate_cli(spec: Path, out: Path, *extra: str):
    return CliRunner().invoke(
        cli, ["validate", str(spec), "--out", str(out), "--no-progress", *extra])


def test_resume_reuses_only_cells_of_the_same_spec(tmp_path, monkeypatch):
    """Another spec's results in --out are never counted as reused nor described by the new
    DIR/spec.toml: a changed cell is re-run, its old results moved to DIR/stale/1/ (one line)."""
    calls: list = []
    _fake_run_cell(monkeypatch, calls)
    p1 = _spec(tmp_path)
    out = tmp_path / "v"
    r = _validate_cli(p1, out, "--json")
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    assert (s["run"], s["skipped"], s["failed"], s["moved_aside"]) == (1, 0, 0, [])
    key = calls[0]
    r = _validate_cli(p1, out, "--json")                 # the same spec: reused
    assert json.loads(r.stdout)["skipped"] == 1 and calls == [key]
    # only a statistic changed: the cell is redone from its runs, which are kept
    p2 = tmp_path / "spec2.toml"
    p2.write_text(SPEC.replace("repetitions = 1", 'repetitions = 1\nactual = "median"'))
    r = _validate_cli(p2, out)
    assert r.exit_code == 0 and r.stdout.startswith("1 cells run, 0 reused")
    assert calls == [key, key]
    warn = [line for line in r.stderr.splitlines() if line.startswith("warning:")]
    assert warn == [f"warning: cell {key} was made with another spec (changed: actual): its "
                    f"results moved to {out / 'stale' / '1'}/; its runs are reused"]
    assert (out / "stale" / "1" / "cells" / f"{key}.json").is_file()
    assert (out / "stale" / "1" / "spec.toml").read_text() == p1.read_text()
    assert (out / "spec.toml").read_text() == p2.read_text()
    assert (out / "traces" / key / "rep0").is_dir()
    # the application's arguments changed: the runs are another program's, moved too
    p3 = tmp_path / "spec3.toml"
    p3.write_text(p2.read_text().replace('"8192"]', '"4096"]'))
    r = _validate_cli(p3, out)
    assert r.stdout.startswith("1 cells run, 0 reused") and calls == [key] * 3
    assert "changed: args): its results and runs moved to" in r.stderr
    assert (out / "stale" / "2" / "traces" / key / "rep0").is_dir()
    assert json.loads((out / "cells" / f"{key}.json").read_text())["spec_inputs"]["runs"][
        "args"][-1] == "4096"


def test_resume_moves_aside_cells_the_spec_does_not_have(tmp_path, monkeypatch):
    import pandas as pd

    calls: list = []
    _fake_run_cell(monkeypatch, calls)
    p1 = _spec(tmp_path)
    out = tmp_path / "v"
    assert _validate_cli(p1, out).exit_code == 0
    p2 = tmp_path / "other.toml"
    p2.write_text(SPEC.replace('"4x8192"', '"4x4096"'))
    r = _validate_cli(p2, out, "--quiet")
    assert r.exit_code == 0 and len(calls) == 2
    old, new = calls
    assert r.stderr.splitlines() == [f"warning: cell {old} is not in spec {p2}: its results "
                                     f"moved to {out / 'stale' / '1'}/"]
    assert [f.stem for f in (out / "cells").glob("*.json")] == [new]
    assert not (out / "traces" / old).exists()
    assert set(pd.read_csv(out / "errors.csv")["size"]) == {"4x4096"}


def test_resume_redoes_a_cell_whose_profile_changed(tmp_path, monkeypatch):
    calls: list = []
    _fake_run_cell(monkeypatch, calls)
    p = _spec(tmp_path)
    out = tmp_path / "v"
    assert _validate_cli(p, out).exit_code == 0
    write_profile(tmp_path / "prof.toml", PROFILE | {"hockney": {"l": 1e-5, "g": 2e-9}})
    r = _validate_cli(p, out)
    assert r.stdout.startswith("1 cells run, 0 reused") and len(calls) == 2
    assert "warning: profile of network shm was made for another definition" in r.stderr
    assert read_profile(out / "profiles" / "shm.toml")["hockney"]["l"] == 1e-5


def test_resume_of_a_cell_file_without_spec_inputs(tmp_path):
    """Cell files of an older hindsight are compared on the fields they record."""
    from validation.validate import cell_inputs, changed_inputs

    sp = load_spec(_spec(tmp_path))
    cell = sp.cells[0]
    f = tmp_path / "c.json"
    old = {"app": cell.app, "paradigm": cell.paradigm, "ranks": cell.ranks, "size": cell.size,
           "args": cell.args, "network": cell.network, "baseline": False, "repetitions": 1,
           "ground_truth": "untraced", "actual_stat": "mean"}
    f.write_text(json.dumps(old))
    assert changed_inputs(f, cell_inputs(cell, sp)) == []
    f.write_text(json.dumps(old | {"repetitions": 3}))
    assert changed_inputs(f, cell_inputs(cell, sp)) == ["repetitions"]
    del old["ground_truth"]                 # measured against the traced runs
    f.write_text(json.dumps(old))
    assert changed_inputs(f, cell_inputs(cell, sp)) == ["ground_truth"]


def test_validate_quiet_and_json(tmp_path, monkeypatch):
    _fake_run_cell(monkeypatch, [])
    r = _validate_cli(_spec(tmp_path), tmp_path / "v", "--quiet", "--json")
    assert r.exit_code == 0 and r.stderr == ""
    s = json.loads(r.stdout)
    assert s["cells"] == 1 and s["run"] == 1 and s["failed_cells"] == []
    assert s["errors_csv"] == str(tmp_path / "v" / "errors.csv")


# -- a program of the user's in place of an application ------------------------------------------

WORKLOADS = Path(__file__).resolve().parent.parent / "workloads"

PROGRAM_SPEC = """
name = "prog"
repetitions = 1
[networks.shm]
transport = "shm"
profile = "prof.toml"
[predictors]
replay = ["loggps"]
[[experiment]]
program = "PROGRAM"
ranks = [2]
[experiment.sizes]
"tiny" = ["--size", "32", "--iters", "20"]
"""


def _program_spec(tmp_path, program=str(WORKLOADS / "stencil.py"), text=PROGRAM_SPEC):
    return _spec(tmp_path, text.replace("PROGRAM", program))


def test_a_program_validates_end_to_end(tmp_path):
    """An experiment that names a program: traced and untraced runs through collect, replayed,
    no analytic prediction (said in the cell, not left out silently), a row in errors.csv and a
    row in the report's table."""
    import pandas as pd

    from validation.report import report

    # LogGOPSim's rules (replay --model loggopsim) are a predictor as the others are
    sp = load_spec(_program_spec(tmp_path, text=PROGRAM_SPEC.replace(
        'replay = ["loggps"]', 'replay = ["loggps", "loggopsim"]')))
    [cell] = sp.cells                       # no P = 1 baseline unless asked for
    assert cell.key == "stencil-n2-tiny-shm" and cell.program == str(WORKLOADS / "stencil.py")
    out = tmp_path / "v"
    s = validate(sp, out, progress=False, log=lambda m: None)
    assert s["run"] == 1 and s["failed"] == 0
    res = json.loads((out / "cells" / "stencil-n2-tiny-shm.json").read_text())
    assert res["program"] == str(WORKLOADS / "stencil.py") and res["paradigm"] == "program"
    assert [p["predictor"] for p in res["predictions"]] == ["replay:loggps", "replay:loggopsim"]
    assert all(p["predicted_s"] > 0 for p in res["predictions"]), res["predictions"]
    assert "no analytic model for a program" in res["analytic_note"]
    for kind in ("traces", "untraced"):
        m = json.loads((out / kind / cell.key / "rep0" / "manifest.json").read_text())
        assert m["program"] == cell.program and m["args"]["argv"] == cell.args
    # the ground truth is the program run as `python prog.py` (docs/native.md)
    assert m["traced"] is False and m["launch"] == "plain"
    df = pd.read_csv(out / "errors.csv")            # a row per predictor
    assert list(df.app) == ["stencil"] * 2 and list(df.paradigm) == ["program"] * 2
    assert list(df["size"]) == ["tiny"] * 2 and list(df.ranks) == [2, 2]
    assert df.rel_error_pct.notna().all()
    report(out, out / "report")
    md = (out / "report" / "report.md").read_text()
    assert "stencil" in md and "| program | 2 |" in md and "no analytic model" in md
    assert validate(sp, out, progress=False, log=lambda m: None)["skipped"] == 1


@pytest.mark.parametrize("text,msg", [
    (PROGRAM_SPEC.replace('program = "PROGRAM"', 'program = "PROGRAM"\napp = "sorting"'),
     r"experiment 1: give exactly one of 'app' .* or 'program' .*, not both$"),
    (PROGRAM_SPEC.replace('program = "PROGRAM"\n', ''),
     r"experiment 1: give exactly one of 'app' .* or 'program' .*, not neither$"),
    (PROGRAM_SPEC.replace("PROGRAM", "missing.py"), r"experiment 1: program not found: .*missing.py$"),
    (PROGRAM_SPEC.replace('ranks = [2]', 'ranks = [2]\nparadigms = ["tree"]'),
     "'paradigms' is for an 'app'"),
    (PROGRAM_SPEC.replace('ranks = [2]', 'ranks = [2]\nrecorder = "c"'),
     "'recorder' must be one of auto, python, pmpi, not 'c'$"),
    (PROGRAM_SPEC.replace('ranks = [2]', 'ranks = [2]\nrecorder = ["pmpi"]'),
     "'recorder' must be a string, not"),
    # what collect --program cannot run, said before any run (not as --program's error)
    (PROGRAM_SPEC.replace("PROGRAM", "ring.c"),
     r"experiment 1: program .*ring.c: a source file, not a program: compile it first"),
])
def test_bad_program_experiments_are_one_line_errors(tmp_path, text, msg):
    shutil.copy(PROGRAMS / "ring.c", tmp_path / "ring.c")
    p = _spec(tmp_path, text.replace("PROGRAM", str(WORKLOADS / "stencil.py")))
    with pytest.raises(SpecError, match=msg):
        load_spec(p)
    r = _validate_cli(p, tmp_path / "v")
    assert r.exit_code == 1 and "Traceback" not in r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: spec {p}: experiment 1: ")


def test_program_paths_relative_to_the_spec_and_compiled_programs(tmp_path):
    (tmp_path / "progs").mkdir()
    shutil.copy(WORKLOADS / "stencil.py", tmp_path / "progs" / "stencil.py")
    sp = load_spec(_program_spec(tmp_path, "progs/stencil.py"))
    assert sp.cells[0].program == str((tmp_path / "progs" / "stencil.py").resolve())
    # a compiled program is measured like a script: against its untraced runs, or its traced
    (tmp_path / "a.out").write_bytes(b"\x7fELF" + b"\0" * 60)
    p = _program_spec(tmp_path, "a.out")
    # (one this user may not run is the spec's error, as collect --program says it)
    with pytest.raises(SpecError, match=r"a\.out: a compiled program without permission to run "
                                        r"it \(chmod \+x "):
        load_spec(p)
    (tmp_path / "a.out").chmod(0o755)
    assert load_spec(p).cells[0].program == str((tmp_path / "a.out").resolve())
    p.write_text('ground_truth = "traced"\n' + p.read_text())
    assert load_spec(p).cells[0].key == "a-n2-tiny-shm"
    # two programs of one name would share their cells' files
    two = PROGRAM_SPEC + PROGRAM_SPEC[PROGRAM_SPEC.index("[[experiment]]"):].replace(
        "PROGRAM", "progs/stencil.py")
    with pytest.raises(SpecError, match="two experiments make cell stencil-n2-tiny-shm"):
        load_spec(_program_spec(tmp_path, text=two))


def test_a_trace_of_the_other_recorder_is_not_reused(tmp_path):
    """A program's cell with `recorder = "pmpi"` reuses only traced runs launched with the
    library, and the other way round; an untraced run is reused by either if it ran the program
    alone (`"launch": "plain"`, docs/native.md), by neither otherwise."""
    from validation.matrix import _run_of

    p = _program_spec(tmp_path, str(WORKLOADS / "stencil.py"))
    p.write_text(p.read_text().replace("ranks = [2]", 'ranks = [2]\nrecorder = "pmpi"'))
    sp = load_spec(p)
    cell = sp.cells[0]
    assert cell.recorder == "pmpi"
    run = {"program": cell.program, "ranks": 2, "args": {"argv": list(cell.args)},
           "network": {"transport": "shm"}}
    net = sp.networks[cell.network]
    assert _run_of({**run, "tracer": "pmpi"}, cell, net)
    assert not _run_of(run, cell, net)
    python = dataclasses.replace(cell, recorder="python")
    assert _run_of(run, python, net)
    plain = {**run, "traced": False, "tracer": "pmpi", "launch": "plain"}
    for c in (cell, python):
        assert _run_of(plain, c, net)
        assert not _run_of({**run, "traced": False, "tracer": "pmpi"}, c, net)
        assert not _run_of({**run, "traced": False}, c, net)


def test_a_run_of_another_program_of_the_same_name_is_not_reused(tmp_path):
    """Runs are reused only when their manifest records this program's resolved path: a run of
    another program with the same name, label and arguments (a folder elsewhere) is run again."""
    from validation.matrix import _run_of

    (tmp_path / "other").mkdir()
    other = tmp_path / "other" / "stencil.py"
    for f in ("stencil.py", "workload_args.py"):
        shutil.copy(WORKLOADS / f, tmp_path / "other" / f)
    sp = load_spec(_program_spec(tmp_path))
    cell = sp.cells[0]
    net = sp.networks["shm"]
    mine = {"app": "stencil.py", "paradigm": None, "program": cell.program, "ranks": 2,
            "args": {"argv": cell.args}, "network": {"transport": "shm"}, "tracer": "pmpi"}
    assert _run_of(mine, cell, net)
    assert not _run_of(mine | {"program": str(other)}, cell, net)
    assert not _run_of(mine | {"program": None, "app": "stencil"}, cell, net)
    # and an application's cell never takes a program's run
    app_cell = load_spec(_spec(tmp_path)).cells[0]
    app_run = mine | {"app": app_cell.app, "paradigm": app_cell.paradigm,
                      "args": {"argv": app_cell.args}}
    assert not _run_of(app_run, app_cell, net)
    assert _run_of(app_run | {"program": None}, app_cell, net)
    # end to end: the other program's complete run left under this cell's name is replaced
    sp_other = load_spec(_program_spec(tmp_path, str(other)))
    out = tmp_path / "v"
    assert validate(sp_other, out, progress=False, log=lambda m: None)["failed"] == 0
    # as an interruption leaves them: complete runs, no cell file to say whose they are
    (out / "cells" / f"{cell.key}.json").unlink()
    old_ids = {kind: json.loads((out / kind / cell.key / "rep0" / "manifest.json").read_text())[
        "run_id"] for kind in ("traces", "untraced")}
    assert validate(sp, out, progress=False, log=lambda m: None)["run"] == 1
    for kind in ("traces", "untraced"):
        m = json.loads((out / kind / cell.key / "rep0" / "manifest.json").read_text())
        assert m["program"] == cell.program and m["run_id"] != old_ids[kind]
    # with its cell file, the other program's results are moved aside, naming what changed
    assert validate(sp_other, out, progress=False, log=lambda m: None)["run"] == 1
    r = _validate_cli(_program_spec(tmp_path), out, "--quiet")
    assert r.exit_code == 0 and "(changed: program)" in r.stderr
    # an edited program at the same path is another program too: its runs are not reused
    assert validate(sp_other, out, progress=False, log=lambda m: None)["run"] == 1
    other.write_text(other.read_text() + "\n# edited\n")
    r = _validate_cli(_program_spec(tmp_path, str(other)), out, "--quiet")
    assert r.exit_code == 0 and "(changed: program_sha256)" in r.stderr, r.stderr


ROUNDS_SPEC = PROGRAM_SPEC.replace("repetitions = 1", 'repetitions = 2\nactual = "median"').replace(
    "ranks = [2]", 'ranks = [2]\nrecorder = "python"') + """
[[experiment]]
program = "PROGRAM"
ranks = [2]
recorder = "pmpi"
[experiment.sizes]
"tiny-lib" = ["--size", "32", "--iters", "20"]
"""


def test_runs_are_made_round_by_round_and_recorders_share_the_untraced_runs(tmp_path):
    """The default ``order = "rounds"``: repetition 0 of every cell, then repetition 1 (a phase
    of the machine's speed falls on every cell alike). Two cells of one program that differ only
    in their recorder share their untraced runs (one folder, run once per repetition), so both
    are compared with the same actual time."""
    sp = load_spec(_program_spec(tmp_path, text=ROUNDS_SPEC))
    assert sp.order == "rounds"
    a, b = sp.cells
    assert (a.recorder, b.recorder) == ("python", "pmpi")
    out = tmp_path / "v"
    s = validate(sp, out, progress=False, log=lambda m: None)
    assert s["run"] == 2 and s["failed"] == 0
    ca, cb = (json.loads((out / "cells" / f"{c.key}.json").read_text()) for c in (a, b))
    assert ca["untraced"] == cb["untraced"] == [f"untraced/{a.key}/rep{k}" for k in (0, 1)]
    assert not (out / "untraced" / b.key).exists()
    assert ca["actual_runs_s"] == cb["actual_runs_s"] and ca["actual_s"] == cb["actual_s"]

    def start(rel: str) -> float:
        return json.loads((out / rel / "manifest.json").read_text())["start_unix"]
    order = [start(f"traces/{a.key}/rep0"), start(f"untraced/{a.key}/rep0"),
             start(f"traces/{b.key}/rep0"), start(f"traces/{a.key}/rep1"),
             start(f"untraced/{a.key}/rep1"), start(f"traces/{b.key}/rep1")]
    assert order == sorted(order)


def test_cross_network_pairs_of_a_program(tmp_path):
    """predict_on works for a program's cells as for an application's: one cross pair per
    (trace network, predicted network), keyed by the program's name."""
    text = PROGRAM_SPEC.replace('[networks.shm]', '[networks.tcp]\ntransport = "tcp"\n'
                                'profile = "prof.toml"\n[networks.shm]').replace(
        'ranks = [2]', 'ranks = [2]\nnetworks = ["shm"]\npredict_on = ["shm", "tcp"]')
    sp = load_spec(_program_spec(tmp_path, text=text))
    assert {(c.key, tuple(c.predict_on)) for c in sp.cells} == {
        ("stencil-n2-tiny-shm", ("tcp",)), ("stencil-n2-tiny-tcp", ("shm",))}
    assert sp.cells[0].on("tcp").key == "stencil-n2-tiny-tcp"
    assert sp.cells[0].on("tcp").program == sp.cells[0].program


# -- failed cells and calls not traced: nothing dropped silently ---------------------------------

from tests.conftest import PROGRAMS  # noqa: E402

FAILING_SPEC = """
name = "failing"
repetitions = 1
timeout = 3
ground_truth = "traced"
[networks.shm]
transport = "shm"
profile = "prof.toml"
[predictors]
replay = ["loggps"]
[[experiment]]
program = "DEADLOCK"
ranks = [2]
[experiment.sizes]
"x" = []
[[experiment]]
program = "RAISES"
ranks = [2]
[experiment.sizes]
"x" = []
"""


def test_a_failed_cell_says_why_as_collect_does_and_the_report_lists_it(tmp_path):
    """Real failing runs: a deadlock stopped by the spec's timeout (where each rank was) and a
    rank that raises (what it raised). Each failure is on stderr, in DIR/failed/<cell>.json and,
    with no cell left to predict, in a report of the failures (not `errors.csv has no rows`)."""
    text = FAILING_SPEC.replace("DEADLOCK", str(PROGRAMS / "deadlock.py")).replace(
        "RAISES", str(PROGRAMS / "raises.py"))
    spec, out = _spec(tmp_path, text), tmp_path / "v"
    r = _validate_cli(spec, out, "--json")
    assert r.exit_code == 1, r.output
    s = json.loads(r.stdout)
    assert s["failed_cells"] == ["deadlock-n2-x-shm", "raises-n2-x-shm"]
    dl, rs = s["failures"]["deadlock-n2-x-shm"], s["failures"]["raises-n2-x-shm"]
    assert dl == ("traced run traces/deadlock-n2-x-shm/rep0: exit code 124; timed out after 3 s "
                  "(the spec's timeout); rank 0 stopped in Recv at deadlock.py:10; rank 1 "
                  "stopped in Recv at deadlock.py:12")
    m = json.loads((out / "traces" / "raises-n2-x-shm" / "rep0" / "manifest.json").read_text())
    if m.get("rank_errors"):
        assert rs.endswith("; rank 1 raised: RuntimeError: deliberate failure on rank 1"), rs
    else:                   # the abort came before rank 1's file was written (seen under load)
        assert rs.endswith("; ranks not complete: " + " ".join(
            f"{r}:{st}" for r, st in enumerate(m["rank_status"]) if st != "complete")), rs
    assert f"cell deadlock-n2-x-shm failed: {dl}" in r.stderr
    rec = json.loads((out / "failed" / "raises-n2-x-shm.json").read_text())
    assert rec["reason"] == rs and rec["ranks"] == 2 and "spec_inputs" in rec
    r = CliRunner().invoke(cli, ["report", str(out)])
    assert r.exit_code == 0, r.output
    md = (out / "report" / "report.md").read_text()
    assert "no cell has a prediction. 2 cells failed" in md
    assert f"| deadlock-n2-x-shm | 2 | shm | {dl} |" in md
    assert f"| raises-n2-x-shm | 2 | shm | {rs} |" in md
    assert "deliberate failure on rank 1" in (out / "report" / "report.html").read_text()


def _fail_one_cell(monkeypatch, failing: set):
    """validate with every cell 'run' instantly, those in ``failing`` failing as a run does."""
    import validation.validate as V

    calls: list = []
    _fake_run_cell(monkeypatch, calls)
    ok = V.run_cell

    def run_cell(cell, spec, out, profile_path):
        if cell.key in failing:
            raise RuntimeError(f"traced run traces/{cell.key}/rep0: exit code 11; ranks not "
                               "complete: 0:killed 1:killed")
        return ok(cell, spec, out, profile_path)
    monkeypatch.setattr(V, "run_cell", run_cell)


def test_a_failed_cell_beside_a_good_one_is_in_the_report_until_it_succeeds(tmp_path,
                                                                           monkeypatch):
    from validation.report import report

    p = _spec(tmp_path, SPEC.replace('ranks = [2]', 'ranks = [2, 4]'))
    bad = "sorting-pipeline-n4-4x8192-shm"
    _fail_one_cell(monkeypatch, {bad})
    out = tmp_path / "v"
    r = _validate_cli(p, out)
    assert r.exit_code == 1 and r.stdout.startswith("1 cells run, 0 reused, 1 failed")
    report(out, out / "report")
    md = (out / "report" / "report.md").read_text()
    verdict = md[md.index("## Verdict"):md.index("## Summary per predictor")]
    assert f"1 cell failed and is not judged ({bad}: see Failed cells)" in verdict
    why = f"traced run traces/{bad}/rep0: exit code 11; ranks not complete: 0:killed 1:killed"
    assert f"| {bad} | 2 |" not in md and f"| {bad} | 4 | shm | {why} |" in verdict
    assert f"| pipeline | 4 | - | - | - |  | failed: {why} |" in md      # its app's table
    # the cell runs again and succeeds: no longer failed
    _fail_one_cell(monkeypatch, set())
    assert _validate_cli(p, out).stdout.startswith("1 cells run, 1 reused, 0 failed")
    assert not (out / "failed" / f"{bad}.json").exists()
    report(out, out / "report")
    assert "Failed cells" not in (out / "report" / "report.md").read_text()
    # a failure of a cell the spec no longer has is moved aside with a warning
    _fail_one_cell(monkeypatch, {bad})
    assert _validate_cli(p, out, "--force").exit_code == 1
    r = _validate_cli(_spec(tmp_path), out)
    assert f"warning: the failure of cell {bad} was met with another spec" in r.stderr
    assert (out / "stale" / "1" / "failed" / f"{bad}.json").is_file()
    assert not (out / "failed" / f"{bad}.json").exists()


def test_calls_not_traced_are_said_in_the_cell_and_the_report(tmp_path):
    """A program whose trace counts calls it did not record (a request-based Rput): the
    prediction lacks their traffic, and the cell's note, validate's stderr and the report say
    so."""
    from validation.report import report

    sp = _spec(tmp_path, PROGRAM_SPEC.replace("PROGRAM", str(PROGRAMS / "untraced_calls.py"))
               .replace('"tiny" = ["--size", "32", "--iters", "20"]', '"x" = []')
               .replace("repetitions = 1", 'repetitions = 1\nground_truth = "traced"'))
    out = tmp_path / "v"
    r = _validate_cli(sp, out)
    assert r.exit_code == 0, r.output
    cell = json.loads((out / "cells" / "untraced_calls-n2-x-shm.json").read_text())
    note = "2 calls (Win.Rput 2) not traced: their traffic is not in the prediction"
    assert cell["note"] == note
    assert f"warning: cell untraced_calls-n2-x-shm: {note}" in r.stderr
    report(out, out / "report")
    row = next(line for line in (out / "report" / "report.md").read_text().splitlines()
               if line.startswith("| program | 2 |"))
    assert note in row


def test_a_spec_profile_no_model_can_read_stops_before_any_run(tmp_path):
    """A misspelt key in the spec's own calibrated profile is the spec's error before the first
    cell runs (it was found only at the predictions, after every run), naming the user's file,
    not the run's copy of it."""
    root = Path(__file__).resolve().parents[1]
    bad = tmp_path / "badprof.toml"
    bad.write_text((root / "docs" / "calibration" / "shm.toml").read_text()
                   .replace("\no_send = ", "\no_sned = ", 1))
    assert "o_sned" in bad.read_text()
    p = tmp_path / "spec.toml"
    p.write_text(SPEC.replace('profile = "prof.toml"', 'profile = "badprof.toml"'))
    out = tmp_path / "v"
    r = CliRunner().invoke(cli, ["validate", str(p), "--out", str(out)])
    assert r.exit_code == 1 and r.output.count("Error:") == 1, r.output
    assert f"Error: network shm: profile {bad}: [loggps] o_sned: not a key of a calibrated " \
           "profile (did you mean 'o_send'?)" in r.output, r.output
    assert not (out / "traces").exists() and not (out / "untraced").exists()
    assert not list((out / "cells").glob("*.json"))
