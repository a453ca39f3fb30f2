"""A trace's rows rank by rank, a batch at a time, in bounded memory: the reader under a
streamed check or replay (``replay.segments``), for traces larger than memory.

Each rank's file is read through a small buffered stream, one batch of rows at a time (pyarrow
decodes a row group's pages as the batches need them, so a row group of millions of rows is
never held whole). The arrays are those of ``read_columns``: ``op`` as codes into ``OPS``,
``region`` as codes into names numbered in the order they are first met over all ranks (one
numbering for the whole read: ``RankBatches.region_names``), integer columns in their schema
types. Errors are ``TraceError`` naming the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hindsight.trace.columns import dict_codes
from hindsight.trace.core import OP_CODE, TraceError
from hindsight.trace.read import RankSource, check_rank_column, check_schema, open_trace
from hindsight.trace.schema import (COLUMNS, NUMPY_TYPES, READ_ERRORS, READ_OPTIONS, numpy_of,
                                    short_error)

#: bytes a rank's stream buffers per column read: small, since every rank has one open
_STREAM_BUFFER = 1 << 16


def column_dtype(name: str) -> np.dtype:
    """The array type of a column as the readers return it."""
    return np.dtype(np.int8) if name == "op" else np.dtype(np.int16) if name == "region" \
        else NUMPY_TYPES[name]


class RankBatches:
    """The rows of every rank of a trace, read per rank in batches of at most ``batch_rows``.

    ``next(rank)`` returns that rank's next batch (a dict of arrays) or None at its end.
    ``rows`` is the number of rows of each rank (from the footers)."""

    def __init__(self, trace_dir: Path | str, columns: list[str] | None = None,
                 batch_rows: int = 1 << 16, allow_partial: bool = False):
        self.path = Path(trace_dir)
        self.manifest, self.sources = open_trace(self.path, allow_partial)
        self.columns = list(columns or COLUMNS)
        self.batch_rows = max(int(batch_rows), 1)
        self._region_of: dict[str, int] = {}
        self._iters: dict[int, Iterator[tuple[Path, pa.RecordBatch]]] = {}
        self.rows = np.zeros(len(self.sources), np.int64)
        for src in self.sources:
            for path in src.files:
                self.rows[src.rank] += self._open(src, path).metadata.num_rows

    @property
    def region_names(self) -> list[str]:
        """Region names by code, as far as the batches read so far have met them."""
        names = [""] * len(self._region_of)
        for k, v in self._region_of.items():
            names[v] = k
        return names

    def _open(self, src: RankSource, path: Path) -> pq.ParquetFile:
        try:
            if src.staged is not None:
                return pq.ParquetFile(pa.BufferReader(src.staged), **READ_OPTIONS)
            return pq.ParquetFile(path, buffer_size=_STREAM_BUFFER, pre_buffer=False,
                                  **READ_OPTIONS)
        except READ_ERRORS as exc:
            raise TraceError(f"{path}: not a readable Parquet file ({short_error(exc)})") \
                from None

    def _batches(self, src: RankSource) -> Iterator[tuple[Path, pa.RecordBatch]]:
        for path in src.files:
            pf = self._open(src, path)
            try:
                check_schema(path, pf.schema_arrow, self.columns)
                for b in pf.iter_batches(batch_size=self.batch_rows, columns=self.columns,
                                         use_threads=False):
                    yield path, b
            except TraceError:
                raise
            except READ_ERRORS as exc:
                raise TraceError(f"{path}: corrupt or truncated Parquet data "
                                 f"({short_error(exc)})") from None

    def next(self, rank: int) -> dict[str, np.ndarray] | None:
        """Rank ``rank``'s next batch of rows (None: it has no more)."""
        it = self._iters.get(rank)
        if it is None:
            it = self._iters[rank] = self._batches(self.sources[rank])
        try:
            path, batch = next(it)
        except StopIteration:
            return None
        out = {}
        for c, col in zip(self.columns, batch.columns):
            dst = np.empty(len(col), column_dtype(c))
            if c == "op":
                dict_codes(col, OP_CODE, path, c, dst, grow=False)
            elif c == "region":
                dict_codes(col, self._region_of, path, c, dst)
            elif col.null_count:
                raise TraceError(f"{path}: column '{c}' has null values")
            else:
                dst[:] = numpy_of(col)   # (to_numpy imports pandas: see numpy_of)
            out[c] = dst
        if "rank" in out:
            check_rank_column(path, out["rank"], rank)
        return out
