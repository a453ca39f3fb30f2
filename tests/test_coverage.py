"""The tracer's coverage of mpi4py: communicator constructors, MPI.Finalize in the program, a
program that initialises MPI itself, every buffer form, persistent requests, calls it does not
model (counted in the manifest), a refused MPI_THREAD_MULTIPLE, and a rank that raises. Each
program runs traced under `hindsight collect` and untraced under plain mpiexec: same output,
`trace check` ok, the rows expected, a replay."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from collections import Counter

import pytest

from hindsight import trace as tf
from tests.conftest import PROGRAMS, ROOT, hindsight

MPIEXEC = os.path.join(os.path.dirname(sys.executable), "mpiexec")


def _untraced_output(program: str, n: int, args: tuple[str, ...] = ()) -> str:
    res = subprocess.run([MPIEXEC, "-n", str(n), sys.executable, str(PROGRAMS / program), *args],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    return res.stdout


def _traced(tmp_path, program: str, n: int, untraced: bool = False,
            args: tuple[str, ...] = ()):
    """Collect, check and replay `program` (with `args`); return (rows as a DataFrame, the
    manifest). With ``untraced`` the program makes calls the tracer does not model: `trace
    check` must say the traffic is incomplete (and nothing else)."""
    out = tmp_path / "trace"
    res = hindsight("collect", "--recorder", "python", "-n", n, "--program", PROGRAMS / program, "--out", out, "--",
                    *args)
    assert res.returncode == 0, res.stderr
    lines = [x for x in res.stdout.splitlines() if not x.startswith("trace ")]
    assert "\n".join(lines) + "\n" == _untraced_output(program, n, args)
    check = hindsight("trace", "check", out)
    if untraced:
        assert check.returncode == 1, check.stdout + check.stderr
        assert [x.split(": ", 1)[1].split(":")[0] for x in check.stdout.splitlines()] == \
            ["traffic incomplete"], check.stdout
    else:
        assert check.returncode == 0, check.stdout + check.stderr
    replay = hindsight("replay", out, "--model", "loggps", timeout=120)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    return tf.read_trace(out).to_pandas(), json.loads((out / "manifest.json").read_text())


def _ops(df, rank: int) -> Counter:
    return Counter(df[df["rank"] == rank]["op"].astype(str))


def test_every_communicator_constructor_gives_a_traced_communicator(tmp_path):
    df, m = _traced(tmp_path, "comms.py", 3)
    ops = _ops(df, 0)
    # Dup, Clone, Idup; Create, Create_group, Create_cart; Split_type, Sub
    assert ops["Comm_dup"] == 3 and ops["Comm_create"] == 3 and ops["Comm_split"] == 2
    assert ops["Allreduce"] == 8 and ops["Sendrecv_send"] == 8
    assert _ops(df, 2)["Allreduce"] == 7          # not a member of the Create_group one
    made = df[df["op"].astype(str).str.startswith("Comm_")]
    for cid in set(made["peer"]):
        assert str(cid) in m["communicators"]
    group = df[(df["op"] == "Comm_create") & (df["comm"] == df["peer"])]
    assert sorted(set(group["rank"])) == [0, 1]   # Create_group: on the new communicator
    assert sorted(m["communicators"][str(group["peer"].iloc[0])]) == [0, 1]
    assert m["untraced_calls"] == {}


def test_communicators_made_from_a_group_are_traced_or_counted(tmp_path):
    """from_group.py: `Intracomm.Create_from_group` gives a traced communicator (its rows on it,
    its members in the manifest), `Intercomm.Create_from_groups` is counted with its traffic;
    `isinstance` against the program's MPI.Intracomm/Intercomm holds as untraced."""
    df, m = _traced(tmp_path, "from_group.py", 2, untraced=True)
    made = df[df["op"] == "Comm_create"]
    assert len(made) == 2 and (made["comm"] == made["peer"]).all()
    cid = int(made["peer"].iloc[0])
    assert m["communicators"][str(cid)] == [0, 1]
    for r in range(2):
        assert _ops(df, r) == {"Comm_create": 1, "Allreduce": 1, "Barrier": 1}
        assert set(df[(df["rank"] == r) & (df["op"] != "Comm_create")]["comm"]) == {cid}
    assert m["untraced_calls"] == {"Intercomm.Create_from_groups": 2, "Intercomm.Barrier": 2}


