"""Graph inputs: uniform random G(n, m), R-MAT (Graph500 parameters), edge-list files."""
from __future__ import annotations

import os

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from apps.common import InputError

# Graph500 Kronecker initiator
RMAT_A, RMAT_B, RMAT_C, RMAT_D = 0.57, 0.19, 0.19, 0.05


def gnm(n: int, m: int, seed: int) -> np.ndarray:
    """m edges with endpoints uniform over n vertices (multi-edges and loops may occur)."""
    rng = np.random.default_rng([seed, 1])
    return rng.integers(0, n, size=(m, 2), dtype=np.int64)


def rmat(scale: int, edge_factor: int, seed: int) -> np.ndarray:
    """Graph500's R-MAT generator: 2^scale vertices, edge_factor * 2^scale edges, vertex
    labels permuted at random (as the Graph500 reference code does)."""
    n, m = 1 << scale, edge_factor << scale
    rng = np.random.default_rng([seed, 2])
    u = np.zeros(m, dtype=np.int64)
    v = np.zeros(m, dtype=np.int64)
    ab = RMAT_A + RMAT_B
    c_norm = RMAT_C / (RMAT_C + RMAT_D)
    a_norm = RMAT_A / (RMAT_A + RMAT_B)
    for bit in range(scale):
        ii = rng.random(m) > ab
        jj = rng.random(m) > np.where(ii, c_norm, a_norm)
        u |= ii.astype(np.int64) << bit
        v |= jj.astype(np.int64) << bit
    perm = rng.permutation(n)
    return np.stack([perm[u], perm[v]], axis=1)


def read_edge_list(path: str) -> np.ndarray:
    """A "u v" text edge list; lines starting with # or % are comments, extra columns (e.g.
    weights) are ignored. Vertex ids are kept as given (a 1-based file leaves vertex 0 alone)."""
    if not os.path.isfile(path):
        raise InputError(f"edge-list file {path} does not exist")
    rows = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            s = line.strip()
            if not s or s[0] in "#%":
                continue
            fields = s.replace(",", " ").split()
            try:
                u, v = int(fields[0]), int(fields[1])
            except (ValueError, IndexError):
                raise InputError(f"{path}:{lineno}: expected two vertex ids, got {s[:60]!r}")
            if u < 0 or v < 0:
                raise InputError(f"{path}:{lineno}: negative vertex id")
            rows.append((u, v))
    if not rows:
        raise InputError(f"edge-list file {path} has no edges")
    return np.array(rows, dtype=np.int64).reshape(-1, 2)


def reference_roots(n: int, edges: np.ndarray) -> np.ndarray:
    """Independent reference: scipy's connected_components, relabelled to component minima."""
    m = edges.shape[0]
    g = sp.coo_matrix((np.ones(m, dtype=np.int8), (edges[:, 0], edges[:, 1])), shape=(n, n))
    _, labels = connected_components(g, directed=False)
    # vertices are scanned in increasing order, so a label's first index is its minimum
    uniq, first = np.unique(labels, return_index=True)
    minimum = np.empty(int(uniq.max()) + 1, dtype=np.int64)
    minimum[uniq] = first
    return minimum[labels]
