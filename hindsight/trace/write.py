"""Writing traces: the one writer of rank files and manifests, and the in-memory form of a rank.

- ``RankEvents``: one rank's events as flat NumPy columns (op codes into ``OPS``, region codes
  into ``region_names``); ``to_table()`` / ``from_table()`` convert to and from the Arrow table
  of a rank file. ``EventRows`` builds one row by row (importers, synthesized runs).
- ``write_trace(dir, ranks, ...)``: every rank file plus ``manifest.json``, for traces made in
  memory (importers, synthesized and replayed runs, tests).
- ``write_staged(stage, ...)``: a traced rank's raw staged records sealed as its rank file,
  streamed one row group at a time.

Both go through ``write_rank_file``: the schema, the options and the per-file metadata are
written in one place.
"""

from __future__ import annotations

import json
import uuid
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hindsight.trace.core import (CONCURRENT_STATUS, FORMAT_VERSION, METADATA_KEY, OP_CODE,
                                  RAW_COLUMNS, RAW_FILE, TraceError, concurrent_calls,
                                  rank_file_name, read_raw_names, write_manifest)
from hindsight.trace.raw import first_overlap, raw_tables, raw_records
from hindsight.trace.schema import COLUMNS, SCHEMA, WRITE_OPTIONS, numpy_of, rows_to_table

#: rank files ``write_trace`` encodes and writes at once, on threads (one per core here)
WRITES_IN_FLIGHT = 2

#: The integer columns of a rank, in file order (after rank, seq, op, region).
INT_FIELDS: tuple[str, ...] = COLUMNS[4:]


@dataclass
class RankEvents:
    """One rank's events in memory, in ``seq`` order: the form every writer takes.

    ``op`` holds codes into ``OPS``; ``region`` codes into ``region_names`` (-1: no region); the
    other columns are the schema's integer columns (ns, bytes, ids; -1 where one does not
    apply: docs/trace-format.md)."""

    rank: int
    op: np.ndarray
    region: np.ndarray
    ints: dict[str, np.ndarray]              # INT_FIELDS -> int64 array
    region_names: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.op)

    @classmethod
    def from_columns(cls, rank: int, cols: Mapping[str, Any]) -> "RankEvents":
        """From per-column sequences: ``op`` as names or codes, ``region`` as names (None for
        no region) or as codes with ``region_names``, and the integer columns."""
        ops = cols["op"]
        if len(ops) and isinstance(ops[0], str):
            try:
                codes = np.fromiter((OP_CODE[o] for o in ops), np.int8, len(ops))
            except KeyError as exc:
                raise TraceError(f"rank {rank}: unknown op {exc.args[0]!r}") from None
        else:
            codes = np.asarray(ops, dtype=np.int8)
        names = cols.get("region")
        if names is None or len(names) == 0:
            regions: list[str] = []
            reg = np.full(len(codes), -1, np.int64)
        elif isinstance(names, np.ndarray) and names.dtype.kind in "iu":
            regions = list(cols.get("region_names", []))
            reg = names.astype(np.int64)
        else:
            regions = sorted({r for r in names if r is not None})
            idx = {r: i for i, r in enumerate(regions)}
            reg = np.array([idx[r] if r is not None else -1 for r in names], np.int64)
        ints = {c: np.asarray(cols[c], dtype=np.int64) for c in INT_FIELDS}
        return cls(rank, codes, reg, ints, regions)

    @classmethod
    def from_table(cls, table: pa.Table, rank: int | None = None) -> "RankEvents":
        """From the Arrow table of one rank (the schema's columns; dictionary or plain strings)."""
        if rank is None:
            rank = int(table.column("rank")[0].as_py()) if table.num_rows else 0
        ops = table.column("op").combine_chunks()
        regions = table.column("region").combine_chunks()
        op_names = ops.dictionary.to_pylist() if pa.types.is_dictionary(ops.type) else None
        if op_names is not None:
            lut = np.array([OP_CODE.get(o, -1) for o in op_names] + [-1], np.int8)
            idx = ops.indices.to_numpy(zero_copy_only=False)
            codes = lut[np.where(ops.is_null().to_numpy(zero_copy_only=False), -1, idx)]
        else:
            codes = np.array([OP_CODE.get(o, -1) for o in ops.to_pylist()], np.int8)
        if pa.types.is_dictionary(regions.type):
            names = [str(x) for x in regions.dictionary.to_pylist()]
            reg = regions.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
        else:
            values = regions.to_pylist()
            names = sorted({r for r in values if r is not None})
            pos = {r: i for i, r in enumerate(names)}
            reg = np.array([pos[r] if r is not None else -1 for r in values], np.int64)
        ints = {c: table.column(c).to_numpy().astype(np.int64) for c in INT_FIELDS}
        return cls(rank, codes, reg, ints, names)

    def to_table(self, seq0: int = 0) -> pa.Table:
        """The Arrow table of this rank's file (``seq`` numbered from ``seq0``)."""
        return rows_to_table(self.rank, seq0, self.ints, self.op, self.region, self.region_names)


