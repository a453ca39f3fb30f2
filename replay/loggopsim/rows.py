"""Per-row replayed times of a LogGOPSim replay: schedule operations back to trace rows."""

from __future__ import annotations

import numpy as np

from hindsight import trace as tf
from hindsight.jit import njit
from replay import kernel as K
from replay.loggopsim.goal import GoalError
from replay.loggopsim.schedule import TraceSchedule
from replay.loggopsim.simulator import CALC, RECV, Schedule, SimResult
from replay.prepare import Prepared
from replay.warp import join_call_rows, time_warp


def row_times(prep: Prepared, sched: Schedule, sim: SimResult,
              traced: TraceSchedule | None) -> tuple[np.ndarray, np.ndarray]:
    """Replayed (start, end) ns of every prepared row. ``traced`` is the schedule's mapping to the
    trace when ``schedule_from_trace`` made it, None when it is the trace's GOAL sidecar.

    Rows without an operation (regions, unmatched calls) follow the rank's time warp; the rows
    of one call (a Waitall's requests, a Sendrecv's halves) share its times."""
    if traced is not None:
        rs, re = _row_times_from_trace(prep, traced, sim)
    else:
        rs, re = _row_times_from_sidecar(prep, sched, sim)
    rs, re = _fill_rows(prep, rs, re, sim.rank_end)
    # every row has times now (>= 0): a call's rows take its first start and its latest end
    join_call_rows(np.asarray(prep.rows["cont"], bool), rs, re)
    return rs, np.maximum(re, rs, out=re)


def _row_times_from_trace(prep: Prepared, traced: TraceSchedule, sim: SimResult):
    """Per trace row: replayed start/end from the schedule operations that stand for it.

    A Wait (no operation of its own) ends when the operation it completes ended, and starts when
    the rank's previous operation in program order ended."""
    sched, st, stream_op = traced
    n = prep.nrows
    rs = np.full(n, -1.0)
    re = np.full(n, -1.0)
    g_of_op = np.full(st.nops, -1, np.int64)
    has = stream_op >= 0
    g_of_op[stream_op[has]] = np.flatnonzero(has)
    g_send = np.full(st.nmsg, -1, np.int64)
    g_recv = np.full(st.nmsg, -1, np.int64)
    snd = (st.kind == K.SEND) | (st.kind == K.ISEND)
    rcv = (st.kind == K.RECV) | (st.kind == K.IRECV)
    g_send[st.msg[snd]] = g_of_op[snd]
    g_recv[st.msg[rcv]] = g_of_op[rcv]
    _rows_kernel(st.rank_off, st.kind.astype(np.int64), st.msg, st.op_row, g_of_op, g_send,
                 g_recv, sim.op_start, sim.op_end, np.asarray(sched.rank, np.int64),
                 np.asarray(stream_op, np.int64), rs, re, K.WSEND, K.WRECV, K.PROBE, K.IRECV)
    return rs, re


@njit(cache=True)
def _rows_kernel(rank_off, kind, msg, op_row, g_of_op, g_send, g_recv, g_start, g_end, g_rank,
                 g_sop, rs, re, K_WSEND, K_WRECV, K_PROBE, K_IRECV):
    """The rows' times of ``_row_times_from_trace``. Rule *irecv_posts*: a non-blocking
    receive's operation ends in LogGOPSim when its message has been received (its o is charged
    then), but the call that posts it takes no time: its row is an instant, no earlier than the
    rank's previous row's end (LogGOPSim may start it beside a send's o), and what its operation
    waits for is its Wait's row's. Rule *probe_waits*: a blocking probe has
    no GOAL operation; the receive of its message (the next operation with the message) waits
    for it in the schedule, after the computation between the two calls. The probe's row
    takes that wait, as in the trace: it starts at the end of the rank's previous operations
    and lasts as long as the receive operation did; the computation follows it, and the
    receive's row is its end (the noise analysis compares calls with the trace's)."""
    P = len(rank_off) - 1
    gi = 0
    ng = len(g_rank)
    for r in range(P):
        last_end = 0.0
        probed = -1                      # the message a probe waited for
        while gi < ng and g_rank[gi] < r:
            gi += 1
        for i in range(rank_off[r], rank_off[r + 1]):
            # the schedule ops standing for this stream op: its burst's calc, then its own op
            while gi < ng and (g_sop[gi] == -2 - i or g_sop[gi] == i):
                if g_end[gi] > last_end and not (g_sop[gi] == i and kind[i] == K_IRECV):
                    last_end = g_end[gi]
                gi += 1
            w = op_row[i]
            g = g_of_op[i]
            if g >= 0 and kind[i] == K_IRECV:
                s0 = max(g_start[g], last_end)
                e0 = s0
                last_end = s0
            elif g >= 0:
                s0, e0 = g_start[g], g_end[g]
                if msg[i] == probed and probed >= 0:
                    s0 = e0
                    probed = -1
            elif kind[i] == K_PROBE and msg[i] >= 0 and g_recv[msg[i]] >= 0:
                g = g_recv[msg[i]]
                s0 = last_end
                e0 = last_end + max(g_end[g] - g_start[g], 0.0)
                probed = msg[i]
            elif kind[i] == K_WSEND or kind[i] == K_WRECV:
                gg = g_send[msg[i]] if kind[i] == K_WSEND else g_recv[msg[i]]
                e0 = max(g_end[gg], last_end) if gg >= 0 else last_end
                s0 = last_end
                last_end = e0
            else:
                s0, e0 = last_end, last_end
            if rs[w] < 0.0 or s0 < rs[w]:
                rs[w] = s0
            if e0 > re[w]:
                re[w] = e0