def test_matched_probes_are_a_probe_and_a_receive(tmp_path):
    """matched.py: every matched-probe form gives the rows of a probe (Probe, or Iprobe once an
    Improbe finds the message) and of the receive of its message (Recv, or an Irecv post and its
    Wait), with the matched source, tag and size; an Improbe that finds nothing is a poll: one
    Poll row (count 1) where it was called; the Improbe loop's, if it polled, one before its
    Iprobe."""
    df, m = _traced(tmp_path, "matched.py", 2)
    assert m["untraced_calls"] == {}
    got = df[df["rank"] == 1][["op", "peer", "tag", "nbytes"]].astype({"op": str})
    loop = (got["op"] == "Poll") & (got["op"].shift(-1) == "Iprobe")
    got = got[~loop]
    five, six = (len(pickle.dumps(o, pickle.HIGHEST_PROTOCOL)) for o in ({"five": 5}, [6] * 6))
    assert [tuple(r) for r in got.itertuples(index=False)] == [
        ("Probe", 0, 1, 40), ("Recv", 0, 1, 40),
        ("Iprobe", 0, 2, 80), ("Recv", 0, 2, 80),
        ("Probe", 0, 3, 120), ("Irecv", 0, 3, 120), ("Wait", 0, 3, 120),
        ("Probe", 0, 4, 160), ("Irecv", 0, 4, 160), ("Wait", 0, 4, 160),
        ("Probe", 0, 5, five), ("Recv", 0, 5, five),
        ("Poll", -1, -1, 1),
        ("Probe", 0, 6, six), ("Irecv", 0, 6, -1), ("Wait", 0, 6, six),
        ("Barrier", -1, -1, 0)]


def test_a_program_that_calls_finalize_keeps_its_trace(tmp_path):
    df, m = _traced(tmp_path, "finalize.py", 2)
    assert m["complete"] and m["rank_status"] == ["complete"] * 2
    assert _ops(df, 1) == {"Allreduce": 1, "Barrier": 1}


@pytest.mark.parametrize("how", ["init", "init_thread"])
def test_a_program_that_initialises_mpi_itself_is_traced(tmp_path, how):
    """mpi4py.rc.initialize = False and MPI.Init() / MPI.Init_thread(FUNNELED), rc.finalize =
    False and MPI.Finalize(): the run starts in the program's Init, its COMM_WORLD is traced,
    and its Finalize finishes the trace; the same run untraced measures the same interval."""
    df, m = _traced(tmp_path, "self_init.py", 2, args=(how,))
    assert m["complete"] and m["untraced_calls"] == {}
    for r in range(2):
        assert _ops(df, r) == {"Sendrecv_send": 1, "Sendrecv_recv": 1, "Irecv": 1, "Isend": 1,
                               "Waitall": 2, "Allreduce": 1, "Gather": 1}
        mine = df[df["rank"] == r]
        assert set(mine[mine["op"] == "Isend"]["peer"]) == {(r + 1) % 2}
        assert list(mine[mine["op"] == "Waitall"]["nbytes"]) == [32, -1]  # the receive's size
    assert 0 < m["makespan_ns"] <= m["wall_ns"]
    out = tmp_path / "untraced"
    res = hindsight("collect", "--recorder", "python", "-n", 2, "--program", PROGRAMS / "self_init.py", "--out", out,
                    "--untraced", "--", how)
    assert res.returncode == 0, res.stderr
    u = tf.read_manifest(out)
    assert u["traced"] is False and u["complete"] and u["wall_ns"] > 0
    assert sorted(f.name for f in out.iterdir()) == [tf.MANIFEST_NAME]


def test_a_comm_world_taken_before_mpi_init_is_counted(tmp_path):
    """COMM_WORLD taken before the program's own MPI.Init is the real one (a traced one cannot
    be made before MPI is up): its calls have no rows, and the manifest says so."""
    out = tmp_path / "trace"
    res = hindsight("collect", "--recorder", "python", "-n", 2, "--program", PROGRAMS / "self_init.py", "--out", out,
                    "--", "init", "early")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[0] == \
        _untraced_output("self_init.py", 2, ("init", "early")).strip()
    m = tf.read_manifest(out)
    assert m["untraced_calls"] == {"COMM_WORLD before MPI.Init": 2} and m["events"] == [0, 0]
    check = hindsight("trace", "check", out)
    assert check.returncode == 1 and "traffic incomplete: 2 calls (COMM_WORLD before " \
        "MPI.Init 2) not traced" in check.stdout


def test_every_buffer_form_is_sized_in_bytes(tmp_path):
    df, _ = _traced(tmp_path, "vbuffers.py", 3)
    by = {(int(r.rank), str(r.op)): [] for r in df.itertuples()}
    for r in df.itertuples():
        by[(int(r.rank), str(r.op))].append(int(r.nbytes))
    assert by[(0, "Alltoallv")] == [12, 12]       # 3 ints sent, counts as array and list
    assert by[(0, "Scatterv")] == [24]            # the root sends 1+2+3 ints
    assert by[(2, "Scatterv")] == [12]            # rank 2 receives 3 ints
    assert by[(1, "Gatherv")] == [8] and by[(1, "Allgatherv")] == [8]


