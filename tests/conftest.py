"""Shared helpers: run the real `hindsight` CLI (which runs real mpiexec) in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = ROOT / "tests" / "programs"


@pytest.fixture(autouse=True)
def _streams_written():
    """A replay writes the kernel stream it built on a thread (``replay.cache.
    save_stream_behind``): each test's writes end with the test, before its monkeypatches are
    undone or its directories inspected by the next."""
    yield
    cache = sys.modules.get("replay.cache")
    if cache is not None:
        cache.flush_streams()


def hindsight(*args: str, env: dict | None = None, timeout: float = 180,
              cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run `hindsight ARGS` as a user would; returns the completed process (text output)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "hindsight.cli", *map(str, args)],
                          capture_output=True, text=True, env=full_env, timeout=timeout,
                          cwd=cwd or ROOT)


def run_mpi_script(tmp_path: Path, nprocs: int, code: str, timeout: float = 120):
    """Run ``code`` as a script under ``mpiexec -n NPROCS`` with this interpreter and this test
    run's import path (a calibration probe, as the benchmark runs it); the script gets the path of
    a JSON file as argv[1], whose content is returned parsed. Fails the test on a non-zero exit."""
    import json

    from hindsight.collect import find_mpiexec, launch_env
    script, res = tmp_path / "probe.py", tmp_path / "probe.json"
    script.write_text(code)
    env = {**os.environ, **launch_env(nprocs), "PYTHONPATH": os.pathsep.join(sys.path)}
    run = subprocess.run([find_mpiexec(), "-n", str(nprocs), sys.executable, str(script),
                          str(res)], env=env, capture_output=True, text=True, timeout=timeout)
    assert run.returncode == 0, run.stderr
    return json.loads(res.read_text())


def hand_profile(path: Path, **sections) -> Path:
    """A small TOML profile for hand-computed replays, written to ``path`` (us): LogGPS o_send 3,
    o_recv 2, L 1, G = g = O = 0, S 4 KiB; Hockney l 5; plus ``sections`` (those not None)."""
    import tomli_w

    us = 1e-6
    doc = {"format": "hindsight-profile/1",
           "measured_on": {"transport": "shm", "ranks": 2},
           "loggps": {"L": 1 * us, "o_send": 3 * us, "o_recv": 2 * us, "g": 0.0, "G": 0.0,
                      "S": 4096.0, "O": 0.0, "o_a": 3 * us, "o_b": 0.0},
           "hockney": {"l": 5 * us, "g": 0.0}, "mm1": {"C": 1e10, "tau": 0.0},
           **{k: v for k, v in sections.items() if v is not None}}
    path.write_text(tomli_w.dumps(doc))
    return path


def replay_json(run_hindsight, trace, profile, *extra) -> dict:
    """`hindsight replay TRACE --profile PROFILE --json EXTRA...`, checked to succeed, parsed."""
    import json

    r = run_hindsight("replay", str(trace), "--profile", str(profile), "--json", *extra)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def rank_ends_ns(doc: dict) -> list[int]:
    """Each rank's replayed end in a `replay --json` document, in whole ns."""
    return [round(x * 1e9) for x in doc["breakdown"]["end_s"]]


def model_notes(stderr: str) -> list[str]:
    """The ``note:`` lines of a replay about what it models, without the one about the traced
    run's oversubscription (a test's 3-4 ranks on this 2-core machine)."""
    return [ln for ln in stderr.splitlines()
            if ln.startswith("note:") and "was oversubscribed" not in ln]


@pytest.fixture
def run_hindsight():
    return hindsight
