"""Collectives as point-to-point patterns of named algorithms (MPICH-like defaults).

A pattern is a list of messages (step, src, dst, owner, mult) over communicator-local ranks: in
step ``step`` local rank ``src`` sends ``mult`` times the block size of local rank ``owner`` to
``dst`` (the block size is the ``nbytes`` that rank recorded, see docs/trace-format.md). Each member
executes the steps in order; within a step it posts its sends and receives, then waits for the
receives and the sends (so exchanges in both directions cannot deadlock).
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import numpy as np

from replay import kernel as K

DEFAULT_ALGORITHMS: dict[str, str] = {
    "Barrier": "dissemination", "Bcast": "binomial", "Reduce": "binomial",
    "Allreduce": "recursive_doubling", "Gather": "binomial", "Gatherv": "linear",
    "Scatter": "binomial", "Scatterv": "linear", "Allgather": "ring", "Allgatherv": "ring",
    "Alltoall": "pairwise", "Alltoallv": "pairwise", "Scan": "recursive_doubling",
    "Exscan": "recursive_doubling", "Reduce_scatter": "pairwise",
    "Reduce_scatter_block": "pairwise", "Comm_split": "dissemination",
    "Comm_dup": "dissemination", "Comm_create": "dissemination",
}
ALGORITHMS: dict[str, tuple[str, ...]] = {
    "Barrier": ("dissemination", "linear"),
    "Bcast": ("binomial", "linear"),
    "Reduce": ("binomial", "linear"),
    "Allreduce": ("recursive_doubling", "ring", "reduce_bcast"),
    "Gather": ("binomial", "linear"), "Gatherv": ("linear",),
    "Scatter": ("binomial", "linear"), "Scatterv": ("linear",),
    "Allgather": ("ring", "recursive_doubling"), "Allgatherv": ("ring",),
    "Alltoall": ("pairwise", "linear"), "Alltoallv": ("pairwise", "linear"),
    "Scan": ("recursive_doubling", "linear"), "Exscan": ("recursive_doubling", "linear"),
    "Reduce_scatter": ("pairwise",), "Reduce_scatter_block": ("pairwise",),
    "Comm_split": ("dissemination",), "Comm_dup": ("dissemination",),
    "Comm_create": ("dissemination",),
}


def _log2ceil(p: int) -> int:
    return max(int(p - 1).bit_length(), 0)


def _binomial_down(p: int, root: int, sub: bool):
    """Bcast/Scatter: round j, relative rank v < 2^j sends to v + 2^j."""
    out = []
    for j in range(_log2ceil(p)):
        for v in range(1 << j):
            w = v + (1 << j)
            if w < p:
                mult = min(1 << j, p - w) if sub else 1
                out.append((j, (v + root) % p, (w + root) % p, root, mult))
    return out


def _binomial_up(p: int, root: int, sub: bool):
    """Reduce/Gather: the reverse, leaves first."""
    out = []
    top = _log2ceil(p)
    for s, j in enumerate(range(top - 1, -1, -1)):
        for v in range(1 << j):
            w = v + (1 << j)
            if w < p:
                mult = min(1 << j, p - w) if sub else 1
                out.append((s, (w + root) % p, (v + root) % p, (w + root) % p, mult))
    return out


def _recursive_doubling_allreduce(p: int):
    p2 = 1 << (p.bit_length() - 1)
    out = [(0, r, r - p2, r, 1) for r in range(p2, p)]
    nsteps = p2.bit_length() - 1
    for i in range(nsteps):
        out += [(1 + i, r, r ^ (1 << i), r, 1) for r in range(p2)]
    out += [(1 + nsteps, r - p2, r, r, 1) for r in range(p2, p)]
    return out


def _messages(op: str, algo: str, p: int, root: int) -> list[tuple]:
    if p <= 1:
        return []
    rnd = range(p)
    if op in ("Barrier", "Comm_split", "Comm_dup", "Comm_create"):
        mult = 0 if op == "Barrier" else 1
        if algo == "linear":
            return [(0, r, 0, r, 0) for r in rnd if r] + [(1, 0, r, 0, 0) for r in rnd if r]
        return [(i, r, (r + (1 << i)) % p, r, mult) for i in range(_log2ceil(p)) for r in rnd]
    if op == "Bcast":
        if algo == "linear":
            return [(0, root, r, root, 1) for r in rnd if r != root]
        return _binomial_down(p, root, False)
    if op == "Scatter":
        if algo == "linear":
            return [(0, root, r, r, 1) for r in rnd if r != root]
        return _binomial_down(p, root, True)
    if op == "Scatterv":
        return [(0, root, r, r, 1) for r in rnd if r != root]
    if op == "Reduce":
        if algo == "linear":
            return [(0, r, root, r, 1) for r in rnd if r != root]
        return _binomial_up(p, root, False)
    if op == "Gather":
        if algo == "linear":
            return [(0, r, root, r, 1) for r in rnd if r != root]
        return _binomial_up(p, root, True)
    if op == "Gatherv":
        return [(0, r, root, r, 1) for r in rnd if r != root]
    if op == "Allreduce":
        if algo == "ring":
            return [(s, r, (r + 1) % p, r, 1.0 / p) for s in range(2 * (p - 1)) for r in rnd]
        if algo == "reduce_bcast":
            up = _binomial_up(p, 0, False)
            off = max((m[0] for m in up), default=-1) + 1
            return up + [(s + off, a, b, o, m) for s, a, b, o, m in _binomial_down(p, 0, False)]
        return _recursive_doubling_allreduce(p)
    if op in ("Allgather", "Allgatherv"):
        if algo == "recursive_doubling" and p & (p - 1) == 0:
            return [(i, r, r ^ (1 << i), r, 1 << i) for i in range(p.bit_length() - 1)
                    for r in rnd]
        return [(s, r, (r + 1) % p, (r - s) % p, 1) for s in range(p - 1) for r in rnd]
    if op in ("Alltoall", "Alltoallv", "Reduce_scatter", "Reduce_scatter_block"):
        # Alltoallv records the total a rank sends: split evenly over its peers.
        mult = 1.0 / (p - 1) if op == "Alltoallv" else 1
        step = (lambda s: 0) if algo == "linear" else (lambda s: s - 1)
        return [(step(s), r, (r + s) % p, r, mult) for s in range(1, p) for r in rnd]
    if op in ("Scan", "Exscan"):
        if algo == "linear":
            return [(s, s, s + 1, s, 1) for s in range(p - 1)]
        return [(i, r, r + (1 << i), r, 1) for i in range(_log2ceil(p)) for r in rnd
                if r + (1 << i) < p]
    raise ValueError(f"no pattern for collective {op}")


class Pattern(NamedTuple):
    """A collective as point-to-point messages among p local ranks, and each member's
    operations on them, in execution order (per step: post the sends and receives, then wait
    for the receives and the sends)."""

    src: np.ndarray      # per message: the local rank that sends it
    dst: np.ndarray      # ... that receives it
    owner: np.ndarray    # ... whose block size it carries
    mult: np.ndarray     # ... that many times (float)
    op_off: np.ndarray   # local rank q's operations are op_off[q]:op_off[q+1]
    op_kind: np.ndarray  # per operation: ISEND, IRECV, WRECV or WSEND (int8)
    op_msg: np.ndarray   # ... the message it posts or completes


@lru_cache(maxsize=256)
def pattern(op: str, algo: str, p: int, root: int) -> Pattern:
    """The pattern of collective ``op`` by algorithm ``algo`` on p local ranks (``root``: the
    root's local rank)."""
    msgs = _messages(op, algo, p, root)
    if not msgs:
        e = np.zeros(0, np.int64)
        return Pattern(e, e, e, np.zeros(0), np.zeros(p + 1, np.int64), np.zeros(0, np.int8), e)
    arr = np.array(msgs, dtype=float)
    step = arr[:, 0].astype(np.int64)
    src = arr[:, 1].astype(np.int64)
    dst = arr[:, 2].astype(np.int64)
    owner = arr[:, 3].astype(np.int64)
    mult = arr[:, 4]
    M = len(msgs)
    j = np.arange(M)
    who = np.concatenate([src, dst, dst, src])
    stp = np.concatenate([step] * 4)
    order = np.repeat(np.arange(4), M)
    kinds = np.array([K.ISEND, K.IRECV, K.WRECV, K.WSEND], np.int8)[order]
    mid = np.concatenate([j] * 4)
    srt = np.lexsort((mid, order, stp, who))
    who, kinds, mid = who[srt], kinds[srt], mid[srt]
    off = np.zeros(p + 1, np.int64)
    off[1:] = np.cumsum(np.bincount(who, minlength=p))
    return Pattern(src, dst, owner, mult, off, kinds, mid)
