"""Trace an unmodified mpi4py program:

    mpiexec -n P python -m instrument.run --trace DIR [--app NAME] prog.py [ARGS ...]

`mpi4py.MPI` is replaced, for the program, by a view of the real module in which `COMM_WORLD` is
traced and `Request` is the traced request class (so `MPI.Request.Waitall(...)` is recorded too).
Everything else is the real module. With HINDSIGHT_UNTRACED=1 (`hindsight collect --untraced`)
the program runs on the real module and only its wall time is written (instrument.session).
"""

from __future__ import annotations

import argparse
import runpy
import sys
import types

from mpi4py import MPI

import instrument
from instrument.session import end_of_program, finish, start


class _TracedMPI(types.ModuleType):
    def __init__(self, real, world):
        super().__init__(real.__name__, real.__doc__)
        self.__dict__["_real"] = real
        self.__dict__["COMM_WORLD"] = world
        self.__dict__["Request"] = instrument.TracedRequest

    def __getattr__(self, name):
        return getattr(self.__dict__["_real"], name)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m instrument.run",
                                     description="Trace an unmodified mpi4py program.")
    parser.add_argument("--trace", required=True, metavar="DIR", help="trace directory to write")
    parser.add_argument("--app", default=None, help="application name for the manifest")
    parser.add_argument("--paradigm", default=None, help="paradigm name for the manifest")
    parser.add_argument("program", help="the mpi4py program (a .py file)")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the program's arguments")
    ns = parser.parse_args(argv)
    import os
    if not os.path.isfile(ns.program):
        if MPI.COMM_WORLD.Get_rank() == 0:
            sys.stderr.write(f"hindsight: program not found: {ns.program}\n")
        raise SystemExit(2)
    world = start(ns.trace, app=ns.app or os.path.basename(ns.program), paradigm=ns.paradigm,
                  args={"argv": ns.args}, program=os.path.abspath(ns.program))
    traced = instrument.active()
    import mpi4py
    if traced:
        proxy = _TracedMPI(MPI, world)
        sys.modules["mpi4py.MPI"] = proxy
        mpi4py.MPI = proxy
    # As `python prog.py` does: the program's folder first on the path, its own argv.
    sys.path[0] = os.path.dirname(os.path.abspath(ns.program))
    sys.argv = [ns.program] + ns.args
    try:
        runpy.run_path(ns.program, run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise
    finally:
        end_of_program()
        sys.modules["mpi4py.MPI"] = MPI
        mpi4py.MPI = MPI
    finish()


if __name__ == "__main__":
    main()
