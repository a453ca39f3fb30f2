"""Trace an unmodified mpi4py program:

    mpiexec -n P python -m instrument.run --trace DIR [--app NAME] [--paradigm NAME]
        [--recorder python|pmpi] prog.py [ARGS]

The program runs as under ``python prog.py`` (its folder first on `sys.path`, its own `argv`),
and MPI is initialised when *the program* imports `mpi4py.MPI`, not before: tracing starts
inside that import. Until then this launcher has loaded a handful of standard-library modules
and nothing else, so the program's own imports (NumPy, ...) and MPI's initialisation shape the
process's heap in the order they do untraced. That order matters: with MPI initialised before
NumPy was imported, a NumPy stencil's temporaries were page-faulted afresh every iteration (186k
faults a run against 15k untraced), the observer effect of docs/robustness.md.

For the program, `mpi4py.MPI` is then a view of the real module in which `COMM_WORLD` is traced,
`Request` and `Prequest` are the traced request classes (so `MPI.Request.Waitall(...)` and
`MPI.Prequest.Startall(...)` are recorded too), `Win` records its calls (instrument.rma), and
`Intracomm`/`Intercomm` trace their communicators made from a group (instrument.groups) and
`Message` the receives of matched probes (instrument.matched);
everything else is the real module, whose `Finalize` finishes the trace first
(instrument.session).

A program that initialises MPI itself (`mpi4py.rc.initialize = False`, then `MPI.Init()` or
`MPI.Init_thread(...)`) gets a view whose `Init` and `Init_thread` start tracing as they
return (collective, as they are); its `COMM_WORLD` is the traced one from then on. A
`COMM_WORLD` the program took before `MPI.Init` is the real one, whose calls are not traced:
that is counted in the manifest's `untraced_calls` (`COMM_WORLD before MPI.Init`), so
`trace check` says the traffic may be incomplete. Its own `MPI.Finalize`
(`mpi4py.rc.finalize = False`) finishes the trace first, as any program's.

A program that asks for MPI_THREAD_MULTIPLE itself (`mpi4py.rc.thread_level = "multiple"`, or
`MPI.Init_thread(MPI.THREAD_MULTIPLE)`) is refused: the tracer records one thread's MPI calls
at a time. mpi4py's own default request (the same level, made for every program, and by
`MPI.Init_thread()` without an argument) is not a refusal: calls from several threads are
recorded while they come one at a time, and a rank whose threads are in MPI at once stops
recording there (hindsight.trace.write_staged; docs/robustness.md). With HINDSIGHT_UNTRACED=1 (`hindsight collect --untraced`) the program gets the real
module (or, if it initialises MPI itself, a view that only starts the run in `Init`) and only
its wall time is written (instrument.session).

With ``--recorder pmpi`` the MPI calls are recorded in C, below mpi4py, by the PMPI library of
compiled programs (instrument/pmpi, docs/native.md), which `hindsight collect` preloads into the
ranks; Python records nothing and the program gets the real `mpi4py.MPI`. This launcher then
only runs the program as `python prog.py` would, tells the library whether MPI_THREAD_MULTIPLE
is mpi4py's default request (HINDSIGHT_MULTIPLE_IS_DEFAULT=1: accepted, as above) or the
program's own (refused by the library), and leaves Python's faulthandler chained before the
library's stop-signal handler, so that a stopped rank names its Python line as well as its MPI
call (instrument.stopped).
"""

from __future__ import annotations

import os
import sys

USAGE = ("usage: python -m instrument.run --trace DIR [--app NAME] [--paradigm NAME] "
         "[--recorder python|pmpi] prog.py [ARGS ...]")
#: who records the MPI calls: this process's Python tracer, or the preloaded PMPI library
RECORDERS = ("python", "pmpi")
#: tells the PMPI library that MPI_THREAD_MULTIPLE is mpi4py's default request, not the program's
MULTIPLE_IS_DEFAULT = "HINDSIGHT_MULTIPLE_IS_DEFAULT"


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
    opts: dict = {"trace": None, "app": None, "paradigm": None, "recorder": "python"}
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
    if opts["recorder"] not in RECORDERS:
        _fail(f"--recorder must be one of {', '.join(RECORDERS)}, not {opts['recorder']!r}")
    if i >= len(argv):
        _fail("name the program to run")
    opts["program"], opts["args"] = argv[i], argv[i + 1:]
    return opts


