"""The hindsight trace format: one module, the contract that docs/trace-format.md describes.

A trace is a directory::

    DIR/manifest.json          run metadata (JSON, see MANIFEST_KEYS in docs)
    DIR/rank-00000.parquet     one Parquet file per rank, one row per event
    DIR/rank-00001.parquet
    ...

While a run is in progress each rank writes raw records (formatcore.RAW_COLUMNS) into
``DIR/.staging/rank-NNNNN/events.raw``; a rank that finishes turns them into its
``rank-NNNNN.parquet`` (written to a temporary name, then renamed). A rank that dies leaves its
raw records: they stay readable (the readers convert them in memory), and the reader reports that
rank as incomplete. Nothing incomplete is ever presented as complete.

Every column, unit and invariant is documented in docs/trace-format.md; keep the two in step.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hindsight.memory import gc_paused

from hindsight.formatcore import (  # noqa: F401  (re-exported: the format's names)
    ANY_SOURCE, ANY_TAG, BLOCKING_RECV_OPS, COLLECTIVE_OPS, COMM_OPS, COMM_SELF_ID,
    COMM_WORLD_ID, COMPLETION_OPS, FORMAT_VERSION, MANIFEST_NAME, MAX_RANKS, METADATA_KEY,
    NONBLOCKING_SEND_OPS, NONE, OP_CODE, OPS, RANK_FILE_RE, RAW_COLUMNS, RAW_FILE, RAW_NAMES_FILE,
    RAW_RECORD, ROOTED_OPS, SEND_OPS, STAGING_DIR, TraceError, derived_comm_id, rank_file_name,
    clear_run, epoch_of, read_raw_names, staging_dir, write_json, write_manifest)

_OPS_ARRAY = pa.array(OPS, pa.string())  # the op dictionary of the files hindsight writes


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
    from hindsight import rowscan  # numba: imported on first use, not by every traced rank
    return rowscan.gather_mask(op_lut(names), np.asarray(codes))


def in_rank_seq_order(rank: np.ndarray, seq: np.ndarray) -> bool:
    """Whether rows are in (rank, seq) order, seq strictly rising within a rank: the order the
    readers produce and matching's "k-th send meets k-th receive" relies on."""
    from hindsight import rowscan
    return bool(rowscan.in_rank_seq_order(rank, seq))

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


# The columns in file order. `op` and `region` are dictionary-encoded strings. Their Arrow
# indices are int32, the width Parquet's reader decodes to: narrower ones (int8 and int16 until
# 2026-11-23) cost a cast per column chunk, half the time of reading `op` from a small file.
# Readers accept any index width.
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
_NUMPY_TYPES = {f.name: np.dtype(str(f.type)) for f in SCHEMA if pa.types.is_integer(f.type)}
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
    op = pa.DictionaryArray.from_arrays(pa.array(op_codes.astype(np.int32), pa.int32()),
                                        _OPS_ARRAY)
    reg_idx = pa.array(region_codes.astype(np.int32), pa.int32(), mask=region_codes < 0)
    region = pa.DictionaryArray.from_arrays(reg_idx, pa.array(regions or [""], pa.string()))
    arrays = [
        pa.array(np.full(n, rank, np.int32)),
        pa.array(np.arange(seq0, seq0 + n, dtype=np.int64)),
        op,
        region,
    ] + [pa.array(cols[c].astype(_NUMPY_TYPES[c], copy=False)) for c in COLUMNS[4:]]
    return pa.Table.from_arrays(arrays, schema=SCHEMA)


def raw_records(path: Path) -> np.ndarray:
    """The written records of a raw staging file (formatcore.RAW_COLUMNS), memory-mapped, as an
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
    names (formatcore.read_raw_names: epoch, region names). Clock readings become run time."""
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


# ----------------------------------------------------------------------------------------------
# Manifest


