"""hindsight.jit and hindsight.aot_build: kernels that import numba only when they must, and their
machine code compiled ahead of time, which a warm replay runs without numba, with numba's
answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import namedtuple

import numpy as np
import pytest

from tests.conftest import ROOT, hindsight

ENV = {**{k: v for k, v in os.environ.items() if k != "HINDSIGHT_AOT"},
       "PYTHONPATH": f"{ROOT}:{ROOT}/tests"}


def _python(code: str, **env: str) -> str:
    """stdout of ``python -c code`` in a fresh process, which must succeed."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=900, env={**ENV, **env})
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def built():
    """The ahead-of-time module of the project's files as they are (``make`` builds it; built
    here when missing, in a process of its own)."""
    if os.environ.get("HINDSIGHT_AOT") == "0":
        pytest.skip("HINDSIGHT_AOT=0: kernels run through numba")
    done = subprocess.run([sys.executable, "-m", "hindsight.aot_build"], capture_output=True,
                          text=True, cwd=ROOT, timeout=900, env=ENV)
    assert done.returncode == 0 and "note:" not in done.stderr, done.stderr
    from hindsight.jit import aot_description, aot_module_path
    about = json.loads(aot_description().read_text())
    for module in {m for exports in about["kernels"].values() for m, _, _ in exports}:
        assert aot_module_path(aot_description(), module).exists()
    return about


@pytest.fixture(scope="module")
def ring(tmp_path_factory, built):
    """A small trace imported from GOAL (the build's own sample schedule, 6 ranks)."""
    from hindsight.aot_build import sample_goal
    d = tmp_path_factory.mktemp("aot")
    (d / "ring.goal").write_text(sample_goal(P=6, rounds=4))
    _python(f"from hindsight.cli import main\nmain(['import', 'goal', {str(d / 'ring.goal')!r}, "
            f"'--out', {str(d / 'ring')!r}], standalone_mode=False)")
    return d / "ring"


REPLAY = """
import sys
from hindsight.cli import main
try:
    main(['replay', {trace!r}, '--json', *{extra!r}], standalone_mode=False)
finally:
    import hindsight.jit
    print('numba' in sys.modules, hindsight.jit.aot_loaded(), file=sys.stderr)
"""


def _replay(trace, *extra: str, **env: str) -> tuple[dict, str]:
    done = subprocess.run([sys.executable, "-c", REPLAY.format(trace=str(trace), extra=extra)],
                          capture_output=True, text=True, cwd=ROOT, timeout=900,
                          env={**ENV, **env})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr.splitlines()[-1]


@pytest.mark.parametrize("model", [(), ("--model", "hockney")])
def test_a_warm_replay_runs_without_numba_and_answers_as_numba_does(ring, model):
    _replay(ring, *model)                                   # (the first: caches the stream)
    doc, how = _replay(ring, *model)
    assert how == "False True", "a warm replay imported numba or found no ahead-of-time module"
    jit_doc, jit_how = _replay(ring, *model, HINDSIGHT_AOT="0")
    assert jit_how == "True False"
    assert doc == jit_doc and doc["predicted_makespan_s"] > 0 and doc["critical_path"]


COMMAND = """
import sys
from hindsight.cli import main
try:
    main({args!r}, standalone_mode=False)
finally:
    print('numba' in sys.modules, file=sys.stderr)
"""


def _command(*args: str, **env: str) -> tuple[str, bool]:
    """(stdout, whether numba was imported) of ``hindsight ARGS`` in a fresh process."""
    done = subprocess.run([sys.executable, "-c", COMMAND.format(args=[str(a) for a in args])],
                          capture_output=True, text=True, cwd=ROOT, timeout=900,
                          env={**ENV, **env})
    assert done.returncode == 0, done.stderr
    return done.stdout, done.stderr.splitlines()[-1] == "True"


@pytest.fixture(scope="module", params=[("ring.py", 2, "--rounds", 7),
                                        ("halo.py", 3, "--steps", 7, "--every", 3)],
                ids=["ring", "halo"])
