"""`hindsight sweep --executor mpi`: configurations distributed with mpi4py.futures over the ranks
of `mpiexec -n 3`, with rows identical to the local executor's."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys

import pandas as pd
import pytest

from hindsight import testbed as tb
from hindsight import collect
from hindsight.collect import find_mpiexec, launch_env
from tests.conftest import ROOT, hindsight

VARY = ["--vary", "L=1us..100us:log:4", "--vary", "G=0.01ns,0.1ns,1ns"]


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "trace"
    res = hindsight("collect", "-n", 2, "--program", ROOT / "hindsight/examples/ring.py",
                    "--out", out, "--", "--rounds", 4, "--work", 100)
    assert res.returncode == 0, res.stderr
    return out


def _under_futures(*args, nprocs: int = 3) -> subprocess.CompletedProcess:
    """`mpiexec -n P python -m mpi4py.futures ARGS` with the project importable."""
    cmd = [find_mpiexec(), "-n", str(nprocs), sys.executable, "-m", "mpi4py.futures",
           *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, env=launch_env(nprocs), cwd=ROOT,
                          timeout=300)


@pytest.mark.parametrize("model", ["loggps", "hockney"])
def test_mpi_sweep_equals_local_sweep(trace, tmp_path, model):
    local, mpi = tmp_path / "local.csv", tmp_path / "mpi.csv"
    vary = VARY if model == "loggps" else ["--vary", "l=1us..100us:log:4", "--vary",
                                           "g=0.01ns,0.1ns,1ns"]
    res = hindsight("sweep", trace, "--model", model, *vary, "--out", local)
    assert res.returncode == 0, res.stderr
    res = _under_futures("-m", "hindsight.cli", "sweep", trace, "--model", model, *vary,
                         "--out", mpi, "--executor", "mpi")
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    a, b = pd.read_csv(local), pd.read_csv(mpi)
    assert len(a) == 12
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert local.read_bytes() == mpi.read_bytes()


def test_configurations_run_on_the_worker_ranks(trace, tmp_path):
    """The work really is distributed: every configuration ran on rank 1 or 2, not on rank 0."""
    script = tmp_path / "where.py"
    script.write_text(
        "import json\n"
        "from replay.executors import run_points\n"
        "def where(prep, i):\n"
        "    from mpi4py import MPI\n"
        "    return {'i': i, 'rank': MPI.COMM_WORLD.Get_rank()}\n"
        "rows = run_points('mpi', None, where, 12)\n"
        "print(json.dumps(rows))\n")
    res = _under_futures(script)
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout.strip().splitlines()[-1])
    assert [r["i"] for r in rows] == list(range(12))       # configuration order kept
    assert {r["rank"] for r in rows} <= {1, 2}             # ran on the workers, not on rank 0


def test_mpi_executor_outside_mpiexec_is_one_clear_line(trace, tmp_path):
    res = hindsight("sweep", trace, *VARY, "--out", tmp_path / "x.csv", "--executor", "mpi")
    assert res.returncode == 1
    assert "Traceback" not in res.stderr
    assert "python -m mpi4py.futures" in res.stderr
    assert not (tmp_path / "x.csv").exists()


def test_unknown_executor_is_a_usage_error(trace, tmp_path):
    res = hindsight("sweep", trace, *VARY, "--out", tmp_path / "x.csv", "--executor", "dask")
    assert res.returncode == 2 and "--executor" in res.stderr


@pytest.mark.skipif(os.geteuid() != 0 or not all(tb._tool(t) for t in ("ip", "tc")),
                    reason="the testbed needs root and iproute2 (ip, tc)")
def test_mpi_sweep_across_testbed_nodes_equals_local_sweep(trace, tmp_path):
    """The job of docs/replay.md's scaling table: rank 0 and its workers in two testbed nodes
    (cyclic: the worker on the other node), MPI on TCP through the veth links."""
    name = "s" + secrets.token_hex(3)
    local, mpi = tmp_path / "local.csv", tmp_path / "mpi.csv"
    res = hindsight("sweep", trace, *VARY, "--out", local)
    assert res.returncode == 0, res.stderr
    cmd = [find_mpiexec(), "-n", "3", sys.executable, "-m", "mpi4py.futures", "-m",
           "hindsight.cli", "sweep", str(trace), *VARY, "--out", str(mpi), "--executor", "mpi"]
    try:
        tb.up(name, nodes=2, rate="1gbit")
        cmd, env, state, network = collect.testbed_launch(cmd, launch_env(3, "tcp"), 3, name,
                                                  placement="cyclic")
        assert network["node_of_rank"] == [0, 1, 0]
        before = tb.counters(state)
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT,
                             timeout=300)
        sent = tb.counters_delta(before, tb.counters(state))
    finally:
        tb.down(name)
    assert res.returncode == 0, res.stderr[-2000:]
    assert local.read_bytes() == mpi.read_bytes()
    # the prepared trace went to the worker on node 1 over its link
    import pickle

    import replay
    prepared = len(pickle.dumps(replay.prepare(trace), protocol=pickle.HIGHEST_PROTOCOL))
    assert sent[f"{name}-n1"]["rx"] > prepared, (sent, prepared)
