"""Instrumentation for mpi4py programs: a traced communicator, regions, and the run lifecycle.

    import instrument
    comm = instrument.start(trace_dir, app="sorting", paradigm="pipeline", args={...})
    with instrument.region("task", size=n):
        ...
    instrument.finish(result_verified=True)

Unmodified programs: ``mpiexec -n P python -m instrument.run --trace DIR prog.py ARGS``.
"""

from instrument.comm import TracedComm, TracedRequest
from instrument.session import active, end_of_program, finish, region, start

Request = TracedRequest

__all__ = ["TracedComm", "TracedRequest", "Request", "active", "end_of_program", "finish", "region",
           "start"]
