"""Message matching: pair every receive with its send, once, as MPI did.

Rules (docs/trace-format.md, invariant 4): a send from ``s`` to ``d`` with tag ``t`` on
communicator ``c`` matches a receive on ``d`` whose *actual* source and tag are ``s`` and ``t`` on
``c``; among those, the k-th send in ``s``'s record order matches the k-th receive in ``d``'s
posting order (non-overtaking). A blocking receive row (``Recv``, ``Sendrecv_recv``) carries the
actual source and tag itself. An ``Irecv`` is posted at its own row but its actual source, tag and
byte count are on the completion row (``Wait*``/``Test*``) with the same ``request``; so wildcard
receives are resolved as recorded.

A request the program freed while active (a ``Request_free`` row with its ``request``, format
1.2) is ended, not completed: its send still has its receive (it completes on its own, no row
completes it); a freed ``Irecv`` still takes its message, matched by the source and tag it
named, in posting order, as any receive (it has no completion row to name the message: one
posted with ``ANY_SOURCE`` or ``ANY_TAG`` cannot be matched, and is said so).

The work is linear in the number of rows: the (source, destination, communicator, tag) channels
are numbered directly when there are few possible ones, else grouped by hashing
(pandas.factorize), and a compiled pass pairs the k-th send with the k-th receive of each
channel. No per-message Python.

``match_messages(table)`` is reused by ``hindsight trace check``; it takes an Arrow table or
the flat arrays of ``hindsight.trace.Columns`` (``op`` as codes); it never raises on a bad
trace, it returns the problems as readable lines.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from hindsight import trace as tf
from replay.matching_kernels import (
    _classify,
    _direct_keys,
    _ends_of_posts,
    _irecv_messages,
    _matched,
    _pair_channels,
    _request_ends,
    _request_spans,
    _span_ids,
    _tags_agree,
)

# pandas and pyarrow are imported where they are used: preparing a trace needs them, a replay
# of a prepared (cached) trace does not, and importing them takes a third of a second.
if TYPE_CHECKING:
    import pyarrow as pa

IRECV = tf.OP_CODE["Irecv"]


def index_proto(count: int) -> np.ndarray:
    """An empty array of the integer type that numbers ``count`` things (and -1): int32 when
    it fits, since the passes that write such numbers are bound by the bytes they move."""
    return np.zeros(0, np.int32 if count < 2**31 - 1 else np.int64)


def op_codes(table: pa.Table) -> np.ndarray:
    """The ``op`` column of an Arrow table as codes into ``hindsight.trace.OPS`` (int16; -1 for
    names this version lacks), each chunk's dictionary translated (``hindsight.trace.dict_codes``:
    files written by other tools may carry different dictionaries per chunk)."""
    col = table.column("op")
    out = np.empty(len(col), np.int16)
    at = 0
    for chunk in col.chunks:
        tf.dict_codes(chunk, tf.OP_CODE, Path("<table>"), "op", out[at:at + len(chunk)],
                      grow=False)
        at += len(chunk)
    return out


def _col(cols, name: str, dtype) -> np.ndarray:
    return np.asarray(cols[name]).astype(dtype, copy=False)


@dataclass
class MessageMatch:
    """Matched messages, one entry per message, as row indices into the input table.

    ``send_row``: the send (or Isend post) row; ``send_done_row``: the row that completes the send
    (the send row itself when blocking; the Wait/Test row for an Isend; -1 if never completed).
    ``recv_row``: the receive's posting row (Recv row, or Irecv post); ``recv_done_row``: the row
    that completes it (the Recv row, or the Wait/Test row of the Irecv; -1 if never completed,
    or freed). ``nbytes`` is the size sent. ``completion_row``/``completion_post_row`` pair
    every completion row with the post row of the request it completes; ``free_row``/
    ``free_post_row`` every ``Request_free`` row with the post row of the request it freed
    (which no row completes). Row indices are int32 when the input has fewer than 2**31 rows.
    """

    src: np.ndarray
    dst: np.ndarray
    nbytes: np.ndarray
    send_row: np.ndarray
    send_done_row: np.ndarray
    recv_row: np.ndarray
    recv_done_row: np.ndarray
    unmatched_send_rows: np.ndarray
    unmatched_recv_rows: np.ndarray
    completion_row: np.ndarray
    completion_post_row: np.ndarray
    free_row: np.ndarray
    free_post_row: np.ndarray

    def __len__(self) -> int:
        return len(self.send_row)


def _classes() -> np.ndarray:
    """Per op code (the last slot: -1, an unknown op), the class of a row for matching:
    bit 1 posts a request (Irecv, Isend..., a non-blocking collective), 2 ends requests
    (Wait*, Test*, which complete them, and Request_free), 4 sends, 8 is a blocking receive,
    16 is an Irecv."""
    cls = np.zeros(len(tf.OPS) + 1, np.int8)
    posts = tf.NONBLOCKING_SEND_OPS | {"Irecv"} | tf.NONBLOCKING_COLLECTIVE_OPS
    for names, bit in ((posts, 1), (tf.COMPLETION_OPS | tf.FREE_OPS, 2),
                       (tf.SEND_OPS, 4), (tf.BLOCKING_RECV_OPS, 8), ({"Irecv"}, 16)):
        for x in names:
            cls[tf.OP_CODE[x]] |= bit
    return cls


_CLASSES = _classes()
_FREE = tf.op_lut(tuple(tf.FREE_OPS))   # per op code: a Request_free row


def small_codes(x: np.ndarray) -> tuple[np.ndarray, int]:
    """Dense codes of communicator or tag values: an offset when their range is small (no
    hashing, no extra memory), pandas' hashing otherwise (derived communicator ids are large)."""
    if len(x) == 0:
        return np.zeros(0, np.int64), 1
    lo, hi = int(x.min()), int(x.max())
    if hi - lo < 1 << 16:
        return x.astype(np.int64) - lo, hi - lo + 1
    import pandas as pd

    codes, uniq = pd.factorize(x)
    return codes.astype(np.int64), max(len(uniq), 1)


