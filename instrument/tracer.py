"""Per-rank event buffer: records rows cheaply, flushes them as Parquet parts, merges them at exit.

Hot path: an MPI wrapper extends the flat list `Tracer.rows` by the event's FIELDS integers (one
`list.extend` of a tuple costs about 0.2 us; writing eleven NumPy cells costs over 1 us, and a list
of tuples is slower to convert). The flat list becomes columns only at flush time, once per
`capacity` events, with one `np.array` call.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hindsight import traceformat as tf

# Row layout in the buffer (the order of the tuple an MPI wrapper appends).
_ROW_COLUMNS = ("op", "region", "t_start", "t_end", "cpu_ns", "peer", "tag", "comm", "nbytes",
                "request", "root")
FIELDS = len(_ROW_COLUMNS)

DEFAULT_CAPACITY = 65536


class TraceWriteError(BaseException):
    """The trace cannot be written (disk full, directory gone or read-only).

    A BaseException, like KeyboardInterrupt, so that an application's `except Exception` cannot
    swallow it and go on producing a trace with a silent gap: the run stops (docs/robustness.md)."""


class Tracer:
    """Everything one rank records. One instance per process (see instrument.session)."""

    def __init__(self, trace_dir: Path, rank: int, run_id: str, epoch_ns: int,
                 capacity: int = DEFAULT_CAPACITY, cpu_all: bool = False) -> None:
        self.trace_dir = Path(trace_dir)
        self.rank = rank
        self.run_id = run_id
        self.epoch_ns = epoch_ns          # local clock reading that maps to run time 0
        self.capacity = max(16, int(capacity))
        self.limit = self.capacity * FIELDS      # flush when the flat buffer holds this many
        self.cpu_all = cpu_all
        self.rows: list[int] = []                # flat: FIELDS integers per event
        self.region = -1                  # code of the innermost open region
        self.region_names: list[str] = []
        self.region_codes: dict[str, int] = {}
        self.next_request = 0
        self.seq0 = 0                     # seq of rows[0]
        self.parts = 0
        self.events = 0
        self.max_t_end = 0
        self.communicators: dict[int, list[int]] = {}
        self.closed = False
        self.host = ""
        self.clock_offset_ns = 0
        self.clock_error_ns = 0
        self.end_offset_ns = 0
        self.drift = 0.0                  # clock drift against rank 0 (ns per ns), see session
        self.hosts: list[str] = []
        self.run_meta: dict[str, Any] | None = None
        self.stage = tf.staging_dir(self.trace_dir, rank)
        self.stage.mkdir(parents=True, exist_ok=True)

    # -- recording -------------------------------------------------------------------------------

    def region_code(self, name: str) -> int:
        code = self.region_codes.get(name)
        if code is None:
            if len(self.region_names) >= 2**15 - 1:
                raise ValueError("more than 32767 distinct region names")
            code = len(self.region_names)
            self.region_names.append(name)
            self.region_codes[name] = code
        return code

    def new_request(self) -> int:
        rid = self.next_request
        self.next_request = rid + 1
        return rid

    def recorded(self) -> int:
        """Events recorded so far, flushed or still buffered."""
        return self.events + len(self.rows) // FIELDS

    def maybe_flush(self) -> None:
        if len(self.rows) >= self.limit:
            self.flush()

    # -- writing ---------------------------------------------------------------------------------

    def flush(self) -> None:
        """Write buffered rows as one self-contained Parquet part (atomically: temp then rename)."""
        rows, self.rows = self.rows, []
        if not rows:
            return
        data = np.array(rows, dtype=np.int64).reshape(-1, FIELDS)
        cols = {name: data[:, i] for i, name in enumerate(_ROW_COLUMNS)}
        # Raw clock readings become run time here, once per row group instead of once per event.
        cols["t_start"] = cols["t_start"] - self.epoch_ns
        cols["t_end"] = cols["t_end"] - self.epoch_ns
        table = tf.rows_to_table(self.rank, self.seq0, cols, cols["op"], cols["region"],
                                 list(self.region_names))
        self.seq0 += len(data)
        self.events += len(data)
        self.max_t_end = max(self.max_t_end, int(cols["t_end"].max()))
        path = self.stage / f"part-{self.parts:06d}.parquet"
        tmp = self.stage / f".part-{self.parts:06d}.tmp"
        try:
            pq.write_table(table, tmp, **tf.WRITE_OPTIONS)
            os.replace(tmp, path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)      # never leave half a part behind
            self.closed = True               # record nothing more: the trace has a gap now
            raise TraceWriteError(f"rank {self.rank}: cannot write {path}: "
                                  f"{exc.strerror or exc}") from None
        self.parts += 1

    def file_metadata(self, status: str) -> dict[str, Any]:
        return {
            "format_version": tf.FORMAT_VERSION,
            "run_id": self.run_id,
            "rank": self.rank,
            "status": status,
            "events": self.events,
            "host": self.host,
            "clock_offset_ns": self.clock_offset_ns,
            "clock_end_offset_ns": self.end_offset_ns,
            "clock_drift": self.drift,
            "max_t_end_ns": self.max_t_end,
            "communicators": {str(k): v for k, v in self.communicators.items()},
            "closed_unix": time.time(),
            "run": self.run_meta,
        }

    def mark(self, status: str) -> None:
        """Leave this rank's status beside its staged parts (for a rank that cannot merge them)."""
        (self.stage / "status.json").write_text(json.dumps(self.file_metadata(status)))

    def close(self, status: str) -> None:
        """Flush and merge the parts into rank-NNNNN.parquet (one row group per part)."""
        if self.closed:
            return
        self.closed = True
        self.flush()
        seal_rank(self.trace_dir, self.rank, self.file_metadata(status), self.capacity,
                  self.drift)


