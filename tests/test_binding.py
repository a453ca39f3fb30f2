"""Rule ``binding_in_bursts`` (replay.binding): a trace recorded below mpi4py (the PMPI library,
an OTF2 or GOAL import) has mpi4py's own time per call in its bursts, so the profile's per-call
costs, timed through mpi4py, lose the profile's ``[binding]`` costs for it; hand-computed
replays through the command line, the rule's conditions, the section's checks, and a real probe.

The profile of the hand-computed cases (us): o_send 3, o_recv 2, L 1, G = g = O = 0, S 4 KiB;
binding Send 1, Recv 0.5, Bcast 1. An eager 8-byte Send from rank 0 to rank 1 (both at 0):
through mpi4py rank 0 ends at o_send = 3 and rank 1 at o_send + L + o_recv = 6; below mpi4py at
2 and 2 + 1 + 1.5 = 4.5."""

from __future__ import annotations

import os

import pytest

from replay import models as M
from replay.binding import CALLS, below_binding, binding_costs, less_binding
from replay.flags import FlagCosts
from replay.recorder_rules import trace_rules
from conftest import hand_profile, rank_ends_ns, replay_json, run_mpi_script
from synthetic import simulate_to_dir

US = 1e-6
SEND_RECV = [[("send", 1, 8)], [("recv", 0)]]


def _profile(path, binding=None, shared_flag=None):
    return hand_profile(path, binding=binding, shared_flag=shared_flag)


BINDING = {"api": "buffer", "Send": 1 * US, "Recv": 0.5 * US, "Bcast": 1 * US}


def test_send_recv_below_mpi4py_pays_the_profile_less_the_binding(tmp_path, run_hindsight):
    prof = _profile(tmp_path / "p.toml", BINDING)
    python = simulate_to_dir(tmp_path / "py", SEND_RECV)
    pmpi = simulate_to_dir(tmp_path / "lib", SEND_RECV, manifest={"tracer": "pmpi"})
    doc = replay_json(run_hindsight, python, prof)
    assert rank_ends_ns(doc) == [3000, 6000] and "binding_in_bursts_s" not in doc
    doc = replay_json(run_hindsight, pmpi, prof)
    assert rank_ends_ns(doc) == [2000, 4500]
    assert doc["binding_in_bursts_s"]["Send"] == pytest.approx(1 * US)
    # the text report says so, with mpi4py's costs
    r = run_hindsight("replay", str(pmpi), "--profile", str(prof))
    assert r.returncode == 0 and "rule binding_in_bursts" in r.stdout and "Send 1" in r.stdout
    # a profile without [binding] changes nothing
    plain = _profile(tmp_path / "plain.toml")
    assert rank_ends_ns(replay_json(run_hindsight, pmpi, plain)) == [3000, 6000]
    # --set is the model's own value: never changed
    set_o = replay_json(run_hindsight, pmpi, prof, "--set", "o_send=3us")
    assert rank_ends_ns(set_o) == [3000, 5500]
    # Hockney has one latency per message, no per-call cost: unchanged, and no line
    h = run_hindsight("replay", str(pmpi), "--profile", str(prof), "--model", "hockney")
    assert h.returncode == 0 and "binding" not in h.stdout
    # the streamed replay applies it alike
    assert rank_ends_ns(replay_json(run_hindsight, pmpi, prof, "--window", "16")) == [2000, 4500]


def test_shared_flag_costs_lose_the_collectives_binding(tmp_path):
    table = {"ranks": 2, "Bcast": {"bytes": [8], "root_own_s": [1 * US],
                                   "member_own_s": [3 * US], "member_after_s": [5 * US]}}
    prof = _profile(tmp_path / "p.toml", BINDING, table)
    loggps = M.get_model("loggps")
    full = trace_rules(prof, {}).flags_for(loggps)                 # the Python tracer's trace
    less = trace_rules(prof, {"tracer": "pmpi"}).flags_for(loggps)
    assert full.table["Bcast"]["member_own_s"] == pytest.approx((3 * US,))
    # every own and after less b(Bcast) = 1 us, never below 0; sizes unchanged
    assert less.table["Bcast"]["member_own_s"] == pytest.approx((2 * US,))
    assert less.table["Bcast"]["member_after_s"] == pytest.approx((4 * US,))
    assert less.table["Bcast"]["root_own_s"] == (0.0,)
    assert less.table["Bcast"]["bytes"] == (8,)
    assert FlagCosts(2, {"Bcast": {"bytes": (8,), "root_own_s": (0.5 * US,)}}).less(
        {"Bcast": 1 * US}).table["Bcast"]["root_own_s"] == (0.0,)


