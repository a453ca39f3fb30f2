"""hindsight's compiled kernels: numba functions that import numba only when they must, and their
machine code compiled ahead of time, which a command runs without numba at all.

``njit(**options)`` is ``numba.njit(**options)``, deferred. Until numba is imported the decorated
function is a ``Kernel``, which holds the Python function and its options. A call runs

1. the function's machine code compiled ahead of time (below), if there is one for the types of
   the arguments, without importing numba; else
2. numba's dispatcher (``Kernel.jit``), importing numba first. Its import replaces every
   ``Kernel`` in every loaded module's namespace by its dispatcher (``_bind``, also when anything
   else imports numba): numba finds the functions a kernel calls in its module's globals, and
   must find dispatchers there. From then on ``njit`` returns dispatchers straight away.

Why: importing numba and its first call (its typing and target contexts) cost a command about
0.3 s and 130 MB before any kernel runs, more than a warm replay's own kernels.

**Ahead of time** (``python -m hindsight.aot_build``, run by ``make``): the kernels that a sample
of commands calls from Python are compiled with ``numba.pycc``, for the argument types they were
called with, into extension modules in ``hindsight/__pycache__``, one per Python module
(``aot-<key>-<module>``, loaded when one of its kernels is first called; ``.nonrt`` for its
kernels compiled without numba's reference counting, ``_nrt=False``), with ``aot-<key>.json``
naming each exported function's kernel and argument types. The key is
``hindsight.sources.project_digest()`` with Python's and numpy's versions: any change of the
project's files retires the modules (numba's own cache is retired the same way,
hindsight/kernel_cache.py), and the kernels run through numba until they are built anew. The
modules link nothing of numba's: loading one costs a few ms. Their functions release the GIL
during the call (the build asks pycc to), as ``nogil`` kernels do, so kernels run side by side
on threads (those not marked ``nogil`` too: nopython code touches no Python object).
``HINDSIGHT_AOT=0`` runs everything through numba.

Argument types are matched exactly (``arg_key``: an array's dtype, dimensions, layout and
writability, a named tuple's class and fields, as numba types them); keyword arguments, other
values (structured dtypes, array subclasses, ints beyond int64, ...), and types the sample never
passed go to numba. Standard library and numpy only.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from hindsight import sources
from hindsight.compiling import _when_numba

#: where the ahead-of-time modules and their description are kept
AOT_DIR = sources.ROOT / "hindsight" / "__pycache__"


def aot_description() -> Path:
    """The description (``.json``) of the ahead-of-time modules of the project's files as they
    are, for this Python and numpy: which module and function runs which kernel for which
    arguments."""
    key = f"{sources.project_digest()} {sys.version} {np.__version__}"
    return AOT_DIR / f"aot-{sources.digest(key)}.json"


def aot_module_path(description: Path, module: str) -> Path:
    """The file, beside ``description``, of extension module ``module`` (a Python module's
    name: its kernels, with ``.nonrt`` those compiled without reference counting)."""
    from importlib.machinery import EXTENSION_SUFFIXES
    return description.with_name(f"{description.stem}-{module}{EXTENSION_SUFFIXES[0]}")


def aot_module_name(module: str) -> str:
    """The name inside the file of extension module ``module`` (its ``PyInit_``)."""
    return "aot_" + module.replace(".", "_")


class Kernel:
    """A numba function not yet handed to numba (see the module docstring)."""

    def __init__(self, py_func: Callable, options: dict[str, Any]):
        functools.update_wrapper(self, py_func)
        self.py_func = py_func
        self.options = options
        self.dispatcher: Any = None
        #: (``hindsight.aot_build``) per argument key, numba's types of the arguments of the
        #: calls from Python that it compiled the function for
        self.seen: dict[tuple, tuple] = {}

    @property
    def name(self) -> str:
        return f"{self.py_func.__module__}:{self.py_func.__qualname__}"

    def __call__(self, *args, **kws):
        fast = None if kws else _aot_function(self, args)
        if fast is not None:
            return fast(*args)
        return self.jit()(*args, **kws)

    def jit(self) -> Any:
        """numba's dispatcher of this function (importing numba)."""
        if not _bound:          # (not the dispatcher alone: the globals are rebound after it)
            bind()
        return self.dispatcher

    def __getattr__(self, name: str) -> Any:
        # numba's public attributes (``signatures``, ``inspect_llvm``, ...) are the dispatcher's;
        # a private name (what tools probe objects for) imports nothing
        if name.startswith("_") or name in ("dispatcher", "py_func", "options", "seen"):
            raise AttributeError(name)
        return getattr(self.jit(), name)

    def __repr__(self) -> str:
        return f"<hindsight kernel {self.name}>"


_kernels: list[Kernel] = []
_on_bind: list[Callable[[], None]] = []
_bound = False
#: set by ``hindsight.aot_build`` before any kernel is handed to numba
_recording = False
#: held while kernels are handed to numba (and by ``njit``): a thread that calls a kernel
#: meanwhile waits until every module's names hold dispatchers
_binding = threading.RLock()


def njit(**options: Any) -> Callable[[Callable], Any]:
    """``numba.njit(**options)``, deferred until numba is imported (see the module
    docstring)."""

    def wrap(f: Callable) -> Any:
        k = Kernel(f, options)
        with _binding:
            if not _bound:
                _kernels.append(k)
                return k
        _dispatch(k)
        if _recording:
            _kernels.append(k)
        return k.dispatcher
    return wrap


