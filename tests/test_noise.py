"""Noise told apart from the network (replay/noise.py): unexplained in-MPI time, machine-wide
vs single-rank stalls, and noise put back into predictions (``replay --noise``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import replay
from hindsight.cli import main as hindsight_main
from replay import noise as N
from synthetic import simulate_to_dir

MS = 1e6
# The stand-in network of tests/synthetic.py, as LogGPS parameters: the replay then explains the
# calls without stalls to within a few microseconds.
NET = {"L": "2us", "o": "300ns", "G": "0.1ns"}
SETS = [a for k, v in NET.items() for a in ("--set", f"{k}={v}")]
TOL = 20e3  # ns: what the stand-in's and LogGPS's differing collective costs may leave over
PROFILE = Path(__file__).resolve().parents[1] / "docs" / "calibration" / "net-shm.toml"

# Rank 0 is stalled 5 ms inside a Send whose receiver is still computing (nobody waits for
# it); rank 1 then waits 7 ms in the Barrier for rank 0: caused by the late partner, not noise.
ONE = [[("compute", 1 * MS), ("stall", 5 * MS), ("send", 1, 1000), ("compute", 10 * MS),
        ("coll", "Barrier", 0)],
       [("compute", 8 * MS), ("recv", 0), ("compute", 1 * MS), ("coll", "Barrier", 0)]]
# Both ranks stalled 4 ms inside the same Allreduce at the same time.
ALL = [[("compute", 1 * MS), ("stall", 4 * MS), ("coll", "Allreduce", 64), ("compute", 2 * MS),
        ("coll", "Barrier", 0)]] * 2
# Rank 0's stall in its Send to rank 2 makes it late for rank 1, which waits 4 ms in a Recv:
# that wait follows from the stall (already counted on rank 0), not a stall of rank 1. Rank 1
# had 1 ms of slack: the stall delays the end by 4 ms.
LATE = [[("compute", 1 * MS), ("stall", 5 * MS), ("send", 2, 100), ("send", 1, 100)],
        [("compute", 2 * MS), ("recv", 0), ("compute", 5 * MS, "work")],
        [("compute", 6.5 * MS), ("recv", 0)]]

# Rank 0 waits 8 ms in a blocking Probe for a late sender, then receives the message (what a
# pickle-API recv records): a wait for the partner, under every model.
PROBED = [[("probe", 1), ("recv", 1), ("compute", 1 * MS)],
          [("compute", 8 * MS), ("send", 0, 1000)]]
# The same with 2 ms of the receiver's own work between the probe and the receive (allocating
# the buffer), and a sender on time: that work stays compute, under every model.
PROBED_WORK = [[("compute", 3 * MS), ("probe", 1), ("compute", 2 * MS), ("recv", 1)],
               [("compute", 1 * MS), ("send", 0, 1000)]]


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("noise")
    return {name: simulate_to_dir(d / name, progs)
            for name, progs in (("one", ONE), ("all", ALL), ("late", LATE), ("probed", PROBED),
                                ("probed_work", PROBED_WORK))}


def _analyse(trace):
    prep = replay.prepare(trace)
    res = replay.run(prep, "loggps", NET)
    return prep, res, N.analyse(prep, res)


def test_single_rank_stall(traces):
    prep, res, rep = _analyse(traces["one"])
    assert abs(rep.unexplained[0] - 5 * MS) < TOL
    assert rep.unexplained[1] < TOL            # its Barrier wait is the late partner's
    assert rep.total_shared < TOL              # nothing on several ranks at once
    assert rep.in_mpi[1] > 7 * MS              # ... although rank 1 sat 7 ms in MPI
    top = rep.stalls()[0]
    assert top["ranks"] == [0] and abs(top["duration_s"] * 1e9 - 5 * MS) < TOL
    hist = {h["from_s"]: h["count"] for h in rep.histogram()}
    assert hist[1e-3] == 1                      # the 1-10 ms decade holds the stall


def test_machine_wide_stall(traces):
    prep, res, rep = _analyse(traces["all"])
    for r in (0, 1):
        assert abs(rep.unexplained[r] - 4 * MS) < TOL
        assert rep.shared[r] > rep.unexplained[r] - TOL
    assert abs(rep.several_wall - 4 * MS) < TOL
    top = rep.stalls()[0]
    assert top["ranks"] == [0, 1] and abs(top["rank_time_s"] * 1e9 - 8 * MS) < 2 * TOL


def test_wait_for_a_partner_late_from_its_stall_is_not_noise(traces):
    prep, res, rep = _analyse(traces["late"])
    assert abs(rep.unexplained[0] - 5 * MS) < TOL
    assert rep.in_mpi[1] > 3.9 * MS and rep.unexplained[1] < TOL
    assert rep.unexplained[2] < TOL


@pytest.mark.parametrize("model,params", [("loggps", NET), ("loggopsim", {"L": "2us"})])
def test_a_probe_waiting_for_a_late_sender_is_not_noise(traces, model, params):
    """LogGOPSim's schedule has no probe: its receive waits instead (rule probe_waits of
    replay/loggopsim/rows.py shows that wait in the probe's row, as the trace has it)."""
    prep = replay.prepare(traces["probed"])
    res = replay.run(prep, model, params, record=True)
    rep = N.analyse(prep, res)
    assert rep.in_mpi[0] > 7.9 * MS and rep.unexplained[0] < TOL, rep.line()
    probe, recv = 0, 1                  # rank 0's rows
    assert res.row_end_ns[probe] > 7.9 * MS and res.row_start_ns[recv] >= res.row_end_ns[probe]
    prep = replay.prepare(traces["probed_work"])
    res = replay.run(prep, model, params, record=True)
    rows = np.flatnonzero(np.asarray(prep.rows.rank) == 0)
    probe, recv = (int(i) for i in rows[np.asarray(prep.rows.op)[rows] > 0][:2])
    assert res.row_end_ns[probe] - res.row_start_ns[probe] < 0.1 * MS       # no wait
    assert res.row_start_ns[recv] - res.row_end_ns[probe] > 1.9 * MS        # the work
    assert N.analyse(prep, res).unexplained[0] < TOL


