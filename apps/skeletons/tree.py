"""Binary reduction tree (paper 000 §VI-D).

Batch after batch, every rank of a group computes one task; then the batch results are reduced
up a binomial tree to the group's rank 0 while the ranks that already sent idle; the root merges
the batch result into the group result, and only then do all ranks start the next batch. The
group roots send their results to world rank 0 (send-to-server). Works for any group size.

The order of every task, message and merge is ``schedule(n, n_tasks)``, a pure function that
``run`` executes and ``predict.synthesize`` turns into a synthetic trace, so the two cannot drift.
"""
from __future__ import annotations

from typing import Any

from mpi4py import MPI

from apps.skeletons import SKELETONS
from apps.skeletons.base import make_groups, merge, run_task, send_to_server
from apps.skeletons.bundles import Reduction

TAG_TREE = 20

# ("task", i): part = task i | ("send", dest): send part up, drop it |
# ("recv", src): part = merge(part, received) | ("fold", 0): acc = merge(acc, part) (root only)
Action = tuple[str, int]


def schedule(n: int, n_tasks: int) -> list[list[Action]]:
    """Per group rank, its ordered actions. Pure function of (n, n_tasks)."""
    actions: list[list[Action]] = [[] for _ in range(n)]
    for base in range(0, n_tasks, n):
        for r in range(n):
            acts = actions[r]
            has = base + r < n_tasks
            if has:
                acts.append(("task", base + r))
            h = 1
            while h < n:
                if r & h:  # send up and idle until the next batch
                    if has:
                        acts.append(("send", r - h))
                    break
                # Tasks go to ranks in order, so a subtree holds data iff its lowest rank does.
                if r + h < n and base + r + h < n_tasks:
                    acts.append(("recv", r + h))
                h <<= 1
            if r == 0:
                acts.append(("fold", 0))
    return actions


def run(world: MPI.Intracomm, app: Reduction, group_size: int = 0) -> Any:
    groups = make_groups(world, group_size, app.n_tasks)
    comm = groups.comm
    start, stop = groups.tasks
    acc: Any = None  # the group result, on group rank 0
    part: Any = None
    for kind, arg in schedule(comm.Get_size(), stop - start)[comm.Get_rank()]:
        if kind == "task":
            part = run_task(app, start + arg)
        elif kind == "send":
            comm.send(part, dest=arg, tag=TAG_TREE)
            part = None
        elif kind == "recv":
            part = merge(app, part, comm.recv(source=arg, tag=TAG_TREE))
        else:
            acc = merge(app, acc, part)
            part = None
    return send_to_server(world, app, groups, acc, group_root=SKELETONS["tree"].result_root)
