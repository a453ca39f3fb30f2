"""The compiled GOAL scanner behind ``replay.loggopsim.goal``'s parser.

``_scan_lines`` reads a schedule (or a part of one: ``goal_parts.scan`` drives it) from its
bytes in one pass, without a Python object per operation. It accepts exactly the grammar of
``goal``'s regular expressions, restricted to ASCII outside comments; on anything else (a syntax
error, an undefined or duplicate label, a rank out of range, a number over 18 digits, non-ASCII
text) it stops with a non-zero code and the caller re-parses with the regular expressions,
which name the line and the problem.

Labels are never Python strings here: the scan keeps where each one starts (an identifier ends
by itself). When a rank's block closes, its labelled operations go into an open-addressing table
keyed by the label: a label of up to 8 bytes is its own key (its bytes packed into an integer),
a longer one its 64-bit FNV-1a hash, whose match counts only when the bytes are equal too, so a
collision cannot resolve to the wrong operation. Every dependency of the block looks both its
labels up there and gets the operations' indices in place. A table per block keeps the work
linear in the file. A label's search starts at its decimal suffix's value past its prefix's
hash (``_probe``) and steps by a stride of its key (``_step``): labels numbered in order fill
consecutive slots, so the look-ups of dependencies, which name operations near them, hit cache
lines just used.

The columns are given to it (``goal_parts``, which also splits a large text into parts
scanned on threads). The helpers it calls per statement allocate nothing and are compiled
without reference counting (``_nrt=False``): otherwise a call could count its reference to the
text, an atomic add on a count that both scanning threads share (their parts are views of one
array); without, the parse of a 5 M-operation schedule took 0.73 s instead of 0.81 s.
"""

from __future__ import annotations

import numpy as np

from hindsight.jit import njit
from replay.loggopsim.simulator import CALC, RECV, SEND

# Characters: Python's str.strip() and the regular expressions' \s agree on ASCII whitespace.
_WS = np.zeros(256, np.bool_)
_WS[[9, 11, 12, 13, 28, 29, 30, 31, 32]] = True
_ALPHA = np.zeros(256, np.bool_)
_ALPHA[ord("A"):ord("Z") + 1] = _ALPHA[ord("a"):ord("z") + 1] = True
_IDENT = _ALPHA.copy()
_IDENT[ord("0"):ord("9") + 1] = _IDENT[ord("_")] = True


def _word(w: str) -> np.ndarray:
    return np.frombuffer(w.encode(), np.uint8).copy()


_W_NUM_RANKS, _W_RANK = _word("num_ranks"), _word("rank")
_W_SEND, _W_RECV, _W_CALC = _word("send"), _word("recv"), _word("calc")
_W_TO, _W_FROM = _word("to"), _word("from")
_W_TAG, _W_CPU, _W_NIC = _word("tag"), _word("cpu"), _word("nic")
_W_REQ, _W_IREQ = _word("requires"), _word("irequires")

_MAX_DIGITS = 18                # any 18-digit number fits int64 and converts to float64 exactly
_FNV_OFFSET = np.uint64(14695981039346656037)
_FNV_PRIME = np.uint64(1099511628211)
_FIB = np.uint64(11400714819323198485)     # 2**64 / golden ratio: spreads hashes over slots
_TOP = np.uint64(2**63)
NO_MASK = np.uint64(2**64 - 1)

_SHORT = 8                      # labels of up to 8 bytes are their own key (packed)


# ------------------------------------------------------------------------------------------------
# Scanning


@njit(cache=True, _nrt=False)
def _is(b, s, e, w):
    """Bytes b[s:e] equal the word w."""
    if e - s != len(w):
        return False
    for k in range(len(w)):
        if b[s + k] != w[k]:
            return False
    return True


@njit(cache=True, _nrt=False)
def _skip_ws(b, p, t):
    while p < t and _WS[b[p]]:
        p += 1
    return p


