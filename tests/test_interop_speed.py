"""The column-wise exporters write what the per-row ones wrote: the Perfetto document and the
pipit CSV byte for byte (and pipit's frame equal) on every corpus trace, on replayed timelines
(unsorted rows, overlapping calls), on two timelines in one file and on edge cases (empty region
names, unknown ops, negative durations). The reference is the per-row formatter the exporter had
before (kept here, not in the product)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import replay
from hindsight import trace as tf
from hindsight import bytetext
from hindsight.interop import perfetto as P
from hindsight.interop import pipit as PIPIT
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
        # rule flow forward: the send's start where it falls within the receiving call
        sent, got = ts[call_of_row[s_row]], ts[call_of_row[d_row]]
        events.append({"ph": "f", "bp": "e", **common, "pid": pid_base + int(rank[d_row]),
                       "tid": 0, "ts": us(sent if got < sent <= te[d_row] else got)})
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
    negative durations and times, times past 1e15 ns, the text buffer written inside a call."""
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
    old = bytetext.BUFFER_BYTES
    try:
        bytetext.BUFFER_BYTES = 1           # the buffer written after every row
        _check([(None, table), ("again", table)], tmp_path)
        _check([(None, tf.read_trace(CORPUS / "p2p-all-n3").table)], tmp_path)  # Sendrecv
    finally:
        bytetext.BUFFER_BYTES = old


def test_perfetto_of_an_empty_timeline(tmp_path):
    empty = tf.read_trace(CORPUS / "requests-n2").table.slice(0, 0)
    _check([(None, empty)], tmp_path)
    _check([(None, empty), ("b", tf.read_trace(CORPUS / "requests-n2").table)], tmp_path)


# ------------------------------------------------------------------------------------------------
# pipit


def reference_pipit(table: pa.Table) -> pd.DataFrame:
    """The per-row ``to_pipit`` the column-wise one replaced."""
    tl = read_timeline(table)
    n, rank, op, region, ts, te = tl.n, tl.rank, tl.op, tl.region, tl.t_start, tl.t_end
    t0 = int(ts.min()) if n else 0
    match, _ = match_messages(tl.table)
    matched_send = np.zeros(n, bool)
    matched_send[match.send_row] = True
    done = np.asarray(match.recv_done_row)
    recv_done = np.where(done >= 0, done, match.recv_row)
    matched_recv = np.zeros(n, bool)
    matched_recv[recv_done] = True
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
    return pd.DataFrame({
        "Timestamp (ns)": np.array([x[0] for x in rows], dtype=np.float64),
        "Event Type": pd.Categorical([x[5] for x in rows],
                                     categories=["Enter", "Leave", "Instant"]),
        "Name": pd.Categorical([x[6] for x in rows]),
        "Thread": np.zeros(len(rows), np.int32),
        "Process": np.array([x[1] for x in rows], dtype=np.int32),
        "Attributes": [x[7] for x in rows],
    })


def _check_pipit(table: pa.Table, tmp_path: Path) -> None:
    want = reference_pipit(table)
    got = PIPIT.to_pipit(table)
    pd.testing.assert_frame_equal(got, want)
    assert got["Attributes"].tolist() == want["Attributes"].tolist()   # key order too
    csv = want.assign(Attributes=[json.dumps(a) if a is not None else ""
                                  for a in want["Attributes"]]).to_csv(index=False)
    assert PIPIT.export_pipit(table, tmp_path / "out.csv") == len(want)
    assert (tmp_path / "out.csv").read_bytes() == csv.encode()


@pytest.mark.parametrize("name", TRACES)
def test_pipit_is_identical_on_the_corpus(name, tmp_path):
    _check_pipit(tf.read_trace(CORPUS / name).table, tmp_path)


@pytest.mark.parametrize("name", ["stencil-n4", "requests-n2", "collectives-n3"])
def test_pipit_is_identical_on_replayed_timelines(name, tmp_path):
    prep = replay.prepare(CORPUS / name, keep_table=True)
    _check_pipit(replay.run(prep, "loggps", []).to_arrow(), tmp_path)


def test_pipit_edge_cases_are_identical(tmp_path):
    """Unsorted rows; region names empty, quoted, with a comma, a line break, a carriage
    return, non-ASCII or equal to a call's name; an op this version does not know; negative
    durations and times; zero-length calls; times past 2**53 ns (written through pandas); the
    text buffer refilled between events."""
    table = tf.read_trace(CORPUS / "requests-n2").table
    n = table.num_rows
    rng = np.random.default_rng(5)
    names = ["", 'say "hi"', "a,b", "two\nlines", "cr\r", "ünï", "MPI_Send", None]
    regions = pa.array(rng.choice(np.array(names, object), n).tolist()).dictionary_encode()
    t_start = table.column("t_start").to_numpy() - 5_000
    t_end = t_start + rng.integers(-2000, 9000, n) * (rng.random(n) < 0.8)
    ops = pa.array(np.where(np.arange(n) == 3, "NotAnOp", table.column("op").to_pylist()))
    table = (table.set_column(table.schema.get_field_index("region"), "region", regions)
             .set_column(table.schema.get_field_index("t_start"), "t_start", pa.array(t_start))
             .set_column(table.schema.get_field_index("t_end"), "t_end", pa.array(t_end))
             .set_column(table.schema.get_field_index("op"), "op", ops.dictionary_encode()))
    _check_pipit(table.take(pa.array(rng.permutation(n))), tmp_path)
    late = table.set_column(table.schema.get_field_index("t_end"), "t_end",
                            pa.array(t_end + 10**16))
    _check_pipit(late, tmp_path)
    old = bytetext.BUFFER_BYTES
    try:
        bytetext.BUFFER_BYTES = 1
        _check_pipit(table, tmp_path)
    finally:
        bytetext.BUFFER_BYTES = old


@pytest.mark.parametrize("count, room", [(0, 8), (1, 8), (5, 1 << 21), (100_003, 12)])
def test_chunks_formatted_on_two_threads_are_written_in_order(count, room, tmp_path):
    """``write_in_parallel``: every item once, in order, whatever the chunks (one item a chunk
    when an item's room passes the buffer size; a last chunk that is short; none)."""
    def fill(buf, lo, hi):
        text = "".join(f"{k}," for k in range(lo, hi)).encode()
        assert len(text) <= (hi - lo) * room
        buf[:len(text)] = np.frombuffer(text, np.uint8)
        return len(text)

    out = tmp_path / "items"
    with open(out, "wb") as fh:
        bytetext.write_in_parallel(fh, count, room, fill)
    assert out.read_bytes() == "".join(f"{k}," for k in range(count)).encode()


def test_pipit_of_an_empty_timeline(tmp_path):
    _check_pipit(tf.read_trace(CORPUS / "requests-n2").table.slice(0, 0), tmp_path)


def test_pipit_events_in_equal_time_runs_are_ordered_by_rank_phase_and_tie():
    """Runs of equal times longer than the insertion sort takes are sorted too, stably."""
    rng = np.random.default_rng(1)
    m = 5000
    time = rng.integers(0, 3, m)
    rank, phase = rng.integers(0, 4, m), rng.integers(-1, 4, m).astype(np.int8)
    tie = rng.integers(-3, 3, m)
    want = np.lexsort((np.arange(m), tie, phase, rank, time))
    # the events' ranks are their rows' (here row e is event e); tie is overwritten
    row = np.arange(m)
    assert (PIPIT._order(time, rank, row, phase, tie.copy()) == want).all()
    assert (PIPIT._order(time, rank, row, phase, tie * 2**61) == want).all()   # four keys