def seal_rank(trace_dir: Path, rank: int, meta: dict[str, Any],
              row_group_size: int = DEFAULT_CAPACITY, drift: float = 0.0) -> Path:
    """Merge a rank's staged parts into rank-NNNNN.parquet carrying `meta`, then drop the parts.

    A non-zero `drift` (this clock's rate error against rank 0's, measured between the start and
    the end of the run) is removed from the timestamps: t_true = t * (1 - drift).

    Written under a temporary name and renamed, so a reader sees the old parts or the whole file.
    """
    trace_dir = Path(trace_dir)
    stage = tf.staging_dir(trace_dir, rank)
    schema = tf.SCHEMA.with_metadata({tf.METADATA_KEY: json.dumps(meta).encode()})
    final = trace_dir / tf.rank_file_name(rank)
    tmp = trace_dir / f".{tf.rank_file_name(rank)}.tmp"
    parts = sorted(stage.glob("part-*.parquet"))
    try:
        with pq.ParquetWriter(tmp, schema, **tf.WRITE_OPTIONS) as writer:
            for part in parts:
                table = pq.read_table(part).cast(tf.SCHEMA)
                if drift:
                    for name in ("t_start", "t_end"):
                        t = table.column(name).to_numpy()
                        fixed = np.rint(t * (1.0 - drift)).astype(np.int64)
                        table = table.set_column(table.schema.get_field_index(name),
                                                 tf.SCHEMA.field(name), pa.array(fixed))
                writer.write_table(table, row_group_size=row_group_size)
        os.replace(tmp, final)
    except OSError as exc:
        # The staged parts stay (they are the data); only the half-merged file goes.
        tmp.unlink(missing_ok=True)
        raise TraceWriteError(f"rank {rank}: cannot write {final}: {exc.strerror or exc}") \
            from None
    for leftover in parts + [stage / "status.json"]:
        leftover.unlink(missing_ok=True)
    try:
        stage.rmdir()
        stage.parent.rmdir()   # succeeds for the last rank to finish
    except OSError:
        pass
    return final
