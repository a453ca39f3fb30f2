"""Parallel pipeline (paper 000, Figs. 1, 2, 4).

Every rank of a group runs the task on its input (step 0). Then, on each of ``lg n`` stages,
half of the ranks send their partial result one level up a binary reduction tree and at once
start a new task, while the other half receive and merge, so new tasks enter while earlier
reductions drain. All results flow to the group's last rank (the reduction root, which only
merges, as rank P-1 does in Fig. 4); it sends the group result to world rank 0
(send-to-server), which merges the group results.

Fig. 4's test ``rank % blksize < blksize/2`` (send) is written here with the *virtual id*
``v = n-1-rank``: at stage b a rank sends iff bit b of v is set, to v - 2^b. For a power of two
this is exactly Fig. 4; for other n, a sender's partner always exists (v - 2^b >= 0) and a
receiver whose partner v + 2^b does not exist just idles that stage, so any n works.

The schedule (who computes which task, who sends to whom) depends only on (n, number of tasks),
so every rank computes it locally: tasks are handed out in stage order to the ranks that are
free, messages are only sent when the sender holds data and the receiver knows to expect them.
"""
from __future__ import annotations

from typing import Any

from mpi4py import MPI

from apps.skeletons import SKELETONS
from apps.skeletons.base import make_groups, merge, run_task, send_to_server
from apps.skeletons.bundles import Reduction

TAG_PIPE = 10

Action = tuple[str, int]  # ("task", task index) | ("send", dest) | ("recv", source)


def schedule(n: int, n_tasks: int) -> list[list[Action]]:
    """Per group rank, its ordered actions. Pure function of (n, n_tasks)."""
    actions: list[list[Action]] = [[] for _ in range(n)]
    if n == 1:  # sequential baseline: task, merge, task, merge, ...
        actions[0] = [("task", i) for i in range(n_tasks)]
        return actions
    holds = [False] * n  # indexed by virtual id v = n-1-rank
    nxt = 0
    for r in range(n):  # step 0: every rank runs the task
        if nxt < n_tasks:
            actions[r].append(("task", nxt))
            holds[n - 1 - r] = True
            nxt += 1
    stages = (n - 1).bit_length()
    while nxt < n_tasks or any(holds[1:]):
        for b in range(stages):
            h = 1 << b
            for r in range(n):
                v = n - 1 - r
                if not v & h:
                    continue  # receiver (or idle) this stage
                if holds[v]:
                    dest = n - 1 - (v - h)
                    actions[r].append(("send", dest))
                    actions[dest].append(("recv", r))
                    holds[v - h] = True
                    holds[v] = False
                if nxt < n_tasks:  # the sender is free again: a new task enters the pipeline
                    actions[r].append(("task", nxt))
                    holds[v] = True
                    nxt += 1
    return actions


def run(world: MPI.Intracomm, app: Reduction, group_size: int = 0) -> Any:
    groups = make_groups(world, group_size, app.n_tasks)
    comm = groups.comm
    start, stop = groups.tasks
    mine = schedule(comm.Get_size(), stop - start)[comm.Get_rank()]
    acc: Any = None
    pending = None  # the isend in flight: we compute the next task while it drains
    for kind, arg in mine:
        if kind == "task":
            acc = merge(app, acc, run_task(app, start + arg))
        elif kind == "send":
            if pending is not None:
                pending.wait()
            pending = comm.isend(acc, dest=arg, tag=TAG_PIPE)
            acc = None
        else:
            acc = merge(app, acc, comm.recv(source=arg, tag=TAG_PIPE))
    if pending is not None:
        pending.wait()
    return send_to_server(world, app, groups, acc, group_root=SKELETONS["pipeline"].result_root)
