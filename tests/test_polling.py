"""Polling (format 1.3's `Poll` rows, docs/trace-format.md; rule `poll_wait`, docs/replay.md): a
run of unsuccessful Iprobe/Test calls is one row under both recorders, and a replay on another
network moves the call that ends the run instead of keeping the loop's time as compute."""

from __future__ import annotations

import pytest

import replay
from hindsight import trace as tf
from hindsight.info import format_info, trace_info
from hindsight.trace import EventRows, write_trace
from instrument import native
from tests.conftest import PROGRAMS, hindsight

COLS = ["rank", "op", "peer", "tag", "comm", "request", "root"]
# loggp with every overhead and gap 0: a message arrives L after its send started
NET = {"o": "0ns", "g": "0ns", "G": "0ns"}


def _collect(out, recorder: str, work_s: float = 0.03):
    return hindsight("collect", "-n", 2, "--program", PROGRAMS / "poll.py", "--out", out,
                     "--recorder", recorder, "--", str(work_s))


@pytest.mark.skipif(native.find_mpicc() is None, reason="no mpicc: no PMPI library")
def test_a_polling_loop_is_one_row_under_both_recorders(tmp_path):
    """poll.py: rank 0 polls (Iprobe, then Test on an Irecv) while rank 1 computes 30 ms; each
    loop does 50 us of work per poll. Each loop is one Poll row whose count is about
    30 ms / (50 us + a poll), spanning most of the peer's work, followed by the call that
    succeeded; the two recorders write the same rows, and the trace checks and replays."""
    frames = []
    for rec in ("python", "pmpi"):
        out = tmp_path / rec
        res = _collect(out, rec)
        assert res.returncode == 0, res.stderr
        assert tf.read_manifest(out)["format_version"] == tf.FORMAT_VERSION == "1.3"
        df = tf.read_trace(out).to_pandas().astype({"op": str})
        r0 = df[df["rank"] == 0].reset_index(drop=True)
        assert list(r0["op"]) == ["Barrier", "Poll", "Iprobe", "Recv", "Irecv", "Barrier",
                                  "Poll", "Test"], rec
        for k in (1, 6):
            poll = r0.iloc[k]
            span = (poll["t_end"] - poll["t_start"]) / 1e9
            assert 0.02 < span < 0.2, (rec, span)          # most of the peer's 30 ms
            # one per loop iteration: 50 us of work and a poll (slower on a busy machine)
            assert 40 <= poll["nbytes"] <= 0.04 / 50e-6, (rec, poll["nbytes"])
            assert poll[["peer", "tag", "comm", "request"]].tolist() == [-1, -1, -1, -1]
        frames.append(df[COLS].reset_index(drop=True))
        check = hindsight("trace", "check", out)
        assert check.returncode == 0 and check.stdout.strip() == f"{out}: ok", check.stdout
        info = hindsight("trace", "info", out)
        assert info.returncode == 0 and "polling     2 runs" in info.stdout, info.stdout
    assert frames[0].equals(frames[1])
    prep = replay.prepare(tmp_path / "pmpi", use_cache=False)
    res = replay.run(prep, "loggp", NET | {"L": "1us"})
    # the peer's work bounds the run; the poll loop is waiting, not rank 0's compute
    assert res.breakdown()["wait_s"][0] > 0.05


def _poll_trace(path, end_call: str):
    """Rank 0 polls from 1000 to 9000 ns (8 polls; the call that ends the run at 11000: a
    period of 1250 ns) for the message rank 1 sends at 10000 after computing; then receives
    it. ``end_call``: "Iprobe" (then a Recv) or "Test" (of an Irecv posted at 500, taking no
    time, as on any network)."""
    r0, r1 = EventRows(), EventRows()
    if end_call == "Test":
        r0.append("Irecv", 500, 500, peer=1, tag=5, nbytes=8, request=0)
    r0.append("Poll", 1000, 9000, nbytes=8)
    if end_call == "Test":
        r0.append("Test", 11000, 11100, peer=1, tag=5, nbytes=8, request=0)
    else:
        r0.append("Iprobe", 11000, 11100, peer=1, tag=5, nbytes=8)
        r0.append("Recv", 11200, 11300, peer=1, tag=5, nbytes=8)
    r1.append("Send", 10000, 10100, peer=0, tag=5, nbytes=8)
    return write_trace(path, [r0.events(0), r1.events(1)])


