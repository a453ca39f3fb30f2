"""One-sided communication: windows traced as communicators of their own, data operations and
synchronisation recorded, and fence epochs replayed with their transfers (rule ``fence_epoch``,
replay/rma.py), checked by hand; a real program traced, checked and replayed."""

from __future__ import annotations

from collections import Counter

import pytest

import replay
from hindsight import trace as tf
from hindsight.trace.write import EventRows, write_trace
from replay.rma import fence_transfers
from tests.conftest import hindsight
from tests.test_coverage import _traced

W = 77        # the window's communicator id in the hand-made traces
L, G = 1000.0, 0.5
HOCKNEY = {"l": "1000ns", "g": "0.5ns"}


def _rank(calls):
    """One rank's rows from (op, peer, comm, nbytes), back to back, 100 ns each."""
    ev = EventRows()
    for k, (op, peer, comm, nb) in enumerate(calls):
        ev.append(op, 100 * k, 100 * k + 100, peer, -1, comm, nb)
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


def test_operations_in_lock_epochs_are_reported_not_modelled(tmp_path):
    prep = _trace(tmp_path, [
        _open() + [("Win_lock", 1, W, -1), ("Put", 1, W, 100), ("Win_unlock", 1, W, -1),
                   ("Put", 1, W, 64)],     # after the last fence: no epoch closes it either
        _open()])
    assert len(prep.coll.xfer_inst) == 0
    assert prep.notes and prep.notes[0].startswith("2 one-sided operations outside fence")
    res = replay.run(prep, "hockney", HOCKNEY, compute_scale=0.0)
    assert res.makespan_ns == pytest.approx(2 * L)       # creation and fence only


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
    xf = fence_transfers(rank, op, peer, comm, nb, coll)
    assert list(zip(xf.inst.tolist(), xf.src.tolist(), xf.dst.tolist(),
                    xf.nbytes.tolist())) == [(1, 0, 1, 10), (2, 2, 0, 20)]
    assert xf.unmodelled == 1


def test_a_real_program_with_windows(tmp_path):
    df, m = _traced(tmp_path, "rma.py", 3)
    assert m["untraced_calls"] == {}
    for r in range(3):
        ops = Counter(df[df["rank"] == r]["op"].astype(str))
        assert ops["Win_create"] == 2 and ops["Win_free"] == 2 and ops["Win_fence"] == 3
        assert ops["Put"] == 1 and ops["Get"] == (2 if r == 0 else 1)
        assert ops["Accumulate"] == 1 and ops["Fetch_and_op"] == 1
        assert ops["Win_lock"] == ops["Win_unlock"] == (2 if r == 0 else 1)
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
    out = hindsight("replay", tmp_path / "trace", "--model", "hockney")
    assert out.returncode == 0
    assert "note: 4 one-sided operations outside fence epochs" in out.stderr


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
