"""Writing traces: a rank's staged records sealed as its Parquet file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hindsight.trace.core import (
    METADATA_KEY,
    RAW_COLUMNS, RAW_FILE, TraceError, read_raw_names)
from hindsight.trace.raw import raw_records, raw_tables
from hindsight.trace.schema import SCHEMA, WRITE_OPTIONS


def write_staged(stage: Path, rank: int, where: Any, meta: dict[str, Any] | None = None,
                 drift: float = 0.0, epoch_ns: int | None = None) -> None:
    """Write a rank's raw staged records (`stage`) as one Parquet file to `where` (a path or an
    Arrow output stream), one row group per window of records, never the whole rank in memory.
    With `meta`, the file carries it as its hindsight metadata, completed with the records'
    `events`, `max_t_end_ns` and communicators. `epoch_ns` (the rank's clock reading at the
    run's epoch) wins over the names file's; with neither, it is a TraceError."""
    names = read_raw_names(stage)
    if epoch_ns is not None:
        names["epoch_ns"] = epoch_ns
    elif not names["epoch_ns"]:
        raise TraceError(f"{stage}: neither the names file nor the manifest gives this rank's "
                         "epoch")
    group = int(names.get("capacity") or 65536)
    raw = stage / RAW_FILE
    schema = SCHEMA
    if meta is not None:
        meta = dict(meta)
        meta.setdefault("communicators", {}).update(names.get("communicators") or {})
        records = raw_records(raw) if raw.is_file() else np.zeros((0, len(RAW_COLUMNS)))
        meta["events"] = len(records)
        last = int(records[:, -1].max()) - int(names["epoch_ns"]) if len(records) else 0
        meta["max_t_end_ns"] = round(last * (1.0 - drift)) if drift else last
        del records
        schema = SCHEMA.with_metadata({METADATA_KEY: json.dumps(meta).encode()})
    with pq.ParquetWriter(where, schema, **WRITE_OPTIONS) as writer:
        for table in raw_tables(raw, rank, names, drift, group):
            writer.write_table(table, row_group_size=group)


def staged_parquet(stage: Path, rank: int, epoch_ns: int | None = None) -> pa.Buffer | None:
    """A dead rank's raw staged records as the bytes of a Parquet file in memory, so that every
    reader reads them as it reads a sealed file; None if nothing was staged. `epoch_ns` (from
    the manifest) is used where known."""
    if not (stage / RAW_FILE).is_file():
        return None
    sink = pa.BufferOutputStream()
    write_staged(stage, rank, sink, epoch_ns=epoch_ns)
    return sink.getvalue()
