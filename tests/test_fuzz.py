"""Fuzz the readers of untrusted files: a trace's Parquet files and manifest, a calibration profile,
a validation spec. Whatever the bytes, only the documented error types may escape:
``TraceError`` (trace readers), ``ReplayError`` (replay preparation), ``ProfileError`` /
``ParamError`` (profiles), ``SpecError`` (specs), and click usage errors at the command line.

Example counts are bounded so the whole file runs in well under a minute.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hindsight import trace as tf
from hindsight.check import check_trace
from hindsight.info import trace_info
from tests.conftest import ROOT, hindsight
from tests.test_interop import HAND as _GOAL  # the GOAL example
from tests.test_interop import _tiny_archive

#: HINDSIGHT_FUZZ_SCALE=10 runs ten times the examples, with fresh random ones (a longer hunt).
_SCALE = float(os.environ.get("HINDSIGHT_FUZZ_SCALE", "1"))
_BASE = settings(deadline=None, derandomize=_SCALE == 1, database=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture,
                                        HealthCheck.too_slow])


def fuzz(examples: int) -> settings:
    """Reproducible (derandomized) runs of a bounded number of examples."""
    return settings(_BASE, max_examples=max(1, int(examples * _SCALE)))

# A mutation: overwrite the byte at (position modulo the file's length), or cut the file there.
mutations = st.lists(st.tuples(st.sampled_from(["set", "cut"]), st.integers(0, 1 << 20),
                               st.integers(0, 255)), min_size=1, max_size=6)


def _mutate(data: bytes, muts) -> bytes:
    out = bytearray(data)
    for how, pos, byte in muts:
        if not out:
            break
        pos %= len(out)
        if how == "set":
            out[pos] = byte
        elif byte < 16:   # cut rarely: most examples should reach the deeper parsing
            del out[pos:]
    return bytes(out)


@pytest.fixture(scope="module")
def good_trace():
    out = Path(tempfile.mkdtemp(prefix="hindsight-fuzz-")) / "trace"
    res = hindsight("collect", "-n", 2, "--program", ROOT / "hindsight/examples/ring.py",
                    "--out", out, "--", "--rounds", 3, "--work", 100)
    assert res.returncode == 0, res.stderr
    yield out
    shutil.rmtree(out.parent, ignore_errors=True)


@pytest.fixture(scope="module")
def scratch(good_trace):
    d = good_trace.parent / "scratch"
    shutil.copytree(good_trace, d)
    return d


def _read_everything(d: Path) -> None:
    """Every reader of a trace directory; only the documented errors may come out."""
    from replay.prepare import ReplayError, prepare

    try:
        tf.read_trace(d)
    except tf.TraceError:
        pass
    try:
        tf.read_columns(d)
    except tf.TraceError:
        pass
    try:
        trace_info(d)
    except tf.TraceError:
        pass
    check_trace(d)               # reports problems as lines; never raises
    try:
        prepare(d, use_cache=False, allow_partial=True)
    except (tf.TraceError, ReplayError):
        pass


@fuzz(200)
@given(muts=mutations)
def test_fuzz_rank_file(good_trace, scratch, muts):
    data = (good_trace / "rank-00000.parquet").read_bytes()
    (scratch / "rank-00000.parquet").write_bytes(_mutate(data, muts))
    _read_everything(scratch)


@fuzz(200)
@given(muts=mutations)
def test_fuzz_manifest_bytes(good_trace, scratch, muts):
    (scratch / "rank-00000.parquet").write_bytes((good_trace / "rank-00000.parquet").read_bytes())
    data = (good_trace / tf.MANIFEST_NAME).read_bytes()
    (scratch / tf.MANIFEST_NAME).write_bytes(_mutate(data, muts))
    _read_everything(scratch)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 1 << 40) | st.floats(allow_nan=True)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner,
                                                                 max_size=4),
    max_leaves=8)


@fuzz(200)
@given(key=st.sampled_from(["ranks", "run_id", "rank_status", "communicators", "complete",
                            "format_version", "hosts", "clock", "makespan_ns", "events"]),
       value=json_values)
def test_fuzz_manifest_values(good_trace, scratch, key, value):
    """Well-formed JSON with a value of the wrong kind where the readers expect another."""
    (scratch / "rank-00000.parquet").write_bytes((good_trace / "rank-00000.parquet").read_bytes())
    manifest = json.loads((good_trace / tf.MANIFEST_NAME).read_text())
    manifest[key] = value
    (scratch / tf.MANIFEST_NAME).write_text(json.dumps(manifest))
    _read_everything(scratch)


# A real profile written by `hindsight calibrate` (shm.toml, or whichever the docs ship).
PROFILE = next(p for p in [ROOT / "docs" / "calibration" / "shm.toml",
                           *sorted((ROOT / "docs" / "calibration").glob("*.toml"))] if p.is_file())


@fuzz(300)
@given(muts=mutations)
def test_fuzz_profile(tmp_path, muts):
    from replay import models as M
    from replay.profile import ProfileError, read_profile

    path = tmp_path / "profile.toml"
    path.write_bytes(_mutate(PROFILE.read_bytes(), muts))
    try:
        read_profile(path)
    except ProfileError:
        pass
    assert isinstance(M.profile_measured_on(path), dict)
    for name in ("loggps", "hockney", "mm1"):
        mod = M.get_model(name)
        try:
            M.resolve(mod, [], M.load_profile(path, mod))
        except M.ParamError:
            pass


SPEC = ROOT / "specs" / "default.toml"


@fuzz(300)
@given(muts=mutations)
def test_fuzz_spec(tmp_path, muts):
    from validation.spec import SpecError, load_spec

    path = tmp_path / "spec.toml"
    path.write_bytes(_mutate(SPEC.read_bytes(), muts))
    try:
        load_spec(path)
    except SpecError:
        pass


@fuzz(25)
@given(muts=mutations)
def test_fuzz_replay_cli_profile(good_trace, tmp_path, muts):
    """At the command line a bad profile is a data error (exit 1) naming --profile and the file,
    never a traceback."""
    from click.testing import CliRunner

    from hindsight.cli import main

    path = tmp_path / "profile.toml"
    path.write_bytes(_mutate(PROFILE.read_bytes(), muts))
    res = CliRunner().invoke(main, ["replay", str(good_trace), "--profile", str(path),
                                    "--model", "loggps", "--json"])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    assert res.exit_code in (0, 1), res.output
    if res.exit_code == 1:
        assert "--profile" in res.output and str(path) in res.output


toml_values = st.recursive(
    st.booleans() | st.integers(-(1 << 63), (1 << 63) - 1) | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(min_size=1, max_size=4),
                                                                inner, max_size=3),
    max_leaves=6)


def _replace_at(doc: dict, choice: int, value) -> dict:
    """``doc`` with the ``choice``-th (modulo) key path, tables included, set to ``value``."""
    paths: list[tuple] = []

    def walk(d, prefix):
        for k, v in d.items():
            paths.append(prefix + (k,))
            if isinstance(v, dict):
                walk(v, prefix + (k,))
            elif isinstance(v, list):
                for i, x in enumerate(v):
                    if isinstance(x, dict):
                        walk(x, prefix + (k, i))

    walk(doc, ())
    path = paths[choice % len(paths)]
    node = doc
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return doc


@fuzz(200)
@given(choice=st.integers(0, 1000), value=toml_values)
def test_fuzz_profile_values(tmp_path, choice, value):
    """A well-formed profile with one value (or table) of another kind."""
    import tomli_w
    import tomllib

    from replay import models as M
    from replay.profile import ProfileError, read_profile

    doc = _replace_at(tomllib.loads(PROFILE.read_text()), choice, value)
    path = tmp_path / "profile.toml"
    path.write_text(tomli_w.dumps(doc))
    try:
        read_profile(path)
    except ProfileError:
        pass
    for name in ("loggps", "loggp", "hockney", "mm1"):
        mod = M.get_model(name)
        try:
            M.resolve(mod, [], M.load_profile(path, mod))
        except M.ParamError:
            pass


@fuzz(200)
@given(choice=st.integers(0, 1000), value=toml_values)
def test_fuzz_spec_values(tmp_path, choice, value):
    """A well-formed spec with one value (or table) of another kind."""
    import tomli_w
    import tomllib

    from validation.spec import SpecError, load_spec

    doc = _replace_at(tomllib.loads(SPEC.read_text()), choice, value)
    path = tmp_path / "spec.toml"
    path.write_text(tomli_w.dumps(doc))
    try:
        load_spec(path)
    except SpecError:
        pass


# ---------------------------------------------------------------------------------------------
# Importers: a GOAL schedule's text and an OTF2 archive's bytes. Only GoalError / OtfError (and
# TraceError from the check of what was written) may escape, and a failed import leaves no output.



@fuzz(150)
@given(st.lists(st.tuples(st.integers(0, len(_GOAL)), st.integers(0, 3),
                          st.sampled_from(list("{}:-0123456789 \nabcrequiressendrecvcalctofromtagb"))),
                min_size=1, max_size=5))
def test_fuzz_goal_import(edits):
    from hindsight.interop import goal as G

    text = list(_GOAL)
    for pos, cut, ch in edits:
        text[pos:pos + cut] = [ch]
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "s.goal"
        src.write_text("".join(text))
        try:
            G.import_goal(src, Path(d) / "out")
        except (G.GoalError, tf.TraceError):
            pass


@pytest.fixture(scope="module")
def otf2_archive(tmp_path_factory):
    return _tiny_archive(tmp_path_factory.mktemp("otf2"), with_groups=True, with_recv=True)


@fuzz(60)
@given(mutations, st.integers(0, 100))
def test_fuzz_otf2_import(otf2_archive, muts, which):
    from hindsight.interop import otf2_import as X

    src_dir = otf2_archive.parent
    with tempfile.TemporaryDirectory() as d:
        copy = Path(d) / "a"
        shutil.copytree(src_dir, copy)
        files = sorted(p for p in copy.rglob("*") if p.is_file())
        victim = files[which % len(files)]
        data = bytearray(victim.read_bytes())
        for kind, pos, val in muts:
            if not data:
                break
            if kind == "cut":
                del data[pos % len(data):]
            else:
                data[pos % len(data)] = val
        victim.write_bytes(bytes(data))
        out = Path(d) / "out"
        try:
            X.import_otf2(copy / otf2_archive.name, out)
        except (X.OtfError, tf.TraceError):
            assert not out.exists() or not any(out.iterdir())
