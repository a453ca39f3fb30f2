"""The free of an active request (format 1.2's `Request_free` rows, docs/trace-format.md):
`trace check`, message matching, the consistent cut and replay of freed sends and receives, on
small synthetic traces (the recorders' rows: tests/test_native.py, request_free.c and .py)."""

from __future__ import annotations

import pytest

import replay
from hindsight import trace as tf
from hindsight.check import check_trace
from replay import kernel as K
from replay.errors import ReplayError
from replay.matching import match_messages
from replay.partial import cut_table
from replay.stream import CALL_OTHER, call_classes
from synthetic import ANY, EventRows, simulate, simulate_to_dir, write_trace

FREE = tf.OP_CODE["Request_free"]


def _problems(trace) -> list[str]:
    """`trace check`'s lines without the file names."""
    return [line.split(": ", 1)[1] for line in check_trace(trace)]


def _replays(trace) -> replay.Prepared:
    """`measured` reproduces the makespan and the network models replay: returns the trace
    prepared."""
    prep = replay.prepare(trace, use_cache=False)
    assert replay.run(prep, "measured").makespan_ns == pytest.approx(
        prep.measured_makespan_ns, rel=1e-6)
    for model in ("loggps", "hockney", "loggopsim"):
        assert replay.run(prep, model).makespan_ns > 0
    return prep


def test_format_version_and_op_code():
    """Request_free is appended to the op list: the codes of every older op stay, so a 1.1
    trace's op dictionary means what it meant."""
    assert tf.FORMAT_VERSION >= "1.2"
    assert tf.OP_CODE["Request_free"] == FREE and tf.OP_CODE["Win_test"] == FREE - 1 == 85
    assert tf.FREE_OPS == {"Request_free"} and not tf.FREE_OPS & tf.COMPLETION_OPS


@pytest.mark.parametrize("version", ["1.0", "1.1"])
def test_an_older_trace_still_reads_checks_and_replays(tmp_path, version):
    progs = [[("isend", 1, 64, 3), ("wait", [0])], [("recv", 0, 3)]]
    out = write_trace(tmp_path / "t", simulate(progs), manifest={"format_version": version})
    assert tf.read_manifest(out)["format_version"] == version
    assert _problems(out) == []
    _replays(out)


def test_a_freed_send_is_matched_and_nothing_waits_for_it(tmp_path):
    progs = [[("isend", 1, 4096, 3), ("free", 0), ("compute", 2000), ("send", 1, 8, 4)],
             [("compute", 1000), ("recv", 0, 3), ("recv", 0, 4)]]
    out = simulate_to_dir(tmp_path / "t", progs)
    assert _problems(out) == []
    # without its Request_free row the same send was never completed
    cols = simulate(progs)
    for name in cols[0]:
        del cols[0][name][1]
    assert _problems(write_trace(tmp_path / "old", cols)) == [
        "seq 0: Isend request 0 is never completed"]

    prep = _replays(out)
    rows, msgs = prep.rows, prep.msgs
    assert msgs.send_done.tolist()[0] == -1 and msgs.recv_done.tolist()[0] >= 0
    assert msgs.bytes.tolist() == [4096, 8]
    free = int(rows.seq.tolist().index(1))          # rank 0's row 1 (rank 0 comes first)
    assert rows.op[free] == FREE and rows.kind[free] == K.NOP and rows.msg[free] == -1
    for expand in (False, True):
        st = prep.stream(expand)
        # the Isend posts message 0, no operation completes it; the free moves nothing
        assert [int(k) for k, m in zip(st.kind, st.msg) if m == 0 and k in (
            K.ISEND, K.WSEND, K.SEND)] == [K.ISEND]
        at = list(st.op_row).index(free)
        assert st.kind[at] == K.NOP and call_classes(st, rows.op)[at] == CALL_OTHER


def test_a_freed_receive_still_takes_its_message(tmp_path):
    """A freed Irecv that named its source and tag is matched in posting order (MPI still
    delivers into it): rank 0's first message is its, the second the Recv's."""
    progs = [[("compute", 500), ("send", 1, 64, 7), ("send", 1, 32, 7)],
             [("irecv", 0, 7), ("free", 0), ("recv", 0, 7)]]
    out = simulate_to_dir(tmp_path / "t", progs)
    assert _problems(out) == []
    t = tf.read_trace(out).table
    m, problems = match_messages(t)
    assert problems == [] and len(m) == 2
    d = t.to_pydict()
    assert [(d["op"][r], d["seq"][r]) for r in m.recv_row] == [("Irecv", 0), ("Recv", 2)]
    assert m.recv_done_row.tolist()[0] == -1 and m.nbytes.tolist() == [64, 32]
    assert [d["seq"][r] for r in m.free_row] == [1] and \
        [d["seq"][r] for r in m.free_post_row] == [0]
    prep = _replays(out)
    st = prep.stream(False)
    assert K.WRECV not in st.kind.tolist()           # nothing completes the freed receive


def test_a_freed_wildcard_receive_cannot_be_matched(tmp_path):
    """No row says which message a freed ANY_SOURCE Irecv received: said, not guessed, and
    replay refuses with the reason."""
    progs = [[("send", 1, 64, 7)], [("irecv", ANY, 7), ("free", 0)]]
    out = simulate_to_dir(tmp_path / "t", progs)
    assert _problems(out) == [
        "rank 0 seq 0: Send to 1 tag 7 comm 0 has no matching receive",
        "rank 1 seq 0: Irecv request 0 posted with ANY_SOURCE is freed before it completed: no "
        "row says which message it received, so it cannot be matched"]
    with pytest.raises(ReplayError, match="posted with ANY_SOURCE is freed"):
        replay.prepare(out, use_cache=False)


