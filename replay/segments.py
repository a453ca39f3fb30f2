"""A trace cut into segments where nothing is in flight, read a window at a time: the input of a
streamed replay or check (``replay.streamed``), for traces larger than memory.

A *segment* is, per rank, the next consecutive run of its rows. The cut after it is
*consistent*: every message has its send, its receive and the rows completing both on the same
side of it; every collective instance has all its members' rows (and their completions) on one
side; a request's post and completion, the rows of one call (a Waitall's rows, a Sendrecv's two
halves), a Probe and the receive it announces, and a region row and the MPI row after it (its
burst) stay together. Then the segment is a trace of its own: matched alone it pairs exactly the
messages the whole trace pairs (each channel's sends and receives before the cut are equally
many, and MPI's matching is first-come first-served per channel), and replaying it from where
the segment before ended gives the times the whole replay gives (``replay_kernel``'s carry).

How a cut is found: each rank's next ``window`` rows are read (``hindsight.trace.windows``) and
prepared as a partial trace. Every thing that is incomplete inside the window (a send whose
receive is not read yet, a collective missing a member, a request not completed yet, and the
last call of each rank whose window ended) is *out*; a thing with one row out is out entirely,
and a rank's cut moves before its first row that is out (``_settle_cuts``, linear in the
window). Rows after the cut stay for the next window. When no rank can advance (one thing spans
more than the window: an Irecv posted at the start and completed at the end), the window doubles
for that round: memory is bounded by the longest stretch of the trace without a consistent cut.

Rule ``carried_message``: an eager message (at most ``eager_limit`` bytes, not synchronous-mode)
may cross a cut, its send side before and its receive side after: its send completes without
its receiver, so nothing before the cut depends on what comes after. The segment of the send
gets a receive standing in for the later one (appended to the receiver's rows); each later
window starts with a send standing in for it (at the head of the sender's rows), until the
segment that receives it. ``replay.streamed`` replays stand-ins as nothing and gives the message
the post time its send had.

One-sided communication (window data operations and their epochs) is not segmented: a trace
with it is refused here and replayed in memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from hindsight import sortedsets
from hindsight import trace as tf
from hindsight.jit import njit
from hindsight.trace.windows import RankBatches
from replay import kernel as K
from replay.errors import ReplayError

#: one-sided rows: their epochs are not cut by this module (a streamed replay refuses them)
_ONE_SIDED = tf.op_lut(tuple(tf.RMA_OPS | tf.RMA_LOCK_OPS | tf.RMA_PSCW_OPS))
#: rows glued to the row after them: a region row (op 0, its burst's name) and a Probe
_GLUE_NEXT = tf.op_lut(("Probe",))
_GLUE_NEXT[0] = True
#: synchronous-mode sends: complete only once received, so they never cross a cut
_SYNC = tf.op_lut(("Ssend", "Issend"))
#: rows that post a request (completed by a Wait*/Test* row with the same request id)
_POSTS = tf.op_lut(tuple(tf.NONBLOCKING_SEND_OPS | {"Irecv"} | tf.NONBLOCKING_COLLECTIVE_OPS))


class NotStreamable(ReplayError):
    """A trace this module cannot cut (one-sided communication): replay or check it in memory."""


@dataclass
class Segment:
    """One segment: its rows as ``Columns`` (all ranks, (rank, seq) order), the trace's first
    event ``t0``, where each rank's first burst begins (``since``: the end of its MPI rows
    before, or ``t0``), and whether it is the trace's last. ``stand_in`` marks the rows that
    stand for rows of other segments (rule ``carried_message``): a send of an earlier segment
    received in this one (at the head of its rank's rows), or a receive, in a later segment,
    of a send of this one (``later``, at the end of its rank's rows)."""

    cols: tf.Columns
    t0: int
    since: np.ndarray
    last: bool
    stand_in: np.ndarray
    later: np.ndarray
    done: np.ndarray | None = None     # per rank: its last row is in this segment


class _Pending:
    """Per rank, the rows read and not yet given to a segment (a list of batches)."""

    def __init__(self, reader: RankBatches, nranks: int):
        self.reader = reader
        self.parts: list[list[dict[str, np.ndarray]]] = [[] for _ in range(nranks)]
        self.count = np.zeros(nranks, np.int64)
        self.eof = np.zeros(nranks, np.bool_)
        self.last_seq = np.full(nranks, np.iinfo(np.int64).min, np.int64)

    def fill(self, r: int, want: int) -> None:
        """Read rank r's batches until it has ``want`` rows pending or none are left. Its rows
        must come in seq order (as hindsight writes them): a segment is a run of consecutive
        rows."""
        while self.count[r] < want and not self.eof[r]:
            b = self.reader.next(r)
            if b is None:
                self.eof[r] = True
            elif len(b["rank"]):
                s = b["seq"]
                if s[0] <= self.last_seq[r] or (len(s) > 1 and (np.diff(s) <= 0).any()):
                    raise ReplayError(f"{self.reader.path / tf.rank_file_name(r)}: rows are not "
                                      "in seq order; a streamed replay reads each rank in file "
                                      "order (replay it in memory)")
                self.last_seq[r] = s[-1]
                self.parts[r].append(b)
                self.count[r] += len(b["rank"])

    def _joined(self, r: int) -> dict[str, np.ndarray] | None:
        """Rank r's pending rows as one array per column (joined once, so later heads and
        drops slice it); None when it has none."""
        if not self.parts[r]:
            return None
        if len(self.parts[r]) > 1:
            cols = self.reader.columns
            self.parts[r] = [{c: np.concatenate([p[c] for p in self.parts[r]]) for c in cols}]
        return self.parts[r][0]

    def head(self, r: int, n: int) -> dict[str, np.ndarray]:
        """Rank r's first n pending rows (one array per column)."""
        rows = self._joined(r)
        if rows is None:
            return _empty(self.reader.columns)
        return {c: a[:n] for c, a in rows.items()}

    def drop(self, r: int, n: int) -> None:
        """Rank r's first n pending rows went into a segment."""
        if n:
            self.parts[r] = [{c: a[n:].copy() for c, a in self._joined(r).items()}]
            self.count[r] -= n
            if self.count[r] == 0:
                self.parts[r] = []


def segments(trace_dir: Path | str, window: int, eager_limit: float = -1.0,
             crossing: str = "eager", max_window: int | None = None) -> Iterator[Segment]:
    """The segments of a complete trace, reading at most about ``window`` rows of each rank at a
    time (more where a stretch without a consistent cut is longer). A message of at most
    ``eager_limit`` bytes, not synchronous-mode, may cross a cut (rule ``carried_message``); with
    ``crossing="all"`` any message may (a check, which replays nothing). A window grown past
    ``max_window`` rows per rank without a cut (the memory there is) is a ``ReplayError``. Raises
    ``TraceError`` (unreadable) or ``ReplayError`` (one-sided communication; a thing that can
    never complete, found at the trace's end: the problems of the whole trace's
    preparation)."""
    reader = RankBatches(trace_dir, batch_rows=min(max(window, 1024), 1 << 16))
    P = len(reader.sources)
    pend = _Pending(reader, P)
    since = np.full(P, np.iinfo(np.int64).min, np.int64)
    t0 = None
    want = max(int(window), 2)
    carried = _empty(reader.columns)      # sends crossing the cuts so far, not yet received
    finished = np.zeros(P, np.bool_)
    while True:
        for r in range(P):
            pend.fill(r, want)
        heads = [pend.head(r, min(int(pend.count[r]), want)) for r in range(P)]
        n_real = np.array([len(h["rank"]) for h in heads], np.int64)
        if n_real.sum() == 0 and not len(carried["rank"]):
            return
        if t0 is None:
            t0 = _first_event(reader)
            since[:] = t0
        ghosts = _as_sends(carried)
        g_of = np.bincount(ghosts["rank"], minlength=P).astype(np.int64)
        win, win_ghost = _join(ghosts, heads, g_of, reader.columns)
        n_of = g_of + n_real
        if _ONE_SIDED[win["op"]].any():
            raise NotStreamable(f"{trace_dir}: one-sided communication (window data operations "
                                "and epochs) is not streamed: replay or check this trace in "
                                "memory (without --window)")
        everything = bool(np.all(pend.eof & (pend.count == n_real)))
        cols = tf.Columns(reader.path, reader.manifest, win, reader.region_names,
                          reader.sources)
        crossed = np.zeros(0, np.int64)
        cut = n_of
        if not everything:
            cut, crossed = _cuts(cols, n_of, g_of, pend.eof & (pend.count == n_real), P,
                                 math.inf if crossing == "all" else eager_limit,
                                 crossing == "all")
            if (cut <= g_of).all():
                want *= 2                 # one thing spans the window: read further, once
                if max_window is not None and want > max_window:
                    raise ReplayError(
                        f"{trace_dir}: no consistent cut within {want // 2} rows of each rank "
                        f"from seq {_first_seqs(heads)}: a request, a collective or a message "
                        "that may not cross a cut stays in flight longer (docs/replay.md, "
                        "\"Streamed replay and check\"); the trace cannot be streamed in the "
                        "memory there is")
                continue
        keep = _rows_before(n_of, cut)
        carried = {c: a[crossed] for c, a in win.items()}
        seg = {c: a[keep] for c, a in win.items()}
        ghost = win_ghost[keep]
        seg_since = since.copy()
        real = ~ghost
        mpi = real & (seg["op"] > 0)
        np.maximum.at(since, seg["rank"][mpi], seg["t_end"][mpi])
        seg, ghost, gone = _with_receives(seg, ghost, carried, P)
        assert (cut >= g_of).all(), "a carried send went out of its window"
        for r in range(P):
            pend.drop(r, int(cut[r] - g_of[r]))
        done = pend.eof & (pend.count == 0) & ~finished
        finished |= done
        # the window's copies go before the segment is replayed: only its own rows stay
        del win, heads, cols, keep, win_ghost, ghosts
        segment = Segment(tf.Columns(reader.path, reader.manifest, seg, reader.region_names,
                                     reader.sources), t0, seg_since, everything, ghost, gone, done)
        del seg
        yield segment
        del segment
        if everything:
            return
        want = max(int(window), 2)


def _first_seqs(heads: list[dict[str, np.ndarray]]) -> str:
    """Where each rank's window began, for a message: the seq of rank 0's first row, or of
    several ranks' when they differ."""
    firsts = {r: int(h["seq"][0]) for r, h in enumerate(heads) if len(h["seq"])}
    if len(set(firsts.values())) == 1:
        return str(next(iter(firsts.values())))
    return ", ".join(f"{s} (rank {r})" for r, s in list(firsts.items())[:4]) + \
        (", ..." if len(firsts) > 4 else "")


def _empty(columns: list[str]) -> dict[str, np.ndarray]:
    return {c: np.zeros(0, tf.column_dtype(c)) for c in columns}


def _as_sends(rows: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Carried sends as the rows that stand for them at the head of their rank's next window
    (rule ``carried_message``): blocking ``Send`` rows (a request they had was completed before
    the cut), with their recorded times (the measured model's lags read them; they end before
    the rank's next rows begin, so they add no burst)."""
    out = {c: a.copy() for c, a in rows.items()}
    out["op"][:] = tf.OP_CODE["Send"]
    out["request"][:] = -1
    out["region"][:] = -1
    return out


def _join(ghosts: dict[str, np.ndarray], heads: list[dict[str, np.ndarray]], g_of: np.ndarray,
          columns: list[str]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Each rank's carried sends (in their order), then its window's rows; and the mask of the
    carried ones."""
    goff = np.concatenate([[0], np.cumsum(g_of)])
    out = {}
    for c in columns:
        parts = []
        for r in range(len(heads)):
            parts.append(ghosts[c][goff[r]:goff[r + 1]])
            parts.append(heads[r][c])
        out[c] = np.concatenate(parts) if parts else np.zeros(0, tf.column_dtype(c))
    mask = np.concatenate([np.repeat([True, False], [g, len(h["rank"])])
                           for g, h in zip(g_of, heads)]) if heads else np.zeros(0, np.bool_)
    return out, mask


def _with_receives(seg: dict[str, np.ndarray], ghost: np.ndarray,
                   crossing: dict[str, np.ndarray], P: int):
    """The segment's rows with a receive standing for each send that crosses its cut, appended
    to the receiver's rows (rule ``carried_message``): a blocking ``Recv`` of the send's size,
    source, tag and communicator, taking no time at the receiver's last row. Returns the rows,
    the mask of the rows that stand for others, and that of the appended receives."""
    n = len(crossing["rank"])
    if n == 0:
        return seg, ghost, np.zeros(len(ghost), np.bool_)
    recv = {c: a.copy() for c, a in crossing.items()}
    dst, src = crossing["peer"].copy(), crossing["rank"].copy()
    recv["rank"][:] = dst
    recv["peer"][:] = src
    recv["op"][:] = tf.OP_CODE["Recv"]
    recv["request"][:] = -1
    recv["cpu_ns"][:] = -1
    recv["region"][:] = -1
    last_t = np.full(P, np.iinfo(np.int64).min, np.int64)
    last_seq = np.full(P, -1, np.int64)
    np.maximum.at(last_t, seg["rank"], seg["t_end"])
    np.maximum.at(last_seq, seg["rank"], seg["seq"])
    recv["t_start"][:] = np.maximum(last_t[dst], 0)
    recv["t_end"][:] = recv["t_start"]
    order = np.argsort(dst, kind="stable")        # the sends' order within each receiver
    recv = {c: a[order] for c, a in recv.items()}
    rank_d = recv["rank"]
    first = np.searchsorted(rank_d, rank_d)
    recv["seq"][:] = last_seq[rank_d] + 1 + (np.arange(n) - first)
    allrows = {c: np.concatenate([seg[c], recv[c]]) for c in seg}
    order = np.lexsort((allrows["seq"], allrows["rank"]))
    allrows = {c: a[order] for c, a in allrows.items()}
    added = np.concatenate([np.zeros(len(ghost), np.bool_), np.ones(n, np.bool_)])[order]
    ghost = np.concatenate([ghost, np.ones(n, np.bool_)])[order]
    return allrows, ghost, added


def _first_event(reader: RankBatches) -> int:
    """The trace's first event (the smallest ``t_start`` of any row, as ``prepare`` takes it;
    a region row, written when its region ends, may hold it at the end of its file): from the
    footers' statistics, else by reading that column of the files without them."""
    lo = None
    unknown = []
    for src in reader.sources:
        for path in src.files:
            m = _footer_min(path, "t_start")
            if m is None:
                unknown.append(src.rank)
            else:
                lo = m if lo is None else min(lo, m)
    if unknown:
        one = RankBatches(reader.path, ["t_start"])
        for r in sorted(set(unknown)):
            while (b := one.next(r)) is not None:
                if len(b["t_start"]):
                    m = int(b["t_start"].min())
                    lo = m if lo is None else min(lo, m)
    return 0 if lo is None else lo


def _footer_min(path: Path, column: str) -> int | None:
    """The smallest value of ``column`` in a Parquet file by its footer's statistics (None
    where a row group has none)."""
    import pyarrow.parquet as pq

    try:
        md = pq.read_metadata(path)
        ix = md.schema.names.index(column)
        stats = [md.row_group(g).column(ix).statistics for g in range(md.num_row_groups)]
    except (OSError, ValueError):
        return None
    if not stats or any(st is None or not st.has_min_max for st in stats):
        return None
    return min(int(st.min) for st in stats)


def _rows_before(n_of: np.ndarray, cut: np.ndarray) -> np.ndarray:
    """Mask of the window's rows (ranks one after another, ``n_of`` each) before each rank's
    cut."""
    off = np.concatenate([[0], np.cumsum(n_of)])
    pos = np.arange(off[-1]) - np.repeat(off[:-1], n_of)
    return pos < np.repeat(cut, n_of)


def _cuts(cols: tf.Columns, n_of: np.ndarray, g_of: np.ndarray, ended: np.ndarray, P: int,
          eager_limit: float, sync_too: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Per rank, how many of its window's rows lie before a consistent cut (``ended``: the
    rank's window holds the rest of its rows, so nothing of it is cut for lack of rows; the
    first ``g_of`` rows of each rank are sends carried from before, never cut); and the rows of
    the sends kept before the cut whose receive is after it (rule ``carried_message``)."""
    from replay.prepare import prepare_rows      # (prepare reads whole traces: loaded here)

    prep, match = prepare_rows(cols, True, max_problems=0)
    rows, msgs, coll = prep.rows, prep.msgs, prep.coll
    del prep                      # (its other arrays go: the window is this step's memory)
    n = len(rows.rank)
    off = np.concatenate([[0], np.cumsum(n_of)]).astype(np.int64)
    op = rows.op
    # row and item numbers in int32 where they fit: the pairs below are most of this memory
    ix = np.int32 if 4 * (n + len(msgs.send_row)) + len(coll.rows) < 2**31 - 1 else np.int64
    ids, members, broken = [], [], []
    # messages: a send side (the send, its completion) and a receive side (the receive, its
    # completion, a probe of it): a message may cross the cut, send before and receive after,
    # when it is eager (its send completes without the receiver); otherwise both sides are one
    nm = len(msgs.send_row)
    sync = _SYNC & (not sync_too)
    crosses = (msgs.bytes <= eager_limit) & ~sync[op[msgs.send_row]] if nm else \
        np.zeros(0, np.bool_)
    r_id = np.where(crosses, np.arange(nm, dtype=ix) + nm, np.arange(nm, dtype=ix))
    sides = np.stack([msgs.send_row, msgs.send_done, msgs.recv_row, msgs.recv_done]
                     ).astype(ix)
    side_id = np.stack([np.arange(nm, dtype=ix), np.arange(nm, dtype=ix), r_id, r_id])
    ok = sides >= 0
    ids.append(side_id[ok])
    members.append(sides[ok])
    # a freed request's side ends at its post: nothing completes it (Request_free)
    freed_s = np.isin(msgs.send_row, match.free_post_row)
    freed_r = np.isin(msgs.recv_row, match.free_post_row)
    broken += [np.flatnonzero((sides[1] < 0) & ~freed_s),
               r_id[(sides[2] < 0) | ((sides[3] < 0) & ~freed_r)]]
    has = np.flatnonzero(rows.msg >= 0)     # completions and probes join their side
    m_of = rows.msg[has].astype(ix)
    send_side = np.isin(rows.kind[has], (K.SEND, K.ISEND, K.WSEND))
    ids.append(np.where(send_side, m_of, r_id[m_of]))
    members.append(has.astype(ix))
    nid = 2 * nm
    imp_from = [np.flatnonzero(crosses)]       # a send side out takes its receive side out
    imp_to = [r_id[crosses]]
    # requests: a post and its completion (also those of no message: a PROC_NULL peer)
    ended_post = np.concatenate([match.completion_post_row, match.free_post_row])
    ended_row = np.concatenate([match.completion_row, match.free_row])
    nq = len(ended_row)
    if nq:
        q = np.arange(nq, dtype=ix) + nid
        ids += [q, q]
        members += [ended_post.astype(ix), ended_row.astype(ix)]
        nid += nq
    # collective instances: all members and their completions
    nc = len(coll.comm)
    if nc:
        per = np.diff(coll.off)
        inst = np.repeat(np.arange(nc), per)
        short = per < coll.size
        done_missing = np.zeros(nc, np.bool_)
        np.logical_or.at(done_missing, inst, coll.done < 0)
        broken.append(np.flatnonzero(short | done_missing) + nid)
        ids += [(inst + nid).astype(ix), (inst[coll.done >= 0] + nid).astype(ix)]
        members += [coll.rows.astype(ix), coll.done[coll.done >= 0].astype(ix)]
        nid += nc
    # sends whose receive is beyond the window: they may cross if eager, else they are out
    um_s = match.unmatched_send_rows.astype(ix)
    um_nb = cols.arrays["nbytes"][um_s]
    um_cross = ((um_nb >= 0) | sync_too) & (um_nb <= eager_limit) & ~sync[op[um_s]]
    ids.append(np.arange(len(um_s), dtype=ix) + nid)
    members.append(um_s)
    broken.append(np.flatnonzero(~um_cross) + nid)
    um_id = np.arange(len(um_s), dtype=np.int64) + nid
    nid += len(um_s)
    # receives whose send is not read yet, requests not completed in the window: out
    alone = [match.unmatched_recv_rows]
    posts = np.flatnonzero(_POSTS[op] & (cols.arrays["request"] >= 0))
    alone.append(sortedsets.setdiff(posts, ended_post))
    alone = sortedsets.unique(np.concatenate(alone).astype(ix))
    ids.append(np.arange(len(alone), dtype=ix) + nid)
    members.append(alone)
    broken.append(np.arange(len(alone), dtype=np.int64) + nid)
    nid += len(alone)
    ids = np.concatenate(ids).astype(ix, copy=False)
    members = np.concatenate(members).astype(ix, copy=False)
    del sides, side_id, has, m_of
    broken = np.concatenate(broken).astype(np.int64)
    # rows of one call, and glued rows, form groups: a cut never falls inside one
    glue = np.zeros(n, np.bool_)
    if n:
        glue[1:] = rows.cont[1:] | _GLUE_NEXT[op[:-1]]
        glue[off[:-1][n_of > 0]] = False     # a rank's first row starts a group
    start = np.where(~glue, np.arange(n), 0)
    np.maximum.accumulate(start, out=start)
    cut = n_of.copy()
    for r in range(P):                        # a window that ended early: its last call is out
        if not ended[r] and n_of[r] > g_of[r]:
            cut[r] = max(start[off[r + 1] - 1] - off[r], g_of[r])
    imp_from = np.concatenate(imp_from).astype(np.int64)
    imp_to = np.concatenate(imp_to).astype(np.int64)
    item_rows, item_off = _csr(ids, members, nid)
    row_items, row_off = _csr(members, ids, n)
    imp_items, imp_off = _csr(imp_from, imp_to, nid)
    out = _settle_cuts(cut, off, rows.rank, start, item_rows, item_off,
                       row_items, row_off, imp_items, imp_off, broken)
    crossing = np.concatenate([msgs.send_row[crosses & ~out[:nm] & out[r_id]],
                               um_s[um_cross & ~out[um_id]]]).astype(np.int64)
    return cut, np.sort(crossing)


def _csr(key: np.ndarray, value: np.ndarray, nkeys: int) -> tuple[np.ndarray, np.ndarray]:
    """``value`` grouped by ``key`` (0..nkeys-1), in their order within a key: (values in key
    order, offsets)."""
    return _group(key, value, nkeys)


@njit(cache=True)
def _group(key, value, nkeys):
    """A counting sort of ``value`` by ``key``: linear (a comparison sort of the window's
    pairs took half the time of cutting it)."""
    off = np.zeros(nkeys + 1, np.int64)
    for k in key:
        off[k + 1] += 1
    for k in range(nkeys):
        off[k + 1] += off[k]
    fill = off[:-1].copy()
    out = np.empty(len(value), value.dtype)
    for j in range(len(key)):
        out[fill[key[j]]] = value[j]
        fill[key[j]] += 1
    return out, off


@njit(inline="always")
def _push(it, out, stack, top):
    """Item ``it`` is out: on the stack once. Returns the new stack top."""
    if not out[it]:
        out[it] = True
        stack[top] = it
        top += 1
    return top


@njit(cache=True)
def _settle_cuts(cut, off, rank, start, item_rows, item_off, row_items, row_off, imp_items,
                 imp_off, broken):
    """Move each rank's cut (rows before it: ``off[r]:off[r] + cut[r]``) back until no item has
    rows on both sides: an item with a row at or after its rank's cut is out, and so are all
    its rows and the items it implies (``imp_items[imp_off[i]:imp_off[i+1]]``: a message's
    send side implies its receive side). Each row is passed over once as a cut moves back over
    it: linear. Returns which items are out."""
    nitems = len(item_off) - 1
    out = np.zeros(nitems, np.bool_)
    stack = np.empty(nitems + 1, np.int64)
    top = 0
    for k in range(len(broken)):
        top = _push(broken[k], out, stack, top)
    # rows already beyond each rank's first cut (the ended window's last call) are out
    for r in range(len(cut)):
        for row in range(off[r] + cut[r], off[r + 1]):
            for j in range(row_off[row], row_off[row + 1]):
                top = _push(row_items[j], out, stack, top)
    while top > 0:
        top -= 1
        it = stack[top]
        for j in range(imp_off[it], imp_off[it + 1]):
            top = _push(imp_items[j], out, stack, top)
        for j in range(item_off[it], item_off[it + 1]):
            row = item_rows[j]
            r = rank[row]
            if row - off[r] >= cut[r]:
                continue
            new = start[row] - off[r]
            for x in range(off[r] + new, off[r] + cut[r]):
                for q in range(row_off[x], row_off[x + 1]):
                    top = _push(row_items[q], out, stack, top)
            cut[r] = new
    return out
