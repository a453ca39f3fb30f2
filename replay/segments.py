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

One-sided communication (window data operations and their epochs) is not segmented: a trace
with it is refused here and replayed in memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numba as nb
import numpy as np

from hindsight import trace as tf
from hindsight.trace.windows import RankBatches
from replay.errors import ReplayError

#: one-sided rows: their epochs are not cut by this module (a streamed replay refuses them)
_ONE_SIDED = tf.op_lut(tuple(tf.RMA_OPS | tf.RMA_LOCK_OPS | tf.RMA_PSCW_OPS))
#: rows glued to the row after them: a region row (op 0, its burst's name) and a Probe
_GLUE_NEXT = tf.op_lut(("Probe",))
_GLUE_NEXT[0] = True
#: rows that post a request (completed by a Wait*/Test* row with the same request id)
_POSTS = tf.op_lut(tuple(tf.NONBLOCKING_SEND_OPS | {"Irecv"} | tf.NONBLOCKING_COLLECTIVE_OPS))


@dataclass
class Segment:
    """One segment: its rows as ``Columns`` (all ranks, (rank, seq) order), the trace's first
    event ``t0``, where each rank's first burst begins (``since``: the end of its MPI rows
    before, or ``t0``), and whether it is the trace's last."""

    cols: tf.Columns
    t0: int
    since: np.ndarray
    last: bool


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

    def head(self, r: int, n: int) -> dict[str, np.ndarray]:
        """Rank r's first n pending rows (one array per column)."""
        cols = self.reader.columns
        if not self.parts[r]:
            return {c: np.zeros(0, tf.column_dtype(c)) for c in cols}
        if len(self.parts[r]) > 1:        # joined once, so later heads and drops slice it
            self.parts[r] = [{c: np.concatenate([p[c] for p in self.parts[r]]) for c in cols}]
        return {c: a[:n] for c, a in self.parts[r][0].items()}

    def drop(self, r: int, n: int) -> None:
        if n:
            self.head(r, 0)
            self.parts[r] = [{c: a[n:].copy() for c, a in self.parts[r][0].items()}]
            self.count[r] -= n
            if self.count[r] == 0:
                self.parts[r] = []


def segments(trace_dir: Path | str, window: int) -> Iterator[Segment]:
    """The segments of a complete trace, reading at most about ``window`` rows of each rank at a
    time (more where a stretch without a consistent cut is longer). Raises ``TraceError``
    (unreadable) or ``ReplayError`` (one-sided communication; a thing that can never complete,
    found at the trace's end: the problems of the whole trace's preparation)."""
    reader = RankBatches(trace_dir, batch_rows=min(max(window, 1024), 1 << 16))
    P = len(reader.sources)
    pend = _Pending(reader, P)
    since = np.full(P, np.iinfo(np.int64).min, np.int64)
    t0 = None
    want = max(int(window), 2)
    while True:
        for r in range(P):
            pend.fill(r, want)
        heads = [pend.head(r, min(int(pend.count[r]), want)) for r in range(P)]
        n_of = np.array([len(h["rank"]) for h in heads], np.int64)
        if n_of.sum() == 0:
            return
        win = {c: np.concatenate([h[c] for h in heads]) for c in reader.columns}
        if _ONE_SIDED[win["op"]].any():
            raise ReplayError(f"{trace_dir}: one-sided communication (window data operations "
                              "and epochs) is not streamed: replay this trace in memory")
        if t0 is None:
            t0 = _first_event(reader)
            since[:] = t0
        everything = bool(np.all(pend.eof & (pend.count == n_of)))
        cols = tf.Columns(reader.path, reader.manifest, win, reader.region_names,
                          reader.sources)
        if everything:
            cut = n_of
        else:
            cut = _cuts(cols, n_of, pend.eof & (pend.count == n_of), P)
            if cut.sum() == 0:
                want *= 2                 # one thing spans the window: read further, once
                continue
            if not np.array_equal(cut, n_of):
                keep = _rows_before(n_of, cut)
                win = {c: a[keep] for c, a in win.items()}
                cols = tf.Columns(reader.path, reader.manifest, win, reader.region_names,
                                  reader.sources)
        seg_since = since.copy()
        if len(win["rank"]):
            mpi = win["op"] > 0
            np.maximum.at(since, win["rank"][mpi], win["t_end"][mpi])
        for r in range(P):
            pend.drop(r, int(cut[r]))
        yield Segment(cols, t0, seg_since, everything)
        if everything:
            return
        want = max(int(window), 2)


def _first_event(reader: RankBatches) -> int:
    """The trace's first event (the smallest ``t_start`` of any row, as ``prepare`` takes it):
    from the footers' statistics, else read column by column."""
    import pyarrow.parquet as pq

    lo = None
    for src in reader.sources:
        for path in src.files:
            try:
                md = pq.read_metadata(path) if src.staged is None else None
            except Exception:
                md = None
            got = None
            if md is not None:
                ix = md.schema.names.index("t_start")
                mins = []
                for g in range(md.num_row_groups):
                    st = md.row_group(g).column(ix).statistics
                    if st is None or not st.has_min_max:
                        mins = None
                        break
                    mins.append(int(st.min))
                got = min(mins) if mins else None
            if got is None:
                one = RankBatches(reader.path, ["t_start"], allow_partial=True)
                while (b := one.next(src.rank)) is not None:
                    if len(b["t_start"]):
                        m = int(b["t_start"].min())
                        got = m if got is None else min(got, m)
            if got is not None:
                lo = got if lo is None else min(lo, got)
    return 0 if lo is None else lo


