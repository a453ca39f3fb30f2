"""Profiles record the machine's conditions and their fit's residuals; `calibrate` refuses (or
marks) a noisy one, `replay`/`sweep` warn about it, `validate` does not proceed silently on it.

`calibrate` runs here on a synthetic benchmark (``run_bench`` replaced) so that an outlier or a
preempted rank can be injected; tests/test_calibration.py has the real runs."""

from __future__ import annotations

import math
import tomllib

import numpy as np
import pytest
from click.testing import CliRunner

from replay.calibration import fit as F
from replay.calibration import quality as Q
from replay.calibration import run as R
from hindsight.cli import main

SIZES = [2 ** i for i in range(0, 25)]                    # 1 B .. 16 MiB
TRUE = {"L": 1e-6, "o_send": 0.8e-6, "o_recv": 1.1e-6, "g": 1.2e-6, "G": 0.06e-9, "S": 4096.0,
        "O": 0.0, "O_send": 0.0, "O_recv": 0.0}
DELAY = 2e-3


def _bench(outlier: dict[int, float] | None = None, wait: float = 0.0, seed: int = 1) -> dict:
    """What bench.py writes for a 2-rank run whose timings follow LogGPS (TRUE) with 2 % noise,
    the one-way time of the sizes in ``outlier`` multiplied by their factor, and both ranks
    waiting for a core ``wait`` of the measured time."""
    rng = np.random.default_rng(seed)
    k = np.asarray(SIZES, float)
    t = F.loggps_one_way(k, TRUE)
    o_s = F.loggps_send_time(k, TRUE)
    per_size = []
    for i, size in enumerate(SIZES):
        f = (outlier or {}).get(size, 1.0)
        noise = lambda n: rng.lognormal(0.0, 0.02, n)         # noqa: E731
        per_size.append({"k": size, "rtt": (2 * t[i] * f * noise(20)).tolist(),
                         "o_send": (o_s[i] * noise(20)).tolist(),
                         "o_recv": (TRUE["o_recv"] * noise(10)).tolist()})
    info = [{"rank": r, "host": "h0", "cpus_allowed": [r], "last_cpu": r,
             "env": {}, "cvars": {"MPIR_CVAR_NOLOCAL": 0}, "measured_s": 2.0,
             "run_queue_wait_s": 2.0 * wait, "ctx_switches": [10, int(1000 * wait)]}
            for r in (0, 1)]
    return {"per_size": per_size,
            "gap": {"n1": 8, "n2": 64, "t_n1": [8 * TRUE["g"] + 5e-6] * 10,
                    "t_n2": [64 * TRUE["g"] + 5e-6] * 10},
            "eager_probe": {"delay_s": DELAY, "sizes": SIZES,
                            "send_s": [1e-6 if s <= TRUE["S"] else DELAY for s in SIZES]},
            "loopback_probe": {"payload_bytes": 32 << 20, "lo_tx_bytes": 0, "iface": "lo"},
            "rank_info": info, "receiver_wait": "spin",
            "mpi_library": "MPICH Version: 5.0.2", "mpi_version": "4.1", "mpi4py_version": "4"}


@pytest.fixture
def fake_bench(monkeypatch):
    """Replace the MPI run by a queue of synthetic runs (the last one repeats)."""
    runs: list[dict] = []
    calls: list[int] = []

    def run_bench(nprocs, transport, sizes, repeat, **kw):
        calls.append(nprocs)
        return runs[min(len(calls), len(runs)) - 1], ""

    monkeypatch.setattr(R, "run_bench", run_bench)
    monkeypatch.setattr(R.time, "sleep", lambda s: None)
    # (the native probe is a real MPI job of its own: tests/test_native_costs.py runs it)
    monkeypatch.setattr(R, "native_probe", lambda *a, **kw: None)
    return runs, calls


def _calibrate(tmp_path, *extra: str):
    out = tmp_path / "p.toml"
    r = CliRunner().invoke(main, ["calibrate", "-n", "2", "--overhead-ranks", "2", "--out", str(out),
                                           *extra])
    return r, out


