"""A trace in LLNL pipit's event conventions (``to_pipit``), so that pipit's analyses
(comm_matrix, message_histogram, time_profile, ...) run on hindsight traces. The tidy frame of a
trace, ``load``, is ``replay.frame.load`` (also ``replay.load``).

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
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from hindsight import trace as tf
from hindsight.interop.timeline import call_heads, read_timeline
from replay.frame import load
from replay.matching import match_messages

__all__ = ["PIPIT_COLUMNS", "load", "pipit_trace", "to_pipit"]

PIPIT_COLUMNS = ["Timestamp (ns)", "Event Type", "Name", "Thread", "Process", "Attributes"]


def to_pipit(trace: Path | str | pa.Table) -> pd.DataFrame:
    """The events of a trace (or of a replayed timeline, ``Result.to_arrow()``) in pipit's
    conventions (see the module docstring)."""
    tl = read_timeline(trace)
    n, rank, op, region, ts, te = tl.n, tl.rank, tl.op, tl.region, tl.t_start, tl.t_end
    t0 = int(ts.min()) if n else 0
    match, _ = match_messages(tl.table)
    matched_send = np.zeros(n, bool)
    matched_send[match.send_row] = True
    done = np.asarray(match.recv_done_row)
    recv_done = np.where(done >= 0, done, match.recv_row)
    matched_recv = np.zeros(n, bool)
    matched_recv[recv_done] = True

    # (time, rank, phase, tie, order, type, name, attributes). At one time on one rank:
    # instants at the end of a call, then Leaves (shorter first), Enters (longer first), instants
    # at the start of a call, and last the Leave of a zero-length call: proper nesting.
    rows: list[tuple] = []

    def add(t, r, k, typ, name, attrs, phase=0, tie=0):
        rows.append((int(t) - t0, int(r), phase, tie, k, typ, name, attrs))

    head = call_heads(rank, op, ts, te)
    k = 0
    for i in range(n):
        name_op = tf.OPS[op[i]] if 0 <= op[i] < len(tf.OPS) else "unknown"
        if name_op.startswith("Sendrecv"):
            name_op = "Sendrecv"
        name = (region[i] or "region") if op[i] == 0 else f"MPI_{name_op}"
        dur = int(te[i] - ts[i])
        first = head[i] == i
        last = i + 1 >= n or head[i + 1] != head[i]
        if first:
            add(ts[i], rank[i], k, "Enter", name, {"region": name}, 1, -dur)
            k += 1
        base = {"communicator": int(tl.comm[i]), "msg_tag": int(tl.tag[i]),
                "msg_length": int(tl.nbytes[i])}
        if matched_send[i]:
            nb = name_op in tf.NONBLOCKING_SEND_OPS
            add(ts[i], rank[i], k, "Instant", "MpiIsend" if nb else "MpiSend",
                {"receiver": int(tl.peer[i]), **base,
                 **({"request_id": int(tl.request[i])} if nb else {})}, 2)
            k += 1
        if matched_recv[i]:
            nb = name_op in tf.COMPLETION_OPS
            add(te[i], rank[i], k, "Instant", "MpiIrecv" if nb else "MpiRecv",
                {"sender": int(tl.peer[i]), **base,
                 **({"request_id": int(tl.request[i])} if nb else {})}, -1 if dur else 2)
            k += 1
        if last:
            add(te[i], rank[i], k, "Leave", name, None, 0 if dur else 3, dur)
            k += 1
    rows.sort(key=lambda x: x[:5])
    df = pd.DataFrame({
        "Timestamp (ns)": np.array([x[0] for x in rows], dtype=np.float64),
        "Event Type": pd.Categorical([x[5] for x in rows],
                                     categories=["Enter", "Leave", "Instant"]),
        "Name": pd.Categorical([x[6] for x in rows]),
        "Thread": np.zeros(len(rows), np.int32),
        "Process": np.array([x[1] for x in rows], dtype=np.int32),
        "Attributes": [x[7] for x in rows],
    })
    return df


def pipit_trace(trace: Path | str | pa.Table) -> Any:
    """A ``pipit.Trace`` (needs the optional ``pipit`` package)."""
    try:
        import pipit
    except ImportError:
        raise ImportError("pipit is not installed (pip install pipit); to_pipit() gives the "
                          "events frame without it") from None
    return pipit.Trace(None, to_pipit(trace))
