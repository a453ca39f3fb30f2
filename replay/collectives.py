"""Collectives as point-to-point patterns of named algorithms; by default the one MPICH's own
selection runs for the instance's size (``replay.selection``).

A pattern is a list of messages (step, src, dst, owner, mult[, combine]) over
communicator-local ranks: in step ``step`` local rank ``src`` sends ``mult`` times the block size
of local rank ``owner`` to ``dst`` (the block size is the ``nbytes`` that rank recorded, see
docs/trace-format.md). Each member executes the steps in order; within a step it posts its sends
and receives, then waits for the receives and the sends (so exchanges in both directions cannot
deadlock). ``combine`` (1; absent: 0) marks a message of a reduction whose receiver combines its
data with its own (rule ``reduction_combine``: the receiver computes for γ·k once the step's waits
are done, ``replay.patterns.combine_steps``); the reductions mark their reducing phases, not the
phases that only pass reduced data on.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from hindsight.trace.core import OP_CODE
from replay import kernel as K
from replay.selection import RULES, SELECTION, choose

#: A message of a pattern: (step, src, dst, owner, mult[, combine]), ranks local to the
#: communicator.
Message = tuple


def _combined(msgs: list[Message]) -> list[Message]:
    """``msgs`` marked as combined by their receivers (the reducing phase of a reduction)."""
    return [tuple(m[:5]) + (1,) for m in msgs]

#: (collective, algorithm) -> the function that lists its messages: ``fn(op, p, root)``
_BUILDERS: dict[tuple[str, str], Callable[[str, int, int], list[Message]]] = {}
#: collective -> its algorithms, in the order ``--algo`` lists them
ALGORITHMS: dict[str, tuple[str, ...]] = {}
#: collective -> the algorithm used unless ``--algo OP=NAME`` says otherwise: ``SELECTION``
#: ("mpich"), which picks per instance what MPICH would (``replay.selection``)
DEFAULT_ALGORITHMS: dict[str, str] = {}


def algorithm(name: str, *ops: str):
    """Register the decorated ``fn(op, p, root) -> list[Message]`` as algorithm ``name`` of the
    collectives ``ops``. Its docstring says which messages it sends, step by step."""
    def register(fn: Callable[[str, int, int], list[Message]]):
        for op in ops:
            _BUILDERS[(op, name)] = fn
            ALGORITHMS[op] = ALGORITHMS.get(op, ()) + (name,)
        return fn
    return register


def _log2ceil(p: int) -> int:
    return max(int(p - 1).bit_length(), 0)


def _subtree(p: int, w: int, j: int) -> int:
    """Members of relative rank w's subtree when w joins the binomial tree in round j: w and
    every w + m·2^(j+1) below p (w forwards to w + 2^(j+1), w + 2^(j+2), ... in later rounds),
    ceil((p − w) / 2^(j+1)). A Scatter passes w that many blocks, a Gather receives them."""
    return (p - w + (1 << (j + 1)) - 1) >> (j + 1)


def _binomial_down(p: int, root: int, sub: bool):
    """Bcast/Scatter: round j, relative rank v < 2^j sends to v + 2^j (Scatter: the blocks of
    that rank's subtree)."""
    out = []
    for j in range(_log2ceil(p)):
        for v in range(1 << j):
            w = v + (1 << j)
            if w < p:
                mult = _subtree(p, w, j) if sub else 1
                out.append((j, (v + root) % p, (w + root) % p, root, mult))
    return out


def _binomial_up(p: int, root: int, sub: bool):
    """Reduce/Gather: the reverse, leaves first (Gather: each rank sends its subtree's
    blocks)."""
    out = []
    top = _log2ceil(p)
    for s, j in enumerate(range(top - 1, -1, -1)):
        for v in range(1 << j):
            w = v + (1 << j)
            if w < p:
                mult = _subtree(p, w, j) if sub else 1
                out.append((s, (w + root) % p, (v + root) % p, (w + root) % p, mult))
    return out


def _recursive_doubling_allreduce(p: int):
    p2 = 1 << (p.bit_length() - 1)
    out = [(0, r, r - p2, r, 1, 1) for r in range(p2, p)]
    nsteps = p2.bit_length() - 1
    for i in range(nsteps):
        out += [(1 + i, r, r ^ (1 << i), r, 1, 1) for r in range(p2)]
    out += [(1 + nsteps, r - p2, r, r, 1) for r in range(p2, p)]
    return out


_SYNC_OPS = ("Barrier", "Comm_split", "Comm_dup", "Comm_create", "Win_create", "Win_fence",
             "Win_free")
#: synchronisations whose messages carry no data (a window's creation exchanges a few words)
_EMPTY_OPS = ("Barrier", "Win_create", "Win_fence", "Win_free")
_ALL_TO_ALL_OPS = ("Alltoall", "Alltoallv", "Reduce_scatter", "Reduce_scatter_block")


@algorithm("dissemination", *_SYNC_OPS)
def _dissemination(op: str, p: int, root: int) -> list[Message]:
    """Step i: rank r sends to r + 2^i (mod p); ceil(log2 p) steps. The messages of a Barrier
    and of a window's creation, fence and free carry no data; communicator creation's carry the
    recorded size."""
    mult = 0 if op in _EMPTY_OPS else 1
    return [(i, r, (r + (1 << i)) % p, r, mult) for i in range(_log2ceil(p)) for r in range(p)]


@algorithm("linear", "Barrier")
def _linear_barrier(op: str, p: int, root: int) -> list[Message]:
    """Every rank tells rank 0, then rank 0 tells every rank (empty messages)."""
    return [(0, r, 0, r, 0) for r in range(p) if r] + [(1, 0, r, 0, 0) for r in range(p) if r]


@algorithm("binomial", "Bcast")
def _binomial_bcast(op: str, p: int, root: int) -> list[Message]:
    """Round j: relative rank v < 2^j sends the root's block to v + 2^j."""
    return _binomial_down(p, root, False)


@algorithm("binomial", "Scatter")
def _binomial_scatter(op: str, p: int, root: int) -> list[Message]:
    """As Bcast, each message carrying the blocks of the subtree below its receiver."""
    return _binomial_down(p, root, True)


@algorithm("linear", "Bcast", "Scatter", "Scatterv")
def _linear_from_root(op: str, p: int, root: int) -> list[Message]:
    """The root sends to every other rank in one step (Bcast: its block; Scatter: theirs)."""
    owner_is_root = op == "Bcast"
    return [(0, root, r, root if owner_is_root else r, 1) for r in range(p) if r != root]


@algorithm("binomial", "Reduce")
def _binomial_reduce(op: str, p: int, root: int) -> list[Message]:
    """Bcast's tree in reverse, leaves first; every message one block, combined by its
    receiver."""
    return _combined(_binomial_up(p, root, False))


@algorithm("binomial", "Gather")
def _binomial_gather(op: str, p: int, root: int) -> list[Message]:
    """Reduce's tree, each message carrying the blocks of the subtree below its sender."""
    return _binomial_up(p, root, True)


@algorithm("linear", "Reduce", "Gather", "Gatherv")
def _linear_to_root(op: str, p: int, root: int) -> list[Message]:
    """Every other rank sends its block to the root in one step (Reduce: the root combines
    each)."""
    msgs = [(0, r, root, r, 1) for r in range(p) if r != root]
    return _combined(msgs) if op == "Reduce" else msgs


@algorithm("recursive_doubling", "Allreduce")
def _recursive_doubling(op: str, p: int, root: int) -> list[Message]:
    """Ranks beyond the largest power of two p2 fold into r - p2, then log2(p2) exchanges with
    r xor 2^i (each combined by its receiver), then the result goes back out."""
    return _recursive_doubling_allreduce(p)


@algorithm("ring", "Allreduce")
def _ring_allreduce(op: str, p: int, root: int) -> list[Message]:
    """Reduce-scatter then allgather round a ring: 2(p-1) steps of 1/p of the block each (the
    first p - 1 combined by their receivers)."""
    return [(s, r, (r + 1) % p, r, 1.0 / p, int(s < p - 1)) for s in range(2 * (p - 1))
            for r in range(p)]


@algorithm("reduce_bcast", "Allreduce")
def _reduce_bcast(op: str, p: int, root: int) -> list[Message]:
    """A binomial Reduce to rank 0 (combined), then a binomial Bcast from it."""
    up = _combined(_binomial_up(p, 0, False))
    off = max((m[0] for m in up), default=-1) + 1
    return up + [(s + off, a, b, o, m) for s, a, b, o, m in _binomial_down(p, 0, False)]


@algorithm("ring", "Allgather", "Allgatherv")
def _ring_allgather(op: str, p: int, root: int) -> list[Message]:
    """p - 1 steps: rank r passes the block of rank r - s to r + 1."""
    return [(s, r, (r + 1) % p, (r - s) % p, 1) for s in range(p - 1) for r in range(p)]


@algorithm("recursive_doubling", "Allgather", "Allgatherv")
def _recursive_doubling_allgather(op: str, p: int, root: int) -> list[Message]:
    """Step i: rank r exchanges its 2^i gathered blocks with r xor 2^i (Allgatherv: 2^i times
    r's own block). Only for a power of two ranks; otherwise the ring."""
    if p & (p - 1) == 0:
        return [(i, r, r ^ (1 << i), r, 1 << i) for i in range(p.bit_length() - 1)
                for r in range(p)]
    return _ring_allgather(op, p, root)


def _all_to_all(op: str, p: int, step: Callable[[int], int]) -> list[Message]:
    # Alltoallv records the total a rank sends: split evenly over its peers. Reduce_scatter
    # records its whole send buffer (every member's share): a peer gets its share, 1/p of it,
    # and combines it with its own.
    mult = 1.0 / (p - 1) if op == "Alltoallv" else 1.0 / p if op == "Reduce_scatter" else 1
    msgs = [(step(s), r, (r + s) % p, r, mult) for s in range(1, p) for r in range(p)]
    return _combined(msgs) if op.startswith("Reduce_scatter") else msgs


@algorithm("pairwise", *_ALL_TO_ALL_OPS)
def _pairwise(op: str, p: int, root: int) -> list[Message]:
    """Step s (1..p-1): rank r sends its block for r + s to it."""
    return _all_to_all(op, p, lambda s: s - 1)


@algorithm("linear", "Alltoall", "Alltoallv")
def _linear_all_to_all(op: str, p: int, root: int) -> list[Message]:
    """Every rank posts all its p - 1 messages at once."""
    return _all_to_all(op, p, lambda s: 0)


@algorithm("recursive_doubling", "Scan", "Exscan")
def _recursive_doubling_scan(op: str, p: int, root: int) -> list[Message]:
    """Step i: rank r sends its partial result to r + 2^i (when that rank exists), which
    combines it."""
    return [(i, r, r + (1 << i), r, 1, 1) for i in range(_log2ceil(p)) for r in range(p)
            if r + (1 << i) < p]


@algorithm("linear", "Scan", "Exscan")
def _linear_scan(op: str, p: int, root: int) -> list[Message]:
    """A chain: step s, rank s passes its prefix to s + 1, which combines it."""
    return [(s, s, s + 1, s, 1, 1) for s in range(p - 1)]


def _offset(msgs: list[Message], off: int) -> list[Message]:
    return [(m[0] + off,) + tuple(m[1:]) for m in msgs]


def _next_step(msgs: list[Message]) -> int:
    return max((m[0] for m in msgs), default=-1) + 1


def _fold(p: int) -> tuple[list[Message], list[Message], list[int]]:
    """MPICH's reduction onto a power of two pof2 <= p ranks: of the first 2 rem ranks (rem =
    p - pof2) each even one sends its whole block to the odd one above it and sits out. Returns
    (the fold-in messages, the messages that hand the result back, the world rank of each of the
    pof2 remaining ranks); the hand-back is empty unless the caller needs it."""
    pof2 = 1 << (p.bit_length() - 1)
    rem = p - pof2
    into = [(0, 2 * i, 2 * i + 1, 2 * i, 1) for i in range(rem)]
    back = [(0, 2 * i + 1, 2 * i, 2 * i + 1, 1) for i in range(rem)]
    real = [2 * v + 1 if v < rem else v + rem for v in range(pof2)]
    return into, back, real


def _halving(real: list[int], total: float, masks: list[int]) -> list[Message]:
    """Reduce-scatter by recursive halving among the ranks ``real`` (a power of two of them):
    at each mask m of ``masks`` (in order), rank v exchanges with v xor m half of what it still
    holds; ``total`` blocks to start with."""
    out = []
    held = float(total)
    for k, m in enumerate(masks):
        held /= 2
        out += [(k, real[v], real[v ^ m], real[v], held) for v in range(len(real))]
    return out


def _doubling_gather_all(real: list[int], total: float, masks: list[int]) -> list[Message]:
    """Allgather by recursive doubling among ``real`` (a power of two of them), each holding
    1/len(real) of ``total``: at each mask m of ``masks`` (in order), rank v sends all it holds
    to v xor m, which doubles it."""
    n = len(real)
    return [(k, real[v], real[v ^ m], real[v], total * (1 << k) / n)
            for k, m in enumerate(masks) for v in range(n)]


@algorithm("rabenseifner", "Allreduce")
def _rabenseifner_allreduce(op: str, p: int, root: int) -> list[Message]:
    """MPICH reduce_scatter_allgather. Fold to pof2 ranks (each even rank below 2(p - pof2)
    sends its block to the odd one above); reduce-scatter by recursive halving, masks 1, 2, ...
    pof2/2, sending 1/2, 1/4, ... 1/pof2 of the block; allgather by recursive doubling, masks
    pof2/2 ... 1, sending 1/pof2 ... 1/2; the odd ranks hand the result back. On a power of two,
    2(p-1)/p of the block sent per rank. The fold and the halving are combined by their
    receivers."""
    into, back, real = _fold(p)
    n = len(real)
    masks = [1 << k for k in range(n.bit_length() - 1)]
    out = _combined(into)
    out += _offset(_combined(_halving(real, 1, masks)), _next_step(out))
    out += _offset(_doubling_gather_all(real, 1, masks[::-1]), _next_step(out))
    return out + _offset(back, _next_step(out))


@algorithm("rabenseifner", "Reduce")
def _rabenseifner_reduce(op: str, p: int, root: int) -> list[Message]:
    """MPICH reduce_scatter_gather. Fold and reduce-scatter as Allreduce's Rabenseifner, then a
    binomial gather of the pieces to the root's stand-in among the pof2 ranks: at mask m (1, 2,
    ...) a rank whose distance (xor) to it has lowest set bit m sends its m/pof2 of the block to
    its partner; an even root below 2(p - pof2) then gets the result from the odd rank above.
    The fold and the halving are combined by their receivers."""
    into, _, real = _fold(p)
    n = len(real)
    rem = p - n
    new_root = root // 2 if root < 2 * rem else root - rem
    masks = [1 << k for k in range(n.bit_length() - 1)]
    out = _combined(into)
    out += _offset(_combined(_halving(real, 1, masks)), _next_step(out))
    gather = [(k, real[v], real[v ^ m], real[v], m / n) for k, m in enumerate(masks)
              for v in range(n) if (v ^ new_root) & (2 * m - 1) == m]
    out += _offset(gather, _next_step(out))
    if real[new_root] != root:
        out.append((_next_step(out), real[new_root], root, real[new_root], 1))
    return out


def _bcast_scatter(p: int, root: int) -> list[Message]:
    """Bcast's first half (MPICH's MPII_Scatter_for_bcast): the root's block in p chunks down
    a binomial tree, masks from the largest power of two below p down to 1: relative rank v
    (a multiple of 2m) sends to v + m its chunks v + m .. v + 2m - 1 (those below p)."""
    top = _log2ceil(p)
    return [(top - 1 - j, (v + root) % p, (v + (1 << j) + root) % p, root,
             min(1 << j, p - v - (1 << j)) / p)
            for j in range(top - 1, -1, -1) for v in range(0, p, 2 << j) if v + (1 << j) < p]


@algorithm("scatter_ring_allgather", "Bcast")
def _scatter_ring_allgather(op: str, p: int, root: int) -> list[Message]:
    """A binomial scatter of p chunks of 1/p of the root's block, then a ring allgather: p - 1
    steps, rank r passes one chunk to r + 1."""
    out = _bcast_scatter(p, root)
    off = _next_step(out)
    return out + [(off + s, r, (r + 1) % p, root, 1.0 / p) for s in range(p - 1) for r in range(p)]


@algorithm("scatter_recursive_doubling_allgather", "Bcast")
def _scatter_rd_allgather(op: str, p: int, root: int) -> list[Message]:
    """A binomial scatter of p chunks of 1/p of the root's block, then a recursive-doubling
    allgather over ranks relative to the root: step i, relative rank v sends its 2^i chunks to
    v xor 2^i. Only for a power of two ranks; otherwise the ring allgather."""
    if p & (p - 1):
        return _scatter_ring_allgather(op, p, root)
    out = _bcast_scatter(p, root)
    off = _next_step(out)
    return out + [(off + i, (v + root) % p, ((v ^ (1 << i)) + root) % p, root, (1 << i) / p)
                  for i in range(p.bit_length() - 1) for v in range(p)]


@algorithm("bruck", "Allgather", "Allgatherv")
def _bruck_allgather(op: str, p: int, root: int) -> list[Message]:
    """Step i while 2^i <= p/2: rank r sends the 2^i blocks it holds to r - 2^i; then, if p is
    not a power of two, the remaining p - 2^i blocks the same way. p - 1 blocks sent per rank
    (Allgatherv: counted in r's own block)."""
    out = []
    k, pof2 = 0, 1
    while pof2 <= p // 2:
        out += [(k, r, (r - pof2) % p, r, pof2) for r in range(p)]
        k, pof2 = k + 1, pof2 * 2
    if p - pof2:
        out += [(k, r, (r - pof2) % p, r, p - pof2) for r in range(p)]
    return out


@algorithm("bruck", "Alltoall")
def _bruck_alltoall(op: str, p: int, root: int) -> list[Message]:
    """Step i (2^i < p): rank r sends to r + 2^i the blocks whose index has bit i set (of the
    p, after a local rotation), as one message."""
    out = []
    for k in range(_log2ceil(p)):
        bit = 1 << k
        nblocks = sum(1 for j in range(p) if j & bit)
        out += [(k, r, (r + bit) % p, r, nblocks) for r in range(p)]
    return out


#: MPIR_CVAR_ALLTOALL_THROTTLE (default 32): peers a scattered all-to-all posts at a time.
ALLTOALL_THROTTLE = 32


@algorithm("scattered", "Alltoall", "Alltoallv")
def _scattered(op: str, p: int, root: int) -> list[Message]:
    """Nonblocking, ALLTOALL_THROTTLE peers at a time: step b, rank r sends its block for r - j
    to it for each j of batch b (j = 32b .. 32b + 31, j != 0, j < p), then waits for them all."""
    mult = 1.0 / (p - 1) if op == "Alltoallv" else 1
    return [(j // ALLTOALL_THROTTLE, r, (r - j) % p, r, mult) for j in range(1, p)
            for r in range(p)]


@algorithm("recursive_halving", "Reduce_scatter", "Reduce_scatter_block")
def _recursive_halving(op: str, p: int, root: int) -> list[Message]:
    """Fold to pof2 ranks (each even rank below 2(p - pof2) sends all its data to the odd one
    above), then recursive halving, masks pof2/2 ... 1: exchange half of what is still held;
    the odd ranks then send the even ones their share. The data is p blocks for
    Reduce_scatter_block (its block is one rank's share), the recorded buffer for
    Reduce_scatter (it holds all shares). The fold and the halving are combined by their
    receivers."""
    total = p if op == "Reduce_scatter_block" else 1
    into, back, real = _fold(p)
    n = len(real)
    out = [(s, a, b, o, total, 1) for s, a, b, o, _ in into]
    out += _offset(_combined(_halving(real, total,
                                      [1 << k for k in range(n.bit_length() - 2, -1, -1)])),
                   _next_step(out))
    return out + _offset([(s, a, b, o, total / p) for s, a, b, o, _ in back], _next_step(out))


def _selected(op: str, p: int, root: int) -> list[Message]:
    """MPICH's selection (``replay.selection``): the algorithm it runs for the instance's p and
    message size (the stream resolves it per instance); here, without a size, the one it runs
    for an empty message."""
    return _messages(op, choose(op, p, 0.0, 0.0), p, root)


for _op in list(ALGORITHMS):
    _BUILDERS[(_op, SELECTION)] = _selected
    ALGORITHMS[_op] += (SELECTION,)
    DEFAULT_ALGORITHMS[_op] = SELECTION
assert set(RULES) == set(ALGORITHMS)  # every collective has a rule, every rule a collective


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
    combine: np.ndarray  # per message: True where its receiver combines it (a reduction's)


@lru_cache(maxsize=256)
def pattern(op: str, algo: str, p: int, root: int) -> Pattern:
    """The pattern of collective ``op`` by algorithm ``algo`` on p local ranks (``root``: the
    root's local rank)."""
    return pattern_of(_messages(op, algo, p, root), p)


def pattern_of(msgs: list[Message], p: int) -> Pattern:
    """The pattern of the messages ``msgs`` among p local ranks. A message whose owner is -1
    carries ``mult`` bytes (a transfer of known size, not a multiple of a recorded block)."""
    if not msgs:
        e = np.zeros(0, np.int64)
        return Pattern(e, e, e, np.zeros(0), np.zeros(p + 1, np.int64), np.zeros(0, np.int8), e,
                       np.zeros(0, bool))
    arr = np.array([tuple(m) + (0,) * (6 - len(m)) for m in msgs], dtype=float)
    step = arr[:, 0].astype(np.int64)
    src = arr[:, 1].astype(np.int64)
    dst = arr[:, 2].astype(np.int64)
    owner = arr[:, 3].astype(np.int64)
    mult = arr[:, 4]
    combine = arr[:, 5] != 0
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
    return Pattern(src, dst, owner, mult, off, kinds, mid, combine)