def measured(request, tmp_path_factory, built):
    """A measured trace of an example program under mpiexec (not the build's own runs: other
    ranks and steps, so other sizes and shapes)."""
    program, ranks, *args = request.param
    out = tmp_path_factory.mktemp("aot-measured") / "trace"
    done = hindsight("collect", "-n", ranks, "--program", ROOT / "hindsight/examples" / program,
                     "--out", out, "--", *args)
    assert done.returncode == 0, done.stderr
    return out


@pytest.mark.parametrize("args", [
    ("replay", "{t}", "--json"),
    ("replay", "{t}", "--json", "--model", "mm1"),
    ("replay", "{t}", "--json", "--noise", "sample", "--noise-runs", "3"),
    ("replay", "{t}", "--json", "--model", "loggopsim"),
    ("replay", "{t}", "--json", "--model", "measured"),
    ("replay", "{t}", "--json", "--noise", "trace"),
    ("trace", "info", "{t}"),
    ("export", "{t}", "--format", "perfetto", "--out", "-"),
    ("export", "{t}", "--format", "goal", "--out", "-"),
    ("export", "{t}", "--format", "pipit", "--out", "-"),
], ids=lambda a: " ".join(x for x in a if x not in ("{t}", "--json", "--out", "-")))
def test_a_measured_traces_commands_run_without_numba_as_numba_does(measured, tmp_path, args):
    """What a user runs on a trace of their own program: ahead of time, without importing
    numba, with numba's output (exports compared byte for byte)."""
    def command(tag: str, **env: str) -> tuple[str, bool]:
        argv = [str(measured) if a == "{t}" else a for a in args]
        if "-" in argv:
            argv[argv.index("-")] = str(tmp_path / f"{tag}.out")
        out, numba = _command(*argv, **env)
        return (tmp_path / f"{tag}.out").read_text() if "-" in args else out, numba

    command("warm")                         # (a first replay caches what later ones map)
    got, numba = command("aot")
    assert not numba, f"{' '.join(args)} imported numba"
    want, numba = command("jit", HINDSIGHT_AOT="0")
    assert numba and got == want and got


def test_an_otf2_export_runs_without_numba_as_numba_does(measured, tmp_path):
    """The OTF2 export's kernels (planning a rank's events, writing them through the OTF2 C
    library) run ahead of time too, and write numba's event files byte for byte."""
    lines = {}
    for tag, env in (("aot", {}), ("jit", {"HINDSIGHT_AOT": "0"})):
        out, numba = _command("export", measured, "--format", "otf2", "--out", tmp_path / tag,
                              **env)
        assert numba == (tag == "jit"), (tag, out)
        lines[tag] = out.replace(str(tmp_path / tag), "OUT")
    assert lines["aot"] == lines["jit"] and "OTF2 archive" in lines["aot"]
    aot, jit = tmp_path / "aot" / "traces", tmp_path / "jit" / "traces"
    events = sorted(p.name for p in aot.glob("*.evt"))
    assert events and events == sorted(p.name for p in jit.glob("*.evt"))
    for name in events:
        assert (aot / name).read_bytes() == (jit / name).read_bytes(), name


def test_an_otf2_import_runs_without_numba_as_numba_does(measured, tmp_path):
    """The OTF2 import reads events with the C callbacks (``otf2_records.c``) and converts them
    with kernels compiled ahead of time: no numba, and numba's trace row for row."""
    from hindsight import trace as tf
    archive = tmp_path / "archive"
    _command("export", measured, "--format", "otf2", "--out", archive)
    tables = {}
    for tag, env in (("aot", {}), ("jit", {"HINDSIGHT_AOT": "0"})):
        out, numba = _command("import", "otf2", archive / "traces.otf2", "--out", tmp_path / tag,
                              **env)
        assert numba == (tag == "jit") and "trace check: ok" in out, (tag, out)
        tables[tag] = tf.read_trace(tmp_path / tag).table
    assert tables["aot"].equals(tables["jit"]) and tables["aot"].num_rows > 0


