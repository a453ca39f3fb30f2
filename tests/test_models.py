"""The papers' analytic models against their published worked examples.

Where a paper's printed result does not follow from its own formula (docs/models.md lists
each case), the test pins what the formula gives and how far the printed number is from it."""

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from validation.models import ModelError, paper000, paper001, paper002, paper003, paper004, registry


# -- paper 000 ----------------------------------------------------------------------------------

def test_paper000_eq12_feature_extraction():
    r = paper000.eval_t_total()          # defaults = eq. 12's published inputs
    assert r["steps"] == 62              # (4096/8 - 16)/(16/2)
    assert r["compute_term_s"] == pytest.approx(9.45)        # published 9.45: exact
    # The formula's communication term is 62 x T_Comm = 0.0279 s, not the printed 0.16 s.
    assert r["comm_term_s"] == pytest.approx(0.02787, rel=1e-3)
    assert r["T_Total_s"] == pytest.approx(9.478, rel=1e-3)
    assert r["T_Total_s"] == pytest.approx(9.61, rel=0.015)  # published total, 1.4 % away


def test_paper000_eq13_sorting():
    r = paper000.eval_sorting()
    assert r["compute_term_s"] == pytest.approx(176.53)       # (126 + 1) x 1.39, as printed
    # T_Comm = 2 x 0.05/(1 - 0.2878) + 0.05/(1 - 0.5755) = 0.2582 s; x 126 = 32.53 s (printed 31.5)
    assert r["T_Comm_s"] == pytest.approx(0.25820, rel=1e-4)
    assert r["T_Total_s"] == pytest.approx(209.063, rel=1e-4)
    assert r["T_Total_s"] == pytest.approx(208.03, rel=0.006)


def test_paper000_mm1_hops_and_saturation():
    s = 8 * 23720 / 1.28e9
    assert paper000.mm1_delay(23720, 1.28e9, 0.0) == pytest.approx(s)
    leaf = paper000.mm1_delay(23720, 1.28e9, 8 / 0.15)
    spine = paper000.mm1_delay(23720, 1.28e9, 16 / 0.15)
    assert spine > leaf > s              # more fan-in, more queueing
    assert paper000.t_comm(23720, 1.28e9, 0.15) == pytest.approx(2 * leaf + spine)
    with pytest.raises(ModelError):
        paper000.mm1_delay(1e6, 1e6, 1.0)                  # rho = 8 >= 1


def test_paper000_speedup_model():
    assert paper000.pipeline_depth(8) == 7               # Fig. 2: seven stages on 8 processors
    assert paper000.speedup_par(8) == pytest.approx(8 / 7)
    assert paper000.speedup_overall(16) == pytest.approx(16 * 8 / 9)
    for P in (4, 16, 128):
        assert paper000.speedup_overall(P) < P           # near-linear, bounded by P
    # eq. 1 and eq. 6 with drain: lg P merges and communications more than without
    a = paper000.t_total(64, 8, 1.0, 0.5, drain=True)
    b = paper000.t_total(64, 8, 1.0, 0.5, drain=False)
    assert a - b == pytest.approx(3 * 1.0 + 3 * 0.5)
    assert paper000.t_seq(10, 1.0, 0.5) == pytest.approx(14.5)


# -- paper 003 ----------------------------------------------------------------------------------

def test_paper003_eq20_optimal_cluster_size():
    r = paper003.eval_p_opt()
    assert r["p_opt"] == pytest.approx(5.13, abs=0.005)
    a, b, c = r["a"], r["b"], r["c"]
    assert a * r["p_opt"] ** 2 + b * r["p_opt"] + c == pytest.approx(0, abs=1e-6 * c)  # eq. 18
    # at p_opt the resolution bandwidth equals the gathering bandwidth (the definition, §5)
    assert paper003.b_resolution(2e7, r["p_opt"], 65536, 0.04e-6) == pytest.approx(0.387e6)


def test_paper003_bandwidths_eqs_10_11_13():
    r = paper003.eval_bandwidths()
    assert r["b_dist"] == pytest.approx(0.775e6, rel=1e-3)    # eq. 10
    assert r["b_proc"] == pytest.approx(1.366e6, rel=1e-3)    # eq. 11
    # eq. 13 prints 0.04749 s; c_q·2^16·ln 2^16 with c_q = 0.066e-6 is 0.04797 s (1 % more)
    assert r["t_proc_s"] == pytest.approx(0.04797, rel=1e-3)


