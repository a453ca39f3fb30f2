"""One-sided communication in replay: which transfers each window fence carries.

Rule ``fence_epoch`` (docs/replay.md, "One-sided communication"): a data operation (``Put``,
``Get``, ``Accumulate``, ...) issued between two fences of its window belongs to the epoch the
second fence closes, and its bytes cross the network at that fence: MPI completes the
operations of an epoch only at its closing fence (MPI 4.0 §12.5.1), and MPICH issues them there
or earlier, in the background of the epoch. A ``Put`` or ``Accumulate`` moves its bytes from
the origin to the target, a ``Get`` from the target to the origin, ``Get_accumulate``,
``Fetch_and_op`` and ``Compare_and_swap`` both ways. Per fence instance, the transfers between
each pair of members are summed into one message; the fence's pattern is those messages (one
step) followed by its barrier (``replay.collectives``).

Operations inside a lock epoch (``Win_lock``/``Win_lock_all`` .. unlock: passive target) or a
PSCW access epoch (``Win_start`` .. ``Win_complete``) are not transfers of any fence: rules
``lock_epoch`` and ``pscw_epoch`` carry them (``replay.rma_epochs``). Operations no fence
closes either are counted and reported, and their rows replay as the calls they are (their
time outside is computation).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from hindsight import trace as tf


class FenceTransfers(NamedTuple):
    """Per transfer: the fence instance whose epoch it belongs to, the world ranks it moves bytes
    from and to, and the bytes (summed per instance and pair); and how many data operations,
    in no lock or PSCW epoch, no fence closes."""

    inst: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    nbytes: np.ndarray
    unmodelled: int


def fence_transfers(rank: np.ndarray, op: np.ndarray, peer: np.ndarray, comm: np.ndarray,
                    nbytes: np.ndarray, row_coll: np.ndarray,
                    in_epoch: np.ndarray) -> FenceTransfers:
    """The transfers of the fence epochs of a trace's rows (in (rank, seq) order);
    ``row_coll`` is each row's collective instance (-1: none); ``in_epoch`` marks the data
    rows of lock and PSCW epochs (``replay.rma_epochs.epoch_ops``), which no fence carries and
    ``unmodelled`` does not count."""
    e = np.zeros(0, np.int64)
    data = tf.op_mask(op, tf.RMA_OPS) & ~in_epoch
    if not data.any():
        return FenceTransfers(e, e, e, e, 0)
    fence = op == tf.OP_CODE["Win_fence"]
    rows = np.flatnonzero(data | fence)
    # one key per (rank, window): rows come rank by rank, so a stable sort by key keeps each
    # rank's window rows in program order
    key = rank[rows].astype(np.int64) * (int(comm[rows].max()) + 1) + comm[rows]
    order = np.argsort(key, kind="stable")
    rows, key = rows[order], key[order]
    start = np.r_[True, key[1:] != key[:-1]]
    group = np.cumsum(start) - 1
    first = np.flatnonzero(start)

    def running(flag: np.ndarray) -> np.ndarray:
        """Per row, how many flagged rows of its (rank, window) lie before it."""
        c = np.cumsum(flag) - flag
        return c - c[first][group]

    is_fence = fence[rows].astype(np.int64)
    fences_before = running(is_fence)
    # the closing fence of a data row: the (fences_before)-th fence of its (rank, window)
    fence_rows = rows[is_fence == 1]
    fence_group = group[is_fence == 1]
    fence_first = np.searchsorted(fence_group, np.arange(len(first)))
    fence_count = np.bincount(fence_group, minlength=len(first))
    d = data[rows]
    active = d & (fences_before < fence_count[group])
    unmodelled = int(d.sum() - active.sum())
    sel = np.flatnonzero(active)
    closing = fence_rows[fence_first[group[sel]] + fences_before[sel]]
    inst = row_coll[closing].astype(np.int64)
    r_rows = rows[sel]
    origin = rank[r_rows].astype(np.int64)
    target = peer[r_rows].astype(np.int64)
    nb = np.maximum(nbytes[r_rows], 0).astype(np.int64)
    opn = op[r_rows]
    to_target = tf.op_mask(opn, tf.RMA_PUT_OPS | tf.RMA_BOTH_OPS)
    to_origin = tf.op_mask(opn, tf.RMA_GET_OPS | tf.RMA_BOTH_OPS)
    i = np.r_[inst[to_target], inst[to_origin]]
    s = np.r_[origin[to_target], target[to_origin]]
    t = np.r_[target[to_target], origin[to_origin]]
    b = np.r_[nb[to_target], nb[to_origin]]
    keep = (s != t) & (i >= 0)   # an operation on the rank's own window crosses no network
    i, s, t, b = i[keep], s[keep], t[keep], b[keep]
    if not len(i):
        return FenceTransfers(e, e, e, e, unmodelled)
    width = int(max(s.max(), t.max())) + 1
    k = (i * width + s) * width + t
    uk, inv = np.unique(k, return_inverse=True)
    total = np.bincount(inv.reshape(-1), weights=b, minlength=len(uk)).astype(np.int64)
    return FenceTransfers(uk // (width * width), (uk // width) % width, uk % width, total,
                          unmodelled)