@pytest.mark.parametrize("program", ["collectives", "split", "rma", "nonblocking"])
def test_traces_of_other_programs_replay_without_numba(built, tmp_path, program):
    """Compiled programs the build's sample never ran (tests/programs/*.c: collectives, derived
    communicators, one-sided epochs, non-blocking calls), traced on 4 ranks: their first and
    warm replays, the LogGOPSim semantics, the description, an export and its import run ahead
    of time.
    (What such a trace needs that the sample never passed would import numba here.)"""
    from instrument import native
    exe = tmp_path / program
    subprocess.run([native.find_mpicc(), "-O2", "-o", str(exe),
                    str(ROOT / "tests" / "programs" / f"{program}.c")], check=True)
    trace = tmp_path / "trace"
    done = hindsight("collect", "-n", 4, "--program", exe, "--out", trace)
    assert done.returncode == 0, done.stderr
    for args in (["replay", trace], ["replay", trace], ["replay", trace, "--model", "loggopsim"],
                 ["trace", "info", trace],
                 ["export", trace, "--format", "perfetto", "--out", tmp_path / "t.json"],
                 ["export", trace, "--format", "otf2", "--out", tmp_path / "t-otf2"],
                 ["import", "otf2", tmp_path / "t-otf2" / "traces.otf2", "--out",
                  tmp_path / "t-back"]):
        out, numba = _command(*args)
        assert out and not numba, f"{' '.join(map(str, args))} imported numba"


def test_the_build_exports_the_replay_kernels_it_saw(built):
    names = set(built["kernels"])
    assert {"replay.kernel:replay_kernel", "replay.critical:critical_path",
            "replay.blockwrite:_write_loop"} <= names
    assert built["numpy"] == np.__version__


TYPES = """
import sys
import numpy as np
from hindsight.trace import rowscan
from hindsight.jit import aot_loaded
rank = np.repeat(np.arange(4), 5).astype(np.{dtype})
seq = np.tile(np.arange(5), 4)
assert rowscan.in_rank_seq_order(rank{view}, seq{view}) == {ordered}
print(aot_loaded(), 'numba' in sys.modules)
"""


def test_arguments_of_types_the_module_lacks_go_to_numba(built):
    """The import's types (int32 ranks, int64 sequence numbers) run ahead of time; int16 ranks,
    or reversed (strided) views, which the sample never passed, run through numba, alike."""
    key = [k for _, _, k in built["kernels"]["hindsight.trace.rowscan:in_rank_seq_order"]]
    assert [["<i4", 1, "C", True], ["<i8", 1, "C", True]] in key
    run = {"dtype": "int32", "view": "", "ordered": True}
    assert _python(TYPES.format(**run)) == "True False\n"
    assert _python(TYPES.format(**{**run, "dtype": "int16"})) == "True True\n"
    assert _python(TYPES.format(**{**run, "view": "[::-1]", "ordered": False})) == \
        "True True\n"


GIL = """
import threading, time
import numpy as np
from hindsight.trace import rowscan
from hindsight.jit import aot_loaded
assert aot_loaded()
rank = np.zeros(10_000_000, np.int32)
seq = np.arange(10_000_000, dtype=np.int64)
rowscan.in_rank_seq_order(rank[:10], seq[:10])
span = []
def run():
    t0 = time.perf_counter()
    rowscan.in_rank_seq_order(rank, seq)
    span.extend((t0, time.perf_counter()))
t = threading.Thread(target=run)
seen = []
t.start()
while t.is_alive():
    seen.append(time.perf_counter())
t.join()
# (the first half of the kernel's run: when a call that holds the GIL returns, the main thread
# may run before the worker reads the clock again)
print(sum(span[0] < s < (span[0] + span[1]) / 2 for s in seen))
"""


