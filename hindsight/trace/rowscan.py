"""Compiled passes over trace rows for ``hindsight.trace`` (kept apart so that importing the trace
format, as the tracer does in every rank, does not import numba)."""
from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True, nogil=True)
def gather_mask(lut, codes):
    """``lut[codes]`` as booleans; codes outside the table (-1: an unknown op) take its last
    slot. NumPy's own gather would first widen the int8 codes to a full-size index array."""
    out = np.empty(len(codes), np.bool_)
    last = len(lut) - 1
    for i in range(len(codes)):
        c = codes[i]
        out[i] = lut[c if 0 <= c < last else last]
    return out


@nb.njit(cache=True, nogil=True)
def in_rank_seq_order(rank, seq):
    """See ``hindsight.trace.in_rank_seq_order``."""
    for i in range(1, len(rank)):
        if rank[i] < rank[i - 1] or (rank[i] == rank[i - 1] and seq[i] <= seq[i - 1]):
            return False
    return True


@nb.njit(cache=True, nogil=True)
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