def read_manifest(trace_dir: Path) -> dict[str, Any]:
    path = Path(trace_dir) / MANIFEST_NAME
    if not Path(trace_dir).is_dir():
        raise TraceError(f"{trace_dir}: no such trace directory")
    if not path.is_file():
        raise TraceError(f"{path}: missing manifest (not a hindsight trace directory?)")
    try:
        manifest = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TraceError(f"{path}: unreadable manifest: {exc}") from None
    if not isinstance(manifest, dict) or "format_version" not in manifest:
        raise TraceError(f"{path}: not a hindsight manifest (no format_version)")
    major = str(manifest["format_version"]).split(".")[0]
    if major != FORMAT_VERSION.split(".")[0]:
        raise TraceError(f"{path}: format version {manifest['format_version']} is not supported "
                         f"(this hindsight reads {FORMAT_VERSION})")
    for key in ("ranks", "run_id"):
        if key not in manifest:
            raise TraceError(f"{path}: manifest lacks '{key}'")
    # Types are checked here, once, so that a damaged manifest is one clear error rather than a
    # TypeError deep in a reader.
    ranks = manifest["ranks"]
    if not isinstance(ranks, int) or isinstance(ranks, bool) or not 1 <= ranks <= MAX_RANKS:
        raise TraceError(f"{path}: 'ranks' must be an integer in 1..{MAX_RANKS}, not {ranks!r}")
    if not isinstance(manifest["run_id"], str):
        raise TraceError(f"{path}: 'run_id' must be a string")
    status = manifest.get("rank_status")
    if status is not None and not (isinstance(status, list) and len(status) == ranks
                                   and all(isinstance(x, str) or x is None for x in status)):
        raise TraceError(f"{path}: 'rank_status' must list one status per rank ({ranks})")
    comms = manifest.get("communicators")
    if comms is not None and not (isinstance(comms, dict) and all(
            v is None or (isinstance(v, list) and v and all(
                isinstance(r, int) and not isinstance(r, bool) and 0 <= r < ranks for r in v))
            for v in comms.values())):
        raise TraceError(f"{path}: 'communicators' must map ids to non-empty lists of ranks "
                         f"below {ranks}")
    if comms is not None and not all(k.isdigit() for k in comms):
        raise TraceError(f"{path}: 'communicators' ids must be non-negative integers")
    for key, kind in _MANIFEST_TYPES.items():
        v = manifest.get(key)
        if v is not None and (not isinstance(v, kind) or (isinstance(v, bool) and bool not in
                                                           (kind if isinstance(kind, tuple)
                                                            else (kind,)))):
            raise TraceError(f"{path}: '{key}' has the wrong type ({type(v).__name__})")
    nodes = (manifest.get("network") or {}).get("node_of_rank")
    if nodes is not None and not (isinstance(nodes, list) and len(nodes) == ranks and all(
            isinstance(x, int) and not isinstance(x, bool) and 0 <= x < ranks for x in nodes)):
        raise TraceError(f"{path}: 'network.node_of_rank' must list one node number (0.."
                         f"{ranks - 1}) per rank")
    hosts = manifest.get("hosts") or {}
    if not all(isinstance(rs, list) and all(isinstance(r, int) and not isinstance(r, bool)
                                            for r in rs) for rs in hosts.values()):
        raise TraceError(f"{path}: 'hosts' must map host names to lists of ranks")
    return manifest


#: Types of the optional manifest keys that readers use (None is always allowed).
_MANIFEST_TYPES: dict[str, type | tuple[type, ...]] = {
    "complete": bool, "result_verified": bool, "clock": dict, "hosts": dict,
    "ranks_per_host": dict, "transport": dict, "args": dict, "collective_algorithms": dict,
    "network": dict, "events": list, "makespan_ns": (int, float), "start_unix": (int, float),
    "end_unix": (int, float),
}


# ----------------------------------------------------------------------------------------------
# Reading


@dataclass
class RankSource:
    """Where one rank's events come from and what its file says about itself."""

    rank: int
    files: list[Path]
    complete: bool
    status: str
    metadata: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    #: the merged file opened from its bytes in memory (``rank_sources(..., keep_open=True)``)
    parquet: Any = field(default=None, repr=False)
    #: a dead rank's raw staged records, as the bytes of a Parquet file (``staged_parquet``)
    staged: Any = field(default=None, repr=False)

    def open_file(self, path: Path) -> pq.ParquetFile:
        """One of ``files`` opened as a ParquetFile (a dead rank's staged records from memory)."""
        if self.staged is not None:
            return pq.ParquetFile(pa.BufferReader(self.staged), **READ_OPTIONS)
        return pq.ParquetFile(path, **READ_OPTIONS)


