"""An mpi4py program traced by the PMPI library (preloaded into the Python ranks): mpi4py 4
calls MPI 4's large-count variants (MPI_Isend_c, MPI_Recv_c, MPI_Allreduce_c...) and receives a
pickle-API message by MPI_Mprobe + MPI_Mrecv_c; the library records them as the Python tracer
records the same calls, and accepts the MPI_THREAD_MULTIPLE mpi4py asks for by default when
HINDSIGHT_MULTIPLE_IS_DEFAULT=1 says it is the default."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hindsight import trace as tf
from instrument import native
from instrument.seal import finalize_manifest
from tests.conftest import PROGRAMS, hindsight

pytestmark = pytest.mark.skipif(native.find_mpicc() is None,
                                reason="no mpicc: the PMPI library cannot be built here")

MPIEXEC = os.path.join(os.path.dirname(sys.executable), "mpiexec")


def _run(out: Path, program: Path, multiple_is_default: bool) -> subprocess.CompletedProcess:
    """`program` on 2 Python ranks with the library preloaded, sealed into `out`."""
    env = dict(os.environ)
    env.update(native.prepare(out, 2, str(program), [], env))
    if multiple_is_default:
        env["HINDSIGHT_MULTIPLE_IS_DEFAULT"] = "1"
    done = subprocess.run([MPIEXEC, "-n", "2", sys.executable, str(program)], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    native.finish(out)
    finalize_manifest(out, launcher_exit=done.returncode)
    return done


COLUMNS = ["rank", "op", "peer", "tag", "comm", "nbytes", "request", "root"]


def test_an_mpi4py_program_gives_the_python_tracers_rows(tmp_path):
    """pmpi_mpi4py.py: the library's rows equal the Python tracer's field for field (times
    aside): Irecv/Isend posts and their Waitall rows, Send/Recv, a pickle-API recv as a Probe
    and a Recv row of the pickle's size; nothing counted as untraced; the trace checks and
    replays."""
    prog = PROGRAMS / "pmpi_mpi4py.py"
    out = tmp_path / "t"
    done = _run(out, prog, True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"
    m = tf.read_manifest(out)
    assert m["complete"] and m["tracer"] == "pmpi" and m["untraced_calls"] == {}
    assert m["program_kind"] == "python"        # (its calls were made through mpi4py)
    df = tf.read_trace(out).to_pandas()[COLUMNS]
    py = tmp_path / "py"
    res = hindsight("collect", "-n", 2, "--program", prog, "--out", py)
    assert res.returncode == 0, res.stderr
    assert tf.read_manifest(py)["untraced_calls"] == {}
    expected = tf.read_trace(py).to_pandas()[COLUMNS]
    for frame in (df, expected):
        frame["op"] = frame["op"].astype(str)
    assert df.reset_index(drop=True).equals(expected.reset_index(drop=True)), \
        df.compare(expected)
    sends = df[(df["op"] == "Send") & (df["tag"] >= 30)].set_index("tag")["nbytes"]
    for tag, receiver in ((30, 1), (31, 0)):
        got = df[(df["rank"] == receiver) & (df["tag"] == tag)]
        assert list(got["op"]) == ["Probe", "Recv"]
        assert list(got["peer"]) == [1 - receiver] * 2
        assert list(got["nbytes"]) == [sends[tag]] * 2 and sends[tag] > 20
    assert (df["op"] == "Waitall").sum() == 12 and (df["op"] == "Allreduce").sum() == 2
    res = hindsight("trace", "check", out)
    assert res.returncode == 0 and res.stdout.strip() == f"{out}: ok", res.stdout + res.stderr
    res = hindsight("replay", out)
    assert res.returncode == 0 and "predicted" in res.stdout, res.stderr


def test_thread_multiple_asked_by_default_only_is_accepted(tmp_path):
    """Without HINDSIGHT_MULTIPLE_IS_DEFAULT=1 the level mpi4py asks for is refused as a
    program's own request for it."""
    done = _run(tmp_path / "t", PROGRAMS / "pmpi_mpi4py.py", False)
    assert done.returncode != 0
    assert "asks for MPI_THREAD_MULTIPLE" in done.stderr