def test_quiet_measurement_writes_conditions_and_residuals(fake_bench, tmp_path):
    fake_bench[0].append(_bench())
    r, out = _calibrate(tmp_path)
    assert r.exit_code == 0, r.output
    prof = tomllib.loads(out.read_text())
    assert prof["quality"] == "ok" and Q.profile_problems(prof) == []
    chk = prof["fit"]["check"]
    # the residuals recorded are the fit's own, over the judged sizes
    res = prof["fit"]["residuals"]["loggp"]
    judged = [res[i] for i, k in enumerate(prof["fit"]["sizes"]) if k in chk["judged_sizes"]]
    assert chk["residual_worst"] == max(judged, key=abs)
    assert chk["residual_median"] == pytest.approx(float(np.median(np.abs(judged))))
    assert abs(chk["residual_worst"]) < 0.2 and chk["attempts"] == 1
    assert 2 ** 24 in chk["judged_sizes"] and 1 in chk["judged_sizes"]
    assert 65536 not in chk["judged_sizes"]           # between S and the long messages
    cond = prof["conditions"]
    for key in ("seconds", "cores", "loadavg_1m_before", "loadavg_1m_after"):
        assert key in cond
    assert [x["rank"] for x in cond["ranks"]] == [0, 1]
    assert cond["ranks"][0]["run_queue_wait_fraction"] == 0.0 and cond["problems"] == []
    assert "quality ok" in r.output


def test_a_4x_outlier_is_refused_with_the_point_named(fake_bench, tmp_path):
    runs, calls = fake_bench
    runs.append(_bench(outlier={2 ** 24: 4.0}))
    r, out = _calibrate(tmp_path)
    assert r.exit_code == 1 and not out.exists()
    lines = r.output.strip().splitlines()
    err = [x for x in lines if x.startswith("Error:")]
    assert len(err) == 1 and "16 MiB fitted" in err[0] and "below the measurement" in err[0]
    assert "3 attempts" in err[0] and "--accept-noisy" in err[0]
    assert len(calls) == Q.DEFAULT_ATTEMPTS          # measured again before giving up
    # the miss is as large as the outlier makes it: well beyond the tolerance
    check = Q.fit_check(*_fit(runs[0]))
    f16 = Q.miss_factor(check["residual_worst"])
    assert check["residual_worst_size"] == 2 ** 24 and f16 > Q.MAX_FACTOR


def _fit(run: dict):
    s = R.summarize(run)
    lg = F.fit_loggps(s["sizes"], s["one_way"], s["o_send"], s["o_recv"], s["g"], TRUE["S"])
    return s["sizes"].tolist(), lg.residuals, s["one_way"].tolist(), lg.params["S"]


def test_accept_noisy_writes_a_marked_profile_with_a_warning(fake_bench, tmp_path):
    fake_bench[0].append(_bench(outlier={2 ** 24: 4.0}))
    r, out = _calibrate(tmp_path, "--accept-noisy", "--attempts", "1")
    assert r.exit_code == 0, r.output
    prof = tomllib.loads(out.read_text())
    assert prof["quality"] == "noisy"
    assert any("16 MiB" in m for m in prof["fit"]["check"]["misses"])
    warn = [x for x in r.output.splitlines() if x.startswith("warning:")]
    assert len(warn) == 1 and "noisy" in warn[0] and "16 MiB" in warn[0]
    assert Q.profile_problems(prof)


def test_a_transient_miss_is_measured_again(fake_bench, tmp_path):
    runs, calls = fake_bench
    runs += [_bench(outlier={2 ** 23: 4.0}), _bench(seed=2)]
    r, out = _calibrate(tmp_path)
    assert r.exit_code == 0, r.output
    prof = tomllib.loads(out.read_text())
    chk = prof["fit"]["check"]
    assert len(calls) == 2 and chk["attempts"] == 2 and prof["quality"] == "ok"
    assert len(chk["failed_attempts"]) == 1 and "8 MiB" in chk["failed_attempts"][0]


def test_the_summary_names_the_attempt_the_profile_is(fake_bench, tmp_path):
    """--accept-noisy keeps the best attempt, here the first of two: its summary line says
    "attempt 1 of 2" (it said the number of attempts taken as if it were the one kept)."""
    fake_bench[0][:] = [_bench(wait=0.2), _bench(wait=0.3)]
    r, out = _calibrate(tmp_path, "--accept-noisy", "--attempts", "2")
    assert r.exit_code == 0, r.output
    chk = tomllib.loads(out.read_text())["fit"]["check"]
    assert (chk["attempts"], chk["kept_attempt"]) == (2, 1)
    assert "(judged sizes, attempt 1 of 2)" in r.output, r.output


