"""The fault and bad-input matrix of docs/robustness.md, one test per row.

Rows already covered by tests/test_faults.py (SIGKILL after known messages, SIGTERM, an exception
on one rank, truncated and flipped files, missing or foreign manifest, extra rank file, wrong
column type) are not repeated here; this file adds the rest.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hindsight import trace as tf
from tests.conftest import PROGRAMS, ROOT, hindsight
from tests.test_faults import _damaged, _no_traceback

#: The seed of the "random point" of the SIGKILL test; override to explore other points.
KILL_SEED = int(os.environ.get("HINDSIGHT_FAULT_SEED", "7"))
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


# ------------------------------------------------------------------------------------------------
# SIGKILL at a random point


def _victim(seed: int, size: int, rounds: int) -> tuple[int, int]:
    """(rank, events it recorded before dying) of tests/programs/kill_random.py for this seed."""
    rng = random.Random(seed)
    victim = rng.randrange(size)
    rnd, phase = rng.randrange(3, rounds - 2), rng.randrange(3)
    paired = victim + 1 < size or victim % 2 == 1           # takes part in the Send/Recv pair
    per_round = 4 + int(paired) + 1     # Irecv Isend Waitall x2, Send or Recv, Allreduce
    return victim, rnd * per_round + (0, 4, 4 + int(paired))[phase]


@pytest.fixture(scope="module")
def killed(tmp_path_factory):
    out = tmp_path_factory.mktemp("kill") / "trace"
    res = hindsight("collect", "-n", 3, "--program", PROGRAMS / "kill_random.py", "--out", out,
                    "--", "--seed", KILL_SEED, "--rounds", 30,
                    env={"HINDSIGHT_BUFFER_EVENTS": "16"})
    return out, res


def test_sigkill_at_random_point_leaves_flushed_row_groups(killed):
    out, res = killed
    assert res.returncode != 0
    _no_traceback(res)
    assert "INCOMPLETE" in res.stdout
    manifest = json.loads((out / tf.MANIFEST_NAME).read_text())
    assert manifest["complete"] is False
    victim, recorded = _victim(KILL_SEED, 3, 30)
    # mpiexec SIGKILLs the other ranks when one dies: every rank is incomplete, named as such.
    assert manifest["rank_status"][victim] == "killed"
    assert all(s != "complete" for s in manifest["rank_status"])
    trace = tf.read_trace(out)
    assert sorted(trace.incomplete_ranks) == [0, 1, 2]
    df = trace.to_pandas()
    for r in range(3):
        mine = df[df["rank"] == r]
        assert list(mine["seq"]) == list(range(len(mine))), f"rank {r} has a gap"
    # The victim's file holds exactly its flushed row groups: at most one buffer (16 events, 17
    # when a two-row call crossed the limit) short of what it recorded, never more.
    kept = int((df["rank"] == victim).sum())
    assert recorded - 17 <= kept <= recorded, (victim, recorded, kept)
    with pytest.raises(tf.TraceError, match="incomplete"):
        tf.read_trace(out, allow_partial=False)


def test_sigkill_trace_check_reports_every_incomplete_rank(killed):
    out, _ = killed
    chk = hindsight("trace", "check", out)
    _no_traceback(chk)
    assert chk.returncode == 1
    for r in range(3):
        assert f"rank-{r:05d}.parquet: rank {r} did not finish (status killed)" in chk.stdout
    # What was flushed is well formed: no ordering or timestamp problems, only the cut-off ends.
    assert "seq is not" not in chk.stdout and "before t_start" not in chk.stdout


def test_sigkill_replay_refuses_without_allow_partial(killed):
    out, _ = killed
    res = hindsight("replay", out)
    _no_traceback(res)
    assert res.returncode == 1
    assert "incomplete trace" in res.stderr and "--allow-partial" in res.stderr


def test_sigkill_replay_allow_partial_replays_the_consistent_cut(killed):
    out, _ = killed
    res = hindsight("replay", out, "--allow-partial", "--model", "measured", "--json")
    _no_traceback(res)
    assert res.returncode == 0, res.stderr
    assert "last consistent cut" in res.stderr and str(out) in res.stderr
    doc = json.loads(res.stdout)
    cut = doc["partial_cut"]
    assert 0 < cut["events_kept"] < cut["events_before"]
    assert doc["events"] == cut["events_kept"]
    # The measured model replays the cut exactly: proof that the cut is self-contained.
    assert doc["predicted_makespan_s"] == pytest.approx(doc["measured_makespan_s"], rel=1e-9)
    res = hindsight("replay", out, "--allow-partial", "--model", "loggps")
    assert res.returncode == 0, res.stderr


def test_consistent_cut_is_consistent(killed):
    from replay.matching import match_messages
    from replay.partial import cut_table

    out, _ = killed
    trace = tf.read_trace(out)
    table, cut = cut_table(trace.table, trace.manifest, trace.incomplete_ranks)
    cols, _ = tf.table_columns(table)
    match, problems = match_messages(cols)
    assert problems == []
    assert len(match.unmatched_send_rows) == 0 and len(match.unmatched_recv_rows) == 0
    # A prefix of every rank, nothing after the frontier.
    for r in range(3):
        seq = cols["seq"][cols["rank"] == r]
        assert list(seq) == list(range(len(seq)))
    assert cols["t_start"].max() <= cut.frontier_ns
    # Every kept collective has all three members.
    coll = tf.op_mask(cols["op"], tf.COLLECTIVE_OPS)
    counts = np.bincount(cols["rank"][coll], minlength=3)
    assert counts[0] == counts[1] == counts[2]


def _rows(rows: list[tuple]) -> dict[str, np.ndarray]:
    """Columns from (rank, op, t_start, t_end, peer, tag) rows in (rank, seq) order."""
    cols: dict[str, list] = {c: [] for c in tf.COLUMNS if c != "region"}
    seq: dict[int, int] = {}
    for rank, op, t0, t1, peer, tag in rows:
        cols["rank"].append(rank)
        cols["seq"].append(seq.setdefault(rank, 0))
        seq[rank] += 1
        cols["op"].append(tf.OP_CODE[op])
        cols["t_start"].append(t0)
        cols["t_end"].append(t1)
        cols["cpu_ns"].append(-1)
        cols["peer"].append(peer)
        cols["tag"].append(tag)
        cols["comm"].append(0)
        cols["nbytes"].append(8 if peer >= 0 else -1)
        cols["request"].append(-1)
        cols["root"].append(-1)
    return {k: np.array(v, np.int8 if k == "op" else np.int64) for k, v in cols.items()}


def test_consistent_cut_by_hand():
    from replay.partial import consistent_cut

    # Rank 1 died after its Send tag 1 (time 4). Rank 0's Recv tag 1 starts at 5, after the
    # frontier, so it goes; then rank 1's Send tag 1 has no receive left and goes too.
    cols = _rows([(0, "Send", 0, 1, 1, 0), (0, "Recv", 5, 6, 1, 1), (0, "Allreduce", 7, 8, -1, -1),
                  (1, "Recv", 0, 2, 0, 0), (1, "Send", 3, 4, 0, 1)])
    idx, cut = consistent_cut(cols, 2, [1], {"0": [0, 1]})
    assert idx.tolist() == [0, 3]
    assert cut.frontier_ns == 4 and cut.rows_kept == [1, 1] and cut.rows_before == [3, 2]
    # No dead rank, but a collective only rank 0 reached: it is cut, rank 1 keeps everything.
    cols = _rows([(0, "Send", 0, 1, 1, 0), (0, "Barrier", 2, 3, -1, -1),
                  (1, "Recv", 0, 2, 0, 0)])
    idx, cut = consistent_cut(cols, 2, [], {"0": [0, 1]})
    assert idx.tolist() == [0, 2] and cut.frontier_ns is None


# ------------------------------------------------------------------------------------------------
# SIGINT during collection (SIGTERM is in test_faults.py)


def test_sigint_flushes_every_rank_and_records_status(tmp_path):
    out = tmp_path / "int"
    # Ctrl-C reaches a foreground collect; a suite started with `&` from a script runs with
    # SIGINT ignored (POSIX, no job control), which collect would inherit and rightly keep.
    proc = subprocess.Popen([sys.executable, "-m", "hindsight.cli", "collect", "-n", "3",
                             "--program", str(PROGRAMS / "hang.py"), "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.time() + 90
        while not (out / tf.STAGING_DIR / "start.json").is_file() and time.time() < deadline:
            time.sleep(0.2)
        time.sleep(3)                 # the ranks reach the receive that never completes
        proc.send_signal(signal.SIGINT)   # Ctrl-C on `hindsight collect`
        stdout, stderr = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode != 0
    assert "Traceback" not in stdout + stderr
    manifest = json.loads((out / tf.MANIFEST_NAME).read_text())
    assert manifest["rank_status"] == ["terminated"] * 3
    assert manifest["launcher_exit_code"] == 130
    assert manifest["complete"] is False
    df = tf.read_trace(out).to_pandas()
    assert df.groupby("rank").size().to_dict() == {0: 10, 1: 10, 2: 10}


def _ranks_alive(trace_dir: Path) -> list[int]:
    """PIDs of processes whose command line names ``trace_dir`` (the job's ranks)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and d.name != str(os.getpid()):
            try:
                if str(trace_dir).encode() in (d / "cmdline").read_bytes():
                    out.append(int(d.name))
            except OSError:
                pass
    return out


def _hanging_job(out: Path, stderr: int) -> subprocess.Popen:
    """`hindsight collect` of two ranks that never end, tracing into ``out``, once its ranks
    run (the caller stops it and kills what is left)."""
    proc = subprocess.Popen([sys.executable, "-m", "hindsight.cli", "collect", "-n", "2",
                             "--program", str(PROGRAMS / "hang.py"), "--out", str(out)],
                            stdout=subprocess.DEVNULL, stderr=stderr, text=True, cwd=ROOT,
                            start_new_session=True)
    deadline = time.time() + 90
    while not (out / tf.STAGING_DIR / "start.json").is_file() and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(3)
    if not _ranks_alive(out):
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise AssertionError("the ranks should be running")
    return proc


def test_sigterm_to_collect_stops_the_whole_job(tmp_path):
    """`hindsight collect` terminated (a batch system's SIGTERM, `timeout`) stops mpiexec and the
    ranks too: mpiexec's proxy and the ranks run in sessions of their own, so killing collect or
    mpiexec's process group alone used to leave the ranks running."""
    out = tmp_path / "term"
    proc = _hanging_job(out, stderr=subprocess.PIPE)
    try:
        proc.send_signal(signal.SIGTERM)        # to collect alone, not to its process group
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for pid in _ranks_alive(out):
            os.kill(pid, signal.SIGKILL)
    assert proc.returncode != 0 and "Traceback" not in stderr
    deadline = time.time() + 10
    while _ranks_alive(out) and time.time() < deadline:
        time.sleep(0.2)
    assert not _ranks_alive(out)
    manifest = json.loads((out / tf.MANIFEST_NAME).read_text())
    assert manifest["complete"] is False and manifest["rank_status"] == ["terminated"] * 2


def test_sigkill_to_collect_stops_the_whole_job(tmp_path):
    """`hindsight collect` killed outright (SIGKILL, the out-of-memory killer, a test's timeout),
    which it cannot act on: mpiexec, started with a parent-death signal
    (``hindsight.system.dying_with_us``), stops the ranks all the same."""
    from hindsight.system import dying_with_us

    if dying_with_us(["x"]) == ["x"]:
        pytest.skip("no setpriv with --pdeathsig on this machine")
    out = tmp_path / "kill"
    proc = _hanging_job(out, stderr=subprocess.DEVNULL)
    try:
        proc.kill()                             # collect alone, not its process group
        proc.wait()
        deadline = time.time() + 15
        while _ranks_alive(out) and time.time() < deadline:
            time.sleep(0.2)
        left = _ranks_alive(out)
    finally:
        for pid in _ranks_alive(out):
            os.kill(pid, signal.SIGKILL)
    assert not left
    # the ranks were stopped by mpiexec's SIGTERM, so each saved its status
    sealed = hindsight("trace", "seal", out)
    assert "Traceback" not in sealed.stderr
    manifest = json.loads((out / tf.MANIFEST_NAME).read_text())
    assert manifest["rank_status"] == ["terminated"] * 2


# ------------------------------------------------------------------------------------------------
# Disk full, unwritable output directory


def _mount_tmpfs(where: Path, options: str) -> None:
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], check=True)