def test_without_model(traces):
    prep = replay.prepare(traces["all"])
    w = N.in_mpi_overlap(prep)
    assert w["all_ranks_in_mpi_s"] * 1e9 > 4 * MS
    assert abs(w["longest_all_in_mpi"][0]["duration_s"] * 1e9 - 4 * MS) < TOL
    w1 = N.in_mpi_overlap(replay.prepare(traces["one"]))
    assert w1["all_ranks_in_mpi_s"] * 1e9 < TOL   # rank 0 was alone in MPI while stalled


@pytest.mark.parametrize("name,stall", [("one", 5 * MS), ("all", 4 * MS), ("late", 4 * MS)])
def test_trace_noise_moves_prediction_back(traces, name, stall):
    prep, res, rep = _analyse(traces[name])
    assert res.makespan_ns < prep.measured_makespan_ns - stall + TOL
    noisy = replay.run(prep, "loggps", NET, delay_ns=N.trace_delays(rep))
    # each stall is put back once (on rank 0 only in "late"): the prediction moves by what the
    # stall cost the run, back to the measurement
    assert abs(noisy.makespan_ns - res.makespan_ns - stall) < TOL
    assert abs(noisy.makespan_ns - prep.measured_makespan_ns) < TOL
    # injected delays are not compute
    assert np.allclose(noisy.rank_compute_ns, res.rank_compute_ns)
    assert abs(noisy.info["noise_injected_s"] * 1e9 - rep.total_unexplained) < 1


def test_delays_are_not_scaled_by_compute_scale(traces):
    prep, res, rep = _analyse(traces["one"])
    half = replay.run(prep, "loggps", NET, compute_scale=0.5)
    noisy = replay.run(prep, "loggps", NET, compute_scale=0.5, delay_ns=N.trace_delays(rep))
    assert abs(noisy.makespan_ns - half.makespan_ns - 5 * MS) < TOL


def test_sample_keeps_episodes_together(traces):
    prep, res, rep = _analyse(traces["all"])
    rng = np.random.default_rng(1)
    for _ in range(5):
        d = N.sample_delays(rep, res, rng)
        per_rank = np.bincount(prep.rows["rank"], weights=d, minlength=2)
        # one episode (both ranks, 4 ms each) drawn once: both ranks get it
        assert np.allclose(per_rank, rep.unexplained, atol=1.0)


