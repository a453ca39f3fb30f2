"""`hindsight collect --recorder pmpi`: a Python program's MPI calls recorded by the PMPI library
below mpi4py (instrument/run.py, docs/native.md) instead of the Python tracer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import pytest

from hindsight import trace as tf
from instrument import native
from tests.conftest import PROGRAMS, ROOT, hindsight, model_notes

pytestmark = pytest.mark.skipif(native.find_mpicc() is None,
                                reason="no mpicc: the PMPI library cannot be built here")

COLS = ["rank", "op", "peer", "tag", "comm", "nbytes", "root"]


def _collect(out, program, n: int = 2, *extra, recorder: str = "pmpi"):
    res = hindsight("collect", "-n", n, "--program", program, "--out", out,
                    "--recorder", recorder, *extra)
    return res


def test_rows_are_the_python_tracers(tmp_path):
    """p2p_all.py (every kind of point-to-point call and collective, pickle API included) at
    P = 3: the library writes the rows the Python tracer writes, call for call (one size aside),
    and leaves no call uncounted; the trace checks and replays."""
    lib, py = tmp_path / "lib", tmp_path / "py"
    res = _collect(lib, PROGRAMS / "p2p_all.py", 3)
    assert res.returncode == 0, res.stderr
    assert _collect(py, PROGRAMS / "p2p_all.py", 3, recorder="python").returncode == 0
    m = tf.read_manifest(lib)
    assert m["tracer"] == "pmpi" and m["complete"] and not m.get("untraced_calls")
    a = tf.read_trace(lib).to_pandas()
    b = tf.read_trace(py).to_pandas()
    for r in range(3):
        assert Counter(a[a["rank"] == r]["op"].astype(str)) == \
            Counter(b[b["rank"] == r]["op"].astype(str)), r
    rows = [x[COLS].astype({"op": str}).reset_index(drop=True) for x in (a, b)]
    # one difference, documented (docs/native.md): a pickle-API irecv without a buffer posts
    # mpi4py's default buffer, whose size the library sees; the Python tracer records -1
    differ = (rows[0] != rows[1]).any(axis=1)
    assert list(rows[0][differ]["op"]) == ["Irecv"] and list(rows[0][differ]["tag"]) == [34]
    assert list(rows[0][differ]["nbytes"]) == [32768] and list(rows[1][differ]["nbytes"]) == [-1]
    check = hindsight("trace", "check", lib)
    assert check.returncode == 0 and check.stdout.strip() == f"{lib}: ok", check.stdout
    rep = hindsight("replay", lib, "--model", "loggps")
    assert rep.returncode == 0, rep.stderr


def test_one_sided_rows_are_the_python_tracers(tmp_path):
    """rma.py (fence, PSCW, lock_all and lock epochs) at P = 3: the library records mpi4py's
    window calls as the one-sided rows the Python tracer writes (Win_post/Win_start per group member, a
    Win_test row for the Test that returned true only); the trace checks and replays."""
    lib, py = tmp_path / "lib", tmp_path / "py"
    assert _collect(lib, PROGRAMS / "rma.py", 3).returncode == 0
    assert _collect(py, PROGRAMS / "rma.py", 3, recorder="python").returncode == 0
    assert not tf.read_manifest(lib).get("untraced_calls")
    one_sided = tf.RMA_OPS | tf.RMA_LOCK_OPS | tf.RMA_PSCW_OPS | {"Win_create", "Win_fence",
                                                                  "Win_free"}
    rows = []
    for d in (lib, py):
        df = tf.read_trace(d).to_pandas()[COLS].astype({"op": str})
        rows.append(df[df["op"].isin(one_sided)].reset_index(drop=True))
    assert len(rows[0]) == 26 + 23 + 23 and rows[0].equals(rows[1])
    assert (rows[0]["op"] == "Win_test").sum() == 3
    check = hindsight("trace", "check", lib)
    assert check.returncode == 0 and check.stdout.strip() == f"{lib}: ok", check.stdout
    rep = hindsight("replay", lib, "--model", "loggp")
    assert rep.returncode == 0 and not model_notes(rep.stderr), rep.stderr


def test_thread_multiple_asked_by_the_program_is_refused(tmp_path):
    """mpi4py's own default request for MPI_THREAD_MULTIPLE is accepted (every test here runs
    with it); a program that asks for it itself is refused by the library in one line."""
    res = _collect(tmp_path / "t", PROGRAMS / "thread_multiple.py")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: ") and "MPI_THREAD_MULTIPLE" in last, res.stderr
    assert "done" not in res.stdout


def test_a_stopped_rank_names_its_python_line_and_its_call(tmp_path):
    """deadlock.py stopped by --timeout: the call from the library's record, the line from
    Python's stack dump chained before it (instrument.stopped)."""
    out = tmp_path / "t"
    res = _collect(out, PROGRAMS / "deadlock.py", 2, "--timeout", "4")
    assert res.returncode == 1
    stopped = json.loads((out / "manifest.json").read_text())["stopped_in"]
    assert stopped == {"0": {"call": "Recv", "where": "deadlock.py:10"},
                       "1": {"call": "Recv", "where": "deadlock.py:12"}}, stopped


