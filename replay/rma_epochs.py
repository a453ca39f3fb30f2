"""One-sided communication in replay: passive-target and general active-target epochs, the
operations their closing calls carry (rules ``lock_epoch`` and ``pscw_epoch``; docs/replay.md,
"One-sided communication"). Fence epochs are ``replay.rma``'s.

A data operation moves its bytes one way or both: ``Put`` and ``Accumulate`` origin -> target
(*out* bytes), ``Get`` target -> origin (*back* bytes), ``Get_accumulate``, ``Fetch_and_op``
and ``Compare_and_swap`` both ways. Per epoch and target, the operations' out and back bytes
are summed; an operation on the rank's own window moves nothing.

Rule ``lock_epoch`` (MPI 4.0 §12.5.3, §12.7; MPICH completes passive-target operations at the
unlock or flush that closes them). A data operation between ``Win_lock(T)`` (or
``Win_lock_all``) and the first ``Win_flush`` naming T (or all targets) or the ``Win_unlock(T)``
(``Win_unlock_all``) that follows it belongs to that closing call. The closing call carries,
per target with operations, a *passive round trip*: the origin sends the out bytes (kernel
operation PSEND: as an eager message's, o_s(out), NIC gap, the model's per-message delay); the
target's library answers the moment they arrive, without its rank: the back bytes, or an empty
acknowledgement, come back after one more latency (kernel operation PRECV: ``passive_reply``,
``replay.rules``); the origin takes them (o_r(back)). Under LogGP with L >= 0:

    put of k bytes:   t + o_s(k) + L + (k-1)·G + L + o_r(0)
    get of k bytes:   t + o_s(0) + L + L + (k-1)·G + o_r(k)

All targets' sends are posted before the first reply is awaited (``Win_unlock_all``, a flush
of all targets). Passive means the target's timeline is not held: its rank is never made to
wait, nor to be inside an MPI call (MPICH without asynchronous progress may need the target to
enter MPI before it answers; that, lock acquisition and the exclusion between exclusive locks
are not modelled). ``Win_flush_local`` is recorded as ``Win_flush`` and replayed as one.

Rule ``pscw_epoch`` (MPI 4.0 §12.5.2). The k-th ``Win_post`` of target T naming origin O
matches the k-th ``Win_start`` of O naming T (on the window): the post sends an empty message
T -> O (ISEND at the ``Win_post`` row of that member), which the start receives (RECV at the
``Win_start`` row: the origin waits for the target's post). A data operation between the
origin's ``Win_start`` and its ``Win_complete`` belongs to that access epoch; at
``Win_complete`` the origin sends each target of its start group one message with the epoch's
out bytes to it (ISEND; an empty one if none), received by the target's ``Win_wait`` (or
``Win_test`` that returned true) that closes the matching exposure epoch (the k-th completion
of O towards T meets the k-th wait of T for O): the target waits for every origin's complete.
The epoch's back bytes come as a passive round trip (PSEND of an empty request, PRECV of the
bytes) at the complete, since the target serves a get without its rank (holding the target's
wait instead would deadlock the common pattern where every rank both completes and waits).

Not modelled, and counted: operations whose epoch never closes, operations in no epoch (no
fence closes them either: ``replay.rma``), and PSCW calls whose partner is not in the trace
(their rows replay as their calls).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from hindsight import trace as tf
from replay import kernel as K

# positions of a closing call's operations: its messages' sends, its round trips' sends,
# then their replies (each by target)
_AT_SEND, _AT_PSEND, _AT_PRECV = 0, 1, 2


@dataclass
class EpochOps:
    """The operations rules ``lock_epoch`` and ``pscw_epoch`` give trace rows, sorted by row
    (a row's operations in the order they run), and their messages. Per operation: ``row``
    (the trace row), ``kind`` (``replay.kernel`` ISEND, RECV, PSEND or PRECV), ``msg`` (an
    index into ``m_*``). Per message: bytes, world ranks it goes from and to. A PSEND's
    message m is followed by its reply, message m + 1, which the PRECV awaits."""

    row: np.ndarray
    kind: np.ndarray
    msg: np.ndarray
    m_bytes: np.ndarray
    m_src: np.ndarray
    m_dst: np.ndarray

    @classmethod
    def empty(cls) -> EpochOps:
        e = np.zeros(0, np.int64)
        return cls(e, np.zeros(0, np.int8), e, np.zeros(0), np.zeros(0, np.int32),
                   np.zeros(0, np.int32))

    def __getitem__(self, name: str) -> np.ndarray:
        return getattr(self, name)


@dataclass
class Epochs:
    """What ``epoch_ops`` found: the operations, which data rows lie in lock or PSCW epochs
    (``in_epoch``: no fence carries them), how many of those are not modelled (their epoch
    never closes), and how many PSCW calls found no partner in the trace."""

    ops: EpochOps
    in_epoch: np.ndarray
    unclosed: int
    unmatched: int


def _directions(name: str) -> tuple[bool, bool]:
    """(moves out bytes, moves back bytes) of a data operation."""
    return name in tf.RMA_PUT_OPS | tf.RMA_BOTH_OPS, name in tf.RMA_GET_OPS | tf.RMA_BOTH_OPS


def epoch_ops(rank: np.ndarray, op: np.ndarray, peer: np.ndarray, comm: np.ndarray,
              nbytes: np.ndarray, t_start: np.ndarray) -> Epochs:
    """Rules ``lock_epoch`` and ``pscw_epoch`` over a trace's rows (in (rank, seq) order)."""
    in_epoch = np.zeros(len(op), bool)
    # one pass over the rows finds the one-sided ones (most traces have none); the kinds of
    # those only are told apart
    rows = np.flatnonzero(tf.op_mask(op, tf.RMA_OPS | tf.RMA_PSCW_OPS | tf.RMA_LOCK_OPS))
    if not len(rows) or not tf.op_mask(op[rows], tf.RMA_PSCW_OPS | tf.RMA_LOCK_OPS).any():
        return Epochs(EpochOps.empty(), in_epoch, 0, 0)
    rows = rows[np.argsort(rank[rows].astype(np.int64) * (int(comm[rows].max()) + 1)
                           + comm[rows], kind="stable")]
    names = {tf.OP_CODE[x]: x for x in tf.RMA_OPS | tf.RMA_LOCK_OPS | tf.RMA_PSCW_OPS}
    direction = {x: _directions(x) for x in tf.RMA_OPS}
    b = _Builder()
    unclosed = 0
    # the PSCW calls, each with its partner's key, in program order per key
    posts: dict[tuple, list[int]] = defaultdict(list)    # (window, target, origin) -> rows
    starts: dict[tuple, list[int]] = defaultdict(list)
    completes: dict[tuple, list[tuple]] = defaultdict(list)   # (window, origin, target)
    waits: dict[tuple, list[int]] = defaultdict(list)
    # the loop reads Python lists: a NumPy scalar read costs ten times a list's
    row_l = rows.tolist()
    rank_l, comm_l, peer_l = (x[rows].tolist() for x in (rank, comm, peer))
    name_l = [names[c] for c in op[rows].tolist()]
    bytes_l = np.maximum(nbytes[rows], 0).tolist()
    ts_l = t_start[rows].tolist()
    in_epoch_l: list[int] = []
    a = 0
    while a < len(rows):
        r, w = rank_l[a], comm_l[a]
        z = a
        while z < len(rows) and rank_l[z] == r and comm_l[z] == w:
            z += 1
        pending: dict[int, list] = {}      # lock epochs: target -> [out, back, rows]
        access: dict[int, list] | None = None   # PSCW access epoch: target -> [out, back, rows]
        exposure: list[int] = []           # origins of the latest Win_post call
        depth = 0
        for j in range(a, z):
            i, name, p = row_l[j], name_l[j], peer_l[j]
            # the rows of one Win_post / Win_start call: the same op at the same time
            same_call = j > a and name_l[j - 1] == name and ts_l[j - 1] == ts_l[j]
            if name in direction:
                if depth > 0:
                    epoch = pending
                elif access is not None:
                    epoch = access
                else:
                    continue                # a fence's, or none (replay.rma)
                in_epoch_l.append(i)
                e = epoch.get(p)
                if e is None:
                    e = epoch[p] = [0, 0, 0]
                out, back = direction[name]
                k = bytes_l[j]
                if out:
                    e[0] += k
                if back:
                    e[1] += k
                e[2] += 1
            elif name in ("Win_lock", "Win_lock_all"):
                depth += 1
            elif name in ("Win_unlock", "Win_flush", "Win_unlock_all"):
                everyone = name == "Win_unlock_all" or p < 0
                for t in sorted(pending) if everyone else [p] if p in pending else []:
                    out, back, _ = pending.pop(t)
                    if t != r:
                        b.round_trip(i, r, t, out, back)
                if name != "Win_flush":
                    depth = max(depth - 1, 0)
            elif name == "Win_start":
                if not same_call:
                    access = {}
                if p >= 0:
                    access.setdefault(p, [0, 0, 0])
                    if p != r:
                        starts[(w, p, r)].append(i)
            elif name == "Win_complete" and access is not None:
                for t in sorted(access):
                    out, back, _ = access[t]
                    if t != r:
                        completes[(w, r, t)].append((i, out))
                        if back:
                            b.round_trip(i, r, t, 0, back)
                access = None
            elif name == "Win_post":
                if not same_call:
                    exposure = []
                if p >= 0 and p != r:
                    exposure.append(p)
                    posts[(w, r, p)].append(i)
            elif name in ("Win_wait", "Win_test"):
                for o in exposure:
                    waits[(w, o, r)].append(i)
                exposure = []
        unclosed += sum(e[2] for e in pending.values())
        if access is not None:
            unclosed += sum(e[2] for e in access.values())
        a = z
    in_epoch[in_epoch_l] = True
    unmatched = 0
    for key in posts.keys() | starts.keys():
        ps, ss = posts.get(key, []), starts.get(key, [])
        w, t, o = key
        for post_row, start_row in zip(ps, ss):
            b.message(post_row, start_row, t, o, 0)
        unmatched += abs(len(ps) - len(ss))
    for key in completes.keys() | waits.keys():
        cs, ws = completes.get(key, []), waits.get(key, [])
        w, o, t = key
        for (complete_row, out), wait_row in zip(cs, ws):
            b.message(complete_row, wait_row, o, t, out)
        unmatched += abs(len(cs) - len(ws))
    return Epochs(b.ops(), in_epoch, unclosed, unmatched)


class _Builder:
    """Operations and messages as the rules make them, then sorted into ``EpochOps``."""

    def __init__(self) -> None:
        self.row: list[int] = []
        self.at: list[int] = []
        self.peer: list[int] = []
        self.kind: list[int] = []
        self.msg: list[int] = []
        self.m_bytes: list[float] = []
        self.m_src: list[int] = []
        self.m_dst: list[int] = []

    def _op(self, row: int, at: int, peer: int, kind: int, msg: int) -> None:
        self.row.append(row)
        self.at.append(at)
        self.peer.append(peer)
        self.kind.append(kind)
        self.msg.append(msg)

    def _msg(self, src: int, dst: int, nbytes: int) -> int:
        self.m_bytes.append(float(nbytes))
        self.m_src.append(src)
        self.m_dst.append(dst)
        return len(self.m_bytes) - 1

    def message(self, send_row: int, recv_row: int, src: int, dst: int, nbytes: int) -> None:
        """A message sent (ISEND) at ``send_row`` and received (RECV) at ``recv_row``."""
        m = self._msg(src, dst, nbytes)
        self._op(send_row, _AT_SEND, dst, K.ISEND, m)
        self._op(recv_row, _AT_SEND, src, K.RECV, m)

    def round_trip(self, row: int, origin: int, target: int, out: int, back: int) -> None:
        """A passive round trip at the origin's ``row``: ``out`` bytes to the target, ``back``
        bytes (or an empty acknowledgement) from it."""
        m = self._msg(origin, target, out)
        self._msg(target, origin, back)
        self._op(row, _AT_PSEND, target, K.PSEND, m)
        self._op(row, _AT_PRECV, target, K.PRECV, m + 1)

    def ops(self) -> EpochOps:
        if not self.row:
            return EpochOps.empty()
        order = np.lexsort((np.asarray(self.peer), np.asarray(self.at), np.asarray(self.row)))
        return EpochOps(row=np.asarray(self.row, np.int64)[order],
                        kind=np.asarray(self.kind, np.int8)[order],
                        msg=np.asarray(self.msg, np.int64)[order],
                        m_bytes=np.asarray(self.m_bytes, np.float64),
                        m_src=np.asarray(self.m_src, np.int32),
                        m_dst=np.asarray(self.m_dst, np.int32))


def place_epoch_ops(ep: EpochOps, first: np.ndarray, base: int, kind: np.ndarray,
                    msg: np.ndarray, m_bytes: np.ndarray, m_src: np.ndarray, m_dst: np.ndarray,
                    m_send_op: np.ndarray, m_recv_op: np.ndarray) -> None:
    """Write the operations of ``ep`` into a stream whose rows start at operations ``first``
    (each carrying row has as many operations as ``ep`` gives it), their messages numbered
    from ``base``; a PRECV's reply counts as sent by its PSEND (the critical path follows it
    there)."""
    start = np.flatnonzero(np.r_[True, ep.row[1:] != ep.row[:-1]])
    within = np.arange(len(ep.row)) - np.repeat(start, np.diff(np.r_[start, len(ep.row)]))
    at = first[ep.row] + within
    kind[at] = ep.kind
    m = base + ep.msg
    msg[at] = m
    n = len(ep.m_bytes)
    m_bytes[base:base + n] = ep.m_bytes
    m_src[base:base + n] = ep.m_src
    m_dst[base:base + n] = ep.m_dst
    sends = (ep.kind == K.ISEND) | (ep.kind == K.PSEND)
    m_send_op[m[sends]] = at[sends]
    recvs = (ep.kind == K.RECV) | (ep.kind == K.PRECV)
    m_recv_op[m[recvs]] = at[recvs]
    replies = ep.kind == K.PSEND
    m_send_op[m[replies] + 1] = at[replies]
