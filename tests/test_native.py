"""Compiled MPI programs traced through the PMPI library (instrument/native.py, instrument/pmpi/):
the program's output is unchanged, every call gives the rows the Python tracer writes for it,
the trace passes `hindsight trace check`, and replays (`measured` reproduces the makespan)."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest


from hindsight import trace as tf
from replay.units import fmt_time
from instrument import native
from replay import kernel as K
from tests.conftest import PROGRAMS, hindsight, model_notes

pytestmark = pytest.mark.skipif(native.find_mpicc() is None,
                                reason="no mpicc: compiled programs cannot be built here")


@pytest.fixture(scope="module")
def exe(tmp_path_factory):
    """Compile tests/programs/NAME.c on first use; returns the executable's path."""
    root = tmp_path_factory.mktemp("native")
    built: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in built:
            out = root / name
            subprocess.run([native.find_mpicc(), "-O2", "-o", str(out),
                            str(PROGRAMS / f"{name}.c")], check=True)
            built[name] = out
        return built[name]
    return get


def _traced(exe: Path, n: int, out: Path, args: list[str] = ()):
    done, manifest = native.launch(n, out, str(exe), list(args), timeout=120)
    assert done.returncode == 0, done.stderr
    return done, manifest


def _untraced_stdout(exe: Path, n: int, args: list[str] = ()) -> str:
    done = subprocess.run(native.command(n, str(exe), list(args)), capture_output=True,
                          text=True, timeout=120, check=True)
    return done.stdout


def _rows(out: Path):
    return tf.read_trace(out).to_pandas()


def _check_and_replay(out: Path, rel: float = 0.01, abs_ns: float = 0.0):
    """`trace check` says ok, `measured` reproduces the makespan (within `rel`, or `abs_ns`
    where that is more), `loggps` replays; returns the prepared trace."""
    res = hindsight("trace", "check", out)
    assert res.returncode == 0 and res.stdout.strip() == f"{out}: ok", res.stdout + res.stderr
    import replay

    prep = replay.prepare(out)
    measured = replay.run(prep, "measured")
    assert measured.makespan_ns == pytest.approx(prep.measured_makespan_ns, rel=rel, abs=abs_ns)
    assert replay.run(prep, "loggps").makespan_ns > 0
    return prep


def _counts(df, rank: int) -> Counter:
    return Counter(df[df["rank"] == rank]["op"].astype(str))


def test_op_codes_are_the_trace_formats():
    """The library's enum lists hindsight.trace.core.OPS in order, from OP_SEND = 1 ("region",
    code 0, is never a library row): a record's op code names the same call in both tracers."""
    body = re.search(r"enum \{(.*?)\};", native.SOURCE.read_text(), re.S).group(1)
    names = [x.split("=")[0].strip() for x in body.split(",") if x.strip()]
    assert body.split(",")[0].split("=")[1].strip() == "1"
    alias = {"Sendrecv_send": "OP_SR_SEND", "Sendrecv_recv": "OP_SR_RECV"}
    assert names == [alias.get(op, "OP_" + op.upper()) for op in tf.OPS[1:]]


def test_ring_rows_output_and_replay(exe, tmp_path):
    prog = exe("ring")
    done, m = _traced(prog, 4, tmp_path / "t", ["10"])
    assert sorted(done.stdout.splitlines()) == sorted(_untraced_stdout(prog, 4, ["10"])
                                                      .splitlines())
    assert m["complete"] and m["rank_status"] == ["complete"] * 4 and m["tracer"] == "pmpi"
    assert m["program_kind"] == "compiled"      # (its calls were made from C)
    assert m["events"] == [20] * 4 and m["wall_ns"] > 0
    df = _rows(tmp_path / "t")
    for r in range(4):
        assert _counts(df, r) == {"Send": 10, "Recv": 10}
        mine = df[df["rank"] == r]
        assert set(mine[mine["op"] == "Send"]["peer"]) == {(r + 1) % 4}
        assert set(mine[mine["op"] == "Recv"]["peer"]) == {(r + 3) % 4}
        assert set(mine["nbytes"]) == {256 * 8}
        assert (mine["t_end"] >= mine["t_start"]).all()
    _check_and_replay(tmp_path / "t")


def test_nonblocking_completions_one_row_per_request(exe, tmp_path):
    prog = exe("nonblocking")
    done, _ = _traced(prog, 3, tmp_path / "t")
    assert sorted(done.stdout.splitlines()) == sorted(_untraced_stdout(prog, 3).splitlines())
    df = _rows(tmp_path / "t")
    for r in range(3):
        counts = _counts(df, r)
        # the Test loop's unsuccessful polls, if it made any: one Poll row before its Test
        if counts.pop("Poll", 0):
            mine = df[df["rank"] == r].reset_index(drop=True)
            after = mine.index[mine["op"] == "Poll"] + 1
            assert list(mine.loc[after, "op"]) == ["Test"]
        assert counts == {"Irecv": 14, "Isend": 12, "Waitall": 20, "Wait": 1,
                                  "Waitany": 2, "Waitsome": 2, "Test": 1, "Send": 3,
                                  "Sendrecv_send": 1, "Sendrecv_recv": 1, "Probe": 1,
                                  "Recv": 1}
        mine = df[df["rank"] == r].reset_index(drop=True)
        posts = mine[mine["op"].isin(["Irecv", "Isend"])]
        assert list(posts["request"]) == list(range(26))        # request ids in post order
        done_ids = mine[mine["op"].isin(list(tf.COMPLETION_OPS))]["request"]
        assert sorted(done_ids) == list(range(26))              # each completed once
        any_post = mine[(mine["op"] == "Irecv") & (mine["peer"] == tf.ANY_SOURCE)]
        assert len(any_post) == 1 and any_post["tag"].iloc[0] == tf.ANY_TAG
        wait = mine[mine["op"] == "Wait"].iloc[0]       # completes it: the real source and size
        assert wait["request"] == any_post["request"].iloc[0]
        assert (wait["peer"], wait["tag"], wait["nbytes"]) == ((r + 2) % 3, 7, 40)
        waitall = mine[mine["op"] == "Waitall"].iloc[:4]
        assert list(waitall["peer"]) == [(r + 2) % 3, (r + 1) % 3, -1, -1]   # sends: -1
        assert list(waitall["nbytes"]) == [400, 200, -1, -1]
        assert waitall["t_start"].nunique() == 1
    _check_and_replay(tmp_path / "t")


