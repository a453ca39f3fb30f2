"""The columns every exporter reads from a timeline (a trace table, measured or replayed)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cached_property
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa

from hindsight import trace as tf
from hindsight.trace.schema import numpy_of
from replay.matching import MessageMatch, match_messages, op_codes


@dataclass(frozen=True)
class Timeline:
    """A timeline's rows in (rank, seq) order, as numpy columns (int64; ``op`` indexes
    ``tf.OPS``, ``region_code`` indexes ``region_names``, -1 for no region); ``table`` is the
    sorted table."""

    table: pa.Table
    rank: np.ndarray
    seq: np.ndarray
    op: np.ndarray
    region_code: np.ndarray
    region_names: list[str]
    t_start: np.ndarray
    t_end: np.ndarray
    peer: np.ndarray
    tag: np.ndarray
    comm: np.ndarray
    nbytes: np.ndarray
    request: np.ndarray
    root: np.ndarray
    cpu_ns: np.ndarray

    @property
    def n(self) -> int:
        return len(self.rank)

    @cached_property
    def region(self) -> list[str | None]:
        """Each row's region name or None (a Python list: for per-row loops)."""
        names = np.array([*self.region_names, None], dtype=object)
        return names[self.region_code].tolist()

    def match(self) -> MessageMatch:
        """The timeline's messages matched (``replay.matching.match_messages``) on these columns,
        not on the table: converting the table's columns again would take another ~80 bytes
        of new memory per row, which on these VMs costs more than the matching."""
        cols = {c: getattr(self, c) for c in ("rank", "seq", "op", "peer", "tag", "comm",
                                               "nbytes", "request")}
        return match_messages(cols, _in_order=True)[0]

    def rows(self, lo: int, hi: int) -> Timeline:
        """The rows ``lo:hi`` (one rank's, for instance) as a timeline of their own: views."""
        arrays = {f.name: getattr(self, f.name)[lo:hi] for f in fields(self)
                  if f.name not in ("table", "region_names")}
        return Timeline(table=self.table.slice(lo, hi - lo), region_names=self.region_names,
                        **arrays)


def read_timeline(trace: Path | str | pa.Table,
                  region_of: dict[str, int] | None = None) -> Timeline:
    """The timeline of a trace directory, or of a table (e.g. ``Result.to_arrow()``).
    ``region_of``: the region numbering to code the rows' regions in, grown by the names it
    lacks (one numbering for tables read one after the other, as ``rank_timelines`` reads
    them); by default the table's own."""
    table = trace if isinstance(trace, pa.Table) else tf.read_trace(trace).table
    rank, seq = _int64(table.column("rank")), _int64(table.column("seq"))
    # rows are in (rank, seq) order already when read from a trace's files: the sort, a copy of
    # every column, is then skipped
    if not tf.in_rank_seq_order(rank, seq):
        table = tf.sort_rows(table)
        rank, seq = _int64(table.column("rank")), _int64(table.column("seq"))
    col = lambda name: _int64(table.column(name))  # noqa: E731
    names: dict[str, int] = {} if region_of is None else region_of
    codes = np.empty(table.num_rows, np.int64)
    at = 0
    for chunk in table.column("region").chunks:
        tf.dict_codes(chunk, names, Path("<table>"), "region", codes[at:at + len(chunk)])
        at += len(chunk)
    return Timeline(
        table=table, rank=rank, seq=seq, op=op_codes(table).astype(np.int64),
        region_code=codes, region_names=list(names), t_start=col("t_start"), t_end=col("t_end"),
        peer=col("peer"), tag=col("tag"), comm=col("comm"), nbytes=col("nbytes"),
        request=col("request"), root=col("root"), cpu_ns=col("cpu_ns"))


@dataclass(frozen=True)
class RankTimelines:
    """A timeline to be taken rank by rank (``rank_timelines``): ``rank(r)`` is rank ``r``'s
    rows as a ``Timeline``; ``region_names`` are every rank's, numbered as ``read_timeline``
    numbers them on the whole; ``t_min`` is the earliest start (0 without rows); ``rows`` the
    number of rows."""

    region_names: list[str]
    t_min: int
    rows: int
    rank: Callable[[int], Timeline]


def rank_timelines(trace: Path | str | pa.Table, nranks: int) -> RankTimelines:
    """The timeline of a trace directory or a table, rank by rank, for an exporter that writes
    each rank on its own. A directory is read one rank at a time (after a first pass over
    every rank's regions and starts), so that memory holds the largest rank's rows, not the
    trace's (and a dead rank's records, which the trace's opening converts and holds as
    Parquet bytes, a few bytes an event); a table is read whole and sliced."""
    if isinstance(trace, pa.Table):
        tl = read_timeline(trace)
        bounds = tf.rank_offsets(tl.rank, nranks)
        return RankTimelines(tl.region_names, int(tl.t_start.min()) if tl.n else 0,
                             tl.n, lambda r: tl.rows(int(bounds[r]), int(bounds[r + 1])))
    trace = Path(trace)
    _, sources = tf.open_trace(trace, allow_partial=True)
    names: dict[str, int] = {}
    t_min, rows = None, 0
    for src in sources:
        t = tf.read_rank(src, ["region", "t_start"])
        where = src.files[0] if src.files else trace
        for chunk in t.column("region").chunks:
            tf.dict_codes(chunk, names, where, "region", np.empty(len(chunk), np.int64))
        for chunk in t.column("t_start").chunks:
            if len(chunk):
                low = int(numpy_of(chunk).min())
                t_min = low if t_min is None else min(t_min, low)
        rows += t.num_rows

    def rank(r: int) -> Timeline:
        codes = dict(names)
        tl = read_timeline(tf.read_rank(sources[r]), codes)
        if len(codes) != len(names):
            # (region codes past the first pass's would be taken for op codes by a reader)
            raise tf.TraceError(f"{sources[r].files[0]}: region names the first read did not "
                                "meet: the file changed while it was read")
        return tl
    return RankTimelines(list(names), t_min or 0, rows, rank)


def _int64(col: pa.ChunkedArray) -> np.ndarray:
    """An integer column as one new writable int64 array (the kernels are compiled for
    those), each chunk converted straight into its place: concatenating the chunks and then
    widening the int32 columns made two new arrays, and new memory is what these conversions
    spend most on here (docs/interop.md, "Speed")."""
    if not pa.types.is_integer(col.type) or col.null_count:
        a = numpy_of(col)
        return a.astype(np.int64, copy=not a.flags.writeable)
    out = np.empty(len(col), np.int64)
    at = 0
    for ch in col.chunks:
        out[at:at + len(ch)] = numpy_of(ch)
        at += len(ch)
    return out


def call_heads(rank: np.ndarray, op: np.ndarray, ts: np.ndarray, te: np.ndarray) -> np.ndarray:
    """For each row (in rank, seq order), the first row of the MPI call it belongs to: rows of one
    call (one row per request of a Waitall, the two halves of a Sendrecv) share rank and times."""
    n = len(rank)
    if n < 2:
        return np.arange(n)
    same = (rank[1:] == rank[:-1]) & (ts[1:] == ts[:-1]) & (te[1:] == te[:-1]) & (op[1:] != 0)
    same &= (op[1:] == op[:-1]) | ((op[1:] == tf.OP_CODE["Sendrecv_recv"]) &
                                   (op[:-1] == tf.OP_CODE["Sendrecv_send"]))
    head = np.r_[True, ~same]
    return np.maximum.accumulate(np.where(head, np.arange(n), 0))
