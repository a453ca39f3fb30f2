"""The matching queues of the LogGOPSim simulator split by key: each send's and receive's
(receiver, source, tag) bucket, numbered once before the simulation runs."""

from __future__ import annotations

import numpy as np

from hindsight.jit import njit

from .codes import ANY, CALC, RECV, SEND, ScheduleError


def match_buckets(P: int, rank: np.ndarray, kind: np.ndarray, peer: np.ndarray,
                   tag: np.ndarray, index=np.int64
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.int64]:
    """Matching queues split by key (receiver, source, tag), so a match costs O(1) however long
    a rank's backlog (LogGOPSim scans its queues: quadratic when messages pile up).

    Sends and receives share one numbering of keys (a receive's key has its wildcards). Returns
    ``bucket`` (each send's and each receive's key number), ``cand`` (per send, the posted-receive
    buckets its message can match: its own key, then, only if some receive has a wildcard,
    (source, ANY), (ANY, tag), (ANY, ANY); -1 where no receive has that key), ``ubucket`` (the
    unexpected-message bucket a receive takes from: its own key, or -2 for a receive with a
    wildcard, which scans its rank's arrived messages in arrival order) and the number of keys;
    the three arrays of ``index``'s type (the caller's operation numbers: the keys are at most
    as many as the operations). The numbers only name the queues: through the table, keys are
    numbered in the order the operations first use them; by the sort, in their order. Without a
    wildcard receive, ``cand`` is ``bucket`` as one column and ``ubucket`` is ``bucket``
    (``_aliased``).
    The earliest-posted head of a message's candidate buckets is the first posted receive that
    matches it, as in a scan of the whole queue."""
    n = len(kind)
    # per (receiver, source) pair its least and greatest tag (and their step); the pairs' tag
    # ranges laid end to end are the possible keys, numbered through a table over them when they are few
    lo, hi, shift, nmsg, wild_any, span = _pair_tags(P, rank, kind, peer, tag,
                                                     8 * len(kind) + 2**16)
    if nmsg and span <= 8 * nmsg + 2**16 and nmsg < 2**31:
        # one pass over the operations numbers them, no sort and no per-message temporaries
        # (4 bytes a possible key, at most what np.unique's sort and inverse take, some 32
        # bytes a key); a table per pair rather than over all pairs x all tags: tags that grow
        # with the rounds (a tag per round and step) made that one too large to use
        return _aliased(*_table_buckets(P, rank, kind, peer, tag, lo, hi, shift, span,
                                        wild_any, np.zeros(0, index)), wild_any)
    snd, rcv = np.flatnonzero(kind == SEND), np.flatnonzero(kind == RECV)
    ns = len(snd)
    # Per message (senders first) its tag, its tag's number, then its key, in one array changed
    # in place; a tag's number: the tag less the least, or its rank where keys would overflow.
    k = np.concatenate([tag[snd], tag[rcv]]).astype(np.int64)
    lo = min(ANY, int(k.min())) if len(k) else ANY
    T = (max(ANY, int(k.max())) if len(k) else ANY) - lo + 1
    if float(P + 1) ** 2 * T < 2.0 ** 62:
        k -= lo
        t_any = ANY - lo
    else:
        _, tid = np.unique(np.append(k, ANY), return_inverse=True)
        T = int(tid.max()) + 1
        if float(P + 1) ** 2 * T >= 2.0 ** 62:
            raise ScheduleError(f"too many ranks and tags to index ({P} ranks, {T} tags)")
        t_any = int(tid[-1])
        k[:] = tid[:-1]
    s_tid = k[:ns].copy() if wild_any else None
    pair = np.concatenate([peer[snd], rank[rcv]]).astype(np.int64)   # (receiver, source)
    pair *= P + 1
    pair += np.concatenate([rank[snd], peer[rcv]])
    pair += 1
    pair *= T
    k += pair
    del pair
    keys, ids = np.unique(k, return_inverse=True)
    del k
    bucket = np.full(n, -1, index)
    bucket[snd], bucket[rcv] = ids[:ns], ids[ns:]
    del ids
    nkeys = np.int64(max(len(keys), 1))
    if not wild_any:
        return _aliased(bucket, None, None, nkeys, False)
    wild = (peer[rcv] == ANY) | (tag[rcv] == ANY)
    ubucket = bucket.copy()
    ubucket[rcv[wild]] = -2
    cand = np.full((n, 4), -1, index)
    cand[snd, 0] = bucket[snd]
    d = peer[snd].astype(np.int64) * (P + 1)     # keys with (src, ANY), (ANY, tag), (ANY, ANY)
    to, any_src = (d + rank[snd] + 1) * T, (d + ANY + 1) * T
    for j, kj in enumerate((to + t_any, any_src + s_tid, any_src + t_any), 1):
        pos = np.minimum(np.searchsorted(keys, kj), len(keys) - 1)
        cand[snd, j] = np.where(keys[pos] == kj, pos, -1)
    return bucket, cand, ubucket, nkeys


def _aliased(bucket, cand, ubucket, nkeys, wild_any):
    """Without a wildcard receive, a send's only candidate and a receive's arrived-message bucket
    are its own bucket: ``cand`` and ``ubucket`` are ``bucket`` itself (the simulator reads
    ``cand`` of sends and ``ubucket`` of sends and receives only), two arrays fewer to write."""
    if wild_any:
        return bucket, cand, ubucket, nkeys
    return bucket, bucket.reshape(-1, 1), bucket, nkeys


