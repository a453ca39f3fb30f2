"""Prediction beyond the measured run: cost-model fits, skeleton-driven synthesis,
`hindsight predict`. Three short `mpiexec -n 2` runs; everything else is in-process."""
from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import click
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import replay
from hindsight import trace as tf
from hindsight.check import check_trace
from hindsight.cli import main as cli
from predict import costmodel as C
from predict import config as K
from predict import events as E
from predict import order as O
from predict import synthesize as S
from tests.conftest import hindsight

PROFILE = Path(__file__).resolve().parent.parent / "docs" / "calibration" / "shm.toml"


# ---------------------------------------------------------------------------------------------
# fits


def test_fit_recovers_known_terms_and_coefficients() -> None:
    rng = np.random.default_rng(1)
    u = np.repeat([2.0 ** k for k in range(10, 20)], 3)
    y = 2e-4 + 3e-9 * u * np.log2(u)
    f = C.fit("task", u, np.full(len(u), 2), y * (1 + rng.normal(0, 0.01, len(u))))
    assert f.terms == ("u·log2(u)",)
    assert f.coef[1] == pytest.approx(3e-9, rel=0.03)
    assert f.coef[0] == pytest.approx(2e-4, rel=0.2)
    assert f.r2 > 0.99 and f.cv_rel_err < 0.05
    # exact linear data: message bytes = header + 8 bytes per element
    b = C.fit("bytes:result", u, np.full(len(u), 2), 160 + 8 * u)
    assert b.terms == ("u",) and b.coef[1] == pytest.approx(8) and b.coef[0] == pytest.approx(160)
    # a P dependence is found only because P varies
    P = np.tile([1, 2, 4, 8, 16], 4)
    uu = np.repeat([1e4, 2e4, 4e4, 8e4], 5)
    g = C.fit("merge", uu, P, 1e-3 + 1e-8 * uu + 5e-4 * np.log2(P))
    assert set(g.terms) == {"u", "log2(P)"}
    assert g(8e4, 1024) == pytest.approx(1e-3 + 8e-4 + 5e-3, rel=1e-6)


def test_bad_fit_is_reported_and_extrapolation_refused() -> None:
    rng = np.random.default_rng(2)
    u = np.repeat([1e3, 2e3, 4e3, 8e3, 16e3], 2)
    y = rng.uniform(1e-4, 1e-2, len(u))  # no relation to u at all
    f = C.fit("merge", u, np.full(len(u), 2), y)
    assert f.bad(0.25)
    cm = C.CostModel("sorting", "tree", 1000, {"merge": f}, [], [(2, 16000)])
    cm.cost("merge", 1e5, 2)  # 6x beyond the data
    errors, warnings = cm.check(0.25)
    assert len(errors) == 1 and "merge" in errors[0] and "extrapolated" in errors[0]
    assert "leave-one-out error" in errors[0]
    # inside the fitted range nothing is said
    cm2 = C.CostModel("sorting", "tree", 1000, {"merge": f}, [], [(2, 16000)])
    cm2.cost("merge", 4e3, 2)
    assert cm2.check(0.25) == ([], [])


def test_a_P_term_must_predict_the_largest_P_and_negative_costs_are_reported() -> None:
    # cost falls with P on P = 1, 2, 4 (as CPU time did on this machine): the line through the
    # points is a fine fit, but evaluated at P = 4096 it is negative: reported, never silent
    P = np.repeat([1, 2, 4], 4)
    y = 3.2e-3 - 1e-4 * P
    f = C.fit("task", np.full(len(P), 65536), P, y)
    assert f.terms == ("P",) and not f.bad(0.25)
    cm = C.CostModel("sorting", "tree", 65536, {"task": f}, [], [])
    assert cm.cost("task", 65536, 4096) == 0.0
    errors, _ = cm.check(0.25)
    assert any("negative" in e and "task" in e for e in errors)
    # a P dependence that does not carry over to the largest P is not believed: constant wins
    y2 = np.where(P == 4, 1.0e-3, 1e-3 + 2e-4 * (P - 1))
    g = C.fit("task", np.full(len(P), 65536), P, y2)
    assert g.terms == ()


