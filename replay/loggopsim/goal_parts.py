"""The GOAL scanner's driver: ``scan`` allocates the columns ``goal_scan`` fills, cuts a large
text into parts scanned on threads, and puts the blocks in rank order.

Columns. They are allocated at their upper bound (a line each), in fresh anonymous mappings
(``hindsight.system.fresh_array``), and written front to back, so the memory touched is what
the schedule holds: about 29 bytes per operation and 9 per dependency (``_columns``).

Parts. A text of at least ``PART_BYTES`` a thread is cut at lines that close a rank block (a
line whose statement is ``}``), one part a thread (the scanner releases the GIL). Each part is
scanned into its own stretch of the columns, which starts past the lines of the parts before it,
and the stretches are then moved down to follow each other (``_join``). The parts give exactly
what one scan of the text gives, error codes included, because:

- a line that is ``}`` either closes a block or is an error, so a part after the first starts
  outside a block, as the whole text's scan is at that line, or the part before it fails first;
- such a part takes ``num_ranks`` from the text's first statement (``_leading_num_ranks``; a text
  that does not start with it is scanned whole, and fails), and a second ``num_ranks`` in it is
  the error it is in a whole scan;
- blocks never span parts, so each part resolves its own labels, and its operation numbers only
  shift by the operations before it;
- the code returned is the first failing part's, which is the one a whole scan stops at.

The move touches the pages between the first part's operations and its stretch's end once more
(1-2 ns a byte on this project's virtual machines); on two threads the scan still takes about
0.6 of one thread's time.
"""

from __future__ import annotations

import mmap

import numpy as np

from hindsight.jit import njit
from hindsight.system import fresh_array, usable_cores
from replay.loggopsim.goal_scan import (
    NO_MASK,
    _W_NUM_RANKS,
    _count,
    _ident_end,
    _is,
    _labels,
    _number,
    _scan_lines,
    _skip_ws,
    _statement,
    _strip_block_comments,
)
from replay.loggopsim.simulator import SCHEDULE_TYPES, narrow

PART_BYTES = 8 << 20        # a part smaller than this is not worth a thread's start

_FIELDS = ("rank", "kind", "size", "peer", "tag", "cpu", "nic", "dep_op", "dep_on", "dep_start")
_OPS = 7                    # the first 7 fields are per operation, the others per dependency


