"""The events a skeleton records for one configuration, per rank, without running it.

The event order comes from the same pure schedules that drive the real runs
(``apps.skeletons.pipeline.schedule``, ``tree.schedule``, ``hypercube.schedule``), so a
synthetic trace cannot drift from what the skeletons do. Where the order depends on timing or
data (master/worker's result arrivals, the block sort's merge steps), ``events`` takes it as an
argument (``predict.order``). Each MPI event becomes one trace row (a pickle-API recv two: its
Probe and Recv), each region one row at its exit, as the instrumentation records them.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from apps.skeletons import Reduction, skeleton
from apps.skeletons import hypercube, master_worker, pipeline, tree
from apps.skeletons.base import TAG_SERVER
from predict.config import Spec, SynthesisError, group_comm_id, is_block_sort


@dataclass
class Ev:
    kind: str                   # "enter" | "exit" | "mpi"
    name: str = ""              # region name, or MPI op name
    units: float = -1           # input units covered (region size; message payload)
    peer: int = -1
    tag: int = -1
    comm: int = 0
    msg: str = ""               # message-size model of a send: result|problem|block|part|control
    request: int = -1
    quantity: str = ""          # cost model of a region when it differs from its name
    work: float = -1            # the cost model's variable when it is not ``units`` (>= 0)

    @property
    def cost_key(self) -> str:
        return self.quantity or self.name

    @property
    def cost_units(self) -> float:
        return self.work if self.work >= 0 else self.units


class _Rank:
    def __init__(self) -> None:
        self.ev: list[Ev] = []
        self.nreq = 0

    def region(self, name: str, units: float, quantity: str = "", work: float = -1) -> None:
        self.ev += [Ev("enter", name, units, quantity=quantity, work=work),
                    Ev("exit", name, units, quantity=quantity, work=work)]

    def mpi(self, op: str, **kw: Any) -> None:
        self.ev.append(Ev("mpi", op, **kw))

    def isend(self, **kw: Any) -> int:
        req, self.nreq = self.nreq, self.nreq + 1
        self.mpi("Isend", request=req, **kw)
        return req



def events(spec: Spec, order: Sequence | None = None) -> list[list[Ev]]:
    """Per rank, the events the skeleton records for ``spec``; see the module docstring.
    ``order``: master/worker's result arrivals (worker ranks), or the block sort's merge steps
    (``merge_steps``)."""
    if spec.P < 1:
        raise SynthesisError(f"P must be >= 1 (got {spec.P})")
    ranks = [_Rank() for _ in range(spec.P)]
    if is_block_sort(spec):
        _block_sort(spec, ranks, order)
        return [r.ev for r in ranks]
    try:
        sk = skeleton(spec.paradigm)
    except ValueError as exc:
        raise SynthesisError(str(exc)) from None
    if spec.app == "components" and sk.bundle is Reduction:
        for r in ranks:  # every rank builds the graph before the skeleton starts
            r.region("io", spec.N, "load")
    if not sk.processor_sets:
        _EVENTS[spec.paradigm](spec, ranks, 0, order)
        return [r.ev for r in ranks]
    g = group_comm_id()
    for r in ranks:
        r.mpi("Comm_split", peer=g, comm=0)
    acc = _EVENTS[spec.paradigm](spec, ranks, g, order)
    root = sk.result_root % spec.P
    if root != 0:  # send_to_server with one group: its root sends to world rank 0
        ranks[root].ev.append(Ev("enter", "send_to_server", acc[root]))
        ranks[root].mpi("Send", peer=0, tag=TAG_SERVER, comm=0, msg="result", units=acc[root])
        ranks[root].ev.append(Ev("exit", "send_to_server", acc[root]))
        ranks[0].mpi("Recv", peer=root, tag=TAG_SERVER, comm=0)
        _merge(ranks[0], acc, 0, acc[root])
    return [r.ev for r in ranks]


def _task(r: _Rank, spec: Spec, i: int) -> float:
    u = spec.task_units(i)
    r.region("io", u)
    r.region("task", u)
    return u


def _merge(r: _Rank, acc: list[float], me: int, new: float) -> None:
    """``base.merge``: a merge region only when both sides hold data (0 units = nothing)."""
    if acc[me] and new:
        r.region("merge", acc[me] + new)
    acc[me] += new


def _pipeline(spec: Spec, ranks: list[_Rank], g: int, order: None) -> list[float]:
    acc = [0.0] * spec.P
    sched = pipeline.schedule(spec.P, spec.n_tasks)
    # Message payloads depend on what the sender holds, so walk the ranks in dependency order.
    inbox: dict[tuple[int, int], deque] = {}
    pc = [0] * spec.P
    pending: list[int | None] = [None] * spec.P
    progress = True
    while progress:
        progress = False
        for me in range(spec.P):
            r = ranks[me]
            while pc[me] < len(sched[me]):
                kind, arg = sched[me][pc[me]]
                if kind == "task":
                    _merge(r, acc, me, _task(r, spec, arg))
                elif kind == "send":
                    if pending[me] is not None:
                        r.mpi("Wait", request=pending[me], comm=g)
                    pending[me] = r.isend(peer=arg, tag=pipeline.TAG_PIPE, comm=g, msg="result",
                                          units=acc[me])
                    inbox.setdefault((me, arg), deque()).append(acc[me])
                    acc[me] = 0.0
                else:
                    q = inbox.get((arg, me))
                    if not q:
                        break
                    r.mpi("Recv", peer=arg, tag=pipeline.TAG_PIPE, comm=g)
                    _merge(r, acc, me, q.popleft())
                pc[me] += 1
                progress = True
    if any(pc[me] < len(sched[me]) for me in range(spec.P)):
        raise SynthesisError("pipeline schedule deadlocks")  # the unit tests rule this out
    for me in range(spec.P):
        if pending[me] is not None:
            ranks[me].mpi("Wait", request=pending[me], comm=g)
    return acc


def _tree(spec: Spec, ranks: list[_Rank], g: int, order: None) -> list[float]:
    part = [0.0] * spec.P
    acc = [0.0] * spec.P
    sched = tree.schedule(spec.P, spec.n_tasks)
    inbox: dict[tuple[int, int], deque] = {}
    pc = [0] * spec.P
    progress = True
    while progress:
        progress = False
        for me in range(spec.P):
            r = ranks[me]
            while pc[me] < len(sched[me]):
                kind, arg = sched[me][pc[me]]
                if kind == "task":
                    part[me] = _task(r, spec, arg)
                elif kind == "send":
                    r.mpi("Send", peer=arg, tag=tree.TAG_TREE, comm=g, msg="result",
                          units=part[me])
                    inbox.setdefault((me, arg), deque()).append(part[me])
                    part[me] = 0.0
                elif kind == "recv":
                    q = inbox.get((arg, me))
                    if not q:
                        break
                    r.mpi("Recv", peer=arg, tag=tree.TAG_TREE, comm=g)
                    _merge(r, part, me, q.popleft())
                else:
                    if acc[me] and part[me]:
                        r.region("merge", acc[me] + part[me])
                    acc[me] += part[me]
                    part[me] = 0.0
                pc[me] += 1
                progress = True
    return acc


def _hypercube(spec: Spec, ranks: list[_Rank], g: int, order: None) -> None:
    """On COMM_WORLD (``g`` unused)."""
    try:
        sched = hypercube.schedule(spec.P)
    except ValueError as exc:
        raise SynthesisError(str(exc)) from None
    problem = [0.0] * spec.P
    problem[0] = float(spec.N)
    # A rank receives its problem from a lower rank, so in rank order every size is known
    # before it is needed.
    for me in range(spec.P):
        r = ranks[me]
        for kind, arg in sched[me]:
            if kind == "load":
                r.region("io", spec.N, "load")
            elif kind == "divide":
                lower = math.ceil(problem[me] / 2)  # the first half gets the odd unit
                upper = problem[me] - lower
                r.region("divide", problem[me])
                r.mpi("Send", peer=arg, tag=hypercube.TAG_DIVIDE, comm=0, msg="problem",
                      units=upper)
                problem[me] = lower
                problem[arg] = upper  # the partner's recv follows in its own list
            elif kind == "recv":
                r.mpi("Recv", peer=arg, tag=hypercube.TAG_DIVIDE, comm=0)
            elif kind == "conquer":
                r.region("conquer", problem[me])
                covered = problem[me]
            else:
                # partners cover equal shares at each level up to the odd unit; the combined
                # result covers both, which the partner's own count mirrors
                other = _covered_after(spec, arg, me)
                # the pickle-API sendrecv as traced: mpi4py's Isend, recv and Wait
                req = r.isend(peer=arg, tag=hypercube.TAG_COMBINE, comm=0, msg="result",
                              units=covered)
                r.mpi("Recv", peer=arg, tag=hypercube.TAG_COMBINE, comm=0)
                r.mpi("Wait", request=req, comm=0)
                r.region("combine", covered + other)
                covered += other


def _covered_after(spec: Spec, partner: int, me: int) -> float:
    """Units the partner's result covers at this level: its block of the hypercube."""
    h = partner ^ me
    lo = partner & ~(h - 1)  # the partner's subcube (size h) starts here
    return float(_block_units(spec.N, spec.P, lo, h))


