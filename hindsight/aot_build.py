"""Compile hindsight's kernels ahead of time: ``python -m hindsight.aot_build [--force]``
(``make`` runs it; ``hindsight.jit`` explains what a command gains).

It runs a sample of commands in this process, through numba (``import goal`` of a small and a
large ring schedule with messages below and above the default rendezvous threshold, and
``collect`` of two measured traces under mpiexec, of the example programs ``ring.py`` and
``halo.py`` (``SAMPLE_PROGRAMS``); then for each trace its first and a warm ``replay`` under
each network model, ``replay --out``, ``trace info``, the streamed ``trace check`` and
``replay`` (``--window``), ``export`` to perfetto, pipit, otf2 and GOAL, the ``import`` of that
OTF2 archive, and on the measured
traces the replays with their noise put back and the measured model), records for each kernel
the argument types of the calls from Python that numba compiled it for or loaded from its cache
(``hindsight.jit.Kernel.seen``), and compiles those with ``numba.pycc``: one extension module
per Python module, each in a process of its own (in one process, compiling one module's kernels
changed how numba typed another's), described in ``hindsight.jit.aot_description()``. Kernels
of modules that import numba themselves (the applications', the OTF2 import's fallback
callbacks) are not among them, nor calls with types the sample never made: they run through
numba. Where the
measured traces cannot be collected (no mpiexec, or ``collect`` ran out of its 120 s), one
``note:`` line says so, the rest is built, and the next build tries once more (a build that
missed them ``SAMPLE_TRIES`` times is kept; ``--force`` tries again).

Nothing to do (no output) when the description of the project's files as they are exists. When
anything fails (no C compiler, a numba without pycc, a module that does not compile, a folder
that cannot be written) it says why on one ``note:`` line on stderr, describes nothing and exits
0: commands then run every kernel through numba, and the next build tries again.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from hindsight import jit, sources

#: the models the sample replays under (each one's kernels and argument types); the sample's
#: ring saturates M/M/1's links, whose answer is then the capped one
SAMPLE_MODELS = (["loggps"], ["hockney"], ["mm1", "--set", "saturation=cap"], ["loggopsim"])


def sample_goal(P: int = 4, rounds: int = 3) -> str:
    """GOAL text of a ring: each step every rank sends to the next and receives from the one
    before, 64 B (eager) and 1 MiB (rendezvous) messages in turn, then computes."""
    lines = [f"num_ranks {P}"]
    for r in range(P):
        lines.append(f"rank {r} {{")
        n, prev = 0, None
        for k in range(rounds):
            for nbytes in (64, 1 << 20):
                s, v, c = n, n + 1, n + 2
                lines += [f"l{s}: send {nbytes}b to {(r + 1) % P} tag {k}",
                          f"l{v}: recv {nbytes}b from {(r - 1) % P} tag {k}",
                          f"l{c}: calc 1000", f"l{c} requires l{s}", f"l{c} requires l{v}"]
                if prev is not None:
                    lines += [f"l{s} requires l{prev}", f"l{v} requires l{prev}"]
                prev, n = c, n + 3
        lines.append("}")
    return "\n".join(lines) + "\n"


#: the sample's schedules: (ranks, rounds). The small one gives the narrow columns of small
#: traces; the large one (17.5 MB of text, 307 k operations) the wide ones of large traces
#: and the paths only they take (a text parsed in parts on two threads, a schedule's dependencies
#: used as they are mapped from its cache)
SAMPLE_SIZES = ((4, 3), (16, 3200))


#: the measured traces' programs, ranks and arguments: the example ring (Sendrecv, Allreduce on
#: the world), and the example stencil (non-blocking point-to-point and collectives, a split
#: communicator, a wildcard receive), whose traces take other kernels and argument types
SAMPLE_PROGRAMS = (("ring.py", 2, ["--rounds", "50"]), ("halo.py", 4, ["--steps", "20"]))


def trace_commands(trace: Path, folder: Path) -> list[list[str]]:
    """What the sample runs on ``trace``: a first and a warm replay under each model, a replay
    written out, its description, its exports and the import of its OTF2 export."""
    out = []
    for model in SAMPLE_MODELS:
        out += [["replay", str(trace), "--model", *model]] * 2
    out.append(["replay", str(trace), "--out", str(folder / f"{trace.name}-replayed")])
    out.append(["trace", "info", str(trace)])
    # streamed, as a trace larger than memory is (small windows: several segments)
    out.append(["trace", "check", str(trace), "--window", "16"])
    out.append(["replay", str(trace), "--window", "16"])
    for fmt in ("perfetto", "pipit", "goal", "otf2"):
        out.append(["export", str(trace), "--format", fmt,
                    "--out", str(folder / f"{trace.name}-exported.{fmt}")])
    out.append(["import", "otf2", str(folder / f"{trace.name}-exported.otf2" / "traces.otf2"),
                "--out", str(folder / f"{trace.name}-reimported")])
    return out


def measured_commands(trace: Path) -> list[list[str]]:
    """What the sample also runs on a measured trace: the replays only such a trace has (its
    own timeline as the model, its noise)."""
    t = str(trace)
    return [["replay", t, "--model", "measured"], ["replay", t, "--noise", "trace"],
            ["replay", t, "--noise", "sample", "--noise-runs", "2"]]


def run_sample(folder: Path) -> str | None:
    """The sample of commands (see the module docstring), their output discarded. Returns a
    note when a measured trace could not be collected (its commands and those of the programs
    after it are left out)."""
    import click

    from hindsight.cli import INTERRUPTED, main

    commands = []
    for P, rounds in SAMPLE_SIZES:
        src = folder / f"ring{P}.goal"
        src.write_text(sample_goal(P, rounds))
        trace = folder / f"ring{P}"
        commands.append(["import", "goal", str(src), "--out", str(trace)])
        commands += trace_commands(trace, folder)
    _run_all(main, commands)
    for program, ranks, args in SAMPLE_PROGRAMS:
        measured = folder / f"{Path(program).stem}-measured"
        try:
            _run_all(main, [["collect", "-n", str(ranks), "--program",
                             str(sources.ROOT / "hindsight" / "examples" / program),
                             "--timeout", "120", "--out", str(measured), "--", *args]])
        except click.ClickException as exc:  # (no MPI here: the rest is still worth building)
            if exc.exit_code == INTERRUPTED:
                raise KeyboardInterrupt from None
            return (f"note: the sample's trace of hindsight/examples/{program} was not collected"
                    f" ({first_line(exc)}): replays of such traces run their kernels through "
                    "numba")
        _run_all(main, trace_commands(measured, folder) + measured_commands(measured))
    return None


def _run_all(main, commands: list[list[str]]) -> None:
    """Run ``commands`` through the CLI's ``main``, their output and notes discarded."""
    for args in commands:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            main(args, standalone_mode=False)


