"""Hot kernels of sorting: the linear two-way merge (numba) and a k-way merge built from it."""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def merge2(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Linear two-way merge of two sorted arrays (stable: ties take ``a`` first)."""
    na, nb = a.size, b.size
    out = np.empty(na + nb, dtype=a.dtype)
    i = j = k = 0
    while i < na and j < nb:
        if b[j] < a[i]:
            out[k] = b[j]
            j += 1
        else:
            out[k] = a[i]
            i += 1
        k += 1
    while i < na:
        out[k] = a[i]
        i += 1
        k += 1
    while j < nb:
        out[k] = b[j]
        j += 1
        k += 1
    return out


def merge_many(runs: list[np.ndarray]) -> np.ndarray:
    """Merge k sorted runs by a balanced tree of two-way merges: O(n log k)."""
    runs = [r for r in runs if r.size]
    if not runs:
        return np.empty(0, dtype=np.int64)
    while len(runs) > 1:
        nxt = [merge2(runs[i], runs[i + 1]) for i in range(0, len(runs) - 1, 2)]
        if len(runs) % 2:
            nxt.append(runs[-1])
        runs = nxt
    return runs[0]


def quicksort(a: np.ndarray) -> np.ndarray:
    """The task of paper 000 §VII-D: quicksort one array (numpy's introsort)."""
    return np.sort(a, kind="quicksort")
