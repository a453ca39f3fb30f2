"""A rank's raw staging records (``core.RAW_COLUMNS``) read back as Arrow tables: what a rank
that finished seals into Parquet, and what the readers decode in memory for a rank that died."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from hindsight.trace.core import (
    RAW_COLUMNS, TraceError)
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


def raw_tables(path: Path, rank: int, names: dict[str, Any], drift: float = 0.0,
               group: int = 65536):
    """Tables of `group` rows each (none if nothing was recorded) from a rank's raw staging
    file; `names` is the rank's raw
    names (core.read_raw_names: epoch, region names). Clock readings become run time."""
    records = raw_records(path) if path.is_file() else np.zeros((0, len(RAW_COLUMNS)), np.int64)
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
