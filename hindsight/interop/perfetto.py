"""Perfetto / Chrome trace-event JSON: measured and replayed timelines for ui.perfetto.dev.

Layout (the Chrome "JSON Trace Event Format", which Perfetto and chrome://tracing read):

* one process per rank (``pid``; a second timeline in the same file is offset by 100000), named
  ``rank R`` or ``<timeline> rank R``; thread 0 ``MPI`` holds the MPI calls, thread 1 ``regions``
  the application regions (regions and calls are on separate threads so that slightly
  overlapping clock readings can never break the nesting Perfetto requires within a thread);
* every MPI call is a complete event (``ph: "X"``, ``ts``/``dur`` in microseconds with ns
  precision); a call recorded as several rows (Waitall, Sendrecv) is one event whose ``args``
  list the rows;
* every matched message is a flow arrow: ``ph: "s"`` at the start of the send call on the
  sender and ``ph: "f"`` with ``bp: "e"`` at the start of the call that completes the receive,
  with the same ``id``, ``cat`` ("message") and ``name`` ("msg"), so Perfetto binds both ends to
  the enclosing slices.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, BinaryIO, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hindsight import trace as tf
from hindsight.interop.timeline import Timeline, call_heads, read_timeline
from replay.matching import match_messages

PID_STRIDE = 100000
# Rows formatted at once: bounds the memory of the text being built (about 300 bytes a row).
BATCH_ROWS = 1 << 18
# The integer fields of a row's args, in the order they are written (each only when not -1).
ARG_FIELDS = ("seq", "peer", "tag", "comm", "nbytes", "request", "root")
_OP_JSON = np.array([*tf.OPS, "unknown"], dtype=object)


def _cat(*parts: Any) -> pa.Array:
    """Element-wise concatenation of string arrays and literal strings."""
    return pc.binary_join_element_wise(*parts, "")


def _text(values: np.ndarray) -> pa.Array:
    """Integers as JSON numbers."""
    return pc.cast(pa.array(values, pa.int64()), pa.string())


def _us(ns: np.ndarray) -> pa.Array:
    """ns as JSON microseconds, exactly as ``json.dumps(round(ns / 1000.0, 3))`` writes them
    (the shortest form of a 3-decimal number: "1.5", "0.001", "10.0")."""
    ns = np.asarray(ns, np.int64)
    if len(ns) and np.abs(ns).max() >= 10**15:
        # beyond 1e12 us a double's decimals may round differently: Python's own formatting
        return pa.array([repr(round(int(v) / 1000.0, 3)) for v in ns], pa.string())
    mag = np.abs(ns)
    frac = mag % 1000
    three = pc.utf8_lpad(_text(frac), width=3, padding="0")
    two = pc.utf8_lpad(_text(frac // 10), width=2, padding="0")
    one = _text(frac // 100)
    digits = pc.if_else(pa.array(frac % 100 == 0), one,
                        pc.if_else(pa.array(frac % 10 == 0), two, three))
    sign = pc.if_else(pa.array(ns < 0), "-", "")
    return _cat(sign, _text(mag // 1000), ".", digits)


def _optional(mask: np.ndarray, text: pa.Array) -> pa.Array:
    return pc.if_else(pa.array(mask), text, "")


def _pick(codes: np.ndarray, table: np.ndarray) -> pa.Array:
    """``table[codes]`` (strings) as an Arrow array."""
    return pa.array(table[codes], pa.string())


def _bytes(arr: pa.Array) -> memoryview:
    """The concatenated text of a string array (its data buffer, without copying)."""
    arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    if len(arr) == 0:
        return memoryview(b"")
    offsets = np.frombuffer(arr.buffers()[1], np.int32, len(arr) + 1, arr.offset * 4)
    return memoryview(arr.buffers()[2])[int(offsets[0]):int(offsets[-1])]


def _metadata_events(rank: np.ndarray, prefix: str, pid_base: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for r in np.unique(rank).tolist():
        pid = pid_base + r
        events += [
            {"ph": "M", "name": "process_name", "pid": pid, "args": {"name": f"{prefix}rank {r}"}},
            {"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": pid}},
            {"ph": "M", "name": "thread_name", "pid": pid, "tid": 0, "args": {"name": "MPI"}},
            {"ph": "M", "name": "thread_name", "pid": pid, "tid": 1, "args": {"name": "regions"}},
        ]
    return events


def _slices(tl: Timeline, heads: np.ndarray, t0: int, pid_base: int, lo: int,
            hi: int) -> pa.Array:
    """The text of rows [lo, hi): one ``X`` event per call, written by its first row (head); the
    call's other rows add their entry to its ``args.rows``; its last row closes it. Every
    event starts with a comma."""
    sl = slice(lo, hi)
    n = tl.n
    idx = np.arange(lo, hi)
    op = tl.op[sl]
    head = heads[sl] == idx
    last = np.ones(hi - lo, bool)
    m = min(hi, n - 1)
    last[:m - lo] = heads[lo + 1:m + 1] != heads[lo:m]
    region = op == 0
    opc = np.where((op >= 0) & (op < len(tf.OPS)), op, len(tf.OPS))
    names = _OP_JSON[opc]
    fields = []
    for k in ARG_FIELDS:
        v = getattr(tl, k)[sl]
        fields.append(_optional(v != -1, _cat(f',"{k}":', _text(v))))
    args = _cat(*fields)                                  # ',"seq":1,"peer":2...'
    row_entry = _cat('{"op":"', pa.array(names, pa.string()), '"', args, "}")
    # the region name of every row as JSON ("" and no region are "none")
    reg_names = [json.dumps(x) if x else "" for x in tl.region_names]
    reg_json = np.array([*reg_names, ""], dtype=object)
    rcode = tl.region_code[sl]
    rjson = reg_json[np.where(rcode >= 0, rcode, len(reg_json) - 1)]
    has_region = rjson != ""
    # a call whose rows include a Sendrecv_recv after its head is MPI_Sendrecv
    sendrecv = np.zeros(hi - lo, bool)
    later = (tl.op[lo:hi] == tf.OP_CODE["Sendrecv_recv"]) & ~head
    sendrecv[heads[sl][later] - lo] = True
    call_name = np.where(sendrecv, "MPI_Sendrecv",
                         np.char.add("MPI_", names.astype(str)).astype(object))
    rank = tl.rank[sl]
    common = _cat(',"pid":', _text(pid_base + rank), ',"tid":', np.where(region, "1", "0"),
                  ',"ts":', _us(tl.t_start[sl] - t0), ',"dur":',
                  _us(tl.t_end[sl] - tl.t_start[sl]))
    region_event = _cat(',{"ph":"X","name":',
                        pa.array(np.where(has_region, rjson, '"region"'), pa.string()),
                        ',"cat":"region"', common, ',"args":{',
                        pc.utf8_slice_codeunits(args, 1), "}}")
    mpi_head = _cat(',{"ph":"X","name":"', pa.array(call_name, pa.string()),
                    '","cat":"mpi"', common, ',"args":{"rows":[', row_entry)
    # the close of a call names its head's region
    head_code = tl.region_code[heads[sl]]
    call_region = reg_json[np.where(head_code >= 0, head_code, len(reg_json) - 1)]
    close = _optional(last & ~region, _cat("]", _optional(
        call_region != "", _cat(',"region":', pa.array(call_region, pa.string()))), "}}"))
    body = pc.if_else(pa.array(region), region_event,
                      pc.if_else(pa.array(head), mpi_head, _cat(",", row_entry)))
    return _cat(body, close)


def _flows(tl: Timeline, heads: np.ndarray, t0: int, pid_base: int,
           flow_base: int) -> tuple[pa.Array, int]:
    """The text of the flow arrows (an ``s`` and an ``f`` event per matched message, each
    starting with a comma)."""
    match, _ = match_messages(tl.table)
    k = len(match)
    if k == 0:
        return pa.array([], pa.string()), 0
    s_row = np.asarray(match.send_row, np.int64)
    done = np.asarray(match.recv_done_row, np.int64)
    d_row = np.where(done >= 0, done, np.asarray(match.recv_row, np.int64))
    fid = _text(flow_base + np.arange(1, k + 1))
    text = _cat(',{"ph":"s","cat":"message","name":"msg","id":', fid, ',"pid":',
                _text(pid_base + tl.rank[s_row]), ',"tid":0,"ts":',
                _us(tl.t_start[heads[s_row]] - t0), ',"args":{"bytes":',
                _text(np.asarray(match.nbytes, np.int64)), "}}",
                ',{"ph":"f","bp":"e","cat":"message","name":"msg","id":', fid, ',"pid":',
                _text(pid_base + tl.rank[d_row]), ',"tid":0,"ts":',
                _us(tl.t_start[heads[d_row]] - t0), "}")
    return text, k


def _timeline_chunks(table: pa.Table, label: str | None, pid_base: int, flow_base: int,
                     counts: list[int]) -> Iterator[memoryview | bytes]:
    """The events of one timeline as JSON text, each starting with a comma; adds its slices
    and arrows to ``counts``."""
    tl = read_timeline(table)
    n = tl.n
    t0 = int(tl.t_start.min()) if n else 0
    meta = _metadata_events(tl.rank, f"{label} " if label else "", pid_base)
    if meta:
        yield "".join("," + json.dumps(e, separators=(",", ":")) for e in meta).encode()
    heads = call_heads(tl.rank, tl.op, tl.t_start, tl.t_end)
    for lo in range(0, n, BATCH_ROWS):
        yield _bytes(_slices(tl, heads, t0, pid_base, lo, min(n, lo + BATCH_ROWS)))
    counts[0] += int((heads == np.arange(n)).sum())
    text, k = _flows(tl, heads, t0, pid_base, flow_base)
    counts[1] += k
    yield _bytes(text)


def _document(timelines: Sequence[tuple[str | None, pa.Table]], metadata: dict[str, Any] | None,
              counts: list[int]) -> Iterator[memoryview | bytes]:
    yield b'{"traceEvents":['
    first = True
    for j, (label, table) in enumerate(timelines):
        for chunk in _timeline_chunks(table, label, j * PID_STRIDE, counts[1], counts):
            if first and len(chunk):
                chunk = chunk[1:]       # the comma before the document's first event
                first = False
            yield chunk
    other = {"generator": "hindsight export --format perfetto", **(metadata or {})}
    yield ('],"displayTimeUnit":"ns","otherData":' + json.dumps(other, separators=(",", ":"))
           + "}\n").encode()


def export_perfetto(timelines: Sequence[tuple[str | None, pa.Table]], out: Path | str,
                    metadata: dict[str, Any] | None = None) -> tuple[int, int]:
    """Write the JSON document of ``to_perfetto`` to ``out``, formatted column by column;
    returns (slices, message arrows)."""
    counts = [0, 0]
    with open(out, "wb") as fh:
        _write(fh, _document(timelines, metadata, counts))
    return counts[0], counts[1]


def _write(fh: BinaryIO, chunks: Iterator[memoryview | bytes]) -> None:
    for chunk in chunks:
        fh.write(chunk)


def to_perfetto(timelines: Sequence[tuple[str | None, pa.Table]],
                metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON document for one or more timelines (e.g. measured and replayed)."""
    buf = io.BytesIO()
    _write(buf, _document(timelines, metadata, [0, 0]))
    return json.loads(buf.getvalue())


def write_perfetto(doc: dict[str, Any], out: Path | str) -> Path:
    out = Path(out)
    out.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    return out
