"""The matching queues of the LogGOPSim simulator split by key: each send's and receive's
(receiver, source, tag) bucket, numbered once before the simulation runs."""

from __future__ import annotations

import numba as nb
import numpy as np

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
    as many as the operations). Keys are numbered in their order.
    The earliest-posted head of a message's candidate buckets is the first posted receive that
    matches it, as in a scan of the whole queue."""
    n = len(kind)
    nmsg, tmin, tmax, wild = _message_tags(kind, peer, tag)
    wild_any = bool(wild)
    if nmsg:
        lo = min(ANY, int(tmin))
        T = max(ANY, int(tmax)) - lo + 1
        span = (P + 1) ** 2 * T
        if span <= 8 * nmsg + 2**16 and nmsg < 2**31:
            # few possible keys: one pass over the operations numbers them through a table over
            # all of them, no sort and no per-message temporaries (4 bytes a possible key, at
            # most what np.unique's sort and inverse take, some 32 bytes a key)
            return _table_buckets(P, T, lo, rank, kind, peer, tag, span, wild_any,
                                  np.zeros(0, index))
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
    wild = (peer[rcv] == ANY) | (tag[rcv] == ANY)
    ubucket = bucket.copy()
    ubucket[rcv[wild]] = -2
    cand = np.full((n, 4 if wild_any else 1), -1, index)
    cand[snd, 0] = bucket[snd]
    if wild_any:
        d = peer[snd].astype(np.int64) * (P + 1)     # keys with (src, ANY), (ANY, tag), (ANY, ANY)
        to, any_src = (d + rank[snd] + 1) * T, (d + ANY + 1) * T
        for j, kj in enumerate((to + t_any, any_src + s_tid, any_src + t_any), 1):
            pos = np.minimum(np.searchsorted(keys, kj), len(keys) - 1)
            cand[snd, j] = np.where(keys[pos] == kj, pos, -1)
    return bucket, cand, ubucket, np.int64(max(len(keys), 1))


@nb.njit(cache=True, nogil=True)
def _message_tags(kind, peer, tag):
    """(sends and receives, their least and greatest tag, whether a receive has a wildcard) in
    one pass (as array expressions: half a dozen temporaries over every operation)."""
    nmsg = 0
    tmin = np.int64(0)
    tmax = np.int64(0)
    wild = False
    for i in range(len(kind)):
        if kind[i] != CALC:
            t = np.int64(tag[i])
            if nmsg == 0 or t < tmin:
                tmin = t
            if nmsg == 0 or t > tmax:
                tmax = t
            nmsg += 1
            if kind[i] == RECV and (peer[i] == ANY or tag[i] == ANY):
                wild = True
    return nmsg, tmin, tmax, wild


@nb.njit(cache=True, nogil=True, inline="always")
def _key(P, T, dst, src, t):
    return (np.int64(dst) * (P + 1) + (np.int64(src) + 1)) * T + t


@nb.njit(cache=True, nogil=True)
def _table_buckets(P, T, lo, rank, kind, peer, tag, span, wild_any, index_proto):
    """``match_buckets`` through a table over the ``span`` possible keys, tags numbered as the
    tag less ``lo`` (keys numbered in their order, as np.unique numbers them)."""
    n = len(kind)
    table = np.zeros(span, np.int32)     # fewer than 2**31 keys: the caller's check
    for i in range(n):
        if kind[i] == SEND:
            table[_key(P, T, peer[i], rank[i], tag[i] - lo)] = 1
        elif kind[i] == RECV:
            table[_key(P, T, rank[i], peer[i], tag[i] - lo)] = 1
    c = 0
    for k in range(span):
        if table[k]:
            table[k] = c
            c += 1
        else:
            table[k] = -1
    bucket = np.full(n, -1, index_proto.dtype)
    ubucket = np.full(n, -1, index_proto.dtype)
    cand = np.full((n, 4 if wild_any else 1), -1, index_proto.dtype)
    t_any = ANY - lo
    for i in range(n):
        if kind[i] == SEND:
            d, src, t = peer[i], rank[i], tag[i] - lo
            b = table[_key(P, T, d, src, t)]
            bucket[i] = b
            ubucket[i] = b
            cand[i, 0] = b
            if wild_any:
                cand[i, 1] = table[_key(P, T, d, src, t_any)]
                cand[i, 2] = table[_key(P, T, d, ANY, t)]
                cand[i, 3] = table[_key(P, T, d, ANY, t_any)]
        elif kind[i] == RECV:
            b = table[_key(P, T, rank[i], peer[i], tag[i] - lo)]
            bucket[i] = b
            ubucket[i] = -2 if peer[i] == ANY or tag[i] == ANY else b
    return bucket, cand, ubucket, np.int64(max(c, 1))