def file_metadata(path: Path) -> dict[str, Any]:
    """The hindsight key-value metadata of one Parquet file (footer only, no rows read)."""
    return _read_footer(path)[0]


def _read_footer(path: Path, keep_open: bool = False
                 ) -> tuple[dict[str, Any], pq.FileMetaData, pq.ParquetReader | None]:
    """(hindsight metadata, the Parquet footer, the file opened if ``keep_open``). A file kept
    open is read whole, once, and decoded from memory: that skips pyarrow's filesystem layer,
    its reads per column chunk and a second parse of the footer."""
    pf = None
    try:
        if keep_open:
            pf = _reader(pa.BufferReader(pa.py_buffer(path.read_bytes())))
            footer = pf.metadata
        else:
            footer = pq.read_metadata(path)
    except READ_ERRORS as exc:
        raise TraceError(f"{path}: not a readable Parquet file ({_short(exc)})") from None
    kv = footer.metadata or {}
    if METADATA_KEY not in kv:
        raise TraceError(f"{path}: Parquet file without hindsight metadata")
    try:
        meta = json.loads(kv[METADATA_KEY])
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise TraceError(f"{path}: corrupt hindsight metadata") from None
    if not isinstance(meta, dict):
        raise TraceError(f"{path}: corrupt hindsight metadata (not a JSON object)")
    return meta, footer, pf


