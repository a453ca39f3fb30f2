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

import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from hindsight import trace as tf
from hindsight.interop.timeline import call_heads, read_timeline
from replay.matching import match_messages

PID_STRIDE = 100000


def timeline_events(table: pa.Table, label: str | None = None, pid_base: int = 0,
                    flow_base: int = 0) -> list[dict[str, Any]]:
    """Trace-event dicts for one timeline (a trace table, measured or replayed)."""
    tl = read_timeline(table)
    n, rank, op, region, ts, te = tl.n, tl.rank, tl.op, tl.region, tl.t_start, tl.t_end
    t0 = int(ts.min()) if n else 0
    us = lambda t: round((int(t) - t0) / 1000.0, 3)  # noqa: E731  (ns -> us, ns precision)

    events: list[dict[str, Any]] = []
    prefix = f"{label} " if label else ""
    for r in np.unique(rank).tolist():
        pid = pid_base + r
        events += [
            {"ph": "M", "name": "process_name", "pid": pid, "args": {"name": f"{prefix}rank {r}"}},
            {"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": pid}},
            {"ph": "M", "name": "thread_name", "pid": pid, "tid": 0, "args": {"name": "MPI"}},
            {"ph": "M", "name": "thread_name", "pid": pid, "tid": 1, "args": {"name": "regions"}},
        ]
    call_of_row = call_heads(rank, op, ts, te)
    slices: dict[int, dict[str, Any]] = {}
    for i in range(n):
        c = int(call_of_row[i])
        name = tf.OPS[op[i]] if 0 <= op[i] < len(tf.OPS) else "unknown"
        row_args = {k: int(getattr(tl, k)[i]) for k in ("seq", "peer", "tag", "comm", "nbytes",
                                                         "request", "root")
                    if int(getattr(tl, k)[i]) != -1}
        if c in slices:
            slices[c]["args"]["rows"].append({"op": name, **row_args})
            if op[i] == tf.OP_CODE["Sendrecv_recv"]:
                slices[c]["name"] = "MPI_Sendrecv"
            continue
        if op[i] == 0:
            ev = {"ph": "X", "name": region[i] or "region", "cat": "region",
                  "pid": pid_base + int(rank[i]), "tid": 1, "ts": us(ts[i]),
                  "dur": round((te[i] - ts[i]) / 1000.0, 3), "args": row_args}
        else:
            ev = {"ph": "X", "name": f"MPI_{name}", "cat": "mpi",
                  "pid": pid_base + int(rank[i]), "tid": 0, "ts": us(ts[i]),
                  "dur": round((te[i] - ts[i]) / 1000.0, 3),
                  "args": {"rows": [{"op": name, **row_args}],
                           **({"region": region[i]} if region[i] else {})}}
        slices[c] = ev
    events += list(slices.values())

    match, _ = match_messages(tl.table)
    done = np.asarray(match.recv_done_row)
    recv_end = np.where(done >= 0, done, match.recv_row)
    for k in range(len(match)):
        s_row = int(match.send_row[k])
        d_row = int(recv_end[k])
        fid = flow_base + k + 1
        common = {"cat": "message", "name": "msg", "id": fid}
        events.append({"ph": "s", **common, "pid": pid_base + int(rank[s_row]), "tid": 0,
                       "ts": us(ts[call_of_row[s_row]]),
                       "args": {"bytes": int(match.nbytes[k])}})
        events.append({"ph": "f", "bp": "e", **common, "pid": pid_base + int(rank[d_row]),
                       "tid": 0, "ts": us(ts[call_of_row[d_row]])})
    return events


def to_perfetto(timelines: Sequence[tuple[str | None, pa.Table]],
                metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON document for one or more timelines (e.g. measured and replayed)."""
    events: list[dict[str, Any]] = []
    flows = 0
    for j, (label, table) in enumerate(timelines):
        evs = timeline_events(table, label, pid_base=j * PID_STRIDE, flow_base=flows)
        flows += sum(1 for e in evs if e["ph"] == "s")
        events += evs
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"generator": "hindsight export --format perfetto",
                          **(metadata or {})}}


def write_perfetto(doc: dict[str, Any], out: Path | str) -> Path:
    out = Path(out)
    out.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    return out
