"""Binary reduction tree (paper 000 §VI-D).

Batch after batch, every rank of a group computes one task; then the batch results are reduced
up a binomial tree to the group's rank 0 while the ranks that already sent idle; the root merges
the batch result into the group result, and only then do all ranks start the next batch. The
group roots send their results to world rank 0 (send-to-server). Works for any group size.
"""
from __future__ import annotations

from typing import Any

from mpi4py import MPI

from apps.skeletons.base import Reduction, make_groups, merge, run_task, send_to_server

TAG_TREE = 20


def run(world: MPI.Intracomm, app: Reduction, group_size: int = 0) -> Any:
    groups = make_groups(world, group_size, app.n_tasks)
    comm = groups.comm
    n, r = comm.Get_size(), comm.Get_rank()
    start, stop = groups.tasks
    acc: Any = None  # the group result, on group rank 0
    for base in range(start, stop, n):
        part = run_task(app, base + r) if base + r < stop else None
        h = 1
        while h < n:
            if r & h:  # send up and idle until the next batch
                if part is not None:
                    comm.send(part, dest=r - h, tag=TAG_TREE)
                break
            # Tasks go to ranks in order, so a subtree holds data iff its lowest rank does.
            if r + h < n and base + r + h < stop:
                part = merge(app, part, comm.recv(source=r + h, tag=TAG_TREE))
            h <<= 1
        if r == 0:
            acc = merge(app, acc, part)
    return send_to_server(world, app, groups, acc, group_root=0)
