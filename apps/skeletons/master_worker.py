"""Master/worker (paper 000 §VI-C, paper 004; paper 003's block sort is ``block_stream``).

``run``: demand-driven. In each group, rank 0 is the master and hands out task indices on
demand; a worker's result doubles as its request for more work. The master answers first and
merges afterwards, so a worker is not kept waiting by the merge. Several groups = several
masters, each owning a slice of the workers (paper 004's multi-master); the masters send their
results to world rank 0 (send-to-server). A group of one rank runs its tasks itself.

``block_stream``: paper 003's static dealing with on-demand gathering (see its docstring).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from mpi4py import MPI

from apps.common import region
from apps.skeletons import SKELETONS
from apps.skeletons.base import make_groups, merge, run_task, send_to_server
from apps.skeletons.bundles import Reduction

TAG_WORK = 30
TAG_RESULT = 31
TAG_BLOCK = 32
TAG_PART = 33
TAG_PULL = 34
STOP = -1


def run(world: MPI.Intracomm, app: Reduction, group_size: int = 0) -> Any:
    groups = make_groups(world, group_size, app.n_tasks)
    comm = groups.comm
    n = comm.Get_size()
    start, stop = groups.tasks
    acc: Any = None
    if n == 1:
        for i in range(start, stop):
            acc = merge(app, acc, run_task(app, i))
    elif comm.Get_rank() == 0:
        nxt, active = start, n - 1
        status = MPI.Status()
        while active:
            result = comm.recv(source=MPI.ANY_SOURCE, tag=TAG_RESULT, status=status)
            worker = status.Get_source()
            if nxt < stop:
                comm.send(nxt, dest=worker, tag=TAG_WORK)
                nxt += 1
            else:
                comm.send(STOP, dest=worker, tag=TAG_WORK)
                active -= 1
            acc = merge(app, acc, result)
    else:
        result = None  # the first message is a bare request
        while True:
            comm.send(result, dest=0, tag=TAG_RESULT)
            i = comm.recv(source=0, tag=TAG_WORK)
            if i == STOP:
                break
            result = run_task(app, i)
    return send_to_server(world, app, groups, acc, group_root=SKELETONS["master-worker"].result_root)


@dataclass(frozen=True)
class BlockStream:
    """User functions of paper 003's algorithm (the skeleton owns every message)."""
    n_blocks: int
    read_block: Callable[[int], Any]                 # rank 0: read block i of the input
    process: Callable[[Any], Any]                    # sort one block
    local_merge: Callable[[list[Any]], Any]          # resolve the local dependencies
    parts: Callable[[Any], Iterable[Any]]            # cut the local result into parts of size s
    global_merge: Callable[[list[Iterator[Any]]], Any]  # rank 0: p-way merge pulling parts
    size: Callable[[Any], int]


def block_stream(comm: MPI.Intracomm, app: BlockStream) -> Any:
    """Paper 003, steps 2-5. Rank 0 reads the input block by block and deals block i to rank
    i mod p (keeping its own share, which it processes between reads); every rank processes
    its blocks in order of arrival, then merges them locally and cuts the result into parts;
    each worker sends its first part at once and the rest only when rank 0 pulls it, which rank
    0 does from inside its p-way merge whenever it runs out of a worker's data. Returns
    ``global_merge``'s value on rank 0, None elsewhere."""
    p, me = comm.Get_size(), comm.Get_rank()
    mine: list[Any] = []
    if me == 0:
        inflight = []
        for i in range(app.n_blocks):
            with region("io", size=0):
                block = app.read_block(i)
            dest = i % p
            if dest == 0:
                with region("task", size=app.size(block)):
                    mine.append(app.process(block))
            else:
                inflight.append(comm.isend(block, dest=dest, tag=TAG_BLOCK))
        for req in inflight:
            req.wait()
    else:
        for _ in range(me, app.n_blocks, p):
            block = comm.recv(source=0, tag=TAG_BLOCK)
            with region("task", size=app.size(block)):
                mine.append(app.process(block))
    with region("merge", size=sum(app.size(b) for b in mine)):
        local = app.local_merge(mine)
    parts = iter(app.parts(local))
    if me != 0:
        _serve_parts(comm, parts)
        return None
    streams: list[Iterator[Any]] = [parts] + [_pull(comm, w) for w in range(1, p)]
    return app.global_merge(streams)


def _serve_parts(comm: MPI.Intracomm, parts: Iterator[Any]) -> None:
    """Worker side of the gathering: first part unasked, then one part per pull request.
    Each message is (part, more): ``more`` False marks the last one, so no pull is wasted."""
    cur = next(parts, None)
    while True:
        nxt = next(parts, None)
        comm.send((cur, nxt is not None), dest=0, tag=TAG_PART)
        if nxt is None:
            return
        comm.recv(source=0, tag=TAG_PULL)
        cur = nxt


def _pull(comm: MPI.Intracomm, worker: int) -> Iterator[Any]:
    """Rank 0's view of a worker's result: an iterator that fetches parts on demand."""
    part, more = comm.recv(source=worker, tag=TAG_PART)
    while True:
        if part is not None:
            yield part
        if not more:
            return
        comm.send(None, dest=worker, tag=TAG_PULL)
        part, more = comm.recv(source=worker, tag=TAG_PART)
