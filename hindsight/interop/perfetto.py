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
  sender and ``ph: "f"`` with ``bp: "e"`` in the call that completes the receive, at the later
  of that call's start and the send's (rule *flow forward*: Perfetto orders events by time and
  drops an arrow whose end comes before its start, as an end at the receiving call's start did
  whenever that call began first; clocks that put the send after the receive's end keep the
  call's start), with the same ``id``, ``cat`` ("message") and ``name`` ("msg"), so Perfetto
  binds both ends to the enclosing slices.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import pyarrow as pa

from hindsight import trace as tf
from hindsight import bytetext
from hindsight.bytetext import byte_table, longest, put, put_int
from hindsight.interop.timeline import call_heads, read_timeline
from hindsight.jit import njit

PID_STRIDE = 100000
# The integer fields of a row's args, in the order they are written (each only when not -1).
ARG_FIELDS = ("seq", "peer", "tag", "comm", "nbytes", "request", "root")
# Beyond 1e15 ns (1e12 us) a double's decimals may round differently from the compiled
# formatter's: such times are Python's own formatting, passed in as text.
BIG_NS = 10**15
# The constant text of the events (the formatters name the pieces by index).
_PIECES = [',{"ph":"X","name":', ',"cat":"region"', ',"args":{', "}}",
           ',{"ph":"X","name":"', "MPI_Sendrecv", "MPI_", '","cat":"mpi"', ',"args":{"rows":[',
           ",", "]", ',"region":', '{"op":"', '"', "}", '"region"', ',"pid":', ',"tid":1',
           ',"tid":0', ',"ts":', ',"dur":',
           ',{"ph":"s","cat":"message","name":"msg","id":', ',"args":{"bytes":',
           ',{"ph":"f","bp":"e","cat":"message","name":"msg","id":',
           *(f',"{k}":' for k in ARG_FIELDS)]
_ARG0 = len(_PIECES) - len(ARG_FIELDS)
# module constants: compiled code takes them as constants, which need no reference counts (an
# array passed to a helper called per row is counted on each call: 1.4-1.55 -> 0.6-0.9 s CPU for
# a million rows)
_PIECE_BUF, _PIECE_OFF = byte_table(_PIECES)


def _metadata_events(rank: np.ndarray, prefix: str, pid_base: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    # the rows are in rank order: the ranks are where it changes (np.unique would sort them)
    first = np.ones(len(rank), bool)
    first[1:] = rank[1:] != rank[:-1]
    for r in rank[first].tolist():
        pid = pid_base + r
        events += [
            {"ph": "M", "name": "process_name", "pid": pid, "args": {"name": f"{prefix}rank {r}"}},
            {"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": pid}},
            {"ph": "M", "name": "thread_name", "pid": pid, "tid": 0, "args": {"name": "MPI"}},
            {"ph": "M", "name": "thread_name", "pid": pid, "tid": 1, "args": {"name": "regions"}},
        ]
    return events


@njit(cache=True)
def _big_values(t_start, t_end, t0):
    """The distinct values, sorted, of the slices' times since ``t0`` and durations at or beyond
    BIG_NS (almost always none): one pass, no full-length temporaries."""
    out = []
    for i in range(len(t_start)):
        for v in (t_start[i] - t0, t_end[i] - t_start[i]):
            if v >= BIG_NS or v <= -BIG_NS:
                out.append(v)
    return np.unique(np.array(out, np.int64))


def _timeline_chunks(table: pa.Table, label: str | None, pid_base: int, flow_base: int,
                     counts: list[int]) -> Iterator[memoryview | bytes]:
    """The events of one timeline as JSON text, each starting with a comma; adds its slices
    and arrows to ``counts``. The text is formatted into two buffers in turn: each chunk yielded
    stays unchanged until the one after the next is asked for (``bytetext.write_overlapped``)."""
    tl = read_timeline(table)
    n = tl.n
    t0 = int(tl.t_start.min()) if n else 0
    meta = _metadata_events(tl.rank, f"{label} " if label else "", pid_base)
    if meta:
        yield "".join("," + json.dumps(e, separators=(",", ":")) for e in meta).encode()
    heads = call_heads(tl.rank, tl.op, tl.t_start, tl.t_end)
    counts[0] += int((heads == np.arange(n)).sum())
    # a call whose rows include a Sendrecv_recv after its head is MPI_Sendrecv
    sendrecv = np.zeros(n, bool)
    later = (tl.op == tf.OP_CODE["Sendrecv_recv"]) & (heads != np.arange(n))
    sendrecv[heads[later]] = True
    # each row's region as JSON (the last entry, "", for no region and the empty name)
    reg_buf, reg_off = byte_table([json.dumps(x) if x else "" for x in tl.region_names] + [""])
    op_buf, op_off = byte_table([*tf.OPS, "unknown"])
    # times beyond BIG_NS are Python's text, looked up by value (the messages' times are
    # times of slices)
    big = _big_values(tl.t_start, tl.t_end, t0)
    text_buf, text_off = byte_table([repr(round(int(v) / 1000.0, 3)) for v in big.tolist()])
    match = tl.match()
    s_row = np.asarray(match.send_row, np.int64)
    done = np.asarray(match.recv_done_row, np.int64)
    d_row = np.where(done >= 0, done, np.asarray(match.recv_row, np.int64))
    room = 700 + 2 * longest(reg_off) + longest(op_off) + 2 * longest(text_off)
    bufs = bytetext.buffers(room)
    # The kernels take the timeline's own columns and work out each row's pid, times since t0,
    # duration, op and region as they go: full-length arrays of them would be new memory,
    # which on these VMs costs more to touch than the formatting (docs/interop.md, "Speed").
    at = 0
    while at < n:
        buf = bufs[0]
        bufs.reverse()
        at, end = _format_slices(buf, room, at, heads, tl.op, tl.region_code, sendrecv,
                                 tl.rank, pid_base, tl.t_start, tl.t_end, t0, big, tl.seq,
                                 tl.peer, tl.tag, tl.comm, tl.nbytes, tl.request, tl.root,
                                 reg_buf, reg_off, op_buf, op_off, text_buf, text_off)
        yield memoryview(buf)[:end]
    k = len(s_row)
    counts[1] += k
    nbytes = np.asarray(match.nbytes, np.int64)
    at = 0
    while at < k:
        buf = bufs[0]
        bufs.reverse()
        at, end = _format_flows(buf, room, at, flow_base, s_row, d_row, heads, tl.rank, pid_base,
                                tl.t_start, tl.t_end, t0, big, nbytes, text_buf, text_off)
        yield memoryview(buf)[:end]


@njit(cache=True, inline="always")
def _us(buf, at, ns, big, text_buf, text_off):
    """ns as JSON microseconds, as ``json.dumps(round(ns / 1000.0, 3))`` writes them (the
    shortest form of a 3-decimal number: "1.5", "0.001", "10.0"); a value at or beyond BIG_NS
    is the text of its entry in ``big`` (sorted values)."""
    if ns >= BIG_NS or ns <= -BIG_NS:
        return put(buf, at, text_buf, text_off, np.searchsorted(big, ns))
    if ns < 0:
        buf[at] = 45                                  # "-"
        at += 1
        ns = -ns
    u = np.uint64(ns)                                 # unsigned: no floor-division fix-ups
    at = put_int(buf, at, np.int64(u // np.uint64(1000)))
    buf[at] = 46                                      # "."
    frac = np.int64(u % np.uint64(1000))
    buf[at + 1] = 48 + frac // 100
    if frac % 100 == 0:
        return at + 2
    buf[at + 2] = 48 + (frac // 10) % 10
    if frac % 10 == 0:
        return at + 3
    buf[at + 3] = 48 + frac % 10
    return at + 4


@njit(cache=True, inline="always")
def _arg(buf, at, v, piece):
    """``,"<field>":<v>`` unless ``v`` is -1."""
    if v == -1:
        return at
    at = put(buf, at, _PIECE_BUF, _PIECE_OFF, piece)
    return put_int(buf, at, v)


@njit(cache=True, inline="always")
def _args(buf, at, i, skip_comma, seq, peer, tag, comm, nbytes, request, root):
    """``,"seq":1,"peer":2...`` of row ``i`` (ARG_FIELDS that are not -1); ``skip_comma``:
    without the first comma."""
    start = at
    at = _arg(buf, at, seq[i], _ARG0)
    at = _arg(buf, at, peer[i], _ARG0 + 1)
    at = _arg(buf, at, tag[i], _ARG0 + 2)
    at = _arg(buf, at, comm[i], _ARG0 + 3)
    at = _arg(buf, at, nbytes[i], _ARG0 + 4)
    at = _arg(buf, at, request[i], _ARG0 + 5)
    at = _arg(buf, at, root[i], _ARG0 + 6)
    if skip_comma and at > start:                     # drop the comma: shift the text left
        for j in range(start, at - 1):
            buf[j] = buf[j + 1]
        at -= 1
    return at


# The formatters run without reference counting (``_nrt=False``; they allocate nothing):
# counted, the arrays they hand their inlined helpers cost an atomic add each at every event
# (13 % of the export's CPU).
@njit(cache=True, nogil=True, _nrt=False)
def _format_slices(buf, room, first, heads, ops, region_code, sendrecv, rank, pid_base, t_start,
                   t_end, t0, big, seq, peer, tag, comm, nbytes, request, root, reg_buf, reg_off,
                   op_buf, op_off, text_buf, text_off):
    """The text of rows ``first``, ``first + 1``, ... into ``buf`` while ``room`` bytes (the
    most one row takes) are left: one ``X`` event per call, opened by its first row (head); the
    call's other rows add their entry to its ``args.rows``; its last row closes it. Returns the
    next row and the bytes written."""
    n = len(heads)
    nops = len(op_off) - 2                            # the last entry: "unknown"
    nreg = len(reg_off) - 2                           # the last entry: no region
    at = 0
    i = first
    while i < n and at + room <= len(buf):
        last = i + 1 == n or heads[i + 1] != heads[i]
        o = ops[i]
        op_i = o if 0 <= o < nops else nops
        r = region_code[i]
        if r < 0:
            r = nreg
        if op_i == 0:
            at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 0)          # ,{"ph":"X","name":
            if reg_off[r + 1] > reg_off[r]:
                at = put(buf, at, reg_buf, reg_off, r)
            else:
                at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 15)     # "region"
            at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 1)          # ,"cat":"region"
        elif heads[i] == i:
            at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 4)          # ,{"ph":"X","name":"
            if sendrecv[i]:
                at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 5)
            else:
                at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 6)      # MPI_
                at = put(buf, at, op_buf, op_off, op_i)
            at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 7)          # ","cat":"mpi"
        else:
            at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 9)          # ,
        if op_i == 0 or heads[i] == i:
            at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 16)         # ,"pid":
            at = put_int(buf, at, rank[i] + pid_base)
            at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 17 if op_i == 0 else 18)
            at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 19)         # ,"ts":
            at = _us(buf, at, t_start[i] - t0, big, text_buf, text_off)
            at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 20)         # ,"dur":
            at = _us(buf, at, t_end[i] - t_start[i], big, text_buf, text_off)
        if op_i == 0:
            at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 2)          # ,"args":{
            at = _args(buf, at, i, True, seq, peer, tag, comm, nbytes, request, root)
            at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 3)          # }}
        else:
            if heads[i] == i:
                at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 8)      # ,"args":{"rows":[
            at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 12)         # {"op":"
            at = put(buf, at, op_buf, op_off, op_i)
            at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 13)         # "
            at = _args(buf, at, i, False, seq, peer, tag, comm, nbytes, request, root)
            at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 14)         # }
            if last:
                at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 10)     # ]
                h = region_code[heads[i]]
                if h < 0:
                    h = nreg
                if reg_off[h + 1] > reg_off[h]:
                    at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 11)  # ,"region":
                    at = put(buf, at, reg_buf, reg_off, h)
                at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 3)      # }}
        i += 1
    return i, at


