"""Hypercube divide and conquer (paper 002, HDC).

The rank group is halved recursively into a binary tree of groups whose leaves are single ranks;
at each level, partners are the ranks with the same rank in the two halves (``r`` and
``r xor h``). Rank 0 loads the problem; going down, every rank holding a problem divides it and
sends the upper half to its partner; each leaf conquers its part; going up, partners exchange
their results and both combine them (lower half's result first, so both get the same value).
At the end every rank holds the full result. Needs a power-of-two number of ranks (the command
line refuses others with a clear message).
"""
from __future__ import annotations

from typing import Any

from mpi4py import MPI

from apps.common import region
from apps.skeletons.base import DivideConquer

TAG_DIVIDE = 40
TAG_COMBINE = 41


def run(comm: MPI.Intracomm, app: DivideConquer) -> Any:
    n, r = comm.Get_size(), comm.Get_rank()
    if n & (n - 1):
        raise ValueError(f"hypercube needs a power-of-two number of ranks, got {n}")
    problem: Any = None
    if r == 0:
        with region("io"):
            problem = app.load()
    h = n // 2
    while h >= 1:  # divide: holders are the ranks that are multiples of 2h
        if r % (2 * h) == 0:
            with region("divide", size=app.problem_size(problem)):
                problem, upper = app.divide(problem)
            comm.send(upper, dest=r + h, tag=TAG_DIVIDE)
        elif r % (2 * h) == h:
            problem = comm.recv(source=r - h, tag=TAG_DIVIDE)
        h //= 2
    with region("conquer", size=app.problem_size(problem)):
        result = app.conquer(problem)
    h = 1
    while h < n:  # combine with the partner of each level, innermost first
        partner = r ^ h
        other = comm.sendrecv(result, dest=partner, sendtag=TAG_COMBINE,
                              source=partner, recvtag=TAG_COMBINE)
        lower, upper = (result, other) if r < partner else (other, result)
        with region("combine", size=app.result_size(result) + app.result_size(other)):
            result = app.combine(lower, upper)
        h <<= 1
    return result
