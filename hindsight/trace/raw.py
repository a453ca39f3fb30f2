"""A rank's raw staging records (``core.RAW_COLUMNS``) read back as Arrow tables: what a rank
that finished seals into Parquet, and what the readers decode in memory for a rank that died."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from hindsight.trace.core import OP_CODE, RAW_COLUMNS, TraceError
from hindsight.trace.schema import rows_to_table


def raw_records(path: Path) -> np.ndarray:
    """The written records of a raw staging file (core.RAW_COLUMNS), memory-mapped, as an
    (n, fields) int64 array: up to the first record whose `t_end` is 0 (never written, or being
    written when the rank was killed)."""
    k = len(RAW_COLUMNS)
    size = path.stat().st_size // (8 * k)
    if size == 0:
        return np.zeros((0, k), np.int64)
    data = np.memmap(path, dtype="<i8", mode="r", shape=(size, k))
    t_end = data[:, k - 1]
    n = size
    step = 1 << 16
    for lo in range(0, size, step):      # windows are filled in order: find the first gap
        zero = np.flatnonzero(t_end[lo:lo + step] == 0)
        if len(zero):
            n = lo + int(zero[0])
            break
    return data[:n]


def first_overlap(records: np.ndarray) -> tuple[int, int] | None:
    """Where a rank's MPI calls first overlap in its raw records: (i, j), record i starting
    before record j, recorded earlier, ended; None if they never do. Rows of one call (the two
    of a Sendrecv, the completions of one Waitall) share their times and do not count; regions
    enclose calls and are left out. One thread's calls follow each other, so an overlap means
    that two threads called MPI at once (or the program called MPI from inside an MPI call)."""
    col = {c: i for i, c in enumerate(RAW_COLUMNS)}
    mpi = np.flatnonzero(records[:, col["op"]] != OP_CODE["region"])
    if len(mpi) < 2:
        return None
    t0 = np.asarray(records[mpi, col["t_start"]])
    t1 = np.asarray(records[mpi, col["t_end"]])
    latest = np.maximum.accumulate(t1)
    same_call = (t0[1:] == t0[:-1]) & (t1[1:] == t1[:-1])
    bad = np.flatnonzero((t0[1:] < latest[:-1]) & ~same_call)
    if not len(bad):
        return None
    k = int(bad[0]) + 1
    return int(mpi[k]), int(mpi[int(np.argmax(t1[:k]))])


def raw_tables(path: Path, records: np.ndarray, rank: int, names: dict[str, Any],
               drift: float = 0.0, group: int = 65536):
    """Tables of `group` rows each (none if there are no records) from `records`, those of the
    rank's raw staging file `path` it keeps (``raw_records``); `names` is the rank's raw
    names (core.read_raw_names: epoch, region names). Clock readings become run time."""
    epoch = int(names.get("epoch_ns") or 0)
    regions = list(names.get("regions") or [])
    col = {c: i for i, c in enumerate(RAW_COLUMNS)}
    for lo in range(0, len(records), group):
        chunk = np.array(records[lo:lo + group])
        cols = {c: chunk[:, i] for c, i in col.items()}
        for name in ("t_start", "t_end"):
            t = cols[name] - epoch
            if drift:
                t = np.rint(t * (1.0 - drift)).astype(np.int64)
            cols[name] = t
        if int(cols["region"].max()) >= len(regions):
            raise TraceError(f"{path}: a record names region {int(cols['region'].max())}, "
                             f"but only {len(regions)} region names were saved")
        yield rows_to_table(rank, lo, cols, cols["op"], cols["region"], regions)
