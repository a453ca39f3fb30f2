"""Programs that call MPI from more than one thread, at mpi4py's default level (the program sets
no mpi4py.rc.thread_level, so MPICH grants MPI_THREAD_MULTIPLE and the tracers accept it). One
thread at a time is recorded whole, by the Python tracer and by the PMPI library; two threads at
once stop the rank's recording at the first overlap, and collect, trace check and replay each
say so in one line while the program's output stays what it is untraced."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from hindsight import trace as tf
from instrument import native
from tests.conftest import PROGRAMS, ROOT, hindsight

MPIEXEC = os.path.join(os.path.dirname(sys.executable), "mpiexec")
RECORDERS = ["python", pytest.param("pmpi", marks=pytest.mark.skipif(
    native.find_mpicc() is None, reason="no mpicc: the PMPI library cannot be built here"))]


def _untraced(program: str) -> str:
    res = subprocess.run([MPIEXEC, "-n", "2", sys.executable, str(PROGRAMS / program)],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    return res.stdout


def _program_lines(text: str) -> list[str]:
    """collect's output without its own `trace ...` line: the program's."""
    return [x for x in text.splitlines() if not x.startswith("trace ")]


def _rows(out, rank: int) -> list[tuple]:
    df = tf.read_trace(out).to_pandas()
    df = df[df["rank"] == rank]
    return list(zip(df["op"].astype(str), df["peer"], df["tag"]))


@pytest.mark.parametrize("recorder", RECORDERS)
def test_two_threads_at_once_stop_the_ranks_recording(tmp_path, recorder):
    """two_threads.py: on rank 0 a worker thread is in Recv when the main thread enters a
    Barrier. The run completes with the untraced output; rank 0's rows end before the overlap
    (no two rows overlap), the manifest names the rank and the calls, collect fails with one
    Error line saying what to do, trace check with one line, replay refuses in one line (and
    replays the recorded part with --allow-partial)."""
    out = tmp_path / "t"
    res = hindsight("collect", "-n", 2, "--program", PROGRAMS / "two_threads.py", "--out", out,
                    "--recorder", recorder)
    assert res.returncode == 1, res.stdout + res.stderr
    assert _program_lines(res.stdout) == _untraced("two_threads.py").splitlines()
    cause = ("rank 0 called MPI from two threads at once (Barrier began while Recv was in "
             "progress in another thread)")
    assert res.stderr.strip().splitlines() == [
        f"Error: {cause}: its recording stopped there, so {out} holds its calls up to then only;"
        " to trace the program, make its threads call MPI one at a time (a lock around the "
        "calls, as MPI_THREAD_SERIALIZED asks)"], res.stderr
    m = json.loads((out / "manifest.json").read_text())
    assert m["concurrent_mpi"] == {"0": ["Barrier", "Recv"]}
    assert m["rank_status"] == ["concurrent-mpi", "complete"] and m["complete"] is False
    # The Python tracer writes the main thread's Barrier (it ended first) and cuts at the
    # worker's Recv, which started before it; the library never records a call of either
    # thread once both were in MPI.
    kept = [("Barrier", -1, -1)] * (2 if recorder == "python" else 1)
    assert _rows(out, 0) == kept
    assert _rows(out, 1) == [("Barrier", -1, -1), ("Barrier", -1, -1), ("Send", 0, 7),
                             ("Barrier", -1, -1)]
    check = hindsight("trace", "check", out)
    assert check.returncode == 1 and check.stderr == ""
    assert check.stdout.splitlines() == [
        f"{out / 'manifest.json'}: {cause}: its recording stopped there, so the trace holds its "
        "calls up to then only (the message and collective checks are not run)"]
    info = hindsight("trace", "info", out)
    assert f"threads     {cause}: its recording stopped there" in info.stdout.splitlines()
    replay = hindsight("replay", out, timeout=120)
    assert replay.returncode == 1 and "Traceback" not in replay.stderr
    assert replay.stderr.strip().splitlines() == [
        f"Error: {out}: {cause}; its recording stopped there, so the trace is incomplete: use "
        "--allow-partial to replay what was recorded before"]
    partial = hindsight("replay", out, "--allow-partial", timeout=120)
    assert partial.returncode == 0 and "predicted" in partial.stdout, partial.stderr


@pytest.mark.parametrize("recorder", RECORDERS)
def test_threads_that_take_turns_are_recorded_whole(tmp_path, recorder):
    """serialized_threads.py: a worker thread's pickle-API send and recv between the main
    thread's Barrier and Allreduce: every call is a row, in the order made, and the trace
    checks and replays."""
    out = tmp_path / "t"
    res = hindsight("collect", "-n", 2, "--program", PROGRAMS / "serialized_threads.py",
                    "--out", out, "--recorder", recorder)
    assert res.returncode == 0, res.stderr
    assert _program_lines(res.stdout) == \
        _untraced("serialized_threads.py").splitlines() == ["both ranks got their peer's message: True"]
    m = json.loads((out / "manifest.json").read_text())
    assert m["complete"] and "concurrent_mpi" not in m and m["untraced_calls"] == {}
    assert _rows(out, 0) == [("Barrier", -1, -1), ("Send", 1, 3), ("Probe", 1, 4),
                             ("Recv", 1, 4), ("Allreduce", -1, -1)]
    assert _rows(out, 1) == [("Barrier", -1, -1), ("Probe", 0, 3), ("Recv", 0, 3),
                             ("Send", 0, 4), ("Allreduce", -1, -1)]
    check = hindsight("trace", "check", out)
    assert check.returncode == 0 and check.stdout.strip() == f"{out}: ok", check.stdout
    replay = hindsight("replay", out, timeout=120)
    assert replay.returncode == 0 and "predicted" in replay.stdout, replay.stderr


def _stage(tmp_path, rows: list[tuple[str, int, int]]):
    """A rank's staged raw records: (op, t_start, t_end) each, clock readings from epoch 1000."""
    stage = tmp_path / "stage"
    stage.mkdir()
    (stage / tf.RAW_NAMES_FILE).write_text('["rank", 0, "r", 512]\n["epoch", 1000]\n'
                                           '["region", 0, "phase"]\n')
    raw = b"".join(tf.RAW_RECORD.pack(tf.OP_CODE[op], 0 if op == "region" else -1, t0, -1, -1,
                                      -1, 0, 0, -1, -1, t1) for op, t0, t1 in rows)
    (stage / tf.RAW_FILE).write_bytes(raw)
    return stage


