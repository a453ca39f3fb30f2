"""The column-wise exporters write what the per-row ones wrote: the Perfetto document byte for
byte on every corpus trace, on replayed timelines (unsorted rows, overlapping calls), on two
timelines in one file and on edge cases (empty region names, unknown ops, negative durations).
The reference is the per-row formatter the exporter had before (kept here, not in the
product)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import replay
from hindsight import trace as tf
from hindsight.interop import perfetto as P
from hindsight.interop.timeline import call_heads, read_timeline
from replay.matching import match_messages

CORPUS = Path(__file__).parent / "corpus"
TRACES = sorted(p.name for p in CORPUS.iterdir() if (p / "manifest.json").is_file())


def reference_events(table: pa.Table, label: str | None = None, pid_base: int = 0,
                     flow_base: int = 0) -> list[dict[str, Any]]:
    """The per-row Perfetto formatter the column-wise one replaced."""
    tl = read_timeline(table)
    n, rank, op, region, ts, te = tl.n, tl.rank, tl.op, tl.region, tl.t_start, tl.t_end
    t0 = int(ts.min()) if n else 0
    us = lambda t: round((int(t) - t0) / 1000.0, 3)  # noqa: E731
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
        row_args = {k: int(getattr(tl, k)[i]) for k in P.ARG_FIELDS
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
        s_row, d_row = int(match.send_row[k]), int(recv_end[k])
        common = {"cat": "message", "name": "msg", "id": flow_base + k + 1}
        events.append({"ph": "s", **common, "pid": pid_base + int(rank[s_row]), "tid": 0,
                       "ts": us(ts[call_of_row[s_row]]), "args": {"bytes": int(match.nbytes[k])}})
        events.append({"ph": "f", "bp": "e", **common, "pid": pid_base + int(rank[d_row]),
                       "tid": 0, "ts": us(ts[call_of_row[d_row]])})
    return events


def reference_text(timelines, metadata=None) -> str:
    events: list[dict[str, Any]] = []
    flows = 0
    for j, (label, table) in enumerate(timelines):
        evs = reference_events(table, label, pid_base=j * P.PID_STRIDE, flow_base=flows)
        flows += sum(1 for e in evs if e["ph"] == "s")
        events += evs
    doc = {"traceEvents": events, "displayTimeUnit": "ns",
           "otherData": {"generator": "hindsight export --format perfetto", **(metadata or {})}}
    return json.dumps(doc, separators=(",", ":")) + "\n"


def _check(timelines, tmp_path, metadata=None) -> None:
    want = reference_text(timelines, metadata)
    counts = P.export_perfetto(timelines, tmp_path / "out.json", metadata)
    got = (tmp_path / "out.json").read_text()
    assert got == want
    events = json.loads(want)["traceEvents"]
    assert counts == (sum(e["ph"] == "X" for e in events), sum(e["ph"] == "s" for e in events))
    assert P.to_perfetto(timelines, metadata) == json.loads(want)


@pytest.mark.parametrize("name", TRACES)
def test_perfetto_is_byte_identical_on_the_corpus(name, tmp_path):
    _check([(None, tf.read_trace(CORPUS / name).table)], tmp_path, {"trace": name, "ranks": 3})


@pytest.mark.parametrize("name", ["stencil-n4", "requests-n2", "collectives-n3"])
def test_perfetto_is_byte_identical_on_replayed_and_two_timelines(name, tmp_path):
    prep = replay.prepare(CORPUS / name, keep_table=True)
    res = replay.run(prep, "loggps", [])
    measured = tf.read_trace(CORPUS / name).table
    replayed = res.to_arrow()
    _check([(res.model, replayed)], tmp_path)
    _check([("measured", measured), (res.model, replayed)], tmp_path / "..")


def test_perfetto_edge_cases_are_byte_identical(tmp_path):
    """Unsorted rows, an empty and a quoted region name, an op this version does not know,
    negative durations and times, times past 1e15 ns, a batch boundary inside a call."""
    table = tf.read_trace(CORPUS / "requests-n2").table
    n = table.num_rows
    rng = np.random.default_rng(3)
    regions = pa.array(rng.choice(["", 'say "hi"', "ünï", None], n).tolist()).dictionary_encode()
    t_start = table.column("t_start").to_numpy() - 5_000
    t_end = t_start + rng.integers(-2000, 9000, n)
    ops = pa.array(np.where(np.arange(n) == 3, "NotAnOp", table.column("op").to_pylist()))
    table = (table.set_column(table.schema.get_field_index("region"), "region", regions)
             .set_column(table.schema.get_field_index("t_start"), "t_start", pa.array(t_start))
             .set_column(table.schema.get_field_index("t_end"), "t_end", pa.array(t_end))
             .set_column(table.schema.get_field_index("op"), "op", ops.dictionary_encode()))
    shuffled = table.take(pa.array(rng.permutation(n)))
    _check([(None, shuffled)], tmp_path)
    late = table.set_column(table.schema.get_field_index("t_end"), "t_end",
                            pa.array(t_end + 3 * 10**15))
    _check([("late", late)], tmp_path)
    old = P.BATCH_ROWS
    try:
        P.BATCH_ROWS = 7
        _check([(None, table), ("again", table)], tmp_path)
    finally:
        P.BATCH_ROWS = old


def test_perfetto_of_an_empty_timeline(tmp_path):
    empty = tf.read_trace(CORPUS / "requests-n2").table.slice(0, 0)
    _check([(None, empty)], tmp_path)
    _check([(None, empty), ("b", tf.read_trace(CORPUS / "requests-n2").table)], tmp_path)
