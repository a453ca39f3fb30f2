"""`hindsight replay` / `hindsight sweep` through click."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from hindsight.cli import main
from synthetic import simulate_to_dir

PROGS = [[("compute", 3000), ("send", 1, 1000), ("recv", 1), ("coll", "Allreduce", 64)],
         [("recv", 0), ("compute", 2000), ("send", 0, 1000), ("coll", "Allreduce", 64)]]


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return simulate_to_dir(tmp_path_factory.mktemp("cli") / "t", PROGS)


def test_replay_json(trace, tmp_path):
    r = CliRunner().invoke(main, ["replay", str(trace), "--model", "measured", "--json",
                                        "--out", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    for key in ("predicted_makespan_s", "measured_makespan_s", "rel_error_pct", "events", "model"):
        assert key in doc
    assert doc["model"] == "measured" and doc["events"] == 6
    assert abs(doc["rel_error_pct"]) < 1.0
    assert (tmp_path / "o" / "manifest.json").is_file()


def test_replay_counts_the_traces_messages_apart_from_the_models(trace):
    # PROGS: two point-to-point messages and a 64-byte Allreduce, which loggps expands into the
    # messages of the algorithm MPICH selects (rabenseifner: a reduce-scatter step and an
    # allgather step, one message each way in each) and measured keeps as one meeting
    out = {m: CliRunner().invoke(main, ["replay", str(trace), "--model", m]).output
           for m in ("loggps", "measured")}
    assert "(6 events, 2 ranks, 2 point-to-point messages, 4 more in the model's collective " \
        "and one-sided patterns)" in out["loggps"]
    assert "(6 events, 2 ranks, 2 point-to-point messages)" in out["measured"]


def test_replay_text_and_sets(trace):
    r = CliRunner().invoke(main, ["replay", str(trace), "--model", "loggps", "--set", "L=2.5us",
                                        "--set", "G=0.08ns", "--compute-scale", "0.5"])
    assert r.exit_code == 0, r.output
    assert "predicted" in r.output and "measured" in r.output


@pytest.mark.parametrize("args,needle", [
    (["--set", "L=abc"], "--set"),
    (["--set", "Q=1us"], "unknown parameter 'Q'"),
    (["--set", "L"], "NAME=VALUE"),
    (["--model", "nope"], "--model"),
    (["--compute-scale", "-1"], "--compute-scale"),
])
def test_replay_user_errors(trace, args, needle):
    r = CliRunner().invoke(main, ["replay", str(trace)] + args)
    assert r.exit_code == 2, r.output
    assert needle in r.output and "Traceback" not in r.output


def test_missing_and_incomplete_traces(tmp_path):
    r = CliRunner().invoke(main, ["replay", str(tmp_path / "none")])
    assert r.exit_code == 1 and "no such trace directory" in r.output
    d = simulate_to_dir(tmp_path / "p", PROGS, incomplete_ranks=[1])
    r = CliRunner().invoke(main, ["replay", str(d)])
    assert r.exit_code == 1 and "--allow-partial" in r.output
    r = CliRunner().invoke(main, ["replay", str(d), "--allow-partial", "--model", "measured"])
    assert r.exit_code == 0, r.output


def test_bad_profile(trace, tmp_path):
    p = tmp_path / "prof.json"
    p.write_text(json.dumps({"model": "hockney", "params": {"l": "1us"}}))
    r = CliRunner().invoke(main, ["replay", str(trace), "--model", "loggp", "--profile", str(p)])
    # the file's content is wrong, not the command line: a data error
    assert r.exit_code == 1 and "--profile" in r.output and str(p) in r.output
    p.write_text(json.dumps({"model": "loggp", "params": {"L": "3us", "G": 1e-10}}))
    r = CliRunner().invoke(main, ["replay", str(trace), "--model", "loggp", "--profile", str(p),
                                        "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["params"]["L"] == pytest.approx(3e-6)


def test_sweep_csv_and_plot(trace, tmp_path):
    out = tmp_path / "s.csv"
    png = tmp_path / "s.png"
    r = CliRunner().invoke(main, ["sweep", str(trace), "--model", "loggp", "--vary",
                                       "G=0.01ns..10ns:log:5", "--vary", "L=1us,5us",
                                       "--out", str(out), "--plot", str(png)])
    assert r.exit_code == 0, r.output
    import pandas as pd
    df = pd.read_csv(out)
    assert len(df) == 10 and {"G", "L", "predicted_makespan_s"} <= set(df.columns)
    # more bandwidth cost, at equal latency, never helps
    for _, g in df.groupby("L"):
        assert g.sort_values("G")["predicted_makespan_s"].is_monotonic_increasing
    assert png.stat().st_size > 0
    r = CliRunner().invoke(main, ["sweep", str(trace), "--vary", "G=1..2:cubic:3", "--out",
                                       str(tmp_path / "s2.csv")])
    assert r.exit_code == 2 and "--vary" in r.output


def test_untraced_calls_are_noted_by_replay_sweep_and_export(tmp_path):
    from conftest import hindsight

    t = simulate_to_dir(tmp_path / "u", PROGS, manifest={"untraced_calls": {"Alltoallw": 3}})
    note = ("note: 3 calls (Alltoallw 3) not traced: their traffic is not in the trace, so it is "
            "left out here")
    for args in (["replay", t], ["sweep", t, "--vary", "L=1us,2us", "--json"],
                 ["export", t, "--format", "perfetto", "--out", tmp_path / "u.json"]):
        p = hindsight(*args)
        assert p.returncode == 0, p.stderr
        assert note in p.stderr, (args, p.stderr)
    doc = json.loads(hindsight("replay", t, "--json").stdout)
    assert doc["untraced_calls"] == {"Alltoallw": 3}
    # the streamed replay's document says so too
    doc = json.loads(hindsight("replay", t, "--json", "--window", "16").stdout)
    assert doc["untraced_calls"] == {"Alltoallw": 3} and "streamed" in doc
    assert "note:" not in hindsight("replay", simulate_to_dir(tmp_path / "c", PROGS)).stderr


def test_notes_on_the_traced_runs_conditions(tmp_path):
    from conftest import hindsight

    plain = simulate_to_dir(tmp_path / "p", PROGS)
    p = hindsight("replay", plain, "--cpu-time")
    assert p.returncode == 0 and "note: --cpu-time: no burst lies in a region with CPU-time " \
        "samples" in p.stderr, p.stderr
    assert "note:" not in hindsight("replay", plain).stderr
    # the percentage is against the makespan printed on the measured line
    m = [ln for ln in hindsight("replay", plain).stdout.splitlines()
         if ln.startswith(("measured", "predicted"))]
    assert m[1].endswith(f"vs the measured {m[0].split()[1]} {m[0].split()[2]})"), m
    over = simulate_to_dir(tmp_path / "o", PROGS, manifest={"oversubscribed": True})
    assert "note: the traced run was oversubscribed (more ranks than cores)" in \
        hindsight("replay", over).stderr


def test_a_bare_number_for_a_time_is_noted_as_seconds(tmp_path):
    from conftest import hindsight

    t = simulate_to_dir(tmp_path / "t", PROGS)
    p = hindsight("replay", t, "--set", "L=5")
    assert p.returncode == 0 and p.stderr.strip() == (
        "note: --set L=5: a number without a unit is in s (5 s); write e.g. 5us for "
        "microseconds")
    assert "note:" not in hindsight("replay", t, "--set", "L=5us", "--set", "g=0").stderr
    # a per-byte time's example is in ns per byte (and what it suggests is accepted)
    p = hindsight("replay", t, "--set", "G=0.01")
    assert p.stderr.strip() == ("note: --set G=0.01: a number without a unit is in s/B "
                                "(0.01 s/B); write e.g. 0.01ns/B for nanoseconds per byte")
    assert "note:" not in hindsight("replay", t, "--set", "G=0.01ns/B").stderr


def test_replay_sweep_stays_the_function_once_the_command_ran(trace):
    # the sweep command imports replay.sweeps; a submodule named like the function would
    # replace replay.sweep on the package
    r = CliRunner().invoke(main, ["sweep", str(trace), "--vary", "L=1us,2us", "--json"])
    assert r.exit_code == 0, r.output
    import replay
    from replay.sweeps import sweep

    assert replay.sweep is sweep


def test_the_programs_run_time_adds_what_no_model_changes(tmp_path):
    """A run whose program computes long after its last MPI call: replay predicts the run time
    an untraced run measures (start barrier to the program's end) as the replay plus the traced
    lead-in and tail, in text and JSON; trace info shows the traced wall time. A run whose wall
    time is its makespan gets no such line."""
    import json as js

    from conftest import hindsight
    from hindsight import trace as tf

    plain = simulate_to_dir(tmp_path / "p", PROGS)
    span = tf.read_manifest(plain)["makespan_ns"]
    t = simulate_to_dir(tmp_path / "t", PROGS, manifest={"wall_ns": span + 10 ** 8})
    doc = js.loads(hindsight("replay", t, "--json").stdout)
    rt = doc["run_time"]
    assert rt["tail_s"] == pytest.approx(0.1) and rt["traced_wall_s"] * 1e9 == span + 10 ** 8
    assert rt["predicted_s"] == pytest.approx(
        doc["predicted_makespan_s"] + rt["lead_in_s"] + rt["tail_s"])
    text = hindsight("replay", t).stdout.splitlines()
    line = [x for x in text if x.startswith("run time ")]
    assert len(line) == 1 and "after the last, as traced" in line[0], text
    assert "wall time   " in hindsight("trace", "info", t).stdout
    assert "run_time" not in js.loads(hindsight("replay", plain, "--json").stdout)
    assert "run time " not in hindsight("replay", plain).stdout


def test_the_api_takes_a_profiles_path(tmp_path):
    """replay.run(prep, model, profile=PATH) reads the file's parameters, as load_profile gives
    them (it was an AttributeError on the path string)."""
    import replay
    from replay import models as M

    prep = replay.prepare(simulate_to_dir(tmp_path / "t", PROGS))
    path = "docs/calibration/shm.toml"
    by_path = replay.run(prep, "loggps", {}, profile=path).makespan_ns
    by_dict = replay.run(prep, "loggps", {},
                         profile=M.load_profile(path, M.get_model("loggps"))).makespan_ns
    assert by_path == by_dict != replay.run(prep, "loggps", {}).makespan_ns


def test_loggopsim_says_it_replays_a_profiles_negative_latency_as_zero(trace):
    """A calibrated profile's L is negative where the calls' overheads overlap the transfer;
    LogGOPSim's rules take L >= 0, so --model loggopsim replays L = 0 and says so (the model
    line alone showed L=0), but not when L is set."""
    from pathlib import Path
    shm = Path(__file__).resolve().parents[1] / "docs" / "calibration" / "shm.toml"
    r = CliRunner().invoke(main, ["replay", str(trace), "--model", "loggopsim", "--profile",
                                  str(shm)])
    assert r.exit_code == 0, r.output
    assert "note: the profile's L = -1.71 us is replayed as L = 0" in r.output
    r = CliRunner().invoke(main, ["replay", str(trace), "--model", "loggopsim", "--profile",
                                  str(shm), "--set", "L=1us"])
    assert r.exit_code == 0, r.output
    assert "replayed as L = 0" not in r.output


def test_a_difference_that_rounds_to_nothing_prints_as_plus_zero():
    from replay.replay_lines import _pct
    assert (_pct(-1e-7), _pct(-0.006), _pct(3.14159)) == ("+0.00", "-0.01", "+3.14")


def test_a_streamed_replay_refuses_loggopsim_for_its_own_reason(trace):
    r = CliRunner().invoke(main, ["replay", str(trace), "--window", "16", "--model",
                                  "loggopsim"])
    assert r.exit_code != 0
    assert "--model loggopsim runs a simulator of its own on the whole trace's schedule: not " \
        "available in a streamed replay" in r.output, r.output


def test_a_loggopsim_timeline_posts_irecvs_as_instants_and_checks(tmp_path):
    """Rule irecv_posts (replay/loggopsim/rows.py): LogGOPSim's receive operation ends when its
    message has been received, but the Irecv row is the post, an instant no earlier than the
    rank's previous row; the Wait's row takes the waiting. The timeline --out writes then has
    no overlapping calls (trace check), and the measured model replays it to itself."""
    import numpy as np
    from hindsight import trace as tf

    progs = [[op for i in range(4) for op in
              [("irecv", (r - 1) % 3, 0), ("isend", (r + 1) % 3, 64, 0), ("compute", 500),
               ("wait", [2 * i, 2 * i + 1])]] for r in range(3)]
    d = simulate_to_dir(tmp_path / "t", progs)
    out = tmp_path / "o"
    r = CliRunner().invoke(main, ["replay", str(d), "--model", "loggopsim", "--out", str(out)])
    assert r.exit_code == 0, r.output
    chk = CliRunner().invoke(main, ["trace", "check", str(out)])
    assert chk.exit_code == 0, chk.output
    rows = tf.read_trace(out).to_pandas()
    irecv = rows[rows["op"].astype(str) == "Irecv"]
    assert len(irecv) == 12 and np.all(irecv["t_end"] == irecv["t_start"])
    again = CliRunner().invoke(main, ["replay", str(out), "--model", "measured"])
    assert "(+0.00 % vs the trace's timeline)" in again.output, again.output
