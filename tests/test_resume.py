"""Rule ``resume_after_wait`` (replay.resume): a burst after a long time in MPI calls takes
longer, by the profile's ``[resume]`` curve w(b, d) (measured by calibrate's resume probe,
replay.calibration.resume); the traced d's share comes off each burst and the replayed d's is
put back. Hand-computed replays through the command line, the curve's two implementations, the
inversion, the streamed path, the section's checks and the probe's fit.

The hand-computed case (us): the profile of ``conftest.hand_profile`` (o_send 3, o_recv 2, L 1)
and a curve of one point, w(100 us, 1 ms) = 50 us, so w(b, d) = 50 · min(b/100, 1) · min(d/1000,
1). Rank 0 computes 100 then sends 8 bytes to rank 1 and receives its answer; rank 1 computes 10,
receives, computes 100 and answers. The trace starts at its first call, rank 1's receive at 10,
so every time below is 10 less. In the trace rank 1 was held 1.5 ms inside its receive (d =
1500.3), so its 100 us burst is a warm burst b_w with b_w + 0.5 b_w = 100: 66.667. Replayed, the
receive ends at 90 + 3 + 1 + 2 = 96 (d = 96): b' = 66.667 + 50 · 0.66667 · 0.096 = 69.867; rank
1's send ends at 96 + 69.867 + 3 = 168.867, rank 0's receive at 165.867 + 3 + 1 + 2 = 171.867.
Without the rule: 199 and 202."""

from __future__ import annotations

import numba as nb
import numpy as np
import pytest

from replay.calibration.resume import RESUME_AWAY_S, fit_resume, iterations
from replay.profile import ProfileError
from replay.resume import ResumeCurve, resume_curve, resume_rule, warm_bursts
from replay.rules import resume_extra
from conftest import hand_profile, rank_ends_ns, replay_json
from synthetic import simulate_to_dir

US = 1e-6
PROGRAM = [[("compute", 100_000), ("send", 1, 8), ("recv", 1)],
           [("compute", 10_000), ("stall", 1_500_000), ("recv", 0), ("compute", 100_000),
            ("send", 0, 8)]]
ONE_POINT = {"burst_s": [100 * US], "away_s": [1000 * US], "extra_s": [[50 * US]]}
CURVE = {"burst_s": [10 * US, 60 * US, 500 * US], "away_s": [0.1e-3, 1e-3, 8e-3, 32e-3],
         "extra_s": [[0.0, 1 * US, 5 * US], [1 * US, 7 * US, 80 * US],
                     [5 * US, 48 * US, 400 * US], [30 * US, 110 * US, 600 * US]]}


@nb.njit
def _kernel_w(tab, b, d):
    out = np.empty(len(b))
    for i in range(len(b)):
        out[i] = resume_extra(tab, b[i], d[i])
    return out


def test_a_burst_after_a_shorter_wait_loses_what_the_traced_wait_added(tmp_path, run_hindsight):
    trace = simulate_to_dir(tmp_path / "t", PROGRAM)
    prof = hand_profile(tmp_path / "p.toml", resume=ONE_POINT)
    doc = replay_json(run_hindsight, trace, prof)
    assert rank_ends_ns(doc) == [171867, 168867]
    ch = doc["resume_after_wait_s"]
    assert ch["removed"] == pytest.approx(100 / 3 * US) and ch["added"] == pytest.approx(3.2 * US)
    r = run_hindsight("replay", str(trace), "--profile", str(prof))
    assert r.returncode == 0 and "rule resume_after_wait" in r.stdout, r.stdout
    assert "0.000033 s taken off as traced, 0.000003 s put back" in r.stdout, r.stdout
    # the streamed replay applies it alike
    assert rank_ends_ns(replay_json(run_hindsight, trace, prof, "--window", "16")) == \
        [171867, 168867]
    # without the section nothing changes, and nothing is said
    plain = replay_json(run_hindsight, trace, hand_profile(tmp_path / "plain.toml"))
    assert rank_ends_ns(plain) == [202000, 199000] and "resume_after_wait_s" not in plain
    # loggopsim replays the bursts as recorded, and says so
    g = run_hindsight("replay", str(trace), "--profile", str(prof), "--model", "loggopsim")
    assert g.returncode == 0 and "rule resume_after_wait not applied" in g.stdout, g.stdout


def test_streamed_segments_carry_the_clock(tmp_path, run_hindsight):
    """Many segments (a window of 16 rows): each rank's clock of the rule crosses the cuts, so
    the answer is the in-memory one."""
    iters = 40
    r0 = [("compute", 50_000)]
    r1 = [("compute", 5_000)]
    for i in range(iters):
        r0 += [("send", 1, 64), ("compute", 30_000 + 1_000 * i), ("recv", 1)]
        r1 += [("stall", 400_000 * (i % 3)), ("recv", 0), ("compute", 40_000 + 2_000 * i),
               ("send", 0, 64)]
    trace = simulate_to_dir(tmp_path / "t", [r0, r1])
    prof = hand_profile(tmp_path / "p.toml", resume=CURVE)
    whole = replay_json(run_hindsight, trace, prof)
    streamed = replay_json(run_hindsight, trace, prof, "--window", "16")
    assert streamed["streamed"]["segments"] > 3, streamed["streamed"]
    assert rank_ends_ns(streamed) == rank_ends_ns(whole)
    assert streamed["resume_after_wait_s"] == pytest.approx(whole["resume_after_wait_s"])
    assert whole["resume_after_wait_s"]["removed"] > 0


