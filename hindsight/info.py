"""`hindsight trace info`: what a trace holds, mostly from Parquet footers and a few columns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hindsight import traceformat as tf


def trace_info(trace_dir: Path | str) -> dict[str, Any]:
    """A summary of one trace. Reads only the op, nbytes and time columns."""
    trace = tf.read_trace(trace_dir, columns=["rank", "op", "nbytes", "t_start", "t_end"])
    table = trace.table
    m = trace.manifest
    ops = table.column("op").combine_chunks()
    ops = ops.dictionary_decode() if hasattr(ops, "dictionary_decode") else ops
    counts = pc.value_counts(ops).to_pylist()
    events_per_op = {c["values"]: int(c["counts"]) for c in counts}
    is_send = pc.is_in(ops, value_set=pa.array(sorted(tf.SEND_OPS)))
    nbytes = table.column("nbytes")
    sent = pc.sum(pc.if_else(is_send, pc.max_element_wise(nbytes, 0), 0)).as_py() or 0
    per_rank = np.bincount(table.column("rank").to_numpy(), minlength=trace.nranks)
    if table.num_rows:
        measured = int(pc.max(table.column("t_end")).as_py()) - \
            min(0, int(pc.min(table.column("t_start")).as_py()))
    else:
        measured = 0
    return {
        "path": str(trace.path),
        "ranks": trace.nranks,
        "events": int(table.num_rows),
        "events_per_rank": [int(x) for x in per_rank],
        "events_per_op": dict(sorted(events_per_op.items(), key=lambda kv: -kv[1])),
        "bytes_sent": int(sent),
        "makespan_s": measured / 1e9,
        "complete": trace.complete,
        "incomplete_ranks": trace.incomplete_ranks,
        "rank_status": [s.status for s in trace.sources],
        "app": m.get("app"),
        "paradigm": m.get("paradigm"),
        "args": m.get("args"),
        "mpi_library": m.get("mpi_library"),
        "mpi_version": m.get("mpi_version"),
        "transport": m.get("transport"),
        "hosts": m.get("ranks_per_host"),
        "oversubscribed": m.get("oversubscribed"),
        "cpu_sampling": m.get("cpu_sampling"),
        "clock_method": (m.get("clock") or {}).get("method"),
        "result_verified": m.get("result_verified"),
        "run_id": m.get("run_id"),
        "git_revision": m.get("git_revision"),
        "format_version": m.get("format_version"),
    }


def format_info(info: dict[str, Any]) -> str:
    lines = [
        f"trace       {info['path']}",
        f"run         {info['run_id']}  app={info['app']}  paradigm={info['paradigm']}",
        f"ranks       {info['ranks']}  hosts={info['hosts']}  oversubscribed={info['oversubscribed']}",
        f"mpi         {info['mpi_library']} (MPI {info['mpi_version']})",
        f"complete    {'yes' if info['complete'] else 'NO'}"
        + ("" if info["complete"] else f"  (ranks {info['incomplete_ranks']}: "
           f"{[info['rank_status'][r] for r in info['incomplete_ranks']]})"),
        f"verified    {info['result_verified']}",
        f"makespan    {info['makespan_s']:.6f} s",
        f"events      {info['events']}  ({info['bytes_sent']} bytes sent in p2p)",
    ]
    width = max((len(k) for k in info["events_per_op"]), default=4)
    for op, n in info["events_per_op"].items():
        lines.append(f"  {op:<{width}}  {n}")
    if info["transport"]:
        lines.append("transport   " + " ".join(f"{k}={v}" for k, v in info["transport"].items()))
    return "\n".join(lines)
