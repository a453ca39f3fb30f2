"""The fast reader: a trace's columns as flat NumPy arrays, decoded file by file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hindsight.system import gc_paused
from hindsight.trace.core import (
    OP_CODE, OPS, RANK_FILE_RE, TraceError)
from hindsight.trace.read import (RankSource, check_rank_column, check_schema, open_parquet,
                                   open_trace, parquet_reader)
from hindsight.trace.schema import (COLUMNS, NUMPY_TYPES, OPS_ARRAY, READ_ERRORS, numpy_of,
                                     short_error)


@dataclass
class Columns:
    """A trace read straight into flat NumPy arrays, one per column, in (rank, seq) file order.

    ``op`` holds codes into ``OPS`` (int8, -1 for names this version lacks) and ``region`` codes
    into ``region_names`` (int16, -1 = none); integer columns keep their schema types. This is
    the form replay and check work on: no Arrow table is held, so memory is the arrays alone."""

    path: Path
    manifest: dict[str, Any]
    arrays: dict[str, np.ndarray]
    region_names: list[str]
    sources: list[RankSource]

    @property
    def nrows(self) -> int:
        return len(next(iter(self.arrays.values()))) if self.arrays else 0

    @property
    def complete(self) -> bool:
        return all(s.complete for s in self.sources) and bool(self.manifest.get("complete"))

    @property
    def incomplete_ranks(self) -> list[int]:
        return [s.rank for s in self.sources if not s.complete]



def dict_codes(chunk: pa.Array, lut_of: dict[str, int], path: Path, name: str,
                out: np.ndarray | None = None, grow: bool = True) -> np.ndarray:
    """Codes of a (dictionary) string chunk in a caller-wide numbering ``lut_of``, written into
    ``out`` (default: a new int16 array); nulls are -1. Names not in ``lut_of`` are added to it
    (``grow``) or coded -1 (op names this version does not know)."""
    from hindsight.trace import rowscan

    if not pa.types.is_dictionary(chunk.type):
        chunk = chunk.dictionary_encode()
    if out is None:
        out = np.empty(len(chunk), np.int16)
    if len(chunk) == 0:
        return out
    if lut_of is OP_CODE and chunk.dictionary.equals(OPS_ARRAY):
        lut = np.arange(len(OPS), dtype=out.dtype)  # written by hindsight: codes are OP_CODE
    else:
        names = chunk.dictionary.to_pylist()
        lut = np.array([-1 if x is None else lut_of.setdefault(x, len(lut_of)) if grow
                        else lut_of.get(x, -1) for x in names], out.dtype)
    idx = chunk.indices
    validity, data = idx.buffers()[:2]
    codes = np.frombuffer(data, np.dtype(idx.type.to_pandas_dtype()),
                          count=idx.offset + len(idx))[idx.offset:]
    valid = np.frombuffer(validity, np.uint8) if idx.null_count and validity is not None \
        else np.zeros(0, np.uint8)
    bad = rowscan.decode_codes(codes, valid, idx.offset, lut, out)
    if bad >= 0:
        raise TraceError(f"{path}: column '{name}' has dictionary indices out of range")
    return out


def sort_rows(table: pa.Table) -> pa.Table:
    """The rows of ``table`` in (rank, seq) order, the order the readers and matching rely on
    (tables from other tools or from replayed timelines need not be in it)."""
    order = np.lexsort((numpy_of(table.column("seq")), numpy_of(table.column("rank"))))
    return table.take(pa.array(order))


def table_columns(table: pa.Table) -> tuple[dict[str, np.ndarray], list[str]]:
    """An Arrow table of trace rows as the flat arrays of ``Columns`` (and its region names)."""
    region_of: dict[str, int] = {}
    out: dict[str, np.ndarray] = {}
    for c in table.column_names:
        if c not in COLUMNS:
            continue
        col = table.column(c)
        if c in ("op", "region"):
            codes = np.empty(len(col), np.int8 if c == "op" else np.int16)
            at = 0
            for ch in col.chunks:
                dict_codes(ch, OP_CODE if c == "op" else region_of, Path("<table>"), c,
                            codes[at:at + len(ch)], grow=c != "op")
                at += len(ch)
            out[c] = codes
        else:
            out[c] = numpy_of(col)
    names = [""] * len(region_of)
    for k, v in region_of.items():
        names[v] = k
    return out, names


#: Average rows per file from which ``read_columns`` decodes files in threads (see there).
_THREADED_ROWS_PER_FILE = 40_000


@gc_paused()
def read_columns(trace_dir: Path | str, columns: list[str] | None = None,
                 allow_partial: bool = True, threads: int | None = None) -> Columns:
    """Read a trace into flat arrays, one row group at a time (memory: the arrays only).

    The row count comes from the footers, so every array is allocated once and each file's rows
    have a known slice; files are decoded in ``threads`` threads (default: the usable cores
    when the files are large, else one; pyarrow decodes without the GIL), each row group
    copied into its slice. Region names are
    numbered per file and renumbered afterwards in file order, so the codes do not depend on
    which thread finished first. Errors are ``TraceError`` naming the file."""
    from concurrent.futures import ThreadPoolExecutor

    trace_dir = Path(trace_dir)
    manifest, sources = open_trace(trace_dir, allow_partial, keep_open=True)
    columns = list(columns or COLUMNS)
    files = []
    # per distinct schema: each requested column's leaf index in the file (converting a footer's
    # schema to Arrow costs more than comparing it with one already checked)
    checked: list[tuple[pq.ParquetSchema, dict[str, int]]] = []
    total = 0
    for src in sources:
        for path in src.files:
            # A merged rank file was opened (from its bytes) with the sources; a dead rank's
            # staged records were converted in memory.
            pf = (src.parquet if src.parquet is not None else
                  parquet_reader(pa.BufferReader(src.staged)) if src.staged is not None else
                  open_parquet(path))
            footer = pf.metadata
            leaf = next((ix for sch, ix in checked if footer.schema.equals(sch)), None)
            if leaf is None:
                try:
                    names = footer.schema.names
                    check_schema(path, footer.schema.to_arrow_schema(), columns)
                except READ_ERRORS as exc:  # e.g. a column name that is not UTF-8
                    raise TraceError(f"{path}: corrupt Parquet footer ({short_error(exc)})") from None
                leaf = {c: names.index(c) for c in columns}
                checked.append((footer.schema, leaf))
            files.append((path, pf, leaf, src.rank, total))
            total += footer.num_rows
    out: dict[str, np.ndarray] = {}
    for c in columns:
        dt = np.int8 if c == "op" else np.int16 if c == "region" else NUMPY_TYPES[c]
        out[c] = np.empty(total, dt)

    def read_file(item) -> tuple[int, list[str]]:
        """Decode one file into its slice; returns (rows read, its region names by code)."""
        path, pf, leaf, file_rank, pos = item
        footer = pf.metadata
        region_of: dict[str, int] = {}
        start = pos
        for g in range(footer.num_row_groups):
            meta = footer.row_group(g)
            n = meta.num_rows
            if pos + n > start + footer.num_rows:
                raise TraceError(f"{path}: row group {g} holds more rows than its footer says")
            decode = []
            check_rank = "rank" in out
            for c in columns:
                chunk_meta = meta.column(leaf[c])
                if chunk_meta.physical_type != _PHYSICAL[c]:
                    # A footer whose schema disagrees with the Arrow schema it carries: pyarrow
                    # may abort the process on such a chunk's statistics or pages.
                    raise TraceError(f"{path}: corrupt Parquet schema: column '{c}' is stored "
                                     f"as {chunk_meta.physical_type}, not {_PHYSICAL[c]}")
                value = _constant(chunk_meta, n, c == "op" or c == "region")
                if value is None:
                    decode.append(c)
                    continue
                out[c][pos:pos + n] = value
                if c == "rank":
                    check_rank = value != file_rank  # (then the check below says so)
            try:
                rg = pf.read_row_group(g, column_indices=[leaf[c] for c in decode],
                                       use_threads=False) if decode else None
            except READ_ERRORS as exc:
                raise TraceError(f"{path}: corrupt or truncated Parquet data in row group {g} "
                                 f"({short_error(exc)})") from None
            if rg is not None:
                if rg.num_rows != n:
                    raise TraceError(f"{path}: row group {g} holds {rg.num_rows} rows, its "
                                     f"footer says {n}")
                for c, col in zip(decode, rg.columns):
                    _copy_column(col, out[c], pos, path, c, region_of)
            if check_rank:
                check_rank_column(path, out["rank"][pos:pos + n], file_rank)
            pos += n
        names = [""] * len(region_of)
        for k, v in region_of.items():
            names[v] = k
        return pos - start, names

    if threads is None:
        # Threads pay off only for files large enough that pyarrow's decoding (without the
        # GIL) outweighs the per-file work under the GIL. Measured on 1M-event rings, 2
        # threads against 1: 10 % slower at 4 k and 16 k rows a file, even at 31 k, 7-30 %
        # faster from 62 k.
        from hindsight.system import usable_cores
        big = total >= _THREADED_ROWS_PER_FILE * max(len(files), 1)
        threads = usable_cores() if big else 1
    threads = max(1, min(threads, len(files)))
    if threads > 1:
        with ThreadPoolExecutor(threads) as ex:
            results = list(ex.map(read_file, files))
    else:
        results = [read_file(f) for f in files]
    for src in sources:
        src.parquet = None  # the files' bytes are decoded: free them
    got = sum(r[0] for r in results)
    if got != total:
        raise TraceError(f"{trace_dir}: the rank files hold {got} rows, their footers say {total}")
    region_of: dict[str, int] = {}
    for (path, _, _, _, pos), (n, names) in zip(files, results):
        if "region" not in out or not names:
            continue
        lut = np.array([region_of.setdefault(x, len(region_of)) for x in names] + [-1], np.int16)
        if not all(lut[i] == i for i in range(len(names))):
            sl = out["region"][pos:pos + n]
            sl[:] = lut[np.where(sl >= 0, sl, len(names))]
    names = [""] * len(region_of)
    for k, v in region_of.items():
        names[v] = k
    return Columns(trace_dir, manifest, out, names, sources)


def _copy_column(col: pa.ChunkedArray, out: np.ndarray, pos: int, path: Path, name: str,
                 region_of: dict[str, int]) -> None:
    """The decoded column ``col`` into ``out[pos:]``: codes for ``op`` and ``region`` (region
    names numbered in ``region_of``), values for the integer columns (which have no nulls)."""
    for chunk in col.chunks:
        dst = out[pos:pos + len(chunk)]
        pos += len(chunk)
        if name == "op":
            dict_codes(chunk, OP_CODE, path, name, dst, grow=False)
        elif name == "region":
            dict_codes(chunk, region_of, path, name, dst)
        elif chunk.null_count:
            raise TraceError(f"{path}: column '{name}' has null values")
        else:
            dst[:] = numpy_of(chunk)   # (to_numpy imports pandas: see numpy_of)


#: The Parquet physical type each column is written with (the writer's schema): integers of 64
#: bits as INT64, narrower ones as INT32, the dictionary-encoded strings as BYTE_ARRAY.
_PHYSICAL = {c: "INT64" if t.itemsize == 8 else "INT32" for c, t in NUMPY_TYPES.items()}
_PHYSICAL.update(op="BYTE_ARRAY", region="BYTE_ARRAY")


def _constant(chunk_meta: pq.ColumnChunkMetaData, rows: int, dictionary: bool) -> int | None:
    """The value of every row of a column chunk when its footer statistics say there is one
    (integer columns: no nulls, min == max; a dictionary column with only nulls: -1), else
    None. Such chunks are filled, not decoded: in a rank's file, ``rank`` is constant and
    ``request``, ``root``, ``comm`` often are, and decoding a small chunk costs far more than
    its values (measured: 7 of 13 columns of a 64-rank ring, a third of its read time).
    Integer statistics are exact (Parquet truncates only byte-array ones); a skipped chunk's
    values come from the footer, so its data pages are not read at all."""
    st = chunk_meta.statistics
    nulls = st.null_count if st is not None else None  # None: not recorded
    if nulls is None:
        return None
    if dictionary:
        return -1 if nulls == rows else None
    if nulls:
        return None
    # (physical values: half the cost of the logical ones, and the same for integer columns)
    low = st.min_raw  # None: not recorded
    return low if low is not None and low == st.max_raw else None












def dataset(trace_dir: Path | str):
    """The rank files of a trace as one pyarrow dataset (lazy: for filters and projections)."""
    import pyarrow.dataset as ds

    files = sorted(str(p) for p in Path(trace_dir).glob("rank-*.parquet")
                   if RANK_FILE_RE.match(p.name))
    return ds.dataset(files, format="parquet")
