"""Sets of integers as sorted arrays, found by sorting.

NumPy 2.3 and later find ``np.unique(a)``'s values (no ``return_*`` asked) with a hash table,
as do ``np.setdiff1d``, ``np.union1d`` and the sorting path of ``np.isin`` through it. On this
project's machines that took 40-70 times as long as a sort for a million or more distinct
integers (0.48 s against 0.012 s at a million) and 4-6 times as long for integers of 64 values
(``benchmarks/unique_speed.py``). These functions sort instead; they are for integer arrays,
the row numbers, ranks and codes the replay works on, and give what NumPy's give for them.

Lookups (``positions``, ``contains``) search for the values in sorted order: ``np.searchsorted``
starts each search from the last one's answer when the values come sorted, and a million
binary searches in random order missed the cache 3 times as long as sorting them first took
(0.33 s against 0.11 s for a million values in a set of a million).
"""

from __future__ import annotations

import numpy as np


def unique(a: np.ndarray) -> np.ndarray:
    """The distinct values of ``a`` (any shape, flattened), sorted: ``np.unique(a)``."""
    s = np.sort(np.asarray(a).ravel())
    if len(s) < 2:
        return s
    keep = np.empty(len(s), np.bool_)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


#: below this many values, searching them in their own order costs less than sorting them
_SORT_LOOKUPS = 1 << 14


def positions(sorted_set: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``np.searchsorted(sorted_set, values)`` (int64, ``values``' shape), the values searched in
    sorted order when there are many and they are not sorted already."""
    values = np.asarray(values)
    flat = values.ravel()
    if len(flat) < _SORT_LOOKUPS or not (flat[1:] < flat[:-1]).any():
        return np.searchsorted(sorted_set, values).astype(np.int64, copy=False)
    order = np.argsort(flat)
    out = np.empty(len(flat), np.int64)
    out[order] = np.searchsorted(sorted_set, flat[order])
    return out.reshape(values.shape)


def contains(sorted_set: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Whether each of ``values`` is in ``sorted_set`` (sorted, as ``unique`` gives it): a
    binary search each (``positions``)."""
    values = np.asarray(values)
    if not len(sorted_set):
        return np.zeros(values.shape, np.bool_)
    at = np.minimum(positions(sorted_set, values), len(sorted_set) - 1)
    return sorted_set[at] == values


def setdiff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The distinct values of ``a`` that are not in ``b``, sorted: ``np.setdiff1d(a, b)``."""
    ua = unique(a)
    return ua[~contains(unique(b), ua)]