@pytest.mark.parametrize("N,plateau", [(5e6, 22.3), (1e7, 44.5), (2e7, 88.8)])
def test_paper003_figs_1_3_plateau(N, plateau):
    # for p >= 7 the gathering bandwidth (0.387 M/s) bounds the write: the printed 'calculated
    # time' columns of Figs. 1-3 are reproduced within 0.5 %
    for p in (7, 9, 11):
        assert paper003.eval_t_total(N=N, p=p)["t_total_s"] == pytest.approx(plateau, rel=0.005)
    # and the total falls with p until then (more nodes, faster resolution)
    ts = [paper003.eval_t_total(N=N, p=p)["t_total_s"] for p in range(1, 8)]
    assert all(x >= y for x, y in zip(ts, ts[1:]))


def test_paper003_no_crossing_gives_nan():
    assert math.isnan(paper003.p_opt(1e12, 65536, 0.04e-6, 0.387e6))


# -- paper 002 ----------------------------------------------------------------------------------

def test_paper002_exchange_term():
    ex = sum(paper002.exchange(1024000, 2.43e-4, 1.51e-7) for _ in range(3))
    assert ex == pytest.approx(0.929202, abs=1e-6)


def test_paper002_worked_total():
    r = paper002.eval_t_hdc()
    assert r["exchange_s"] == pytest.approx(0.929202, abs=1e-6)
    # what the formula gives with Table 3's coefficients: 1.9345 s; printed 1.916492 s (0.94 %)
    assert r["total_s"] == pytest.approx(1.93447, rel=1e-5)
    assert r["total_s"] == pytest.approx(1.916492, rel=0.01)
    # and the prediction stays within the paper's 8.83 % of the measured 2.102299 s (Table 4)
    assert abs(r["total_s"] - 2.102299) / 2.102299 < 0.0883


def test_paper002_fit_recovers_coefficients_and_r2():
    rng = np.random.default_rng(0)
    N = rng.integers(1000, 40000, 200).astype(float)
    M = rng.integers(1000, 40000, 200).astype(float)
    y = 1e-4 + 1.35e-7 * N + 4.6e-7 * M + rng.normal(0, 1e-6, 200)
    fit = paper002.fit(("N", "M"), np.column_stack([N, M]), y)
    assert fit.coef[1] == pytest.approx(1.35e-7, rel=0.02)
    assert fit.coef[2] == pytest.approx(4.6e-7, rel=0.02)
    assert 0.99 < fit.r2 <= 1
    # a constant variable is folded into the intercept, not given an arbitrary coefficient
    fit2 = paper002.fit(("N", "M"), np.column_stack([np.full(200, 5000.0), M]),
                        2e-3 + 4.6e-7 * M)
    assert fit2.dropped == ("N",) and fit2.coef[1] == 0.0
    assert fit2(N=5000, M=100) == pytest.approx(2e-3 + 4.6e-5)


def test_paper002_needs_power_of_two():
    c = paper002.BlockCost(("M",), (0.0, 0.0))
    with pytest.raises(ModelError):
        paper002.t_hdc(6, 10, 10, c, c, paper002.BlockCost(("N", "M"), (0, 0, 0)), 0, 0)


# -- paper 004 ----------------------------------------------------------------------------------

def test_paper004_21_4_seconds():
    assert paper004.eval_overhead_growth()["extra_master_time_s"] == pytest.approx(21.4, abs=0.05)


def test_paper004_overhead_constants_from_two_P():
    a, b = paper004.solve_overhead(2, 12.48e-6, 8, 13.57e-6)
    assert a == pytest.approx(12.1e-6, abs=0.05e-6)      # Table 2 rounds to 12.1 µs
    assert b == pytest.approx(0.182e-6, abs=0.001e-6)    # and 0.182 µs per processor


def test_paper004_saturation_point():
    # a task costs 1 ms; the master's round trip ~ 2 x 25 µs: saturation near P ~ 1 ms/50 µs
    kw = dict(n=10000, t_task=1e-3, k_send=8, k_recv=12, L=50e-6, G=0.0268e-6, o_a=12.1e-6,
              o_b=0.182e-6, O_send=0.0708e-6, O_recv=0.0722e-6)
    s = paper004.saturation(**kw, P_max=200)
    assert 10 < s["saturation_P"] < 40
    assert s["optimal_P"] in (s["saturation_P"] - 1, s["saturation_P"])
    # without the P term (plain LogGPS) the saturation comes later
    s0 = paper004.saturation(**{**kw, "o_b": 0.0}, P_max=200)
    assert s0["saturation_P"] >= s["saturation_P"]


