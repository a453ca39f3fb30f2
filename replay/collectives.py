"""Collectives as point-to-point patterns of named algorithms (MPICH-like defaults).

A pattern is a list of messages (step, src, dst, owner, mult) over communicator-local ranks: in
step ``step`` local rank ``src`` sends ``mult`` times the block size of local rank ``owner`` to
``dst`` (the block size is the ``nbytes`` that rank recorded, see docs/trace-format.md). Each member
executes the steps in order; within a step it posts its sends and receives, then waits for the
receives and the sends (so exchanges in both directions cannot deadlock).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from hindsight.trace.core import OP_CODE
from replay import kernel as K

#: A message of a pattern: (step, src, dst, owner, mult), ranks local to the communicator.
Message = tuple

#: (collective, algorithm) -> the function that lists its messages: ``fn(op, p, root)``
_BUILDERS: dict[tuple[str, str], Callable[[str, int, int], list[Message]]] = {}
#: collective -> its algorithms, in the order ``--algo`` lists them
ALGORITHMS: dict[str, tuple[str, ...]] = {}
#: collective -> the algorithm used unless ``--algo OP=NAME`` says otherwise (MPICH-like)
DEFAULT_ALGORITHMS: dict[str, str] = {}


def algorithm(name: str, *ops: str, default: bool | tuple[str, ...] = False):
    """Register the decorated ``fn(op, p, root) -> list[Message]`` as algorithm ``name`` of the
    collectives ``ops``; the default one of each of them with ``default=True``, of those named
    with ``default=(op, ...)``. Its docstring says which messages it sends, step by step."""
    def register(fn: Callable[[str, int, int], list[Message]]):
        for op in ops:
            _BUILDERS[(op, name)] = fn
            ALGORITHMS[op] = ALGORITHMS.get(op, ()) + (name,)
            if default is True or op in (default or ()):
                DEFAULT_ALGORITHMS[op] = name
        return fn
    return register


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


_SYNC_OPS = ("Barrier", "Comm_split", "Comm_dup", "Comm_create")
_ALL_TO_ALL_OPS = ("Alltoall", "Alltoallv", "Reduce_scatter", "Reduce_scatter_block")


@algorithm("dissemination", *_SYNC_OPS, default=True)
def _dissemination(op: str, p: int, root: int) -> list[Message]:
    """Step i: rank r sends to r + 2^i (mod p); ceil(log2 p) steps. A Barrier's messages carry
    no data; communicator creation's carry the recorded size."""
    mult = 0 if op == "Barrier" else 1
    return [(i, r, (r + (1 << i)) % p, r, mult) for i in range(_log2ceil(p)) for r in range(p)]


@algorithm("linear", "Barrier")
def _linear_barrier(op: str, p: int, root: int) -> list[Message]:
    """Every rank tells rank 0, then rank 0 tells every rank (empty messages)."""
    return [(0, r, 0, r, 0) for r in range(p) if r] + [(1, 0, r, 0, 0) for r in range(p) if r]


@algorithm("binomial", "Bcast", default=True)
def _binomial_bcast(op: str, p: int, root: int) -> list[Message]:
    """Round j: relative rank v < 2^j sends the root's block to v + 2^j."""
    return _binomial_down(p, root, False)


@algorithm("binomial", "Scatter", default=True)
def _binomial_scatter(op: str, p: int, root: int) -> list[Message]:
    """As Bcast, each message carrying the blocks of the subtree below its receiver."""
    return _binomial_down(p, root, True)


@algorithm("linear", "Bcast", "Scatter", "Scatterv", default=("Scatterv",))
def _linear_from_root(op: str, p: int, root: int) -> list[Message]:
    """The root sends to every other rank in one step (Bcast: its block; Scatter: theirs)."""
    owner_is_root = op == "Bcast"
    return [(0, root, r, root if owner_is_root else r, 1) for r in range(p) if r != root]


@algorithm("binomial", "Reduce", default=True)
def _binomial_reduce(op: str, p: int, root: int) -> list[Message]:
    """Bcast's tree in reverse, leaves first; every message one block."""
    return _binomial_up(p, root, False)


@algorithm("binomial", "Gather", default=True)
def _binomial_gather(op: str, p: int, root: int) -> list[Message]:
    """Reduce's tree, each message carrying the blocks of the subtree below its sender."""
    return _binomial_up(p, root, True)