def scan(b: np.ndarray, hmask: np.uint64 = NO_MASK, parts: int | None = None):
    """Parse GOAL bytes (a uint8 array). Returns (0, nranks, arrays) with ``arrays`` =
    (rank, kind, size, peer, tag, cpu, nic, dep_op, dep_on, dep_start, lab_off, lab_buf), or
    (code, None, None) if the text is anything the scanner does not take. ``hmask`` masks the
    label keys (tests force collisions with it); ``parts``: how many parts to cut the text into
    at most (default: one a CPU, each at least ``PART_BYTES``)."""
    nbraces, block = _count(b)
    if block:           # (the count stays an upper bound: the stripping only removes)
        b, ok = _strip_block_comments(b)
        if not ok:
            return 10, None, None
    if parts is None:
        parts = min(usable_cores(), len(b) // PART_BYTES)
    bounds = np.array([0, len(b)], np.int64)
    nranks = -1
    if parts > 1:
        nranks = _leading_num_ranks(b)
        if nranks > 0:
            bounds = _cuts(b, parts)
    off = np.zeros(len(bounds), np.int64)
    np.cumsum(_part_lines(b, bounds), out=off[1:])
    for wide in (False, True):
        cols, lab = _columns(int(off[-1]), len(b), wide)
        got = _scan_parts(b, bounds, off, np.uint64(hmask), cols, lab, nbraces, nranks)
        if all(g[0] != 40 for g in got):
            break
    err = next((g[0] for g in got if g[0]), 0)
    if err:
        return err, None, None
    nranks, blk, nops, ndeps, nlab = _join(bounds, off, cols, lab, got)
    for k, c in enumerate((*cols, lab)):
        _release_from(c, ndeps if _OPS <= k < len(cols) else nops + (c is lab))
    order, ok = _block_order(blk, len(blk))
    if not ok:
        return 9, None, None
    lab_buf = _labels(b, lab, nops, nlab)
    # views of the upper-bound columns (fresh_array): their unwritten tails are never mapped
    cols = [c[:ndeps] if k >= _OPS else c[:nops] for k, c in enumerate(cols)]
    # (a wide scan's columns, and past 2 GiB of text the dependencies': the types of the
    # expressions' schedule, int64 only where a value needs it)
    cols = [narrow(c, SCHEDULE_TYPES.get(f, np.int32)) if c.dtype.kind in "iu" else c
            for f, c in zip(_FIELDS, cols)]
    lab_off = lab[:nops + 1]
    if np.any(np.diff(order) != 1):
        return 0, nranks, tuple(_in_rank_order(cols, lab_off, lab_buf, blk, order))
    return 0, nranks, (*cols, lab_off, lab_buf)


def _columns(nlines: int, nbytes: int, wide: bool) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """The scanner's columns at their upper bound (a line each; ``fresh_array``): rank, kind,
    size, peer, tag, cpu, nic, and the dependencies' da, db, dst; and ``lab`` (one more).

    Unless ``wide`` (int64), as narrow as ``SCHEDULE_TYPES``: a scan that meets a number of
    ranks or a CPU or NIC index past int32 stops (code 40) and ``scan`` scans again wide (tags
    past int32 are an error). ``da``, ``db`` and ``lab`` hold positions in the text before
    operation numbers: int32 below 2 GiB of text. Each byte is a page touched once written
    (1-2 ns a byte on this project's virtual machines): the int64 columns were 64 bytes an
    operation and 17 a dependency, these 29 and 9."""
    at = np.int32 if nbytes < 2**31 and not wide else np.int64
    cols = tuple(fresh_array(nlines, at if wide and f != "size" and f != "dep_start" else
                             SCHEDULE_TYPES.get(f, at)) for f in _FIELDS)
    return cols, fresh_array(nlines + 1, at)


def _release_from(a: np.ndarray, n: int) -> None:
    """Give the pages of ``fresh_array`` array ``a`` from element n on back to the system: the
    stretches the parts were scanned into, moved down by ``_join``, stay mapped otherwise (some
    100 MB at 5 M operations)."""
    base = a
    while not isinstance(base, mmap.mmap):
        base = base.base if isinstance(base, np.ndarray) else base.obj
    start = -(-n * a.itemsize // mmap.PAGESIZE) * mmap.PAGESIZE
    advice = getattr(mmap, "MADV_DONTNEED", None)       # (not on every system)
    if advice is not None and start < len(base):
        base.madvise(advice, start, len(base) - start)


def _scan_parts(b, bounds, off, hmask, cols, lab, nbraces, nranks) -> list[tuple]:
    """``_scan_lines`` of each part of ``b`` (between ``bounds``) into its stretch of the
    columns (between ``off``), the parts after the first on threads of their own."""
    def part(k: int) -> tuple:
        lo, hi = int(off[k]), int(off[k + 1])
        return _scan_lines(b[bounds[k]:bounds[k + 1]], hmask, tuple(c[lo:hi] for c in cols),
                           lab[lo:hi], nbraces, nranks if k else -1)

    if len(bounds) == 2:
        return [part(0)]
    # (imported here: a replay of a kept schedule parses no text)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(bounds) - 2) as pool:
        later = pool.map(part, range(1, len(bounds) - 1))
        return [part(0), *later]


def _join(bounds, off, cols, lab, got) -> tuple:
    """The parts' stretches moved down to follow each other, their operation numbers and label
    positions made the whole text's: (nranks, blocks, operations, dependencies, label bytes)."""
    nranks = got[0][1]
    nops = ndeps = nlab = 0
    blocks = []
    for k, (_, _, blk, n, nd, nblk, nl) in enumerate(got):
        at = int(off[k])
        for c in cols[:_OPS]:
            _move(c, nops, at, n)
        for c in cols[_OPS:]:
            _move(c, ndeps, at, nd)
        _move(lab, nops, at, n)
        if k:
            _shift(lab[nops:nops + n], bounds[k])
            cols[_OPS][ndeps:ndeps + nd] += nops        # (operation numbers after the scan)
            cols[_OPS + 1][ndeps:ndeps + nd] += nops
        blk = blk[:nblk]
        blk[:, 1:3] += nops
        blk[:, 3:5] += ndeps
        blocks.append(blk)
        nops, ndeps, nlab = nops + n, ndeps + nd, nlab + nl
    return nranks, np.concatenate(blocks), nops, ndeps, nlab


@njit(cache=True, nogil=True)
def _move(a, dst, src, n):
    """a[dst:dst + n] = a[src:src + n] for dst <= src, front to back (numpy would copy an
    overlapping source first)."""
    if dst != src:
        for i in range(n):
            a[dst + i] = a[src + i]


@njit(cache=True, nogil=True)
def _shift(lab, by):
    """Label positions in a part made positions in the text (-1, no label, stays)."""
    for i in range(len(lab)):
        if lab[i] >= 0:
            lab[i] += by


@njit(cache=True)
def _leading_num_ranks(b):
    """The N of the text's first statement if it is ``num_ranks N`` (N >= 1), else -1."""
    n = len(b)
    i = 0
    while i < n:
        s, t, i = _statement(b, i, n)
        if s == t:
            continue
        q = _ident_end(b, s, t)
        p = _skip_ws(b, q, t)
        if _is(b, s, q, _W_NUM_RANKS) and p > q:
            v, p = _number(b, p, t, False)
            if p == t and v >= 1:
                return v
        return -1
    return -1


@njit(cache=True)
def _cuts(b, parts):
    """The bounds of up to ``parts`` parts (0, cuts..., len(b)): each cut follows the first
    line whose statement is ``}`` from k / parts of the text on (fewer parts where there is
    none, or two cuts fall together)."""
    n = len(b)
    out = np.empty(parts + 1, np.int64)
    out[0] = 0
    m = 1
    for k in range(1, parts):
        i = max(k * (n // parts), out[m - 1])
        while 0 < i < n and b[i - 1] != 10:      # the next line's start
            i += 1
        while i < n:
            s, t, i = _statement(b, i, n)
            if t - s == 1 and b[s] == 125:
                break
        if out[m - 1] < i < n:
            out[m] = i
            m += 1
    out[m] = n
    return out[:m + 1]


@njit(cache=True)
def _part_lines(b, bounds):
    """Lines in each part (line breaks + 1): the part's stretch of the columns."""
    out = np.ones(len(bounds) - 1, np.int64)
    for k in range(len(bounds) - 1):
        for i in range(bounds[k], bounds[k + 1]):
            out[k] += b[i] == 10
    return out


@njit(cache=True)
def _block_order(blk, nblk):
    """The blocks in rank order (they may come in any order); ok False if a rank has two."""
    order = np.arange(nblk)
    for k in range(1, nblk):
        if blk[k, 0] <= blk[k - 1, 0]:
            order = np.argsort(blk[:nblk, 0], kind="mergesort")
            break
    for k in range(1, nblk):
        if blk[order[k], 0] == blk[order[k - 1], 0]:
            return order, False
    return order, True


def _in_rank_order(cols, lab_off, lab_buf, blk, order):
    """The columns with the blocks moved into rank order (each block's operations, dependencies
    and labels are contiguous; dependency indices move with their block)."""
    ops = [np.arange(blk[k, 1], blk[k, 2]) for k in order]
    deps = [np.arange(blk[k, 3], blk[k, 4]) for k in order]
    op_perm = np.concatenate(ops) if ops else np.zeros(0, np.int64)
    dep_perm = np.concatenate(deps) if deps else np.zeros(0, np.int64)
    new_index = np.empty(len(op_perm), cols[7].dtype)      # (operation numbers, as da's)
    new_index[op_perm] = np.arange(len(op_perm))
    rank, kind, size, peer, tag, cpu, nic, da, db, dst = cols
    lens = np.diff(lab_off)[op_perm]
    off = np.zeros(len(op_perm) + 1, np.int64)
    np.cumsum(lens, out=off[1:])
    buf = np.concatenate([lab_buf[lab_off[blk[k, 1]]:lab_off[blk[k, 2]]] for k in order]
                         or [lab_buf[:0]])
    return ([c[op_perm] for c in (rank, kind, size, peer, tag, cpu, nic)]
            + [new_index[da[dep_perm]], new_index[db[dep_perm]], dst[dep_perm], off, buf])