class _DefaultLevel(str):
    """mpi4py's default `rc.thread_level`, marked so that a level the program sets itself (a
    plain str) can be told from it."""


THREAD_MULTIPLE_REFUSED = (
    "{program} asks for MPI_THREAD_MULTIPLE (thread-multiple): the tracer records the MPI calls "
    "of one thread at a time, and a rank whose MPI two threads call at once is recorded only up "
    "to then; {fix} to trace it")
FIX_RC = "set mpi4py.rc.thread_level to 'serialized' or 'funneled'"
FIX_INIT_THREAD = "ask MPI.Init_thread for THREAD_SERIALIZED or THREAD_FUNNELED"
#: `untraced_calls` entry of a program that took COMM_WORLD before its own MPI.Init
EARLY_WORLD = "COMM_WORLD before MPI.Init"


def _plain_view(mpi):
    """A plain module holding the real module's namespace; what the real module gains later,
    the module-level __getattr__ (PEP 562) still finds."""
    import types

    view = types.ModuleType(mpi.__name__, mpi.__doc__)
    view.__dict__.update(vars(mpi))
    view.__getattr__ = lambda attr: getattr(mpi, attr)
    return view


def _put_inits(view, mpi, init, init_thread) -> None:
    """`view`'s Init and Init_thread become `init` and `init_thread` (with the real ones' docs)."""
    for fn, real in ((init, mpi.Init), (init_thread, mpi.Init_thread)):
        fn.__doc__ = real.__doc__
        view.__dict__[real.__name__] = fn