def recorded() -> list[tuple[jit.Kernel, tuple, object]]:
    """(kernel, argument key, numba signature) of every call the sample made numba compile."""
    out = []
    for k in jit._kernels:
        for key, types in k.seen.items():
            cres = k.dispatcher.overloads.get(types)
            if cres is not None:
                out.append((k, key, cres.signature))
    return out


def compile_group(group: str, module: str, entries: list[tuple[str, str, object]], out: str,
                  nrt: bool) -> str:
    """Compile kernels of ``module``, ``entries`` of (kernel qualname, exported name, numba
    signature), with numba.pycc into the extension module ``group``, file ``out`` (written
    under another name, then renamed); with numba's runtime (reference counting) only if
    ``nrt`` (kernels marked ``_nrt=False`` are compiled without it, as numba compiles them).
    Returns ``out``. (Run in a process of its own: one module's compiling can change how numba
    types another's.)"""
    import importlib

    import numba.pycc.compiler as pycc_compiler
    from numba.pycc import CC

    class ReleasingFlags(pycc_compiler.Flags):
        """pycc's compile flags, with the GIL released while an export runs (as ``nogil``)."""

        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            self.release_gil = True

    mod = importlib.import_module(module)
    with tempfile.TemporaryDirectory(dir=Path(out).parent, prefix=".aot-") as tmp:
        # pycc's check of the C compiler leaves its temporary folders behind (numba 0.68): made
        # in this one, they go with it (this process compiles this module and ends)
        before, tempfile.tempdir = tempfile.tempdir, tmp
        try:
            cc = CC(jit.aot_module_name(group))
            cc.output_dir = tmp
            cc.output_file = Path(out).name
            cc.verbose = False
            cc.use_nrt = nrt
            for qualname, symbol, sig in entries:
                cc.export(symbol, sig)(getattr(mod, qualname).py_func)
            pycc_compiler.Flags = ReleasingFlags
            cc.compile()
        finally:
            tempfile.tempdir = before
        os.replace(Path(tmp, Path(out).name), out)
    return out


def symbol(kernel: str, key: tuple) -> str:
    """The exported name of ``kernel`` for arguments ``key``: the same in every build of the
    same files, so that a module and a description from two builds never pair a name with
    other types."""
    return "k" + hashlib.sha1(repr((kernel, key)).encode()).hexdigest()[:20]


