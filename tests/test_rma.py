"""One-sided communication: windows traced as communicators of their own, data operations and
synchronisation recorded, and fence, lock and PSCW epochs replayed with their transfers (rules
``fence_epoch``, replay/rma.py; ``lock_epoch`` and ``pscw_epoch``, replay/rma_epochs.py), checked
by hand; a real program traced, checked and replayed."""

from __future__ import annotations

from collections import Counter

import pytest

import replay
from hindsight import trace as tf
from replay import kernel as K
from hindsight.trace.write import EventRows, write_trace
from replay.rma import fence_transfers
from tests.conftest import hindsight, model_notes
from tests.test_coverage import _traced

W = 77        # the window's communicator id in the hand-made traces
L, G = 1000.0, 0.5
HOCKNEY = {"l": "1000ns", "g": "0.5ns"}
OS, OR = 100.0, 50.0
LOGGP = {"L": "1000ns", "G": "0.5ns", "o_send": "100ns", "o_recv": "50ns"}


SAME = "same call"


def _rank(calls):
    """One rank's rows from (op, peer, comm, nbytes[, idle ns before the row]), each 100 ns,
    back to back unless idle time is given; idle SAME: the row of the call before (a group's
    next member)."""
    ev = EventRows()
    t = 0
    for op, peer, comm, nb, *idle in calls:
        if idle and idle[0] == SAME:
            t -= 100
        else:
            t += idle[0] if idle else 0
        ev.append(op, t, t + 100, peer, -1, comm, nb)
        t += 100
    return ev


def _trace(tmp_path, ranks):
    cols = [_rank(calls) for calls in ranks]
    comms = {W: list(range(len(ranks)))}
    d = write_trace(tmp_path / "t", [c.events(r) for r, c in enumerate(cols)],
                    communicators=comms)
    return replay.prepare(d, use_cache=False)


def _open(w=W):
    return [("Win_create", w, 0, -1), ("Win_fence", -1, w, -1)]


def test_a_fence_carries_its_epochs_transfers_then_its_barrier(tmp_path):
    # rank 0 puts 1000 B on rank 1 and gets 400 B from it in one epoch; rank 1 does nothing
    prep = _trace(tmp_path, [
        _open() + [("Put", 1, W, 1000), ("Get", 1, W, 400), ("Win_fence", -1, W, -1)],
        _open() + [("Win_fence", -1, W, -1)]])
    c = prep.coll
    assert sorted(zip(c.xfer_src.tolist(), c.xfer_dst.tolist(), c.xfer_bytes.tolist())) == \
        [(0, 1, 1000), (1, 0, 400)]
    res = replay.run(prep, "hockney", HOCKNEY, compute_scale=0.0)
    # creation and the first fence: one empty dissemination step each (L); the second fence:
    # both transfers at once (the longer, L + 1000 G), then its barrier step (L)
    assert res.makespan_ns == pytest.approx(L + L + (L + 1000 * G) + L)
    assert prep.notes == []


def test_transfers_sum_per_pair_and_skip_the_own_window(tmp_path):
    prep = _trace(tmp_path, [
        _open() + [("Put", 1, W, 100), ("Accumulate", 1, W, 50), ("Put", 0, W, 999),
                   ("Fetch_and_op", 1, W, 8), ("Win_fence", -1, W, -1)],
        _open() + [("Win_fence", -1, W, -1)]])
    c = prep.coll
    assert sorted(zip(c.xfer_src.tolist(), c.xfer_dst.tolist(), c.xfer_bytes.tolist())) == \
        [(0, 1, 158), (1, 0, 8)]


