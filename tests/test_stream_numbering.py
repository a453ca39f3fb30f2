"""The stream numbers messages by send time (``replay.numbering.number_by_send_time``): a matter of
memory locality only, so every replay must give what it gives with the matching's numbers."""

from __future__ import annotations

import importlib
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given

import replay
from replay import kernel as K
from replay import numbering as S
from synthetic import simulate_to_dir
from test_replay_properties import SETTINGS, programs


def _pairwise(nranks: int, rounds: int) -> list[list[tuple]]:
    """Each round every rank exchanges with rank ^ round bit (Isend/Irecv, Waitall): numbered by
    sender, a receiver's messages lie in as many blocks as it has partners."""
    progs: list[list[tuple]] = [[] for _ in range(nranks)]
    for i in range(rounds):
        for r in range(nranks):
            peer = r ^ (1 + i % (nranks - 1))
            n = sum(1 for o in progs[r] if o[0] in ("isend", "irecv"))
            progs[r] += [("compute", 1000 + 37 * r), ("irecv", peer, i), ("isend", peer, 64, i),
                         ("wait", [n, n + 1])]
    return progs


def _outputs(res) -> dict:
    return {"end": res.rank_end_ns, "comp": res.rank_compute_ns, "wait": res.rank_wait_ns,
            "rows": (res.row_start_ns, res.row_end_ns), "critical": res.critical_rows,
            "info": repr(sorted(res.info.items()))}


def _replays(progs, monkeypatch, models=("loggps", "measured", "mm1")) -> tuple[list, list]:
    """Each model's outputs with the stream's numbering (in exact send-time order: one message
    a bucket, so that small traces are renumbered too) and with the matching's."""
    got = []
    renumbered = []
    for renumber in (True, False):
        with monkeypatch.context() as m:
            m.setattr(S, "PER_BUCKET", 1)
            if not renumber:    # (where the stream's builder calls it)
                m.setattr(importlib.import_module("replay.prepare"), "number_by_send_time",
                          lambda *a: None)
            with tempfile.TemporaryDirectory(prefix="hs-num-") as d:
                prep = replay.prepare(simulate_to_dir(Path(d) / "t", progs), use_cache=False)
                renumbered.append(prep.stream(expand=True).m_trace is not None)
                # (rendezvous above 1 KiB: the sizes below are either side of it)
                params = {"S": "1KiB", "L": "1us", "o": "300ns", "G": "0.2ns"}
                per = {"loggps": params, "mm1": {"saturation": "cap"}}
                got.append([_outputs(replay.run(prep, name, per.get(name, {})))
                            for name in models])
    assert not renumbered[1]
    return got[0], got[1]


def _same(a, b) -> None:
    for x, y in zip(a, b):
        for key in x:
            if key == "info":
                assert x[key] == y[key]
            else:
                np.testing.assert_array_equal(np.asarray(x[key], dtype=object if key == "rows"
                                                         else None),
                                              np.asarray(y[key], dtype=object if key == "rows"
                                                         else None), err_msg=key)


def test_messages_are_numbered_by_send_time_and_the_operations_follow(tmp_path):
    progs = _pairwise(8, 100)       # 800 messages: buckets of 64 make 12
    prep = replay.prepare(simulate_to_dir(tmp_path / "t", progs), use_cache=False)
    st_ = prep.stream(expand=True)
    assert st_.m_trace is not None          # the matching's numbers were not in send time
    msgs = prep.msgs
    # each trace message kept its sender, receiver and size under its new number
    np.testing.assert_array_equal(st_.m_src[st_.m_trace], msgs.src)
    np.testing.assert_array_equal(st_.m_dst[st_.m_trace], msgs.dst)
    np.testing.assert_array_equal(st_.m_bytes[st_.m_trace], msgs.bytes)
    # in about send-time order: the keys fall back by less than a bucket's width
    t = prep.rows.t_start[st_.op_row[st_.m_send_op]]
    width = int(t.max() - t.min()) // (len(t) // S.PER_BUCKET) + 1
    assert np.all(np.diff(t) > -width)
    old = prep.rows.t_start[msgs.send_row]      # the matching's numbers fell back further
    assert np.any(np.diff(old) <= -width)
    # every operation names its message's new number: a send posts the message it names
    posts = (st_.kind == K.ISEND) | (st_.kind == K.SEND)
    np.testing.assert_array_equal(st_.m_send_op[st_.msg[posts]], np.flatnonzero(posts))
    recvs = (st_.kind == K.IRECV) | (st_.kind == K.RECV)
    np.testing.assert_array_equal(st_.m_recv_op[st_.msg[recvs]], np.flatnonzero(recvs))