@njit(cache=True, nogil=True, _nrt=False)
def _format_flows(buf, room, first, flow_base, s_row, d_row, heads, rank, pid_base, t_start,
                  t_end, t0, big, nbytes, text_buf, text_off):
    """The flow arrows of messages ``first``, ``first + 1``, ... (an ``s`` event at the start of
    the send's call, an ``f`` in the call completing the receive, rule *flow forward*) into
    ``buf`` while ``room`` bytes are left; returns the next message and the bytes written."""
    k = first
    at = 0
    while k < len(s_row) and at + room <= len(buf):
        fid = flow_base + k + 1
        s, d = s_row[k], d_row[k]
        at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 21)             # ,{"ph":"s",...,"id":
        at = put_int(buf, at, fid)
        at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 16)             # ,"pid":
        at = put_int(buf, at, rank[s] + pid_base)
        at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 18)             # ,"tid":0
        at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 19)             # ,"ts":
        at = _us(buf, at, t_start[heads[s]] - t0, big, text_buf, text_off)
        at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 22)             # ,"args":{"bytes":
        at = put_int(buf, at, nbytes[k])
        at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 3)              # }}
        at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 23)             # ,{"ph":"f",...,"id":
        at = put_int(buf, at, fid)
        at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 16)
        at = put_int(buf, at, rank[d] + pid_base)
        at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 18)
        at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 19)
        # rule flow forward: the send's start where it falls within the receiving call
        sent, got = t_start[heads[s]], t_start[heads[d]]
        at = _us(buf, at, (sent if got < sent <= t_end[d] else got) - t0, big, text_buf,
                 text_off)
        at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 14)             # }
        k += 1
    return k, at


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
    """Write the JSON document of ``to_perfetto`` to ``out``, formatted by compiled code;
    returns (slices, message arrows)."""
    counts = [0, 0]
    with open(out, "wb") as fh:
        bytetext.write_overlapped(fh, _document(timelines, metadata, counts))
    return counts[0], counts[1]


def to_perfetto(timelines: Sequence[tuple[str | None, pa.Table]],
                metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON document for one or more timelines (e.g. measured and replayed)."""
    buf = io.BytesIO()
    bytetext.write_overlapped(buf, _document(timelines, metadata, [0, 0]))
    return json.loads(buf.getvalue())


def write_perfetto(doc: dict[str, Any], out: Path | str) -> Path:
    out = Path(out)
    out.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    return out
