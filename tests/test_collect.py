"""Collection spine: real mpiexec runs, real Parquet files, exact event counts and columns."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter

import numpy as np
import pyarrow.parquet as pq
import pytest

from hindsight import trace as tf
from tests.conftest import PROGRAMS, ROOT, hindsight


@pytest.fixture(scope="module")
def ring_trace(tmp_path_factory):
    out = tmp_path_factory.mktemp("ring") / "trace"
    res = hindsight("collect", "-n", 3, "--program", ROOT / "hindsight/examples/ring.py",
                    "--out", out, "--", "--rounds", 7, "--bytes", 1000)
    assert res.returncode == 0, res.stderr
    return out


@pytest.fixture(scope="module")
def all_ops_trace(tmp_path_factory):
    out = tmp_path_factory.mktemp("allops") / "trace"
    res = hindsight("collect", "-n", 4, "--program", PROGRAMS / "p2p_all.py", "--out", out)
    assert res.returncode == 0, res.stderr
    return out


def test_ring_has_exact_event_counts(ring_trace):
    trace = tf.read_trace(ring_trace)
    assert trace.complete
    df = trace.to_pandas()
    for rank in range(3):
        ops = Counter(df[df["rank"] == rank]["op"].astype(str))
        assert ops == {"Sendrecv_send": 7, "Sendrecv_recv": 7, "Allreduce": 7}
    sends = df[df["op"] == "Sendrecv_send"]
    assert (sends["nbytes"] == 1000).all()
    assert ((sends["peer"] - sends["rank"]) % 3 == 1).all()
    recvs = df[df["op"] == "Sendrecv_recv"]
    assert ((recvs["rank"] - recvs["peer"]) % 3 == 1).all()
    assert (recvs["tag"].values == np.tile(np.arange(7), 3)).all()


def test_files_layout_and_dataset(ring_trace):
    import pyarrow.dataset as ds

    names = sorted(p.name for p in ring_trace.iterdir())
    assert names == ["manifest.json", "rank-00000.parquet", "rank-00001.parquet",
                     "rank-00002.parquet"]
    # The whole directory reads as one pyarrow dataset.
    assert ds.dataset(ring_trace, format="parquet", exclude_invalid_files=True).count_rows() == 63
    assert tf.dataset(ring_trace).count_rows() == 63
    schema = pq.read_schema(ring_trace / "rank-00001.parquet")
    assert schema.field("op").type == tf.SCHEMA.field("op").type
    for name in tf.INT_COLUMNS:
        assert schema.field(name).type == tf.SCHEMA.field(name).type, name


def test_manifest_records_the_run(ring_trace):
    m = json.loads((ring_trace / "manifest.json").read_text())
    assert m["ranks"] == 3 and m["complete"] is True
    assert m["rank_status"] == ["complete"] * 3
    assert m["events"] == [21, 21, 21]
    assert m["mpi_library"].startswith("MPICH")
    assert sum(m["ranks_per_host"].values()) == 3
    assert m["oversubscribed"] == (3 > m["cores"])
    if m["oversubscribed"]:
        assert m["transport"].get("MPIR_CVAR_CH4_PROGRESS_THROTTLE") == "1"
    assert m["clock"]["start_offset_ns"] == [0, 0, 0]
    assert m["makespan_ns"] > 0
    meta = tf.file_metadata(ring_trace / "rank-00002.parquet")
    assert meta["run_id"] == m["run_id"] and meta["rank"] == 2 and meta["status"] == "complete"


def test_timestamps_are_ordered_on_one_clock(ring_trace):
    df = tf.read_trace(ring_trace).to_pandas()
    assert (df["t_end"] >= df["t_start"]).all() and (df["t_start"] >= 0).all()
    for _, g in df.groupby("rank"):
        assert (np.diff(g["seq"].values) == 1).all()
        assert (np.diff(g["t_start"].values) >= 0).all()
    # An Allreduce cannot finish on any rank before every rank has entered it.
    ar = df[df["op"] == "Allreduce"].sort_values(["rank", "seq"])
    k = ar.groupby("rank").cumcount()
    entered = ar.groupby(k)["t_start"].max()
    finished = ar.groupby(k)["t_end"].min()
    assert (finished >= entered).all()


def test_every_column_round_trips(all_ops_trace):
    df = tf.read_trace(all_ops_trace).to_pandas()
    r0 = df[df["rank"] == 0].reset_index(drop=True)
    assert list(r0["op"].astype(str)) == [
        "Send", "Recv", "Irecv", "Isend", "Waitall", "Waitall", "Send", "Irecv", "Wait",
        "Sendrecv_send", "Sendrecv_recv", "Bcast", "Reduce", "Allreduce", "Barrier",
        "Comm_split", "Bcast", "Barrier"]
    row = lambda op, i=0: r0[r0["op"] == op].iloc[i]  # noqa: E731
    assert (row("Send")["peer"], row("Send")["tag"], row("Send")["nbytes"]) == (1, 11, 400)
    # ANY_SOURCE receive records the real source.
    assert (row("Recv")["peer"], row("Recv")["tag"]) == (3, 11)
    # Irecv posted with ANY_SOURCE; its Waitall row carries the actual source and size.
    irecv = row("Irecv")
    assert irecv["peer"] == tf.ANY_SOURCE and irecv["request"] >= 0
    done = r0[(r0["op"] == "Waitall") & (r0["request"] == irecv["request"])].iloc[0]
    assert (done["peer"], done["tag"], done["nbytes"]) == (3, 22, 40)
    isend = row("Isend")
    assert (isend["peer"], isend["nbytes"]) == (1, 40)
    assert ((r0["op"] == "Waitall") & (r0["request"] == isend["request"])).sum() == 1
    # Pickle API: the wire size of the pickled object.
    from mpi4py import MPI
    assert row("Send", 1)["nbytes"] == len(MPI.pickle.dumps({"x": list(range(10))}))
    assert row("Wait")["nbytes"] == len(MPI.pickle.dumps("pong"))
    # Roots are world ranks, also on a derived communicator (comm-local root 1 of {0, 2} is 2).
    assert row("Bcast")["root"] == 1 and row("Reduce")["root"] == 2
    split = row("Comm_split")
    sub_bcast = row("Bcast", 1)
    assert sub_bcast["comm"] == split["peer"] and sub_bcast["root"] == 2
    comms = json.loads((all_ops_trace / "manifest.json").read_text())["communicators"]
    assert comms[str(split["peer"])] == [0, 2]
    r3 = df[df["rank"] == 3]
    sub3 = r3[r3["op"] == "Comm_split"].iloc[0]["peer"]
    assert comms[str(sub3)] == [1, 3]
    assert (r3[(r3["op"] == "Bcast") & (r3["comm"] == sub3)]["root"] == 3).all()
    # rank 1's pickle-API recv is two rows: the matched probe and the receive
    r1 = df[df["rank"] == 1].reset_index(drop=True)
    pr = r1.index[r1["op"] == "Probe"][0]
    assert r1.loc[pr + 1, "op"] == "Recv"
    assert (r1.loc[pr, "peer"], r1.loc[pr, "tag"], r1.loc[pr, "nbytes"]) == \
        (0, 33, row("Send", 1)["nbytes"]) == \
        (r1.loc[pr + 1, "peer"], r1.loc[pr + 1, "tag"], r1.loc[pr + 1, "nbytes"])
    assert df.groupby("rank").size().to_dict() == {0: 18, 1: 19, 2: 15, 3: 15}


def test_trace_check_passes_a_good_trace(all_ops_trace):
    res = hindsight("trace", "check", all_ops_trace)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ok" in res.stdout


def test_trace_info_json(all_ops_trace):
    res = hindsight("trace", "info", all_ops_trace, "--json")
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout)
    assert info["ranks"] == 4 and info["events"] == 67 and info["complete"] is True
    assert info["mpi_library"].startswith("MPICH")
    assert info["events_per_op"]["Bcast"] == 8


def _rewrite_without(src_file, dst_file, drop_row: int) -> None:
    """Copy a rank file, keeping its metadata, without one row."""
    table = pq.read_table(src_file)
    keep = np.ones(table.num_rows, bool)
    keep[drop_row] = False
    pq.write_table(table.filter(keep), dst_file)


def test_check_catches_a_removed_send(all_ops_trace, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(all_ops_trace, bad)
    df = tf.read_trace(bad).to_pandas()
    r2 = df[df["rank"] == 2].reset_index(drop=True)
    send_row = int(r2.index[r2["op"] == "Send"][0])      # rank 2 -> 3, tag 11
    _rewrite_without(all_ops_trace / "rank-00002.parquet", bad / "rank-00002.parquet", send_row)
    res = hindsight("trace", "check", bad)
    assert res.returncode == 1
    assert "Traceback" not in res.stdout + res.stderr
    assert "rank-00002.parquet" in res.stdout          # the seq gap names the file
    assert "no matching send" in res.stdout.lower() or "unmatched" in res.stdout.lower()
    assert "tag 11" in res.stdout


def test_check_catches_an_isend_never_completed(all_ops_trace, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(all_ops_trace, bad)
    df = tf.read_trace(bad).to_pandas()
    r1 = df[df["rank"] == 1].reset_index(drop=True)
    wait_row = int(r1.index[r1["op"] == "Wait"][0])        # completes rank 1's isend("pong")
    _rewrite_without(all_ops_trace / "rank-00001.parquet", bad / "rank-00001.parquet", wait_row)
    res = hindsight("trace", "check", bad)
    assert res.returncode == 1
    assert f"Isend request {r1.loc[wait_row, 'request']} is never completed" in res.stdout


def test_regions_with_explicit_api(tmp_path):
    import subprocess
    import sys

    from hindsight.collect import find_mpiexec, launch_env

    out = tmp_path / "regions"
    env = launch_env(2)
    res = subprocess.run([find_mpiexec(), "-n", "2", sys.executable,
                          str(PROGRAMS / "regions.py"), str(out)], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    trace = tf.read_trace(out)
    assert trace.complete and trace.manifest["result_verified"] is True
    assert trace.manifest["app"] == "regions-test" and trace.manifest["args"] == {"n": 1000}
    df = trace.to_pandas()
    r0 = df[df["rank"] == 0].reset_index(drop=True)
    assert list(r0["op"].astype(str)) == ["Barrier", "region", "region", "Allreduce", "region"]
    assert list(r0["region"].astype(str)) == ["merge", "merge", "task", "combine", "combine"]
    task = r0.iloc[2]
    assert task["nbytes"] == 50000 and task["cpu_ns"] > 0
    assert task["t_start"] <= r0.iloc[0]["t_start"] and task["t_end"] >= r0.iloc[1]["t_end"]
    assert r0.iloc[4]["nbytes"] == 7
    assert (r0[r0["op"] != "region"]["cpu_ns"] == -1).all()     # default: regions only


def test_cpu_sampling_all(tmp_path):
    out = tmp_path / "cpu"
    res = hindsight("collect", "-n", 2, "--program", ROOT / "hindsight/examples/ring.py",
                    "--out", out, "--cpu-sampling", "all", "--", "--rounds", 3)
    assert res.returncode == 0, res.stderr
    trace = tf.read_trace(out)
    df = trace.to_pandas()
    assert trace.manifest["cpu_sampling"] == "all"
    first_rows = df[df["op"].isin(["Sendrecv_send", "Allreduce"])]
    assert (first_rows["cpu_ns"] >= 0).all()


def test_clock_alignment_across_emulated_hosts(tmp_path):
    """Ranks that claim other hosts (HINDSIGHT_HOSTNAME) get Cristian offsets per host; the
    clock is really shared here, so the offsets must come out within their uncertainty of 0."""
    import subprocess
    import sys

    from hindsight.collect import find_mpiexec, launch_env

    out = tmp_path / "hosts"
    ring = str(ROOT / "hindsight/examples/ring.py")
    run = [sys.executable, "-m", "instrument.run", "--trace", str(out), ring, "--rounds", "3"]
    cmd = [find_mpiexec(), "-n", "1", "-env", "HINDSIGHT_HOSTNAME", "hostA", *run, ":",
           "-n", "2", "-env", "HINDSIGHT_HOSTNAME", "hostB", *run]
    res = subprocess.run(cmd, env=launch_env(2), cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    m = json.loads((out / "manifest.json").read_text())
    assert m["hosts"] == {"hostA": [0], "hostB": [1, 2]}
    clock = m["clock"]
    assert "Cristian" in clock["method"]
    start, err = clock["start_offset_ns"], clock["start_uncertainty_ns"]
    assert start[0] == 0 and err[0] == 0
    assert start[1] == start[2] and err[1] > 0           # one clock per host
    assert abs(start[1]) <= err[1] + 1000
    assert len(clock["end_offset_ns"]) == 3 and len(clock["drift_ppm"]) == 3
    assert hindsight("trace", "check", out).returncode == 0


def test_every_completion_family_records_one_row_per_request(tmp_path):
    out = tmp_path / "req"
    res = hindsight("collect", "-n", 2, "--program", PROGRAMS / "requests.py", "--out", out)
    assert res.returncode == 0, res.stderr
    df = tf.read_trace(out).to_pandas()
    for rank in (0, 1):
        mine = df[df["rank"] == rank]
        ops = Counter(mine["op"].astype(str))
        assert ops["Irecv"] == 6 and ops["Isend"] == 4
        assert (ops["Wait"], ops["Test"], ops["Waitany"], ops["Waitsome"], ops["Testall"]) == \
            (1, 1, 4, 2, 2)
        posted = set(mine[mine["op"].isin(["Irecv", "Isend"])]["request"])
        done = mine[mine["op"].isin(list(tf.COMPLETION_OPS))]["request"]
        assert sorted(done) == sorted(posted)              # each request completed once
        recv_done = mine[mine["request"].isin(mine[mine["op"] == "Irecv"]["request"])
                         & mine["op"].isin(list(tf.COMPLETION_OPS))]
        assert (recv_done["peer"] == 1 - rank).all()
    assert hindsight("trace", "check", out).returncode == 0


def test_unpickling_is_the_receivers_compute_not_the_call(tmp_path):
    """A pickle-API recv is its MPI calls: a Probe row (waits for the message) and a Recv row (the
    receive of the pickled bytes); the allocation lies between them and the unpickling after
    (the sender's pickling likewise precedes its send row), so replay keeps both as measured
    compute instead of charging them to the network. A pickle-API sendrecv likewise: an
    Isend, the recv's two rows, the unpickling, the Wait."""
    import subprocess
    import sys

    from hindsight.collect import find_mpiexec, launch_env

    out = tmp_path / "slow"
    res = subprocess.run([find_mpiexec(), "-n", "2", sys.executable,
                          str(PROGRAMS / "slow_unpickle.py"), str(out)], env=launch_env(2),
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert tf.read_manifest(out)["result_verified"] is True
    df = tf.read_trace(out).to_pandas()
    r1 = df[df["rank"] == 1].reset_index(drop=True)
    mpi = r1[r1["op"] != "region"].reset_index(drop=True)
    # recv: Probe, Recv; sendrecv: Isend, Probe, Recv, Wait (mpi4py's own calls for it)
    assert list(mpi["op"].astype(str))[:6] == ["Probe", "Recv", "Isend", "Probe", "Recv", "Wait"]
    probe, recv, isend = mpi.iloc[0], mpi.iloc[1], mpi.iloc[2]
    assert probe["peer"] == recv["peer"] == 0 and probe["tag"] == recv["tag"] == 1
    assert probe["nbytes"] == recv["nbytes"] > 1000
    assert probe["t_end"] <= recv["t_start"]
    assert (recv["t_end"] - recv["t_start"]) < 40e6
    # the 60 ms of unpickling lie between the Recv row and the next call
    assert isend["t_start"] - recv["t_end"] >= 55e6
    # rank 0 waits in its sendrecv's probe while rank 1 unpickles; rank 1's own sendrecv finds
    # rank 0's message there: its Recv row ends before its 60 ms of unpickling, its Wait after
    r0 = df[df["rank"] == 0].reset_index(drop=True)
    assert r0[r0["op"] == "Probe"].iloc[0]["t_end"] > isend["t_start"]
    recv2, wait = mpi.iloc[4], mpi.iloc[5]
    assert (recv2["t_end"] - recv2["t_start"]) < 40e6
    assert wait["t_start"] - recv2["t_end"] >= 55e6 and wait["request"] == isend["request"]
    # the probe is replayed as waiting for that message, the receive completes it
    import replay
    from replay import kernel as K
    prep = replay.prepare(out)
    rows = prep.rows
    i_probe = int(np.flatnonzero((rows["rank"] == 1) & (rows["op"] == tf.OP_CODE["Probe"]))[0])
    assert rows["kind"][i_probe] == K.PROBE
    assert rows["msg"][i_probe] == rows["msg"][i_probe + 1] >= 0
    assert replay.run(prep, "measured").rel_error_pct == pytest.approx(0.0, abs=0.01)


# -- untraced runs (`collect --untraced`) --------------------------------------------------------


def _untraced_manifest(d, makespan_ns=123_456_789):
    """What `collect --untraced` leaves: a manifest with the wall time, no rank files."""
    d.mkdir(parents=True, exist_ok=True)
    tf.write_manifest(d, {"format_version": tf.FORMAT_VERSION, "run_id": "abc", "ranks": 2,
                          "traced": False, "complete": True, "makespan_ns": makespan_ns,
                          "rank_status": ["complete", "complete"], "app": "ring.py"})
    return d


@pytest.mark.parametrize("cmd", [("trace", "check"), ("replay",),
                                 ("export", "--format", "perfetto")])
def test_readers_refuse_an_untraced_run_in_one_line(tmp_path, cmd):
    d = _untraced_manifest(tmp_path / "u")
    args = [*cmd[:2], d, *cmd[2:]] if cmd[0] == "trace" else [cmd[0], d, *cmd[1:]]
    res = hindsight(*args)
    assert res.returncode == 1, res.stdout + res.stderr
    assert res.stderr.strip() == \
        f"Error: {d}: an untraced run (wall time only: 0.1235 s), which has no events"
    assert "Traceback" not in res.stderr


def test_trace_info_shows_an_untraced_run(tmp_path):
    """What an untraced run measured is its manifest: trace info shows it (exit 0), --json
    gives the manifest, --noise has nothing to analyse (one line, exit 1)."""
    d = _untraced_manifest(tmp_path / "u")
    res = hindsight("trace", "info", d)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == f"untraced    {d}: an untraced run (collect --untraced), no events"
    assert "wall time   123.5 ms  (start barrier to the program's end)" in lines
    assert json.loads(hindsight("trace", "info", d, "--json").stdout)["traced"] is False
    res = hindsight("trace", "info", d, "--noise")
    assert res.returncode == 1 and res.stderr.strip().endswith("it has no noise to analyse")


def test_collect_untraced_writes_the_wall_time_only(tmp_path):
    """A real untraced run: same launch, a manifest saying traced = false with a positive
    makespan, no rank files; an earlier trace in the folder is replaced with --force only."""
    out = tmp_path / "u"
    res = hindsight("collect", "-n", 2, "--program", ROOT / "hindsight/examples/ring.py",
                    "--out", out, "--", "--rounds", 5, "--bytes", 100)
    assert res.returncode == 0, res.stderr
    traced = tf.read_manifest(out)
    assert traced["traced"] is True and list(out.glob("rank-*.parquet"))
    again = ["collect", "-n", 2, "--untraced", "--program", ROOT / "hindsight/examples/ring.py",
             "--out", out, "--", "--rounds", 5, "--bytes", 100]
    # a run is not replaced unasked: one line, the trace as it was
    res = hindsight(*again)
    assert res.returncode == 2 and res.stderr == (f"Error: --out {out}: holds a run already; "
                                                  "--force replaces it\n")
    assert tf.read_manifest(out)["run_id"] == traced["run_id"]
    res = hindsight(again[0], "--force", *again[1:])
    assert res.returncode == 0, res.stderr
    m = json.loads((out / "manifest.json").read_text())
    assert m["traced"] is False and m["complete"] is True
    assert m["makespan_ns"] > 0 and m["ranks"] == 2 and m["run_id"] != traced["run_id"]
    assert m["rank_status"] == ["complete", "complete"] and m["launcher_exit_code"] == 0
    assert m["network"]["transport"] == "shm"
    assert not list(out.glob("rank-*.parquet")) and not (out / tf.STAGING_DIR).exists()
    assert res.stdout.strip().splitlines()[-1] == (
        f"untraced run {out}: 2 ranks, complete, wall time {m['makespan_ns'] / 1e9:.4f} s")
    res = hindsight("replay", out)
    assert res.returncode == 1
    assert res.stderr.strip() == (f"Error: {out}: an untraced run (wall time only: "
                                  f"{m['makespan_ns'] / 1e9:.4f} s), which has no events")


@pytest.mark.parametrize("untraced", [False, True])
def test_the_program_sees_the_users_environment(tmp_path, untraced):
    """What hindsight's own process sets for itself (one OpenBLAS thread, numpy without huge
    pages, mimalloc's large pages) does not reach the program, traced or not; what the user
    set does."""
    import hindsight as hs_pkg
    from hindsight import cli  # noqa: F401 (sets its own variables, as a command does)

    prog = tmp_path / "env.py"
    prog.write_text("import json, os, sys\nfrom mpi4py import MPI\n"
                    "if MPI.COMM_WORLD.rank == 0:\n"
                    "    open(sys.argv[1], 'w').write(json.dumps(dict(os.environ)))\n")
    added = sorted(hs_pkg.ENV_ADDED)
    for k in hs_pkg.OWN_SETTINGS:
        assert k in added or k in os.environ
    env = {k: v for k, v in os.environ.items() if k not in added}
    seen = tmp_path / "seen.json"
    res = subprocess.run([sys.executable, "-m", "hindsight.cli", "collect", "-n", "2",
                          *(["--untraced"] if untraced else []), "--program", str(prog),
                          "--out", str(tmp_path / "t"), "--", str(seen)],
                         capture_output=True, text=True, env={**env, "HS_USER_VAR": "kept"},
                         timeout=180, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    got = json.loads(seen.read_text())
    assert got["HS_USER_VAR"] == "kept"
    for k in added:
        assert k not in got, k


def test_collect_untraced_crash_is_an_incomplete_manifest(tmp_path):
    """A rank that dies: the untraced manifest says incomplete, with mpiexec's exit code."""
    out = tmp_path / "u"
    res = hindsight("collect", "-n", 2, "--untraced", "--program", PROGRAMS / "crash.py",
                    "--out", out, "--timeout", 60)
    assert res.returncode == 1
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("Error: ")
    assert "crash.py: run failed (mpiexec" in res.stderr
    m = json.loads((out / "manifest.json").read_text())
    assert m["traced"] is False and m["complete"] is False
    assert m["launcher_exit_code"] != 0 and "complete" not in set(m["rank_status"][1:])


def test_untraced_run_that_wrote_nothing_is_described_as_failed(tmp_path):
    """Ranks that died before rank 0 wrote its manifest: collect writes one saying so."""
    from hindsight.collect import _finish_untraced

    out = tmp_path / "u"
    m = _finish_untraced(out, 137, 2, {"transport": "shm"}, None, None, "prog.py", ["-x"])
    assert m == tf.read_manifest(out)
    assert m["traced"] is False and m["complete"] is False and m["makespan_ns"] is None
    assert m["rank_status"] == ["missing", "missing"] and m["launcher_exit_code"] == 137
    assert m["ranks"] == 2 and m["program"].endswith("prog.py")
    res = hindsight("trace", "info", out)
    assert res.returncode == 0 and ("complete    NO  (ranks: ['missing', 'missing'], mpiexec "
                                    "exit code 137)") in res.stdout.splitlines(), res.stdout
    assert "wall time" not in res.stdout


SLEEPER = """
import time
from mpi4py import MPI
MPI.COMM_WORLD.Barrier()
print("started", MPI.COMM_WORLD.rank, flush=True)
time.sleep(120)
MPI.COMM_WORLD.Barrier()
"""


def _job_processes(program) -> list[int]:
    """Processes still running ``program`` (ranks left behind)."""
    from pathlib import Path

    out = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and str(program).encode() in (d / "cmdline").read_bytes():
                out.append(int(d.name))
        except OSError:
            pass
    return out


def test_mpiexecs_report_is_left_out_only_once_collect_stops_the_job():
    """The relay of the job's stdout: hydra's blank line, '='-ruled box and the three lines
    after it go once collect has begun stopping the job; the program's own lines, blank ones
    included, always come through, and before that the report does too."""
    import io
    import threading

    from hindsight.collect import _relay

    rule = b"=" * 83 + b"\n"
    report = [b"\n", rule, b"=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n",
              b"=   EXIT CODE: 15\n", rule,
              b"YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Terminated (signal 15)\n",
              b"This typically refers to a problem with your application.\n",
              b"Please see the FAQ page for debugging suggestions\n"]
    job = [b"step 1\n", b"\n", b"= not a rule\n", *report, b"\n", b"last\n"]

    def relayed(stopping: bool) -> str:
        sink, event = io.StringIO(), threading.Event()
        if stopping:
            event.set()
        _relay(io.BytesIO(b"".join(job)), sink, event)
        return sink.getvalue()

    assert relayed(False) == b"".join(job).decode()
    assert relayed(True) == "step 1\n\n= not a rule\n\nlast\n"


def test_ctrl_c_stops_the_run_exit_130_without_launcher_chatter(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    prog = tmp_path / "sleeper.py"
    prog.write_text(SLEEPER)
    out = tmp_path / "t"
    proc = subprocess.Popen(
        [sys.executable, "-m", "hindsight.cli", "collect", "-n", "2", "--program", str(prog),
         "--out", str(out)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while not list((out / tf.STAGING_DIR).glob("rank-*")) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)                      # both ranks in their sleep
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=90)
    assert proc.returncode == 130, stderr
    assert stderr == f"Error: {prog}: interrupted; {out} is incomplete\n"
    assert "Ctrl-C" not in stdout and "mpiexec@" not in stdout
    assert "started" in stdout                      # the program's own output still comes through
    m = tf.read_manifest(out)
    assert m["complete"] is False and m["launcher_exit_code"] == 130
    assert _job_processes(prog) == []


def test_timeout_is_named_and_recorded(tmp_path):
    prog = tmp_path / "sleeper.py"
    prog.write_text(SLEEPER)
    out = tmp_path / "t"
    res = hindsight("collect", "-n", 2, "--program", prog, "--out", out, "--timeout", 3)
    assert res.returncode == 1
    assert res.stderr == f"Error: {prog}: timed out after 3 s; {out} is incomplete\n"
    m = tf.read_manifest(out)
    assert m["timed_out_after_s"] == 3 and m["complete"] is False
    # both ranks were asked where they were: in the program's sleep, not in an MPI call
    sleep_line = SLEEPER.splitlines().index("time.sleep(120)") + 1
    at = {"call": None, "where": f"sleeper.py:{sleep_line}"}
    assert m["stopped_in"] == {"0": at, "1": at}
    assert f"ranks 0-1 stopped outside any traced MPI call at sleeper.py:{sleep_line}" \
        in res.stdout
    assert _job_processes(prog) == []
    res = hindsight("collect", "-n", 2, "--untraced", "--program", prog, "--out",
                    tmp_path / "u", "--timeout", 2)
    assert res.returncode == 1 and "timed out after 2 s" in res.stderr
    assert tf.read_manifest(tmp_path / "u")["timed_out_after_s"] == 2


def test_timeout_records_the_call_each_rank_was_blocked_in(tmp_path):
    """A deadlock (each rank receives from the other first) stopped by --timeout: the manifest,
    collect's output and `trace info` name the call and the program's line of each rank."""
    prog = PROGRAMS / "deadlock.py"
    src = prog.read_text().splitlines()
    line = {r: src.index(f"    comm.Recv(buf, source={1 - r}, tag=7)") + 1 for r in (0, 1)}
    out = tmp_path / "t"
    res = hindsight("collect", "-n", 2, "--program", prog, "--out", out, "--timeout", 5)
    assert res.returncode == 1
    assert res.stderr == f"Error: {prog}: timed out after 5 s; {out} is incomplete\n"
    m = tf.read_manifest(out)
    assert m["stopped_in"] == {str(r): {"call": "Recv", "where": f"deadlock.py:{line[r]}"}
                               for r in (0, 1)}
    for r in (0, 1):
        assert f"  rank {r} stopped in Recv at deadlock.py:{line[r]}\n" in res.stdout
    info = hindsight("trace", "info", out)
    assert "timed out   after 5 s" in info.stdout
    assert f"rank 1 stopped in Recv at deadlock.py:{line[1]}" in info.stdout
    assert _job_processes(prog) == []


def test_stopped_in_lines_group_ranks_at_one_place():
    from instrument.stopped import describe

    recv = {"call": "Recv", "where": "p.py:3"}
    stopped = {"0": recv, "1": {"call": "Allreduce", "where": "p.py:9"}, "2": recv, "3": recv,
               "5": recv, "4": {"call": None, "where": "p.py:7"}, "6": None,
               "7": {"call": "finish", "where": None}}
    assert describe(stopped) == ["ranks 0,2-3,5 stopped in Recv at p.py:3",
                                 "rank 1 stopped in Allreduce at p.py:9",
                                 "rank 4 stopped outside any traced MPI call at p.py:7",
                                 "rank 6 did not say where it was",
                                 "rank 7 stopped in finish"]
    many = {str(r): {"call": "Recv", "where": f"p.py:{r}"} for r in range(12)}
    lines = describe(many, most=8)
    assert len(lines) == 9 and lines[-1] == "... and 4 more places (manifest stopped_in)"


def test_a_python_rank_finalizing_at_its_exit_is_said_so(tmp_path):
    """A Python program's rank that returned or called sys.exit is in MPI_Finalize, which
    mpi4py calls at the interpreter's exit: the library's caller is a line of Python's own C
    sources (it read "stopped in Finalize at .../Python/pylifecycle.c:2930"), so the place is
    the program's exit; a compiled program's keeps its caller's line."""
    from hindsight.trace import core as fc
    from instrument.stopped import read

    (tmp_path / fc.STOP_FILE).write_text("pid 7\npmpi op -1 caller 0x1000\n")
    at = read(tmp_path, "/x/prog.py")
    assert at == {"call": "Finalize",
                  "where": "the program's exit (it had returned or called sys.exit)"}
    assert read(tmp_path, sys.executable)["where"] != at["where"]      # (an ELF program)


def test_trace_info_counts_no_bytes_sent_to_proc_null(tmp_path):
    """A send to MPI_PROC_NULL (peer -1; the Python tracer records its buffer's size) crosses
    no network: trace info's p2p bytes are those of the messages to a rank."""
    from hindsight.info import trace_info
    from hindsight.trace.write import EventRows, write_trace

    ranks = []
    for r in range(2):
        rows = EventRows()
        rows.append("Send", 0, 10, peer=-1, tag=1, nbytes=800)
        rows.append("Send" if r == 0 else "Recv", 20, 30, peer=1 - r, tag=2, nbytes=64)
        ranks.append(rows.events(r))
    write_trace(tmp_path / "t", ranks)
    assert trace_info(tmp_path / "t")["bytes_sent"] == 64


def test_a_binary_that_never_initialises_mpi_is_named_so(tmp_path):
    prog = tmp_path / "notmpi"
    shutil.copy("/bin/true", prog)
    res = hindsight("collect", "--program", prog, "-n", 2, "--out", tmp_path / "t")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert res.stderr.strip().splitlines()[-1] == (
        f"Error: {prog}: no rank initialised MPI, so nothing was traced (is it an MPI program "
        "built with this MPICH's mpicc?)")
    # nothing staged is left behind: the next collect into the folder needs no --force
    assert not (tmp_path / "t" / tf.STAGING_DIR).exists()
    res = hindsight("collect", "--untraced", "--program", prog, "-n", 2, "--out", tmp_path / "u")
    assert res.returncode == 1 and res.stderr.strip().splitlines()[-1] == (
        f"Error: {prog}: no rank initialised MPI, so no wall time was measured (is it an MPI "
        "program built with this MPICH's mpicc?)")


@pytest.mark.parametrize("untraced", [False, True], ids=["traced", "untraced"])
@pytest.mark.parametrize("recorder", ["python", "pmpi"])
def test_a_killed_runs_manifest_says_its_hosts_and_mpi(tmp_path, recorder, untraced):
    # rank 1 dies of SIGKILL mid-run: no rank reaches MPI_Finalize, where the PMPI library's
    # ranks write their status (host, MPI library); what they said at start-up stands in
    out = tmp_path / "t"
    res = hindsight("collect", "--recorder", recorder, "-n", 2, "--program",
                    PROGRAMS / "crash.py", "--out", out, "--timeout", 60,
                    *(["--untraced"] if untraced else []))
    assert res.returncode != 0
    m = json.loads((out / "manifest.json").read_text())
    assert m["complete"] is False and m["launcher_exit_code"] not in (0, 124)
    assert m["ranks"] == 2
    host = os.environ.get("HINDSIGHT_HOSTNAME") or os.uname().nodename
    assert m["hosts"] == {host: [0, 1]} and m["ranks_per_host"] == {host: 2}
    assert re.fullmatch(r"\d+\.\d+", m["mpi_version"])
    assert m["mpi_library"] and "\n" not in m["mpi_library"]
