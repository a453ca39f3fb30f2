"""Trace an unmodified mpi4py program:

    mpiexec -n P python -m instrument.run --trace DIR [--app NAME] [--paradigm NAME] prog.py [ARGS]

The program runs as under ``python prog.py`` (its folder first on `sys.path`, its own `argv`),
and MPI is initialised when *the program* imports `mpi4py.MPI`, not before: tracing starts
inside that import. Until then this launcher has loaded a handful of standard-library modules
and nothing else, so the program's own imports (NumPy, ...) and MPI's initialisation shape the
process's heap in the order they do untraced. That order matters: with MPI initialised before
NumPy was imported, a NumPy stencil's temporaries were page-faulted afresh every iteration (186k
faults a run against 15k untraced), the observer effect of docs/robustness.md.

For the program, `mpi4py.MPI` is then a view of the real module in which `COMM_WORLD` is traced,
`Request` and `Prequest` are the traced request classes (so `MPI.Request.Waitall(...)` and
`MPI.Prequest.Startall(...)` are recorded too) and `Win` counts its calls (instrument.untraced);
everything else is the real module, whose `Finalize` finishes the trace first
(instrument.session).

A program that asks for MPI_THREAD_MULTIPLE itself (`mpi4py.rc.thread_level = "multiple"`) is
refused: the tracer records one thread's MPI calls at a time. mpi4py's own default request
(the same level, made for every program) is not a refusal: most programs call MPI from one
thread. With HINDSIGHT_UNTRACED=1 (`hindsight collect --untraced`)
the program gets the real module and only its wall time is written (instrument.session).
"""

from __future__ import annotations

import os
import sys

USAGE = ("usage: python -m instrument.run --trace DIR [--app NAME] [--paradigm NAME] "
         "prog.py [ARGS ...]")


def _say(text: str) -> None:
    """One line on stderr from rank 0 only: every rank sees the same mistake, and before MPI is
    up the launcher's rank variable tells which one speaks."""
    if os.environ.get("PMI_RANK", "0") == "0":
        sys.stderr.write(text + "\n")


def _fail(message: str) -> None:
    _say(f"python -m instrument.run: {message}\n{USAGE}")
    raise SystemExit(2)


def _parse(argv: list[str]) -> dict:
    """The launcher's own flags, then the program and its arguments (argparse is not loaded:
    every module the launcher imports runs before the program)."""
    opts: dict = {"trace": None, "app": None, "paradigm": None}
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        arg = argv[i]
        if arg in ("-h", "--help"):
            sys.stdout.write(USAGE + "\n\n" + __doc__.split("\n\n")[1] + "\n")
            raise SystemExit(0)
        name, eq, value = arg[2:].partition("=")
        if arg[:2] != "--" or name not in opts:
            _fail(f"unknown option {arg}")
        if not eq:
            i += 1
            if i >= len(argv):
                _fail(f"{arg} needs a value")
            value = argv[i]
        opts[name] = value
        i += 1
    if opts["trace"] is None:
        _fail("--trace DIR is required")
    if i >= len(argv):
        _fail("name the program to run")
    opts["program"], opts["args"] = argv[i], argv[i + 1:]
    return opts


class _DefaultLevel(str):
    """mpi4py's default `rc.thread_level`, marked so that a level the program sets itself (a
    plain str) can be told from it."""


THREAD_MULTIPLE_REFUSED = (
    "{program} asks for MPI_THREAD_MULTIPLE (thread-multiple): the tracer records the MPI calls "
    "of one thread at a time, and calls from two threads at once would overwrite each other's "
    "records; set mpi4py.rc.thread_level to 'serialized' or 'funneled' to trace it")


class _TraceOnImport:
    """A meta-path finder that lets `mpi4py.MPI` load as usual, then starts tracing (a
    collective: every rank imports it) and hands the program the traced view of it."""

    def __init__(self, opts: dict) -> None:
        self.opts = opts
        self.world = None

    def find_spec(self, name, path=None, target=None):
        if name not in ("mpi4py", "mpi4py.MPI") or self.world is not None:
            return None
        sys.meta_path.remove(self)
        try:
            import importlib.util
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None:
            return None
        real_exec = spec.loader.exec_module

        def exec_module(module):
            real_exec(module)
            if name == "mpi4py":
                module.rc.thread_level = _DefaultLevel(module.rc.thread_level)
                return
            # The import system returns what sys.modules holds once the module has run.
            sys.modules[name] = self.started(module)

        spec.loader.exec_module = exec_module
        return spec

    def started(self, mpi):
        """Called once the real module is loaded (MPI is initialised): start the run and return
        what the program gets as `mpi4py.MPI`."""
        import types

        import instrument
        from instrument.session import start

        import mpi4py

        from instrument.completion import TracedPrequest
        from instrument.rma import TracedWin

        o = self.opts
        level = mpi4py.rc.thread_level
        refuse = None
        if (not isinstance(level, _DefaultLevel) and level == "multiple"
                and mpi.Query_thread() == mpi.THREAD_MULTIPLE):
            refuse = THREAD_MULTIPLE_REFUSED.format(program=os.path.basename(o["program"]))
        self.world = start(o["trace"], app=o["app"] or os.path.basename(o["program"]),
                           paradigm=o["paradigm"], args={"argv": o["args"]},
                           program=os.path.abspath(o["program"]), refuse=refuse)
        if not instrument.active():
            return mpi

        # A plain module holding the real module's namespace: `MPI.SUM` or `MPI.ANY_SOURCE` in a
        # program's hot loop is one dict lookup (0.1 us), as untraced. A subclass of ModuleType
        # with __getattr__ built, formatted and caught an AttributeError first (4.8 us here: +36 %
        # on a loop of small collectives). What the real module gains later, the module-level
        # __getattr__ (PEP 562) still finds.
        view = types.ModuleType(mpi.__name__, mpi.__doc__)
        view.__dict__.update(vars(mpi))
        view.__getattr__ = lambda attr: getattr(mpi, attr)
        view.COMM_WORLD = self.world
        view.Request = instrument.TracedRequest
        view.Prequest = TracedPrequest
        view.Win = TracedWin
        return view


def main(argv: list[str] | None = None) -> None:
    opts = _parse(sys.argv[1:] if argv is None else argv)
    program = opts["program"]
    if not os.path.isfile(program):
        _say(f"hindsight: program not found: {program}")
        raise SystemExit(2)
    hook = _TraceOnImport(opts)
    sys.meta_path.insert(0, hook)
    # As `python prog.py` does: the program's folder first on the path, its own argv.
    sys.path[0] = os.path.dirname(os.path.abspath(program))
    sys.argv = [program] + opts["args"]
    import runpy
    try:
        runpy.run_path(program, run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise
    finally:
        if hook in sys.meta_path:
            sys.meta_path.remove(hook)
    from instrument.session import end_of_program, finish
    end_of_program()
    if hook.world is None:
        # The program never imported mpi4py.MPI: nothing ran under MPI, nothing was traced.
        _say(f"hindsight: {program} never imported mpi4py.MPI: no trace written")
        raise SystemExit(1)
    finish()


if __name__ == "__main__":
    main()