@njit(cache=True, _nrt=False)
def _ident_end(b, p, t):
    """End of the identifier starting at p (p itself if none starts there)."""
    if p >= t or not _ALPHA[b[p]]:
        return p
    p += 1
    while p < t and _IDENT[b[p]]:
        p += 1
    return p


@njit(cache=True, _nrt=False)
def _number(b, p, t, wildcard):
    """(value, end) of the decimal number (or ``-1`` if ``wildcard``) at p; end == -1 if there
    is none or it has more than _MAX_DIGITS digits."""
    if wildcard and p < t and b[p] == 45:
        if p + 1 < t and b[p + 1] == 49:
            return -1, p + 2
        return 0, -1
    v = 0
    q = p
    while q < t and 48 <= b[q] <= 57:
        v = v * 10 + (b[q] - 48)
        q += 1
    if q == p or q - p > _MAX_DIGITS:
        return 0, -1
    return v, q


@njit(cache=True, _nrt=False)
def _key(b, s, e, hmask):
    """The table key of label b[s:e]: a label of up to _SHORT bytes packed into the integer
    (identifier bytes are ASCII and never 0, so the packing is one-to-one and below 2**63),
    a longer one's 64-bit FNV-1a hash with the top bit set; masked by ``hmask``."""
    if e - s <= _SHORT:
        h = np.uint64(0)
        for k in range(s, e):
            h = (h << np.uint64(8)) | np.uint64(b[k])
    else:
        h = _FNV_OFFSET
        for k in range(s, e):
            h = (h ^ np.uint64(b[k])) * _FNV_PRIME
        h |= _TOP
    return h & hmask


@njit(cache=True, _nrt=False)
def _same(b, s1, e1, s2, e2):
    if e1 - s1 != e2 - s2:
        return False
    for k in range(e1 - s1):
        if b[s1 + k] != b[s2 + k]:
            return False
    return True


@njit(cache=True)
def _strip_block_comments(b):
    """The text with each ``/* ... */`` replaced by its line breaks, as ``goal`` does; ok False
    if a ``/*`` is left (unterminated, or formed by the removal)."""
    n = len(b)
    out = np.empty(n, np.uint8)
    i = 0
    m = 0
    while i < n:
        if b[i] == 47 and i + 1 < n and b[i + 1] == 42:
            j = i + 2
            while j + 1 < n and not (b[j] == 42 and b[j + 1] == 47):
                j += 1
            if j + 1 >= n:
                return out[:0], False
            for k in range(i + 2, j):
                if b[k] == 10:
                    out[m] = 10
                    m += 1
            i = j + 2
        else:
            out[m] = b[i]
            m += 1
            i += 1
    for k in range(m - 1):
        if out[k] == 47 and out[k + 1] == 42:
            return out[:0], False
    return out[:m], True


@njit(cache=True, _nrt=False)
def _probe(b, s, e, bits):
    """First slot of label b[s:e] in a table of 2**bits slots: its part before a decimal
    suffix hashed (FNV-1a; Fibonacci hashing: the top bits), plus the suffix's value. Labels
    numbered in order (``l0``, ``l1``, ...; what schedule generators write) then sit in
    consecutive slots, and a dependency, which names operations near it, finds its labels in
    cache lines just used: hashed apart, every look-up was a cache miss in a table of tens of
    MB (half the scan's time). Only where the search starts: the keys decide a match."""
    k = e
    while k > s and e - k < _MAX_DIGITS and 48 <= b[k - 1] <= 57:
        k -= 1
    num = np.uint64(0)
    for c in range(k, e):
        num = num * np.uint64(10) + np.uint64(b[c] - 48)
    h = _FNV_OFFSET
    for c in range(s, k):
        h = (h ^ np.uint64(b[c])) * _FNV_PRIME
    mask = np.uint64((1 << bits) - 1)
    return np.int64((((h * _FIB) >> np.uint64(64 - bits)) + num) & mask)