def test_numbering_changes_no_replay_of_a_pairwise_exchange(monkeypatch):
    with tempfile.TemporaryDirectory(prefix="hs-num-") as d:
        monkeypatch.setattr(S, "PER_BUCKET", 1)
        prep = replay.prepare(simulate_to_dir(Path(d) / "t", _pairwise(8, 12)), use_cache=False)
        assert prep.stream(expand=True).m_trace is not None
    new, old = _replays(_pairwise(8, 12), monkeypatch)
    _same(new, old)


@SETTINGS
@given(programs())
def test_numbering_changes_no_replay(progs):
    with pytest.MonkeyPatch.context() as mp:
        new, old = _replays(progs, mp)
    _same(new, old)


def test_the_loggopsim_model_sees_the_trace_messages_tags(monkeypatch):
    """``--model loggopsim`` matches by tag: each trace message keeps its own after the
    renumbering (a tag given to the wrong message deadlocks or changes the makespan)."""
    new, old = _replays(_pairwise(8, 9), monkeypatch, models=("loggopsim",))
    _same(new, old)


def test_a_goal_schedule_keeps_each_messages_own_tag(tmp_path, monkeypatch):
    """A GOAL schedule (``--model loggopsim``, ``export goal``) gives a COMM_WORLD message its
    trace tag, under its stream number."""
    from replay.loggopsim.schedule import _message_tags

    monkeypatch.setattr(S, "PER_BUCKET", 1)
    prep = replay.prepare(simulate_to_dir(tmp_path / "t", _pairwise(8, 9)), use_cache=False)
    st_ = prep.stream(expand=True)
    assert st_.m_trace is not None
    tags = _message_tags(prep, st_)
    # each rank's i-th Isend is round i's, tagged i
    for r in range(8):
        ops = np.arange(st_.rank_off[r], st_.rank_off[r + 1])
        sends = ops[st_.kind[ops] == K.ISEND]
        assert tags[st_.msg[sends]].tolist() == list(range(9))


def test_a_streamed_replay_carries_messages_under_their_trace_numbers(tmp_path, monkeypatch):
    """Eager messages in flight cross a streamed replay's cuts (rule ``carried_message``): the
    next segment looks their send times up by trace number, each segment's stream numbering
    them its own way."""
    from replay.segments import segments
    from replay.streamed import run_streamed
    from test_streamed import _same as same_replay

    monkeypatch.setattr(S, "PER_BUCKET", 1)
    master = [("send", 1, 100, 1), ("send", 1, 100, 1)]
    worker = []
    for i in range(30):
        worker += [("recv", 0, 1), ("compute", 5000 + 300 * (i % 7)), ("send", 0, 8, 2)]
        master += [("recv", 1, 2), ("compute", 700 * (i % 5))] + \
            ([("send", 1, 100, 1)] if i < 28 else [])
    d = simulate_to_dir(tmp_path / "t", [master, worker])
    assert sum(int(s.later.sum()) for s in segments(d, 8, eager_limit=16384)) > 0
    assert replay.prepare(d, use_cache=False).stream(expand=True).m_trace is not None
    whole = replay.run(replay.prepare(d, use_cache=False), "loggps", {"S": "16KiB"},
                       record=False)
    same_replay(whole, run_streamed(d, "loggps", {"S": "16KiB"}, window=8))