def test_the_sealer_ends_a_ranks_records_where_its_calls_first_overlap(tmp_path):
    """Rows of one call (same times) and regions around calls are no overlap; a call that
    starts before one recorded earlier ended is: the rank file keeps the rows before it, and
    its metadata names the call that began later and the one in progress."""
    rows = [("Barrier", 1100, 1200), ("Sendrecv_send", 1300, 1400),
            ("Sendrecv_recv", 1300, 1400), ("region", 1050, 1450), ("Send", 1500, 1600),
            ("Recv", 1450, 1900), ("Barrier", 2000, 2100)]
    stage = _stage(tmp_path, rows)
    records = tf.raw_records(stage / tf.RAW_FILE)
    assert tf.first_overlap(records[:5]) is None
    assert tf.first_overlap(records) == (5, 4)
    out = tmp_path / "rank-00000.parquet"
    tf.write_staged(stage, 0, str(out), {"run_id": "r", "rank": 0, "status": "complete"})
    meta = json.loads(pq.read_schema(out).metadata[tf.METADATA_KEY])
    assert meta["status"] == tf.CONCURRENT_STATUS and meta["events"] == 5
    assert meta["concurrent_mpi"] == ["Send", "Recv"]
    assert meta["max_t_end_ns"] == 600
    table = pq.read_table(out)
    assert table.column("op").to_pylist() == [r[0] for r in rows[:5]]
    # what the PMPI library found as it happened (op codes) wins over the records, in names
    out2 = tmp_path / "lib.parquet"
    tf.write_staged(stage, 0, str(out2), {"run_id": "r", "rank": 0, "status": "complete",
                                          "concurrent_mpi": [tf.OP_CODE["Bcast"], 0]})
    meta = json.loads(pq.read_schema(out2).metadata[tf.METADATA_KEY])
    assert meta["concurrent_mpi"] == ["Bcast", "an MPI call"]


@pytest.mark.parametrize("recorder", RECORDERS)
def test_an_mpi4py_futures_pool_runs_and_is_not_taken_for_two_threads(tmp_path, recorder):
    """futures_pool.py: the pool's manager thread calls MPI while the main thread waits, then
    the main thread calls it again: one thread at a time. The run completes with its untraced
    output under both recorders (the workers, started by MPI_Comm_spawn, run untraced: the PMPI
    library no longer refuses the MPI_THREAD_MULTIPLE they ask for, which left the job
    hanging), and no rank is said to have called MPI from two threads at once. The Spawn of
    the pool's workers is counted by both recorders."""
    out = tmp_path / "t"
    prog = PROGRAMS / "futures_pool.py"
    res = hindsight("collect", "-n", 1, "--program", prog, "--out", out, "--recorder", recorder,
                    timeout=120)
    assert res.returncode == 0, res.stderr
    untraced = subprocess.run([MPIEXEC, "-n", "1", sys.executable, str(prog)],
                              capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert _program_lines(res.stdout) == untraced.stdout.splitlines() == \
        ["[0, 1, 4, 9, 16, 25]", "done"]
    m = json.loads((out / "manifest.json").read_text())
    assert m["complete"] and "concurrent_mpi" not in m
    assert _rows(out, 0)[-1] == ("Barrier", -1, -1)
    # the workers' start is counted (COMM_SELF.Spawn under the Python tracer): the trace says
    # its traffic is incomplete, and nothing else: the task sends the pool frees
    # (MPI.Request.Free) are Request_free rows under the PMPI library, not sends never completed
    assert m["untraced_calls"] == {"Spawn": 1}
    check = hindsight("trace", "check", out)
    assert check.stdout.strip().splitlines() == [
        f"{out / tf.MANIFEST_NAME}: traffic incomplete: 1 call (Spawn 1) not traced; replay "
        "leaves them out (docs/trace-format.md, \"What is not traced\")"]
    ops = [op for op, _, _ in _rows(out, 0)]
    if recorder == "pmpi":      # (the Python tracer does not trace the pool's intercommunicator)
        assert ops.count("Request_free") == 6


def test_several_ranks_with_two_threads_are_each_named():
    from hindsight.trace.core import concurrent_text

    assert concurrent_text({"concurrent_mpi": {"1": ["Recv", "Barrier"],
                                               "0": ["Send", "Allreduce"]}}) == (
        "ranks 0, 1 each called MPI from two threads at once (rank 0: Send began while Allreduce "
        "was in progress in another thread; rank 1: Recv began while Barrier was in progress in "
        "another thread)")
