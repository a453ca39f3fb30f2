"""Imported by Python's `site` at start-up in the untraced run of a Python program
(`hindsight collect --untraced`): the program then runs as `python prog.py` runs it, with the
PMPI library preloaded and recording off (instrument/native.py), and no module of hindsight in
the process. A launcher in Python would shape the process's heap differently: a NumPy stencil
took 7k page faults a run through one and 178k as `python prog.py` (docs/native.md).

What this adds: one `atexit` callback, the first registered and so the last to run, after the
program's code and its own exit handlers have run. It puts the time (CLOCK_MONOTONIC, the
library's clock) into the environment, where the library's MPI_Finalize reads it as the
program's end (`program_end_ns`): mpi4py finalizes MPI only in the interpreter's teardown, which
the traced runs do not count. Then this folder leaves `sys.path`, and a `sitecustomize.py` that
it shadowed on the path is run, as Python would have run it."""

import atexit
import os
import sys
import time


def _program_end(clock=time.monotonic_ns, environ=os.environ) -> None:
    environ["HINDSIGHT_PROGRAM_END_NS"] = str(clock())


atexit.register(_program_end)

_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
if any(os.path.isfile(os.path.join(p or ".", "sitecustomize.py")) for p in sys.path):
    del sys.modules[__name__]
    import sitecustomize  # noqa: F401,E402  (the one this file shadowed)