def test_unsealed_staging_folder_points_to_trace_seal(tmp_path):
    (tmp_path / "t" / tf.STAGING_DIR).mkdir(parents=True)
    res = hindsight("trace", "info", tmp_path / "t")
    assert res.returncode == 1 and res.stderr.startswith("Error: ")
    assert f"hindsight trace seal {tmp_path / 't'}" in res.stderr and "Traceback" not in res.stderr


@ROOT_ONLY
def test_disk_full_stops_the_run_cleanly(tmp_path):
    """Documented choice: the run stops (one line, no traceback) and the trace stays incomplete;
    the parts written before the disk filled stay readable."""
    mnt = tmp_path / "small"
    _mount_tmpfs(mnt, "size=256k")
    try:
        out = mnt / "trace"
        # the Python tracer's buffer of 16 events (the library's first window would not fit)
        res = hindsight("collect", "--recorder", "python", "-n", 2, "--program",
                        ROOT / "hindsight/examples/ring.py", "--out", out, "--", "--rounds", 3000,
                        "--work", 10, env={"HINDSIGHT_BUFFER_EVENTS": "16"}, timeout=300)
        text = res.stdout + res.stderr
        assert res.returncode != 0
        assert "Traceback" not in text
        assert "No space left on device" in text and "stopping the run" in text
        # collect then seals what the ranks staged; where even that finds no room it says so
        sealed = all((out / tf.rank_file_name(r)).is_file() for r in range(2))
        assert sealed or ("cannot finish the trace" in res.stderr and str(out) in res.stderr
                          and "file system is full" in res.stderr
                          and f"hindsight trace seal {out}" in res.stderr)
        # Nothing half-written: no temporary files, and no trace presented as complete.
        assert not list(out.glob(".*.tmp")) and not list(out.glob("rank-*.parquet.tmp"))
        manifest = json.loads((out / tf.MANIFEST_NAME).read_text())
        assert manifest["complete"] is False
        trace = tf.read_trace(out)
        assert not trace.complete and len(trace.table) > 0
        chk = hindsight("trace", "check", out)
        assert chk.returncode == 1 and "did not finish" in chk.stdout
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@ROOT_ONLY
@pytest.mark.parametrize("exists", [False, True])
def test_read_only_output_directory_is_refused_before_the_run(tmp_path, exists):
    mnt = tmp_path / "ro"
    if exists:
        _mount_tmpfs(mnt, "size=64k")
        (mnt / "trace").mkdir()
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
    else:
        _mount_tmpfs(mnt, "size=64k,ro")
    try:
        res = hindsight("collect", "-n", 2, "--program", ROOT / "hindsight/examples/ring.py",
                        "--out", mnt / "trace")
        assert res.returncode != 0
        _no_traceback(res)
        assert str(mnt / "trace") in res.stderr
        assert ("not writable" if exists else "Read-only file system") in res.stderr
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


