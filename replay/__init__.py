"""hindsight replay engine: recompute a trace's timeline under another network or CPU speed.

Public API (docs/replay.md)::

    prep = replay.prepare(trace_dir)                       # read, match, cache
    res = replay.run(prep, "loggps", {"L": "2.5us"}, compute_scale=1.0)
    res.makespan_ns, res.breakdown(), res.events_frame(), res.write(out_dir)
    df = replay.sweep(prep, "loggp", vary=["G=0.01ns..10ns:log:25"])
    pairs, problems = replay.matching.match_messages(table)
    df = replay.load(trace_dir)                              # tidy pandas frame (docs/interop.md)

The names are imported on first use (PEP 562), so that ``import replay`` (every command line
module does) loads neither numba nor pandas nor pyarrow.
"""

import importlib
import sys
import types

import hindsight  # noqa: F401  (first: its allocator setting must precede pyarrow's import)

#: public name -> the module that defines it
_PUBLIC = {"prepare": "replay.prepare", "Prepared": "replay.prepare",
           "run": "replay.engine", "sweep": "replay.sweeps", "Result": "replay.engine",
           "ReplayError": "replay.errors", "NoPredictionError": "replay.errors",
           "ParamError": "replay.models", "match_messages": "replay.matching",
           "MessageMatch": "replay.matching", "load": "replay.frame"}

__all__ = ["prepare", "run", "sweep", "Result", "Prepared", "ReplayError", "NoPredictionError",
           "ParamError",
           "match_messages", "MessageMatch", "load"]


def __getattr__(name: str):
    if name in _PUBLIC:
        value = getattr(importlib.import_module(_PUBLIC[name]), name)
        globals()[name] = value
        return value
    if not name.startswith("__"):
        # a submodule not imported yet: ``replay.matching`` after a bare ``import replay``
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))


class _Package(types.ModuleType):
    def __setattr__(self, name: str, value) -> None:
        # Importing the submodule replay.prepare sets the package's attribute `prepare` to it;
        # `replay.prepare` is the function.
        if name == "prepare" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
