"""pandas frames of a trace: a tidy one (``load``) and LLNL pipit's event conventions
(``to_pipit``), so that pipit's analyses (comm_matrix, message_histogram, time_profile, ...) run
on hindsight traces.

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

PIPIT_COLUMNS = ["Timestamp (ns)", "Event Type", "Name", "Thread", "Process", "Attributes"]


def load(trace: Path | str | pa.Table) -> pd.DataFrame:
    """A tidy frame of a trace: one row per event in (rank, seq) order, ``op``/``region`` as
    categoricals, times in ns since the trace's first event and ``duration_ns``."""
    table = tf.read_trace(trace).table if not isinstance(trace, pa.Table) else trace
    df = table.to_pandas()
    df = df.sort_values(["rank", "seq"], kind="stable").reset_index(drop=True)
    t0 = int(df["t_start"].min()) if len(df) else 0
    df["t_start"] = df["t_start"] - t0
    df["t_end"] = df["t_end"] - t0
    df["duration_ns"] = df["t_end"] - df["t_start"]
    for c in ("op", "region"):
        df[c] = df[c].astype("category")
    return df


def to_pipit(trace: Path | str | pa.Table) -> pd.DataFrame:
    """The events of a trace (or of a replayed timeline, ``Result.to_arrow()``) in pipit's
    conventions (see the module docstring)."""
    from replay.matching import match_messages, op_codes

    table = tf.read_trace(trace).table if not isinstance(trace, pa.Table) else trace
    table = tf.sort_rows(table)
    n = table.num_rows
    rank = table.column("rank").to_numpy().astype(np.int64)
    op = op_codes(table).astype(np.int64)
    region = table.column("region").to_pylist()
    ts = table.column("t_start").to_numpy().astype(np.int64)
    te = table.column("t_end").to_numpy().astype(np.int64)
    c = {k: table.column(k).to_numpy().astype(np.int64)
         for k in ("peer", "tag", "comm", "nbytes", "request")}
    t0 = int(ts.min()) if n else 0
    match, _ = match_messages(table)
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

    from hindsight.interop.perfetto import call_heads

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
        base = {"communicator": int(c["comm"][i]), "msg_tag": int(c["tag"][i]),
                "msg_length": int(c["nbytes"][i])}
        if matched_send[i]:
            nb = name_op in tf.NONBLOCKING_SEND_OPS
            add(ts[i], rank[i], k, "Instant", "MpiIsend" if nb else "MpiSend",
                {"receiver": int(c["peer"][i]), **base,
                 **({"request_id": int(c["request"][i])} if nb else {})}, 2)
            k += 1
        if matched_recv[i]:
            nb = name_op in tf.COMPLETION_OPS
            add(te[i], rank[i], k, "Instant", "MpiIrecv" if nb else "MpiRecv",
                {"sender": int(c["peer"][i]), **base,
                 **({"request_id": int(c["request"][i])} if nb else {})}, -1 if dur else 2)
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