@njit(cache=True, _nrt=False)
def _step(h, tsize):
    """The probe step of key h in a table of tsize (a power of 2) slots: odd, so a search
    visits every slot, and a key's own (double hashing). Stepping by one, the runs of slots
    that consecutive labels fill (``_probe``) would make a label whose first slot falls in
    another prefix's run walk to its end: quadratic in the run, where this is a jump or two."""
    return np.int64(((h * _FIB) >> np.uint64(40)) | np.uint64(1)) & (tsize - 1)


@njit(cache=True)
def _close_block(b, lab, da, db, o0, o1, d0, d1, hmask):
    """Resolve the labels of one block's dependencies (operations o0..o1, dependencies d0..d1)
    in place: ``da``/``db`` hold where each side's label starts in ``b`` and get the index of
    the operation it names. Returns an error code.

    The table holds each labelled operation by its key; keys equal means labels equal when the
    key is a packed short label and no mask is set, else the bytes are compared too, so a hash
    collision cannot resolve to the wrong operation."""
    nlab = 0
    for i in range(o0, o1):
        if lab[i] >= 0:
            nlab += 1
    if d1 == d0 and nlab < 2:
        return 0
    tsize, bits = 2, 1
    while tsize < 2 * nlab + 2:
        tsize, bits = 2 * tsize, bits + 1
    tidx = np.full(tsize, -1, np.int64)
    tkey = np.empty(tsize, np.uint64)
    n = len(b)
    exact = hmask == NO_MASK
    for i in range(o0, o1):
        s = lab[i]
        if s < 0:
            continue
        e = _ident_end(b, s, n)
        h = _key(b, s, e, hmask)
        slot, step = _probe(b, s, e, bits), _step(h, tsize)
        while tidx[slot] >= 0:
            if tkey[slot] == h:
                j = tidx[slot]
                if (exact and h < _TOP) or _same(b, s, e, lab[j], _ident_end(b, lab[j], n)):
                    return 20                   # label defined twice on the rank
            slot = (slot + step) & (tsize - 1)
        tidx[slot] = i
        tkey[slot] = h
    for d in range(d0, d1):
        for side in range(2):
            s = da[d] if side == 0 else db[d]
            e = _ident_end(b, s, n)
            h = _key(b, s, e, hmask)
            slot, step = _probe(b, s, e, bits), _step(h, tsize)
            found = -1
            while tidx[slot] >= 0:
                if tkey[slot] == h:
                    j = tidx[slot]
                    if (exact and h < _TOP) or _same(b, s, e, lab[j], _ident_end(b, lab[j], n)):
                        found = j
                        break
                slot = (slot + step) & (tsize - 1)
            if found < 0:
                return 21                   # a dependency names an undefined label
            if side == 0:
                da[d] = found
            else:
                db[d] = found
    return 0


@njit(cache=True, nogil=True, _nrt=False)
def _statement(b, i, n):
    """The statement on the line starting at i: (s, t, the next line's start), b[s:t] its text
    without a ``//`` comment and the whitespace around it (s == t: none)."""
    j = i
    cs = -1
    while j < n and b[j] != 10:
        if cs < 0 and b[j] == 47 and j + 1 < n and b[j + 1] == 47:
            cs = j
        j += 1
    s = i
    t = cs if cs >= 0 else j
    while s < t and _WS[b[s]]:
        s += 1
    while t > s and _WS[b[t - 1]]:
        t -= 1
    return s, t, j + 1


@njit(cache=True, _nrt=False)
def _fail(code):
    """``_parse_op``'s answer for an error ``code``."""
    return code, 0, 0, 0, 0, 0, 0