def test_collectives_bytes_and_roots(exe, tmp_path):
    prog = exe("collectives")
    p = 4
    done, _ = _traced(prog, p, tmp_path / "t")
    assert sorted(done.stdout.splitlines()) == sorted(_untraced_stdout(prog, p).splitlines())
    df = _rows(tmp_path / "t")
    block = 8 * 8
    expected = {"Barrier": 0, "Bcast": block, "Reduce": block, "Allreduce": block,
                "Gather": block, "Gatherv": block, "Scatter": block, "Allgather": block,
                "Allgatherv": block, "Alltoall": block, "Alltoallv": block * p, "Scan": block,
                "Exscan": block, "Reduce_scatter": block * p, "Reduce_scatter_block": block}
    for r in range(p):
        mine = df[df["rank"] == r]
        # one-sided and neighbourhood collectives: collectives.c makes no window or topology
        others = {"Win_fence", "Win_free"} | tf.NEIGHBOR_OPS
        assert _counts(mine, r) == {**{op: 1 for op in tf.COLLECTIVE_OPS - others},
                                    "Allreduce": 2,
                                    "Waitall": len(tf.NONBLOCKING_COLLECTIVE_OPS - others)}
        got = dict(zip(mine["op"].astype(str), mine["nbytes"]))
        for op, n in expected.items():
            assert got[op] == n, op
            assert got["I" + op[0].lower() + op[1:]] == n, op      # sized as the blocking one
        posts = mine[mine["op"].isin(list(tf.NONBLOCKING_COLLECTIVE_OPS - others))]
        assert sorted(posts["request"]) == sorted(mine[mine["op"] == "Waitall"]["request"])
        # Scatterv's root sends every block; the others receive one
        assert got["Scatterv"] == (block * p if r == 0 else block)
        roots = dict(zip(mine["op"].astype(str), mine["root"]))
        assert roots["Bcast"] == 1 and roots["Reduce"] == 0 and roots["Allreduce"] == -1
        assert roots["Ibcast"] == 1 and roots["Ireduce"] == 0 and roots["Iallreduce"] == -1
    _check_and_replay(tmp_path / "t")


def test_comm_split_ids_and_world_peers(exe, tmp_path):
    prog = exe("split")
    done, m = _traced(prog, 4, tmp_path / "t")
    assert sorted(done.stdout.splitlines()) == sorted(_untraced_stdout(prog, 4).splitlines())
    df = _rows(tmp_path / "t")
    for parity in (0, 1):
        members = sorted(range(parity, 4, 2), reverse=True)     # key -rank: reversed
        split_id = tf.derived_comm_id(tf.COMM_WORLD_ID, 0, min(members))
        dup_id = tf.derived_comm_id(split_id, 0, min(members))
        assert m["communicators"][str(split_id)] == members
        assert m["communicators"][str(dup_id)] == members
        for r in members:
            mine = df[df["rank"] == r].reset_index(drop=True)
            assert list(mine["op"].astype(str))[:4] == ["Comm_split", "Comm_dup", "Allreduce",
                                                        "Bcast"]
            assert mine["peer"][0] == split_id and mine["comm"][1] == split_id
            assert mine["peer"][1] == dup_id and mine["comm"][3] == dup_id
            assert mine["root"][3] == members[-1]                # local root 1 -> world rank
        # local rank 0 (world rank 2 or 3) sends to local rank 1 (world 0 or 1): world peers
        sender, receiver = members[0], members[1]
        send = df[(df["rank"] == sender) & (df["op"] == "Send")].iloc[0]
        recv = df[(df["rank"] == receiver) & (df["op"] == "Recv")].iloc[0]
        assert (send["peer"], send["comm"]) == (receiver, dup_id)
        assert (recv["peer"], recv["comm"]) == (sender, dup_id)
    _check_and_replay(tmp_path / "t")


def test_killed_rank_keeps_what_it_recorded(exe, tmp_path):
    prog = exe("crash")
    done, m = native.launch(3, tmp_path / "t", str(prog), timeout=120)
    assert done.returncode != 0
    assert m["complete"] is False and m["rank_status"][1] == "killed"
    df = _rows(tmp_path / "t")
    assert _counts(df, 1) == {"Barrier": 3}


def test_crashed_rank_is_told_from_the_ranks_killed_after_it(exe, tmp_path):
    done, m = native.launch(3, tmp_path / "t", str(exe("segfault")), timeout=120)
    assert done.returncode != 0
    assert m["complete"] is False and m["rank_status"][1] == "error"
    assert m["rank_errors"] == {"1": "crashed: signal 11 (SIGSEGV)"}
    assert [s for r, s in enumerate(m["rank_status"]) if r != 1] == ["killed", "killed"]
    assert _counts(_rows(tmp_path / "t"), 1) == {"Barrier": 3}


def test_the_rank_that_aborts_is_named(exe, tmp_path):
    """MPI_Abort on rank 1: its status is error with the call and code (the other rank's is
    not), and collect's one Error line names the program and the rank."""
    prog = exe("aborts")
    res = hindsight("collect", "-n", 2, "--program", prog, "--out", tmp_path / "t")
    assert res.returncode == 1
    m = json.loads((tmp_path / "t" / "manifest.json").read_text())
    # (rank 0's status is MPICH's business: its pending Barrier may return or be killed)
    assert m["rank_status"][1] == "error" and m["rank_status"][0] != "error"
    assert m["rank_errors"] == {"1": "called MPI_Abort (error code 3)"}
    err = [x for x in res.stderr.splitlines() if x.startswith("Error:")]
    assert len(err) == 1 and err[0].startswith(f"Error: {prog}: run failed (mpiexec exit code")
    assert err[0].endswith("; rank 1: called MPI_Abort (error code 3)"), err
    assert _counts(_rows(tmp_path / "t"), 1) == {"Barrier": 3}


@pytest.mark.parametrize("recorder", ["pmpi", "python"])
def test_a_cancel_is_counted_by_both_recorders(exe, tmp_path, recorder):
    """MPI_Cancel (Request.Cancel in mpi4py) has no row: it is counted under one name by the
    PMPI library and by the Python tracer, so the trace says its traffic is incomplete."""
    prog = exe("cancel") if recorder == "pmpi" else PROGRAMS / "cancel.py"
    extra = ["--recorder", "python"] if recorder == "python" else []
    res = hindsight("collect", "-n", 2, *extra, "--program", prog, "--out", tmp_path / "t")
    assert res.returncode == 0, res.stderr
    assert "cancelled" in res.stdout
    m = json.loads((tmp_path / "t" / "manifest.json").read_text())
    assert m["untraced_calls"] == {"Request.Cancel": 1}
    check = hindsight("trace", "check", tmp_path / "t")
    assert check.returncode == 1 and "traffic incomplete: 1 call (Request.Cancel 1)" in \
        check.stdout


