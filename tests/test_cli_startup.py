"""Every command starts fast: `--help`, and the usage errors that need no data, load none of the
heavy libraries (numba, pandas, pyarrow, matplotlib); a command imports them when its work needs
them. Each case runs in a fresh interpreter, since the test process has them all loaded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest

import hindsight
import hindsight.cli

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("numba", "pandas", "pyarrow", "matplotlib")

#: run the command line in this interpreter, then print its exit code and the heavy modules
PROBE = f"""
import json, sys
import hindsight.cli
try:
    hindsight.cli.main(sys.argv[1:], prog_name="hindsight")
    code = 0
except SystemExit as exc:
    code = exc.code
print(json.dumps({{"exit": code, "heavy": [m for m in {HEAVY!r} if m in sys.modules]}}))
"""


def _probe(args: list[str], tmp_path: Path | None = None) -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True,
                          cwd=tmp_path or ROOT, timeout=300)
    lines = proc.stdout.strip().splitlines()
    assert lines, proc.stderr
    return {**json.loads(lines[-1]), "stderr": proc.stderr}


def _command_paths(group: click.Group = hindsight.cli.main,
                   path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command and subcommand of the group, walked (lazy commands included)."""
    ctx = click.Context(group)
    out = []
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        out.append(path + (name,))
        if isinstance(cmd, click.Group):
            out += _command_paths(cmd, path + (name,))
    return out


def _case(args: tuple[str, ...], reason: str | None = None):
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(list(args), marks=marks, id=" ".join(args))


HELP_CASES = [_case(("--help",))] + [_case(p + ("--help",)) for p in _command_paths()]


def test_the_walk_finds_the_lazy_commands_and_the_subcommands():
    paths = _command_paths()
    assert {("replay",), ("sweep",), ("export",), ("predict",), ("trace", "info")} <= set(paths)


@pytest.mark.parametrize("args", HELP_CASES)
def test_help_loads_no_heavy_module(args):
    got = _probe(args)
    assert got["exit"] == 0, got["stderr"]
    assert got["heavy"] == []


def test_version_loads_no_heavy_module_nor_package_metadata(tmp_path):
    code = PROBE.replace("print(json.dumps(", "print(sorted(m for m in sys.modules if m == "
                         "'importlib.metadata' or m.startswith('importlib.metadata.')))\n"
                         "print(json.dumps(")
    proc = subprocess.run([sys.executable, "-c", code, "--version"], capture_output=True,
                          text=True, cwd=tmp_path, timeout=300)
    *out, metadata, result = proc.stdout.strip().splitlines()
    assert json.loads(result) == {"exit": 0, "heavy": []}, proc.stderr
    assert metadata == "[]"
    assert out == [f"hindsight, version {hindsight.__version__}"]


def test_the_version_is_the_one_pyproject_declares():
    import tomllib

    with open(ROOT / "pyproject.toml", "rb") as f:
        assert tomllib.load(f)["project"]["version"] == hindsight.__version__


@pytest.mark.parametrize("path", [pytest.param(list(p), id=" ".join(p)) for p in
                                  [()] + _command_paths()])
def test_an_unknown_flag_loads_no_heavy_module(path, tmp_path):
    got = _probe([*path, "--no-such-flag"], tmp_path)
    assert got["exit"] == 2, got["stderr"]
    assert "--no-such-flag" in got["stderr"]
    assert got["heavy"] == []


USAGE_ERRORS = [
    _case(("replay", "no-such-trace", "--noise-runs", "3")),
    _case(("replay", "no-such-trace", "--compute-scale", "-1")),
    _case(("replay", "no-such-trace", "--algo", "x")),
    _case(("sweep", "no-such-trace", "--vary", "L=1us")),
    _case(("predict", "no-such-trace", "--within", "0")),
    _case(("predict", "no-such-trace", "--keep-traces")),
    _case(("collect", "-n", "2", "nosuchapp")),
    _case(("replay", "no-such-trace", "--set", "G=abc")),
    _case(("import", "goal", "no-such.goal", "--out", "x", "--set", "G")),
]


@pytest.mark.parametrize("args", USAGE_ERRORS)
def test_usage_error_loads_no_heavy_module(args, tmp_path):
    got = _probe(args, tmp_path)
    assert got["exit"] == 2, got["stderr"]
    assert "Error: " in got["stderr"]
    assert got["heavy"] == []


DATA_ERRORS = [
    _case(("validate", "no-such.toml", "--out", "v")),
    _case(("replay", "no-such-trace")),
    _case(("export", "no-such-trace", "--format", "perfetto")),
]


@pytest.mark.parametrize("args", DATA_ERRORS)
def test_missing_input_is_reported_before_loading_heavy_modules(args, tmp_path):
    # run in tmp_path, where the relative input names name nothing
    got = _probe(args, tmp_path)
    assert got["exit"] == 1, got["stderr"]
    assert "no-such" in got["stderr"]
    assert got["heavy"] == []