def _block_units(N: int, P: int, lo: int, size: int) -> int:
    """Units held by ranks lo..lo+size-1 after the recursive halving (first half rounds up)."""
    def share(n: int, first: int, count: int, a: int, b: int) -> int:
        # n units over ranks [first, first+count); how many land in [a, b)
        if b <= first or a >= first + count:
            return 0
        if a <= first and first + count <= b:
            return n
        half = count // 2
        lower = (n + 1) // 2
        return share(lower, first, half, a, b) + share(n - lower, first + half, half, a, b)
    return share(N, 0, P, lo, lo + size)


def _master_worker(spec: Spec, ranks: list[_Rank], g: int,
                   arrivals: Sequence[int] | None) -> list[float]:
    acc = [0.0] * spec.P
    P = spec.P
    if P == 1:
        for i in range(spec.n_tasks):
            _merge(ranks[0], acc, 0, _task(ranks[0], spec, i))
        return acc
    if arrivals is None:
        raise SynthesisError("master-worker needs the arrival order of results "
                             "(simulate_arrivals)")
    m = ranks[0]
    holding = [0.0] * P  # what each worker's next result message carries (0 = bare request)
    nxt, active = 0, P - 1
    order = iter(arrivals)
    while active:
        w = next(order, None)
        if w is None or not 1 <= w < P:
            raise SynthesisError("master-worker arrival order is too short or names a bad rank")
        ranks[w].mpi("Send", peer=0, tag=master_worker.TAG_RESULT, comm=g,
                     msg="result" if holding[w] else "control", units=holding[w])
        ranks[w].mpi("Recv", peer=0, tag=master_worker.TAG_WORK, comm=g)
        m.mpi("Recv", peer=w, tag=master_worker.TAG_RESULT, comm=g)
        m.mpi("Send", peer=w, tag=master_worker.TAG_WORK, comm=g, msg="control", units=0)
        result = holding[w]
        if nxt < spec.n_tasks:
            holding[w] = _task(ranks[w], spec, nxt)
            nxt += 1
        else:
            holding[w] = 0.0
            active -= 1
        _merge(m, acc, 0, result)
    return acc


