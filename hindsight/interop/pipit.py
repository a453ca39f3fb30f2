"""A trace in LLNL pipit's event conventions (``to_pipit``), so that pipit's analyses
(comm_matrix, message_histogram, time_profile, ...) run on hindsight traces; ``export_pipit``
writes that frame as CSV. The tidy frame of a trace, ``load``, is ``replay.frame.load`` (also
``replay.load``).

pipit's ``Trace.events`` (as its OTF2 reader builds it) has one row per event::

    Timestamp (ns)   float, ns since the trace's start
    Event Type       "Enter", "Leave" or "Instant"
    Name             the region ("MPI_Send", "work", ...) for Enter/Leave; the record type
                     ("MpiSend", "MpiIsend", "MpiRecv", "MpiIrecv") for Instant
    Thread           0 (hindsight records the MPI thread of each rank)
    Process          the world rank
    Attributes       dict: Enter {"region"}; MpiSend/MpiIsend {"receiver", "communicator",
                     "msg_tag", "msg_length"[, "request_id"]}; MpiRecv/MpiIrecv {"sender", ...};
                     None on Leave rows

Peers are **world** ranks (pipit's OTF2 reader gives OTF2's communicator-local ranks; they agree
on COMM_WORLD, the communicator almost every message uses).

The events are built column by column (numpy) and the CSV is formatted by one compiled pass into
a byte buffer, batch by batch: no Python object per event on the export path.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from hindsight import trace as tf
from hindsight import bytetext
from hindsight.bytetext import byte_table, longest, put, put_int
from hindsight.interop.timeline import Timeline, call_heads, read_timeline
from hindsight.jit import njit

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["PIPIT_COLUMNS", "export_pipit", "load", "pipit_trace", "to_pipit"]

PIPIT_COLUMNS = ["Timestamp (ns)", "Event Type", "Name", "Thread", "Process", "Attributes"]
EVENT_TYPES = ["Enter", "Leave", "Instant"]
# Beyond 2**53 ns a timestamp is not an exact double and its text is not "<integer>.0"
# (the compiled formatter's form): those traces are written through pandas.
EXACT_NS = 2**53

# The kinds of event a row can give, in the order one row gives them (as _events codes them).
ENTER, SEND, RECV, LEAVE = 0, 1, 2, 3
_INSTANTS = ["MpiSend", "MpiIsend", "MpiRecv", "MpiIrecv"]


def _op_names() -> list[str]:
    """The call name of every op code (the last entry: an op this version does not know)."""
    ops = [*tf.OPS, "unknown"]
    return [f"MPI_{'Sendrecv' if o.startswith('Sendrecv') else o}" for o in ops]


_NONBLOCKING_SEND = np.array([o in tf.NONBLOCKING_SEND_OPS for o in tf.OPS] + [False])
_COMPLETION = np.array([o in tf.COMPLETION_OPS for o in tf.OPS] + [False])


@dataclass(frozen=True)
class PipitEvents:
    """The events in their final order as columns: ``time`` (ns since the start), ``rank``,
    ``etype`` (index into EVENT_TYPES), ``name`` (index into ``names``, sorted), ``kind``
    (ENTER, SEND, RECV, LEAVE), ``nonblocking`` (an instant with a request_id) and ``row`` (the
    timeline row whose peer, comm, tag, nbytes and request an instant carries)."""

    time: np.ndarray
    rank: np.ndarray
    etype: np.ndarray
    name: np.ndarray
    names: list[str]
    kind: np.ndarray
    nonblocking: np.ndarray
    row: np.ndarray
    peer: np.ndarray
    comm: np.ndarray
    tag: np.ndarray
    nbytes: np.ndarray
    request: np.ndarray


def pipit_events(trace: Path | str | pa.Table) -> PipitEvents:
    """The events of ``to_pipit`` as columns. At one time on one rank they go: instants at the
    end of a call, then Leaves (shorter first), Enters (longer first), instants at the start of
    a call, and last the Leave of a zero-length call: proper nesting; then in row order."""
    return _ordered(_unordered_events(trace))


def _ordered(ev: _Unordered) -> PipitEvents:
    tl, order = ev.tl, ev.order
    row, kind, cand = ev.row[order], ev.kind[order], ev.cand[order]
    return PipitEvents(
        time=ev.time[order], rank=tl.rank[row].astype(np.int32), etype=_ETYPE[kind],
        name=ev.lookup[cand], names=ev.names, kind=kind, nonblocking=ev.nonblocking[order],
        row=row, peer=tl.peer, comm=tl.comm, tag=tl.tag, nbytes=tl.nbytes, request=tl.request)


@dataclass(frozen=True)
class _Unordered:
    """The events in row then kind order (as ``_events`` makes them) and ``order``, their final
    order; ``lookup`` maps a candidate name to its index in ``names``."""

    tl: Timeline
    row: np.ndarray
    kind: np.ndarray
    time: np.ndarray
    cand: np.ndarray
    nonblocking: np.ndarray
    order: np.ndarray
    names: list[str]
    lookup: np.ndarray


def _unordered_events(trace: Path | str | pa.Table) -> _Unordered:
    tl = read_timeline(trace)
    n, ts = tl.n, tl.t_start
    t0 = int(ts.min()) if n else 0
    match = tl.match()
    send = np.zeros(n, bool)
    send[match.send_row] = True
    done = np.asarray(match.recv_done_row)
    recv = np.zeros(n, bool)
    recv[np.where(done >= 0, done, match.recv_row)] = True
    head = call_heads(tl.rank, tl.op, ts, tl.t_end)
    # candidate names: the regions (no region or "" is "region"), the calls, the instants
    regions = [x or "region" for x in tl.region_names] + ["region"]
    candidates = regions + _op_names() + _INSTANTS
    op = tl.op
    opc = np.where((op >= 0) & (op < len(tf.OPS)), op, len(tf.OPS))
    rcode = tl.region_code
    call = np.where(op == 0, np.where(rcode >= 0, rcode, len(regions) - 1), len(regions) + opc)
    row, kind, time, phase, tie, cand, nonblocking = _events(
        head, send, recv, ts, tl.t_end, t0, call.astype(np.int32),
        len(regions) + len(tf.OPS) + 1, _NONBLOCKING_SEND[opc], _COMPLETION[opc])
    order = _order(time, tl.rank, row, phase, tie)
    # the categories: the names used, sorted (as pd.Categorical orders them)
    used = np.flatnonzero(np.bincount(cand, minlength=len(candidates)))
    names = sorted({candidates[c] for c in used.tolist()})
    index = {s: j for j, s in enumerate(names)}
    lookup = np.array([index.get(s, -1) for s in candidates], np.int32)
    return _Unordered(tl, row, kind, time, cand, nonblocking, order, names, lookup)


# Event Type (index into EVENT_TYPES) of each kind of event.
_ETYPE = np.array([0, 2, 2, 1], np.int8)


@njit(cache=True)
def _events(head, send, recv, ts, te, t0, call, instant, nb_send, nb_recv):
    """One event per (row, kind) present, in row then kind order: its row, kind, time, sort
    phase and tie, candidate name and whether it is a nonblocking instant."""
    n = len(head)
    m = 0
    for i in range(n):
        m += (head[i] == i) + send[i] + recv[i] + (i + 1 == n or head[i + 1] != head[i])
    row = np.empty(m, np.int64)
    kind = np.empty(m, np.int8)
    time = np.empty(m, np.int64)
    phase = np.empty(m, np.int8)
    tie = np.zeros(m, np.int64)
    cand = np.empty(m, np.int32)
    nonblocking = np.zeros(m, np.bool_)
    e = 0
    for i in range(n):
        dur = te[i] - ts[i]
        if head[i] == i:
            row[e], kind[e], time[e], phase[e], tie[e], cand[e] = i, 0, ts[i] - t0, 1, -dur, call[i]
            e += 1
        if send[i]:
            row[e], kind[e], time[e], phase[e] = i, 1, ts[i] - t0, 2
            cand[e] = instant + nb_send[i]
            nonblocking[e] = nb_send[i]
            e += 1
        if recv[i]:
            row[e], kind[e], time[e], phase[e] = i, 2, te[i] - t0, 2 if dur == 0 else -1
            cand[e] = instant + 2 + nb_recv[i]
            nonblocking[e] = nb_recv[i]
            e += 1
        if i + 1 == n or head[i + 1] != head[i]:
            row[e], kind[e], time[e], phase[e], tie[e], cand[e] = (i, 3, te[i] - t0,
                                                                  3 if dur == 0 else 0, dur,
                                                                  call[i])
            e += 1
    return row, kind, time, phase, tie, cand, nonblocking


def _order(time: np.ndarray, rank: np.ndarray, row: np.ndarray, phase: np.ndarray,
           tie: np.ndarray) -> np.ndarray:
    """The stable order of events by (time, the rank of their row, phase, tie). The events come
    rank by rank, each rank's nearly in time order, so a stable sort by time is quick (merging
    runs); events of equal time are then put in order by the other three packed into one int64,
    written over ``tie`` (always, but for absurd ranges; else a sort by four keys)."""
    if len(time) == 0:
        return np.zeros(0, np.int64)
    lo, hi = int(tie.min()), int(tie.max())
    span = hi - lo + 1
    ranks = int(rank.max()) + 1
    if int(rank.min()) < 0 or ranks * 5 * span >= 2**62:
        return np.lexsort((tie, phase, rank[row], time))
    _pack(tie, rank, row, phase, lo, span)
    order = np.argsort(time, kind="stable")
    _settle(order, time, tie)
    return order


@njit(cache=True)
def _pack(tie, rank, row, phase, lo, span):
    """``tie`` overwritten by (rank, phase, tie) packed into one int64 (no temporaries: each
    would be 8 bytes per event of new memory)."""
    for e in range(len(tie)):
        tie[e] = (rank[row[e]] * 5 + phase[e] + 1) * span + (tie[e] - lo)


@njit(cache=True)
def _settle(order, time, key):
    """Each run of equal times in ``order`` (sorted by time, stably) put in ``key`` order,
    stably."""
    m = len(order)
    i = 0
    while i < m:
        t = time[order[i]]
        j = i + 1
        while j < m and time[order[j]] == t:
            j += 1
        if j - i > 64:
            sub = order[i:j].copy()
            order[i:j] = sub[np.argsort(key[sub], kind="mergesort")]
        else:
            for a in range(i + 1, j):          # insertion sort: stable
                x = order[a]
                b = a - 1
                while b >= i and key[order[b]] > key[x]:
                    order[b + 1] = order[b]
                    b -= 1
                order[b + 1] = x
        i = j


def _attributes(ev: PipitEvents) -> list[dict[str, Any] | None]:
    """The Attributes column of ``to_pipit``: one dict per event (None on Leave)."""
    out: list[dict[str, Any] | None] = [None] * len(ev.kind)
    names = ev.names
    for e in np.flatnonzero(ev.kind == ENTER).tolist():
        out[e] = {"region": names[ev.name[e]]}
    for kind, peer_key in ((SEND, "receiver"), (RECV, "sender")):
        sel = np.flatnonzero(ev.kind == kind)
        rows = ev.row[sel]
        cols = zip(sel.tolist(), ev.peer[rows].tolist(), ev.comm[rows].tolist(),
                   ev.tag[rows].tolist(), ev.nbytes[rows].tolist(), ev.request[rows].tolist(),
                   ev.nonblocking[sel].tolist())
        for e, peer, comm, tag, nbytes, request, nonblocking in cols:
            a = {peer_key: peer, "communicator": comm, "msg_tag": tag, "msg_length": nbytes}
            if nonblocking:
                a["request_id"] = request
            out[e] = a
    return out


def __getattr__(name: str) -> Any:
    # pandas (replay.frame, the frames below) is imported when asked for: the CSV export
    # needs none of it, and its import is 0.3 s of the command's start-up
    if name == "load":
        from replay.frame import load
        return load
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def to_pipit(trace: Path | str | pa.Table) -> pd.DataFrame:
    """The events of a trace (or of a replayed timeline, ``Result.to_arrow()``) in pipit's
    conventions (see the module docstring)."""
    return _frame(pipit_events(trace))


def _frame(ev: PipitEvents) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame({
        "Timestamp (ns)": ev.time.astype(np.float64),
        "Event Type": pd.Categorical.from_codes(ev.etype, categories=EVENT_TYPES),
        "Name": pd.Categorical.from_codes(ev.name, categories=pd.Index(ev.names)),
        "Thread": np.zeros(len(ev.kind), np.int32),
        "Process": ev.rank,
        "Attributes": _attributes(ev),
    })


def export_pipit(trace: Path | str | pa.Table, out: Path | str) -> int:
    """Write the frame of ``to_pipit`` to ``out`` as CSV, ``Attributes`` as JSON ("" for
    None), exactly as ``DataFrame.to_csv(index=False)`` writes it; returns the events."""
    ev = _unordered_events(trace)
    m = len(ev.kind)
    if m and max(-int(ev.time.min()), int(ev.time.max())) >= EXACT_NS:
        frame = _frame(_ordered(ev))
        frame = frame.assign(Attributes=[json.dumps(a) if a is not None else ""
                                         for a in frame["Attributes"]])
        frame.to_csv(out, index=False)
        return m
    tl = ev.tl
    name_buf, name_off = byte_table([_csv_field(s) for s in ev.names])
    enter_buf, enter_off = byte_table([_csv_field(json.dumps({"region": s})) for s in ev.names])
    # room for any event: the longest name and Enter attributes, and an instant's six integers
    room = 300 + longest(name_off) + longest(enter_off)

    def fill(buf: np.ndarray, lo: int, hi: int) -> int:
        # (the buffer holds hi - lo events at ``room`` each: the formatter reaches hi)
        at, end = _format(buf, room, lo, ev.order[:hi], ev.time, ev.cand, ev.lookup, tl.rank,
                          ev.kind, ev.nonblocking, ev.row, tl.peer, tl.comm, tl.tag,
                          tl.nbytes, tl.request, name_buf, name_off, enter_buf, enter_off)
        if at != hi:
            raise RuntimeError(f"pipit export: events {at}..{hi} did not fit their buffer")
        return end

    with open(out, "wb") as fh:
        fh.write((",".join(PIPIT_COLUMNS) + "\n").encode())
        bytetext.write_in_parallel(fh, m, room, fill)
    return m


def _csv_field(text: str) -> str:
    """``text`` as the csv module (pandas' writer) writes a field: quoted when it must be."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow([text, ""])
    return buf.getvalue()[:-2]


# The constant text of the CSV (_format names its pieces by index).
_PIECES = ["Enter", "Leave", "Instant", '"{""receiver"": ', '"{""sender"": ',
           ', ""communicator"": ', ', ""msg_tag"": ', ', ""msg_length"": ',
           ', ""request_id"": ', '}"']
# module constants: compiled code takes them as constants, which need no reference counts (an
# array passed to a helper called per event is counted on each call)
_PIECE_BUF, _PIECE_OFF = byte_table(_PIECES)


# Without reference counting (``_nrt=False``; it allocates nothing): counted, the arrays it
# hands its inlined helpers cost an atomic add each at every event.
@njit(cache=True, nogil=True, _nrt=False)
def _format(buf, room, first, order, time, cand, lookup, rank, kind, nonblocking, row, peer,
            comm, tag, nbytes, request, name_buf, name_off, enter_buf, enter_off):
    """The CSV lines of events ``order[first]``, ``order[first + 1]``, ... into ``buf`` while
    ``room`` bytes (the most one event takes) are left; returns the next position in ``order``
    and the bytes written. The events are read through ``order`` (not put in order first:
    sorted copies would be ~25 bytes per event of new memory, dearer than the gathers)."""
    at = 0
    j = first
    while j < len(order) and at + room <= len(buf):
        e = order[j]
        k = kind[e]
        at = put_int(buf, at, time[e])
        buf[at] = 46                                  # ".0,": a float of an integer
        buf[at + 1] = 48
        buf[at + 2] = 44
        at += 3
        at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 0 if k == 0 else (1 if k == 3 else 2))
        buf[at] = 44
        at += 1
        c = lookup[cand[e]]
        at = put(buf, at, name_buf, name_off, c)
        buf[at] = 44                                  # ",0," the thread
        buf[at + 1] = 48
        buf[at + 2] = 44
        at += 3
        at = put_int(buf, at, rank[row[e]])
        buf[at] = 44
        at += 1
        if k == 0:
            at = put(buf, at, enter_buf, enter_off, c)
        elif k == 1 or k == 2:
            r = row[e]
            at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 3 if k == 1 else 4)
            at = put_int(buf, at, peer[r])
            at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 5)
            at = put_int(buf, at, comm[r])
            at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 6)
            at = put_int(buf, at, tag[r])
            at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 7)
            at = put_int(buf, at, nbytes[r])
            if nonblocking[e]:
                at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 8)
                at = put_int(buf, at, request[r])
            at = put(buf, at, _PIECE_BUF, _PIECE_OFF, 9)
        buf[at] = 10
        at += 1
        j += 1
    return j, at


def pipit_trace(trace: Path | str | pa.Table) -> Any:
    """A ``pipit.Trace`` (needs the optional ``pipit`` package)."""
    try:
        import pipit
    except ImportError:
        raise ImportError("pipit is not installed (pip install pipit); to_pipit() gives the "
                          "events frame without it") from None
    return pipit.Trace(None, to_pipit(trace))
