"""Per-rank event recorder: raw records into a memory-mapped staging file, Parquet at the end.

While the program runs, the tracer must not change its speed (docs/robustness.md, "No observer
effect"). So, until the rank finishes, it:

- imports the standard library only (no NumPy, no pyarrow: loading a library that allocates and
  frees a large block raises glibc's dynamic mmap threshold, and a NumPy program whose temporaries
  were mmapped and page-faulted afresh each time untraced then runs up to 4x faster traced);
- keeps its buffer out of malloc: records go into a shared mapping of the staging file
  ``DIR/.staging/rank-NNNNN/events.raw`` (one window of ``capacity`` records at a time, the
  file's blocks reserved before a window is used, so a full disk is an error at that moment, not
  a SIGBUS later);
- does no conversion: a record is the call's integers packed by one ``struct.pack_into``.

The kernel owns the mapped pages, so a rank that is killed loses nothing it recorded. When the
rank finishes (or `hindsight collect` / `hindsight trace seal` seals a rank that died), the raw
records become ``rank-NNNNN.parquet`` (`seal_rank`).

Hot path, as the MPI wrappers write it (``T`` the tracer)::

    o = T.off
    _pack(T.buf, o, op, T.region, t0, cpu, peer, tag, comm, nbytes, request, root, t1)
    o += RECORD
    T.off = o
    if o >= T.end:
        T.roll()
"""

from __future__ import annotations

import fcntl
import json
import mmap
import os
from pathlib import Path
from typing import Any

from hindsight.trace import core as fc

#: The record packer and its size (the layout is the trace format's: core.RAW_COLUMNS).
pack = fc.RAW_RECORD.pack_into
RECORD = fc.RAW_RECORD.size

DEFAULT_CAPACITY = 65536
#: A window's bytes must be a multiple of the page size (an mmap offset): with 88-byte records
#: that makes the capacity a multiple of 512.
_GRANULE = mmap.ALLOCATIONGRANULARITY // 8


class TraceWriteError(BaseException):
    """The trace cannot be written (disk full, directory gone or read-only).

    A BaseException, like KeyboardInterrupt, so that an application's `except Exception` cannot
    swallow it and go on producing a trace with a silent gap: the run stops (docs/robustness.md)."""


