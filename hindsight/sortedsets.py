"""Sets of integers as sorted arrays, found by sorting.

NumPy 2.3 and later find ``np.unique(a)``'s values (no ``return_*`` asked) with a hash table,
as do ``np.setdiff1d``, ``np.union1d`` and the sorting path of ``np.isin`` through it. On this
project's machines that took 40-70 times as long as a sort for a million or more distinct
integers (0.48 s against 0.012 s at a million) and 4-6 times as long for integers of 64 values
(``benchmarks/unique_speed.py``). These functions sort instead; they are for integer arrays,
the row numbers, ranks and codes the replay works on, and give what NumPy's give for them.
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


def contains(sorted_set: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Whether each of ``values`` is in ``sorted_set`` (sorted, as ``unique`` gives it): a
    binary search each."""
    values = np.asarray(values)
    if not len(sorted_set):
        return np.zeros(values.shape, np.bool_)
    at = np.minimum(np.searchsorted(sorted_set, values), len(sorted_set) - 1)
    return sorted_set[at] == values


def setdiff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The distinct values of ``a`` that are not in ``b``, sorted: ``np.setdiff1d(a, b)``."""
    ua = unique(a)
    return ua[~contains(unique(b), ua)]