def on_bind(hook: Callable[[], None]) -> None:
    """Run ``hook`` when numba is imported, before any kernel is handed to it (a module defines
    there what only numba can make, such as an intrinsic its kernels call)."""
    with _binding:
        if not _bound:
            _on_bind.append(hook)
            return
    hook()


def bind() -> None:
    """Import numba and hand it every kernel (``_bind``, which numba's import runs itself)."""
    import numba  # noqa: F401  (outside the lock: the importing thread's _bind takes it)
    _bind()


def _bind() -> None:
    global _bound
    with _binding:
        if _bound:
            return
        for hook in _on_bind:
            hook()
        for k in _kernels:
            _dispatch(k)
        # every loaded module's names that hold a kernel hold its dispatcher from now on:
        # numba types a kernel's calls by the globals of its module
        for mod in list(sys.modules.values()):
            names = getattr(mod, "__dict__", None)
            if not isinstance(names, dict):
                continue
            for key, value in list(names.items()):
                if type(value) is Kernel:
                    names[key] = value.dispatcher
        _bound = True


def _dispatch(k: Kernel) -> None:
    """Hand ``k`` to numba; while ``hindsight.aot_build`` records, the types of the calls from
    Python it compiles for (or loads from its cache) are kept in ``k.seen``."""
    import numba
    k.dispatcher = d = numba.njit(**k.options)(k.py_func)
    if _recording:
        compile_for_args = d._compile_for_args     # (what numba calls for types it has not seen)

        def recorded(*args, **kws):
            try:
                k.seen.setdefault(arg_key(args), tuple(d.typeof_pyval(a) for a in args))
            except _NoKey:
                pass                        # (a type no key covers: numba's alone)
            return compile_for_args(*args, **kws)
        d._compile_for_args = recorded


_when_numba(_bind)


def readonly(*arrays: Any) -> tuple:
    """Read-only views of ``arrays``. A kernel's input that it only reads, passed this way, has
    one numba type wherever it came from (a cache's mapping, which is read-only, or a fresh
    computation): numba, and the ahead-of-time modules, compile a function once per
    writability of its arguments."""
    views = []
    for a in arrays:
        v = a.view()
        v.flags.writeable = False
        views.append(v)
    return tuple(views)


# ---- ahead of time ---------------------------------------------------------------------------

class _NoKey(Exception):
    pass


def arg_key(args: tuple) -> tuple:
    """The key of a call's arguments: what numba's types of them distinguish (raises ``_NoKey``
    for a value it does not cover)."""
    return tuple(_value_key(a) for a in args)


_INT, _FLOAT, _BOOL = "<i8", "<f8", "|b1"


def _value_key(v: Any) -> Any:
    t = type(v)
    if t is np.ndarray or t is np.memmap:   # (a masked array, say, numba refuses)
        f, dt = v.flags, v.dtype
        if dt.fields is not None or dt.subdtype is not None:
            raise _NoKey("structured dtype")    # (its str is its size alone)
        return (dt.str, v.ndim, "C" if f.c_contiguous else "F" if f.f_contiguous else "A",
                bool(f.writeable))
    if t is bool or t is np.bool_:
        return _BOOL
    if t is int:
        if not -2**63 <= v < 2**63:
            raise _NoKey("int beyond int64")    # (numba types it uint64, or refuses it)
        return _INT
    if t is float:
        return _FLOAT
    if isinstance(v, (np.integer, np.floating)):
        return v.dtype.str
    if isinstance(v, tuple):
        named = (f"{t.__module__}.{t.__qualname__}({','.join(t._fields)})"
                 if hasattr(t, "_fields") else "")
        return (named, tuple(_value_key(x) for x in v))
    raise _NoKey(t.__name__)


def _tuples(x: Any) -> Any:
    return tuple(_tuples(y) for y in x) if isinstance(x, list) else x


@functools.cache
def _aot_table() -> dict[str, dict[tuple, list]] | None:
    """Per kernel name, per argument key, [its extension module, the exported function's name]
    (the function itself once loaded: ``_aot_function``); None when there are no ahead-of-time
    modules for the project's files as they are, or they are off (``HINDSIGHT_AOT=0``)."""
    if os.environ.get("HINDSIGHT_AOT", "1") == "0" or not _use_aot:
        return None
    try:
        about = json.loads(aot_description().read_text())     # (named by numpy's version too)
        table = {name: {_tuples(key): [module, symbol] for module, symbol, key in exports}
                 for name, exports in about["kernels"].items()}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return table or None


@functools.cache
def _aot_module(module: str) -> Any:
    """The extension module ``module`` (None if it cannot be loaded)."""
    path = aot_module_path(aot_description(), module)
    try:
        spec = importlib.util.spec_from_file_location(aot_module_name(module), path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    except (OSError, ImportError, AttributeError):
        return None
    return mod


#: False while ``hindsight.aot_build`` records what goes to numba
_use_aot = True


def _aot_function(k: Kernel, args: tuple) -> Callable | None:
    table = _aot_table()
    if table is None:
        return None
    exports = table.get(k.name)
    if not exports:
        return None
    try:
        key = arg_key(args)
    except _NoKey:
        return None
    found = exports.get(key)
    if found is None or callable(found):
        return found
    fn = getattr(_aot_module(found[0]), found[1], None)
    if fn is None:
        exports.pop(key, None)              # (a module that did not load: numba's)
    else:
        exports[key] = fn
    return fn


def aot_loaded() -> bool:
    """Whether this process runs kernels compiled ahead of time (it found modules for the
    project's files as they are)."""
    return _aot_table() is not None
