"""What every application shares: the command line, the tracing hooks, input errors, the verdict."""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, NoReturn

from mpi4py import MPI

from apps import APPS, PARADIGMS

from instrument import end_of_program as _end_of_program
from instrument import finish as _finish
from instrument import region as _region
from instrument import start as _start


class InputError(Exception):
    """Bad user input: reported as one line on stderr by rank 0, exit status 2, no traceback."""


def world_rank() -> int:
    return MPI.COMM_WORLD.Get_rank()


def fail(message: str, code: int = 2) -> NoReturn:
    """Every rank calls this with the same message (input checks are deterministic): rank 0
    prints one line, all ranks exit with the same status, so mpiexec neither hangs nor spams."""
    if world_rank() == 0:
        print(f"error: {message}", file=sys.stderr, flush=True)
    sys.exit(code)


def abort(message: str, code: int = 2) -> NoReturn:
    """For an error seen by one rank only (the others would block in MPI): print and abort all."""
    print(f"error: {message}", file=sys.stderr, flush=True)
    MPI.COMM_WORLD.Abort(code)
    raise SystemExit(code)  # not reached


def region(name: str, size: int | None = None):
    """An application phase (``task``, ``merge``, ``divide``, ``conquer``, ``combine``, ``io``,
    ``send_to_server``); a no-op when tracing is off."""
    return _region(name, size=size) if size is not None else _region(name)


def start(trace_dir: str | None, app: str, paradigm: str, args: dict[str, Any]) -> MPI.Intracomm:
    """Start tracing (or not) and return the communicator the application must use."""
    return _start(trace_dir, app=app, paradigm=paradigm, args=args)


def end_of_program(written_by_root: bool = False) -> None:
    """The parallel phase is over on this rank: what follows (checking the result against the
    reference) is not part of the run's wall time. With `written_by_root`, rank 0 still writes
    the output and marks the end itself after that."""
    if not (written_by_root and world_rank() == 0):
        _end_of_program()


def wall_time_text(seconds: float) -> str:
    """How an application prints the time it measured itself (``MPI.Wtime`` on rank 0 from
    just after ``start``, the start barrier, to the end of its parallel phase, input reading
    included): labelled, so nobody takes it for the traced run's makespan, which ends at the
    last traced event on any rank (docs/trace-format.md, "Makespan")."""
    return f"wall time on rank 0, start barrier to end of the parallel phase {seconds:.3f} s"


def finish(result_verified: bool) -> None:
    _finish(result_verified=result_verified)


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line from rank 0 only."""

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        fail(f"{self.prog}: {message}")


def make_parser(app: str, description: str) -> argparse.ArgumentParser:
    """The flags every application accepts (the contract with ``hindsight collect``)."""
    p = _Parser(prog=f"python -m apps.{app}", description=description)
    p.add_argument("--paradigm", default="pipeline",
                   help=f"execution paradigm: one of {', '.join(APPS[app])} (default pipeline)")
    p.add_argument("--trace", metavar="DIR", default=None,
                   help="write a hindsight trace to DIR (absent: untraced)")
    p.add_argument("--output", metavar="PATH", default=None, help="write the result to PATH")
    p.add_argument("--group-size", type=int, default=0, metavar="G",
                   help="split the P ranks into communicators of G ranks that work concurrently "
                        "on their share of the input (paper 000's processor sets); "
                        "0 = one group of all ranks. Not used by hypercube")
    p.add_argument("--masters", type=int, default=0, metavar="K",
                   help="master-worker only: K masters, each owning a slice of the workers "
                        "(sets the group size to ceil(P/K))")
    p.add_argument("--seed", type=int, default=1, help="seed of the generated input")
    return p


@dataclass(frozen=True)
class Common:
    paradigm: str
    trace: str | None
    output: str | None
    group_size: int
    seed: int


def check_common(app: str, ns: argparse.Namespace) -> Common:
    """Validate the shared flags identically on every rank; resolve --masters to a group size."""
    nprocs = MPI.COMM_WORLD.Get_size()
    if ns.paradigm not in PARADIGMS:
        fail(f"unknown paradigm {ns.paradigm!r}; choose one of {', '.join(PARADIGMS)}")
    if ns.paradigm not in APPS[app]:
        fail(f"{app} does not support paradigm {ns.paradigm!r}; it supports {', '.join(APPS[app])}")
    if ns.group_size < 0:
        fail(f"--group-size must be >= 0 (got {ns.group_size})")
    if ns.group_size > nprocs:
        fail(f"--group-size {ns.group_size} is larger than the number of ranks ({nprocs})")
    if ns.masters < 0:
        fail(f"--masters must be >= 0 (got {ns.masters})")
    group_size = ns.group_size
    if ns.masters:
        if ns.paradigm != "master-worker":
            fail("--masters applies to the master-worker paradigm only")
        if ns.group_size:
            fail("give either --masters or --group-size, not both")
        if ns.masters > nprocs:
            fail(f"--masters {ns.masters} is larger than the number of ranks ({nprocs})")
        group_size = -(-nprocs // ns.masters)
    if ns.paradigm == "hypercube":
        if nprocs & (nprocs - 1):
            fail(f"the hypercube paradigm needs a power-of-two number of ranks (got {nprocs})")
    if ns.seed < 0:
        fail(f"--seed must be >= 0 (got {ns.seed})")
    if ns.output is not None:
        parent = os.path.dirname(os.path.abspath(ns.output))
        if not os.path.isdir(parent):
            fail(f"--output: directory {parent} does not exist")
    return Common(ns.paradigm, ns.trace, ns.output, group_size or nprocs, ns.seed)


def positive(name: str, value: int) -> int:
    if value < 1:
        fail(f"{name} must be a positive integer (got {value})")
    return value


def conclude(comm: MPI.Intracomm, ok_on_root: bool | None, what: str) -> NoReturn:
    """Share rank 0's verdict, record it in the manifest on every rank, exit 0 or 1.

    A wrong result is an error: the run exits non-zero on every rank. The verdict travels on the
    untraced world communicator: checking the result is not part of the run being measured, and
    a traced broadcast would put rank 0's reference computation into every rank's timeline."""
    ok = bool(MPI.COMM_WORLD.bcast(ok_on_root, root=0))
    finish(result_verified=ok)
    if not ok:
        if comm.Get_rank() == 0:
            print(f"error: {what}: result does NOT match the reference", file=sys.stderr,
                  flush=True)
        sys.exit(1)
    sys.exit(0)


def guarded(main: Callable[[list[str] | None], None]) -> Callable[[list[str] | None], None]:
    """Turn an ``InputError`` raised on every rank into ``fail``: one line, exit 2."""
    def run(argv: list[str] | None = None) -> None:
        try:
            main(argv)
        except InputError as e:
            fail(str(e))
    return run