def test_lock_epochs_are_round_trips_at_their_closing_calls(tmp_path):
    """Rule lock_epoch under LogGP: rank 0 puts 1000 B and gets 400 B under a lock of rank 1,
    both at its unlock; rank 1, under lock_all, fetches-and-ops 8 B on rank 0 (at its flush)
    and puts 64 B (at its unlock_all), then puts 32 B that nothing closes (a note)."""
    prep = _trace(tmp_path, [
        [("Win_lock", 1, W, -1), ("Put", 1, W, 1000), ("Get", 1, W, 400),
         ("Win_unlock", 1, W, -1)],
        [("Win_lock_all", -1, W, -1), ("Fetch_and_op", 0, W, 8), ("Win_flush", -1, W, -1),
         ("Put", 0, W, 64), ("Win_unlock_all", -1, W, -1), ("Put", 0, W, 32)]])
    assert len(prep.coll.xfer_inst) == 0
    assert prep.notes == ["1 one-sided operations in no closed epoch (no fence, unlock, flush "
                          "or complete closes them) replay as their calls: their transfers are "
                          "not modelled"]
    res = replay.run(prep, "loggp", LOGGP, compute_scale=0.0)
    # rank 0's unlock: 1000 B out (o_s, L, 999 G), the 400 B back (L, 399 G), taken (o_r)
    end0 = OS + L + 999 * G + L + 399 * G + OR
    # rank 1's flush: 8 B each way; its unlock_all: 64 B out, an empty acknowledgement back
    flush = OS + L + 7 * G + L + 7 * G + OR
    end1 = flush + OS + L + 63 * G + L + OR
    assert res.rank_end_ns.tolist() == pytest.approx([end0, end1])
    ev = res.events_frame()
    unlock = ev[(ev["rank"] == 0) & (ev["op"] == "Win_unlock")].iloc[0]
    assert (unlock["start_ns"], unlock["end_ns"]) == pytest.approx((0.0, end0))
    # the target is passive: a rank that only serves the epoch is not held
    assert replay.run(prep, "measured").makespan_ns == \
        pytest.approx(prep.measured_makespan_ns, rel=1e-9)


def test_every_network_model_prices_a_lock_epoch_like_messages(tmp_path):
    prep = _trace(tmp_path, [
        [("Win_lock", 1, W, -1), ("Put", 1, W, 1000), ("Win_unlock", 1, W, -1)],
        [("Win_lock", 0, W, -1), ("Win_unlock", 0, W, -1)]])
    # Hockney: no overheads; L + 1000 G out, L back
    res = replay.run(prep, "hockney", HOCKNEY, compute_scale=0.0)
    assert res.rank_end_ns.tolist() == pytest.approx([L + 1000 * G + L, 0.0])
    for model in ("loggps", "mm1", "loggp"):
        assert replay.run(prep, model, compute_scale=0.0).rank_end_ns[0] > 0


def test_pscw_epoch_waits_for_the_post_and_crosses_at_complete(tmp_path):
    """Rule pscw_epoch under LogGP: rank 1 posts (to rank 0) 5 us late and waits; rank 0
    starts (waits for that post), puts 1000 B and gets 400 B, completes: the put's bytes go
    in the message its complete sends rank 1's wait, the get is a round trip."""
    prep = _trace(tmp_path, [
        [("Win_start", 1, W, -1), ("Put", 1, W, 1000), ("Get", 1, W, 400),
         ("Win_complete", -1, W, -1)],
        [("Win_post", 0, W, -1, 5000), ("Win_wait", -1, W, -1)]])
    assert prep.notes == [] and len(prep.coll.xfer_inst) == 0
    res = replay.run(prep, "loggp", LOGGP, compute_scale=1.0)
    post_sent = 5000 + OS
    started = post_sent + L + OR                      # the empty post message received
    put_sent = started + OS                           # 1000 B leave the NIC by + 999 G
    request_sent = started + 999 * G + OS             # the get's request waits for the NIC
    end0 = request_sent + L + L + 399 * G + OR
    end1 = put_sent + L + 999 * G + OR
    assert res.rank_end_ns.tolist() == pytest.approx([end0, end1])
    ev = res.events_frame()
    start = ev[ev["op"] == "Win_start"].iloc[0]
    assert start["end_ns"] == pytest.approx(started)
    assert replay.run(prep, "measured").makespan_ns == \
        pytest.approx(prep.measured_makespan_ns, rel=1e-9)