def test_cli_line_and_json(traces):
    r = CliRunner().invoke(hindsight_main, ["replay", str(traces["one"]), *SETS, "--noise", "trace"])
    assert r.exit_code == 0, r.output
    m = re.search(r"^noise: ([\d.]+) ms of ([\d.]+) ms inside MPI calls not explained by loggps "
                  r"\(([\d.]+ \w+) on several ranks at once\)$", r.output, re.M)
    assert m, r.output
    assert abs(float(m.group(1)) - 5.0) < 0.02 and float(m.group(2)) > 12
    assert m.group(3).endswith("ns")           # well below a microsecond on several ranks
    assert re.search(r"^with noise 15(\.\d+)? ms  \(\+0\.\d\d %", r.output, re.M), r.output
    # the table of the replay with noise has its noise column: each rank's columns add up to
    # its end (the delays put back were in none of them)
    lines = r.output.splitlines()
    head = lines.index("rank   end        compute    comm       wait       noise      critical")
    noisy = replay.run(*_analyse(traces["one"])[:1], "loggps", NET,
                       delay_ns=N.trace_delays(_analyse(traces["one"])[2]))
    cols = noisy.breakdown_columns()
    assert len(lines) > head + 2 and cols["noise_s"].sum() > 4.9e-3
    np.testing.assert_allclose(cols["compute_s"] + cols["comm_s"] + cols["wait_s"]
                               + cols["noise_s"], cols["end_s"], rtol=1e-9)
    r = CliRunner().invoke(hindsight_main, ["replay", str(traces["all"]), *SETS, "--json", "--noise", "trace"])
    doc = json.loads(r.output)
    assert abs(doc["noise"]["machine_wide_s"] - 8e-3) < 2 * TOL / 1e9
    assert doc["noise"]["stalls"][0]["ranks"] == [0, 1]
    inj = doc["noise_injection"]
    assert inj["mode"] == "trace" and abs(inj["rel_error_pct"]) < 1.0
    assert doc["rel_error_pct"] < -60          # the noiseless prediction is unchanged


def test_cli_sample_interval(traces):
    args = [str(traces["one"]), *SETS, "--noise", "sample", "--noise-runs", "6",
            "--noise-seed", "3"]
    r = CliRunner().invoke(hindsight_main, ["replay", *args])
    assert r.exit_code == 0, r.output
    assert re.search(r"^with noise \S+ \w+ / \S+ \w+ / \S+ \w+  .*min / median / max of 6 runs",
                     r.output, re.M), r.output
    doc = json.loads(CliRunner().invoke(hindsight_main, ["replay", *args, "--json"]).output)
    inj = doc["noise_injection"]
    p = inj["predicted_makespan_s"]
    runs = inj["runs_makespan_s"]
    assert len(runs) == 6 and p["min"] <= p["median"] <= p["max"]
    assert p["min"] == min(runs) and p["max"] == max(runs)
    assert p["min"] >= doc["predicted_makespan_s"] - 1e-9   # noise only adds
    assert p["max"] > p["min"]                 # the two episodes are drawn 0, 1 or 2 times
    again = json.loads(CliRunner().invoke(hindsight_main, ["replay", *args, "--json"]).output)
    assert again["noise_injection"]["runs_makespan_s"] == runs   # the seed fixes the draws


def test_cli_errors(traces):
    r = CliRunner().invoke(hindsight_main, ["replay", str(traces["one"]), "--noise-runs", "3"])
    assert r.exit_code == 2 and "Error: --noise-runs" in r.output
    r = CliRunner().invoke(hindsight_main, ["replay", str(traces["one"]), "--model", "measured",
                                        "--noise", "trace"])
    assert r.exit_code == 2 and "Error: --noise" in r.output
    r = CliRunner().invoke(hindsight_main, ["trace", "info", str(traces["one"]), "--profile",
                                            str(traces["one"] / "nope.toml")])
    assert r.exit_code == 1 and "Error: --profile" in r.output and "Traceback" not in r.output


def test_trace_info_noise(traces):
    t = str(traces["all"])
    r = CliRunner().invoke(hindsight_main, ["trace", "info", t, "--json"])
    assert r.exit_code == 0 and "noise" not in json.loads(r.output)   # only when asked
    r = CliRunner().invoke(hindsight_main, ["trace", "info", t, "--noise"])
    assert r.exit_code == 0, r.output
    assert re.search(r"^all in MPI  4\.\d+ ms in \d+ stretches", r.output, re.M), r.output
    # its span is labelled: from the first traced event (the trace's makespan is from the
    # start barrier)
    assert re.search(r"\(of the [\d.]+ ms from the first traced event to the last; the times "
                     r"below count from the first\)$", r.output, re.M), r.output
    assert "not explained" not in r.output
    r = CliRunner().invoke(hindsight_main, ["trace", "info", t, "--profile", str(PROFILE),
                                            "--json"])
    assert r.exit_code == 0, r.output
    m = json.loads(r.output)["noise"]["with_model"]
    # a real profile (shm, slower than the stand-in) still leaves the 2 x 4 ms unexplained
    assert 7.5e-3 < m["unexplained_s"] < 8.1e-3 and m["machine_wide_s"] > 7.5e-3
    r = CliRunner().invoke(hindsight_main, ["trace", "info", t, "--profile", str(PROFILE)])
    assert re.search(r"^noise: .* not explained by loggps \(.* on several ranks at once\)",
                     r.output, re.M), r.output