def test_an_addresssanitizer_build_runs_traced(tmp_path):
    """A program built with -fsanitize=address runs under collect (ASan would refuse to start
    behind the preloaded library: collect sets verify_asan_link_order=0 for it)."""
    prog = tmp_path / "ring_asan"
    built = subprocess.run([native.find_mpicc(), "-g", "-fsanitize=address", "-o", str(prog),
                            str(PROGRAMS / "ring.c")], capture_output=True, text=True)
    if built.returncode != 0:
        pytest.skip(f"no AddressSanitizer runtime here: {built.stderr.strip()[:200]}")
    assert native.sanitizer_env(str(prog), {}) == {"ASAN_OPTIONS": "verify_asan_link_order=0"}
    assert native.sanitizer_env(str(prog), {"ASAN_OPTIONS": "verify_asan_link_order=1"}) == {}
    assert native.sanitizer_env(str(PROGRAMS / "ring.c"), {}) == {}
    res = hindsight("collect", "-n", 2, "--program", prog, "--out", tmp_path / "t")
    assert res.returncode == 0, res.stderr
    assert tf.read_manifest(tmp_path / "t")["complete"] is True


def test_not_a_program_is_not_native(tmp_path, exe):
    script = tmp_path / "prog.py"
    script.write_text("print(1)\n")
    assert not native.is_native(script)
    assert not native.is_native(tmp_path / "missing")
    assert native.is_native(exe("ring"))


def test_hindsight_collect_traces_a_compiled_program(exe, tmp_path):
    """`hindsight collect --program ./a.out` detects the executable and traces it through PMPI."""
    out = tmp_path / "t"
    res = hindsight("collect", "-n", 3, "--program", exe("ring"), "--out", out)
    assert res.returncode == 0, res.stderr
    assert sorted(x for x in res.stdout.splitlines() if not x.startswith("trace ")) == \
        sorted(_untraced_stdout(exe("ring"), 3).splitlines())    # ranks print in any order
    m = tf.read_manifest(out)
    assert m["complete"] and m["ranks"] == 3
    _check_and_replay(out)


def test_untraced_run_of_a_compiled_program(exe, tmp_path):
    """`hindsight collect --untraced --program ./a.out`: the PMPI library takes the same start-up
    barrier and epoch, records nothing, and the folder gets the manifest only, with the wall time
    from the epoch to MPI_Finalize's entry on every rank, as an untraced mpi4py run's; the traced
    run of the same program measures the same interval."""
    prog, nap, p = exe("nap"), 300, 2
    (tmp_path / "traced").mkdir()
    (tmp_path / "traced" / "rank-00005.parquet").write_bytes(b"left by an earlier run")
    walls, runs = {}, {}
    for kind in ("traced", "untraced", "traced", "untraced"):
        out = tmp_path / kind
        t0 = time.monotonic()
        res = hindsight("collect", "-n", p, "--program", prog, "--out", out, "--force",
                        *(["--untraced"] if kind == "untraced" else []), "--", nap)
        elapsed_ns = (time.monotonic() - t0) * 1e9
        assert res.returncode == 0, res.stderr
        assert "token went round 2 ranks" in res.stdout
        m = runs[kind] = tf.read_manifest(out)
        # plausible: each rank waited for rank 0's nap, and the run lasted less than collect
        assert all(nap * 1e6 <= e <= m["wall_ns"] for e in m["program_end_ns"])
        assert m["wall_ns"] == max(m["program_end_ns"]) < elapsed_ns
        walls.setdefault(kind, []).append(m["wall_ns"])
    u, t = runs["untraced"], runs["traced"]
    assert sorted(f.name for f in (tmp_path / "untraced").iterdir()) == [tf.MANIFEST_NAME]
    assert u["traced"] is False and u["complete"] is True and u["rank_status"] == ["complete"] * p
    assert u["makespan_ns"] == u["wall_ns"] and len(u["program_end_ns"]) == p
    assert u["events"] is None and u["cpu_sampling"] is None and u["result_verified"] is None
    assert u["launcher_exit_code"] == 0 and u["ranks"] == p
    assert u["program"] == str(prog.resolve()) and u["app"] == "nap"
    assert u["args"] == {"argv": [str(nap)]} and u["network"]["transport"] == "shm"
    assert sorted(r for rs in u["hosts"].values() for r in rs) == list(range(p))
    assert u["start_unix"] <= u["end_unix"] and u["run_id"] != t["run_id"]
    cond = u["conditions"]
    assert cond["loadavg_1m_before"] is not None and cond["seconds"] > nap / 1e3
    assert len(cond["rank_ctx_switches"]) == p and len(cond["rank_run_queue_wait"]) == p
    assert all(0 <= w <= 1 for w in cond["rank_run_queue_wait"])
    # the traced run: the same interval, ending after its last event
    assert t["traced"] is True and t["complete"] and t["wall_ns"] >= t["makespan_ns"] > 0
    assert len(t["conditions"]["rank_ctx_switches"]) == p
    assert not (tmp_path / "traced" / "rank-00005.parquet").exists()
    # both are the nap and a few messages: within the nap of each other, however noisy
    assert abs(statistics.median(walls["traced"]) - statistics.median(walls["untraced"])) \
        < nap * 1e6
    res = hindsight("trace", "info", tmp_path / "untraced")
    assert res.returncode == 0 and "an untraced run (collect --untraced), no events" in res.stdout
    assert f"wall time   {fmt_time(u['wall_ns'])}  (start barrier to the program's end)" in \
        res.stdout.splitlines()


def test_untraced_run_when_the_program_dies(exe, tmp_path):
    """A rank that dies before MPI_Finalize leaves no end: the untraced run is incomplete, the
    rank `missing`, and no wall time is given."""
    res = hindsight("collect", "-n", 3, "--program", exe("crash"), "--out", tmp_path / "u",
                    "--untraced")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    m = tf.read_manifest(tmp_path / "u")
    assert m["traced"] is False and m["complete"] is False and m["launcher_exit_code"] != 0
    assert m["rank_status"][1] == "missing" and m.get("wall_ns") is None
    assert sorted(f.name for f in (tmp_path / "u").iterdir()) == [tf.MANIFEST_NAME]
    done, m = native.launch(3, tmp_path / "l", str(exe("crash")), timeout=120, untraced=True)
    assert done.returncode != 0 and m["launcher_exit_code"] == done.returncode
    assert m["complete"] is False and m["rank_status"][1] == "missing"
    assert sorted(f.name for f in (tmp_path / "l").iterdir()) == [tf.MANIFEST_NAME]


