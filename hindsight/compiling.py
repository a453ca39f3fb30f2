"""numba's start-up as hindsight wants it: one line on stderr when numba compiles, so that a cold
cache is not a silent minute, no BLAS check, cached kernels loaded without what only compiling
needs, and retired when any file of the project changes (``fresh_kernels``:
hindsight/kernel_cache.py).

hindsight's kernels are numba functions cached on disk (``cache=True``): the first command that
uses them on a machine, or after the source changed, compiles them, which takes about a minute
on this project's 2-core machine, and nothing else is printed meanwhile. ``announce`` arranges
that the first compilation in the process writes one ``note:`` line. It does not import numba
itself (``hindsight --help`` must not: tests/test_cli_startup.py): a finder on ``sys.meta_path``
waits for numba's import and registers a listener for numba's compile events then (numba's
documented event API, ``numba.core.event``). Standard library only.

``skip_blas_check`` (the same finder, for every CLI command): when numba first prepares its CPU
target for compiling (numba alone does so to load a cached function too), it imports
``numba.np.arraymath``, which checks for a BLAS by importing ``scipy.linalg.cython_blas``, which
imports all of ``scipy.linalg``: 0.3-0.5 s of every replay's start-up here. hindsight's kernels
call no BLAS (no ``np.dot``, ``@`` or ``np.linalg`` inside a kernel), so the check is answered
"none": whenever ``numba.np.arraymath`` is imported (a second finder waits for it: a warm
command, whose loads skip that preparation, never imports it, 0.02-0.05 s), it is imported
while that module is marked missing (a ``None`` entry in ``sys.modules``, which an import
reports missing without loading its parents), and the entry is removed at once, so any other
code imports scipy as usual. A kernel that called np.dot would fail to compile with numba's
"scipy 0.16+ is required for linear algebra" (tests/test_compiling.py checks the kernels
compile this way).

``lean_cache_loads`` (the same finder, for every CLI command): before numba loads a cached
function it "refreshes" its target: imports some forty of its own modules and installs every
typing and lowering registry (a few thousand templates), which only a compilation reads. On a
warm replay that was 0.05-0.1 s of the first kernel call, more than loading the kernel. A load
needs only what the cached machine code links against: numba's runtime (NRT, whose functions
numba compiles at its first use, 0.02 s) and the C helpers numba registers when it is imported.
So a load initializes the runtime and loads; a compilation still refreshes (numba's compiler
does at its start), and a load that fails for any reason is retried numba's way.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import TextIO

NOTE = ("note: compiling hindsight's kernels for this machine (once: later runs load them from "
        "numba's cache); this takes about a minute")


_BLAS = "scipy.linalg.cython_blas"


_announced = False


def announce(stream: TextIO | None = None) -> None:
    """Write ``NOTE`` to ``stream`` (stderr) when numba first compiles in this process."""
    global _announced
    if not _announced:
        _announced = True
        _when_numba(lambda: _listen(stream or sys.stderr))


def skip_blas_check() -> None:
    """Whenever numba imports its array functions, have them skip their BLAS check (see the
    module docstring)."""
    _when_numba(_without_blas)


def fresh_kernels() -> None:
    """Once numba is imported, have it locate the project's cached kernels with
    ``hindsight.kernel_cache.ProjectCacheLocator``, which retires them when any file of the
    project changes (see that module). ``import hindsight`` calls this."""
    _when_numba(_project_locator)


def _project_locator() -> None:
    from hindsight.kernel_cache import ProjectCacheLocator, locator_classes
    classes = locator_classes()
    if classes is not None and ProjectCacheLocator not in classes:
        classes.insert(0, ProjectCacheLocator)


def lean_cache_loads() -> None:
    """Once numba is imported, load cached functions without numba's registry refresh (see the
    module docstring)."""
    _when_numba(_lean_loads)


def _when_numba(action) -> None:
    if "numba" in sys.modules:
        _run(action)
        return
    finder = next((f for f in sys.meta_path if isinstance(f, _WhenNumba)), None)
    if finder is None:
        finder = _WhenNumba()
        sys.meta_path.insert(0, finder)
    finder.actions.append(action)


def _run(action) -> None:
    # each action changes how numba starts up, none is needed for it to work: one that fails
    # (a numba whose internals moved) leaves numba as it is
    try:
        action()
    except Exception:
        pass


def _without_blas() -> None:
    if _BLAS in sys.modules or _ARRAYMATH in sys.modules:
        return                      # scipy.linalg is loaded anyway, or the check was made
    if not any(isinstance(f, _BlasMissing) for f in sys.meta_path):
        sys.meta_path.insert(0, _BlasMissing())


_ARRAYMATH = "numba.np.arraymath"


class _BlasMissing:
    """Finds nothing itself: ``numba.np.arraymath``, whenever it is imported (a compilation,
    not a cache load, needs it: ``lean_cache_loads``), is imported while the BLAS module is
    marked missing, and the mark is removed at once (see the module docstring)."""

    def find_spec(self, name, path=None, target=None):
        if name != _ARRAYMATH:
            return None
        return _spec_around(self, name, _blas_marked_missing)


def _blas_marked_missing(real_exec, module) -> None:
    if _BLAS in sys.modules:        # scipy.linalg was loaded meanwhile: the check finds it
        real_exec(module)
        return
    sys.modules[_BLAS] = None
    try:
        real_exec(module)
    finally:
        if _BLAS in sys.modules and sys.modules[_BLAS] is None:
            del sys.modules[_BLAS]


def _spec_around(finder, name: str, around):
    """The spec Python's other finders give module ``name``, its loader running the module as
    ``around(real_exec_module, module)``; ``finder`` leaves ``sys.meta_path`` first (it acts
    once, and must not find the module again itself)."""
    import importlib.util

    sys.meta_path.remove(finder)
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        return spec
    real_exec = spec.loader.exec_module
    spec.loader.exec_module = lambda module: around(real_exec, module)
    return spec


def _lean_loads() -> None:
    from numba.core import caching
    from numba.core.runtime import rtsys
    # the C symbols a cached kernel may link against that a refresh would add: the runtime's
    # (rtsys.initialize) and the hash secret's (numba.cpython.hashing, loaded at numba's import
    # today; imported here so that a numba that stops doing so still has it)
    import numba.cpython.hashing  # noqa: F401

    full = caching.Cache.load_overload
    if getattr(full, "lean", False):
        return

    def load_overload(self, sig, target_context):
        try:
            rtsys.initialize(target_context)
            with self._guard_against_spurious_io_errors():
                return self._load_overload(sig, target_context)
        except Exception:
            return full(self, sig, target_context)

    load_overload.lean = True
    caching.Cache.load_overload = load_overload


def _listen(stream: TextIO) -> None:
    from numba.core import event

    class Note(event.Listener):
        said = False

        def on_start(self, ev) -> None:
            if not Note.said:
                Note.said = True
                stream.write(NOTE + "\n")
                stream.flush()

        def on_end(self, ev) -> None:
            pass

    event.register("numba:compile", Note())


class _WhenNumba:
    """Finds nothing itself: once numba's own loader has run, runs its actions. (A finder on
    ``sys.meta_path`` needs only ``find_spec``; importlib.abc's base class would cost every
    ``import hindsight`` 7 ms.)"""

    def __init__(self):
        self.actions: list = []

    def find_spec(self, name, path=None, target=None):
        if name != "numba":
            return None
        actions = self.actions

        def then_actions(real_exec, module) -> None:
            real_exec(module)
            for action in actions:
                _run(action)
        return _spec_around(self, name, then_actions)