class _TraceOnImport:
    """A meta-path finder that lets `mpi4py.MPI` load as usual, then starts tracing (a
    collective: every rank imports it; in a program that initialises MPI itself, every rank
    calls its MPI.Init) and hands the program the traced view of it."""

    def __init__(self, opts: dict) -> None:
        self.opts = opts
        self.world = None           # what instrument.start returned, once it has run
        self.imported = False       # the program imported mpi4py.MPI
        self.end_mark = None        # --recorder pmpi: the library's hindsight_program_end
        self.program_exited = None  # --recorder pmpi: what a non-zero sys.exit does

    def find_spec(self, name, path=None, target=None):
        if name not in ("mpi4py", "mpi4py.MPI") or self.imported:
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
            if name == "mpi4py.MPI" and self.opts["recorder"] == "pmpi":
                self._before_the_library_starts()
            real_exec(module)
            if name == "mpi4py":
                module.rc.thread_level = _DefaultLevel(module.rc.thread_level)
                return
            # The import system returns what sys.modules holds once the module has run.
            sys.modules[name] = self.started(module)

        spec.loader.exec_module = exec_module
        return spec

    def started(self, mpi):
        """Called once the real module is loaded: start the run (MPI is initialised), or wait
        for the program's own MPI.Init; return what the program gets as `mpi4py.MPI`."""
        self.imported = True
        if self.opts["recorder"] == "pmpi":
            return self._recorded_by_library(mpi)
        import instrument
        # Loaded now, while `mpi4py.MPI` in sys.modules is the real module, so that the
        # tracer's own MPI calls never go through the view.
        import instrument.session  # noqa: F401
        import mpi4py

        if not mpi.Is_initialized():
            return self._deferred(mpi)
        level = mpi4py.rc.thread_level
        refuse = None
        if (not isinstance(level, _DefaultLevel) and level == "multiple"
                and mpi.Query_thread() == mpi.THREAD_MULTIPLE):
            refuse = self._refusal(FIX_RC)
        self._begin(refuse)
        if not instrument.active():
            return mpi
        return self._view(mpi)

    def _before_the_library_starts(self) -> None:
        """Before MPI is initialised: MPI_THREAD_MULTIPLE is accepted by the PMPI library only
        as mpi4py's default request (the program left rc.thread_level alone). What the launcher
        needs later is loaded here too, before the library's start barrier takes the run's
        epoch, as the Python tracer loads itself before its own: after it, a module's import
        would count in the program's wall time."""
        import ctypes
        import faulthandler  # noqa: F401

        import mpi4py

        from hindsight.trace import core  # noqa: F401
        from instrument import stopped  # noqa: F401

        try:
            # the library is preloaded: its symbols are the process's
            self.end_mark = ctypes.CDLL(None).hindsight_program_end
        except (OSError, AttributeError):
            self.end_mark = None

        if isinstance(mpi4py.rc.thread_level, _DefaultLevel):
            os.environ[MULTIPLE_IS_DEFAULT] = "1"
        else:
            os.environ.pop(MULTIPLE_IS_DEFAULT, None)
        if os.environ.get("HINDSIGHT_UNTRACED") != "1":
            # Installed before MPI starts, so that the library's own SIGTERM/SIGINT handler
            # (which marks the rank terminated) hands the signal on to this one.
            # It exits after the grace the Python tracer's ranks take (instrument.session), so
            # that the ranks signalled with it save their status before mpiexec kills them.
            from instrument.signals import exit_on_signals, grace
            exit_on_signals(grace)

    def _recorded_by_library(self, mpi):
        """``--recorder pmpi``: the program gets the real module; a program that initialises
        MPI itself gets a view whose `Init_thread(MPI.THREAD_MULTIPLE)` is its own request."""
        if mpi.Is_initialized():
            self._library_started(mpi)
            return mpi
        view = _plain_view(mpi)
        real_init, real_init_thread = mpi.Init, mpi.Init_thread

        def Init() -> None:
            real_init()
            self._library_started(mpi)

        def Init_thread(*args, **kwargs) -> int:
            asked = args[0] if args else kwargs.get("required")
            if asked == mpi.THREAD_MULTIPLE:
                os.environ.pop(MULTIPLE_IS_DEFAULT, None)
            provided = real_init_thread(*args, **kwargs)
            self._library_started(mpi)
            return provided

        _put_inits(view, mpi, Init, Init_thread)
        return view

    def _library_started(self, mpi) -> None:
        """MPI is up and the library records: chain Python's stack dump before the library's
        stop-signal handler, into the same file (instrument.stopped)."""
        import faulthandler

        from hindsight.trace import core as fc
        from instrument import stopped

        self.world = "pmpi"
        stage = fc.staging_dir(self.opts["trace"], mpi.COMM_WORLD.Get_rank())
        path = stage / fc.STOP_FILE
        if os.environ.get("HINDSIGHT_STOP_SIGNAL") and path.is_file():
            f = open(path, "a")
            faulthandler.register(stopped.SIGNAL, file=f, all_threads=True, chain=True)
            stopped._open_files.append(f)
        previous_hook = sys.excepthook

        def failed(what: str, status: int) -> None:
            # As the Python tracer does (instrument.session): the error into the manifest
            # (rank_errors, through the sealer), then abort the job, whose other ranks may wait
            # for this one, instead of hanging in MPI_Finalize until killed.
            try:
                (stage / fc.ERROR_FILE).write_text(what[:2000])
            except OSError:
                pass
            if mpi.Is_initialized() and not mpi.Is_finalized() and mpi.COMM_WORLD.Get_size() > 1:
                mpi.COMM_WORLD.Abort(status)

        def hook(exc_type, exc, tb):
            previous_hook(exc_type, exc, tb)
            failed(f"{exc_type.__name__}: {exc}", 1)
        sys.excepthook = hook
        # sys.exit(code), code not 0: as python -m mpi4py, the job is aborted with that status
        self.program_exited = lambda code: failed(
            f"SystemExit: {code}", code if isinstance(code, int) and 0 < code < 256 else 1)

    def _refusal(self, fix: str) -> str:
        return THREAD_MULTIPLE_REFUSED.format(program=os.path.basename(self.opts["program"]),
                                              fix=fix)

    def _begin(self, refuse: str | None) -> None:
        """Start the run (collective): instrument.start with the program's description."""
        from instrument.session import start

        o = self.opts
        self.world = start(o["trace"], app=o["app"] or os.path.basename(o["program"]),
                           paradigm=o["paradigm"], args={"argv": o["args"]},
                           program=os.path.abspath(o["program"]), refuse=refuse)

    def _view(self, mpi, deferred: bool = False):
        """A plain module holding the real module's namespace with the traced names.

        `MPI.SUM` or `MPI.ANY_SOURCE` in a program's hot loop is one dict lookup (0.1 us), as
        untraced. A subclass of ModuleType with __getattr__ built, formatted and caught an
        AttributeError first (4.8 us here: +36 % on a loop of small collectives). What the real
        module gains later, the module-level __getattr__ (PEP 562) still finds. `deferred`:
        MPI is not initialised yet, so COMM_WORLD is left to the program's MPI.Init."""
        import instrument
        from instrument import groups
        from instrument.completion import TracedPrequest
        from instrument.matched import TracedMessage
        from instrument.rma import TracedWin
        from instrument.untraced import SelfComm

        view = _plain_view(mpi)
        if not deferred:
            view.COMM_WORLD = self.world
            view.COMM_SELF = SelfComm(mpi.COMM_SELF)   # made from a handle: needs MPI up
        view.Request = instrument.TracedRequest
        view.Prequest = TracedPrequest
        view.Win = TracedWin
        view.Intracomm = groups.Intracomm
        view.Intercomm = groups.Intercomm
        view.Message = TracedMessage
        return view

    def _deferred(self, mpi):
        """The view of a program that initialises MPI itself (`mpi4py.rc.initialize = False`):
        its `Init` and `Init_thread` start the run when MPI is up (every rank calls them, so the
        start's collectives line up), then give it the traced COMM_WORLD and a Finalize that
        finishes the run first."""
        import instrument
        from instrument import untraced

        traced = os.environ.get("HINDSIGHT_UNTRACED") != "1"
        if traced:
            view = self._view(mpi, deferred=True)
            early = []
            # Until MPI.Init, COMM_WORLD is answered by __getattr__, which notes that the
            # program holds the real one (a traced one cannot be made before MPI is up).
            del view.COMM_WORLD

            def early_world(attr: str):
                if attr == "COMM_WORLD" and not early:
                    early.append(True)
                return getattr(mpi, attr)
            view.__getattr__ = early_world
        else:
            view = _plain_view(mpi)
        real_init, real_init_thread = mpi.Init, mpi.Init_thread

        def begin(refuse: str | None) -> None:
            self._begin(refuse)
            view.Finalize = mpi.Finalize        # instrument.start made it finish the run first
            if instrument.active():
                from instrument.untraced import SelfComm
                view.COMM_WORLD = self.world
                view.COMM_SELF = SelfComm(mpi.COMM_SELF)
                view.__getattr__ = lambda attr: getattr(mpi, attr)
                if early:
                    untraced.count(EARLY_WORLD)

        def Init() -> None:
            real_init()
            begin(None)

        def Init_thread(*args, **kwargs) -> int:
            provided = real_init_thread(*args, **kwargs)
            # Asked for explicitly; `Init_thread()` takes mpi4py's default level, as rc does.
            asked = args[0] if args else kwargs.get("required")
            begin(self._refusal(FIX_INIT_THREAD)
                  if asked == mpi.THREAD_MULTIPLE and provided == mpi.THREAD_MULTIPLE else None)
            return provided

        _put_inits(view, mpi, Init, Init_thread)
        return view


