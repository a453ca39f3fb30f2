"""Union-find kernels (numba). A root vector maps each vertex to the smallest vertex id of its
component. Links always go from the larger root to the smaller one, so ``parent[v] <= v``
holds throughout, roots are component minima, and one ascending pass flattens the forest."""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _find(parent: np.ndarray, x: int) -> int:
    while parent[x] != x:
        parent[x] = parent[parent[x]]  # path halving keeps parent[x] <= x
        x = parent[x]
    return x


@njit(cache=True)
def _union(parent: np.ndarray, a: int, b: int) -> None:
    ra = _find(parent, a)
    rb = _find(parent, b)
    if ra < rb:
        parent[rb] = ra
    elif rb < ra:
        parent[ra] = rb


@njit(cache=True)
def _flatten(parent: np.ndarray) -> None:
    for v in range(parent.size):  # parent[v] <= v is already final when v is reached
        parent[v] = parent[parent[v]]


@njit(cache=True)
def conquer(n: int, edges: np.ndarray) -> np.ndarray:
    """Root vector of the graph on n vertices with the given (m, 2) edge array."""
    parent = np.arange(n, dtype=np.int64)
    for e in range(edges.shape[0]):
        _union(parent, edges[e, 0], edges[e, 1])
    _flatten(parent)
    return parent


@njit(cache=True)
def combine(r1: np.ndarray, r2: np.ndarray) -> np.ndarray:
    """Root vector of the union of the two graphs whose root vectors are r1 and r2."""
    parent = r1.copy()  # a valid forest already
    for v in range(r2.size):
        if r2[v] != v:
            _union(parent, v, r2[v])
    _flatten(parent)
    return parent