@njit(cache=True, _nrt=False)
def _parse_op(b, p, t, kw_s, kw_e, nranks, lim):
    """The operation whose keyword is b[kw_s:kw_e] and whose first number is at p: (error
    code (0: fine), kind, size, peer, tag, cpu, nic). Its fields are returned, not written into
    the columns: a call per operation that passed the six column arrays cost some 200 ns in
    their reference counts, more than the parsing. A CPU or NIC index from ``lim`` on is
    code 40 (``_columns``)."""
    sz = pr = 0
    if _is(b, kw_s, kw_e, _W_SEND) or _is(b, kw_s, kw_e, _W_RECV):
        send = _is(b, kw_s, kw_e, _W_SEND)
        sz, p = _number(b, p, t, False)
        if p < 0:
            return _fail(30)
        p = _skip_ws(b, p, t)
        if p >= t or b[p] != 98:                            # 'b'
            return _fail(31)
        q = _skip_ws(b, p + 1, t)
        if q == p + 1:
            return _fail(31)
        w = _W_TO if send else _W_FROM
        if not _is(b, q, min(q + len(w), t), w):
            return _fail(32)
        p = _skip_ws(b, q + len(w), t)
        if p == q + len(w):
            return _fail(32)
        pr, p = _number(b, p, t, not send)
        if p < 0:
            return _fail(33)
        if pr >= nranks:
            return _fail(34)                                # peer out of range
        k = SEND if send else RECV
    elif _is(b, kw_s, kw_e, _W_CALC):
        sz, p = _number(b, p, t, False)
        if p < 0:
            return _fail(30)
        k, pr = CALC, -1
    else:
        return _fail(35)
    tg = cp = nc = 0
    stage = 0
    while p < t:                    # [tag T] [cpu C] [nic K], each after whitespace, in order
        q = _skip_ws(b, p, t)
        if q == p:
            return _fail(36)
        e = _ident_end(b, q, t)
        v0 = _skip_ws(b, e, t)
        if v0 == e:
            return _fail(36)
        if stage < 1 and _is(b, q, e, _W_TAG):
            tg, p = _number(b, v0, t, True)
            stage = 1
        elif stage < 2 and _is(b, q, e, _W_CPU):
            cp, p = _number(b, v0, t, False)
            stage = 2
        elif stage < 3 and _is(b, q, e, _W_NIC):
            nc, p = _number(b, v0, t, False)
            stage = 3
        else:
            return _fail(36)
        if p < 0:
            return _fail(36)
        if k == CALC and stage != 2:
            return _fail(37)                                # calc takes only cpu
    if k == SEND and tg == -1:
        return _fail(38)                                    # wildcard tag on a send
    if tg >= 2**31:
        return _fail(39)
    if cp >= lim or nc >= lim:
        return _fail(40)                # past the int32 columns (``scan`` then scans wide)
    return 0, k, sz, pr, tg, cp, nc


@njit(cache=True)
def _count(b):
    """An upper bound for the scanner's table of blocks ('{' characters), and whether ``/*``
    occurs (the lines, the bound of its columns, are counted per part: ``goal_parts``)."""
    braces = stars = 0
    for k in range(len(b)):             # branch-free: the compiler vectorises it
        c = b[k]
        braces += c == 123
        stars += c == 42
    block = False
    if stars:
        for k in range(len(b) - 1):
            if b[k] == 47 and b[k + 1] == 42:
                block = True
                break
    return braces, block


