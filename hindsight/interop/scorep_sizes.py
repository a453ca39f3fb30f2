"""Collective sizes as Score-P writes them into OTF2 (``MpiCollectiveEnd``,
``NonBlockingCollectiveComplete``): per process, the bytes it sends and the bytes it receives,
which depend on the op, on whether the process is the root and on ``MPI_IN_PLACE``. The OTF2
import (``otf2_import``) reads hindsight's per-process ``nbytes`` back from them
(docs/interop.md, "Collective sizes")."""

from __future__ import annotations


def readings(op: str, n: int, me: int, is_root: bool) -> list[tuple[int | None, ...]]:
    """How Score-P sizes a collective's record on one process: pairs (a, c) with sizeSent =
    a·b and sizeReceived = c·b for hindsight's ``nbytes`` b (None: that size is no multiple of
    b and says nothing about it), the ordinary call first, then the call with ``MPI_IN_PLACE``.

    From Score-P's MPI adapter (``scorep_mpi_coll_bytes_*`` in scorep_mpi_coll.inc.c; the
    older wrappers in SCOREP_Mpi_Coll.c computed the same inline), on a communicator of n
    processes where this one is rank me:
    a rooted gather (Gather, Reduce) sends b and its root receives n·b ((n-1)·b in place, and
    sends nothing); a scatter (Scatter, Bcast) the mirror, every process receiving b (Bcast's
    root too); Allreduce, Allgather, Alltoall and Reduce_scatter_block send and receive n·b
    ((n-1)·b in place); Scan (n-me)·b and (me+1)·b ((n-me-1)·b and me·b in place, which is
    Exscan's always). For the v-variants and Reduce_scatter b is the bytes sent (received on a
    Scatterv's non-root), and Allgatherv sends n·b ((n-1)·b in place)."""
    if op == "Barrier":
        return [(0, 0)]
    if op in ("Gather", "Reduce"):
        return [(1, n), (0, n - 1)] if is_root else [(1, 0)]
    if op == "Scatter":
        return [(n, 1), (n - 1, 0)] if is_root else [(0, 1)]
    if op == "Bcast":
        return [(n, 1)] if is_root else [(0, 1)]
    if op in ("Allreduce", "Allgather", "Alltoall", "Reduce_scatter_block"):
        return [(n, n), (n - 1, n - 1)]
    if op == "Scan":
        return [(n - me, me + 1), (n - me - 1, me)]
    if op == "Exscan":
        return [(n - me - 1, me)]
    if op == "Allgatherv":
        return [(n, None), (n - 1, None)]
    if op == "Scatterv" and not is_root:
        return [(0, 1)]
    return [(1, None)]          # Gatherv, Scatterv's root, Alltoallv, Reduce_scatter


def scorep_block(op: str, sent: int, received: int, n: int, me: int, is_root: bool) -> int:
    """hindsight's ``nbytes`` of a collective ``op`` (the blocking op's name) from the sizeSent
    and sizeReceived Score-P wrote for the process of rank ``me`` (``is_root``: the op's root)
    in a communicator of ``n``: b of the first reading of ``readings`` the two sizes fit
    exactly. An in-place call whose sizes also fit the ordinary reading is read as ordinary
    (Allreduce in place on 4 processes with 4-byte blocks writes 12 and 12, which is also 3
    bytes not in place); sizes that fit no reading (another writer's) give the total over the
    first reading's multiples; a size Score-P leaves at 0 (Exscan on one process) gives 0."""
    first = None
    for reading in readings(op, n, me, is_root):
        known = [(k, v) for k, v in zip(reading, (sent, received)) if k is not None]
        coef, total = sum(k for k, _ in known), sum(v for _, v in known)
        if coef == 0:
            continue
        b, rest = divmod(total, coef)
        if rest == 0 and all(k * b == v for k, v in known):
            return b
        if first is None:
            first = b
    return first if first is not None else 0