def _short(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__


class UntracedRunError(TraceError):
    """The directory holds an untraced run's manifest (`collect --untraced`), no events: not a
    damaged trace, so `trace check` reports it as an error rather than as a problem found."""


def rank_sources(trace_dir: Path, manifest: dict[str, Any],
                 keep_open: bool = False) -> list[RankSource]:
    """Locate every rank's data: its sealed file, or the staged records a dead rank left.
    With ``keep_open`` each merged file is read into memory and kept open for decoding."""
    trace_dir = Path(trace_dir)
    if manifest.get("traced") is False:
        # `hindsight collect --untraced`: a manifest with a wall time and no events (a manifest
        # without the key is a traced run's)
        raise UntracedRunError(f"{trace_dir}: an untraced run (wall time only): nothing to replay")
    nranks = int(manifest["ranks"])
    sources = []
    # One listing of the directory, not a stat per rank (a tenth of the footer work of a trace
    # of small files)
    try:
        listed = {e.name for e in os.scandir(trace_dir) if e.is_file()}
    except OSError as exc:
        raise TraceError(f"{trace_dir}: cannot list the trace directory ({exc.strerror or exc})") \
            from None
    extra = sorted(name for name in listed
                   if (m := RANK_FILE_RE.match(name)) and int(m.group(1)) >= nranks)
    if extra:
        raise TraceError(f"{trace_dir / extra[0]}: rank file beyond the manifest's {nranks} ranks "
                         "(a file from another run?)")
    for rank in range(nranks):
        path = trace_dir / rank_file_name(rank)
        if path.name in listed:
            # (Parsing the footers in threads measured slower: most of it holds the GIL.)
            meta, footer, pf = _read_footer(path, keep_open)
            src = RankSource(rank, [path], meta.get("status") == "complete",
                             str(meta.get("status", "unknown")), meta, parquet=pf)
            run = meta.get("run") if isinstance(meta.get("run"), dict) else {}
            if run.get("ranks") is not None and run.get("ranks") != nranks:
                # Checked before the run id: "another rank count" says more than "another run".
                raise TraceError(f"{path}: written by a run of {run.get('ranks')} ranks, the "
                                 f"manifest says {nranks} (a file from another run?)")
            if meta.get("run_id") != manifest["run_id"]:
                raise TraceError(f"{path}: belongs to run {meta.get('run_id')}, the manifest to "
                                 f"run {manifest['run_id']} (mixed runs in one directory)")
            if meta.get("rank") != rank:
                raise TraceError(f"{path}: file says it is rank {meta.get('rank')}")
        else:
            stage = staging_dir(trace_dir, rank)
            problems = []
            try:
                staged = staged_parquet(stage, rank, epoch_of(manifest, rank))
            except (TraceError, *READ_ERRORS) as exc:
                staged = None
                problems.append(f"{stage / RAW_FILE}: unreadable staged records ignored "
                                f"({_short(exc)})")
            readable = [stage / RAW_FILE] if staged is not None else []
            recorded = (manifest.get("rank_status") or [None] * nranks)[rank]
            status = recorded if recorded not in (None, "complete", "running") else \
                ("incomplete" if readable else "missing")
            src = RankSource(rank, readable, False, status, {}, problems, staged=staged)
        sources.append(src)
    return sources


@dataclass
class Trace:
    """A loaded trace: one Arrow table for all ranks (sorted by rank, seq) plus its manifest."""

    path: Path
    manifest: dict[str, Any]
    table: pa.Table
    sources: list[RankSource]

    @property
    def complete(self) -> bool:
        return all(s.complete for s in self.sources) and bool(self.manifest.get("complete"))

    @property
    def nranks(self) -> int:
        return int(self.manifest["ranks"])

    def to_pandas(self):
        return self.table.to_pandas()

    @property
    def incomplete_ranks(self) -> list[int]:
        return [s.rank for s in self.sources if not s.complete]


def _open(trace_dir: Path, allow_partial: bool,
          keep_open: bool = False) -> tuple[dict[str, Any], list[RankSource]]:
    """Manifest and rank sources; refuses an incomplete trace unless ``allow_partial``."""
    manifest = read_manifest(trace_dir)
    sources = rank_sources(trace_dir, manifest, keep_open)
    incomplete = [s.rank for s in sources if not s.complete]
    if incomplete and not allow_partial:
        raise TraceError(f"{trace_dir}: incomplete trace (ranks {_ranges(incomplete)} did not "
                         "finish cleanly)")
    return manifest, sources


def read_trace(trace_dir: Path | str, columns: list[str] | None = None,
               allow_partial: bool = True) -> Trace:
    """Read a trace directory into one table.

    With ``allow_partial=False`` an incomplete trace is refused with a TraceError naming the ranks.
    """
    trace_dir = Path(trace_dir)
    manifest, sources = _open(trace_dir, allow_partial)
    tables = []
    for src in sources:
        for path in src.files:
            try:
                # ParquetFile.read skips the dataset layer of pq.read_table: 2x faster on
                # many small rank files.
                t = src.open_file(path).read(columns=columns)
            except READ_ERRORS as exc:
                raise TraceError(f"{path}: corrupt or truncated Parquet data ({_short(exc)})") \
                    from None
            check_schema(path, t.schema, columns)
            if "rank" in t.column_names:
                _check_rank_column(path, t.column("rank").to_numpy(), src.rank)
            tables.append(t)
    schema = SCHEMA if columns is None else pa.schema([SCHEMA.field(c) for c in columns])
    table = pa.concat_tables([t if t.schema.equals(schema) else t.cast(schema)
                              for t in tables]) if tables else schema.empty_table()
    return Trace(trace_dir, manifest, table, sources)


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


def _dict_codes(chunk: pa.Array, lut_of: dict[str, int], path: Path, name: str,
                out: np.ndarray | None = None, grow: bool = True) -> np.ndarray:
    """Codes of a (dictionary) string chunk in a caller-wide numbering ``lut_of``, written into
    ``out`` (default: a new int16 array); nulls are -1. Names not in ``lut_of`` are added to it
    (``grow``) or coded -1 (op names this version does not know)."""
    from hindsight import rowscan

    if not pa.types.is_dictionary(chunk.type):
        chunk = chunk.dictionary_encode()
    if out is None:
        out = np.empty(len(chunk), np.int16)
    if len(chunk) == 0:
        return out
    if lut_of is OP_CODE and chunk.dictionary.equals(_OPS_ARRAY):
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
    order = np.lexsort((table.column("seq").to_numpy(), table.column("rank").to_numpy()))
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
                _dict_codes(ch, OP_CODE if c == "op" else region_of, Path("<table>"), c,
                            codes[at:at + len(ch)], grow=c != "op")
                at += len(ch)
            out[c] = codes
        else:
            out[c] = col.to_numpy()
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
    manifest, sources = _open(trace_dir, allow_partial, keep_open=True)
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
                  _reader(pa.BufferReader(src.staged)) if src.staged is not None else
                  _open_parquet(path))
            footer = pf.metadata
            leaf = next((ix for sch, ix in checked if footer.schema.equals(sch)), None)
            if leaf is None:
                try:
                    names = footer.schema.names
                    check_schema(path, footer.schema.to_arrow_schema(), columns)
                except READ_ERRORS as exc:  # e.g. a column name that is not UTF-8
                    raise TraceError(f"{path}: corrupt Parquet footer ({_short(exc)})") from None
                leaf = {c: names.index(c) for c in columns}
                checked.append((footer.schema, leaf))
            files.append((path, pf, leaf, src.rank, total))
            total += footer.num_rows
    out: dict[str, np.ndarray] = {}
    for c in columns:
        dt = np.int8 if c == "op" else np.int16 if c == "region" else _NUMPY_TYPES[c]
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
                value = _constant(meta.column(leaf[c]), n, c == "op" or c == "region")
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
                                 f"({_short(exc)})") from None
            if rg is not None:
                if rg.num_rows != n:
                    raise TraceError(f"{path}: row group {g} holds {rg.num_rows} rows, its "
                                     f"footer says {n}")
                for c, col in zip(decode, rg.columns):
                    _copy_column(col, out[c], pos, path, c, region_of)
            if check_rank:
                _check_rank_column(path, out["rank"][pos:pos + n], file_rank)
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
        from hindsight.conditions import usable_cores
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
            _dict_codes(chunk, OP_CODE, path, name, dst, grow=False)
        elif name == "region":
            _dict_codes(chunk, region_of, path, name, dst)
        elif chunk.null_count:
            raise TraceError(f"{path}: column '{name}' has null values")
        else:
            dst[:] = chunk.to_numpy(zero_copy_only=False)


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