@njit(cache=True, nogil=True)
def _scan_lines(b, hmask, cols, lab, nbraces, nranks):
    """Every statement of the text, in file order: operations into their columns, dependencies
    into theirs (resolved to operation indices as each block closes), blocks in ``blk``. The
    columns (``goal_parts``) hold a line each and are filled front to back. No array is
    reallocated in the loop: numba compiles a loop that reassigns an array several times
    slower. ``nranks``: -1 for a whole text; the ``num_ranks`` of the text a part after its
    first block comes from (``goal_parts``), which such a part then must not state again."""
    rank, kind, size, peer, tag, cpu, nic, da, db, dst = cols
    # lab: where each operation's label starts in b, -1: none; da, db: the labels of the
    # waiting operation and of the one waited for, then their indices
    blk = np.empty((nbraces + 1, 5), np.int64)   # rank, first op, end op, first dep, end dep
    # ranks and CPU/NIC indices from here stop a scan into int32 columns (code 40)
    lim = 2**31 if rank.itemsize < 8 else 2**62
    nops = ndeps = nblk = 0
    nlab_bytes = 0
    cur = -1
    err = 0
    i = 0
    n = len(b)
    while i < n:
        s, t, i = _statement(b, i, n)
        if s == t:
            continue
        q = _ident_end(b, s, t)
        if cur < 0:                             # outside a block: num_ranks N | rank N {
            p = _skip_ws(b, q, t)
            v, p = _number(b, p, t, False) if p > q else (0, -1)
            if p < 0:
                err = 1
                break
            if _is(b, s, q, _W_NUM_RANKS) and p == t and nranks < 0 and v >= 1:
                if v >= lim:
                    err = 40                    # ranks past the int32 columns (as above)
                    break
                nranks = v
                continue
            p = _skip_ws(b, p, t)
            if not (_is(b, s, q, _W_RANK) and p == t - 1 and b[p] == 123):
                err = 2
                break
            if nranks < 0 or v >= nranks:
                err = 3
                break
            blk[nblk, 0], blk[nblk, 1], blk[nblk, 3] = v, nops, ndeps
            cur = v
            continue
        if t - s == 1 and b[s] == 125:          # }
            err = _close_block(b, lab, da, db, blk[nblk, 1], nops, blk[nblk, 3], ndeps,
                               hmask)
            if err:
                break
            blk[nblk, 2], blk[nblk, 4] = nops, ndeps
            nblk += 1
            cur = -1
            continue
        if q == s:
            err = 4
            break
        p = _skip_ws(b, q, t)
        if p < t and b[p] == 58:                # label: keyword ...
            k0 = _skip_ws(b, p + 1, t)
            k1 = _ident_end(b, k0, t)
            p = _skip_ws(b, k1, t)
            if k1 == k0 or p == k1:
                err = 5
                break
            ls = s
            nlab_bytes += q - s
        elif p > q and p < t and 48 <= b[p] <= 57:  # keyword number ...
            k0, k1, ls = s, q, -1
        else:                                   # a requires|irequires b
            e = _ident_end(b, p, t)
            p2 = _skip_ws(b, e, t)
            e2 = _ident_end(b, p2, t)
            irq = _is(b, p, e, _W_IREQ)
            if p == q or p2 == e or e2 == p2 or e2 != t or not (irq or _is(b, p, e, _W_REQ)):
                err = 6
                break
            da[ndeps], db[ndeps], dst[ndeps] = s, p2, irq
            ndeps += 1
            continue
        err, kind[nops], size[nops], peer[nops], tag[nops], cpu[nops], nic[nops] = _parse_op(
            b, p, t, k0, k1, nranks, lim)
        if err:
            break
        rank[nops] = cur
        lab[nops] = ls
        nops += 1
    if err == 0 and cur >= 0:
        err = 7                                 # block not closed
    if err == 0 and nranks < 0:
        err = 8                                 # no num_ranks
    return err, nranks, blk, nops, ndeps, nblk, nlab_bytes


@njit(cache=True)
def _labels(b, lab, nops, nlab_bytes):
    """The labels' bytes end to end, and in place of ``lab``'s starts where each label begins
    there (one more entry than operations)."""
    buf = np.empty(nlab_bytes, np.uint8)
    n = len(b)
    m = 0
    for g in range(nops):
        s = lab[g]
        lab[g] = m
        if s >= 0:
            for c in range(s, _ident_end(b, s, n)):
                buf[m] = b[c]
                m += 1
    lab[nops] = m
    return buf