def test_which_traces_are_below_mpi4py():
    assert not below_binding({})                                   # the Python tracer's
    assert below_binding({"tracer": "pmpi"})
    assert below_binding({"origin": {"format": "otf2"}})
    assert below_binding({"origin": {"format": "goal"}})
    assert not below_binding({"origin": {"format": "elsewhere"}})


def test_less_binding_floors_at_zero_and_leaves_other_parameters():
    p = less_binding({"o_send": 0.5 * US, "o_recv": 2 * US, "L": -1 * US, "o_call": 1 * US},
                     {"Send": 1 * US, "Recv": 0.5 * US, "Iprobe": 0.25 * US})
    # (L = -1 us is below -o_send = -0.5 us before the binding is taken off: the profile
    # breaks the rule on its own, and its L is left for the model's check to refuse)
    assert p == {"o_send": 0.0, "o_recv": pytest.approx(1.5 * US), "L": -1 * US,
                 "o_call": pytest.approx(0.75 * US)}
    # a valid L is raised where o_send' would put the arrival before the call: to -o_send' = 0
    assert less_binding({"o_send": 0.5 * US, "L": -0.25 * US}, {"Send": 1 * US})["L"] == 0.0


def test_a_negative_L_is_raised_where_the_binding_would_send_before_the_call(tmp_path,
                                                                             run_hindsight):
    # A shared-memory fit: L = -2.5 us, so o_send + L = 0.5 us is shorter than b(Send) = 1 us.
    # Through mpi4py the message arrives at 0.5 us and rank 1 ends at 2.5. Below mpi4py
    # o_send' = 2 would put it at -0.5, before the send's C call began: L' = -o_send' = -2, the
    # message arrives at 0 and rank 1 ends at o_recv' = 1.5 (the calibrated profile works).
    loggps = {"L": -2.5 * US, "o_send": 3 * US, "o_recv": 2 * US, "g": 0.0, "G": 0.0,
              "S": 4096.0, "O": 0.0, "o_a": 3 * US, "o_b": 0.0}
    prof = hand_profile(tmp_path / "p.toml", loggps=loggps, binding=BINDING)
    python = simulate_to_dir(tmp_path / "py", SEND_RECV)
    pmpi = simulate_to_dir(tmp_path / "lib", SEND_RECV, manifest={"tracer": "pmpi"})
    assert rank_ends_ns(replay_json(run_hindsight, python, prof)) == [3000, 2500]
    assert rank_ends_ns(replay_json(run_hindsight, pmpi, prof)) == [2000, 1500]
    assert M.load_profile(prof, M.get_model("loggps"), True)["L"] == pytest.approx(-2 * US)
    # L's own value is kept where the binding leaves the arrival after the call began
    assert less_binding({"o_send": 3 * US, "L": -1.5 * US}, {"Send": 1 * US})["L"] == -1.5 * US
    # and a profile that breaks the rule on its own values stays an error, for every trace
    bad = less_binding({"o_send": 3 * US, "L": -5 * US}, {"Send": 1 * US})
    assert bad["L"] == -5 * US
    loggps["L"] = -5 * US
    prof = hand_profile(tmp_path / "bad.toml", loggps=loggps, binding=BINDING)
    for trace in (python, pmpi):
        r = run_hindsight("replay", str(trace), "--profile", str(prof))
        assert r.returncode == 1 and "bad.toml" in r.stderr and "L=-5000 ns" in r.stderr