# ------------------------------------------------------------------------------------------------
# Damaged or inconsistent traces (the rows test_faults.py does not cover)


@pytest.fixture(scope="module")
def ring2(tmp_path_factory):
    out = tmp_path_factory.mktemp("ring2") / "trace"
    res = hindsight("collect", "-n", 2, "--program", ROOT / "hindsight/examples/ring.py",
                    "--out", out, "--", "--rounds", 4, "--work", 100)
    assert res.returncode == 0, res.stderr
    return out


@pytest.fixture(scope="module")
def ring3(tmp_path_factory):
    out = tmp_path_factory.mktemp("ring3") / "trace"
    res = hindsight("collect", "-n", 3, "--program", ROOT / "hindsight/examples/ring.py",
                    "--out", out, "--", "--rounds", 4, "--work", 100)
    assert res.returncode == 0, res.stderr
    return out


def _edit(path: Path, fn) -> None:
    """Rewrite one rank file with some columns changed, keeping its hindsight metadata."""
    t = pq.read_table(path)
    meta = t.schema.metadata
    cols = {c: t.column(c).to_numpy().copy() for c in ("t_start", "t_end", "tag")}
    fn(cols, t.column("op").to_pylist())
    for c, v in cols.items():
        t = t.set_column(t.schema.get_field_index(c), tf.SCHEMA.field(c),
                         pa.array(v, tf.SCHEMA.field(c).type))
    pq.write_table(t.replace_schema_metadata(meta), path, **tf.WRITE_OPTIONS)