def window_capacity(capacity: int) -> int:
    """Records per mapped window: `capacity` rounded up to a whole number of pages."""
    capacity = max(1, int(capacity))
    return -(-capacity // _GRANULE) * _GRANULE


class Tracer:
    """Everything one rank records. One instance per process (see instrument.session)."""

    def __init__(self, trace_dir: Path, rank: int, run_id: str, epoch_ns: int,
                 capacity: int = DEFAULT_CAPACITY, cpu_all: bool = False) -> None:
        self.trace_dir = Path(trace_dir)
        self.rank = rank
        self.run_id = run_id
        self.epoch_ns = epoch_ns          # local clock reading that maps to run time 0
        self.capacity = window_capacity(capacity)
        self.cpu_all = cpu_all
        self.region = -1                  # code of the innermost open region
        self.region_names: list[str] = []
        self.region_codes: dict[str, int] = {}
        self.next_request = 0
        self.communicators: dict[int, list[int]] = {}
        self.neighbours: dict[int, list[int]] = {}     # topology communicator -> out-neighbours
        self.closed = False
        self.host = ""
        self.clock_offset_ns = 0
        self.clock_error_ns = 0
        self.end_offset_ns = 0
        self.drift = 0.0                  # clock drift against rank 0 (ns per ns), see session
        self.hosts: list[str] = []
        self.run_meta: dict[str, Any] | None = None
        self.program_end_ns: int | None = None   # run time at which the program ended
        self.events_at_close: int | None = None
        self.untraced_calls: dict[str, int] = {}    # calls counted, not recorded (untraced.py)
        self.error: str | None = None              # the exception that ended the rank
        self.stage = fc.staging_dir(self.trace_dir, rank)
        self.stage.mkdir(parents=True, exist_ok=True)
        self.window_bytes = self.capacity * RECORD
        self.windows = 0                  # windows mapped so far
        self.buf: Any = None
        self.off = 0                      # next record's byte offset in the current window
        self.end = 0
        # The open run of unsuccessful polls (instrument.completion.failed_poll): ``off`` just
        # after its Poll record, while that record is still the window's last; -1: none
        self.poll_at = -1
        self.polls = 0                    # polls in that run
        self._fd = self._names = -1
        try:
            self._fd = os.open(self.stage / fc.RAW_FILE, os.O_RDWR | os.O_CREAT | os.O_TRUNC,
                               0o644)
            # Held while the rank lives (the kernel drops it when the process dies, however it
            # dies): `trace seal` tells a rank that is still running from a dead one by it.
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self._names = os.open(self.stage / fc.RAW_NAMES_FILE,
                                  os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
            self._map_next()
        except BaseException:
            self._close_files()
            raise
        self._name("rank", rank, run_id, self.capacity)

    # -- recording -------------------------------------------------------------------------------

    def _map_next(self) -> None:
        if self.buf is not None:
            self.buf.close()
            self.buf = None
        start = self.windows * self.window_bytes
        try:
            # Reserve the blocks now: writing into a sparse mapping on a full disk is a SIGBUS.
            os.posix_fallocate(self._fd, start, self.window_bytes)
            self.buf = mmap.mmap(self._fd, self.window_bytes, offset=start)
        except OSError as exc:
            self._stop()
            raise TraceWriteError(f"rank {self.rank}: cannot write "
                                  f"{self.stage / fc.RAW_FILE}: {exc.strerror or exc}") from None
        self.windows += 1
        self.off = 0
        self.end = self.window_bytes

    def _stop(self) -> None:
        """Record nothing more: later records go to a scratch slot (the trace has a gap now)."""
        self.events_at_close = self.windows * self.capacity    # every mapped window was full
        self.release()

    def _close_files(self) -> None:
        for fd in (self._fd, self._names):
            if fd >= 0:
                os.close(fd)
        self._fd = self._names = -1

    def roll(self) -> None:
        """The current window is full: map the next one (a run of polls open in the full one
        ends there: the next failed poll starts a new Poll row)."""
        self.poll_at = -1
        if self.closed:
            self.off = 0
            return
        self._map_next()

    def prefault(self) -> None:
        """Fault the current window's pages in now (a write to each page), outside the program's
        time: the first write into a new file mapping costs about 2 ms on this machine, each
        further page a few microseconds."""
        buf = self.buf
        for off in range(0, self.window_bytes, mmap.PAGESIZE):
            buf[off] = 0

    def region_code(self, name: str) -> int:
        code = self.region_codes.get(name)
        if code is None:
            if len(self.region_names) >= 2**15 - 1:
                raise ValueError("more than 32767 distinct region names")
            code = len(self.region_names)
            self.region_names.append(name)
            self.region_codes[name] = code
            self._name("region", code, name)
        return code

    def add_communicator(self, cid: int, members: list[int]) -> None:
        self.communicators[cid] = members
        self._name("comm", cid, members)

    def add_neighbours(self, cid: int, outs: list[int]) -> None:
        """This rank's out-neighbours (world ranks, -1 for MPI_PROC_NULL) in topology
        communicator ``cid``, in the order its neighbourhood collectives send."""
        self.neighbours[cid] = outs
        self._name("nbrs", cid, outs)

    def set_epoch(self, epoch_ns: int) -> None:
        self.epoch_ns = epoch_ns
        self._name("epoch", epoch_ns)

    def new_request(self) -> int:
        rid = self.next_request
        self.next_request = rid + 1
        return rid

    def recorded(self) -> int:
        """Events recorded so far."""
        if self.events_at_close is not None:
            return self.events_at_close
        return (self.windows - 1) * self.capacity + self.off // RECORD

    def _name(self, *item: Any) -> None:
        """Append what names the raw records (core.RAW_NAMES_FILE): one write, no rename
        (a rename costs about 250 us on this machine's file system)."""
        if self._names < 0:
            return
        line = (json.dumps(item) + "\n").encode()
        try:
            while line:
                line = line[os.write(self._names, line):]
        except OSError as exc:
            self._stop()
            raise TraceWriteError(f"rank {self.rank}: cannot write "
                                  f"{self.stage / fc.RAW_NAMES_FILE}: {exc.strerror or exc}") \
                from None

    # -- finishing -------------------------------------------------------------------------------

    def file_metadata(self, status: str) -> dict[str, Any]:
        import time
        return {
            "format_version": fc.FORMAT_VERSION,
            "run_id": self.run_id,
            "rank": self.rank,
            "status": status,
            "events": self.recorded(),
            "host": self.host,
            "clock_offset_ns": self.clock_offset_ns,
            "clock_end_offset_ns": self.end_offset_ns,
            "clock_drift": self.drift,
            "program_end_ns": self.program_end_ns,
            "communicators": {str(k): v for k, v in self.communicators.items()},
            "neighbours": {str(k): v for k, v in self.neighbours.items()},
            "closed_unix": time.time(),
            "run": self.run_meta,
            "untraced_calls": dict(self.untraced_calls),
            "error": self.error,
        }

    def mark(self, status: str) -> None:
        """Leave this rank's status beside its staged records (for a rank that cannot seal them)."""
        fc.write_json(self.stage / "status.json", self.file_metadata(status))

    def release(self) -> None:
        """Unmap the window and close the file; what was recorded stays in it."""
        self.events_at_close = self.recorded()
        if self.buf is not None and not isinstance(self.buf, bytearray):
            self.buf.close()
        self.buf = bytearray(RECORD)
        self.off, self.end = 0, RECORD
        self._close_files()
        self.closed = True

    def close(self, status: str) -> None:
        """Stop recording and seal the raw records into rank-NNNNN.parquet. The rank's lock on
        them is held until they are sealed (``still_recording``): a sealer that finds them
        unlocked (`hindsight collect` after the launcher returned) never seals them while this
        rank does."""
        if self.closed:
            return
        meta = self.file_metadata(status)
        # a duplicate of the locked descriptor keeps the lock once release() closes it
        lock = os.dup(self._fd) if self._fd >= 0 else -1
        try:
            self.release()
            seal_rank(self.trace_dir, self.rank, meta, self.drift, self.epoch_ns)
        finally:
            if lock >= 0:
                os.close(lock)


def still_recording(stage: Path) -> bool:
    """Whether a live rank's tracer holds the staged records in `stage` (its lock on them)."""
    try:
        fd = os.open(Path(stage) / fc.RAW_FILE, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def seal_rank(trace_dir: Path, rank: int, meta: dict[str, Any], drift: float = 0.0,
              epoch_ns: int | None = None) -> Path:
    """Turn a rank's raw staged records into rank-NNNNN.parquet carrying `meta`, then drop them.

    Raw clock readings become run time (minus the epoch); a non-zero `drift` (this clock's rate
    error against rank 0's, measured between the start and the end of the run) is removed:
    t_true = t * (1 - drift). `epoch_ns` (the rank's clock reading at the run's epoch) overrides
    the one saved beside the records. `meta`'s `events` and `max_t_end_ns` are set from the
    records.
    Written under a temporary name and renamed, so a reader sees the staged records or the whole
    file. Imports NumPy and pyarrow: it runs after the program has finished.
    """
    from hindsight import trace as tf

    trace_dir = Path(trace_dir)
    stage = fc.staging_dir(trace_dir, rank)
    final = trace_dir / fc.rank_file_name(rank)
    tmp = trace_dir / f".{fc.rank_file_name(rank)}.tmp"
    raw = stage / fc.RAW_FILE
    if not raw.is_file():
        raise TraceWriteError(f"rank {rank}: its staged records {raw} are gone (sealed by "
                              "another process?)")
    try:
        tf.write_staged(stage, rank, str(tmp), meta, drift, epoch_ns)
        os.replace(tmp, final)
    except OSError as exc:
        # The staged records stay (they are the data); only the half-written file goes.
        tmp.unlink(missing_ok=True)
        raise TraceWriteError(f"rank {rank}: cannot write {final}: {exc.strerror or exc}") \
            from None
    except tf.TraceError as exc:
        tmp.unlink(missing_ok=True)
        raise TraceWriteError(f"rank {rank}: cannot seal its staged records: {exc}") from None
    for leftover in (fc.RAW_FILE, fc.RAW_NAMES_FILE, "status.json", fc.STOP_FILE):
        (stage / leftover).unlink(missing_ok=True)
    try:
        stage.rmdir()
        stage.parent.rmdir()   # succeeds for the last rank to finish
    except OSError:
        pass
    return final