def test_a_preempted_measurement_is_refused(fake_bench, tmp_path):
    fake_bench[0].append(_bench(wait=0.4))
    r, out = _calibrate(tmp_path)
    assert r.exit_code == 1 and not out.exists()
    err = r.output.strip().splitlines()[-1]
    assert err.startswith("Error:") and "under load" in err and "40.0 %" in err


def test_each_failed_attempt_is_said_and_nothing_more_is_measured(fake_bench, tmp_path,
                                                                   monkeypatch):
    """Every attempt's reasons, the last one's included, are in its progress line and in the
    error; the probes after the main measurement are not run for a profile not written."""
    runs, calls = fake_bench
    runs[:] = [_bench(wait=0.4), _bench(wait=0.2), _bench(wait=0.3)]
    probed = []
    monkeypatch.setattr(R, "tracer_probe", lambda *a, **kw: probed.append(1))
    monkeypatch.setattr(R, "native_probe", lambda *a, **kw: probed.append(2))
    r, out = _calibrate(tmp_path)
    assert r.exit_code == 1 and not out.exists() and probed == []
    lines = r.output.strip().splitlines()
    said = [x for x in lines if x.startswith("calibrate: attempt 3: taken under load")]
    assert len(said) == 1 and "30.0 %" in said[0], r.output
    err = lines[-1]
    assert err.startswith("Error: no quiet measurement in 3 attempts")
    assert [err.index(f"attempt {k}: taken under load") > 0 for k in (1, 2, 3)] == [True] * 3
    assert err.index("40.0 %") < err.index("20.0 %") < err.index("30.0 %"), err


def test_profile_problems_of_older_profiles_use_their_residuals():
    sizes, res, t, S = _fit(_bench(outlier={2 ** 24: 4.0}))
    prof = {"format": "hindsight-profile/1", "loggps": {"S": S},
            "fit": {"sizes": sizes, "residuals": {"loggp": res}, "one_way_s": t}}
    assert any("16 MiB" in p for p in Q.profile_problems(prof))
    sizes, res, t, S = _fit(_bench())
    prof["fit"] = {"sizes": sizes, "residuals": {"loggp": res}, "one_way_s": t}
    assert Q.profile_problems(prof) == []
    assert Q.profile_problems({"loggps": {"G": 1.0}}) == []       # flat JSON-era profile
    assert Q.profile_problems({**prof, "quality": "noisy"}) == ["marked noisy"]
    assert math.isinf(Q.miss_factor(-1.0)) and Q.miss_factor(1.0) == 2.0


@pytest.fixture
def profiles(fake_bench, tmp_path):
    """A clean and a noisy profile written by `calibrate` (synthetic benchmark)."""
    runs = fake_bench[0]
    runs.append(_bench())
    r, clean = _calibrate(tmp_path)
    assert r.exit_code == 0, r.output
    clean = clean.rename(tmp_path / "clean.toml")
    runs[:] = [_bench(wait=0.3)]
    r, noisy = _calibrate(tmp_path, "--accept-noisy", "--attempts", "1", "--force")  # p.png
    assert r.exit_code == 0, r.output
    return clean, noisy.rename(tmp_path / "noisy.toml")


@pytest.mark.parametrize("command", ["replay", "sweep"])
def test_replay_and_sweep_warn_about_a_noisy_profile(profiles, tmp_path, command):
    from synthetic import simulate_to_dir

    progs = [[("send", 1, 1000), ("recv", 1)], [("recv", 0), ("send", 0, 1000)]]
    tr = simulate_to_dir(tmp_path / "t", progs, manifest={"transport_name": "shm"})
    extra = [] if command == "replay" else ["--vary", "L=1us,2us", "--out", str(tmp_path / "s.csv"), "--force"]
    clean, noisy = profiles
    for prof, warned in ((noisy, True), (clean, False)):
        r = CliRunner().invoke(main, [command, str(tr), "--profile", str(prof), *extra])
        assert r.exit_code == 0, r.output + r.stderr
        warn = [x for x in r.stderr.splitlines() if x.startswith("warning:")]
        assert len(warn) == (1 if warned else 0)
        if warned:
            assert str(prof) in warn[0] and "waited for a core 30.0 %" in warn[0]
        assert "warning" not in r.stdout