def _negative(cols, ops):
    cols["t_start"][2] = -5


def _reversed(cols, ops):
    i = 3
    cols["t_start"][i], cols["t_end"][i] = cols["t_end"][i] + 10, cols["t_start"][i]


def _unmatched(cols, ops):
    cols["tag"][ops.index("Sendrecv_recv")] = 777


def _skewed(cols, ops):
    # Rank 0's clock 1 s ahead: rank 1 receives what rank 0 "sends" a second later.
    cols["t_start"] += 1_000_000_000
    cols["t_end"] += 1_000_000_000


@pytest.mark.parametrize("rank, how, words", [
    (0, _negative, ["rank-00000.parquet", "negative timestamp -5"]),
    (0, _reversed, ["rank-00000.parquet", "seq 3", "is before t_start"]),
    (1, _unmatched, ["rank-00001.parquet", "tag 777", "has no matching send"]),
    (0, _skewed, ["rank-00001.parquet", "clock skew", "from rank 0 end before their send"]),
])
def test_inconsistent_times_and_messages_are_named(ring2, tmp_path, rank, how, words):
    bad = _damaged(ring2, tmp_path, lambda d: _edit(d / tf.rank_file_name(rank), how))
    chk = hindsight("trace", "check", bad)
    _no_traceback(chk)
    assert chk.returncode == 1
    for w in words:
        assert w in chk.stdout, (w, chk.stdout)
    if how is _unmatched:       # replay refuses it too, naming the trace and the message
        res = hindsight("replay", bad)
        assert res.returncode == 1 and str(bad) in res.stderr and "tag 777" in res.stderr
        _no_traceback(res)


def test_trace_check_tells_an_unreadable_trace_from_its_problems(ring2, tmp_path):
    """An unreadable trace is an error (TraceError: `Error:` on stderr, exit 1); the problems of
    a readable one are the result (stdout, exit 1), as lines or as a JSON document."""
    from hindsight.check import check_result, format_check
    assert check_result(ring2) == {"trace": str(ring2), "ok": True, "problems": []}
    assert format_check(check_result(ring2)) == f"{ring2}: ok"
    bad = _damaged(ring2, tmp_path, lambda d: _edit(d / tf.rank_file_name(0), _negative))
    doc = json.loads(format_check(check_result(bad), as_json=True))
    assert doc["ok"] is False and any("negative timestamp -5" in p for p in doc["problems"])
    with pytest.raises(tf.TraceError):
        check_result(tmp_path / "missing")


def test_file_from_another_rank_count(ring2, ring3, tmp_path):
    bad = _damaged(ring2, tmp_path,
                   lambda d: shutil.copy(ring3 / "rank-00001.parquet", d / "rank-00001.parquet"))
    for cmd in (["trace", "check", bad], ["trace", "info", bad], ["replay", bad]):
        res = hindsight(*cmd)
        _no_traceback(res)
        assert res.returncode != 0
        assert "rank-00001.parquet: written by a run of 3 ranks, the manifest says 2" in \
            res.stdout + res.stderr


def test_rows_claiming_another_rank(ring2, tmp_path):
    def lie(d):
        p = d / "rank-00000.parquet"
        t = pq.read_table(p)
        ranks = np.ones(len(t), np.int32)
        t = t.set_column(0, tf.SCHEMA.field("rank"), pa.array(ranks))
        pq.write_table(t.replace_schema_metadata(t.schema.metadata), p)

    bad = _damaged(ring2, tmp_path, lie)
    for cmd in (["trace", "check", bad], ["replay", bad]):
        res = hindsight(*cmd)
        _no_traceback(res)
        assert res.returncode != 0
        assert "rank-00000.parquet: row 0 says rank 1, the file is rank 0" in \
            res.stdout + res.stderr