def _row_times_from_sidecar(prep: Prepared, sched: Schedule, sim: SimResult):
    """Rows of a trace imported from GOAL: Isend/Irecv/Wait rows carry their operation's index
    (on its rank) as request id; ``calc`` region rows take the rank's calcs in replayed order."""
    rows = prep.rows
    n = prep.nrows
    rs = np.full(n, -1.0)
    re = np.full(n, -1.0)
    t = tf.read_trace(prep.path, columns=["rank", "seq", "request"]).table
    rank_col, seq_col = t.column("rank").to_numpy(), t.column("seq").to_numpy()
    req = t.column("request").to_numpy()
    if not tf.in_rank_seq_order(rank_col, seq_col):     # the prepared rows' order
        req = req[np.lexsort((seq_col, rank_col))]
    off = sched.rank_off
    op = rows["op"]
    rank = rows["rank"]
    wait = tf.op_mask(op, tf.COMPLETION_OPS) & (req >= 0)
    bad = _posts_and_waits(rank, req, tf.op_mask(op, ("Isend", "Irecv")), wait, off,
                           sched.kind, sim.op_start, sim.op_end, rs, re, RECV)
    if bad >= 0:
        raise GoalError(f"{prep.path}: the trace's requests do not match its GOAL schedule (rank "
                        f"{int(rank[bad])} seq {int(rows['seq'][bad])})")
    # the k-th calc region row of a rank takes the rank's k-th calc in replayed order (rows are
    # in (rank, seq) order, and so by rank already)
    calc_rows = np.flatnonzero(op == 0)
    ops = np.flatnonzero(sched.kind == CALC)      # by rank (a schedule's order), then index
    _by_start(ops, np.asarray(sched.rank[ops]), sim.op_start)
    P = prep.nranks
    row_off = tf.rank_offsets(rank[calc_rows], P)
    op_off = tf.rank_offsets(sched.rank[ops], P)
    r_of = rank[calc_rows]
    k = np.arange(len(calc_rows)) - row_off[r_of]
    ok = k < np.diff(op_off)[r_of]
    g = ops[op_off[r_of[ok]] + k[ok]]
    rs[calc_rows[ok]] = sim.op_start[g]
    re[calc_rows[ok]] = sim.op_end[g]
    _wait_starts(np.asarray(rank, np.int64), np.asarray(op, np.int64), wait, rs, re)
    return rs, re


@njit(cache=True)
def _by_start(ops, rank, start):
    """Sort ``ops`` (by rank, then index) in place by (rank, start, index): each rank's run is
    sorted stably by start, and left as it is when it is in that order already (a rank's calcs
    run one after another on its CPU, in schedule order unless a dependency reorders them)."""
    lo = 0
    n = len(ops)
    while lo < n:
        hi = lo + 1
        ordered = True
        while hi < n and rank[hi] == rank[lo]:
            if start[ops[hi]] < start[ops[hi - 1]]:
                ordered = False
            hi += 1
        if not ordered:
            seg = ops[lo:hi].copy()
            order = np.argsort(start[seg], kind="mergesort")
            for j in range(hi - lo):
                ops[lo + j] = seg[order[j]]
        lo = hi


@njit(cache=True)
def _posts_and_waits(rank, req, post, wait, off, kind, op_start, op_end, rs, re, RECV):
    """Times of the Isend/Irecv rows (``post``) and the Wait rows (``wait``) of a trace imported
    from GOAL, whose request is the index of their operation on their rank: a post starts when
    its operation started and ends then (a receive) or when the send's CPU part ended; a wait
    ends when its operation completed. Returns the first row whose request is not an
    operation of its rank, else -1."""
    for w in range(len(rank)):
        q = req[w]
        if q < 0 or not (post[w] or wait[w]):
            continue
        r = rank[w]
        if q >= off[r + 1] - off[r]:
            return w
        g = off[r] + q
        if post[w]:
            rs[w] = op_start[g]
            re[w] = op_start[g] if kind[g] == RECV else op_end[g]
        else:
            re[w] = op_end[g]
    return -1


@njit(cache=True)
def _wait_starts(rank, op, wait, rs, re):
    """A Wait starts where the rank's previous row (not a region) ended, at most at its own end.
    Rows are in (rank, seq) order."""
    last = 0.0
    for w in range(len(rank)):
        if w and rank[w] != rank[w - 1]:
            last = 0.0
        if wait[w]:
            rs[w] = min(last, re[w])
        if re[w] >= 0 and op[w] != 0:
            last = max(last, re[w])


def _fill_rows(prep: Prepared, rs: np.ndarray, re: np.ndarray, rank_end: np.ndarray):
    """Rows without replayed times (regions, unmatched ops) are mapped through the rank's time
    warp: piecewise linear between rows that have times (the default engine's rule,
    ``replay.warp.time_warp``)."""
    rows = prep.rows
    has = rs >= 0
    np.maximum(re, rs, out=re, where=has)
    time_warp(tf.rank_offsets(rows["rank"], prep.nranks), has, rows["t_start"], rows["t_end"],
              prep.t0, rs, re, np.asarray(prep.measured_rank_end_ns, float),
              np.asarray(rank_end, float))
    return rs, np.maximum(re, rs, out=re)