def _reader(source) -> pq.ParquetReader:
    """pyarrow's Parquet reader on ``source``, footer parsed: the reader under ``ParquetFile``,
    whose set-up (a filesystem lookup, a map of column paths) added half the cost of parsing a
    small file's footer (measured: 94 against 62 µs a file of a 64-rank ring). Columns are
    chosen by leaf index here anyway. Column names are decoded only when asked for."""
    reader = pq.ParquetReader()
    # (pre-buffering coalesces the reads of a file on disk; from memory, or for the staged
    # parts read here once each, it is overhead)
    reader.open(source, pre_buffer=False, **READ_OPTIONS)
    return reader


def _open_parquet(path: Path) -> pq.ParquetReader:
    try:
        return _reader(pa.OSFile(str(path)))
    except READ_ERRORS as exc:
        raise TraceError(f"{path}: corrupt or truncated Parquet data ({_short(exc)})") from None


def _check_rank_column(path: Path, ranks: np.ndarray, rank: int) -> None:
    """Every row of a rank's file must say that rank (readers index per-rank arrays by it)."""
    bad = np.flatnonzero(ranks != rank)
    if len(bad):
        raise TraceError(f"{path}: row {bad[0]} says rank {ranks[bad[0]]}, the file is rank "
                         f"{rank}")


def check_schema(path: Path, schema: pa.Schema, columns: list[str] | None) -> None:
    for name in columns or COLUMNS:
        if name not in schema.names:
            raise TraceError(f"{path}: column '{name}' is missing")
        want = SCHEMA.field(name).type
        got = schema.field(name).type
        if pa.types.is_dictionary(want):
            ok = pa.types.is_dictionary(got) and pa.types.is_string(got.value_type) \
                or pa.types.is_string(got)
        else:
            ok = got == want
        if not ok:
            raise TraceError(f"{path}: column '{name}' has type {got}, expected {want}")


def _ranges(ranks: list[int]) -> str:
    out, start, prev = [], None, None
    for r in ranks:
        if start is None:
            start = prev = r
        elif r == prev + 1:
            prev = r
        else:
            out.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = r
    if start is not None:
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ",".join(out)


def dataset(trace_dir: Path | str):
    """The rank files of a trace as one pyarrow dataset (lazy: for filters and projections)."""
    import pyarrow.dataset as ds

    files = sorted(str(p) for p in Path(trace_dir).glob("rank-*.parquet")
                   if RANK_FILE_RE.match(p.name))
    return ds.dataset(files, format="parquet")
