"""Rule transport_burst_cost (replay/transport_cost.py): a burst after a call loses the trace
transport's extra time e_A(b) and gains the replayed transport's e_B(b), each the straight line
through the calibrated points from (0, 0), constant beyond the last.

Hand-computed with LogGPS L = 2 us, o = 300 ns, g = 0, 8-byte eager messages. Curves:
source (A, "tcp")  burst 10 us -> +2 us, 40 us -> +4 us
target (B, "shm")  burst 10 us -> +5 us, 40 us -> +14 us
(the target costing more is only to see the sign; the rule does not care which is which)."""

from __future__ import annotations

import numpy as np
import pytest

import replay
from replay.calibration import fit as F
from replay.profile import ProfileError
from replay.transport_cost import burst_curve, transport_cost
from synthetic import simulate_to_dir

SETS = {"L": "2us", "o": "300ns", "g": "0"}
O = 300.0


def _profile(transport: str, burst, extra) -> dict:
    return {"measured_on": {"transport": transport},
            "compute": {"burst_s": list(burst), "extra_s": list(extra)}}


SRC = _profile("tcp", [10e-6, 40e-6], [2e-6, 4e-6])
DST = _profile("shm", [10e-6, 40e-6], [5e-6, 14e-6])


def _end0(tmp_path, burst_ns: float, cost) -> float:
    prep = replay.prepare(simulate_to_dir(tmp_path / f"t{burst_ns:g}", [
        [("send", 1, 8), ("compute", burst_ns), ("send", 1, 8)],
        [("recv", 0), ("recv", 0)]]), use_cache=False)
    res = replay.run(prep, "loggps", SETS, transport_cost=cost)
    return res.rank_end_ns[0], res.info.get("transport_burst_cost_s")


def test_curve_interpolates_from_zero_and_holds_beyond_the_last_point():
    a = burst_curve(SRC)
    got = a.extra_ns(np.array([0.0, 5_000.0, 10_000.0, 20_000.0, 40_000.0, 1e6]))
    # 5 us: half of 2 us; 20 us: 2 + 2·(10/30); beyond 40 us: 4 us
    assert got.tolist() == pytest.approx([0.0, 1_000.0, 2_000.0, 2_000.0 + 2_000.0 / 3,
                                          4_000.0, 4_000.0])


def test_replayed_burst_swaps_the_transports_extra_time(tmp_path):
    cost = transport_cost(SRC, DST)
    base, none = _end0(tmp_path, 20_000, None)
    assert base == pytest.approx(O + 20_000 + O) and none is None
    # b' = 20 - (2 + 2/3) + (5 + 9/3) = 25 1/3 us
    end, change = _end0(tmp_path, 20_000, cost)
    assert end == pytest.approx(O + 20_000 - (2_000 + 2_000 / 3) + 8_000 + O)
    assert change == pytest.approx((8_000 - 2_000 - 2_000 / 3) / 1e9)
    # a long burst: both extra times are the last point's, 14 - 4 = +10 us
    end, _ = _end0(tmp_path, 100_000, cost)
    assert end == pytest.approx(O + 100_000 + 10_000 + O)
    # the other way round, below the first point: 1 us - 5·(1/10) + 0.1·(1/10) us
    back = transport_cost(DST, _profile("tcp", [10e-6], [0.1e-6]))
    end, _ = _end0(tmp_path, 1_000, back)
    assert end == pytest.approx(O + 1_000 - 500 + 10 + O)
    # a burst never goes below 0: 1 us - 2 us + 0.01 us
    clip = transport_cost(_profile("shm", [10e-6], [20e-6]), _profile("tcp", [10e-6], [0.1e-6]))
    end, _ = _end0(tmp_path, 1_000, clip)
    assert end == pytest.approx(O + 0 + O)


def test_the_first_burst_and_same_transport_replays_are_kept(tmp_path):
    prep = replay.prepare(simulate_to_dir(tmp_path / "first", [
        [("compute", 20_000), ("send", 1, 8)], [("recv", 0)]]), use_cache=False)
    plain = replay.run(prep, "loggps", SETS).rank_end_ns[0]
    with_rule = replay.run(prep, "loggps", SETS, transport_cost=transport_cost(SRC, DST))
    assert with_rule.rank_end_ns[0] == plain
    assert transport_cost(SRC, _profile("tcp", [1e-6], [9e-6])) is None
    assert transport_cost(SRC, {"measured_on": {"transport": "shm"}}) is None


def test_malformed_compute_section_names_the_file():
    with pytest.raises(ProfileError, match="a.toml: \\[compute\\]"):
        burst_curve(_profile("tcp", [40e-6, 10e-6], [1e-6, 1e-6]), "a.toml")
    with pytest.raises(ProfileError, match="\\[compute\\]"):
        burst_curve(_profile("tcp", [10e-6], [1e-6, 2e-6]))