# -- paper 001 ----------------------------------------------------------------------------------

def test_paper001_metrics():
    assert paper001.overhead(100, 30, 4) == 20                     # eq. 1
    assert paper001.efficiency(100, 30, 4) == pytest.approx(100 / 120)
    assert paper001.efficiency_from_overhead(100, 20) == pytest.approx(100 / 120)   # eq. 2
    assert paper001.K_of(0.75) == pytest.approx(3.0)


def test_paper001_isoefficiency_exponent():
    # synthetic runs whose overhead is T_o = c·p·log2 p (independent of W): W_iso ∝ p log p,
    # whose log-log slope over p = 2..16 lies between 1 and 2
    runs = []
    for p in (2, 4, 8, 16):
        for W in (10.0, 20.0):
            T_o = 0.5 * p * math.log2(p)
            runs.append((p, W, (W + T_o) / p))
    r = paper001.isoefficiency(runs, 0.8)
    assert [row["W_iso_s"] for row in r["per_p"]] == pytest.approx(
        [4 * 0.5 * p * math.log2(p) for p in (2, 4, 8, 16)])
    assert 1.5 < r["exponent"] < 1.8          # p log p: steeper than p, flatter than p^2


# -- command line -------------------------------------------------------------------------------

def test_model_command_reproduces_and_rejects():
    from hindsight.cli import main
    r = CliRunner().invoke(main, ["model", "paper003.p_opt"])
    assert r.exit_code == 0 and "5.13" in r.output
    r = CliRunner().invoke(main, ["model", "paper000", "--param", "N=4096", "--param", "C=1.28G"])
    assert r.exit_code == 0 and "T_Total_s" in r.output
    for args, msg in ((["nope"], "unknown model"), (["paper000", "-p", "x=1"], "unknown parameter"),
                      (["paper000", "-p", "N=abc"], "not a number"),
                      (["paper000", "-p", "t_comp=1e-5"], "saturates")):
        r = CliRunner().invoke(main, ["model", *args])
        assert r.exit_code == 2 and msg in r.output and "Traceback" not in r.output


@pytest.mark.parametrize("args,line", [
    (["paper000", "--param", "P=-4"], "Error: --param P=-4: must be a count >= 1"),
    (["paper000", "--param", "t_comp=-1"], "Error: --param t_comp=-1: must be a time > 0 s"),
    (["paper001", "--param", "p=0"], "Error: --param p=0: must be a count >= 1"),
    (["paper001", "--param", "p=abc"], "Error: --param p=abc: not a number: 'abc'"),
    (["paper002", "--param", "P=2.5"], "Error: --param P=2.5: must be an integer >= 1"),
    (["paper003.p_opt", "--param", "c_m=0"], "Error: --param c_m=0: must be a time > 0 s"),
    (["paper000", "--param", "tcomp=1"],
     "Error: --param tcomp=1: unknown parameter 'tcomp' for paper000 (did you mean 't_comp'?)"),
    (["paper03"], "Error: unknown model 'paper03' (did you mean 'paper003'?)"),
    (["paper000", "--param", "N"], "Error: --param N: expected NAME=VALUE"),
])
def test_model_inputs_outside_their_range_are_usage_errors(args, line):
    from hindsight.cli import main
    r = CliRunner().invoke(main, ["model", *args])
    assert r.exit_code == 2 and r.output.strip() == line


#: outputs that are differences, negative when the comparison goes the other way: the overhead
#: of a superlinear run, fewer processors than before, an overhead that falls with P
DIFFERENCES = {"T_o_s", "extra_master_time_s", "o_a_s", "o_b_s"}