def test_one_small_message_among_large_ones_still_gives_the_byte_slope() -> None:
    # The pickle gaps of a block sort: a few control messages of 4 bytes, many 128 KiB blocks
    # (sizes a few bytes apart). Leaving the only small point out leaves no slope to refit, so
    # that point must not decide the model: the fit keeps the per-byte term and extrapolates.
    rng = np.random.default_rng(3)
    u = np.array([4.0] * 30 + [131209.0] * 30 + [131212.0] * 30 + [131216.0] * 30)
    y = (5e-6 + 4e-10 * u) * rng.normal(1.0, 0.05, len(u))
    f = C.fit("pickle", u, np.full(len(u), 2), y)
    assert f.terms == ("u",)
    assert f(4 << 20, 2) == pytest.approx(5e-6 + 4e-10 * (4 << 20), rel=0.1)


def test_two_sizes_fix_a_line_not_its_form() -> None:
    # Sizes at two u and three P: every curve through the two means fits exactly, and
    # leave-one-out (refitting at the same two sizes) cannot tell them apart. The fit must be the
    # line, and extrapolating it must say the form was assumed.
    u = np.repeat([1000.0, 4000.0], 6)
    P = np.tile([2, 3, 4], 4)
    f = C.fit("bytes:result", u, P, 200 + 8 * u * (1 + 1e-9 * np.arange(len(u))))
    assert f.terms == ("u",) and f.u_levels == 2
    assert f(16000, 2) == pytest.approx(200 + 8 * 16000, rel=1e-6)
    cm = C.CostModel("sorting", "tree", 1000, {"bytes:result": f}, [], [(2, 1000)])
    cm.cost("bytes:result", 16000, 2)
    errors, warnings = cm.check(0.25)
    assert not errors and len(warnings) == 1 and "linear in u is assumed" in warnings[0]
    # a curve that three sizes do show is still found
    u3 = np.repeat([1000.0, 2000.0, 4000.0, 8000.0], 3)
    g = C.fit("task", u3, np.tile([2, 3, 4], 4), 1e-4 + 1e-9 * u3 * u3)
    assert g.terms == ("u²",) and g.u_levels == 4


def test_a_near_tie_goes_to_the_linear_form() -> None:
    # Noisy data on a line over a narrow range: the curves fit about as well; the line wins.
    rng = np.random.default_rng(4)
    u = np.repeat([1000.0, 1100.0, 1200.0, 1300.0, 1400.0], 4)
    y = (1e-4 + 1e-7 * u) * rng.normal(1.0, 0.002, len(u))
    assert C.fit("task", u, np.full(len(u), 2), y).terms == ("u",)
    # sizes a few bytes apart are one size (no curve from them); close sizes spread wide many
    assert C._levels(np.array([4.0, 131209.0, 131212.0, 131216.0])) == 2
    assert C._levels(np.linspace(1000.0, 3000.0, 300)) > 50


def test_every_registered_paradigm_has_an_event_generator() -> None:
    from apps.skeletons import SKELETONS
    assert set(E._EVENTS) == set(SKELETONS)