def test_a_program_is_recorded_by_the_library_by_default(tmp_path):
    """Without --recorder a Python program is recorded by the library (`auto`), and its untraced
    run loads the library with recording off, as the traced run's comparison needs."""
    out, bare = tmp_path / "t", tmp_path / "u"
    res = hindsight("collect", "-n", 3, "--program", PROGRAMS / "p2p_all.py", "--out", out)
    assert res.returncode == 0, res.stderr
    m = tf.read_manifest(out)
    assert m["tracer"] == "pmpi" and m["complete"], m
    res = hindsight("collect", "-n", 3, "--program", PROGRAMS / "p2p_all.py", "--out", bare,
                    "--untraced")
    assert res.returncode == 0, res.stderr
    assert json.loads((bare / "manifest.json").read_text())["tracer"] == "pmpi"


@pytest.mark.parametrize("recorder", ["pmpi", "python"])
def test_the_untraced_run_of_a_program_is_the_program_alone(tmp_path, recorder):
    """Whichever recorder the traced runs have, the untraced run is `python prog.py`: no module
    of hindsight loaded, only `atexit` and the `sitecustomize` that marks the end more than the
    program under plain `mpiexec`; its wall time ends when the program's code has run, not
    in the interpreter's teardown (2 s of sleep here); a sitecustomize.py the user had on
    PYTHONPATH still runs."""
    from hindsight.collect import find_mpiexec, launch_env

    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text(
        f"open({str(tmp_path / 'ran')!r}, 'a').write('x')\n")
    out = tmp_path / "u"
    res = hindsight("collect", "-n", 2, "--program", PROGRAMS / "teardown.py", "--out", out,
                    "--untraced", "--recorder", recorder, "--", tmp_path / "untraced",
                    env={"PYTHONPATH": f"{theirs}{os.pathsep}{ROOT}"})
    assert res.returncode == 0, res.stderr
    m = json.loads((out / "manifest.json").read_text())
    assert m["traced"] is False and m["complete"] and m["launch"] == "plain", m
    assert 0.2 <= m["wall_ns"] / 1e9 < 2.0, m["wall_ns"]
    assert (tmp_path / "ran").read_text() == "xxx"      # in `hindsight` and in both ranks
    plain = subprocess.run([find_mpiexec(), "-n", "2", sys.executable,
                            str(PROGRAMS / "teardown.py"), str(tmp_path / "plain")],
                           env={**os.environ, **launch_env(2)}, capture_output=True, text=True,
                           timeout=120)
    assert plain.returncode == 0, plain.stderr
    for r in range(2):
        untraced = set((tmp_path / f"untraced.{r}").read_text().split())
        alone = set((tmp_path / f"plain.{r}").read_text().split())
        assert untraced - alone <= {"atexit", "sitecustomize"}, untraced - alone
        assert not any(n.split(".")[0] in ("hindsight", "instrument") for n in untraced)


def test_a_program_that_marks_regions_gets_the_python_tracer(tmp_path):
    """A program importing instrument is recorded by the Python tracer under `auto` (its regions
    are in the trace); asking for the library for it is a usage error, not regions dropped."""
    out = tmp_path / "t"
    res = hindsight("collect", "-n", 2, "--program", PROGRAMS / "program_regions.py", "--out", out)
    assert res.returncode == 0, res.stderr
    assert "tracer" not in tf.read_manifest(out)      # the Python tracer's manifest
    ops = tf.read_trace(out).to_pandas()
    assert (ops["op"].astype(str) == "region").sum() == 2, ops
    res = _collect(tmp_path / "p", PROGRAMS / "program_regions.py")
    assert res.returncode == 2 and not (tmp_path / "p").exists()
    assert res.stderr.strip() == (
        f"Error: --recorder pmpi: {PROGRAMS / 'program_regions.py'} imports instrument, whose "
        "regions only the Python tracer records: use --recorder python (or auto)")