class EventRows:
    """Builds one rank's events row by row: ``append(op, t_start, t_end, ...)``, then
    ``events(rank)``. Times are rounded to whole nanoseconds."""

    def __init__(self) -> None:
        self.op: list[str] = []
        self.region: list[str | None] = []
        self.cols: dict[str, list[int]] = {c: [] for c in INT_FIELDS}

    def __len__(self) -> int:
        return len(self.op)

    def append(self, op: str, t_start: float, t_end: float, peer: int = -1, tag: int = -1,
               comm: int = 0, nbytes: int = -1, request: int = -1, root: int = -1,
               region: str | None = None, cpu: int = -1) -> None:
        self.op.append(op)
        self.region.append(region)
        c = self.cols
        c["t_start"].append(int(round(t_start)))
        c["t_end"].append(int(round(t_end)))
        c["cpu_ns"].append(int(cpu))
        c["peer"].append(peer)
        c["tag"].append(tag)
        c["comm"].append(comm)
        c["nbytes"].append(nbytes)
        c["request"].append(request)
        c["root"].append(root)

    def events(self, rank: int) -> RankEvents:
        return RankEvents.from_columns(rank, {"op": self.op, "region": self.region, **self.cols})


#: What ``write_trace`` delta-encodes besides ``WRITE_OPTIONS``' columns: the request ids of a
#: trace made in memory (an import's, a replay's) mostly rise row by row, so their deltas pack
#: into a few bits, where a dictionary of some 10^5 distinct ids per rank is built, outgrows its
#: page and falls back to plain values: half the column's bytes, and less time (pyarrow's write of
#: eight ranks of an imported GOAL trace, best of 5: 0.64 -> 0.38 s; docs/trace-format.md,
#: "Encodings and compression").
MEMORY_DELTA_COLUMNS: tuple[str, ...] = ("request",)


def _write_options(delta: Iterable[str]) -> dict[str, Any]:
    """``WRITE_OPTIONS`` with the columns ``delta`` delta-encoded instead of dictionary-encoded."""
    delta = [c for c in delta if c in COLUMNS]
    if not delta:
        return WRITE_OPTIONS
    opts = dict(WRITE_OPTIONS)
    opts["use_dictionary"] = [c for c in WRITE_OPTIONS["use_dictionary"] if c not in delta]
    opts["column_encoding"] = {**WRITE_OPTIONS["column_encoding"],
                               **{c: "DELTA_BINARY_PACKED" for c in delta}}
    return opts


def write_rank_file(where: Any, tables: Iterable[pa.Table], meta: dict[str, Any] | None,
                    row_group_size: int | None = None, delta: Iterable[str] = ()) -> None:
    """Write one rank file to ``where`` (a path or an Arrow output stream): ``tables`` in order
    as its row groups, ``meta`` as its hindsight key-value metadata (docs/trace-format.md);
    the integer columns ``delta`` delta-encoded (``MEMORY_DELTA_COLUMNS``)."""
    schema = SCHEMA if meta is None else SCHEMA.with_metadata(
        {METADATA_KEY: json.dumps(meta).encode()})
    with pq.ParquetWriter(where, schema, **_write_options(delta)) as writer:
        for table in tables:
            if not table.schema.equals(schema, check_metadata=False):
                table = table.cast(SCHEMA)     # e.g. a replayed timeline's nullable columns
            writer.write_table(table.replace_schema_metadata(schema.metadata),
                               row_group_size=row_group_size)