def _channel_ids(src, dst, comm, tag, nranks):
    """(ids of the sends, ids of the receives, id count): one dense id per channel (src, dst,
    comm, tag); ``tag=None`` leaves the tag out (the coarse channels of ``_pair_messages``).

    Each argument is a pair (sends' values, receives' values). When few channels are possible
    the compiled direct key is the id (the pairing's counters are no larger than the rows, and
    nothing is hashed); else the keys are hashed (linear time)."""
    P = max(int(nranks), 1)
    if tag is None:
        tag = (np.zeros(0, np.int32),) * 2  # no tag in the key (nt = 1)
    ns = len(src[0])
    lo_c = min((int(x.min()) for x in comm if len(x)), default=0)
    hi_c = max((int(x.max()) for x in comm if len(x)), default=0)
    lo_t = min((int(x.min()) for x in tag if len(x)), default=0)
    hi_t = max((int(x.max()) for x in tag if len(x)), default=0)
    nc, nt = hi_c - lo_c + 1, hi_t - lo_t + 1
    space = float(P) * P * nc * nt
    if space < 2.0 ** 62:  # a direct key: no hashing of comm and tag
        proto = index_proto(int(space))
        keys = [_direct_keys(s, d, c, t, P, lo_c, nc, lo_t, nt, proto)
                for s, d, c, t in zip(src, dst, comm, tag)]
        if space <= max(ns + len(src[1]), 1 << 16):
            return keys[0], keys[1], int(space)
        # pandas only where keys are hashed: its import is 0.3 s of a command's start-up
        import pandas as pd

        gid, uniq = pd.factorize(np.concatenate(keys))
        gid = _of_width(gid, len(uniq))
        return gid[:ns], gid[ns:], len(uniq)
    src, dst, comm = (np.concatenate(x) for x in (src, dst, comm))
    ci, nc = small_codes(comm)
    ti, nt = small_codes(np.concatenate(tag)) if len(tag[0]) + len(tag[1]) else \
        (np.zeros(len(src), np.int64), 1)
    import pandas as pd

    if float(P) * P * nc * nt < 2.0 ** 62:
        key = ((src.astype(np.int64) * P + dst) * nc + ci) * nt + ti
        gid, uniq = pd.factorize(key)
        gid = _of_width(gid, len(uniq))
        return gid[:ns], gid[ns:], len(uniq)
    df = pd.DataFrame({"s": src, "d": dst, "c": ci, "t": ti})
    gid = df.groupby(["s", "d", "c", "t"], sort=False).ngroup().to_numpy()
    n = int(gid.max()) + 1 if len(gid) else 0
    gid = _of_width(gid, n)
    return gid[:ns], gid[ns:], n


