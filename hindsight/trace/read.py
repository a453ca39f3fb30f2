"""Reading a trace directory: where each rank's events are (sealed file or a dead rank's
staged records) and the events as one Arrow table."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hindsight.trace.core import (
    METADATA_KEY,
    RANK_FILE_RE, RAW_FILE, TraceError, rank_file_name,
    epoch_of, staging_dir)
from hindsight.trace.manifest import read_manifest
from hindsight.trace.schema import (COLUMNS, READ_ERRORS, READ_OPTIONS, SCHEMA, numpy_of,
                                     short_error)
from hindsight.trace.write import staged_parquet


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
            pf = parquet_reader(pa.BufferReader(pa.py_buffer(path.read_bytes())))
            footer = pf.metadata
        else:
            footer = pq.read_metadata(path)
    except READ_ERRORS as exc:
        raise TraceError(f"{path}: not a readable Parquet file ({short_error(exc)})") from None
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
        wall = manifest.get("makespan_ns")
        raise UntracedRunError(f"{trace_dir}: an untraced run (wall time only"
                               + (f": {wall / 1e9:.4f} s" if isinstance(wall, (int, float)) else "")
                               + "), which has no events")
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
                                f"({short_error(exc)})")
            readable = [stage / RAW_FILE] if staged is not None else []
            recorded = (manifest.get("rank_status") or [None] * nranks)[rank]
            status = recorded if recorded not in (None, "complete", "running") else \
                ("incomplete" if readable else REMOVED if recorded == "complete" else "missing")
            src = RankSource(rank, readable, False, status, {}, problems, staged=staged)
        sources.append(src)
    return sources


#: the status of a rank whose file is gone although the manifest says it finished
REMOVED = "file removed"


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


def incomplete_text(sources: list[RankSource]) -> str:
    """Why a trace of these rank sources is incomplete, in a few words: the files that went
    missing although their ranks finished, and the ranks that did not finish."""
    removed = [s.rank for s in sources if s.status == REMOVED]
    failed = [s.rank for s in sources if not s.complete and s.status != REMOVED]
    parts = []
    if removed:
        parts.append(f"the file of rank {removed[0]} is missing, although the rank finished"
                     if len(removed) == 1 else f"the files of ranks {rank_ranges(removed)} are "
                     "missing, although the ranks finished")
    if failed or not removed:
        parts.append(f"rank {failed[0]} did not finish cleanly" if len(failed) == 1 else
                     f"ranks {rank_ranges(failed) or 'unknown'} did not finish cleanly")
    return "; ".join(parts)


def open_trace(trace_dir: Path, allow_partial: bool,
          keep_open: bool = False) -> tuple[dict[str, Any], list[RankSource]]:
    """Manifest and rank sources; refuses an incomplete trace unless ``allow_partial``."""
    manifest = read_manifest(trace_dir)
    sources = rank_sources(trace_dir, manifest, keep_open)
    incomplete = [s.rank for s in sources if not s.complete]
    if incomplete and not allow_partial:
        raise TraceError(f"{trace_dir}: incomplete trace ({incomplete_text(sources)})")
    return manifest, sources


def read_trace(trace_dir: Path | str, columns: list[str] | None = None,
               allow_partial: bool = True) -> Trace:
    """Read a trace directory into one table.

    With ``allow_partial=False`` an incomplete trace is refused with a TraceError naming the ranks.
    """
    trace_dir = Path(trace_dir)
    manifest, sources = open_trace(trace_dir, allow_partial)
    tables = [read_rank(src, columns) for src in sources if src.files]
    table = pa.concat_tables(tables) if tables else _schema(columns).empty_table()
    return Trace(trace_dir, manifest, table, sources)


def read_rank(src: RankSource, columns: list[str] | None = None) -> pa.Table:
    """One rank's rows (its files in turn, or a dead rank's staged records) as one table in
    the schema's types: what ``read_trace`` reads of each rank. Errors are ``TraceError``
    naming the file."""
    schema = _schema(columns)
    tables = []
    for path in src.files:
        try:
            # ParquetFile.read skips the dataset layer of pq.read_table: 2x faster on many
            # small rank files.
            t = src.open_file(path).read(columns=columns)
        except READ_ERRORS as exc:
            raise TraceError(f"{path}: corrupt or truncated Parquet data ({short_error(exc)})") \
                from None
        check_schema(path, t.schema, columns)
        if "rank" in t.column_names:
            check_rank_column(path, numpy_of(t.column("rank")), src.rank)
        tables.append(t if t.schema.equals(schema) else t.cast(schema))
    return pa.concat_tables(tables) if tables else schema.empty_table()


def _schema(columns: list[str] | None) -> pa.Schema:
    return SCHEMA if columns is None else pa.schema([SCHEMA.field(c) for c in columns])


def parquet_reader(source) -> pq.ParquetReader:
    """pyarrow's Parquet reader on ``source``, footer parsed: the reader under ``ParquetFile``,
    whose set-up (a filesystem lookup, a map of column paths) added half the cost of parsing a
    small file's footer (measured: 94 against 62 µs a file of a 64-rank ring). Columns are
    chosen by leaf index here anyway. Column names are decoded only when asked for."""
    reader = pq.ParquetReader()
    # (pre-buffering coalesces the reads of a file on disk; from memory, or for the staged
    # parts read here once each, it is overhead)
    reader.open(source, pre_buffer=False, **READ_OPTIONS)
    return reader


def open_parquet(path: Path) -> pq.ParquetReader:
    try:
        return parquet_reader(pa.OSFile(str(path)))
    except READ_ERRORS as exc:
        raise TraceError(f"{path}: corrupt or truncated Parquet data ({short_error(exc)})") from None


def check_rank_column(path: Path, ranks: np.ndarray, rank: int) -> None:
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


def rank_ranges(ranks: list[int]) -> str:
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