def test_a_compiled_program_validates_against_its_untraced_runs(exe, tmp_path):
    """`hindsight validate` of a compiled program with the default ground truth: its traced and
    untraced runs are made, the actual time is the untraced runs' wall time."""
    import tomli_w

    from validation.spec import load_spec
    from validation.validate import validate

    (tmp_path / "prof.toml").write_text(tomli_w.dumps(
        {"loggps": {"L": 5e-6, "o_send": 2e-6, "o_recv": 2e-6, "g": 0.0, "G": 2e-9,
                    "S": 65536.0}, "measured_on": {"transport": "shm"}}))
    spec = tmp_path / "spec.toml"
    spec.write_text(f"""name = "c"
repetitions = 1
[networks.shm]
transport = "shm"
profile = "prof.toml"
[predictors]
replay = ["loggps"]
[[experiment]]
program = "{exe('nap')}"
ranks = [2]
[experiment.sizes]
"short" = ["50"]
""")
    sp = load_spec(spec)
    assert sp.ground_truth == "untraced"
    out = tmp_path / "v"
    s = validate(sp, out, progress=False, log=lambda m: None)
    assert s["run"] == 1 and s["failed"] == 0
    res = json.loads((out / "cells" / "nap-n2-short-shm.json").read_text())
    u = tf.read_manifest(out / "untraced" / "nap-n2-short-shm" / "rep0")
    assert u["traced"] is False and u["program"] == str(exe("nap").resolve())
    assert res["actual_s"] == pytest.approx(u["wall_ns"] / 1e9)
    # the run is rank 0's nap of 50 ms: the replay of the trace (with its lead-in) finds it
    assert res["predictions"][0]["predicted_s"] == pytest.approx(res["actual_s"], rel=0.5)


def test_thread_multiple_is_refused_in_one_line(exe, tmp_path):
    res = hindsight("collect", "-n", 2, "--program", exe("thread_multiple"), "--out", tmp_path / "t")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert res.stderr.strip().splitlines()[-1] == (
        "Error: the program asks for MPI_THREAD_MULTIPLE (thread-multiple): the tracer records "
        "the MPI calls of one thread at a time; ask MPI_Init_thread for MPI_THREAD_SERIALIZED "
        "or MPI_THREAD_FUNNELED (mpi4py: MPI.Init_thread(MPI.THREAD_SERIALIZED), or "
        "mpi4py.rc.thread_level = 'serialized' where mpi4py initialises MPI) to trace it, or "
        "run it untraced")
    assert "started" not in res.stdout
    # which it can be: the untraced run records nothing, so any thread level will do
    res = hindsight("collect", "-n", 2, "--program", exe("thread_multiple"), "--out",
                    tmp_path / "u", "--untraced")
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("started with thread level 3") == 2
    assert tf.read_manifest(tmp_path / "u")["complete"] is True


def test_timeout_records_the_call_each_rank_was_blocked_in(tmp_path):
    """A compiled deadlock stopped by `collect --timeout`: the library's stop-signal handler
    names the call each rank was inside, and its return address the source line (-g)."""
    exe = tmp_path / "deadlock"
    # -O0: at -O2 the compiler merges the two MPI_Recv calls into one call site
    subprocess.run([native.find_mpicc(), "-g", "-O0", "-o", str(exe),
                    str(PROGRAMS / "deadlock.c")], check=True)
    src = (PROGRAMS / "deadlock.c").read_text().splitlines()
    line = {r: src.index(f"        MPI_Recv(&buf, 1, MPI_INT, {1 - r}, 7, MPI_COMM_WORLD, "
                         "MPI_STATUS_IGNORE);") + 1 for r in (0, 1)}
    out = tmp_path / "t"
    res = hindsight("collect", "-n", 2, "--program", exe, "--out", out, "--timeout", 5)
    assert res.returncode == 1
    assert res.stderr == f"Error: {exe}: timed out after 5 s; {out} is incomplete\n"
    m = tf.read_manifest(out)
    assert m["tracer"] == "pmpi" and m["timed_out_after_s"] == 5
    # the source file as the user knows it: relative to the folder collect ran in
    where = {r: f"tests/programs/deadlock.c:{line[r]}" for r in (0, 1)}
    assert m["stopped_in"] == {str(r): {"call": "Recv", "where": where[r]} for r in (0, 1)}
    for r in (0, 1):
        assert f"  rank {r} stopped in Recv at {where[r]}\n" in res.stdout
    # collect says why the job ended: mpiexec's report of the ranks it stopped is left out
    assert [x for x in res.stdout.splitlines()
            if not x.startswith(("trace ", "  rank "))] == [], res.stdout

    # in a call that is counted, not traced: named as untraced_calls names it
    at = src.index("        MPI_Alltoallw(one, one, at, ints, in, one, at, ints, MPI_COMM_WORLD);") + 1
    res = hindsight("collect", "-n", 2, "--program", exe, "--out", out, "--force", "--timeout",
                    5, "--", "counted")
    assert res.returncode == 1
    assert tf.read_manifest(out)["stopped_in"] == {
        "0": {"call": "Alltoallw", "where": f"tests/programs/deadlock.c:{at}"},
        "1": {"call": "Recv", "where": where[1]}}


ONE_SIDED = tf.RMA_OPS | tf.RMA_LOCK_OPS | tf.RMA_PSCW_OPS | {"Win_create", "Win_fence",
                                                              "Win_free"}


def test_one_sided_rows_are_the_python_tracers(exe, tmp_path):
    """rma.c, the scenario of rma.py (fence epochs with Put, Get, Accumulate on a created window,
    then a PSCW and a lock_all epoch on it; Fetch_and_op under a lock on an allocated one): the
    same output traced, each window a communicator of its own with a derived id, and row for
    row the one-sided rows the Python tracer writes for rma.py."""
    prog = exe("rma")
    done, m = _traced(prog, 3, tmp_path / "t")
    assert done.stdout == _untraced_stdout(prog, 3)
    assert done.stdout.count("all passed") == 3
    df = _rows(tmp_path / "t")
    # two windows on COMM_WORLD, its creations 0 and 1, lowest member 0
    wins = [tf.derived_comm_id(tf.COMM_WORLD_ID, k, 0) for k in (0, 1)]
    for r in range(3):
        assert _counts(df, r) == {"Win_create": 2, "Win_fence": 3, "Put": 3,
                                  "Get": 3 if r == 0 else 2, "Accumulate": 1,
                                  "Fetch_and_op": 1, "Win_lock": 2 if r == 0 else 1,
                                  "Win_unlock": 2 if r == 0 else 1, "Win_free": 2,
                                  "Win_post": 1, "Win_start": 1, "Win_complete": 1,
                                  "Win_test": 1, "Win_lock_all": 1, "Win_flush": 1,
                                  "Win_unlock_all": 1, "Barrier": 3, "Gather": 1}
        post, start = (mine_op.iloc[0] for mine_op in (
            df[(df["rank"] == r) & (df["op"] == op)] for op in ("Win_post", "Win_start")))
        assert (post["peer"], start["peer"]) == ((r + 2) % 3, (r + 1) % 3)
        mine = df[df["rank"] == r]
        made = mine[mine["op"] == "Win_create"]
        assert list(made["peer"]) == wins and set(made["comm"]) == {tf.COMM_WORLD_ID}
        put, get, acc = (mine[mine["op"] == op].iloc[0] for op in ("Put", "Get", "Accumulate"))
        assert (put["peer"], put["comm"], put["nbytes"]) == ((r + 1) % 3, wins[0], 64)
        assert (get["peer"], get["comm"], get["nbytes"]) == ((r + 2) % 3, wins[0], 32)
        assert (acc["peer"], acc["comm"], acc["nbytes"]) == ((r + 2) % 3, wins[0], 32)
        fao = mine[mine["op"] == "Fetch_and_op"].iloc[0]
        assert (fao["peer"], fao["comm"], fao["nbytes"]) == (0, wins[1], 8)
        assert list(mine[mine["op"] == "Win_free"]["comm"]) == wins[::-1]
    for w in wins:
        assert m["communicators"][str(w)] == [0, 1, 2]
    _check_and_replay(tmp_path / "t")
    res = hindsight("replay", tmp_path / "t", "--model", "hockney")
    assert res.returncode == 0, res.stderr
    assert not model_notes(res.stderr)     # every epoch closes: all transfers modelled

    py = tmp_path / "py"
    res = hindsight("collect", "--recorder", "python", "-n", 3, "--program",
                    PROGRAMS / "rma.py", "--out", py)
    assert res.returncode == 0, res.stderr
    cols = ["rank", "op", "peer", "tag", "comm", "nbytes", "request", "root"]

    def one_sided(rows):
        return rows[rows["op"].astype(str).isin(ONE_SIDED)][cols].reset_index(drop=True)
    pd_rows = one_sided(_rows(py))
    assert len(pd_rows) == 26 + 23 + 23            # rank 0 also reads the counter
    assert one_sided(df).equals(pd_rows)
    assert tf.read_manifest(py)["communicators"] == m["communicators"]