def test_the_kernel_and_numpy_curves_agree():
    c = resume_curve({"resume": CURVE})
    rng = np.random.default_rng(3)
    b = np.concatenate((rng.uniform(0, 800e3, 400), [0, 10e3, 60e3, 500e3, 2e6, 5e3]))
    d = np.concatenate((rng.uniform(0, 50e6, 400), [1e6, 0, 1e6, 32e6, 90e6, 0.05e6]))
    mine = _kernel_w(c.table(), b, d)
    ref = np.array([c.extra(x * 1e-9, y * 1e-9) * 1e9 for x, y in zip(b, d)])
    assert np.allclose(mine, ref, rtol=1e-12, atol=1e-6)
    # the measured points, the origin and beyond the last ones
    assert c.extra(60 * US, 8e-3) == pytest.approx(48 * US)
    assert c.extra(0.0, 8e-3) == 0.0 and c.extra(60 * US, 0.0) == 0.0
    assert c.extra(5e-3, 1.0) == pytest.approx(600 * US)
    assert c.extra(35 * US, 4.5e-3) == pytest.approx(
        0.5 * (0.5 * (1 + 7) + 0.5 * (5 + 48)) * US)


def test_warm_bursts_invert_the_curve():
    c = resume_curve({"resume": CURVE})
    tab = c.table()
    rng = np.random.default_rng(5)
    b = rng.uniform(1e3, 3e6, 500)
    d = rng.uniform(0, 60e6, 500)
    w = warm_bursts(tab, b, d)
    assert np.all(w > 0) and np.all(w <= b)
    assert np.allclose(w + _kernel_w(tab, w, d), b, rtol=1e-9)
    # no time away, or no burst: kept
    assert np.array_equal(warm_bursts(tab, b, np.zeros(500)), b)
    assert warm_bursts(tab, np.zeros(1), np.ones(1))[0] == 0.0


def test_the_trace_machines_curve_is_the_profiles_unless_measured_elsewhere():
    here = {"measured_on": {"hosts": ["a"]}, "resume": CURVE}
    other = {"measured_on": {"hosts": ["b"]}, "resume": ONE_POINT}
    same = {"measured_on": {"hosts": ["a"]}, "resume": ONE_POINT}
    assert resume_rule(here, same).source == resume_rule(here).target
    assert resume_rule(here, other).source == resume_curve(other)
    assert resume_rule({"loggps": {}}) is None


@pytest.mark.parametrize("section", [
    {**ONE_POINT, "away_s": [2e-3, 1e-3]},
    {**ONE_POINT, "extra_s": [[-1e-6]]},
    {**ONE_POINT, "extra_s": [[1e-6, 2e-6]]},
    {"burst_s": [1e-4], "extra_s": [[1e-6]]},
])
def test_a_bad_section_is_one_error_line(tmp_path, run_hindsight, section):
    prof = hand_profile(tmp_path / "p.toml", resume=section)
    trace = simulate_to_dir(tmp_path / "t", PROGRAM)
    r = run_hindsight("replay", str(trace), "--profile", str(prof))
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("Error: ") and "[resume]" in r.stderr
    with pytest.raises(ProfileError):
        resume_curve({"resume": section})


def test_the_fit_takes_the_median_difference_per_round():
    """Two ranks' rounds per block; the extra is the median of away - resumed, 0 (noted) where
    the kernel ran faster after the time away."""
    d = list(RESUME_AWAY_S)
    resumed = [[10e-6, 11e-6, 10e-6, 9e-6], [100e-6, 102e-6, 98e-6, 100e-6]]
    away = [[[x + 1e-6 * j for x in resumed[0]] for j in range(len(d))],
            [[x + 20e-6 * j - 5e-6 for x in resumed[1]] for j in range(len(d))]]
    fit = fit_resume({"sizes": [8192, 65536], "away": d, "rounds": 2,
                      "resumed_s": resumed, "away_s": away})
    p = fit.params
    assert p["burst_s"] == pytest.approx([10e-6, 100e-6]) and p["away_s"] == d
    assert p["extra_s"][0] == pytest.approx([0.0, 0.0])
    assert p["extra_s"][2] == pytest.approx([2e-6, 35e-6])
    assert any("took 5 us less" in n for n in fit.notes), fit.notes
    resume_curve({"resume": p})           # a section replay reads
    assert iterations(0.0) == 40 and iterations(0.032) == 5 and iterations(0.0005) == 32


def test_the_rule_holds_in_rule_ack_cells_replays(tmp_path):
    """Rule ack_cells replays again with the floors it found; those replays keep the rule's
    curve: what it added is in the final replay's compute."""
    import replay

    k = 1000
    progs = [[("isend", 1, k), ("isend", 1, k), ("isend", 1, k), ("compute", 100_000),
              ("wait", [0, 1, 2]), ("compute", 50_000), ("recv", 1)],
             [("compute", 20_000), ("recv", 0), ("recv", 0), ("recv", 0), ("compute", 200_000),
              ("send", 0, 8)]]
    prep = replay.prepare(simulate_to_dir(tmp_path / "t", progs), use_cache=False)
    sets = {"L": "2us", "o": "300ns", "G": "0.5ns", "g": "0", "S": "512B",
            "progress": "in-call", "ack_cells": "2"}
    rule = resume_rule({"resume": CURVE})
    res = replay.run(prep, "loggps", sets, resume=rule)
    assert res.info["ack_cells"]["held"] == 1 and res.info["ack_cells"]["passes"] >= 1
    added = res.info["resume_after_wait_s"]["added"]
    assert added > 0
    plain = replay.run(prep, "loggps", sets)
    removed = res.info["resume_after_wait_s"]["removed"]
    assert res.rank_compute_ns.sum() == pytest.approx(
        plain.rank_compute_ns.sum() + (added - removed) * 1e9, abs=1e-3)
