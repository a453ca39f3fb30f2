"""Compiled passes over trace rows for ``hindsight.trace`` (kept apart so that importing the trace
format, as the tracer does in every rank, does not import numba)."""
from __future__ import annotations

import numpy as np

from hindsight.jit import njit


@njit(cache=True, nogil=True)
def gather_mask(lut, codes):
    """``lut[codes]`` as booleans; codes outside the table (-1: an unknown op) take its last
    slot. NumPy's own gather would first widen the int8 codes to a full-size index array."""
    out = np.empty(len(codes), np.bool_)
    last = len(lut) - 1
    for i in range(len(codes)):
        c = codes[i]
        out[i] = lut[c if 0 <= c < last else last]
    return out


@njit(cache=True, nogil=True)
def in_rank_seq_order(rank, seq):
    """See ``hindsight.trace.in_rank_seq_order``."""
    for i in range(1, len(rank)):
        if rank[i] < rank[i - 1] or (rank[i] == rank[i - 1] and seq[i] <= seq[i - 1]):
            return False
    return True


@njit(cache=True, nogil=True)
def decode_codes(idx, valid, bit0, lut, out):
    """``out[i] = lut[idx[i]]``, -1 where the Arrow validity bitmap ``valid`` (bits from
    ``bit0``; empty: no nulls) marks row i null. Returns the first row whose index is outside
    the dictionary, or -1. One pass, no temporaries (filling the nulls, widening the indices
    and gathering were three full-size arrays)."""
    m = len(lut)
    check = len(valid) > 0
    for i in range(len(idx)):
        if check:
            b = bit0 + i
            if not (valid[b >> 3] >> (b & 7)) & 1:
                out[i] = -1
                continue
        c = idx[i]
        if c < 0 or c >= m:
            return i
        out[i] = lut[c]
    return -1


@njit(cache=True, nogil=True)
def id_range(req):
    """(lowest, highest) of the request ids ``req`` holds (entries >= 0), (0, -1) if none: one
    pass, where selecting them first would copy the column."""
    lo, hi = 0, -1
    for i in range(len(req)):
        x = req[i]
        if x >= 0:
            if hi < 0:
                lo = hi = x
            elif x < lo:
                lo = x
            elif x > hi:
                hi = x
    return lo, hi


@njit(cache=True, nogil=True)
def open_requests(ops, req, rank, post_lut, coll_lut, end_lut, free_lut, complete, lo, width):
    """The rows posting a request (``post_lut``) that no row ends (``end_lut``: completions and
    frees) on a rank marked ``complete``, and the rows freeing (``free_lut``) the request of a
    non-blocking collective's post (``coll_lut``), each in row order. A request is the key
    ``rank * width + req - lo`` (rows with ``req < 0`` have none), looked up in a byte of flags per
    possible key: no sorted copies of the keys (``np.isin``: some 30 bytes a key). Codes outside
    the tables (-1: an unknown op) take their last slot, as ``gather_mask``'s."""
    last = len(post_lut) - 1
    flags = np.zeros(len(complete) * width, np.uint8)
    for i in range(len(ops)):
        if req[i] >= 0:
            c = ops[i] if 0 <= ops[i] < last else last
            k = rank[i] * width + (req[i] - lo)
            if end_lut[c]:
                flags[k] |= 1
            if coll_lut[c]:
                flags[k] |= 2
    n_open = n_bad = 0
    for p in range(2):          # count, then fill
        if p == 1:
            open_ = np.empty(n_open, np.int64)
            bad = np.empty(n_bad, np.int64)
            n_open = n_bad = 0
        for i in range(len(ops)):
            if req[i] < 0:
                continue
            c = ops[i] if 0 <= ops[i] < last else last
            f = flags[rank[i] * width + (req[i] - lo)]
            if post_lut[c] and not f & 1 and complete[rank[i]]:
                if p == 1:
                    open_[n_open] = i
                n_open += 1
            elif free_lut[c] and f & 2:
                if p == 1:
                    bad[n_bad] = i
                n_bad += 1
    return open_, bad