def _of_width(ids: np.ndarray, count: int) -> np.ndarray:
    """Channel ids (``count`` of them) as the direct keys have them (``index_proto``): one
    integer type whichever way a trace's channels were numbered, so that the pairing's kernel
    sees one type (and the kernels compiled ahead of time have it: ``hindsight.jit``)."""
    return ids.astype(index_proto(count).dtype, copy=False)


def _pair_messages(s_src, s_dst, s_comm, s_tag, r_src, r_dst, r_comm, r_tag, nranks):
    """(match_of_send, recv_matched): MPI's rule, the k-th send of a channel (source,
    destination, communicator, tag) meets the k-th receive of that channel.

    Programs mostly receive in the order their peer sends, whatever the tags. Then pairing on
    (source, destination, communicator) alone gives pairs whose tags agree, and that pairing
    is MPI's: the tag sequences of each coarse channel agree up to the shorter one's length, so
    the k-th send with tag t is the k-th receive with tag t. Checking the tags costs one pass;
    the full channel key, whose tag range can be as large as the trace, is built only when a
    pair disagrees."""
    sides = ((s_src, r_src), (s_dst, r_dst), (s_comm, r_comm))
    ids_s, ids_r, n = _channel_ids(*sides, None, nranks)
    proto = index_proto(len(r_src))
    match_of_send, recv_matched = _pair_channels(ids_s, ids_r, max(n, 1), proto)
    if _tags_agree(match_of_send, s_tag, r_tag):
        return match_of_send, recv_matched
    ids_s, ids_r, n = _channel_ids(*sides, (s_tag, r_tag), nranks)
    return _pair_channels(ids_s, ids_r, max(n, 1), proto)


def _request_ids(rank: np.ndarray, request: np.ndarray, post_rows: np.ndarray,
                 comp_rows: np.ndarray) -> tuple[np.ndarray, int]:
    """A dense number for the (rank, request id) of each row of ``post_rows`` then
    ``comp_rows``, and how many numbers there are (some may go unused: only numbers of rows
    are ever looked up). Two different pairs never share a number.

    Request ids are numbered per rank by whoever wrote the trace (the tracer counts them, an
    import uses operation numbers, OTF2 its own): each rank's ids span a range not much wider
    than its requests, so the ranks' spans laid end to end number them, nothing hashed. Only
    ids spread wider (over twice the rows' count) are hashed (pandas)."""
    n = len(post_rows) + len(comp_rows)
    if n == 0:
        return np.zeros(0, np.intp), 0
    # (the spans are indexed by rank: a rank column out of shape is hashed instead)
    if 0 <= int(rank.min()) and int(rank.max()) < tf.MAX_RANKS:
        lo, hi = _request_spans(rank, request, post_rows, comp_rows, int(rank.max()) + 1)
        # widths as Python integers, exact whatever the ids (64-bit handles near the limits)
        width = [h - l + 1 if h >= l else 0 for l, h in zip(lo.tolist(), hi.tolist())]
        total = sum(width)
        if total <= max(2 * n, 1 << 16):
            # (each id less its rank's lowest is then below ``total``: no int64 overflow)
            base = np.zeros(len(lo), np.int64)
            np.cumsum(width[:-1], out=base[1:])
            return _span_ids(rank, request, post_rows, comp_rows, base, lo), total
    import pandas as pd     # (only here: its import is 0.3 s of a command's start-up)

    # the ids numbered first, then (rank, number): a product of rank and id could wrap int64
    rows = np.concatenate([post_rows, comp_rows])
    ids, uniq = pd.factorize(request[rows])
    key = rank[rows].astype(np.int64) * max(len(uniq), 1) + ids
    rid, uniq = pd.factorize(key)
    return rid, len(uniq)