def write_trace(trace_dir: Path | str, ranks: Sequence[RankEvents | pa.Table | Mapping[str, Any]],
                *, run_id: str | None = None, manifest: Mapping[str, Any] | None = None,
                communicators: Mapping[int, list[int]] | None = None,
                hosts: Mapping[str, list[int]] | None = None,
                incomplete_ranks: Sequence[int] = ()) -> Path:
    """Write a whole trace made in memory: one rank file per entry of ``ranks`` (``RankEvents``,
    a rank's Arrow table, or per-column sequences for ``RankEvents.from_columns``) and
    ``manifest.json``. The manifest gets the format's required keys (run id, ranks, status,
    events, makespan from the rows, communicators with COMM_WORLD); ``manifest`` adds to them
    or overrides them (``app``, ``makespan_ns``, a ``replay`` section...)."""
    trace_dir = Path(trace_dir)
    trace_dir.mkdir(parents=True, exist_ok=True)
    run_id = run_id or uuid.uuid4().hex[:12]
    nranks = len(ranks)
    events, t_lo, t_hi = [], None, 0

    def make_and_write(rank: int) -> tuple[int, int, int]:
        data = ranks[rank]
        if isinstance(data, pa.Table):
            table = data
        else:
            ev = data if isinstance(data, RankEvents) else RankEvents.from_columns(rank, data)
            table = ev.to_table()
        del data
        status = "incomplete" if rank in incomplete_ranks else "complete"
        meta = {"run_id": run_id, "rank": rank, "status": status, "events": table.num_rows,
                "format_version": FORMAT_VERSION}
        write_rank_file(trace_dir / rank_file_name(rank), [table], meta,
                        delta=MEMORY_DELTA_COLUMNS)
        if not table.num_rows:
            return 0, 0, 0
        return (table.num_rows, int(numpy_of(table.column("t_start")).min()),
                int(numpy_of(table.column("t_end")).max()))

    # Each rank is made (``ranks[rank]``: an import's rows may be computed then, as
    # hindsight.interop.goal's are), encoded and written on one of WRITES_IN_FLIGHT threads
    # (Arrow encodes without the GIL; so do compiled row makers that declare nogil): at most
    # that many ranks' tables are held at once.
    with ThreadPoolExecutor(WRITES_IN_FLIGHT) as pool:
        pending: deque = deque()

        def collect() -> None:
            nonlocal t_lo, t_hi
            n, lo, hi = pending.popleft().result()
            events.append(n)
            if n:
                t_hi = max(t_hi, hi)
                t_lo = lo if t_lo is None else min(t_lo, lo)

        for rank in range(nranks):
            if len(pending) == WRITES_IN_FLIGHT:
                collect()
            pending.append(pool.submit(make_and_write, rank))
        while pending:
            collect()
    comms = {0: list(range(nranks))}
    comms.update(communicators or {})
    out = {
        "format_version": FORMAT_VERSION, "run_id": run_id, "ranks": nranks,
        # the run epoch is time 0 (docs/trace-format.md, "Makespan"); rows before it count too
        "complete": not incomplete_ranks, "makespan_ns": t_hi - min(0, t_lo or 0),
        "rank_status": ["incomplete" if r in incomplete_ranks else "complete"
                        for r in range(nranks)],
        "communicators": {str(k): v for k, v in comms.items()}, "events": events,
        "app": "synthetic",
    }
    if hosts:
        out["hosts"] = dict(hosts)
    out.update(manifest or {})
    write_manifest(trace_dir, out)
    return trace_dir


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
    records = raw_records(raw) if raw.is_file() else np.zeros((0, len(RAW_COLUMNS)), np.int64)
    # Two threads' calls at once: the rank's records end where they first overlap (what the
    # PMPI library does as it happens), and its status says why.
    overlap = first_overlap(records)
    kept = records if overlap is None else records[:overlap[0]]
    if meta is not None:
        meta = dict(meta)
        meta.setdefault("communicators", {}).update(names.get("communicators") or {})
        meta.setdefault("neighbours", {}).update(names.get("neighbours") or {})
        if overlap is not None and not meta.get("concurrent_mpi"):
            ops = records[list(overlap), RAW_COLUMNS.index("op")]
            t0 = records[list(overlap), RAW_COLUMNS.index("t_start")]
            began, during = (1, 0) if t0[1] > t0[0] else (0, 1)
            meta["concurrent_mpi"] = [int(ops[began]), int(ops[during])]
        if meta.get("concurrent_mpi"):
            meta["concurrent_mpi"] = concurrent_calls(meta["concurrent_mpi"])
            if meta.get("status") == "complete":     # a rank that died keeps how it ended
                meta["status"] = CONCURRENT_STATUS
        meta["events"] = len(kept)
        last = int(kept[:, -1].max()) - int(names["epoch_ns"]) if len(kept) else 0
        meta["max_t_end_ns"] = round(last * (1.0 - drift)) if drift else last
    write_rank_file(where, raw_tables(raw, kept, rank, names, drift, group), meta,
                    row_group_size=group)


def staged_parquet(stage: Path, rank: int, epoch_ns: int | None = None) -> pa.Buffer | None:
    """A dead rank's raw staged records as the bytes of a Parquet file in memory, so that every
    reader reads them as it reads a sealed file; None if nothing was staged. `epoch_ns` (from
    the manifest) is used where known."""
    if not (stage / RAW_FILE).is_file():
        return None
    sink = pa.BufferOutputStream()
    write_staged(stage, rank, sink, epoch_ns=epoch_ns)
    return sink.getvalue()
