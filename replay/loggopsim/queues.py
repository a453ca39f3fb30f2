"""The data structures of the LogGOPSim simulator (``replay.loggopsim.simulator``), compiled:
its event heap, FIFO lists, and the parking of events that wait for a busy resource.

The event heap is a binary heap of (time, key) in two flat arrays, the key being the insertion
stamp above the event's code; equal times pop in stamp order, as LogGOPSim's STRICT_ORDER. Like
the simulator, this module is the peer's algorithm alone and imports nothing of hindsight.
"""

from __future__ import annotations

import numpy as np

from hindsight.jit import njit

from .codes import ANY


# An entry's key is its insertion stamp above its code: equal times pop in stamp order, and the
# heap moves two arrays where it moved three (``heap_key``).
CODE_BITS = 32


@njit(cache=True, nogil=True, inline="always")
def heap_key(stamp, code, n):
    """The heap key of an event: ``stamp`` in the high bits, ``code`` (in [-n, 2^32 - n)) in the
    low ``CODE_BITS``. Stamps are unique, so keys order as stamps do."""
    return (np.int64(stamp) << CODE_BITS) | np.int64(code + n)


@njit(cache=True, nogil=True, inline="always")
def heap_less(t1, k1, t2, k2):
    return t1 < t2 or (t1 == t2 and k1 < k2)


@njit(cache=True, nogil=True, inline="always")
def _sift_up(ht, hk, i, t, key):
    """Put (t, key) into the hole at i, moving the parents it precedes down into the hole
    instead of swapping (a third of the stores)."""
    while i > 0:
        p = (i - 1) >> 1
        if not heap_less(t, key, ht[p], hk[p]):
            break
        ht[i] = ht[p]
        hk[i] = hk[p]
        i = p
    ht[i] = t
    hk[i] = key


@njit(cache=True, nogil=True, inline="always")
def heap_push(ht, hk, nh, t, key):
    """Add (t, key); returns the new size."""
    _sift_up(ht, hk, nh, t, key)
    return nh + 1


@njit(cache=True, nogil=True, inline="always")
def heap_pop(ht, hk, nh):
    """Remove the top (returned by the caller reading index 0 first); returns the new size.

    The hole left at the top moves down to a leaf along the lesser children (one comparison a
    level), then the last entry moves up into it from there: the last entry belongs near the
    bottom (a simulation's new events are mostly its latest), so this does about half the
    comparisons of sinking it from the top, each of which was a branch the CPU guessed wrong
    half the time."""
    nh -= 1
    i = 0
    while True:
        k = 2 * i + 1
        if k >= nh:
            break
        if k + 1 < nh and heap_less(ht[k + 1], hk[k + 1], ht[k], hk[k]):
            k += 1
        ht[i] = ht[k]
        hk[i] = hk[k]
        i = k
    _sift_up(ht, hk, i, ht[nh], hk[nh])
    return nh


@njit(cache=True, nogil=True)
def heap_grow(ht, hk, need):
    cap = max(2 * len(ht), need)
    ht2 = np.empty(cap)
    hk2 = np.empty(cap, np.int64)
    ht2[:len(ht)] = ht
    hk2[:len(hk)] = hk
    return ht2, hk2


@njit(cache=True, nogil=True, inline="always")
def park_token(grp, n, pk_h, pk_s, floor, tok_t, tok_s, ht, hk, nh):
    """Put group grp's token in the heap at (its floor, its head's stamp), unless it is there."""
    t = floor[grp]
    s = pk_s[pk_h[grp]]
    if tok_t[grp] != t or tok_s[grp] != s:
        tok_t[grp] = t
        tok_s[grp] = s
        nh = heap_push(ht, hk, nh, t, heap_key(s, n + grp, n))
    return nh


@njit(cache=True, nogil=True, inline="always")
def park(node, st, grp, free_at, n, pk_n, pk_p, pk_s, pk_h, pk_t, floor, tok_t, tok_s,
          ht, hk, nh):
    """Rule *wait for the resource*: an event (node: op x, or n + m for the message of send m)
    that finds its CPU/NIC busy until ``free_at`` waits for it keeping its stamp.

    LogGOPSim re-queues each such event at ``free_at``; with k events waiting on one busy CPU
    that is k heap operations every time the CPU frees (quadratic in a backlog). Here the events
    waiting on one resource group (a CPU for calcs; a CPU and send NIC for sends; a CPU and
    receive NIC for arrivals) wait in stamp order behind one token at (floor, first stamp),
    floor being the latest ``free_at`` seen. The order is LogGOPSim's: a resource's free time
    only grows, so every waiting event would have been re-queued at or after the floor, and
    there they run in stamp order; a token that finds the resource busy again moves the floor."""
    pk_s[node] = st
    y = pk_t[grp]
    while y >= 0 and pk_s[y] > st:
        y = pk_p[y]
    if y < 0:
        pk_p[node] = -1
        pk_n[node] = pk_h[grp]
        if pk_h[grp] >= 0:
            pk_p[pk_h[grp]] = node
        else:
            pk_t[grp] = node
        pk_h[grp] = node
    else:
        pk_p[node] = y
        pk_n[node] = pk_n[y]
        if pk_n[y] >= 0:
            pk_p[pk_n[y]] = node
        else:
            pk_t[grp] = node
        pk_n[y] = node
    floor[grp] = max(floor[grp], free_at)
    return park_token(grp, n, pk_h, pk_s, floor, tok_t, tok_s, ht, hk, nh)


@njit(cache=True, nogil=True, inline="always")
def list_append(x, q, head, tail, nxt, prv):
    """Append element x to FIFO list q (doubly linked through nxt/prv)."""
    nxt[x] = -1
    prv[x] = tail[q]
    if tail[q] >= 0:
        nxt[tail[q]] = x
    else:
        head[q] = x
    tail[q] = x


@njit(cache=True, nogil=True, inline="always")
def list_unlink(x, q, head, tail, nxt, prv):
    """Remove element x from list q."""
    if prv[x] >= 0:
        nxt[prv[x]] = nxt[x]
    else:
        head[q] = nxt[x]
    if nxt[x] >= 0:
        prv[nxt[x]] = prv[x]
    else:
        tail[q] = prv[x]


@njit(cache=True, nogil=True)
def sort_head(a, k):
    """Sort a[:k] in place: a heapsort, which allocates nothing (the simulator's loop is compiled
    without reference counting, where numba's own sort cannot run)."""
    for i in range(k // 2 - 1, -1, -1):
        _sift_down(a, i, k)
    for end in range(k - 1, 0, -1):
        a[0], a[end] = a[end], a[0]
        _sift_down(a, 0, end)


@njit(cache=True, nogil=True, inline="always")
def _sift_down(a, i, k):
    v = a[i]
    while True:
        c = 2 * i + 1
        if c >= k:
            break
        if c + 1 < k and a[c + 1] > a[c]:
            c += 1
        if a[c] <= v:
            break
        a[i] = a[c]
        i = c
    a[i] = v


@njit(cache=True, nogil=True)
def scan_unexpected(x, h, rank, peer, tag, uq_h, qn):
    """The first arrived message a receive x with a wildcard matches (-1: none): rank h's
    arrived messages scanned in arrival order."""
    m = uq_h[h]
    while m >= 0:
        if (peer[x] == ANY or rank[m] == peer[x]) and (tag[x] == ANY or tag[m] == tag[x]):
            return m
        m = qn[m]
    return -1