@pytest.mark.parametrize("key, value, words", [
    ("ranks", "2", "'ranks' must be an integer"),
    ("ranks", 10**9, "'ranks' must be an integer"),
    ("run_id", 7, "'run_id' must be a string"),
    ("rank_status", ["complete"], "'rank_status' must list one status per rank"),
    ("communicators", {"0": [0, 5]}, "'communicators' must map ids"),
    ("clock", True, "'clock' has the wrong type"),
    # values the rank files contradict
    ("communicators", {"0": [0]}, "communicator 0 (MPI_COMM_WORLD) must hold every rank"),
    ("events", [3], "'events' must list one count (or null) per rank (2)"),
    ("events", [3, -1], "'events' must list one count (or null) per rank (2)"),
    ("makespan_ns", -5, "'makespan_ns' must be a number of ns >= 0, not -5"),
])
def test_manifest_with_wrong_types(ring2, tmp_path, key, value, words):
    def edit(d):
        m = json.loads((d / tf.MANIFEST_NAME).read_text())
        m[key] = value
        (d / tf.MANIFEST_NAME).write_text(json.dumps(m))

    bad = _damaged(ring2, tmp_path, edit)
    for cmd in (["trace", "check", bad], ["trace", "info", bad], ["replay", bad]):
        res = hindsight(*cmd)
        _no_traceback(res)
        assert res.returncode != 0
        assert "manifest.json" in res.stdout + res.stderr and words in res.stdout + res.stderr


def test_a_communicator_whose_members_leave_out_a_rank_that_uses_it(tmp_path):
    """The manifest lists a communicator without a rank whose rows use it: ``trace check``
    says so (replay refused such a trace, while the check said ok)."""
    bad = tmp_path / "t"
    shutil.copytree(ROOT / "tests" / "corpus" / "cc-tree-n4", bad)
    m = json.loads((bad / tf.MANIFEST_NAME).read_text())
    m["communicators"]["268180903"] = [0, 1, 2]
    (bad / tf.MANIFEST_NAME).write_text(json.dumps(m))
    res = hindsight("trace", "check", bad)
    _no_traceback(res)
    assert res.returncode == 1
    assert ("manifest.json: communicator 268180903 has members 0-2, but ranks outside them "
            "have rows on it (rank 3 among them)") in res.stdout
    res = hindsight("trace", "check", bad, "--window", "16")         # streamed: the same line
    assert res.returncode == 1 and ("communicator 268180903 has members 0-2, but ranks "
                                    "outside them have rows on it (rank 3 among them)") \
        in res.stdout


# ------------------------------------------------------------------------------------------------
# Nothing in a trace, profile or spec is executed; paths from files do not escape


def test_manifest_program_is_never_run(ring2, tmp_path):
    marker = tmp_path / "ran"
    evil = tmp_path / "evil.py"
    evil.write_text(f"open({str(marker)!r}, 'w').write('x')\n")

    def edit(d):
        m = json.loads((d / tf.MANIFEST_NAME).read_text())
        m["program"] = str(evil)
        m["args"] = {"argv": ["; touch " + str(marker)]}
        (d / tf.MANIFEST_NAME).write_text(json.dumps(m))

    bad = _damaged(ring2, tmp_path, edit)
    for cmd in (["trace", "info", bad], ["trace", "check", bad], ["replay", bad]):
        assert hindsight(*cmd).returncode == 0
    assert not marker.exists()


@pytest.mark.parametrize("where", ["size", "network"])
def test_spec_names_cannot_escape_the_output_directory(tmp_path, where):
    from validation.spec import SpecError, load_spec

    label = "../../../escaped"
    size = label if where == "size" else "small"
    net = label if where == "network" else "shm"
    spec = tmp_path / "spec.toml"
    spec.write_text(f'[networks."{net}"]\ntransport = "shm"\n\n[[experiment]]\n'
                    f'app = "sorting"\nparadigms = ["pipeline"]\nranks = [2]\n'
                    f'[experiment.sizes]\n"{size}" = ["--size", "1000"]\n')
    with pytest.raises(SpecError, match="may not contain '/'"):
        load_spec(spec)
    res = hindsight("validate", spec, "--out", tmp_path / "out")
    assert res.returncode != 0 and "may not contain '/'" in res.stderr
    _no_traceback(res)
    assert not (tmp_path.parent / "escaped").exists()