def test_tree_schedule_runs_every_task_once_and_reaches_rank_0() -> None:
    from apps.skeletons import tree
    for n in range(1, 10):
        for n_tasks in (0, 1, 5, 17):
            acts = tree.schedule(n, n_tasks)
            assert sorted(a for r in acts for k, a in r if k == "task") == list(range(n_tasks))
            sends = sorted((r, a) for r, ra in enumerate(acts) for k, a in ra if k == "send")
            recvs = sorted((a, r) for r, ra in enumerate(acts) for k, a in ra if k == "recv")
            assert sends == recvs  # every message has its receive
            assert sum(k == "fold" for k, _ in acts[0]) == -(-n_tasks // n)


# ---------------------------------------------------------------------------------------------
# synthesis from a hand-made cost model


def _fit(q: str, c0: float, terms=(), coef=()) -> C.Fit:
    return C.Fit(q, tuple(terms), (c0, *coef), 1.0, 0.01, 0.01, 5, 5, (1.0, 1e9), (1, 1 << 20))


def toy_model(app: str, paradigm: str, per_task: int) -> C.CostModel:
    fits = {
        "io": _fit("io", 1e-4, ["u"], [1e-9]), "load": _fit("load", 1e-3, ["u"], [1e-9]),
        "task": _fit("task", 1e-4, ["u·log2(u)"], [5e-9]),
        "merge": _fit("merge", 5e-5, ["u"], [4e-9]), "divide": _fit("divide", 1e-5, ["u"], [1e-10]),
        "conquer": _fit("conquer", 1e-4, ["u·log2(u)"], [5e-9]),
        "combine": _fit("combine", 5e-5, ["u"], [4e-9]), "other": _fit("other", 2e-5),
        "pickle": _fit("pickle", 2e-5, ["u"], [1e-10]),
        "bytes:result": _fit("bytes:result", 160, ["u"], [8]),
        "bytes:problem": _fit("bytes:problem", 160, ["u"], [8]),
        "bytes:control": _fit("bytes:control", 21),
        "global_merge": _fit("global_merge", 2e-5, ["u"], [4e-9]),
        "bytes:block": _fit("bytes:block", 160, ["u"], [8]),
        "bytes:part": _fit("bytes:part", 170, ["u"], [8]),
    }
    return C.CostModel(app, paradigm, per_task, fits, [], [])


@pytest.mark.parametrize("paradigm,P", [("pipeline", 1), ("pipeline", 3), ("pipeline", 8),
                                        ("tree", 5), ("hypercube", 1), ("hypercube", 4),
                                        ("master-worker", 1), ("master-worker", 4),
                                        ("block-sort", 1), ("block-sort", 3)])
def test_synthesized_trace_passes_check_and_replays(tmp_path: Path, paradigm: str, P: int) -> None:
    app = "components" if paradigm == "master-worker" else "sorting"
    if paradigm == "block-sort":  # sorting on master-worker: paper 003's block sort
        paradigm = "master-worker"
    cm = toy_model(app, paradigm, 1000)
    out = S.write(tmp_path / "t", cm.spec(P, 13_500), cm.cost)
    assert check_trace(out) == []
    man = tf.read_manifest(out)
    assert man["synthetic"]["generator"] == "predict.synthesize" and man["ranks"] == P
    res = replay.run(replay.prepare(out, use_cache=False), "loggps")
    assert res.makespan_ns > 0
    # every task ran exactly once, so the task regions cover all the input
    t = tf.read_trace(out).to_pandas()
    task = t[(t["op"] == "region") & (t["region"].astype(str).isin(["task", "conquer"]))]
    assert task["nbytes"].sum() == 13_500
    # the CLI accepts it too
    r = hindsight("trace", "check", out)
    assert r.returncode == 0, r.stderr


def test_hypercube_block_units_follow_the_halving() -> None:
    # 11 units on 4 ranks: 6 | 5 -> 3,3 | 3,2
    assert [E._block_units(11, 4, r, 1) for r in range(4)] == [3, 3, 3, 2]
    assert E._block_units(11, 4, 2, 2) == 5


def test_master_worker_arrival_simulation_favours_fast_workers() -> None:
    cm = toy_model("components", "master-worker", 1000)
    order = O.simulate_arrivals(cm.spec(4, 20_000), cm.cost)
    # bare requests (3), one result per task (20), and one final result per worker... each
    # worker's last message is answered with STOP: 3 + 20 messages in all
    assert len(order) == 3 + 20
    assert sorted(set(order)) == [1, 2, 3]


def _real_merge_steps(values: list[np.ndarray], s: int) -> list[tuple[int, list[int]]]:
    """apps.sorting's global_merge on real sorted data, counting instead of merging."""
    parts = [[v[a:a + s] for a in range(0, len(v), s)] for v in values]
    nxt = [1] * len(parts)
    cur = [p[0] if p else None for p in parts]
    steps = []
    while any(c is not None for c in cur):
        active = [k for k, c in enumerate(cur) if c is not None]
        bound = min(cur[k][-1] for k in active)
        taken, pulled = 0, []
        for k in active:
            cut = int(np.searchsorted(cur[k], bound, side="right"))
            taken += cut
            cur[k] = cur[k][cut:]
        for k in active:
            if cur[k].size == 0:
                cur[k] = parts[k][nxt[k]] if nxt[k] < len(parts[k]) else None
                if cur[k] is not None and k:
                    pulled.append(k)
                nxt[k] += 1
        steps.append((taken, pulled))
    return steps


@pytest.mark.parametrize("P,N,s", [(1, 10_000, 1000), (3, 300_000, 4096), (6, 500_000, 2000)])
def test_block_sort_merge_steps_match_the_real_merge_on_random_data(P: int, N: int, s: int) -> None:
    spec = K.Spec("sorting", "master-worker", P, N, s)
    sampled = O.merge_steps(spec)
    assert sampled == O.merge_steps(spec)  # seeded
    assert sum(u for u, _ in sampled) == N
    E.events(spec, sampled)  # consistent with the dealing: every part pulled exactly once
    # the real merge of uniformly random data dealt the same way (several draws)
    rng = np.random.default_rng(7)
    held = E.dealt(spec)
    real = [_real_merge_steps([np.sort(rng.integers(0, 1 << 31, h)) for h in held], s)
            for _ in range(5)]
    n_real = [len(r) for r in real]
    assert min(n_real) * 0.9 <= len(sampled) <= max(n_real) * 1.1
    # the pulls interleave with the merging alike: where (in elements merged) the k-th pull
    # happens agrees within a few parts
    def pull_points(steps):
        done, out = 0, []
        for u, pulled in steps:
            done += u
            out += [done] * len(pulled)
        return np.array(out, float)
    want = np.mean([pull_points(r) for r in real], axis=0)
    got = pull_points(sampled)
    assert len(got) == len(want)
    if len(got):
        assert np.abs(got - want).max() <= 3 * s * max(P, 1)
    with pytest.raises(K.SynthesisError, match="another configuration"):
        E.events(K.Spec("sorting", "master-worker", P, N + s, s), sampled)


# ---------------------------------------------------------------------------------------------
# against real runs (mpiexec -n 2)


RUNS = {
    "sorting-pipeline": ("sorting", "pipeline", ["--arrays", "6", "--array-size", "8192"]),
    "sorting-hypercube": ("sorting", "hypercube", ["--arrays", "4", "--array-size", "8192"]),
    "components-mw": ("components", "master-worker",
                      ["--vertices", "2048", "--edges", "8192", "--edges-per-task", "1024"]),
    "sorting-block-sort": ("sorting", "master-worker",
                           ["--arrays", "4", "--array-size", "8192", "--block-size", "2048"]),
    "sorting-tree": ("sorting", "tree", ["--arrays", "4", "--array-size", "8192"]),
}


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("measured")
    out = {}
    for name, (app, paradigm, flags) in RUNS.items():
        d = base / name
        r = hindsight("collect", app, "-n", "2", "--paradigm", paradigm, "--out", d, "--", *flags)
        assert r.returncode == 0, r.stderr
        out[name] = d
    return out


def _ops(trace_dir: Path) -> list[tuple]:
    t = tf.read_trace(trace_dir).to_pandas().sort_values(["rank", "seq"])
    return [(int(r.rank), str(r.op), int(r.peer), int(r.tag))
            for r in t.itertuples() if str(r.op) != "region" and str(r.op) != "Comm_split"] + \
        [(int(r.rank), str(r.op), str(r.region)) for r in t.itertuples() if str(r.op) == "region"]


@pytest.mark.parametrize("name", sorted(RUNS))
def test_synthesis_of_a_measured_config_has_its_op_sequence(measured, tmp_path: Path,
                                                            name: str) -> None:
    d = measured[name]
    cm = C.fit_traces([d])
    man = tf.read_manifest(d)
    spec = K.spec_from_manifest(man)
    t = tf.read_trace(d).to_pandas()
    t["op"] = t["op"].astype(str)
    # master/worker's arrivals or the block sort's merge steps, as the fit aligns them
    out = S.write(tmp_path / "syn", spec, cm.cost, order=O.measured_order(spec, t))
    assert _ops(out) == _ops(d)
    assert check_trace(out) == []
    # region sizes of the tasks agree too (sorting: elements; components: edges)
    fr = C.samples(d)[1]
    assert set(fr["quantity"]) >= {"other", "pickle"}


def test_predict_cli_end_to_end(measured, tmp_path: Path) -> None:
    r = CliRunner().invoke(cli, ["predict", str(measured["sorting-pipeline"]), "--ranks",
                                 "1..8", "--profile", str(PROFILE), "--accept-bad-fit",
                                 "--out", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    assert "optimal P =" in r.output and "isoefficiency" in r.output
    for f in ("predict.csv", "fits.csv", "summary.json", "predict.png"):
        assert (tmp_path / "o" / f).is_file()
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["paradigm"] == "pipeline" and s["optimum"][0]["P_opt"] in (1, 2, 4, 8)


def test_predict_cli_user_errors(measured, tmp_path: Path) -> None:
    run = CliRunner().invoke
    r = run(cli, ["predict", str(tmp_path / "nope")])
    assert r.exit_code == 1 and "nope" in r.output and "Traceback" not in r.output
    r = run(cli, ["predict", str(measured["sorting-pipeline"]), "--ranks", "2..x"])
    assert r.exit_code == 2 and "--ranks" in r.output
    r = run(cli, ["predict", str(measured["sorting-hypercube"]), "--ranks", "3"])
    assert r.exit_code == 2 and "--ranks" in r.output and "power" in r.output
    r = run(cli, ["predict", str(measured["sorting-pipeline"]), "--size", "-5"])
    assert r.exit_code == 2 and "--size" in r.output
    r = run(cli, ["predict", str(measured["sorting-pipeline"]), "--set", "X=1"])
    assert r.exit_code == 2 and "--set" in r.output
    r = run(cli, ["predict", str(measured["sorting-pipeline"]), str(measured["sorting-hypercube"])])
    assert r.exit_code == 1 and "--paradigm" in r.output
    # one trace, one size: extrapolating 100x with fits of a single point is refused or warned,
    # never silent
    r = run(cli, ["predict", str(measured["sorting-pipeline"]), "--size", "5000000",
                  "--ranks", "2"])
    assert "extrapolat" in r.output
    # every refused fit is named, not only the first
    err = [x for x in r.output.splitlines() if x.startswith("Error:")]
    named = [x for x in r.output.splitlines() if x.startswith("warning: bad fit: ")]
    assert len(err) == 1 and err[0].startswith("Error: refusing to extrapolate a bad fit")
    if named:
        assert f"(and the {len(named)} above)" in err[0]
    only = tmp_path / "only-untraced"
    (only / "u").mkdir(parents=True)
    man = json.loads((measured["sorting-pipeline"] / "manifest.json").read_text())
    (only / "u" / "manifest.json").write_text(json.dumps({**man, "traced": False}))
    r = run(cli, ["predict", str(only)])
    assert r.exit_code == 1 and f"only untraced runs (no costs to fit): {only / 'u'}" in \
        r.output, r.output
    r = run(cli, ["predict", str(measured["sorting-pipeline"]), "--paradigm", "tree"])
    assert r.exit_code == 1 and ("Error: none of the 1 traces is on tree (they are sorting on "
                                 "pipeline)") in r.output, r.output


def test_predict_demand_driven_master_worker_with_a_profile(measured, tmp_path: Path) -> None:
    """Paper 004's closed form beside the replay of a demand-driven master/worker, its network
    constants from --profile (it raised KeyError 'O': the constants name O_send and O_recv);
    a saturation point no P of the grid reaches reads so, not nan; one size gives no
    isoefficiency estimate (T_o's growth with W needs two)."""
    r = CliRunner().invoke(cli, ["predict", str(measured["components-mw"]), "--ranks", "1..4",
                                 "--profile", str(PROFILE), "--accept-bad-fit", "--out",
                                 str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    df = pd.read_csv(tmp_path / "o" / "predict.csv")
    assert (df["analytic_model"] == "paper004 T(P)").all()
    assert df["analytic_s"].notna().all() and (df["analytic_s"] > 0).all()
    sat = [x for x in r.output.splitlines() if "master saturated" in x]
    assert sat and all("nan" not in x for x in sat), r.output
    assert all(re.search(r"saturated (from P = \d+|not up to P = 4)", x) for x in sat)
    assert "isoefficiency (E = 0.5): not estimable from one size" in r.output
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["isoefficiency"]["not_estimable"].startswith("one size")
    # and without --profile, the model's own constants: the same closed form
    r = CliRunner().invoke(cli, ["predict", str(measured["components-mw"]), "--ranks", "1..2",
                                 "--accept-bad-fit", "--json"])
    assert r.exit_code == 0, r.output


def test_a_size_below_the_measured_tasks_is_said_extrapolated(measured) -> None:
    """A --size smaller than one measured task asks the task's fit below the sizes it was
    fitted on (sorting's arrays were 8192 elements): never silent (it read as the full task's
    time, with no warning)."""
    r = CliRunner().invoke(cli, ["predict", str(measured["sorting-tree"]), "--ranks", "1..2",
                                 "--size", "100,32768", "--accept-bad-fit", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    said = doc["warnings"] + doc["bad_fits"]
    assert any("u down to 100 (the smallest fitted 8192)" in w for w in said), said


@pytest.mark.parametrize("model", ["loggopsim", "measured"])
def test_predict_refuses_models_that_cannot_replay_a_synthesised_schedule(measured,
                                                                          model) -> None:
    r = CliRunner().invoke(cli, ["predict", str(measured["sorting-tree"]), "--model", model,
                                 "--ranks", "2"])
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: --model {model}: predict replays "
                                                   "schedules it synthesises"), r.output
    assert "loggps" in lines[0] and "Traceback" not in r.output


def test_predict_sizes_take_suffixes() -> None:
    from predict.cli import parse_sizes

    assert parse_sizes("4M,1Mi,2.5k,100") == [100, 2500, 2 ** 20, 4_000_000]
    assert parse_sizes("4.1M,2.01k") == [2010, 4_100_000]     # exact, not float-rounded
    for bad in ("4X", "M", "1.5"):
        with pytest.raises(click.BadParameter):
            parse_sizes(bad)


def test_predict_says_what_it_skipped_and_what_disturbed_its_fits(measured, tmp_path) -> None:
    """An untraced run kept beside the traces is skipped with a note; a fitted trace whose run
    waited for cores is named in a warning that offers --cpu-time."""
    src = measured["sorting-pipeline"]
    folder = tmp_path / "runs"
    shutil.copytree(src, folder / "t")
    man = json.loads((folder / "t" / "manifest.json").read_text())
    (folder / "t-untraced").mkdir()
    (folder / "t-untraced" / "manifest.json").write_text(json.dumps({**man, "traced": False}))
    man.pop("oversubscribed", None)
    man["conditions"] = {**(man.get("conditions") or {}),
                         "problems": ["rank 1 waited for a core 40.0 % of the time"]}
    (folder / "t" / "manifest.json").write_text(json.dumps(man))
    r = CliRunner().invoke(cli, ["predict", str(folder), "--ranks", "2", "--accept-bad-fit"])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert f"note: 1 untraced run(s) skipped (no costs to fit): {folder / 't-untraced'}" in lines
    warn = [x for x in lines if x.startswith("warning: 1 of 1 fitted traces ran disturbed")]
    assert len(warn) == 1 and "40.0 %" in warn[0] and "--cpu-time" in warn[0], r.output
    r = CliRunner().invoke(cli, ["predict", str(folder), "--ranks", "2", "--accept-bad-fit",
                                 "--cpu-time"])
    assert r.exit_code == 0 and "ran disturbed" not in r.output, r.output


def test_predict_cli_block_sort(measured, tmp_path: Path) -> None:
    # paper 003's block sort: synthesized at other P with sampled merge steps, its analytic model
    # beside, and no demand-driven saturation point (its blocks are dealt statically)
    r = CliRunner().invoke(cli, ["predict", str(measured["sorting-block-sort"]), "--ranks",
                                 "1..8", "--profile", str(PROFILE), "--accept-bad-fit",
                                 "--out", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    assert "saturated" not in r.output
    df = pd.read_csv(tmp_path / "o" / "predict.csv")
    assert sorted(df["P"]) == [1, 2, 4, 8]
    assert (df["analytic_model"] == "paper003 eq. 17").all()
    assert (df["makespan_s"] > 0).all() and df["analytic_s"].notna().all()


def test_predict_says_n_a_where_the_papers_have_no_analytic_model(measured) -> None:
    """The tree has no closed form in the papers: its analytic column says n/a (it said nan,
    which reads as the model's own failure)."""
    r = CliRunner().invoke(cli, ["predict", str(measured["sorting-tree"]), "--ranks", "1..2",
                                 "--profile", str(PROFILE), "--accept-bad-fit"])
    assert r.exit_code == 0, r.output
    rows = [line.split() for line in r.output.splitlines()
            if re.match(r"^\s+\d+\s+[12]\s", line)]
    assert len(rows) == 2 and all(row[-1] == "n/a" for row in rows), r.output


def test_predict_cli_json_and_quiet(measured, tmp_path: Path) -> None:
    args = ["predict", str(measured["sorting-pipeline"]), "--ranks", "1..4", "--profile",
            str(PROFILE), "--accept-bad-fit"]
    r = CliRunner().invoke(cli, args + ["--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert sorted(p["P"] for p in doc["predictions"]) == [1, 2, 4]
    assert doc["paradigm"] == "pipeline" and doc["out"] is None
    out = tmp_path / "o"
    r = CliRunner().invoke(cli, args + ["--quiet", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert r.output.splitlines() == [str(out / f) for f in
                                     ("predict.csv", "fits.csv", "summary.json", "predict.png")]
    r = CliRunner().invoke(cli, args + ["--out", str(out)])
    assert r.exit_code == 2 and "--force" in r.output and "optimal P" not in r.output


def test_predict_plot_circles_points_extrapolated_from_a_bad_fit(tmp_path: Path,
                                                                 monkeypatch) -> None:
    from types import SimpleNamespace

    import matplotlib.figure

    from predict.cli import extrapolated, plot

    df = pd.DataFrame({"P": [1, 2, 4, 8], "N": [100] * 4,
                       "makespan_s": [4.0, 2.1, 1.2, 0.8], "speedup": [1, 1.9, 3.3, 5.0],
                       "efficiency": [1, 0.95, 0.83, 0.62], "overhead_s": [0, 0.2, 0.8, 2.4],
                       "analytic_s": [np.nan] * 4, "analytic_model": [None] * 4,
                       "analytic_speedup": [np.nan] * 4})
    opt = pd.DataFrame({"N": [100], "P_opt": [8], "T_opt_s": [0.8]})
    cm = SimpleNamespace(configs=[(2, 100)], app="sorting", paradigm="pipeline", traces=["t"])
    assert extrapolated(df, cm).tolist() == [False, False, True, True]
    marked = {}

    def savefig(fig, path, **kw):
        ax = fig.axes[0]
        marked["lines"] = [ln for ln in ax.get_lines() if "bad fit" in str(ln.get_label())]
        marked["title"] = fig._suptitle.get_text()
        marked["linear"] = [ln for ln in fig.axes[1].get_lines() if ln.get_label() == "linear"]
        Path(path).write_bytes(b"png")

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig)
    plot(df, opt, cm, "elements", tmp_path / "p.png", bad_fit=True)
    assert len(marked["lines"]) == 1
    assert list(marked["lines"][0].get_xdata()) == [4, 8]
    assert "--accept-bad-fit" in marked["title"]
    # the speedup panel's "linear" reference is speedup = P wherever it is drawn (a straight
    # segment from (1, 1) to (8, 8) on its log speedup axis read 1.35 at P = 2)
    (lin,) = marked["linear"]
    x, y = np.asarray(lin.get_xdata()), np.asarray(lin.get_ydata())
    assert np.allclose(x, y) and len(x) > 100 and x.min() == 1 and x.max() == 8
    plot(df, opt, cm, "elements", tmp_path / "p.png", bad_fit=False)
    assert marked["lines"] == [] and "--accept-bad-fit" not in marked["title"]


def test_a_point_without_prediction_is_recorded_and_the_grid_goes_on(monkeypatch) -> None:
    # a model whose premise fails at one (P, N) (M/M/1 with a saturated link) leaves that point
    # NaN with the reason; the others, and the optimum among them, stand
    from predict import scaling
    cm = toy_model("sorting", "tree", 1000)
    real_run = replay.run

    def run(prep, model, **kw):
        if prep.nranks == 4:
            raise replay.NoPredictionError("mm1: 3 messages cross a link with rho >= 1")
        return real_run(prep, model, **kw)
    monkeypatch.setattr(replay, "run", run)
    model = replay.models.get_model("loggps")
    values = replay.models.resolve(model)
    df = scaling.predict_grid(cm, [2, 4], [13_500], model, values, {})
    bad = df[df["P"] == 4].iloc[0]
    assert math.isnan(bad["makespan_s"]) and "rho >= 1" in bad["failed"]
    assert df[df["P"] == 2]["makespan_s"].notna().all()
    assert int(scaling.optimum(df, 5.0).iloc[0]["P_opt"]) in (1, 2)