def test_every_window_call_is_traced(exe, tmp_path):
    """rma.c all: a shared window on a reversed communicator (lock_all, Compare_and_swap,
    Get_accumulate, the four flushes, sync) and a dynamic one on its duplicate: targets are world
    ranks, a window's id counts among its parent's creations, its members are the parent's."""
    prog = exe("rma")
    done, m = _traced(prog, 3, tmp_path / "t", ["all"])
    assert done.stdout == _untraced_stdout(prog, 3, ["all"])
    assert done.stdout.count("all passed") == 3
    df = _rows(tmp_path / "t")
    rev = tf.derived_comm_id(tf.COMM_WORLD_ID, 2, 0)      # after the two windows of COMM_WORLD
    twin = tf.derived_comm_id(rev, 0, 0)
    shared = tf.derived_comm_id(rev, 1, 0)                # after the duplicate
    dynamic = tf.derived_comm_id(twin, 0, 0)
    for c in (rev, twin, shared, dynamic):
        assert m["communicators"][str(c)] == [2, 1, 0]
    for r in range(3):
        mine = df[(df["rank"] == r) & (df["comm"].isin([shared, dynamic]))]
        assert list(zip(mine["op"].astype(str), mine["peer"], mine["nbytes"])) == [
            ("Win_lock_all", -1, -1), ("Win_sync", -1, -1),
            ("Compare_and_swap", 2, 8), ("Win_flush", 2, -1), ("Get_accumulate", 2, 8),
            ("Win_flush", -1, -1), ("Win_flush", 2, -1), ("Win_flush", -1, -1),
            ("Win_unlock_all", -1, -1), ("Win_free", -1, -1),     # window rank 0 = world 2
            ("Win_fence", -1, -1), ("Win_free", -1, -1)]
        assert list(mine["comm"]) == [shared] * 10 + [dynamic] * 2
        made = df[(df["rank"] == r) & (df["op"] == "Win_create")]
        assert list(zip(made["comm"], made["peer"]))[2:] == [(rev, shared), (twin, dynamic)]
    prep = _check_and_replay(tmp_path / "t")
    assert prep.notes == []                   # every lock epoch closes: all modelled
    # per rank: the main scenario's flush (16 B out) and unlock_all (16 B back), ranks 1 and
    # 2's Fetch_and_op on rank 0; then ranks 0 and 1's Compare_and_swap (at the flush of
    # window rank 0, world rank 2) and Get_accumulate (at the flush of all), 8 B each way
    # (rank 2's are on its own window: nothing crosses)
    trips = prep.rma.msg[prep.rma.kind == K.PSEND]
    assert sorted(zip(prep.rma.m_src[trips].tolist(), prep.rma.m_bytes[trips].tolist(),
                      prep.rma.m_bytes[trips + 1].tolist())) == sorted(
        [(r, 16.0, 0.0) for r in range(3)] + [(r, 0.0, 16.0) for r in range(3)]
        + [(1, 8.0, 8.0), (2, 8.0, 8.0)] + [(r, 8.0, 8.0) for r in (0, 1) for _ in "ab"])


# what mpiexec (hydra) prints when a rank dies of a signal
BANNER = ("BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES",
          "YOUR APPLICATION TERMINATED WITH THE EXIT STRING: ")


def test_ctrl_c_of_a_compiled_program_leaves_out_mpiexecs_report(exe, tmp_path):
    """Ctrl-C to collect stops a hung compiled program without mpiexec's box about the ranks
    that died of the forwarded signal (nor its Ctrl-C chatter)."""
    import signal
    import sys
    import time

    from tests.conftest import ROOT

    out = tmp_path / "t"
    proc = subprocess.Popen(
        [sys.executable, "-m", "hindsight.cli", "collect", "-n", "2", "--program",
         str(exe("deadlock")), "--out", str(out)], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while not list((out / tf.STAGING_DIR).glob("rank-*")) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)                      # both ranks in their Recv
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=90)
    assert proc.returncode == 130, stderr
    assert stderr == f"Error: {exe('deadlock')}: interrupted; {out} is incomplete\n"
    assert [x for x in stdout.splitlines() if not x.startswith(("trace ", "  rank"))] == [], \
        stdout
    assert " stopped in Recv at " in stdout


def test_a_compiled_program_that_crashes_keeps_mpiexecs_report(exe, tmp_path):
    """A rank that dies on its own (SIGKILL) is the program's failure: collect passes on
    mpiexec's report of it."""
    res = hindsight("collect", "-n", 3, "--program", exe("crash"), "--out", tmp_path / "t")
    assert res.returncode == 1
    assert all(b in res.stdout for b in BANNER), res.stdout
    assert "(signal 9)" in res.stdout


