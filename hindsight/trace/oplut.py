"""Lookups over op codes and row-order checks: NumPy only, so that a replay whose prepared trace
comes from the cache (no Parquet read) loads no pyarrow. Not imported by a traced rank, which
loads the standard library and mpi4py only (hindsight.trace.core)."""

from __future__ import annotations

import numpy as np

from hindsight.trace.core import OP_CODE, OPS


def op_lut(names) -> np.ndarray:
    """Per op code, whether it is one of ``names``; the extra last slot, what code -1 (an op
    this version does not know) indexes, is False."""
    lut = np.zeros(len(OPS) + 1, bool)
    lut[[OP_CODE[x] for x in names]] = True
    return lut


def op_mask(codes: np.ndarray, names) -> np.ndarray:
    """Boolean mask of the rows whose op code is one of ``names``; -1 (unknown op) is never in.

    A lookup table indexed by code: one compiled gather per row (``np.isin`` sorts, and
    NumPy's own gather first widens the int8 codes to a full-size index array)."""
    from hindsight.trace import rowscan  # numba: imported on first use, not by every traced rank
    return rowscan.gather_mask(op_lut(names), np.asarray(codes))


def in_rank_seq_order(rank: np.ndarray, seq: np.ndarray) -> bool:
    """Whether rows are in (rank, seq) order, seq strictly rising within a rank: the order the
    readers produce and matching's "k-th send meets k-th receive" relies on."""
    from hindsight.trace import rowscan
    return bool(rowscan.in_rank_seq_order(rank, seq))


def rank_offsets(rank: np.ndarray, nranks: int) -> np.ndarray:
    """Where each rank's rows start in ``rank`` (sorted by rank), and ``len(rank)`` last:
    ``nranks + 1`` offsets. Searched in the column's own integer type: an int64 ``arange``
    against an int32 column made NumPy copy the column wide first (4 bytes a row of new
    memory)."""
    rank = np.asarray(rank)
    wide = rank.dtype.kind not in "iu" or nranks >= np.iinfo(rank.dtype).max
    return np.searchsorted(rank, np.arange(nranks + 1, dtype=np.int64 if wide else rank.dtype))


def probes_before_receives(is_probe: np.ndarray, is_recv: np.ndarray,
                           *same: np.ndarray) -> np.ndarray:
    """Rows that are a probe whose next row is the receive of the same message: ``is_probe`` at
    i, ``is_recv`` at i + 1, and every array of ``same`` (rank, peer, tag, communicator) equal
    at both. A traced pickle-API ``recv`` is such a pair (the matched probe, then the receive,
    the buffer allocation between them); so is a program's own Probe / allocate / Recv."""
    ok = is_probe[:-1] & is_recv[1:]
    for col in same:
        ok &= col[:-1] == col[1:]
    return np.flatnonzero(ok)