def test_an_ahead_of_time_kernel_lets_other_threads_run(built):
    """Its export releases the GIL, as ``nogil`` does: the main thread runs Python while the
    kernel runs on another thread (a held GIL would allow it no step in between)."""
    assert int(_python(GIL)) > 0


BIND = """
import sys
from replay import rules
from replay.rules import send_overhead
from hindsight.jit import Kernel
assert type(send_overhead) is Kernel and 'numba' not in sys.modules
import numba
from numba.core.dispatcher import Dispatcher
assert isinstance(rules.send_overhead, Dispatcher) and isinstance(send_overhead, Dispatcher)
from replay import kernel
assert isinstance(kernel.replay_kernel, Dispatcher)       # (defined after numba's import)
print(send_overhead(1.0, 2.0, 3.0))
"""


def test_numbas_import_hands_every_kernel_to_it():
    """A module's kernels, and the names other modules bound to them, are numba dispatchers
    from numba's import on (numba types a kernel's callees by its module's globals)."""
    assert float(_python(BIND, HINDSIGHT_AOT="0")) == 1.0 + 2.0 * 3.0


def test_keys_tell_apart_what_numba_types_tell_apart():
    """``arg_key`` of two values is equal exactly when numba's types of them are; values whose
    types it does not cover have no key (they go to numba)."""
    from numba import typeof

    from hindsight.jit import _NoKey, arg_key
    pair = namedtuple("pair", "a b")
    other = namedtuple("other", "a b")
    swapped = namedtuple("pair", "b a")
    base = np.arange(12.0).reshape(3, 4)
    ro = np.arange(4.0)
    ro.flags.writeable = False
    raw = np.zeros(33, np.uint8)[1:].view(np.float64)     # unaligned: numba types it alike
    values = [base, base.T, base[:, ::2], base[0], np.arange(4.0), ro, raw,
              np.arange(4, dtype=np.int32), np.arange(4), np.float64(1), np.float32(1),
              np.int64(1), np.int32(1), 1, 2.0, True, np.bool_(False),
              pair(np.arange(3), 1), pair(np.arange(3.0), 1), other(np.arange(3), 1),
              swapped(np.arange(3), 1), (np.arange(3), 1), 2**62]
    for a in values:
        for b in values:
            same_type = typeof(a) == typeof(b)
            assert (arg_key((a,)) == arg_key((b,))) == same_type, (a, b, typeof(a), typeof(b))
    keyless = [np.zeros(2, [("a", "<i4"), ("b", "<i4")]), np.zeros(2, [("b", "<f4"), ("a", "<i4")]),
               np.ma.masked_array([1.0, 2.0]), 2**63, "text"]
    for v in keyless:
        with pytest.raises(_NoKey):
            arg_key((1, v))


def test_a_build_that_missed_its_measured_traces_is_retried_once(tmp_path, monkeypatch):
    """``make`` builds again after a build whose sample could not collect its traces (a
    transient failure), but not after a second such build: where ``collect`` cannot run at all,
    every ``make`` would otherwise take the whole build again. A missing or unreadable
    description is built."""
    from hindsight import aot_build as B
    from hindsight import jit

    described = tmp_path / "aot-x.json"
    monkeypatch.setattr(jit, "aot_description", lambda: described)

    def no_build(folder):
        raise AssertionError("built where nothing was to be built")
    monkeypatch.setattr(B, "run_sample", no_build)
    assert B._build_again(B._about(described))                     # no build yet
    described.write_text("{not json")
    assert B._build_again(B._about(described))
    whole = {"digest": "x", "kernels": {}}
    described.write_text(json.dumps(whole))
    assert not B._build_again(B._about(described))
    assert B.build() is None                                        # nothing to do: no work
    missed = {**whole, "sample_note": "note: collect failed", "sample_tries": 1}
    described.write_text(json.dumps(missed))
    assert B._build_again(B._about(described)) and B._sample_tries(B._about(described)) == 1
    described.write_text(json.dumps({**missed, "sample_tries": B.SAMPLE_TRIES}))
    assert not B._build_again(B._about(described))
    assert B.build() is None