def test_neighbourhood_collectives_are_the_python_tracers(exe, tmp_path):
    """neighbours.c, the scenario of neighbours.py (a periodic ring: Neighbor_allgather,
    Neighbor_alltoall, Ineighbor_allgather; a distributed graph r -> r+1, r+2:
    Neighbor_allgatherv): the same output traced, each topology's out-neighbours in the
    manifest as the Python tracer records them, and its rows those of the Python tracer but for
    neighbours.py's pickled neighbor_allgather."""
    prog = exe("neighbours")
    done, m = _traced(prog, 3, tmp_path / "t")
    assert done.stdout == _untraced_stdout(prog, 3)
    assert done.stdout.count("all passed") == 3
    ring, graph = (tf.derived_comm_id(tf.COMM_WORLD_ID, k, 0) for k in (0, 1))
    assert m["neighbours"] == {
        str(ring): {str(r): [(r - 1) % 3, (r + 1) % 3] for r in range(3)},
        str(graph): {str(r): [(r + 1) % 3, (r + 2) % 3] for r in range(3)}}
    df = _rows(tmp_path / "t")
    for r in range(3):
        mine = df[df["rank"] == r]
        assert list(zip(mine["op"].astype(str), mine["comm"], mine["nbytes"])) == [
            ("Comm_create", 0, -1), ("Neighbor_allgather", ring, 32),
            ("Neighbor_alltoall", ring, 24),             # one block: 3 doubles a neighbour
            ("Ineighbor_allgather", ring, 32), ("Wait", ring, -1),
            ("Comm_create", 0, -1), ("Neighbor_allgatherv", graph, 16), ("Gather", 0, 64)]
    _check_and_replay(tmp_path / "t")

    py = tmp_path / "py"
    res = hindsight("collect", "--recorder", "python", "-n", 3, "--program",
                    PROGRAMS / "neighbours.py", "--out", py)
    assert res.returncode == 0, res.stderr
    pym = tf.read_manifest(py)
    assert pym["neighbours"] == m["neighbours"]
    assert pym["communicators"] == m["communicators"]
    cols = ["rank", "op", "peer", "tag", "comm", "nbytes", "request", "root"]
    topo = tf.NEIGHBOR_OPS | {"Comm_create", "Wait"}

    def topology_rows(rows):
        return rows[rows["op"].astype(str).isin(topo)][cols].reset_index(drop=True)
    pyrows = _rows(py)
    # neighbours.py's third call, the pickled neighbor_allgather: the one C cannot make
    pickled = [pyrows.index[(pyrows["rank"] == r) & (pyrows["op"] == "Neighbor_allgather")][1]
               for r in range(3)]
    assert topology_rows(df).equals(topology_rows(pyrows.drop(pickled)))


def test_every_neighbourhood_collective_is_traced(exe, tmp_path):
    """neighbours.c all: Neighbor_alltoallv on a non-periodic line (-1, MPI_PROC_NULL, at its
    ends), Ineighbor_alltoall(v) on a duplicate of the ring (its topology comes with it),
    Ineighbor_allgatherv on an MPI_Graph_create ring; completed by one Waitall."""
    prog = exe("neighbours")
    done, m = _traced(prog, 3, tmp_path / "t", ["all"])
    assert done.stdout == _untraced_stdout(prog, 3, ["all"])
    assert done.stdout.count("8 checks, all passed") == 3
    ring = tf.derived_comm_id(tf.COMM_WORLD_ID, 0, 0)
    line, graph = (tf.derived_comm_id(tf.COMM_WORLD_ID, k, 0) for k in (2, 3))
    twin = tf.derived_comm_id(ring, 0, 0)
    assert m["neighbours"][str(line)] == {"0": [-1, 1], "1": [0, 2], "2": [1, -1]}
    assert m["neighbours"][str(twin)] == m["neighbours"][str(ring)]
    assert m["neighbours"][str(graph)] == {str(r): [(r + 1) % 3, (r - 1) % 3] for r in range(3)}
    df = _rows(tmp_path / "t")
    for r in range(3):
        mine = df[df["rank"] == r].iloc[7:-1]           # after the first test's calls
        assert list(zip(mine["op"].astype(str), mine["peer"], mine["comm"], mine["nbytes"],
                        mine["request"])) == [
            ("Comm_create", line, 0, -1, -1),
            ("Neighbor_alltoallv", -1, line, 24, -1),    # 1 + 2 doubles
            ("Comm_dup", twin, ring, -1, -1),
            ("Ineighbor_alltoall", -1, twin, 16, 1), ("Ineighbor_alltoallv", -1, twin, 32, 2),
            ("Comm_create", graph, 0, -1, -1), ("Ineighbor_allgatherv", -1, graph, 8, 3),
            ("Waitall", -1, twin, -1, 1), ("Waitall", -1, twin, -1, 2),
            ("Waitall", -1, graph, -1, 3)]
    _check_and_replay(tmp_path / "t")


def test_persistent_requests_are_the_python_tracers(exe, tmp_path):
    """persistent.c, the scenario of persistent.py: each MPI_Start (or each request of an
    MPI_Startall) is the non-blocking post it starts, with a fresh request id, completed as any
    other; row for row what the Python tracer writes for persistent.py, but for its pickled
    gather. With "all", an Rsend_init's start is an Irsend, a Sendrecv_replace a Sendrecv."""
    prog = exe("persistent")
    done, m = _traced(prog, 3, tmp_path / "t")
    assert done.stdout == _untraced_stdout(prog, 3)
    assert m["untraced_calls"] == {}
    py = tmp_path / "py"
    res = hindsight("collect", "--recorder", "python", "-n", 3, "--program",
                    PROGRAMS / "persistent.py", "--out", py)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[0].replace("np.float64(", "").replace(")", "") == \
        done.stdout.strip()
    cols = ["rank", "op", "peer", "tag", "comm", "nbytes", "request", "root"]

    def p2p(rows):
        return rows[rows["op"] != "Gather"][cols].reset_index(drop=True)
    df = _rows(tmp_path / "t")
    assert len(p2p(df)) == 3 * 24 and p2p(df).equals(p2p(_rows(py)))
    # the program frees its persistent requests once they are inactive: no Request_free row
    assert "Request_free" not in set(df["op"].astype(str))
    # A Startall's rows carry the call's times each (as the Python tracer's): `measured` replays
    # them one after the other, a few µs later per Startall on a run of well under a ms (0.58 ms
    # on a fast VM, where 29 µs later was 5.1 %): 5 %, or 50 µs.
    _check_and_replay(tmp_path / "t", rel=0.05, abs_ns=50_000)

    done, _ = _traced(prog, 3, tmp_path / "all", ["all"])
    assert done.stdout == _untraced_stdout(prog, 3, ["all"])
    df = _rows(tmp_path / "all")
    for r in range(3):
        mine = df[df["rank"] == r].iloc[24:-1]
        right, left = (r + 1) % 3, (r - 1) % 3
        assert list(zip(mine["op"].astype(str), mine["peer"], mine["tag"], mine["nbytes"],
                        mine["request"])) == [
            ("Irecv", left, 7, 16, 12), ("Barrier", -1, -1, 0, -1), ("Irsend", right, 7, 16, 13),
            ("Wait", -1, -1, -1, 13), ("Wait", left, 7, 16, 12),
            ("Sendrecv_send", right, 8, 24, -1), ("Sendrecv_recv", left, 8, 24, -1),
            ("Isend", right, 9, 8, 14), ("Isend", right, 10, 8, 15), ("Irecv", left, 9, 8, 16),
            ("Irecv", left, 10, 8, 17), ("Waitall", -1, -1, -1, 14),
            ("Waitall", -1, -1, -1, 15), ("Waitall", left, 9, 8, 16),
            ("Waitall", left, 10, 8, 17)]
    _check_and_replay(tmp_path / "all", rel=0.05)
    # through OTF2 and back: every post of the Startall (two of one op in one call) is a row
    res = hindsight("export", tmp_path / "all", "--format", "otf2", "--out", tmp_path / "o")
    assert res.returncode == 0, res.stderr
    res = hindsight("import", "otf2", tmp_path / "o", "--out", tmp_path / "back")
    assert res.returncode == 0, res.stderr
    back = _rows(tmp_path / "back")
    assert back[cols[:-2]].equals(df[cols[:-2]]), (back, df)


