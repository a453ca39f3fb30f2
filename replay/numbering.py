"""Rule-free renumbering of a stream's messages by send time: the kernel's memory locality only.

Matching numbers a trace's messages by sender (in the sender's order), and a collective's
pattern numbers its steps instance by instance. The kernel reads a message's arrays when its
send is posted and when it is received, at about the same replayed time on both ranks, so
numbered by sender the receivers' reads jump between the senders' blocks (a pairwise exchange of
64 ranks, 5 M operations: the kernel took 20 % longer). ``number_by_send_time`` renumbers a
built stream's messages in about the order of their sends' rows' starts; ``Stream.m_trace`` says
where each trace message went (``Stream.trace_ids``).
"""

from __future__ import annotations

import numpy as np

from hindsight.jit import njit
from replay import kernel as K
from replay.matching import index_proto
from replay.stream import Stream


#: per kernel kind, whether an operation's ``msg`` is a message (else a collective instance)
_NAMES_MESSAGE = np.zeros(K.POLL + 1, np.bool_)
_NAMES_MESSAGE[[K.SEND, K.RECV, K.ISEND, K.IRECV, K.WSEND, K.WRECV, K.PROBE, K.PSEND, K.PRECV,
                K.POLL]] = True


def number_by_send_time(st: Stream, t_start: np.ndarray, traced: int, epochs: int) -> None:
    """Renumber the messages of ``st`` (built by ``build_stream``: the trace's ``traced`` ones,
    the collectives' patterns', then the one-sided epochs' last ``epochs``, whose pairs m, m + 1
    keep their numbers) in about the order their sends' rows start in the trace (``t_start``
    per row; ``_send_time_ids``), and keep in ``st.m_trace`` where each trace message went
    (why: the module's docstring)."""
    count = st.nmsg - epochs
    if count < 2:
        return
    new_id, order = _send_time_ids(st.m_send_op, st.m_recv_op, st.op_row, t_start, count,
                                   PER_BUCKET, index_proto(count))
    if not len(new_id):
        return
    # each array gathered through one buffer, in place: new arrays beside the old ones would
    # raise a first replay's peak memory
    buf = np.empty(count * 8, np.uint8)
    for name in ("m_bytes", "m_src", "m_dst", "m_send_op", "m_recv_op", "m_sync",
                 "m_shared_flag"):
        a = getattr(st, name)
        if a is not None:
            moved = buf[:count * a.itemsize].view(a.dtype)
            np.take(a[:count], order, out=moved, mode="clip")   # ("raise" copies)
            a[:count] = moved
    del buf, order
    _renumber(st.kind, st.msg, new_id.astype(st.msg.dtype, copy=False), _NAMES_MESSAGE)
    st.m_trace = new_id if traced == count else new_id[:traced].copy()


#: messages per time bucket of ``_send_time_ids`` (on average): 64 keeps its counts in a cache
#: and lets a pairwise exchange of 64 ranks gain all it gains from an exact order
PER_BUCKET = 64


@njit(cache=True, inline="always")
def _send_key(send_op, recv_op, op_row, t_start, m):
    """The start of the row that posts message ``m``'s send (its receive's where no row does;
    the latest time where neither does)."""
    o = send_op[m]
    if o < 0:
        o = recv_op[m]
    return t_start[op_row[o]] if o >= 0 else np.iinfo(np.int64).max


@njit(cache=True, nogil=True)
def _send_time_ids(send_op, recv_op, op_row, t_start, count, per_bucket, proto):
    """Per message (the first ``count``), its new number (of ``proto``'s type): in the order of
    its send's start (``_send_key``) to within a time bucket of ``per_bucket`` messages' share
    of the span, messages of one bucket in their old order (a counting sort: linear, where the
    order need only bring together what the kernel reads at about the same time); and the old
    number of each new one. Empty: the messages are in that order already."""
    late = np.iinfo(np.int64).max
    lo, hi = late, -late
    for m in range(count):
        k = _send_key(send_op, recv_op, op_row, t_start, m)
        if k != late:
            lo = min(lo, k)
            hi = max(hi, k)
    nb = max(count // per_bucket, 1)
    width = (hi - lo) // nb + 1 if hi >= lo else 1
    start = np.zeros(nb + 2, np.int64)
    new_id = np.empty(count, proto.dtype)     # each message's bucket first
    ordered = True
    last = 0
    for m in range(count):
        k = _send_key(send_op, recv_op, op_row, t_start, m)
        b = nb if k == late else (k - lo) // width
        new_id[m] = b
        start[b + 1] += 1
        ordered &= b >= last
        last = b
    if ordered:
        return np.empty(0, proto.dtype), np.empty(0, proto.dtype)
    for b in range(1, nb + 2):
        start[b] += start[b - 1]
    order = np.empty(count, proto.dtype)
    for m in range(count):
        b = new_id[m]
        new_id[m] = start[b]
        order[start[b]] = m
        start[b] += 1
    return new_id, order


@njit(cache=True, nogil=True)
def _renumber(kind, msg, new_id, names_message):
    """``msg`` of each operation naming a message below ``len(new_id)`` becomes its new id."""
    count = len(new_id)
    for i in range(len(kind)):
        m = msg[i]
        if 0 <= m < count and names_message[kind[i]]:
            msg[i] = new_id[m]