def test_pscw_groups_match_in_order_and_unmatched_calls_are_said(tmp_path):
    """Post and start rows per group member; the k-th post of T to O meets the k-th start of O
    on T. A start whose post is missing gives a note and no message (no deadlock)."""
    prep = _trace(tmp_path, [
        [("Win_post", 1, W, -1), ("Win_post", 2, W, -1, SAME), ("Win_wait", -1, W, -1)],
        [("Win_start", 0, W, -1), ("Put", 0, W, 10), ("Win_complete", -1, W, -1),
         ("Win_start", 2, W, -1), ("Win_complete", -1, W, -1)],
        [("Win_start", 0, W, -1), ("Win_complete", -1, W, -1)]])
    ep = prep.rma
    # messages: posts 0->1 and 0->2, completes 1->0 (10 B) and 2->0
    assert sorted(zip(ep.m_src.tolist(), ep.m_dst.tolist(), ep.m_bytes.tolist())) == \
        [(0, 1, 0.0), (0, 2, 0.0), (1, 0, 10.0), (2, 0, 0.0)]
    assert prep.notes == ["2 post/start/complete/wait calls of one-sided epochs have no "
                          "partner in the trace: they replay as their calls, without the "
                          "synchronisation"]
    assert replay.run(prep, "loggps").makespan_ns > 0
    assert replay.run(prep, "measured").makespan_ns == \
        pytest.approx(prep.measured_makespan_ns, rel=1e-9)
    out = hindsight("trace", "check", tmp_path / "t")
    assert out.returncode == 1 and out.stdout.strip() == (
        f"{tmp_path / 't'}: 2 post/start/complete/wait calls of one-sided epochs have no "
        "partner in the trace")


def test_operations_in_lock_and_pscw_epochs_are_no_fences(tmp_path):
    prep = _trace(tmp_path, [
        _open() + [("Win_lock", 1, W, -1), ("Put", 1, W, 100), ("Win_unlock", 1, W, -1),
                   ("Win_start", 1, W, -1), ("Get", 1, W, 8), ("Win_complete", -1, W, -1),
                   ("Win_fence", -1, W, -1)],
        _open() + [("Win_post", 0, W, -1), ("Win_wait", -1, W, -1), ("Win_fence", -1, W, -1)]])
    assert len(prep.coll.xfer_inst) == 0 and prep.notes == []
    assert replay.run(prep, "loggp", LOGGP).makespan_ns > 0


def test_fence_transfers_of_two_windows_and_two_epochs():
    import numpy as np
    # window 5: fence, Put, fence, Get, fence; window 9: fence, then a Put no fence closes
    names = ("Win_fence", "Put", "Win_fence", "Get", "Win_fence", "Win_fence", "Put")
    op = np.array([tf.OP_CODE[x] for x in names], np.int8)
    rank = np.zeros(len(names), np.int32)
    comm = np.array([5, 5, 5, 5, 5, 9, 9], np.int32)
    peer = np.array([-1, 1, -1, 2, -1, -1, 3], np.int32)
    nb = np.array([-1, 10, -1, 20, -1, -1, 30], np.int64)
    coll = np.array([0, -1, 1, -1, 2, 3, -1], np.int64)
    xf = fence_transfers(rank, op, peer, comm, nb, coll, np.zeros(len(names), bool))
    assert list(zip(xf.inst.tolist(), xf.src.tolist(), xf.dst.tolist(),
                    xf.nbytes.tolist())) == [(1, 0, 1, 10), (2, 2, 0, 20)]
    assert xf.unmodelled == 1