@njit(cache=True, nogil=True)
def _pair_tags(P, rank, kind, peer, tag, limit):
    """Per (receiver, source + 1) pair, the least and greatest tag of its sends and receives
    (lo > hi: none) and the greatest power of two, as its log, that all their differences are
    multiples of; the sends and receives; whether a receive has a wildcard; the pairs' tag
    ranges' total length in those steps (counted up to ``limit`` only: far-apart tags would
    overflow it). The steps: tags that number rounds in their high bits (round · 2^k + step)
    leave most tags of a range unused, and a table 2^k times smaller is as many times fewer
    cache lines to touch."""
    npair = (P + 1) * (P + 1)
    lo = np.zeros(npair, np.int64)
    hi = np.full(npair, -1, np.int64)
    bits = np.zeros(npair, np.int64)    # the differences from the pair's first tag, or-ed
    first = np.zeros(npair, np.int64)
    nmsg = 0
    wild = False
    for i in range(len(kind)):
        if kind[i] == SEND:
            p = _pair(P, peer[i], rank[i])
        elif kind[i] == RECV:
            p = _pair(P, rank[i], peer[i])
            if peer[i] == ANY or tag[i] == ANY:
                wild = True
        else:
            continue
        t = np.int64(tag[i])
        if lo[p] > hi[p]:
            lo[p] = t
            hi[p] = t
            first[p] = t
        else:
            bits[p] |= t - first[p]
            if t < lo[p]:
                lo[p] = t
            elif t > hi[p]:
                hi[p] = t
        nmsg += 1
    shift = np.zeros(npair, np.int64)
    span = np.int64(0)
    for p in range(npair):
        if lo[p] <= hi[p]:
            d = hi[p] - lo[p]
            if d < 0 or d >= limit or span >= limit:   # (a difference of int64 tags may wrap)
                return lo, hi, shift, nmsg, wild, np.int64(limit + 1)
            b = bits[p]
            while b != 0 and (b & 1) == 0:
                b >>= 1
                shift[p] += 1
            span += (d >> shift[p]) + 1
    return lo, hi, shift, nmsg, wild, span


@njit(cache=True, nogil=True, inline="always")
def _pair(P, dst, src):
    """The (receiver, source + 1) pair's index (source ANY = -1 has its own)."""
    return np.int64(dst) * (P + 1) + (np.int64(src) + 1)


@njit(cache=True, nogil=True, inline="always")
def _slot(P, base, lo, shift, dst, src, t):
    """Key (dst, src, t)'s place in the table, for a key of some send or receive."""
    p = _pair(P, dst, src)
    return base[p] + ((np.int64(t) - lo[p]) >> shift[p])


@njit(cache=True, nogil=True, inline="always")
def _number(table, P, base, lo, hi, shift, dst, src, t):
    """Key (dst, src, t)'s number, -1 if no send or receive has it (``table`` holds numbers + 1,
    0 where unused)."""
    p = _pair(P, dst, src)
    d = np.int64(t) - lo[p]
    if t < lo[p] or t > hi[p] or (d & ((np.int64(1) << shift[p]) - 1)) != 0:
        return -1
    return table[base[p] + (d >> shift[p])] - 1


@njit(cache=True, nogil=True)
def _table_buckets(P, rank, kind, peer, tag, lo, hi, shift, span, wild_any, index_proto):
    """``match_buckets`` through a table over each pair's tag range in its steps
    (``_pair_tags``; pairs in their order, then tags)."""
    n = len(kind)
    base = np.zeros(len(lo), np.int64)
    at = np.int64(0)
    for p in range(len(lo)):
        base[p] = at
        if lo[p] <= hi[p]:
            at += ((hi[p] - lo[p]) >> shift[p]) + 1
    # Keys numbered in the order the operations first use them, in the pass that reads them:
    # a rank's successive messages then have nearby queues (in key order the pairwise
    # schedule's, to a new partner each step, were each a cache miss in the event loop), and no
    # pass over the table numbers it. The table holds a key's number + 1 (0: unused).
    table = np.zeros(span, np.int32)
    bucket = np.empty(n, index_proto.dtype)
    c = 0                   # fewer than 2**31 keys: the caller's check
    for i in range(n):
        if kind[i] == SEND:
            k = _slot(P, base, lo, shift, peer[i], rank[i], tag[i])
        elif kind[i] == RECV:
            k = _slot(P, base, lo, shift, rank[i], peer[i], tag[i])
        else:
            bucket[i] = -1
            continue
        if table[k] == 0:
            c += 1
            table[k] = c
        bucket[i] = table[k] - 1
    ubucket = np.empty(n if wild_any else 0, index_proto.dtype)
    cand = np.empty((n if wild_any else 0, 4), index_proto.dtype)
    if wild_any:
        for i in range(n):
            b = bucket[i]
            if kind[i] == SEND:
                d, src, t = peer[i], rank[i], tag[i]
                ubucket[i] = b
                cand[i, 0] = b
                cand[i, 1] = _number(table, P, base, lo, hi, shift, d, src, ANY)
                cand[i, 2] = _number(table, P, base, lo, hi, shift, d, ANY, t)
                cand[i, 3] = _number(table, P, base, lo, hi, shift, d, ANY, ANY)
            else:
                ubucket[i] = -2 if kind[i] == RECV and (peer[i] == ANY or tag[i] == ANY) else b
                cand[i, :] = -1
    return bucket, cand, ubucket, np.int64(max(c, 1))