def _times(res) -> dict:
    ev = res.events_frame()
    return {(int(r), str(o)): (s, e) for r, o, s, e in
            zip(ev["rank"], ev["op"], ev["start_ns"], ev["end_ns"])}


@pytest.mark.parametrize("end_call", ["Iprobe", "Test"])
def test_a_larger_latency_moves_the_successful_poll(tmp_path, end_call):
    """Hand-computed (replay time 0 = the first event, 500 or 1000 ns). The send starts 9000
    ns after rank 1's first event; with L = 20 us its message is at rank 0 at 29000 (+ t0
    shift). The poll loop started at 0 (1000 - t0) with a period of 1250 ns, so the poll that
    finds it is the first at or after the arrival: 24 periods after the run's start. The
    loop's own time (the run's 8000 ns and the 2000 ns after it) is not added on top."""
    out = _poll_trace(tmp_path / "t", end_call)
    prep = replay.prepare(out, use_cache=False)
    t0 = 500 if end_call == "Test" else 1000
    start = 1000 - t0                     # the poll run in the replay
    arrival = 10000 - t0 + 20000          # the send's start + L
    found = start + 24 * 1250             # ceil((arrival - start) / 1250) = 24 periods
    assert found >= arrival > found - 1250
    t = _times(replay.run(prep, "loggp", NET | {"L": "20us"}))
    assert t[(0, "Poll")] == (start, found)
    assert t[(0, end_call)][0] == found
    if end_call == "Iprobe":              # the Recv follows after its 100 ns of work
        assert t[(0, "Recv")] == (found + 100, found + 100)
    # without the rule the loop's 10000 ns would stay compute and the probe would sit at
    # 10000 - t0, or, added on top of the wait, at arrival + 10000
    assert found < arrival + 10000
    # the traced network (L such that the message is there when the probe found it): the
    # probe is where it was measured
    t = _times(replay.run(prep, "loggp", NET | {"L": "0ns"}))
    assert t[(0, end_call)][0] == 11000 - t0


def test_the_measured_model_reproduces_a_poll_run(tmp_path):
    out = _poll_trace(tmp_path / "t", "Iprobe")
    prep = replay.prepare(out, use_cache=False)
    ev = replay.run(prep, "measured", {}).events_frame()
    assert (ev["start_ns"] == ev["measured_start_ns"]).all()
    assert (ev["end_ns"] == ev["measured_end_ns"]).all()


def test_a_run_without_its_message_keeps_its_time(tmp_path):
    """A run that ends with a call that does not receive what it polled for (here a Send) has
    no message: on any network its time stays the rank's own, as compute; replay says so."""
    r0, r1 = EventRows(), EventRows()
    r0.append("Poll", 1000, 9000, nbytes=8)
    r0.append("Send", 11000, 11100, peer=1, tag=5, nbytes=8)
    r1.append("Recv", 0, 11200, peer=0, tag=5, nbytes=8)
    out = write_trace(tmp_path / "t", [r0.events(0), r1.events(1)])
    prep = replay.prepare(out, use_cache=False)
    t = _times(replay.run(prep, "loggp", NET | {"L": "20us"}))
    assert t[(0, "Send")][0] == 11000            # 1000 + 8000 of polls + 2000 after them
    assert prep.rows.poll_msg.tolist() == [-1]
    rep = hindsight("replay", out, "--model", "loggp")
    assert rep.returncode == 0 and "note: 1 of 1 runs of unsuccessful polls (Poll rows) do not " \
        "end with the call that found or completed their message" in rep.stderr, rep.stderr


def test_trace_info_reports_the_time_in_poll_runs(tmp_path):
    out = _poll_trace(tmp_path / "t", "Iprobe")
    info = trace_info(out)
    assert info["poll_runs"] == 1 and info["polls"] == 8
    assert info["poll_s_per_rank"] == [8000 / 1e9, 0.0]
    assert "polling     1 runs of 8 unsuccessful polls, 8 us" in format_info(info)