def test_set_mends_a_profile_that_breaks_a_rule(tmp_path, run_hindsight):
    loggps = {"L": -5 * US, "o_send": 3 * US, "o_recv": 2 * US, "g": 0.0, "G": 0.0,
              "S": 4096.0, "O": 0.0, "o_a": 3 * US, "o_b": 0.0}
    prof = hand_profile(tmp_path / "p.toml", loggps=loggps)
    python = simulate_to_dir(tmp_path / "py", SEND_RECV)
    r = run_hindsight("replay", str(python), "--profile", str(prof))
    assert r.returncode == 1 and "p.toml" in r.stderr and "L=-5000 ns" in r.stderr
    # --set takes precedence over the profile, so it may mend it
    assert rank_ends_ns(replay_json(run_hindsight, python, prof, "--set", "L=1us")) == [3000, 6000]
    # and a --set that does not is the profile's error still
    r = run_hindsight("replay", str(python), "--profile", str(prof), "--set", "G=0")
    assert r.returncode == 1 and "p.toml" in r.stderr


def test_a_bad_binding_section_is_one_error_line(tmp_path, run_hindsight):
    pmpi = simulate_to_dir(tmp_path / "lib", SEND_RECV, manifest={"tracer": "pmpi"})
    for bad, words in (({"Sendd": 1e-6}, "Sendd: not one of"),
                       ({"Send": -1e-6}, "Send must be a time >= 0"),
                       ({"Send": "fast"}, "Send must be a time >= 0")):
        prof = _profile(tmp_path / "bad.toml", bad)
        r = run_hindsight("replay", str(pmpi), "--profile", str(prof))
        assert r.returncode == 1, r.stdout
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error:") and words in lines[0], lines
        assert "bad.toml" in lines[0]
    with pytest.raises(Exception, match="not one of"):
        binding_costs({"binding": {"Sendd": 1.0}})
    # the Python tracer's trace does not read the section
    python = simulate_to_dir(tmp_path / "py", SEND_RECV)
    assert run_hindsight("replay", str(python), "--profile", str(prof)).returncode == 0


def test_load_profile_applies_the_rule_only_when_asked(tmp_path):
    prof = _profile(tmp_path / "p.toml", BINDING)
    mod = M.get_model("loggps")
    assert M.load_profile(prof, mod)["o_send"] == pytest.approx(3 * US)
    assert M.load_profile(prof, mod, below_binding=True)["o_send"] == pytest.approx(2 * US)
    assert M.load_profile(prof, mod, below_binding=True)["o_recv"] == pytest.approx(1.5 * US)


@pytest.mark.skipif(os.environ.get("HINDSIGHT_SKIP_MPI") == "1", reason="no MPI")
def test_real_probe_times_every_call(tmp_path):
    """The probe under mpiexec -n 1, both APIs: every call costs something and less than
    20 us here (mpi4py's own work is a fraction of a microsecond per call on this machine)."""
    from replay.calibration.binding import fit_binding
    probes = run_mpi_script(tmp_path, 1, (
        "import json, pickle, sys\nimport numpy as np\nfrom mpi4py import MPI\n"
        "from replay.calibration.binding import binding_probe\n"
        "out = [binding_probe(0, p, pickle.dumps(np.ones(1))) for p in (False, True)]\n"
        "json.dump(out, open(sys.argv[1], 'w'))\n"))
    for probe, api in zip(probes, ("buffer", "pickle")):
        params, evidence, _ = fit_binding(probe)
        assert params["api"] == api
        assert set(params) - {"api"} == set(CALLS)
        for call in CALLS:
            assert 0 <= params[call] < 20e-6, (call, params[call])
        # a collective's binding parses two buffer specifications: it costs more than Barrier's
        assert params["Allreduce"] > params["Barrier"]
        assert binding_costs({"binding": params}) == {c: params[c] for c in CALLS}


def test_the_binding_line_says_where_the_calls_were_recorded():
    """The rule's line names both kinds of trace it applies to: a C program's and an mpi4py
    program's recorded by the PMPI library."""
    from replay.binding import binding_line

    line = binding_line({"Send": 0.33e-6})
    assert line.startswith("binding    calls recorded at the MPI library (C or below mpi4py)")
    assert "Send 0.33" in line and binding_line(None) is None