def _program_traceback(program: str) -> None:
    """An uncaught exception's traceback from the program's first frame on, as ``python prog.py``
    prints it: the launcher's frames (this module, runpy) are not the user's. The tracers' hooks,
    installed later, call this one after recording the error."""
    path = os.path.abspath(program)
    previous_hook = sys.excepthook

    def hook(exc_type, exc, tb):
        first = tb
        while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) != path:
            tb = tb.tb_next
        tb = tb if tb is not None else first
        if exc is not None:
            exc = exc.with_traceback(tb)    # what the printer reads (not the tb argument alone)
        previous_hook(exc_type, exc, tb)
    sys.excepthook = hook


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
    _program_traceback(program)
    import runpy
    try:
        runpy.run_path(program, run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            if opts["recorder"] == "python" and hook.world is not None:
                from instrument.session import program_exited
                program_exited(exc.code)
            elif hook.program_exited is not None:
                hook.program_exited(exc.code)
            raise
    finally:
        if hook in sys.meta_path:
            sys.meta_path.remove(hook)
    python = opts["recorder"] == "python"
    if python:
        from instrument.session import end_of_program, finish
        end_of_program()
    elif hook.end_mark is not None:
        hook.end_mark()             # the program's end, for the library (wall_ns ends here)
    if hook.world is None:
        # Nothing ran under MPI, nothing was traced.
        _say(f"hindsight: {program} never " + ("initialised MPI (mpi4py.rc.initialize is False "
                                              "and it called no MPI.Init)" if hook.imported
                                              else "imported mpi4py.MPI") + ": no trace written")
        raise SystemExit(1)
    if python:
        finish()


if __name__ == "__main__":
    main()