def match_messages(table, max_problems: int = 1000,
                   _in_order: bool = False) -> tuple[MessageMatch, list[str]]:
    """Match every receive to its send. Returns (matches, problems).

    ``problems`` are readable lines such as
    ``"rank 1 seq 7: Recv from 0 tag 5 comm 0 has no matching send"``; at most ``max_problems``
    are formatted (then one line saying how many more). The function does not raise on a bad
    trace; row indices in the result refer to ``table``'s row order. ``_in_order``: the caller
    has put the rows in (rank, seq) order already (``prepare`` does), so it is not checked again.
    """
    import pyarrow as pa

    cols = tf.table_columns(table)[0] if isinstance(table, pa.Table) else table
    n = len(cols["rank"])
    # Native column types (int32 for rank, peer, tag, comm): full-length int64 copies would
    # double the memory of matching a huge trace. Subsets are widened where keys are computed.
    rank = np.asarray(cols["rank"])
    seq = _col(cols, "seq", np.int64)
    op = np.asarray(cols["op"])
    peer = np.asarray(cols["peer"])
    tag = np.asarray(cols["tag"])
    comm = np.asarray(cols["comm"])
    nbytes = _col(cols, "nbytes", np.int64)
    request = _col(cols, "request", np.int64)
    nranks = int(rank.max()) + 1 if n else 0
    nranks = max(nranks, int(peer.max()) + 1 if n else 0)
    issues: list[tuple[int, str]] = []  # (row, text after "rank r seq s: ")
    counts = {"n": 0}

    def problem(rows: np.ndarray, fmt) -> None:
        counts["n"] += len(rows)
        room = max_problems - len(issues)
        for r in rows[:max(room, 0)].tolist():
            issues.append((r, fmt(r)))

    def name(r: int) -> str:
        return tf.OPS[op[r]] if op[r] >= 0 else "?"

    # ---- the rows that take part, in one pass
    # row numbers as int32 when they fit: they are most of the bytes matching writes
    post_rows, comp_rows, irecv, sends, brecvs = _classify(op, peer, request, rank, tag, comm,
                                                           nbytes, _CLASSES, index_proto(n))
    send_rows, s_src, s_dst, s_comm, s_tag, s_op = sends
    brecv, r_src, r_tag, r_nb, r_dst, r_comm = brecvs
    del sends, brecvs

    # ---- requests: post row <-> the row that ends it (a completion, or a Request_free)
    rid, nreq = _request_ids(rank, request, post_rows, comp_rows)
    pid, cid = rid[:len(post_rows)], rid[len(post_rows):]
    comp_post, end_at_post, dup, orphan, earlier, n_dup, n_orphan, n_later = _request_ends(
        pid, cid, post_rows, comp_rows, nreq)
    del rid, pid, cid
    freed = _FREE[op[comp_rows]]            # the ending rows that are Request_free rows
    any_freed = bool(freed.any())           # (most traces have none: no further work then)

    def ends(r: int) -> str:
        return "frees" if _FREE[op[r]] else "completes"

    if n_dup:
        problem(post_rows[dup], lambda r: f"{name(r)} request {request[r]} is posted more "
                                          "than once")
    if n_orphan:
        problem(comp_rows[orphan], lambda r: f"{name(r)} {ends(r)} request {request[r]} that "
                                             "was never posted")
    if n_later:
        later = earlier >= 0
        first_end = dict(zip(comp_rows[later].tolist(), earlier[later].tolist()))

        def again(r: int) -> str:
            f = first_end[r]
            if not _FREE[op[r]] and not _FREE[op[f]]:
                return f"{name(r)} completes request {request[r]} a second time"
            return (f"{name(r)} {ends(r)} request {request[r]} that seq {seq[f]} already "
                    f"{'freed' if _FREE[op[f]] else 'completed'}")
        problem(comp_rows[later], again)
    del dup, orphan, earlier
    comp_ok = comp_post >= 0
    if any_freed:
        completion_row, completion_post_row = (comp_rows[comp_ok & ~freed],
                                               comp_post[comp_ok & ~freed])
        free_row, free_post_row = comp_rows[comp_ok & freed], comp_post[comp_ok & freed]
    else:
        completion_row, completion_post_row = comp_rows[comp_ok], comp_post[comp_ok]
        free_row, free_post_row = comp_rows[:0], comp_post[:0]
    del freed, comp_post, comp_ok

    def done_of_post(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(completion row of each given post row, -1: never completed, freed, or no request
        id; whether a Request_free row ended it)."""
        # the row that ends each one's request, looked up by its place among the (sorted)
        # post rows in ``end_at_post``: a full-length array would cost 8 bytes per event of a
        # trace that has few requests
        end = _ends_of_posts(post_rows, end_at_post, rows)
        if not any_freed:
            return end, np.zeros(len(rows), bool)
        free = (end >= 0) & _FREE[op[np.maximum(end, 0)]]
        return np.where(free, -1, end), free

    # ---- sends (record order on the source = row order)
    nbs = tf.op_mask(s_op, tf.NONBLOCKING_SEND_OPS)
    del s_op
    s_done = send_rows
    if nbs.any():
        s_done = send_rows.copy()
        s_done[nbs] = done_of_post(send_rows[nbs])[0]    # a freed send: -1, as never
    del nbs

    # ---- receives, in posting order on the destination
    idone, ifreed = done_of_post(irecv)
    never = irecv[(idone < 0) & ~ifreed]
    problem(never, lambda r: f"Irecv request {request[r]} is never completed")
    # A freed Irecv has no row that names its message: one posted with a wildcard cannot be
    # matched (one with a concrete source and tag is, below).
    blind = irecv[ifreed & ((peer[irecv] == tf.ANY_SOURCE) | (tag[irecv] == tf.ANY_TAG))] \
        if any_freed else irecv[:0]
    problem(blind, lambda r: (
        f"Irecv request {request[r]} posted with "
        f"{'ANY_SOURCE' if peer[r] == tf.ANY_SOURCE else 'ANY_TAG'} is freed before it "
        "completed: no row says which message it received, so it cannot be matched"))
    # The completion row holds the truth (wildcards resolved); a never-completed or freed Irecv
    # with a concrete source/tag still has a channel, so it is matched all the same (a freed
    # one received its message; a never-completed one in a partial trace may have). A freed
    # one's received size is unknown (-1: the send's counts).
    i_src, i_tag, i_nb = _irecv_messages(irecv, idone, ifreed, peer, tag, nbytes)
    del ifreed
    keep = i_src >= 0
    keep &= i_tag >= 0
    recv_rows = r_done = brecv  # a blocking receive row completes itself
    if keep.any():
        ik = irecv[keep]
        recv_rows = np.concatenate([brecv, ik])
        r_src = np.concatenate([r_src, i_src[keep]])
        r_tag = np.concatenate([r_tag, i_tag[keep]])
        r_nb = np.concatenate([r_nb, i_nb[keep]])
        r_dst = np.concatenate([r_dst, rank[ik]])
        r_comm = np.concatenate([r_comm, comm[ik]])
        r_done = np.concatenate([brecv, idone[keep]])
        if len(brecv):  # both kinds present: merge them into posting order
            order = np.argsort(recv_rows, kind="stable")
            recv_rows, r_src, r_tag, r_nb, r_done, r_dst, r_comm = (
                a[order] for a in (recv_rows, r_src, r_tag, r_nb, r_done, r_dst, r_comm))
    del brecv, i_src, i_tag, i_nb

    # The row order must be (rank, seq) order for "record order" to mean anything.
    if not _in_order and not tf.in_rank_seq_order(rank, seq):  # (prepare has sorted them)
        sort = np.lexsort((seq, rank))
        inv = np.empty(n, np.int64)
        inv[sort] = np.arange(n)
        so = np.argsort(inv[send_rows], kind="stable")
        send_rows, s_src, s_dst, s_comm, s_tag, s_done = (
            a[so] for a in (send_rows, s_src, s_dst, s_comm, s_tag, s_done))
        ro = np.argsort(inv[recv_rows], kind="stable")
        recv_rows, r_src, r_tag, r_nb, r_done, r_dst, r_comm = (
            a[ro] for a in (recv_rows, r_src, r_tag, r_nb, r_done, r_dst, r_comm))

    match_of_send, recv_matched = _pair_messages(s_src, s_dst, s_comm, s_tag, r_src, r_dst,
                                                 r_comm, r_tag, nranks)
    del s_comm, s_tag, r_comm

    um_s = send_rows[match_of_send < 0]
    um_r = recv_rows[~recv_matched]
    # Partner ranks: a Recv "from 0"; a Send "to 1".
    recv_src_of_row = dict()
    if len(um_r):
        recv_src_of_row = dict(zip(recv_rows[~recv_matched].tolist(),
                                   zip(r_src[~recv_matched].tolist(),
                                       r_tag[~recv_matched].tolist())))
    problem(um_r, lambda r: f"{name(r)} from {recv_src_of_row[r][0]} tag {recv_src_of_row[r][1]} "
                            f"comm {comm[r]} has no matching send")
    problem(um_s, lambda r: f"{name(r)} to {peer[r]} tag {tag[r]} comm {comm[r]} "
                            "has no matching receive")

    m_src, m_dst, m_nb, m_send, m_sdone, m_recv, m_rdone, too_big = _matched(
        match_of_send, send_rows, recv_rows, s_src, s_dst, s_done, r_nb, r_done, nbytes)
    too_big = np.flatnonzero(too_big)
    if len(too_big):
        rnb = r_nb[match_of_send[match_of_send >= 0]]
        bad = dict(zip(m_recv[too_big].tolist(), too_big.tolist()))
        problem(m_recv[too_big], lambda r: (
            f"{name(r)} from {rank[m_send[bad[r]]]} tag {tag[m_send[bad[r]]]} comm {comm[r]} "
            f"receives {rnb[bad[r]]} bytes but the matching {name(m_send[bad[r]])} "
            f"(rank {rank[m_send[bad[r]]]} seq {seq[m_send[bad[r]]]}) sent "
            f"{nbytes[m_send[bad[r]]]}"))

    match = MessageMatch(
        src=m_src, dst=m_dst, nbytes=m_nb,
        send_row=m_send, send_done_row=m_sdone, recv_row=m_recv, recv_done_row=m_rdone,
        unmatched_send_rows=um_s, unmatched_recv_rows=um_r,
        completion_row=completion_row, completion_post_row=completion_post_row,
        free_row=free_row, free_post_row=free_post_row)
    issues.sort()
    lines = [f"rank {rank[r]} seq {seq[r]}: {text}" for r, text in issues]
    if counts["n"] > len(lines):
        lines.append(f"... and {counts['n'] - len(lines)} more problems")
    return match, lines