def dealt(spec: Spec) -> list[int]:
    """Block sort: elements each rank sorts (block i goes to rank i mod P)."""
    held = [0] * spec.P
    for i in range(spec.n_tasks):
        held[i % spec.P] += spec.task_units(i)
    return held


def parts(units: int, s: int) -> list[int]:
    """Sizes of the parts of ``s`` elements a rank's merged result is cut into."""
    return [min(s, units - a) for a in range(0, units, s)]


def merge_work(units: float, ways: int) -> float:
    """``kernels.merge_many``'s work: a balanced tree of two-way merges, units·⌈log2 ways⌉
    (one run is returned as it is: no work). A global merge step is costed with P ways, the
    streams it merges for all but its last steps (which streams take part in a step is not in
    the trace)."""
    return units * math.ceil(math.log2(ways)) if ways > 1 else 0.0


def _block_sort(spec: Spec, ranks: list[_Rank], steps: Sequence | None) -> None:
    """Paper 003's block sort as ``master_worker.block_stream`` runs it on COMM_WORLD: rank 0
    reads every block (``io``) and deals block i to rank i mod P, sorting its own (``task``);
    each rank merges its blocks (``merge``) and cuts the result into parts of the block size;
    a worker sends its first part at once and each further one when rank 0 pulls it. Rank 0's
    merge steps (quantity ``global_merge``) and the pulls after each come from ``steps``:
    ``[(elements merged, [workers pulled]), ...]``. Merges are costed by their ``merge_work``."""
    P, s = spec.P, spec.per_task
    if steps is None:
        raise SynthesisError("the block sort needs its merge steps (merge_steps)")
    m = ranks[0]
    reqs = []
    for i in range(spec.n_tasks):
        u = spec.task_units(i)
        m.region("io", u)
        if i % P == 0:
            m.region("task", u)
        else:
            reqs.append(m.isend(peer=i % P, tag=master_worker.TAG_BLOCK, comm=0, msg="block",
                                units=u))
    for q in reqs:
        m.mpi("Wait", request=q, comm=0)
    held = dealt(spec)
    for w in range(1, P):
        for i in range(w, spec.n_tasks, P):
            ranks[w].mpi("Recv", peer=0, tag=master_worker.TAG_BLOCK, comm=0)
            ranks[w].region("task", spec.task_units(i))
    for r in range(P):
        ranks[r].region("merge", held[r], work=merge_work(held[r], -(-held[r] // s)))
    for w in range(1, P):
        for j, u in enumerate(parts(held[w], s) or [0]):  # an empty result: one empty message
            if j:
                ranks[w].mpi("Recv", peer=0, tag=master_worker.TAG_PULL, comm=0)
            ranks[w].mpi("Send", peer=0, tag=master_worker.TAG_PART, comm=0, msg="part", units=u)
    for w in range(1, P):
        m.mpi("Recv", peer=w, tag=master_worker.TAG_PART, comm=0)
    pulls = [0] * P
    merged = 0
    for units, pulled in steps:
        m.region("merge", units, "global_merge", merge_work(units, P))
        merged += units
        for w in pulled:
            if not 1 <= w < P:
                raise SynthesisError(f"block sort merge steps pull from rank {w} (P = {P})")
            pulls[w] += 1
            m.mpi("Send", peer=w, tag=master_worker.TAG_PULL, comm=0, msg="control", units=0)
            m.mpi("Recv", peer=w, tag=master_worker.TAG_PART, comm=0)
    want = [max(len(parts(held[w], s)) - 1, 0) for w in range(P)]
    if merged != spec.N or pulls[1:] != want[1:]:
        raise SynthesisError(f"block sort merge steps cover {merged} of {spec.N} elements and "
                             f"pull {pulls[1:]} parts from the workers, which hold {want[1:]} "
                             "more (steps of another configuration?)")


#: paradigm -> its events' generator: (spec, ranks, group communicator, order) -> what each
#: rank holds at the end (reductions; the hypercube returns None)
_EVENTS: dict[str, Callable[[Spec, list[_Rank], int, Any], Any]] = {
    "pipeline": _pipeline, "tree": _tree, "master-worker": _master_worker,
    "hypercube": _hypercube,
}