def test_model_help_lists_the_registry():
    from replay import models as M
    from replay.cli import MODEL_NAMES

    assert list(MODEL_NAMES) == M.names()


def test_import_replay_is_light_and_its_api_loads_on_use():
    code = """
import sys
import replay
light = [m for m in ("numba", "pandas", "pyarrow") if m in sys.modules]
import replay.prepare            # the submodule must not replace the function replay.prepare
print(light, callable(replay.prepare), replay.prepare.__module__, replay.run.__module__,
      replay.matching.match_messages.__module__, replay.ReplayError.__module__,
      hasattr(replay, "no_such_name"))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert proc.stdout.split() == ["[]", "True", "replay.prepare", "replay.engine",
                                   "replay.matching", "replay.errors", "False"], proc.stderr


def test_a_replay_from_the_cache_loads_neither_pandas_nor_pyarrow(tmp_path):
    """The first replay reads Parquet (pyarrow) and matches messages, then caches the
    prepared trace; a replay from that cache, collectives and noise report included, needs
    neither, nor scipy.linalg (numba's BLAS check: hindsight.compiling)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from synthetic import simulate_to_dir

    progs = [[("compute", 1_000), ("send", 1, 64), ("coll", "Allreduce", 8), ("recv", 1),
              ("coll", "Bcast", 8, 0)],
             [("recv", 0), ("coll", "Allreduce", 8), ("send", 0, 64), ("coll", "Bcast", 8, 0)]]
    trace = str(simulate_to_dir(tmp_path / "t", progs))
    first = _probe(["replay", trace], tmp_path)
    assert first["exit"] == 0 and "pyarrow" in first["heavy"], first
    code = PROBE.replace(f"for m in {HEAVY!r}", "for m in ('pandas', 'pyarrow', 'scipy.linalg')")
    proc = subprocess.run([sys.executable, "-c", code, "replay", trace], capture_output=True,
                          text=True, cwd=tmp_path, timeout=300)
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    assert doc == {"exit": 0, "heavy": []}, proc.stderr
    assert "predicted" in proc.stdout


def test_exports_imports_and_streaming_load_no_pandas(tmp_path):
    """Every export format, both imports and the streamed check and replay read and write
    Arrow columns by their buffers (hindsight.trace.numpy_of): pyarrow's to_numpy and pa.array
    would import pandas, 0.3 s of each command's start-up."""
    sys.path.insert(0, str(ROOT / "tests"))
    from synthetic import simulate_to_dir

    progs = [[("compute", 1_000), ("send", 1, 64), ("coll", "Allreduce", 8), ("recv", 1)],
             [("recv", 0), ("coll", "Allreduce", 8), ("send", 0, 64)]]
    trace = str(simulate_to_dir(tmp_path / "t", progs))
    runs = [["export", trace, "--format", f, "--out", str(tmp_path / f)]
            for f in ("perfetto", "pipit", "goal", "otf2")]
    runs += [["import", f, str(tmp_path / f), "--out", str(tmp_path / f"back-{f}")]
             for f in ("otf2", "goal")]
    runs += [["trace", "check", trace, "--window", "16"], ["replay", trace, "--window", "16"]]
    for args in runs:
        got = _probe(args, tmp_path)
        assert got["exit"] == 0 and "pyarrow" in got["heavy"], (args, got)
        assert "pandas" not in got["heavy"], (args, got)


def test_the_exit_skips_the_collection_and_loses_no_output(tmp_path):
    """``skip_exit_collection`` (every command): objects alive at exit are left to the operating
    system, not walked by the collector, yet what was written is all there and the exit
    handlers registered later still run."""
    code = """
import atexit, gc, sys
from hindsight.system import skip_exit_collection
skip_exit_collection()
class Cycle:
    def __del__(self):
        print("collected", file=sys.stderr)
c = Cycle(); c.me = c; del c
atexit.register(lambda: sys.stdout.write("handler\\n"))
sys.stdout.write("x" * 1_000_000 + "\\n")
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "x" * 1_000_000 + "\nhandler\n"
    assert "collected" not in proc.stderr          # the cycle was left alone
    plain = subprocess.run([sys.executable, "-c", code.replace("skip_exit_collection()", "")],
                           capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert "collected" in plain.stderr             # ... which the shutdown would have collected


def test_a_command_imports_neither_the_paradigms_nor_hashlib_to_start(tmp_path):
    """Every command's start (``import hindsight.cli``) leaves out the paradigm registry (read
    when ``collect --help`` shows it), hashlib (OpenSSL: 3.7 MB; the project's digest comes from
    its memo, hindsight/sources.py) and concurrent.futures (where a cache is written)."""
    code = ("import sys, hindsight.cli; print(sorted(m for m in ('apps.skeletons', 'hashlib', "
            "'concurrent.futures') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=300, check=True).stdout.strip()
    assert out == "[]"