def test_no_input_makes_a_model_divide_by_zero_or_go_negative():
    """Every evaluator declares the range of each input; at the edges of those ranges (and just
    outside) the command prints a result or one usage line, never an arithmetic error or a
    negative time."""
    from hindsight.cli import main
    from validation.models import parameters
    for name, fn in registry().items():
        assert set(fn.bounds) == set(parameters(fn)), name
        for k in parameters(fn):
            for v in ("0", "-1", "1", "0.5", "1e300"):
                r = CliRunner().invoke(main, ["model", name, "--json", "-p", f"{k}={v}"])
                assert r.exit_code in (0, 2), (name, k, v, r.output)
                if r.exit_code == 2:
                    assert r.output.startswith("Error: ") and len(r.output.splitlines()) == 1
                    assert "division" not in r.output, (name, k, v, r.output)
                    continue
                out = json.loads(r.output)["outputs"]
                negative = [o for o, x in out.items() if o.endswith("_s")
                            and isinstance(x, float) and x < 0 and o not in DIFFERENCES]
                assert not negative, (name, k, v, out)


# -- profiles given to replay ----------------------------------------------------------------------

@pytest.mark.parametrize("data,words", [
    ({"a": 1}, "unknown parameter 'a' for model loggps (known: "),
    ({"LL": 5e-6}, "unknown parameter 'LL' for model loggps (did you mean 'L'?)"),
    ({"models": {"loggps": {"o_sned": 1e-6}}},
     "unknown parameter 'o_sned' for model loggps (did you mean 'o_send'?)"),
    ({"model": "loggps", "params": {"G": -1}}, "G=-1: impossible value"),
    ({"models": {"loggps": [1]}}, "the parameters of model loggps must be an object"),
])
def test_json_profile_keys_are_checked_against_the_model(tmp_path, data, words):
    """A JSON profile's error names the profile (and --profile at the command line), never
    --set, which was not given; at the command line it is a data error (exit 1)."""
    from replay import models as M
    from tests.conftest import ROOT
    path = tmp_path / "x.json"
    path.write_text(json.dumps(data))
    with pytest.raises(M.ParamError) as exc:
        M.load_profile(path, M.get_model("loggps"))
    assert str(exc.value).startswith(f"profile {path}: ") and words in str(exc.value)
    from hindsight.cli import main
    r = CliRunner().invoke(main, ["replay", str(ROOT / "tests/corpus/requests-n2"),
                                  "--profile", str(path)])
    assert r.exit_code == 1 and r.output.strip() == f"Error: --profile: {exc.value}"


def test_every_evaluator_runs_on_its_defaults():
    for name, fn in registry().items():
        out = fn()
        assert out and all(v == v for v in out.values() if isinstance(v, float)), name


@pytest.mark.parametrize("section,line,model,words", [
    ("loggps", "o_sned = 1e-6", "loggps",
     "[loggps] o_sned: not a key of a calibrated profile (did you mean 'o_send'?)"),
    ("loggps", "zz = 1", "loggp", "[loggps] zz: not a key of a calibrated profile (its keys: "),
    # a parameter of the model that no profile sets (the model would not read it)
    ("loggps", "o = 9e-6", "loggps", "[loggps] o: not a key of a calibrated profile (a "
     "parameter no profile sets: --set o=VALUE sets it for a replay)"),
    ("mm1", "rho = 'measured'", "mm1", "[mm1] rho: not a key of a calibrated profile (a "
     "parameter no profile sets"),
    ("mm1", "CC = 3", "mm1", "[mm1] CC: not a key of a calibrated profile (did you mean 'C'?)"),
    ("hockney", "gg = 1e-9", "hockney",
     "[hockney] gg: not a key of a calibrated profile (did you mean 'g'?)"),
])
def test_a_calibrated_profiles_misspelt_key_is_refused(tmp_path, section, line, model, words):
    """A key of a calibrated (TOML) profile's model section that the model does not know is an
    error naming the file, the section and the key: it was dropped without a word, and the
    prediction made without the what-if it was meant to be."""
    from replay import models as M
    from tests.conftest import ROOT
    text = (ROOT / "docs/calibration/shm.toml").read_text()
    path = tmp_path / "typo.toml"
    path.write_text(text.replace(f"[{section}]\n", f"[{section}]\n{line}\n", 1))
    with pytest.raises(M.ParamError) as exc:
        M.load_profile(path, M.get_model(model))
    assert str(exc.value).startswith(f"profile {path}: ") and words in str(exc.value)
    from hindsight.cli import main
    r = CliRunner().invoke(main, ["replay", str(ROOT / "tests/corpus/requests-n2"),
                                  "--model", model, "--profile", str(path)])
    assert r.exit_code == 1 and r.output.strip() == f"Error: --profile: {exc.value}"
