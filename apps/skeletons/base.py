"""What the reduction skeletons share: running and merging tasks, processor sets, the
send-to-server stage (the user-function bundles are in ``apps.skeletons.bundles``).

Results travel with the pickle API (``send``/``recv``): results are numpy arrays or small tuples
of them, which mpi4py pickles with protocol 5 (a memory copy), and the trace records the pickled
size that travels on the wire.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mpi4py import MPI

from apps.common import region
from apps.skeletons.bundles import Reduction

TAG_SERVER = 90  # group root -> world rank 0 (send-to-server)


def run_task(app: Reduction, i: int) -> Any:
    with region("io", size=app.task_size(i)):
        x = app.load(i)
    with region("task", size=app.task_size(i)):
        return app.task(x)


def merge(app: Reduction, acc: Any, new: Any) -> Any:
    """Merge ``new`` into ``acc``; ``None`` stands for "nothing yet" (no region then)."""
    if acc is None:
        return new
    if new is None:
        return acc
    with region("merge", size=app.size(acc) + app.size(new)):
        return app.merge(acc, new)


def split_range(n: int, parts: int, i: int) -> tuple[int, int]:
    """The i-th of ``parts`` balanced contiguous slices of range(n)."""
    q, r = divmod(n, parts)
    start = i * q + min(i, r)
    return start, start + q + (1 if i < r else 0)


@dataclass(frozen=True)
class Groups:
    """The processor sets: world ranks split into consecutive communicators of ``size`` ranks
    (the last one may be smaller), each working on a contiguous share of the tasks."""
    comm: MPI.Intracomm     # this rank's group communicator
    index: int              # which group
    count: int              # how many groups
    size: int               # nominal group size G
    tasks: tuple[int, int]  # this group's task range [start, stop)


def make_groups(world: MPI.Intracomm, group_size: int, n_tasks: int) -> Groups:
    nprocs = world.Get_size()
    g = max(1, min(group_size or nprocs, nprocs))
    count = -(-nprocs // g)
    index = world.Get_rank() // g
    # Always split, even for one group: every paradigm then has the same communicator layout.
    comm = world.Split(index, world.Get_rank())
    return Groups(comm, index, count, g, split_range(n_tasks, count, index))


def send_to_server(world: MPI.Intracomm, app: Reduction, groups: Groups, result: Any,
                   group_root: int) -> Any:
    """Final stage: each group's root sends its result to world rank 0, which merges them.

    Returns the global result on world rank 0 and None elsewhere."""
    me = world.Get_rank()
    root_world = [g * groups.size + group_root_of(g, groups, group_root) for g in range(groups.count)]
    if me == 0:
        acc = result if me in root_world else None
        others = [r for r in root_world if r != 0]
        status = MPI.Status()
        for _ in others:  # arrival order: the server merges whatever comes first
            part = world.recv(source=MPI.ANY_SOURCE, tag=TAG_SERVER, status=status)
            acc = merge(app, acc, part)
        return acc
    if groups.comm.Get_rank() == group_root_of(groups.index, groups, group_root):
        with region("send_to_server", size=app.size(result) if result is not None else 0):
            world.send(result, dest=0, tag=TAG_SERVER)
    return None


def group_root_of(g: int, groups: Groups, group_root: int) -> int:
    """Group rank of group g's root; ``group_root < 0`` counts from the end (pipeline: last)."""
    if group_root >= 0:
        return group_root
    members = min(groups.size, MPI.COMM_WORLD.Get_size() - g * groups.size)
    return members + group_root
