"""Hypercube divide and conquer (paper 002, HDC).

The rank group is halved recursively into a binary tree of groups whose leaves are single ranks;
at each level, partners are the ranks with the same rank in the two halves (``r`` and
``r xor h``). Rank 0 loads the problem; going down, every rank holding a problem divides it and
sends the upper half to its partner; each leaf conquers its part; going up, partners exchange
their results and both combine them (lower half's result first, so both get the same value).
At the end every rank holds the full result. Needs a power-of-two number of ranks (the command
line refuses others with a clear message).

The order of every step is ``schedule(n)``, a pure function that ``run`` executes and
``predict.synthesize`` turns into a synthetic trace, so the two cannot drift apart.
"""
from __future__ import annotations

from typing import Any

from mpi4py import MPI

from apps.common import region
from apps.skeletons.bundles import DivideConquer

TAG_DIVIDE = 40
TAG_COMBINE = 41

# ("load", 0) | ("divide", partner): keep the lower half, send the upper | ("recv", source) |
# ("conquer", 0) | ("exchange", partner): sendrecv results, combine (lower half's first)
Action = tuple[str, int]


def schedule(n: int) -> list[list[Action]]:
    """Per rank, its ordered actions. Pure function of n (a power of two)."""
    if n < 1 or n & (n - 1):
        raise ValueError(f"hypercube needs a power-of-two number of ranks, got {n}")
    actions: list[list[Action]] = [[] for _ in range(n)]
    actions[0].append(("load", 0))
    h = n // 2
    while h >= 1:  # divide: holders are the ranks that are multiples of 2h
        for r in range(n):
            if r % (2 * h) == 0:
                actions[r].append(("divide", r + h))
            elif r % (2 * h) == h:
                actions[r].append(("recv", r - h))
        h //= 2
    for r in range(n):
        actions[r].append(("conquer", 0))
        h = 1
        while h < n:  # combine with the partner of each level, innermost first
            actions[r].append(("exchange", r ^ h))
            h <<= 1
    return actions


def run(comm: MPI.Intracomm, app: DivideConquer) -> Any:
    n, r = comm.Get_size(), comm.Get_rank()
    problem: Any = None
    result: Any = None
    for kind, arg in schedule(n)[r]:
        if kind == "load":
            with region("io"):
                problem = app.load()
        elif kind == "divide":
            with region("divide", size=app.problem_size(problem)):
                problem, upper = app.divide(problem)
            comm.send(upper, dest=arg, tag=TAG_DIVIDE)
        elif kind == "recv":
            problem = comm.recv(source=arg, tag=TAG_DIVIDE)
        elif kind == "conquer":
            with region("conquer", size=app.problem_size(problem)):
                result = app.conquer(problem)
        else:
            other = comm.sendrecv(result, dest=arg, sendtag=TAG_COMBINE,
                                  source=arg, recvtag=TAG_COMBINE)
            lower, upper = (result, other) if r < arg else (other, result)
            with region("combine", size=app.result_size(result) + app.result_size(other)):
                result = app.combine(lower, upper)
    return result
