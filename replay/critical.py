"""A replay's per-row times and critical path, from the kernel's per-operation times.

``row_times`` maps each operation's replayed start and end back to its trace row (a call's rows
start and end together; rows without operations, regions, through the rank's time warp);
``critical_path_of`` walks back from the last rank's end through what bound each operation's
end (``pred``: the rank's own previous operation, or another rank's post) and shares the
makespan out among the ranks and rows on that path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from hindsight import trace as tf
from hindsight.jit import njit
from replay.rules import PRED_COLL, PRED_RECV, PRED_SEND
from replay.warp import join_call_rows, time_warp

if TYPE_CHECKING:
    from replay import kernel as K
    from replay.prepare import Prepared
    from replay.stream import Stream


@njit(cache=True, nogil=True)
def rows_from_ops(op_row, op_start, op_end, row_start, row_end):
    """Per trace row: start of its first operation, end of its last (rows without ops untouched)."""
    for i in range(len(op_row)):
        rw = op_row[i]
        if rw < 0:
            continue
        s = op_start[i]
        e = op_end[i]
        if row_start[rw] < 0.0 or s < row_start[rw]:
            row_start[rw] = s
        if e > row_end[rw]:
            row_end[rw] = e


@njit(cache=True, nogil=True)
def critical_path(rank_off, msg, pred, m_send_op, m_recv_op, coll_last, last_rank, on_path,
                  order):
    """Walk back from the last operation of ``last_rank``; mark the operations that determine
    the makespan and write them to ``order`` in walk order (latest first). Returns how many.

    An operation's end is bound either locally (its own start, hence the previous operation of the
    same rank) or by another rank's post (``pred``): then the walk jumps to that post operation,
    whose own start is bound by its predecessor on its rank.
    """
    n = 0
    r = last_rank
    i = rank_off[r + 1] - 1
    follow = True
    while i >= rank_off[r] and i >= 0:
        on_path[i] = True
        order[n] = i
        n += 1
        j = -1
        if follow:
            p = pred[i]
            if p == PRED_SEND:
                j = m_send_op[msg[i]]
            elif p == PRED_RECV:
                j = m_recv_op[msg[i]]
            elif p == PRED_COLL:
                j = coll_last[msg[i]]
        if j >= 0 and j != i and not on_path[j]:
            # find j's rank
            lo = 0
            hi = len(rank_off) - 1
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if rank_off[mid] <= j:
                    lo = mid
                else:
                    hi = mid
            r = lo
            i = j
            follow = False
            continue
        follow = True
        i -= 1
    return n


def row_times(res: Any, prep: Prepared, st: Stream, out: K.Outputs) -> None:
    """Set ``res.row_start_ns`` and ``res.row_end_ns`` (``res``: the ``engine.Result``) from
    the operations' times."""
    n = prep.nrows
    rs = np.full(n, -1.0)
    re = np.full(n, -1.0)
    rows_from_ops(st.op_row, out.op_start, out.op_end, rs, re)
    rows = prep.rows
    # A call recorded as several rows starts where its first row starts, and all its rows end
    # together, when the last one does.
    join_call_rows(rows.cont, rs, re)
    # Rows without operations (regions): map measured times through the rank's time warp,
    # piecewise linear between the replayed ends of MPI calls.
    has = rs >= 0
    if not has.all():
        time_warp(tf.rank_offsets(rows.rank, prep.nranks), has, rows.t_start, rows.t_end,
                  prep.t0, rs, re, np.asarray(res.measured_rank_end_ns, float),
                  np.asarray(out.rank_end, float))
    res.row_start_ns = rs
    res.row_end_ns = np.maximum(re, rs, out=re)


def critical_path_of(res: Any, prep: Prepared, st: Stream, out: K.Outputs) -> None:
    """Set ``res.critical_rows`` and ``res.critical_rank_ns`` (each rank's share of the path)."""
    n = prep.nrows
    P = prep.nranks
    on = np.zeros(st.nops, bool)
    crit_rank = np.zeros(P)
    crit_rows = np.zeros(n, bool)
    if st.nops and P:
        last = int(np.argmax(out.rank_end))
        order = np.empty(st.nops, np.int64)
        npath = 0
        if st.rank_off[last + 1] > st.rank_off[last]:
            npath = critical_path(st.rank_off, st.msg, out.pred, st.m_send_op, st.m_recv_op,
                                    out.coll_last, last, on, order)
        if npath:
            # Each path operation owns the stretch of time from the end of the operation before
            # it on the path (or time 0) to its own end: the stretches tile [0, last end], so the
            # per-rank shares add up to the makespan instead of over-counting overlaps.
            path = order[:npath]
            # An operation counts only up to the end of the one that depended on it: a probe
            # waits for a blocking send's post, and that send may itself end later.
            ends = np.minimum.accumulate(out.op_end[path])
            earlier = np.append(ends[1:], 0.0)
            op_rank = np.searchsorted(st.rank_off, path, side="right") - 1
            np.add.at(crit_rank, op_rank, np.maximum(ends - earlier, 0.0))
            # ... and the last rank's computation after its last operation closes the makespan.
            crit_rank[last] += max(float(out.rank_end[last]) - float(ends[0]), 0.0)
            # the rows of the path's operations (those ``on`` marks): a gather of the path, not
            # a pass over every operation's row
            crit_rows[st.op_row[path]] = True
    res.critical_rows = crit_rows
    res.critical_rank_ns = crit_rank