def test_ending_a_request_twice_or_one_never_posted_is_reported(tmp_path):
    r0, r1 = EventRows(), EventRows()
    r0.append("Isend", 0, 100, peer=1, tag=3, nbytes=8, request=0)
    r0.append("Request_free", 200, 300, request=0)
    r0.append("Wait", 400, 500, request=0)
    r0.append("Request_free", 600, 700, request=5)
    r1.append("Recv", 0, 2000, peer=0, tag=3, nbytes=8)
    out = write_trace(tmp_path / "t", [r0.events(0), r1.events(1)])
    assert _problems(out) == [
        "rank 0 seq 2: Wait completes request 0 that seq 1 already freed",
        "rank 0 seq 3: Request_free frees request 5 that was never posted"]


def test_freeing_a_nonblocking_collective_is_reported_and_replays(tmp_path):
    """Erroneous MPI (MPI 4.0 §6.12), recorded as it happened: `trace check` names it instead
    of calling the request never completed; replay enters the collective at its post."""
    progs = [[("icoll", "Iallreduce", 8), ("free", 0), ("compute", 1000),
              ("coll", "Barrier", 0)],
             [("icoll", "Iallreduce", 8), ("wait", [0]), ("coll", "Barrier", 0)]]
    out = simulate_to_dir(tmp_path / "t", progs)
    assert _problems(out) == [
        "seq 1: Request_free frees request 0 of Iallreduce (seq 0): freeing a non-blocking "
        "collective's request is erroneous MPI (MPI 4.0 §6.12)"]
    _replays(out)


def test_the_consistent_cut_keeps_a_freed_request(tmp_path):
    """A freed request is ended: the cut of a partial trace does not cut its rank at the post
    as it does a request whose completion is missing."""
    progs = [[("isend", 1, 64, 3), ("free", 0), ("compute", 1000), ("send", 1, 8, 4)],
             [("recv", 0, 3), ("recv", 0, 4), ("compute", 5000, "tail")]]
    out = write_trace(tmp_path / "t", simulate(progs), incomplete_ranks=[1])
    trace = tf.read_trace(out)
    _, cut = cut_table(trace.table, trace.manifest, trace.incomplete_ranks)
    assert cut.rows_kept == cut.rows_before == [3, 3]


@pytest.mark.parametrize("seed", range(4))
def test_open_and_freed_requests_are_found_alike_however_ids_are_spread(seed):
    """``trace check``'s request pass (``hindsight.check._open_requests``) looks requests up in
    a table of flags when their ids are numbered per rank and by sorted search when they are
    sparse (64-bit handles): both give the rows a plain reading of the rules gives."""
    import numpy as np

    from hindsight.check import _first_posts, _open_requests

    rng = np.random.default_rng(seed)
    names = ["Isend", "Issend", "Iallreduce", "Ibarrier", "Wait", "Waitall", "Test",
             "Request_free", "Irecv", "Send", "region"]
    n = 3000
    weights = np.array([4, 1, 3, 1, 1, 1, 1, 1, 2, 1, 2], float)   # (some requests stay open)
    ops = np.array([tf.OP_CODE[x] for x in rng.choice(names, n, p=weights / weights.sum())],
                   np.int8)
    ops[rng.random(n) < 0.02] = -1                      # an op this version does not know
    rank = rng.integers(0, 5, n).astype(np.int32)
    req = rng.integers(-1, 400, n).astype(np.int64)
    complete = {0, 1, 3}
    posted = tf.NONBLOCKING_SEND_OPS | tf.NONBLOCKING_COLLECTIVE_OPS
    name = [tf.OPS[c] if c >= 0 else "?" for c in ops.tolist()]
    key = list(zip(rank.tolist(), req.tolist()))
    ended = {key[i] for i in range(n) if req[i] >= 0
             and name[i] in tf.COMPLETION_OPS | tf.FREE_OPS}
    colls = {key[i] for i in range(n) if req[i] >= 0
             and name[i] in tf.NONBLOCKING_COLLECTIVE_OPS}
    want_open = [i for i in range(n) if req[i] >= 0 and name[i] in posted
                 and key[i] not in ended and rank[i] in complete]
    want_freed = [i for i in range(n) if req[i] >= 0 and name[i] in tf.FREE_OPS
                  and key[i] in colls]
    assert want_open and want_freed
    handles = rng.integers(2**62, 2**63 - 1, (5, 400))               # 64-bit, per (rank, id)
    for ids in (req, np.where(req >= 0, req * 10**12 + 7, -1), np.where(
            req >= 0, handles[rank, np.maximum(req, 0)], -1)):      # per rank; sparse; handles
        open_, freed = _open_requests(ops, ids, rank, complete)
        assert open_.tolist() == want_open and freed.tolist() == want_freed
        # and the post each freed collective request was made by: the first with its key
        posts = _first_posts(ops, ids, rank, freed)
        assert posts.tolist() == [min(j for j in range(n) if key[j] == key[i]
                                      and name[j] in tf.NONBLOCKING_COLLECTIVE_OPS)
                                  for i in want_freed]