def test_threaded_read_gives_the_same_arrays_and_region_codes(tmp_path):
    """read_columns decodes files in threads with per-file region dictionaries and renumbers them
    in file order: the result must not depend on the thread count (region names first seen in a
    different order on each rank, a region only one rank has)."""
    from synthetic import write_trace

    def rank_cols(rank, names):
        n = len(names)
        t = np.arange(n, dtype=np.int64) * 10
        return {"op": ["region"] * n, "region": names, "t_start": t, "t_end": t + 5,
                "cpu_ns": np.full(n, -1), "peer": np.full(n, -1), "tag": np.full(n, -1),
                "comm": np.zeros(n, np.int64), "nbytes": np.full(n, -1),
                "request": np.full(n, -1), "root": np.full(n, -1)}

    d = write_trace(tmp_path / "t", [rank_cols(0, ["task", "merge", "task"]),
                                     rank_cols(1, ["merge", "io", None]),
                                     rank_cols(2, ["zeta", "task", "merge"])])
    one = tf.read_columns(d, threads=1)
    two = tf.read_columns(d, threads=2)
    assert one.region_names == two.region_names
    for c in tf.COLUMNS:
        assert np.array_equal(one.arrays[c], two.arrays[c]), c
    names = [one.region_names[i] if i >= 0 else None for i in one.arrays["region"]]
    assert names == ["task", "merge", "task", "merge", "io", None, "zeta", "task", "merge"]


def test_dictionary_codes_of_sliced_chunks_with_nulls_and_unknown_names():
    """The compiled decode of dictionary columns: a chunk that starts mid-byte of its validity
    bitmap, null rows, an op name this version lacks (-1), and indices past the dictionary (an
    error naming the file and column, not garbage codes)."""
    import pyarrow as pa

    names = pa.array(["Send", "MPI_Future", "Recv"])
    idx = pa.array([2, 0, None, 1, 2, None, 0, 0, 1, 2, None], pa.int8())
    chunk = pa.DictionaryArray.from_arrays(idx, names).slice(3, 7)
    got = tf.dict_codes(chunk, tf.OP_CODE, Path("f"), "op", np.empty(7, np.int8), grow=False)
    want = [-1, tf.OP_CODE["Recv"], -1, tf.OP_CODE["Send"], tf.OP_CODE["Send"], -1,
            tf.OP_CODE["Recv"]]
    assert got.tolist() == want
    regions: dict[str, int] = {"io": 0}
    got = tf.dict_codes(pa.DictionaryArray.from_arrays(idx, pa.array(["a", "io", "b"])),
                         regions, Path("f"), "region")
    assert regions == {"io": 0, "a": 1, "b": 2}  # new names numbered in dictionary order
    assert got.tolist() == [2, 1, -1, 0, 2, -1, 1, 1, 0, 2, -1]
    bad = pa.DictionaryArray.from_buffers(pa.dictionary(pa.int8(), pa.string()), 2,
                                          [None, pa.py_buffer(np.array([0, 5], np.int8))],
                                          dictionary=names)
    with pytest.raises(tf.TraceError, match="f: column 'op' has dictionary indices out of range"):
        tf.dict_codes(bad, tf.OP_CODE, Path("f"), "op", np.empty(2, np.int8), grow=False)


def test_constant_column_chunks_read_from_statistics_equal_decoding(tmp_path):
    """Column chunks whose footer statistics give one value (no nulls, min == max; a region
    column of nulls only) are filled, not decoded. The result must equal decoding: the same
    trace with its files rewritten without statistics, and the Arrow-table reader. Row groups
    differ (a column constant in one and not in the next), and the rank check still holds."""
    import pyarrow.parquet as pq

    from synthetic import write_trace

    def rank_cols(rank, n):
        t = np.arange(n, dtype=np.int64) * 10
        tag = np.zeros(n, np.int64)
        tag[n // 2 + 3:] = 7  # constant in the first row group only
        return {"op": ["Send" if rank == 0 else "Recv"] * n, "region": [None] * n,
                "t_start": t, "t_end": t + 5, "cpu_ns": np.full(n, -1),
                "peer": np.full(n, 1 - rank), "tag": tag, "comm": np.zeros(n, np.int64),
                "nbytes": np.full(n, 64), "request": np.full(n, -1), "root": np.full(n, -1)}

    d = write_trace(tmp_path / "t", [rank_cols(0, 40), rank_cols(1, 40)])
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / tf.MANIFEST_NAME).write_bytes((d / tf.MANIFEST_NAME).read_bytes())
    for f in sorted(d.glob("rank-*.parquet")):
        table = pq.read_table(f)
        opts = dict(tf.WRITE_OPTIONS, write_statistics=False)
        with pq.ParquetWriter(plain / f.name, table.schema, **opts) as w:
            for part in (table.slice(0, 20), table.slice(20)):  # two row groups
                w.write_table(part)
        stats = pq.read_metadata(f).row_group(0).column(0).statistics
        assert stats is not None and stats.min == stats.max  # the fast path is taken
        assert pq.read_metadata(plain / f.name).row_group(0).column(0).statistics is None
    fast = tf.read_columns(d)
    slow = tf.read_columns(plain)
    ref, _ = tf.table_columns(tf.read_trace(d).table)
    for c in tf.COLUMNS:
        assert np.array_equal(fast.arrays[c], slow.arrays[c]), c
        assert np.array_equal(fast.arrays[c], ref[c]), c
    assert fast.arrays["tag"].tolist()[:40] == [0] * 23 + [7] * 17