def test_freed_requests_are_the_python_tracers_and_replay(exe, tmp_path):
    """request_free.c, the scenario of request_free.py: the free of an active Isend, of a
    started persistent send and of an Irecv that named its source and tag is one Request_free
    row each (the request's id, peer/tag/nbytes -1), row for row what the Python tracer writes;
    freeing an inactive persistent request (never started, or started and completed) gives
    none. `trace check` says ok: the freed sends are not "never completed", each is matched
    with its receive, and the freed Irecv with rank 0's Ssend; replay moves every message."""
    prog = exe("request_free")
    out = tmp_path / "t"
    done, m = _traced(prog, 2, out)
    assert done.stdout == _untraced_stdout(prog, 2) == "33.0\n"
    py = tmp_path / "py"
    res = hindsight("collect", "--recorder", "python", "-n", 2, "--program",
                    PROGRAMS / "request_free.py", "--out", py)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[0] == "33.0"
    cols = ["rank", "op", "peer", "tag", "comm", "nbytes", "request", "root"]
    df = _rows(out)
    assert df[cols].equals(_rows(py)[cols])
    freed = df[df["op"] == "Request_free"]
    assert list(zip(freed["rank"], freed["request"], freed["peer"], freed["tag"],
                    freed["nbytes"])) == [(0, 0, -1, -1, -1), (0, 1, -1, -1, -1),
                                          (1, 0, -1, -1, -1)]
    # the posts they free: rank 0's Isend and its started Send_init, rank 1's Irecv
    posts = df[df["request"].isin([0, 1]) & (df["op"] != "Request_free")]
    assert list(zip(posts["rank"], posts["op"], posts["tag"], posts["request"])) == [
        (0, "Isend", 1, 0), (0, "Isend", 2, 1), (1, "Irecv", 4, 0)]
    # two persistent sends started (one freed, one waited for); the one never started gives
    # no row, nor do the frees of the two inactive ones
    assert _counts(df, 0) == {"Isend": 3, "Request_free": 2, "Wait": 1, "Ssend": 1, "Send": 1,
                              "Barrier": 1}
    prep = _check_and_replay(out, rel=0.05)
    for trace in (out, py):
        res = hindsight("trace", "check", trace)
        assert res.returncode == 0 and res.stdout.strip() == f"{trace}: ok", res.stdout
    msgs = prep.msgs
    rows = prep.rows
    got = sorted(zip(rows.seq[msgs.send_row].tolist(), rows.seq[msgs.recv_row].tolist(),
                     msgs.send_done.tolist(), msgs.recv_done.tolist(), msgs.bytes.tolist()))
    # (send seq on rank 0, receive seq on rank 1, send completion row, receive completion row):
    # the freed sends and the freed receive have none, and still carry their messages
    assert [g[:2] for g in got] == [(0, 2), (2, 3), (4, 4), (6, 0), (7, 5)]
    assert [g[2] for g in got][:2] == [-1, -1] and got[3][3] == -1
    assert [g[4] for g in got] == [32, 16, 16, 16, 8]


def test_calls_without_a_row_are_counted_in_the_manifest(exe, tmp_path):
    """untraced_calls.c, the scenario of untraced_calls.py: its Rput is counted in the
    manifest's `untraced_calls` as the Python tracer counts it, with the same rows otherwise;
    `trace check` and `trace info` say the traffic is incomplete. Its matched probe that finds
    nothing is one Poll row in either. With "all",
    Alltoallw, Isendrecv, a persistent collective and an intercommunicator are counted too
    (its general active-target epoch is rows); the persistent collective's start is no post row
    though MPI gives it the handle of a freed persistent send; a message across the
    intercommunicator has world ranks for peers on both sides."""
    prog = exe("untraced_calls")
    out = tmp_path / "t"
    done, m = _traced(prog, 3, out)
    assert done.stdout == _untraced_stdout(prog, 3)
    py = tmp_path / "py"
    res = hindsight("collect", "--recorder", "python", "-n", 3, "--program",
                    PROGRAMS / "untraced_calls.py", "--out", py)
    assert res.returncode == 0, res.stderr
    assert m["untraced_calls"] == {"Win.Rput": 3}
    assert tf.read_manifest(py)["untraced_calls"] == {"Win.Rput": 3}
    for r in range(3):
        assert _counts(_rows(out), r) == _counts(_rows(py), r)
    res = hindsight("trace", "check", out)
    assert res.returncode == 1
    assert res.stdout.strip().splitlines() == [
        f"{out / tf.MANIFEST_NAME}: traffic incomplete: 3 calls (Win.Rput 3) not "
        "traced; replay leaves them out (docs/trace-format.md, \"What is not traced\")"]
    info = hindsight("trace", "info", out)
    assert "untraced    3 calls (Win.Rput 3) not traced: the traffic is incomplete" \
        in info.stdout, info.stdout

    out = tmp_path / "all"
    done, m = _traced(prog, 3, out, ["all"])
    assert done.stdout == _untraced_stdout(prog, 3, ["all"])
    assert m["untraced_calls"] == {name: 3 for name in (
        "Alltoallw", "Bcast_init", "Create_intercomm", "Intercomm.Merge", "Isendrecv",
        "Win.Rput")}
    assert _counts(_rows(out), 0)["Win_post"] == 1        # general active target: rows
    df = _rows(out)
    assert not df["op"].isin(["Isend", "Irecv"]).any()
    send = df[df["op"] == "Send"]
    recv = df[df["op"] == "Recv"]
    assert list(zip(send["rank"], send["peer"], send["tag"])) == [(0, 1, 14)]
    assert list(zip(recv["rank"], recv["peer"], recv["tag"])) == [(1, 0, 14)]
    inter = int(send["comm"].iloc[0])
    assert recv["comm"].iloc[0] == inter and m["communicators"][str(inter)] == [0, 1, 2]
    merged = df[df["op"] == "Allreduce"]["comm"]
    assert merged.nunique() == 1 and m["communicators"][str(merged.iloc[0])] == [0, 2, 1]
    res = hindsight("trace", "check", out)
    assert res.returncode == 1 and len(res.stdout.strip().splitlines()) == 1
    assert "traffic incomplete: 18 calls" in res.stdout