def test_burst_fit_pairs_rounds_and_keeps_no_negative_extra():
    probe = {"sizes": [8192, 1024], "rounds": 3, "bytes": [8, 2048],
             # per message size, per kernel size: rounds of both ranks
             "silent_s": [[[30e-6, 32e-6, 31e-6], [10e-6, 11e-6, 12e-6]],
                          [[31e-6, 31e-6, 31e-6], [11e-6, 11e-6, 11e-6]]],
             "exchanged_s": [[[36e-6, 35e-6, 40e-6], [9e-6, 10.5e-6, 11e-6]],
                             [[41e-6, 39e-6, 40e-6], [13e-6, 14e-6, 15e-6]]]}
    fit = F.fit_bursts(probe)
    # lengths: the medians over both series (sorted); 8 B: 1024 differences -1, -0.5, -1 us
    # -> 0 (noted), 8192: 6, 3, 9 -> 6 us; 2048 B: 2, 3, 4 -> 3 us and 10, 8, 9 -> 9 us
    assert fit.params["burst_s"] == pytest.approx([11e-6, 31e-6])
    assert fit.params["bytes"] == [8, 2048]
    assert np.asarray(fit.params["extra_s"]) == pytest.approx(np.array([[0.0, 6e-6],
                                                                         [3e-6, 9e-6]]))
    assert fit.evidence["kernel_doubles"] == [1024, 8192]
    assert any("less" in n for n in fit.notes)
    curve = burst_curve({"compute": fit.params, "measured_on": {"transport": "shm"}})
    # between the sizes, linear in log2(k): 128 B is half way from 8 to 2048 B
    got = curve.extra_ns(np.array([31_000.0, 31_000.0, 31_000.0, 31_000.0]),
                         np.array([0.0, 128.0, 2048.0, 1e6]))
    assert got.tolist() == pytest.approx([6_000.0, 7_500.0, 9_000.0, 9_000.0])


def test_the_bytes_before_a_burst_choose_the_row(tmp_path):
    """b' = b − e_A(k, b) + e_B(k, b) with k the bytes of the message before the burst: the
    same 20 us burst after an 8-byte and after a 2048-byte send (rows 8 B and 2048 B)."""
    src = {"measured_on": {"transport": "tcp"},
           "compute": {"burst_s": [10e-6, 40e-6], "bytes": [8, 2048],
                       "extra_s": [[2e-6, 4e-6], [4e-6, 8e-6]]}}
    dst = {"measured_on": {"transport": "shm"},
           "compute": {"burst_s": [10e-6, 40e-6], "bytes": [8, 2048],
                       "extra_s": [[1e-6, 2e-6], [1e-6, 2e-6]]}}
    cost = transport_cost(src, dst)
    for k, lost in ((8, 2_000 + 2_000 / 3 - (1_000 + 1_000 / 3)),
                    (2048, 4_000 + 4_000 / 3 - (1_000 + 1_000 / 3))):
        prep = replay.prepare(simulate_to_dir(tmp_path / f"k{k}", [
            [("send", 1, k), ("compute", 20_000), ("send", 1, 8)],
            [("recv", 0), ("recv", 0)]]), use_cache=False)
        plain = replay.run(prep, "loggps", {**SETS, "S": "1MiB"})
        ruled = replay.run(prep, "loggps", {**SETS, "S": "1MiB"}, transport_cost=cost)
        assert plain.rank_end_ns[0] - ruled.rank_end_ns[0] == pytest.approx(lost)
    # the call before the burst is an exchange: its largest message counts (2048 B received,
    # 8 B sent, in an Isend, an Irecv and a Waitall with no compute between them)
    prep = replay.prepare(simulate_to_dir(tmp_path / "x", [
        [("isend", 1, 8), ("irecv", 1), ("wait", [0, 1]), ("compute", 20_000), ("send", 1, 8)],
        [("isend", 0, 2048), ("irecv", 0), ("wait", [0, 1]), ("recv", 0)]]), use_cache=False)
    plain = replay.run(prep, "loggps", {**SETS, "S": "1MiB"})
    ruled = replay.run(prep, "loggps", {**SETS, "S": "1MiB"}, transport_cost=cost)
    assert plain.rank_end_ns[0] - ruled.rank_end_ns[0] == pytest.approx(
        4_000 + 4_000 / 3 - (1_000 + 1_000 / 3))


def test_replay_cli_applies_the_rule_with_both_profiles(tmp_path, run_hindsight):
    import tomli_w

    from replay.profile import read_profile
    trace = simulate_to_dir(tmp_path / "cli", [
        [("send", 1, 8), ("compute", 20_000), ("send", 1, 8)], [("recv", 0), ("recv", 0)]])
    paths = {}
    for name, extra in (("tcp", SRC), ("shm", DST)):
        prof = read_profile(f"docs/calibration/{name}.toml")
        prof["compute"] = extra["compute"]
        # this trace is the Python tracer's: without the section, its bursts are the rule's
        # alone (rule python_tracer_in_bursts would take the tracer's time off them first)
        prof.pop("python_tracer", None)
        paths[name] = tmp_path / f"{name}.toml"
        paths[name].write_text(tomli_w.dumps(prof))
    r = run_hindsight("replay", trace, "--profile", paths["shm"], "--trace-profile", paths["tcp"])
    assert r.returncode == 0, r.stderr
    # one burst of 20 us after a call: -(2 + 2/3) + 8 us
    assert "transport  bursts tcp -> shm (rule transport_burst_cost): +0.00533 ms" in r.stdout
    r = run_hindsight("replay", trace, "--trace-profile", paths["tcp"])
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "Error: --trace-profile: needs --profile (the network to predict)"]
    old = read_profile("docs/calibration/tcp.toml")
    del old["compute"]                      # a profile made before the burst probe
    (tmp_path / "old.toml").write_text(tomli_w.dumps(old))
    r = run_hindsight("replay", trace, "--profile", paths["shm"], "--trace-profile",
                      tmp_path / "old.toml")
    assert r.returncode == 0 and "note: --trace-profile has no [compute] section" in r.stderr
