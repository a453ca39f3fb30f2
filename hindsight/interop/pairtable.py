"""Tables keyed by a pair of int64 (a rank and a request id), for compiled kernels that run
without numba's reference counting (``_nrt=False``), where a typed dict cannot be used.

Why: a kernel that hands arrays or typed dicts to its inlined helpers increments and decrements
their reference counts, an atomic add each, at every helper it enters; the OTF2 conversion
(``otf2_rows.convert``) takes twice as long so. Compiled without reference counting it cannot
hold a typed dict (numba's runtime manages those), so its request tables are these.

A table is one int64 array of shape (capacity, ``VAL`` + width), capacity a power of two:
column ``STATE`` says whether the slot is ``EMPTY`` or ``LIVE``, columns ``K0`` and ``K1`` hold
the key, the rest the value. Its count of entries is an element of a separate int64 array, so
that the kernel can check the room before it changes anything (``room``) and hand the
enlarging back to Python (``grown``). Open addressing with linear probing from a hash of the
key; a search ends at an empty slot, so a table is never filled past ``LOAD`` (the kernel
checks ``room`` before it puts). A removal moves the entries after it back into the hole where
their probes allow (Knuth's algorithm R), so that a table whose requests come and go never
fills with removed slots.
"""

from __future__ import annotations

import numpy as np

from hindsight.jit import njit

STATE, K0, K1, VAL = 0, 1, 2, 3
EMPTY, LIVE = 0, 1
LOAD_NUM, LOAD_DEN = 3, 4              # at most 3/4 of the slots live
_M0 = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def new_table(width: int, capacity: int = 1 << 10) -> np.ndarray:
    """An empty table with ``width`` value columns and room for ``capacity`` slots (rounded up
    to a power of two)."""
    cap = 1 << max(int(capacity) - 1, 1).bit_length()
    return np.zeros((cap, VAL + width), np.int64)


@njit(cache=True, inline="always")
def _home(t, k0, k1):
    """Where the probe of key (k0, k1) starts: the key mixed as splitmix64 mixes (every bit of
    both halves reaches the low bits a slot takes; ids that differ in high bits only would
    otherwise share a slot)."""
    h = (np.uint64(k0) * _M0) ^ np.uint64(k1)
    h = (h ^ (h >> np.uint64(30))) * _M1
    h = (h ^ (h >> np.uint64(27))) * _M2
    h ^= h >> np.uint64(31)
    return np.int64(h & np.uint64(t.shape[0] - 1))


@njit(cache=True, inline="always")
def _slot(t, k0, k1):
    """The slot holding key (k0, k1), or the empty slot that ends its probe."""
    mask = t.shape[0] - 1
    s = _home(t, k0, k1)
    while t[s, STATE] != EMPTY and not (t[s, K0] == k0 and t[s, K1] == k1):
        s = (s + 1) & mask
    return s


@njit(cache=True, inline="always")
def find(t, k0, k1):
    """The slot of key (k0, k1), -1 if it is not in the table."""
    s = _slot(t, k0, k1)
    return s if t[s, STATE] == LIVE else -1


@njit(cache=True, inline="always")
def put(t, counts, j, k0, k1):
    """The slot of key (k0, k1), made live if it was not (the caller writes its value);
    ``counts[j]`` counts the table's entries. Needs ``room`` for one entry."""
    s = _slot(t, k0, k1)
    if t[s, STATE] == EMPTY:
        t[s, STATE], t[s, K0], t[s, K1] = LIVE, k0, k1
        counts[j] += 1
    return s


@njit(cache=True, inline="always")
def remove(t, counts, j, s):
    """Remove the entry in slot ``s`` (a slot ``find`` gave); ``counts[j]``: see ``put``.
    Each later entry of the run of live slots moves back into the hole unless its home lies
    cyclically in (hole, its slot], where a search would no longer reach it."""
    mask = t.shape[0] - 1
    hole = s
    k = s
    while True:
        k = (k + 1) & mask
        if t[k, STATE] == EMPTY:
            break
        home = _home(t, t[k, K0], t[k, K1])
        if (home - hole - 1) & mask < (k - hole) & mask:
            continue                    # home in (hole, k]: it stays
        for c in range(t.shape[1]):
            t[hole, c] = t[k, c]
        hole = k
    t[hole, STATE] = EMPTY
    counts[j] -= 1


@njit(cache=True, inline="always")
def room(t, counts, j, n):
    """Whether ``n`` more entries can be put without passing ``LOAD``."""
    return (counts[j] + n) * LOAD_DEN <= t.shape[0] * LOAD_NUM


@njit(cache=True)
def _reinsert(old, new, counts, j):
    for s in range(old.shape[0]):
        if old[s, STATE] == LIVE:
            d = put(new, counts, j, old[s, K0], old[s, K1])
            new[d, VAL:] = old[s, VAL:]


def grown(t: np.ndarray, counts: np.ndarray, j: int, n: int) -> np.ndarray:
    """The table ``t`` with room for ``n`` more entries: its entries put into a new table twice
    as large as they need (``counts[j]`` counts them)."""
    need = int(counts[j]) + n
    new = new_table(t.shape[1] - VAL, max(need * 2 * LOAD_DEN // LOAD_NUM, t.shape[0]))
    counts[j] = 0
    _reinsert(t, new, counts, j)
    return new
