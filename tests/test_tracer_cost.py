"""Rule ``python_tracer_in_bursts`` (replay.tracer_cost): a trace of the Python tracer has the
tracer's own time per call in its bursts, which the replay takes off (profile section
``[python_tracer]``, measured by calibrate's probe, replay.calibration.tracer); hand-computed
replays through the command line, the rule's conditions, the section's checks and a real probe.

The profile of the hand-computed cases (us): o_send 3, o_recv 2, L 1, G = g = O = 0, S 4 KiB;
the tracer's costs send 2, recv 5 (more than rank 1's burst: floored at 0), the others 1. Rank 0
computes 10 then sends 8 bytes to rank 1, which computes 4 then receives. As recorded: rank 0
ends at 10 + 3 = 13, rank 1 at 10 + 3 + 1 + 2 = 16. Without the tracer's time: rank 0's burst is
8, rank 1's 0: ends 11 and 8 + 3 + 1 + 2 = 14; the bursts lost 2 + 4 = 6."""

from __future__ import annotations

import os

import numpy as np
import pytest

from replay import kernel as K
from replay.tracer_cost import KEYS, by_python_tracer, per_kind_ns, tracer_costs
from conftest import hand_profile, rank_ends_ns, replay_json
from synthetic import simulate_to_dir

US = 1e-6
PROGRAM = [[("compute", 10_000, "work"), ("send", 1, 8)], [("compute", 4_000, "work"), ("recv", 0)]]
TRACER = {**{k: 1 * US for k in KEYS}, "send": 2 * US, "recv": 5 * US}


def _profile(path, tracer=None):
    return hand_profile(path, python_tracer=tracer)


def test_a_python_tracer_trace_loses_the_tracers_time_per_call(tmp_path, run_hindsight):
    prof = _profile(tmp_path / "p.toml", TRACER)
    python = simulate_to_dir(tmp_path / "py", PROGRAM)
    doc = replay_json(run_hindsight, python, prof)
    assert rank_ends_ns(doc) == [11000, 14000]
    assert doc["python_tracer_in_bursts_s"] == pytest.approx(-6 * US)
    r = run_hindsight("replay", str(python), "--profile", str(prof))
    assert r.returncode == 0 and "rule python_tracer_in_bursts" in r.stdout, r.stdout
    assert "bursts -0.000006 s" in r.stdout and "send 2, recv 5" in r.stdout
    # the streamed replay takes it off alike
    streamed = replay_json(run_hindsight, python, prof, "--window", "16")
    assert rank_ends_ns(streamed) == [11000, 14000]
    # a profile without the section changes nothing, and says nothing
    plain = _profile(tmp_path / "plain.toml")
    doc = replay_json(run_hindsight, python, plain)
    assert rank_ends_ns(doc) == [13000, 16000] and "python_tracer_in_bursts_s" not in doc
    # the measured model keeps the measured bursts; loggopsim replays them as recorded, and
    # says so
    g = run_hindsight("replay", str(python), "--profile", str(prof), "--model", "loggopsim")
    assert g.returncode == 0 and "not taken off the bursts" in g.stdout, g.stdout


def test_other_recorders_keep_their_bursts(tmp_path, run_hindsight):
    """The PMPI library's trace and an imported one have no Python tracer in them."""
    prof = _profile(tmp_path / "p.toml", TRACER)
    for name, manifest in (("lib", {"tracer": "pmpi"}), ("otf2", {"origin": {"format": "otf2"}})):
        trace = simulate_to_dir(tmp_path / name, PROGRAM, manifest=manifest)
        doc = replay_json(run_hindsight, trace, prof)
        assert rank_ends_ns(doc) == [13000, 16000] and "python_tracer_in_bursts_s" not in doc, name
    assert by_python_tracer({"ranks": 2}) and not by_python_tracer({"replay": {"model": "x"}})


def test_cost_per_kernel_kind():
    c = per_kind_ns(TRACER)
    assert c[K.SEND] == pytest.approx(2000) and c[K.RECV] == pytest.approx(5000)
    assert c[K.COLL] == pytest.approx(1000) and c[K.PROBE] == pytest.approx(1000)
    assert len(c) == K.POLL + 1 and np.all(c >= 0)


@pytest.mark.parametrize("section,msg", [
    ({**TRACER, "sned": 1e-6}, "[python_tracer] sned: not one of send"),
    ({**TRACER, "send": -1e-6}, "[python_tracer] send must be a time >= 0"),
    ({k: v for k, v in TRACER.items() if k != "other"}, "[python_tracer] other must be a time"),
])
def test_a_bad_section_is_one_error_line(tmp_path, run_hindsight, section, msg):
    prof = _profile(tmp_path / "p.toml", section)
    trace = simulate_to_dir(tmp_path / "py", PROGRAM)
    r = run_hindsight("replay", str(trace), "--profile", str(prof))
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("Error: ") and msg in r.stderr, r.stderr
    with pytest.raises(Exception):
        tracer_costs({"python_tracer": section})


def test_the_probe_measures_the_tracer_on_real_ranks():
    """Calibrate's probe, under mpiexec -n 2 with the real tracer: every key, each a few
    microseconds at most, the Isend's wrapper dearer than nothing."""
    from hindsight.collect import find_mpiexec, launch_env
    from replay.calibration.run import run_job
    from replay.calibration.tracer import fit_tracer, run_probe

    probe = run_probe({**os.environ, **launch_env(2, "shm")}, find_mpiexec(), run_job)
    assert all(len(g) >= 1000 for g in probe["gaps_s"].values()), \
        {k: len(g) for k, g in probe["gaps_s"].items()}
    params, evidence, _ = fit_tracer(probe)
    assert set(params) == set(KEYS) and all(0 <= v < 50e-6 for v in params.values()), params
    assert params["isend"] > 0 and evidence["loop_s"] > 0