def test_a_spawned_process_runs_untraced(exe, tmp_path):
    """spawn.c: the traced ranks spawn a process (its MPI_COMM_WORLD numbers its rank 0 as the
    job's rank 0): it runs untraced and leaves the job's files alone, the spawn is counted, and
    rank 0's message to it and its reply have no world rank (-1)."""
    prog = exe("spawn")
    done, m = _traced(prog, 2, tmp_path / "t")
    # all three processes' lines, and nothing else (UCX's errors of a process that outlived the
    # other side's attach are what spawn.c's barriers and reply prevent)
    lines = ["rank 0: done", "rank 1: done", "spawned: got 5"]
    assert sorted(done.stdout.splitlines()) == lines, done.stdout + done.stderr
    assert sorted(_untraced_stdout(prog, 2).splitlines()) == lines
    assert m["complete"] and m["rank_status"] == ["complete"] * 2
    assert m["untraced_calls"] == {"Spawn": 2}
    df = _rows(tmp_path / "t")
    send = df[df["op"] == "Send"]
    recv = df[df["op"] == "Recv"]
    assert list(zip(send["rank"], send["peer"], send["nbytes"])) == [(0, -1, 4)]
    assert list(zip(recv["rank"], recv["peer"], recv["nbytes"])) == [(0, -1, 4)]
    assert m["communicators"][str(send["comm"].iloc[0])] == [0, 1]
    assert recv["comm"].iloc[0] == send["comm"].iloc[0]
    res = hindsight("trace", "check", tmp_path / "t")
    assert res.stdout.strip().splitlines() == [
        f"{tmp_path / 't' / tf.MANIFEST_NAME}: traffic incomplete: 2 calls (Spawn 2) not traced; "
        "replay leaves them out (docs/trace-format.md, \"What is not traced\")"]


def test_large_count_variants_give_the_int_count_calls_rows(exe, tmp_path):
    """large_count.c makes the same calls with int counts and with MPI 4's large-count
    variants (MPI_Send_c, MPI_Recv_c, MPI_Isend_c, MPI_Irecv_c, MPI_Allreduce_c, MPI_Bcast_c,
    MPI_Alltoallv_c with MPI_Count counts and MPI_Aint displacements, MPI_Sendrecv_c,
    MPI_Mrecv_c): the rows are the same, and these."""
    prog = exe("large_count")
    cols = ["rank", "op", "peer", "tag", "comm", "nbytes", "request", "root"]
    frames = {}
    for mode in ("int", "large"):
        done, m = _traced(prog, 2, tmp_path / mode, [mode])
        assert sorted(done.stdout.splitlines()) == \
            sorted(_untraced_stdout(prog, 2, ["int"]).splitlines())
        assert m["untraced_calls"] == {}
        frames[mode] = _rows(tmp_path / mode)[cols].astype({"op": str})
    assert frames["large"].equals(frames["int"])
    df = frames["large"]
    for r in (0, 1):
        p = 1 - r
        rows = [tuple(x) for x in df[df["rank"] == r][cols[1:]].itertuples(index=False)]
        first = [("Send", p, 7, 0, 64, -1, -1), ("Recv", p, 8, 0, 32, -1, -1)] if r == 0 else \
            [("Recv", p, 7, 0, 64, -1, -1), ("Send", p, 8, 0, 32, -1, -1)]
        assert rows == first + [
            ("Irecv", p, 9, 0, 12, 0, -1), ("Isend", p, 9, 0, 12, 1, -1),
            ("Waitall", p, 9, 0, 12, 0, -1), ("Waitall", -1, -1, 0, -1, 1, -1),
            ("Allreduce", -1, -1, 0, 16, -1, -1), ("Bcast", -1, -1, 0, 8, -1, 1),
            # rank r sends r + 1 + i ints to rank i: 4 * (2 * (r + 1) + 1) bytes
            ("Alltoallv", -1, -1, 0, 4 * (2 * r + 3), -1, -1),
            ("Sendrecv_send", p, 10, 0, 4, -1, -1), ("Sendrecv_recv", p, 10, 0, 4, -1, -1),
            ("Send", p, 11, 0, 4, -1, -1), ("Probe", p, 11, 0, 4, -1, -1),
            ("Recv", p, 11, 0, 4, -1, -1)]
    _check_and_replay(tmp_path / "large", rel=0.05)


def test_matched_probes_and_receives_are_traced(exe, tmp_path):
    """matched.c: MPI_Mprobe + MPI_Mrecv give a Probe and a Recv row (the message's source as a
    world rank, its tag and size, though the probe named any source and tag), as the Python
    tracer records a pickle-API recv; an MPI_Improbe that matched an Iprobe row (those that did
    not, one Poll row before it), its MPI_Imrecv an Irecv post of the message's source and tag completed by the
    Wait row; the trace checks and replays."""
    prog = exe("matched")
    out = tmp_path / "t"
    done, m = _traced(prog, 2, out)
    assert sorted(done.stdout.splitlines()) == sorted(_untraced_stdout(prog, 2).splitlines())
    assert m["untraced_calls"] == {}
    df = _rows(out)
    for r in (0, 1):
        p = 1 - r
        mine = df[df["rank"] == r]
        # (the Improbe loop's unsuccessful polls, if any, are a Poll row: their count is the
        # machine's)
        recv = mine[~mine["op"].isin(["Isend", "Waitall", "Poll"])]
        rows = [(str(o), pe, t, n) for o, pe, t, n in
                zip(recv["op"], recv["peer"], recv["tag"], recv["nbytes"])]
        expected = []
        for k in range(6):
            n = 4 * (k + 1)
            expected += [("Probe", p, 20 + k, n), ("Recv", p, 20 + k, n)] if k % 2 == 0 else \
                [("Iprobe", p, 20 + k, n), ("Irecv", p, 20 + k, n), ("Wait", p, 20 + k, n)]
        assert rows == expected
        posts = recv[recv["op"] == "Irecv"]["request"]
        assert list(recv[recv["op"] == "Wait"]["request"]) == list(posts)
    _check_and_replay(out, rel=0.05)