def test_persistent_requests_are_nonblocking_messages(tmp_path):
    df, _ = _traced(tmp_path, "persistent.py", 3)
    ops = _ops(df, 1)
    assert ops["Isend"] == 3 and ops["Issend"] == 3 and ops["Irecv"] == 6
    assert ops["Waitall"] == 6 and ops["Wait"] == 6
    mine = df[df["rank"] == 1]
    posts = mine[mine["op"].isin(["Isend", "Issend", "Irecv"])]
    assert posts["request"].is_unique and (posts["request"] >= 0).all()
    assert set(posts[posts["op"] == "Isend"]["peer"]) == {2}
    assert set(posts[posts["op"] == "Isend"]["nbytes"]) == {32}
    irecv = posts[posts["op"] == "Irecv"]
    assert sorted(Counter(irecv["peer"]).items()) == [(-2, 3), (0, 3)]   # ANY_SOURCE posts


def test_calls_without_a_model_are_counted_in_the_manifest(tmp_path):
    df, m = _traced(tmp_path, "untraced_calls.py", 3, untraced=True)
    assert m["untraced_calls"] == {"Win.Rput": 3}
    assert _ops(df, 0) == {"Comm_create": 1, "Barrier": 1, "Gather": 1, "Iallreduce": 3,
                           "Ibarrier": 1, "Wait": 4, "Win_create": 1, "Win_fence": 2,
                           "Put": 1, "Win_free": 1, "Neighbor_allgather": 1,
                           "Poll": 1}     # its Improbe that finds nothing: one poll
    info = hindsight("trace", "info", tmp_path / "trace")
    assert "untraced    3 calls (Win.Rput 3) not traced: " \
           "the traffic is incomplete" in info.stdout, info.stdout


def test_thread_multiple_is_refused_at_start_up(tmp_path):
    res = hindsight("collect", "--recorder", "python", "-n", 2, "--program", PROGRAMS / "thread_multiple.py",
                    "--out", tmp_path / "t")
    assert res.returncode != 0
    # rank 0 says it on its stderr (as it would under plain mpiexec); collect's Error line too
    said = [x for x in res.stderr.splitlines() if "thread-multiple" in x]
    assert said[0].startswith("hindsight: thread_multiple.py asks for")
    assert said[-1] == "Error: " + said[0].removeprefix("hindsight: ") == \
        res.stderr.strip().splitlines()[-1]
    assert "Traceback" not in res.stderr
    assert "done" not in res.stdout
    # asked for through the program's own MPI.Init_thread: refused alike
    res = hindsight("collect", "--recorder", "python", "-n", 2, "--program", PROGRAMS / "self_init.py",
                    "--out", tmp_path / "i", "--", "init_thread_multiple")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert res.stderr.strip().splitlines()[-1] == (
        "Error: self_init.py asks for MPI_THREAD_MULTIPLE (thread-multiple): the tracer records "
        "the MPI calls of one thread at a time, and a rank whose MPI two threads call at once "
        "is recorded only up to then; ask MPI.Init_thread for THREAD_SERIALIZED or "
        "THREAD_FUNNELED to trace it")
    assert "finalized" not in res.stdout


def test_a_program_that_never_initialises_mpi_is_one_line(tmp_path):
    prog = tmp_path / "no_init.py"
    prog.write_text("import mpi4py\nmpi4py.rc.initialize = False\nfrom mpi4py import MPI\n")
    res = hindsight("collect", "--recorder", "python", "-n", 2, "--program", prog, "--out", tmp_path / "t")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert f"hindsight: {prog} never initialised MPI (mpi4py.rc.initialize is False and it " \
        "called no MPI.Init): no trace written" in res.stderr


def test_a_rank_that_raises_leaves_its_error_in_the_manifest(tmp_path):
    out = tmp_path / "t"
    res = hindsight("collect", "--recorder", "python", "-n", 2, "--program", PROGRAMS / "raises.py", "--out", out)
    assert res.returncode != 0
    m = json.loads((out / "manifest.json").read_text())
    assert m["rank_errors"] == {"1": "RuntimeError: deliberate failure on rank 1"}
    for command in (["trace", "check", out], ["replay", out, "--model", "loggps"]):
        r = hindsight(*command)
        assert r.returncode == 1 and "Traceback" not in r.stderr + r.stdout


