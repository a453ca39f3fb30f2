"""Rule ``ack_cells`` (``replay.rules.ack_cells``; docs/replay.md) around the kernel: whether it
applies to a replay, and the floors it sets on rendezvous sends from a recorded replay.
``replay.engine`` replays again with those floors until they settle."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from replay import kernel as K
from replay.stream import Stream


#: rule ``ack_cells``: at most this many replays until the held acknowledgements settle
ACK_PASSES = 8


def cells_of(values: dict[str, Any], prm: np.ndarray, measured: bool) -> int:
    """The cells of rule ``ack_cells`` (0: the rule is off): a model value ``ack_cells`` that
    is finite, with progress ``in-call`` (without it the library progresses on its own and no
    acknowledgement waits for the receiver), in network mode."""
    c = values.get("ack_cells", math.inf)
    if measured or not math.isfinite(c) or prm[K.P_PROGRESS] != K.PROGRESS_IN_CALL:
        return 0
    return max(int(c), 1)


def ack_floors(st: Stream, prm: np.ndarray, m_delay: np.ndarray, out: K.Outputs,
                cells: int) -> np.ndarray:
    """Rule ``ack_cells`` (``replay.rules.ack_cells``) on a recorded replay ``out``: per
    message the earliest end of its rendezvous send (-1: none). The sender reads
    acknowledgements in every call but a post (Isend, Irecv, a non-blocking collective's
    post); the receiver drains held ones only in a call that waits, so not in a receive or
    probe whose message's envelope (eager: data) had arrived when the call began."""
    kind, msg = st.kind, st.msg
    k_all = st.m_bytes
    sync = st.m_sync if st.m_sync is not None else np.zeros(st.nmsg, np.bool_)
    S = prm[K.P_S]
    rdv = (k_all > S) | sync
    os0 = prm[K.P_OS0] + prm[K.P_OSP] * prm[K.P_NPROC]
    delay = m_delay if len(m_delay) == st.nmsg else np.zeros(st.nmsg)
    env = out.m_sp + os0 + prm[K.P_OS] * k_all + prm[K.P_L] + delay
    env = env + np.where(rdv, 0.0, np.maximum(k_all - prm[K.P_KSHIFT], 0.0) * prm[K.P_G])
    post = (kind == K.ISEND) | (kind == K.IRECV) | (kind == K.CPOST)
    consume = ~post
    recvlike = (kind == K.RECV) | (kind == K.WRECV) | (kind == K.PROBE)
    has_msg = recvlike & (msg >= 0)
    there = np.zeros(len(kind), np.bool_)
    there[has_msg] = env[msg[has_msg]] <= out.op_start[has_msg]
    drain = consume & ~there
    done_op = np.full(st.nmsg, -1, np.int64)
    done = np.flatnonzero((kind == K.RECV) | (kind == K.WRECV))
    done_op[msg[done]] = done
    # by receiver, then completion end: the operations are ordered by rank, then program
    # order, in which a rank's replayed ends never decrease
    ms = msg[done]
    ms = ms[rdv[ms] & (st.m_src[ms] != st.m_dst[ms])]
    floor = np.empty(st.nmsg)
    K.ack_cells(st.rank_off, out.op_start, out.op_end, out.rank_end, consume, drain, done_op,
                ms.astype(np.int64), st.m_src, st.m_dst, cells, floor)
    return floor
