"""Text formatted by compiled code into byte buffers: the pieces the column-wise writers (pipit's
CSV, Perfetto's JSON, GOAL schedules) share. A formatter fills a buffer event by event while the
most one event can take still fits and returns where it stopped; ``write_overlapped`` writes each
filled buffer while the formatter fills the other one; ``write_in_parallel`` has two threads
format chunks of a fixed number of events while a third writes them in order."""

from __future__ import annotations

from typing import BinaryIO, Callable, Iterable

import numpy as np

from hindsight.jit import njit
from hindsight.system import WRITE_BLOCK

# The buffers a formatter writes into, two reused in turn (small: they stay in cache).
BUFFER_BYTES = 1 << 20

# "00" "01" ... "99": integers are written two digits per division
_PAIRS = np.frombuffer("".join(f"{k:02d}" for k in range(100)).encode(), np.uint8).copy()
# 10**k, k = 0..19: the number of digits by comparisons, not divisions
_POW10 = np.array([10**k for k in range(20)], np.uint64)


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


def buffers(room: int) -> list[np.ndarray]:
    """The two buffers a formatter fills in turn for ``write_overlapped``, each of at least
    ``room`` bytes (the most one event takes)."""
    return [np.empty(max(BUFFER_BYTES, room), np.uint8) for _ in range(2)]


def _write_blocks(fh: BinaryIO, chunk: memoryview | bytes) -> None:
    """``chunk`` written to ``fh`` in writes of ``hindsight.system.WRITE_BLOCK`` bytes (why:
    there)."""
    view = memoryview(chunk)
    for k in range(0, len(view), WRITE_BLOCK):
        fh.write(view[k:k + WRITE_BLOCK])


def write_overlapped(fh: BinaryIO, chunks: Iterable[memoryview | bytes]) -> None:
    """Write ``chunks`` to ``fh``, each while the next is being made: a chunk must stay unchanged
    until the one after the next is asked for (a formatter alternating between the two
    ``buffers``). The formatters are compiled without the GIL, so on two cores the writing
    (the kernel's copy into the page cache) and the formatting run at once. Each chunk is
    written in writes of ``hindsight.system.WRITE_BLOCK`` bytes (``_write_blocks``)."""
    from concurrent.futures import ThreadPoolExecutor   # (where text is written)

    with ThreadPoolExecutor(1) as pool:
        pending = None
        for chunk in chunks:
            if pending is not None:
                pending.result()
            pending = pool.submit(_write_blocks, fh, chunk)
        if pending is not None:
            pending.result()


#: chunks ``write_in_parallel`` holds at once: two being formatted, one being written, one ready
IN_FLIGHT = 4


def write_in_parallel(fh: BinaryIO, count: int, room: int,
                      fill: Callable[[np.ndarray, int, int], int]) -> None:
    """Write items ``0 .. count - 1`` to ``fh`` in order, formatted a chunk at a time on two
    threads. ``fill(buf, lo, hi)`` writes items ``lo .. hi - 1`` into ``buf`` (at most ``room``
    bytes each) and returns the bytes it wrote; it must let go of the GIL (a compiled formatter
    with ``nogil``). A chunk is as many items as ``BUFFER_BYTES`` hold at ``room`` each, so its
    buffer always holds it, and chunks are formatted independently: two at once, while this
    thread writes those before them (in writes of ``WRITE_BLOCK``). Why: a formatter alone
    keeps one core busy and the writing, the kernel's copy into the page cache, a share of the
    other (the pipit export: 0.76-1.2 s of formatting beside 0.3 s of writing at 4 M rows)."""
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor   # (where text is written)

    per = max(1, BUFFER_BYTES // max(room, 1))
    bufs = [np.empty(per * room, np.uint8) for _ in range(IN_FLIGHT)]

    with ThreadPoolExecutor(2) as pool:
        pending: deque = deque()
        for k, lo in enumerate(range(0, count, per)):
            if len(pending) == IN_FLIGHT:     # (the chunk whose buffer this one takes)
                buf, done = pending.popleft()
                _write_blocks(fh, memoryview(buf)[:done.result()])
            buf = bufs[k % IN_FLIGHT]
            pending.append((buf, pool.submit(fill, buf, lo, min(lo + per, count))))
        while pending:
            buf, done = pending.popleft()
            _write_blocks(fh, memoryview(buf)[:done.result()])


@njit(cache=True, inline="always")
def put(buf, at, data, off, j):
    """String ``j`` of a byte table at ``buf[at:]``; returns the end."""
    for k in range(off[j], off[j + 1]):
        buf[at] = data[k]
        at += 1
    return at


@njit(cache=True, inline="always")
def put_int(buf, at, v):
    """The decimal text of the integer ``v`` at ``buf[at:]``; returns the end."""
    if v < 0:
        buf[at] = 45                                  # "-"
        at += 1
        u = np.uint64(-(v + 1)) + np.uint64(1)
    else:
        u = np.uint64(v)
    n = 1
    while n < 20 and u >= _POW10[n]:
        n += 1
    end = at + n
    p = end
    while u >= np.uint64(100):                        # two digits at a time, from the last
        q = u // np.uint64(100)
        d = 2 * np.int64(u - q * np.uint64(100))
        p -= 2
        buf[p] = _PAIRS[d]
        buf[p + 1] = _PAIRS[d + 1]
        u = q
    if u >= np.uint64(10):
        d = 2 * np.int64(u)
        buf[p - 2] = _PAIRS[d]
        buf[p - 1] = _PAIRS[d + 1]
    else:
        buf[p - 1] = 48 + np.uint8(u)
    return end