def _rows_before(n_of: np.ndarray, cut: np.ndarray) -> np.ndarray:
    """Mask of the window's rows (ranks one after another, ``n_of`` each) before each rank's
    cut."""
    off = np.concatenate([[0], np.cumsum(n_of)])
    pos = np.arange(off[-1]) - np.repeat(off[:-1], n_of)
    return pos < np.repeat(cut, n_of)


def _cuts(cols: tf.Columns, n_of: np.ndarray, ended: np.ndarray, P: int) -> np.ndarray:
    """Per rank, how many of its window's rows lie before a consistent cut (``ended``: the
    rank's window holds the rest of its rows, so nothing of it is cut for lack of rows)."""
    from replay.prepare import prepare_rows      # (prepare reads whole traces: loaded here)

    prep, match = prepare_rows(cols, True, max_problems=0)
    rows, msgs, coll = prep.rows, prep.msgs, prep.coll
    n = prep.nrows
    off = np.concatenate([[0], np.cumsum(n_of)]).astype(np.int64)
    op = rows.op
    # the rows each thing joins: items as (item id, row) pairs, then grouped
    ids, members, broken = [], [], []
    nid = 0
    # messages: send, receive and their completions (-1 where not in the window: broken)
    nm = len(msgs.send_row)
    if nm:
        four = np.stack([msgs.send_row, msgs.recv_row, msgs.send_done, msgs.recv_done]
                        ).astype(np.int64)
        broken.append(np.flatnonzero((four < 0).any(axis=0)) + nid)
        ok = four >= 0
        ids.append(np.broadcast_to(np.arange(nm) + nid, four.shape)[ok])
        members.append(four[ok])
        nid += nm
    # rows that name a message (completions, probes) join it
    has = np.flatnonzero(rows.msg >= 0)
    ids.append(rows.msg[has].astype(np.int64))
    members.append(has.astype(np.int64))
    # requests: a post and its completion (also those of no message: a PROC_NULL peer)
    nq = len(match.completion_row)
    if nq:
        q = np.arange(nq, dtype=np.int64) + nid
        ids += [q, q]
        members += [match.completion_post_row.astype(np.int64),
                    match.completion_row.astype(np.int64)]
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
        ids += [inst + nid, inst[coll.done >= 0] + nid]
        members += [coll.rows.astype(np.int64), coll.done[coll.done >= 0].astype(np.int64)]
        nid += nc
    # unmatched sends and receives, requests never completed in the window: broken alone
    alone = [match.unmatched_send_rows, match.unmatched_recv_rows]
    posts = np.flatnonzero(_POSTS[op] & (cols.arrays["request"] >= 0))
    alone.append(np.setdiff1d(posts, match.completion_post_row))
    alone = np.unique(np.concatenate(alone).astype(np.int64))
    ids.append(np.arange(len(alone), dtype=np.int64) + nid)
    members.append(alone)
    broken.append(np.arange(len(alone), dtype=np.int64) + nid)
    nid += len(alone)
    ids = np.concatenate(ids)
    members = np.concatenate(members)
    broken = np.concatenate(broken) if broken else np.zeros(0, np.int64)
    # rows of one call, and glued rows, form groups: a cut never falls inside one
    glue = np.zeros(n, np.bool_)
    if n:
        glue[1:] = rows.cont[1:] | _GLUE_NEXT[op[:-1]]
        glue[off[:-1][n_of > 0]] = False     # a rank's first row starts a group
    start = np.where(~glue, np.arange(n), 0)
    np.maximum.accumulate(start, out=start)
    cut = n_of.copy()
    for r in range(P):                        # a window that ended early: its last call is out
        if not ended[r] and n_of[r]:
            cut[r] = start[off[r + 1] - 1] - off[r]
    order = np.argsort(ids, kind="stable")
    item_rows = members[order]
    item_off = np.searchsorted(ids[order], np.arange(nid + 1))
    row_order = np.argsort(members, kind="stable")
    row_items = ids[row_order]
    row_off = np.searchsorted(members[row_order], np.arange(n + 1))
    _settle_cuts(cut, off, rows.rank.astype(np.int64), start, item_rows, item_off, row_items,
                 row_off, broken.astype(np.int64))
    return cut


@nb.njit(cache=True)
def _settle_cuts(cut, off, rank, start, item_rows, item_off, row_items, row_off, broken):
    """Move each rank's cut (rows before it: ``off[r]:off[r] + cut[r]``) back until no item has
    rows on both sides: an item with a row at or after its rank's cut is out, and so are all
    its rows. Each row is passed over once as a cut moves back over it: linear."""
    nitems = len(item_off) - 1
    out = np.zeros(nitems, np.bool_)
    stack = np.empty(nitems + 1, np.int64)
    top = 0
    for k in range(len(broken)):
        if not out[broken[k]]:
            out[broken[k]] = True
            stack[top] = broken[k]
            top += 1
    # rows already beyond each rank's first cut (the ended window's last call) are out
    for r in range(len(cut)):
        for row in range(off[r] + cut[r], off[r + 1]):
            for j in range(row_off[row], row_off[row + 1]):
                it = row_items[j]
                if not out[it]:
                    out[it] = True
                    stack[top] = it
                    top += 1
    while top > 0:
        top -= 1
        it = stack[top]
        for j in range(item_off[it], item_off[it + 1]):
            row = item_rows[j]
            r = rank[row]
            if row - off[r] >= cut[r]:
                continue
            new = start[row] - off[r]
            for x in range(off[r] + new, off[r] + cut[r]):
                for q in range(row_off[x], row_off[x + 1]):
                    it2 = row_items[q]
                    if not out[it2]:
                        out[it2] = True
                        stack[top] = it2
                        top += 1
            cut[r] = new
