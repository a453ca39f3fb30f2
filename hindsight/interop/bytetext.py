"""Text formatted by compiled code into a byte buffer: the pieces the column-wise exporters
(pipit's CSV, Perfetto's JSON) share. A formatter fills a reused buffer event by event while the
most one event can take still fits, returns where it stopped, and the caller writes the bytes."""

from __future__ import annotations

import numba as nb
import numpy as np

# The buffer a formatter writes into, reused between calls (small: it stays in cache).
BUFFER_BYTES = 1 << 20


def byte_table(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Strings as one UTF-8 byte array and the offsets of each (string j is
    ``data[off[j]:off[j + 1]]``)."""
    data = [t.encode() for t in texts]
    off = np.zeros(len(data) + 1, np.int64)
    off[1:] = np.cumsum([len(d) for d in data])
    return np.frombuffer(b"".join(data) or b"\0", np.uint8).copy(), off


def longest(off: np.ndarray) -> int:
    """The longest string of a byte table, in bytes."""
    return int(np.diff(off).max(initial=0))


@nb.njit(cache=True, inline="always")
def put(buf, at, data, off, j):
    """String ``j`` of a byte table at ``buf[at:]``; returns the end."""
    for k in range(off[j], off[j + 1]):
        buf[at] = data[k]
        at += 1
    return at


@nb.njit(cache=True, inline="always")
def put_int(buf, at, v):
    """The decimal text of the integer ``v`` at ``buf[at:]``; returns the end."""
    if v < 0:
        buf[at] = 45                                  # "-"
        at += 1
        u = np.uint64(-(v + 1)) + np.uint64(1)
    else:
        u = np.uint64(v)
    n = 1                                             # the digits, then each in its place
    t = u
    while t >= np.uint64(10):
        t //= np.uint64(10)
        n += 1
    end = at + n
    while True:
        n -= 1
        buf[at + n] = 48 + np.uint8(u % np.uint64(10))
        u //= np.uint64(10)
        if u == 0:
            break
    return end
