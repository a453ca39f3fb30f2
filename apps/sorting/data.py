"""Inputs of sorting: a reproducible generated stream or a raw little-endian int64 file."""
from __future__ import annotations

import os

import numpy as np

from apps.common import InputError

CHUNK = 1 << 16  # generation granularity: data do not depend on array or block size
DTYPE = np.dtype("<i8")


class IntSource:
    """``total`` int64 values, generated from ``seed`` (chunk c from RNG [seed, c]) or read
    from ``path``; ``read(start, count)`` returns any slice, so arrays and blocks of any size
    see the same data."""

    def __init__(self, total: int, seed: int, path: str | None = None) -> None:
        self.path = path
        self.seed = seed
        if path is not None:
            if not os.path.isfile(path):
                raise InputError(f"input file {path} does not exist")
            nbytes = os.path.getsize(path)
            if nbytes % DTYPE.itemsize or nbytes == 0:
                raise InputError(f"input file {path} is not a non-empty raw int64 file "
                                 f"({nbytes} bytes is not a positive multiple of 8)")
            total = nbytes // DTYPE.itemsize
        self.total = total

    def read(self, start: int, count: int) -> np.ndarray:
        count = max(0, min(count, self.total - start))
        if self.path is not None:
            return np.fromfile(self.path, dtype=DTYPE, count=count,
                               offset=start * DTYPE.itemsize).astype(np.int64, copy=False)
        if count == 0:
            return np.empty(0, dtype=np.int64)
        c0, c1 = start // CHUNK, (start + count - 1) // CHUNK
        data = np.concatenate([self._chunk(c) for c in range(c0, c1 + 1)])
        off = start - c0 * CHUNK
        return data[off:off + count]

    def _chunk(self, c: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, c])
        return rng.integers(0, 1 << 31, size=CHUNK, dtype=np.int64)


def write(path: str, data: np.ndarray) -> None:
    data.astype(DTYPE, copy=False).tofile(path)