def test_a_real_program_with_windows(tmp_path):
    df, m = _traced(tmp_path, "rma.py", 3)
    assert m["untraced_calls"] == {}
    for r in range(3):
        ops = Counter(df[df["rank"] == r]["op"].astype(str))
        assert ops["Win_create"] == 2 and ops["Win_free"] == 2 and ops["Win_fence"] == 3
        assert ops["Put"] == 3 and ops["Get"] == (3 if r == 0 else 2)
        assert ops["Accumulate"] == 1 and ops["Fetch_and_op"] == 1
        assert ops["Win_lock"] == ops["Win_unlock"] == (2 if r == 0 else 1)
        mine = df[(df["rank"] == r) & df["op"].astype(str).isin(tf.RMA_PSCW_OPS | {
            "Win_lock_all", "Win_flush", "Win_unlock_all"})]
        left, right = (r - 1) % 3, (r + 1) % 3
        assert list(zip(mine["op"].astype(str), mine["peer"])) == [
            ("Win_post", left), ("Win_start", right), ("Win_complete", -1), ("Win_test", -1),
            ("Win_lock_all", -1), ("Win_flush", right), ("Win_unlock_all", -1)]
    made = df[df["op"] == "Win_create"]
    for wid in set(made["peer"]):
        assert m["communicators"][str(wid)] == [0, 1, 2]          # the window's members
        rows = df[df["comm"] == wid]
        assert set(rows["op"].astype(str)) >= {"Win_fence", "Win_free"} or \
            set(rows["op"].astype(str)) >= {"Win_lock", "Win_free"}
    put = df[(df["op"] == "Put") & (df["rank"] == 1)].iloc[0]
    assert (put["peer"], put["nbytes"]) == (2, 64)
    prep = replay.prepare(tmp_path / "trace", use_cache=False)
    assert replay.run(prep, "measured").makespan_ns == \
        pytest.approx(prep.measured_makespan_ns, rel=1e-9)
    assert len(prep.coll.xfer_inst) == 9      # 3 Puts; 3 Gets and 3 Accumulates, by pair
    ep = prep.rma
    sent = ep.msg[ep.kind == K.ISEND]
    # PSCW: each rank's post to its left neighbour, its complete (16 B) to its right one
    assert sorted(zip(ep.m_src[sent].tolist(), ep.m_dst[sent].tolist(),
                      ep.m_bytes[sent].tolist())) == sorted(
        [(r, (r - 1) % 3, 0.0) for r in range(3)] + [(r, (r + 1) % 3, 16.0) for r in range(3)])
    trips = ep.msg[ep.kind == K.PSEND]
    # the flush (16 B out), the unlock_all (16 B back), ranks 1 and 2's Fetch_and_op on rank 0
    assert sorted(zip(ep.m_src[trips].tolist(), ep.m_dst[trips].tolist(),
                      ep.m_bytes[trips].tolist(), ep.m_bytes[trips + 1].tolist())) == sorted(
        [(r, (r + 1) % 3, 16.0, 0.0) for r in range(3)]
        + [(r, (r + 1) % 3, 0.0, 16.0) for r in range(3)] + [(1, 0, 8.0, 8.0), (2, 0, 8.0, 8.0)])
    assert prep.notes == []
    for model in ("hockney", "loggp"):
        out = hindsight("replay", tmp_path / "trace", "--model", model)
        assert out.returncode == 0, out.stderr
        assert not model_notes(out.stderr)


def test_otf2_round_trip_of_windows_is_exact(tmp_path):
    _traced(tmp_path, "rma.py", 3)
    src, archive, back = tmp_path / "trace", tmp_path / "otf2", tmp_path / "back"
    assert hindsight("export", src, "--format", "otf2", "--out", archive).returncode == 0
    res = hindsight("import", "otf2", archive, "--out", back)
    assert res.returncode == 0, res.stderr
    cols = ["rank", "seq", "op", "peer", "tag", "comm", "nbytes", "request", "root", "t_start",
            "t_end"]
    a = tf.read_trace(src).to_pandas()[cols].astype(str)
    b = tf.read_trace(back).to_pandas()[cols].astype(str)
    assert a.equals(b)
    assert tf.read_manifest(back)["communicators"] == tf.read_manifest(src)["communicators"]