@algorithm("linear", "Reduce", "Gather", "Gatherv", default=("Gatherv",))
def _linear_to_root(op: str, p: int, root: int) -> list[Message]:
    """Every other rank sends its block to the root in one step."""
    return [(0, r, root, r, 1) for r in range(p) if r != root]


@algorithm("recursive_doubling", "Allreduce", default=True)
def _recursive_doubling(op: str, p: int, root: int) -> list[Message]:
    """Ranks beyond the largest power of two p2 fold into r - p2, then log2(p2) exchanges with
    r xor 2^i, then the result goes back out."""
    return _recursive_doubling_allreduce(p)


@algorithm("ring", "Allreduce")
def _ring_allreduce(op: str, p: int, root: int) -> list[Message]:
    """Reduce-scatter then allgather round a ring: 2(p-1) steps of 1/p of the block each."""
    return [(s, r, (r + 1) % p, r, 1.0 / p) for s in range(2 * (p - 1)) for r in range(p)]


@algorithm("reduce_bcast", "Allreduce")
def _reduce_bcast(op: str, p: int, root: int) -> list[Message]:
    """A binomial Reduce to rank 0, then a binomial Bcast from it."""
    up = _binomial_up(p, 0, False)
    off = max((m[0] for m in up), default=-1) + 1
    return up + [(s + off, a, b, o, m) for s, a, b, o, m in _binomial_down(p, 0, False)]


@algorithm("ring", "Allgather", "Allgatherv", default=True)
def _ring_allgather(op: str, p: int, root: int) -> list[Message]:
    """p - 1 steps: rank r passes the block of rank r - s to r + 1."""
    return [(s, r, (r + 1) % p, (r - s) % p, 1) for s in range(p - 1) for r in range(p)]


@algorithm("recursive_doubling", "Allgather")
def _recursive_doubling_allgather(op: str, p: int, root: int) -> list[Message]:
    """Step i: rank r exchanges its 2^i gathered blocks with r xor 2^i. Only for a power of two
    ranks; otherwise the ring."""
    if p & (p - 1) == 0:
        return [(i, r, r ^ (1 << i), r, 1 << i) for i in range(p.bit_length() - 1)
                for r in range(p)]
    return _ring_allgather(op, p, root)


def _all_to_all(op: str, p: int, step: Callable[[int], int]) -> list[Message]:
    # Alltoallv records the total a rank sends: split evenly over its peers.
    mult = 1.0 / (p - 1) if op == "Alltoallv" else 1
    return [(step(s), r, (r + s) % p, r, mult) for s in range(1, p) for r in range(p)]


@algorithm("pairwise", *_ALL_TO_ALL_OPS, default=True)
def _pairwise(op: str, p: int, root: int) -> list[Message]:
    """Step s (1..p-1): rank r sends its block for r + s to it."""
    return _all_to_all(op, p, lambda s: s - 1)


@algorithm("linear", "Alltoall", "Alltoallv")
def _linear_all_to_all(op: str, p: int, root: int) -> list[Message]:
    """Every rank posts all its p - 1 messages at once."""
    return _all_to_all(op, p, lambda s: 0)


@algorithm("recursive_doubling", "Scan", "Exscan", default=True)
def _recursive_doubling_scan(op: str, p: int, root: int) -> list[Message]:
    """Step i: rank r sends its partial result to r + 2^i (when that rank exists)."""
    return [(i, r, r + (1 << i), r, 1) for i in range(_log2ceil(p)) for r in range(p)
            if r + (1 << i) < p]


@algorithm("linear", "Scan", "Exscan")
def _linear_scan(op: str, p: int, root: int) -> list[Message]:
    """A chain: step s, rank s passes its prefix to s + 1."""
    return [(s, s, s + 1, s, 1) for s in range(p - 1)]


# listed in the trace format's op order, whatever the order of registration above
for _table in (ALGORITHMS, DEFAULT_ALGORITHMS):
    _ordered = sorted(_table.items(), key=lambda kv: OP_CODE[kv[0]])
    _table.clear()
    _table.update(_ordered)


def _messages(op: str, algo: str, p: int, root: int) -> list[Message]:
    if p <= 1:
        return []
    build = _BUILDERS.get((op, algo))
    if build is None:
        raise ValueError(f"no pattern for collective {op} by algorithm {algo}")
    return build(op, p, root)


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
