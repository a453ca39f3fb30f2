"""Instrumentation for mpi4py programs: a traced communicator, regions, and the run lifecycle.

    import instrument
    comm = instrument.start(trace_dir, app="sorting", paradigm="pipeline", args={...})
    with instrument.region("task", size=n):
        ...
    instrument.finish(result_verified=True)

Unmodified programs: ``mpiexec -n P python -m instrument.run --trace DIR prog.py ARGS``.

The names below load on first use (PEP 562): importing the package, as `python -m
instrument.run` does, must not import mpi4py.MPI (which initialises MPI) before the program does.
"""

from __future__ import annotations

_NAMES = {"TracedComm": "instrument.comm", "TracedRequest": "instrument.comm",
          "Request": "instrument.comm", "active": "instrument.session",
          "end_of_program": "instrument.session", "finish": "instrument.session",
          "region": "instrument.session", "start": "instrument.session"}

__all__ = sorted(_NAMES)


def __getattr__(name: str):
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'instrument' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(module), "TracedRequest" if name == "Request"
                    else name)
    globals()[name] = value
    return value