SPEC = """
name = "q"
repetitions = 1
{accept}
[networks.shm]
transport = "shm"
{net}
[predictors]
replay = ["loggps"]
[[experiment]]
app = "sorting"
paradigms = ["pipeline"]
ranks = [2]
[experiment.sizes]
"4x8192" = ["--arrays", "4", "--array-size", "8192"]
"""


def _spec(tmp_path, net: str, accept: bool = False):
    from validation.spec import load_spec

    p = tmp_path / "spec.toml"
    p.write_text(SPEC.format(net=net, accept="accept_noisy_profiles = true" if accept else ""))
    return load_spec(p)


def test_validate_refuses_a_spec_profile_that_is_noisy(profiles, tmp_path):
    from validation.profiles import ensure_profile
    from validation.spec import SpecError

    clean, noisy = profiles
    sp = _spec(tmp_path, f'profile = "{noisy.name}"')
    r = CliRunner().invoke(main, ["validate", str(tmp_path / "spec.toml"), "--out",
                                          str(tmp_path / "v"), "--no-progress"])
    assert r.exit_code == 1
    err = [x for x in r.output.splitlines() if x.startswith("Error:")]
    assert len(err) == 1 and "noisy.toml" in err[0] and "accept_noisy_profiles" in err[0]
    assert not list((tmp_path / "v").glob("cells/*.json"))
    # accepted by the spec: used, with a warning
    sp = _spec(tmp_path, f'profile = "{noisy.name}"', accept=True)
    logs: list[str] = []
    dest = ensure_profile(tmp_path / "v2", "shm", sp.networks["shm"], logs.append)
    assert dest.is_file() and any(x.startswith("warning:") and "noisy" in x for x in logs)
    sp = _spec(tmp_path, f'profile = "{clean.name}"')
    logs.clear()
    assert ensure_profile(tmp_path / "v3", "shm", sp.networks["shm"], logs.append).is_file()
    assert logs == []
    with pytest.raises(SpecError, match="accept_noisy_profiles must be true or false"):
        (tmp_path / "spec.toml").write_text(SPEC.format(net="", accept='accept_noisy_profiles = 1'))
        from validation.spec import load_spec
        load_spec(tmp_path / "spec.toml")


class _Calibrations:
    """Stands in for the `hindsight calibrate` subprocess of ensure_profile: writes the given
    profiles in turn."""

    def __init__(self, texts: list[str]):
        self.texts, self.cmds = texts, []

    def __call__(self, cmd, **kw):
        import subprocess

        self.cmds.append(cmd)
        out = cmd[cmd.index("--out") + 1]
        with open(out, "w") as f:
            f.write(self.texts[min(len(self.cmds), len(self.texts)) - 1])
        return subprocess.CompletedProcess(cmd, 0, "", "")


@pytest.mark.parametrize("accept", [False, True])
def test_validate_calibrates_once_more_then_stops_on_a_noisy_profile(profiles, tmp_path,
                                                                     monkeypatch, accept):
    from validation import profiles as V

    clean, noisy = profiles
    sp = _spec(tmp_path, 'calibrate = "pickle"', accept=accept)
    fake = _Calibrations([noisy.read_text()])
    monkeypatch.setattr(V.subprocess, "run", fake)
    logs: list[str] = []
    if accept:
        dest = V.ensure_profile(tmp_path / "v", "shm", sp.networks["shm"], logs.append)
        assert tomllib.loads(dest.read_text())["quality"] == "noisy"
        assert logs[-1].startswith("warning:")
    else:
        with pytest.raises(V.SpecError, match=r"noisy after 2 calibrations: .*waited for a core"):
            V.ensure_profile(tmp_path / "v", "shm", sp.networks["shm"], logs.append)
    assert len(fake.cmds) == 2 and all("--accept-noisy" in c for c in fake.cmds)
    assert any("calibrating once more" in x for x in logs)
    # a noisy profile left by a stopped run is not reused: the next run produces it again
    fake2 = _Calibrations([noisy.read_text(), clean.read_text()])
    monkeypatch.setattr(V.subprocess, "run", fake2)
    sp = _spec(tmp_path, 'calibrate = "pickle"')
    dest = V.ensure_profile(tmp_path / "v", "shm", sp.networks["shm"], logs.append)
    assert len(fake2.cmds) == 2 and tomllib.loads(dest.read_text())["quality"] == "ok"