def test_a_specs_program_defaults_to_the_library(tmp_path):
    """A spec's program cell resolves `auto` as collect does; `pmpi` for a program that imports
    instrument is a spec error naming the experiment."""
    from validation.spec import SpecError, load_spec

    def spec(extra: str, program) -> str:
        f = tmp_path / "s.toml"
        f.write_text(f'name = "s"\n[networks.shm]\ntransport = "shm"\n[[experiment]]\n'
                     f'program = "{program}"\nranks = [2]\n{extra}'
                     '[experiment.sizes]\n"a" = []\n')
        return f
    cells = load_spec(spec("", PROGRAMS / "p2p_all.py")).cells
    assert {c.recorder for c in cells} == {"pmpi"}
    cells = load_spec(spec("", PROGRAMS / "program_regions.py")).cells
    assert {c.recorder for c in cells} == {"python"}
    with pytest.raises(SpecError, match=r"experiment.*'recorder' pmpi: .*imports instrument"):
        load_spec(spec('recorder = "pmpi"\n', PROGRAMS / "program_regions.py"))


def test_the_recorder_is_for_programs_only(tmp_path):
    res = hindsight("collect", "sorting", "-n", 2, "--recorder", "pmpi", "--out", tmp_path / "t")
    assert res.returncode == 2
    assert res.stderr.strip() == ("Error: --recorder pmpi is for a --program: an application "
                                  "records its calls through instrument's Python API")


def test_a_rank_that_raises_leaves_its_error_and_ends_the_job(tmp_path):
    """raises.py: rank 1 raises while rank 0 waits for it; the job ends (the launcher aborts it
    as the Python tracer does), rank 1 is marked `error` with its exception in the manifest."""
    out = tmp_path / "t"
    res = _collect(out, PROGRAMS / "raises.py", 2, "--timeout", "60")
    assert res.returncode == 1 and "timed out" not in res.stderr
    m = json.loads((out / "manifest.json").read_text())
    assert m["rank_errors"] == {"1": "RuntimeError: deliberate failure on rank 1"}
    assert m["rank_status"][1] == "error" and not m["complete"]


def test_the_wall_time_ends_where_the_program_ends(tmp_path):
    """The library's wall time ends when the program's code returns (the launcher marks it), as
    the Python tracer's and an untraced run's do, not when mpi4py finalizes MPI in the
    interpreter's teardown: an atexit handler sleeping 2 s after the program is not in it."""
    prog = tmp_path / "late_exit.py"
    prog.write_text("import atexit, time\nfrom mpi4py import MPI\n"
                    "atexit.register(time.sleep, 2.0)\nMPI.COMM_WORLD.Barrier()\n")
    out = tmp_path / "t"
    res = _collect(out, prog, 2)
    assert res.returncode == 0, res.stderr
    m = tf.read_manifest(out)
    assert m["complete"] and 0 < m["wall_ns"] < 1.5e9, m["wall_ns"]
    assert m["wall_ns"] >= m["makespan_ns"]


@pytest.mark.parametrize("recorder", ["python", "pmpi"])
def test_a_rank_that_exits_non_zero_is_an_error_and_ends_the_job(tmp_path, recorder):
    """sys.exit(3) on one rank while the other waits: the job is aborted with that status (as
    `python -m mpi4py` aborts), not left to hang until --timeout; the rank is marked `error`
    with `SystemExit: 3`, by either recorder."""
    out = tmp_path / "t"
    res = _collect(out, PROGRAMS / "exits.py", 2, "--timeout", "60", recorder=recorder)
    assert res.returncode == 1 and "timed out" not in res.stderr, res.stderr
    assert "could not write trace" not in res.stderr
    m = json.loads((out / "manifest.json").read_text())
    assert m["rank_status"][1] == "error" and m["rank_errors"] == {"1": "SystemExit: 3"}, m