@pytest.mark.parametrize("leftover", [".rank-00001.parquet.tmp", "rank-00001.parquet.tmp"])
def test_a_half_written_rank_part_is_one_error_line(tmp_path, leftover):
    out = tmp_path / "t"
    res = hindsight("collect", "--recorder", "python", "-n", 2, "--program", PROGRAMS / "finalize.py", "--out", out)
    assert res.returncode == 0, res.stderr
    (out / "rank-00001.parquet").rename(out / leftover)
    (out / leftover).write_bytes((out / leftover).read_bytes()[:100])
    check = hindsight("trace", "check", out)
    assert check.returncode == 1 and "Traceback" not in check.stdout + check.stderr
    assert ("rank-00001.parquet: missing, although the manifest says rank 1 finished (the file "
            "was removed or moved after the run)") in check.stdout
    replay = hindsight("replay", out, "--model", "loggps")
    assert replay.returncode == 1 and "Traceback" not in replay.stdout + replay.stderr
    assert [x for x in replay.stderr.splitlines() if x.startswith("Error:")] == [
        f"Error: {out}: incomplete trace (the file of rank 1 is missing, although the rank "
        "finished); use "
        "--allow-partial to replay what was recorded"]


def test_nonblocking_collectives_are_posts_completed_like_requests(tmp_path):
    df, m = _traced(tmp_path, "nonblocking_collectives.py", 3)
    assert m["untraced_calls"] == {}
    for r in range(3):
        mine = df[df["rank"] == r]
        ops = _ops(df, r)
        mine_ops = tf.NONBLOCKING_COLLECTIVE_OPS - tf.NEIGHBOR_OPS   # (tests/test_neighbours.py)
        assert {op: ops[op] for op in mine_ops} == {op: 1 for op in mine_ops}
        posts = mine[mine["op"].isin(list(tf.NONBLOCKING_COLLECTIVE_OPS))]
        done = mine[mine["op"].isin(list(tf.COMPLETION_OPS))]
        assert posts["request"].is_unique and (posts["request"] >= 0).all()
        assert sorted(done["request"]) == sorted(posts["request"])   # each completed once
        assert (done[["peer", "tag", "nbytes"]] == -1).all().all()
        # Wait, Waitall, the Test that completed it (empty Tests are not rows), Waitany
        assert {"Wait", "Waitall", "Test", "Waitany"} <= set(done["op"].astype(str))
        got = dict(zip(posts["op"].astype(str), zip(posts["nbytes"], posts["root"])))
        block = 4 * 8
        assert got["Iallreduce"] == (block, -1) and got["Ibarrier"] == (0, -1)
        assert got["Ireduce"] == (block, 2) and got["Igatherv"] == (block, 1)
        assert got["Ialltoall"] == (block, -1) and got["Ialltoallv"] == (3 * block, -1)
        assert got["Iscatterv"] == (3 * block if r == 1 else block, 1)
    # the measured model gives back the run; the network models replay each collective's steps
    import replay
    prep = replay.prepare(tmp_path / "trace", use_cache=False)
    res = replay.run(prep, "measured")
    assert res.makespan_ns == pytest.approx(prep.measured_makespan_ns, rel=1e-9)
    for model in ("hockney", "mm1"):
        assert replay.run(prep, model).makespan_ns > 0
    assert prep.stream(True).selected["Iallreduce"] == {"rabenseifner": 1}   # 4 elements, p 3


def test_an_intercommunicators_merge_is_traced(tmp_path):
    df, m = _traced(tmp_path, "intercomm.py", 4, untraced=True)
    # the messages across the intercommunicator are counted, not recorded
    assert m["untraced_calls"] == {"Create_intercomm": 4, "Intercomm.send": 2,
                                   "Intercomm.recv": 2}
    made = df[(df["op"] == "Comm_create") & (df["comm"] == df["peer"])]
    assert len(made) == 4 and made["peer"].nunique() == 1      # one id on every member
    merged = int(made["peer"].iloc[0])
    assert m["communicators"][str(merged)] == [0, 2, 1, 3]      # evens first, then odds
    for r in range(4):
        ops = _ops(df[df["comm"] == merged], r)
        # the pickle-API sendrecv is mpi4py's Isend, matched probe, receive and Wait
        assert ops == {"Comm_create": 1, "Allreduce": 1, "Isend": 1, "Probe": 1, "Recv": 1,
                       "Wait": 1}


def test_pickle_receives_from_proc_null_give_none(tmp_path):
    """proc_null.py: a non-periodic halo of pickle-API sendrecv/send/recv, and a matched probe
    and an irecv of MPI_PROC_NULL: traced, every such receive gives None as mpi4py's does (the
    tracer unpickled the empty message and raised EOFError), and the trace checks and replays
    (``_traced``); the sends and receives with a rank are the only messages."""
    df, _ = _traced(tmp_path, "proc_null.py", 2)
    sends = df[df["op"].astype(str).isin(["Send", "Isend"]) & (df["peer"] >= 0)]
    assert len(sends) == 9          # per rank 3 rounds of 3, one real neighbour
    # a sendrecv is recorded as mpi4py makes it, send first: Isend, its receive, Wait (never
    # as the two rows of MPI_Sendrecv, which posts its receive first)
    assert not df["op"].astype(str).str.startswith("Sendrecv").any()