def compile_modules(exports: list, description: Path, note: str | None = None,
                    tries: int = 1) -> list[str]:
    """Compile ``exports`` (``recorded()``), one extension module per Python module (two where
    some of its kernels are ``_nrt=False``: ``compile_group``), on as many processes as there
    are usable cores, and describe them in ``description`` (written last, once every module is
    in place: it is what a command looks for), then remove the files of other builds. Returns
    the modules that failed to compile, with why; then nothing is described, and a later build
    tries again. ``note``: what the sample missed; ``tries``: the how-manyth build of these
    sources missed it (``_build_again``)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    import numba
    import numpy as np

    from hindsight.system import usable_cores

    groups: dict[tuple, list] = {}
    table: dict[str, list] = {}
    for k, key, sig in exports:
        module = k.py_func.__module__
        nrt = k.options.get("_nrt", True)
        group = module if nrt else f"{module}.nonrt"
        name = symbol(k.name, key)
        groups.setdefault((group, module, nrt), []).append((k.py_func.__qualname__, name, sig))
        table.setdefault(k.name, []).append([group, name, key])
    failed = []
    workers = max(1, min(usable_cores(), len(groups)))
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                             max_tasks_per_child=1) as pool:
        done = {g: pool.submit(compile_group, g, module, entries,
                               str(jit.aot_module_path(description, g)), nrt)
                for (g, module, nrt), entries in groups.items()}
        for g, fut in done.items():
            try:
                fut.result()
            except Exception as exc:
                failed.append(f"{g} ({first_line(exc)})")
    if failed:
        return failed
    about = {"digest": sources.project_digest(), "numba": numba.__version__,
             "numpy": np.__version__, "python": sys.version, "kernels": table}
    if note:
        about["sample_note"] = note         # (a part of the sample missing: built again later)
        about["sample_tries"] = tries
    tmp = description.with_suffix(".tmp")
    tmp.write_text(json.dumps(about, indent=1))
    os.replace(tmp, description)
    for old in description.parent.glob("aot-*"):
        if not old.name.startswith(description.stem):
            old.unlink(missing_ok=True)
    return []


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (numba's run to many), or its type's name."""
    return (str(exc).splitlines() or [type(exc).__name__])[0]


#: builds of the same sources that may miss a part of the sample before ``make`` stops trying
SAMPLE_TRIES = 2


def _about(description: Path) -> dict | None:
    """The description of a build (None: no build, or its description is unreadable)."""
    try:
        return json.loads(description.read_text())
    except (OSError, ValueError):
        return None


def _sample_tries(about: dict | None) -> int:
    """How many builds of these sources missed a part of their sample (a measured trace that
    could not be collected), by the last one's description."""
    return int(about.get("sample_tries", 1)) if about and "sample_note" in about else 0


def _build_again(about: dict | None) -> bool:
    """Whether ``make`` builds again: there is no (readable) build, or the last one missed a part
    of its sample for the first time (a transient failure, such as mpiexec timing out). A build
    that missed it ``SAMPLE_TRIES`` times is kept: where ``collect`` cannot run, every ``make``
    would otherwise take the whole build again (``--force`` still does)."""
    return about is None or 0 < _sample_tries(about) < SAMPLE_TRIES


def build(force: bool = False) -> str | None:
    """Build the modules if their description is missing (or ``force``); what was done, or
    None. Raises ``RuntimeError`` with why nothing was built."""
    description = jit.aot_description()
    about = _about(description)
    if not force and not _build_again(about):
        return None
    tries = _sample_tries(about) + 1
    if "numba" in sys.modules:
        raise RuntimeError("hindsight.aot_build must run in a process of its own")
    description.parent.mkdir(parents=True, exist_ok=True)
    if not os.access(description.parent, os.W_OK):
        raise RuntimeError(f"{description.parent} is not writable")
    t0 = time.perf_counter()
    jit._use_aot = False
    jit._recording = True
    with tempfile.TemporaryDirectory() as tmp:
        note = run_sample(Path(tmp))
    if note:
        print(note, file=sys.stderr)
    exports = recorded()
    if not exports:
        raise RuntimeError("the sample called no kernel through numba")
    failed = compile_modules(exports, description, note, tries)
    if failed:
        raise RuntimeError(f"{len(failed)} modules failed to compile: {'; '.join(failed)}")
    kernels = len({k.name for k, _, _ in exports})
    return (f"compiled {kernels} kernels ahead of time ({len(exports)} argument types) in "
            f"{time.perf_counter() - t0:.0f} s: {description.relative_to(sources.ROOT)}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv not in ([], ["--force"]):
        print("Error: usage: python -m hindsight.aot_build [--force]", file=sys.stderr)
        return 2
    try:
        done = build(force=bool(argv))
    except Exception as exc:            # (an optimisation: commands work without it)
        print(f"note: hindsight's kernels were not compiled ahead of time ({first_line(exc)}); "
              "commands compile them with numba", file=sys.stderr)
        return 0
    if done:
        print(done)
    return 0


if __name__ == "__main__":
    sys.exit(main())
