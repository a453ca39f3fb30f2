"""The Parquet side of the trace format: the schema, its write and read options, op lookup
tables and the row-order rules every reader checks (docs/trace-format.md)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from hindsight.trace.core import (
    OP_CODE, OPS)


def _string_array(values) -> pa.Array:
    """``pa.array(values, pa.string())``, built from its buffers: ``pa.array`` first asks
    whether pandas is installed, which imports pandas (a third of a second for every command
    that reads this module, a replay of a cached trace included)."""
    data = [v.encode() for v in values]
    offsets = np.zeros(len(data) + 1, np.int32)
    offsets[1:] = np.cumsum([len(d) for d in data])
    return pa.StringArray.from_buffers(len(data), pa.py_buffer(offsets.tobytes()),
                                       pa.py_buffer(b"".join(data)))


def _int_array(values: np.ndarray, null: np.ndarray | None = None) -> pa.Array:
    """``pa.array(values, mask=null)`` of an integer array, built from its buffers (``pa.array``
    imports pandas, as in ``_string_array``)."""
    values = np.ascontiguousarray(values)
    validity, nulls = None, 0
    if null is not None and null.any():
        validity = pa.py_buffer(np.packbits(~null, bitorder="little"))
        nulls = int(null.sum())
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values),
                                 [validity, pa.py_buffer(values)], null_count=nulls)


OPS_ARRAY = _string_array(OPS)  # the op dictionary of the files hindsight writes


def numpy_of(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """An integer or float column as one NumPy array (a read-only view of a single chunk, else
    a new array), read from its buffers: pyarrow's ``to_numpy`` imports pandas on its first
    call (0.3 s of an export's start-up). A column with nulls or of another type goes through
    ``to_numpy``."""
    chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
    if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)) or \
            any(ch.null_count for ch in chunks):
        return col.to_numpy()
    dtype = np.dtype(col.type.to_pandas_dtype())
    parts = [np.frombuffer(ch.buffers()[1], dtype, count=ch.offset + len(ch))[ch.offset:]
             for ch in chunks if len(ch)]
    if len(parts) == 1:
        parts[0].flags.writeable = False        # Arrow's memory, as to_numpy gives it
        return parts[0]
    return np.concatenate(parts) if parts else np.empty(0, dtype)


# The columns in file order. `op` and `region` are dictionary-encoded strings. Their Arrow
# indices are int32, the width Parquet's reader decodes to: narrower ones cost a cast per
# column chunk, half the time of reading `op` from a small file. Readers accept any index width
# (files written with int8 and int16 indices read as well).
SCHEMA = pa.schema([
    pa.field("rank", pa.int32(), nullable=False),
    pa.field("seq", pa.int64(), nullable=False),
    pa.field("op", pa.dictionary(pa.int32(), pa.string()), nullable=False),
    pa.field("region", pa.dictionary(pa.int32(), pa.string()), nullable=True),
    pa.field("t_start", pa.int64(), nullable=False),
    pa.field("t_end", pa.int64(), nullable=False),
    pa.field("cpu_ns", pa.int64(), nullable=False),
    pa.field("peer", pa.int32(), nullable=False),
    pa.field("tag", pa.int32(), nullable=False),
    pa.field("comm", pa.int32(), nullable=False),
    pa.field("nbytes", pa.int64(), nullable=False),
    pa.field("request", pa.int64(), nullable=False),
    pa.field("root", pa.int32(), nullable=False),
])
COLUMNS: tuple[str, ...] = tuple(SCHEMA.names)
NUMPY_TYPES = {f.name: np.dtype(str(f.type)) for f in SCHEMA if pa.types.is_integer(f.type)}
INT_COLUMNS: tuple[str, ...] = tuple(c for c in COLUMNS if c not in ("op", "region"))

# Monotone or slowly varying integer columns compress best with delta encoding; the rest with
# dictionaries; LZ4 (the interoperable LZ4_RAW codec) on top: 3.3 bytes per event on the
# workloads of benchmarks/instrument_overhead.py. zstd made files 1.2-1.25x smaller but decoded
# 1.5x slower, and its set-up per column chunk was half of the read of a 64-rank trace of small
# files (docs/trace-format.md, "Encodings and compression").
_DELTA_COLUMNS = ("seq", "t_start", "t_end")
WRITE_OPTIONS: dict[str, Any] = dict(
    compression="lz4",
    use_dictionary=[c for c in COLUMNS if c not in _DELTA_COLUMNS],
    column_encoding={c: "DELTA_BINARY_PACKED" for c in _DELTA_COLUMNS},
    write_statistics=True,
    # A CRC32 per page: flipped bytes in the data are an error on reading (the readers below
    # verify it), not silently different timestamps. Costs well under 1 % of the write.
    write_page_checksum=True,
)
#: Options of every ParquetFile the readers open (pages without a checksum are read as before).
READ_OPTIONS: dict[str, Any] = dict(page_checksum_verification=True)


#: What pyarrow raises on a damaged file: IO errors, Arrow errors, and ValueError (a
#: UnicodeDecodeError of a column name or metadata string in a corrupt footer).
READ_ERRORS = (OSError, pa.ArrowException, ValueError)


def rows_to_table(rank: int, seq0: int, cols: dict[str, np.ndarray], op_codes: np.ndarray,
                  region_codes: np.ndarray, regions: list[str]) -> pa.Table:
    """Build one row group from flat columns prepared by the instrumentation buffer.

    `op_codes` index OPS; `region_codes` index `regions` (-1 means no region).
    """
    n = len(op_codes)
    op = pa.DictionaryArray.from_arrays(_int_array(op_codes.astype(np.int32)), OPS_ARRAY)
    reg_idx = _int_array(region_codes.astype(np.int32), region_codes < 0)
    region = pa.DictionaryArray.from_arrays(reg_idx, _string_array(regions or [""]))
    arrays = [
        _int_array(np.full(n, rank, np.int32)),
        _int_array(np.arange(seq0, seq0 + n, dtype=np.int64)),
        op,
        region,
    ] + [_int_array(cols[c].astype(NUMPY_TYPES[c], copy=False)) for c in COLUMNS[4:]]
    return pa.Table.from_arrays(arrays, schema=SCHEMA)


def short_error(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