def test_files_with_narrow_dictionary_indices_read_the_same(tmp_path):
    """Files that store `op` and `region` with int8 and int16 Arrow
    indices (now int32): both read to the same arrays."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from synthetic import ring_columns, write_trace

    new = write_trace(tmp_path / "new", ring_columns(3, 5, allreduce=True))
    old = tmp_path / "old"
    old.mkdir()
    (old / tf.MANIFEST_NAME).write_bytes((new / tf.MANIFEST_NAME).read_bytes())
    for f in sorted(new.glob("rank-*.parquet")):
        t = pq.read_table(f)
        for name, width in (("op", pa.int8()), ("region", pa.int16())):
            i = t.schema.get_field_index(name)
            col = t.column(name).cast(pa.dictionary(width, pa.string()))
            t = t.set_column(i, pa.field(name, col.type, nullable=name == "region"), col)
        t = t.replace_schema_metadata(pq.read_table(f).schema.metadata)
        pq.write_table(t, old / f.name, **tf.WRITE_OPTIONS)
        assert pq.read_schema(old / f.name).field("op").type.index_type == pa.int8()
    a, b = tf.read_columns(new), tf.read_columns(old)
    for c in tf.COLUMNS:
        assert np.array_equal(a.arrays[c], b.arrays[c]), c


# ------------------------------------------------------------------------------------------------
# The collectives' check, against a plain scan


def _collectives_by_scan(cols, ops, manifest, files, seen=None):
    """The check as a plain scan of the rows (each rank's (op, root) list per communicator,
    compared with the first member's): the reference the compiled-array check must equal."""
    from collections import defaultdict

    from hindsight.check import _name, collective_mismatch

    out = []
    seqs = defaultdict(lambda: defaultdict(list))
    for i in np.flatnonzero(tf.op_mask(ops, tf.COLLECTIVE_OPS | tf.COMM_OPS)):
        seqs[int(cols["comm"][i])][int(cols["rank"][i])].append((_name(int(ops[i])),
                                                                 int(cols["root"][i])))
    comms = manifest.get("communicators") or {}
    for cid, by_rank in seqs.items():
        members = comms.get(str(cid))
        if members is None and cid == tf.COMM_SELF_ID:
            continue
        if members is None:
            out.append(f"{tf.MANIFEST_NAME}: communicator {cid} used for collectives but its "
                       "members are not recorded")
            continue
        ref = by_rank.get(members[0], [])
        for r in members[1:]:
            mine = by_rank.get(r, [])
            if mine != ref:
                k = next((j for j, (a, b) in enumerate(zip(ref, mine)) if a != b),
                         min(len(ref), len(mine)))
                a = ref[k] if k < len(ref) else None
                b = mine[k] if k < len(mine) else None
                before = seen.get(cid, 0) if seen is not None else 0
                out.append(collective_mismatch(files[r], before + k, cid, r, b, members[0], a))
    if seen is not None:
        for cid, by_rank in seqs.items():
            seen[cid] = seen.get(cid, 0) + max(len(v) for v in by_rank.values())
    return out


@pytest.mark.parametrize("seed", range(40))
def test_the_collectives_check_says_what_a_plain_scan_says(seed):
    """Random rows (collectives, point-to-point calls and regions on four communicators, one of
    them without recorded members, COMM_SELF among them; ranks that skip, add or change a
    collective or its root): the same lines, in the same order, and the same counts carried to
    the next segment of a streamed check."""
    from hindsight.check import _check_collectives

    rng = np.random.default_rng(seed)
    P = int(rng.integers(1, 6))
    names = ["Allreduce", "Bcast", "Barrier", "Reduce", "Send", "Recv", "region", "Comm_split"]
    codes = np.array([tf.OP_CODE[x] for x in names], np.int8)
    comm_ids = [0, 5, tf.COMM_SELF_ID, 9]
    rows = {"rank": [], "op": [], "comm": [], "root": []}
    base = rng.integers(0, len(codes), 30)
    for r in range(P):
        seq = base.copy()
        if rng.random() < 0.5:
            seq[rng.integers(0, len(seq))] = rng.integers(0, len(codes))
        seq = seq[: len(seq) - int(rng.integers(0, 3))] if rng.random() < 0.3 else seq
        for c in seq:
            rows["rank"].append(r)
            rows["op"].append(codes[c])
            rows["comm"].append(comm_ids[int(rng.integers(0, 4))] if rng.random() < 0.2 else 0)
            rows["root"].append(int(rng.integers(0, 2)) if rng.random() < 0.2 else 0)
    cols = {k: np.asarray(v, np.int8 if k == "op" else np.int64) for k, v in rows.items()}
    manifest = {"communicators": {"0": list(range(P)), "5": list(range(P))[::-1]}}
    files = {r: f"rank-{r}.parquet" for r in range(P)}
    seen_a, seen_b = {0: 3, 5: 1}, {0: 3, 5: 1}
    want = _collectives_by_scan(cols, cols["op"], manifest, files, seen_a)
    got = _check_collectives(cols, cols["op"], manifest, files, seen_b)
    assert got == want
    assert seen_b == seen_a
    assert _check_collectives(cols, cols["op"], manifest, files) == \
        _collectives_by_scan(cols, cols["op"], manifest, files)


def test_write_trace_makes_ranks_on_threads_and_keeps_their_order(tmp_path):
    """``write_trace`` makes, encodes and writes ranks on threads: ranks finishing out of order
    still give the manifest's per-rank counts and makespan, and an error making one rank is
    the call's error, not lost on its thread."""
    from synthetic import write_trace

    def rank_cols(rank):
        n = 1 + 7 * rank % 5                           # (sizes differ from rank to rank)
        t = np.arange(n, dtype=np.int64) * 10 + rank
        return {"op": ["region"] * n, "region": ["w"] * n, "t_start": t, "t_end": t + 5,
                "cpu_ns": np.full(n, -1), "peer": np.full(n, -1), "tag": np.full(n, -1),
                "comm": np.zeros(n, np.int64), "nbytes": np.full(n, -1),
                "request": np.full(n, -1), "root": np.full(n, -1)}

    class Slow:
        def __init__(self, bad=None):
            self.bad = bad

        def __len__(self):
            return 9

        def __getitem__(self, r):
            if r == self.bad:
                raise ValueError(f"rank {r} cannot be made")
            time.sleep(random.random() * 0.02)        # (threads finish out of order)
            return rank_cols(r)

    d = write_trace(tmp_path / "t", Slow())
    m = tf.read_manifest(d)
    assert m["events"] == [len(rank_cols(r)["op"]) for r in range(9)]
    assert m["makespan_ns"] == max(int(rank_cols(r)["t_end"].max()) for r in range(9))
    cols = tf.read_columns(d).arrays
    assert np.array_equal(cols["rank"], np.repeat(np.arange(9), m["events"]))
    with pytest.raises(ValueError, match="rank 4 cannot be made"):
        write_trace(tmp_path / "u", Slow(bad=4))


def test_clock_skew_lines_count_each_pair_and_name_its_worst():
    """One line per (sender, receiver) pair: how many receives ended before their send began,
    and the first of the largest gaps (grouped in one pass: a row missing from a rank file
    shifts every later match, and a line per message looked up pair by pair took minutes)."""
    from types import SimpleNamespace

    from hindsight.check import _check_causality

    # rows 0-5 are sends, rows 6-11 the receives that complete them
    t_start = np.array([10, 20, 30, 40, 50, 60, 0, 0, 0, 0, 0, 0], np.int64)
    t_end = np.array([0, 0, 0, 0, 0, 0, 5, 25, 1, 35, 2, 100], np.int64)
    seq = np.arange(12, dtype=np.int64)
    match = _Match(SimpleNamespace(
        src=np.array([0, 0, 2, 0, 2, 1]), dst=np.array([1, 1, 1, 1, 0, 0]),
        send_row=np.arange(6), recv_done_row=np.arange(6, 12)))
    files = {0: "rank-0", 1: "rank-1", 2: "rank-2"}
    lines = _check_causality({"t_start": t_start, "t_end": t_end, "seq": seq}, match, files)
    # 0 -> 1: gaps 5 (seq 6), -5, 5 (seq 9): two, the first of the largest; 2 -> 1: 29;
    # 2 -> 0: 48; 1 -> 0: -40 (fine)
    assert lines == [
        "rank-1: clock skew: 2 receive(s) from rank 0 end before their send started (worst: seq "
        "6 ends 5 ns before rank 0 seq 0 starts)",
        "rank-0: clock skew: 1 receive(s) from rank 2 end before their send started (worst: seq "
        "10 ends 48 ns before rank 2 seq 4 starts)",
        "rank-1: clock skew: 1 receive(s) from rank 2 end before their send started (worst: seq "
        "8 ends 29 ns before rank 2 seq 2 starts)"]


class _Match:
    """A MessageMatch stand-in with only what the causality check reads."""

    def __init__(self, ns):
        self.src, self.dst = ns.src, ns.dst
        self.send_row, self.recv_done_row = ns.send_row, ns.recv_done_row

    def __len__(self) -> int:
        return len(self.send_row)


def test_a_file_with_rows_lost_after_the_run_is_named(ring2, tmp_path):
    """A rank file rewritten without its last rows keeps a consistent seq: only the manifest's
    count of its events tells; trace check names the file and both counts, in memory and
    streamed."""
    def drop_last(d: Path) -> None:
        path = d / tf.rank_file_name(1)
        t = pq.read_table(path)
        pq.write_table(t.slice(0, t.num_rows - 2).replace_schema_metadata(t.schema.metadata),
                       path, **tf.WRITE_OPTIONS)

    bad = _damaged(ring2, tmp_path, drop_last)
    said = tf.read_manifest(bad)["events"][1]
    want = (f"{bad / tf.rank_file_name(1)}: holds {said - 2} events, the manifest counted "
            f"{said} for rank 1 (rows were lost or added after the run)")
    for extra in ([], ["--window", "16"]):
        chk = hindsight("trace", "check", bad, *extra)
        assert chk.returncode == 1 and want in chk.stdout.splitlines(), chk.stdout
    assert hindsight("trace", "check", ring2).returncode == 0
