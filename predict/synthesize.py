"""Skeleton-driven trace synthesis: the trace an application would record at any P and N,
without running it.

The event order comes from the same pure schedules that drive the real runs
(``apps.skeletons.pipeline.schedule``, ``tree.schedule``, ``hypercube.schedule``), so a
synthetic trace cannot drift from what the skeletons do. Master/worker hands out tasks in the
order results arrive, which depends on timing: ``events`` takes that order as an argument
(``order``); fitting reads it from a measured trace (``measured_order``), prediction simulates it
with the fitted compute costs (``simulate_arrivals``). Paper 003's block sort (sorting on
master/worker, ``master_worker.block_stream``) deals its blocks statically, but rank 0's p-way
merge pulls a worker's next part when its current one runs out, which depends on the values:
its ``order`` is the list of merge steps, read from a measured trace or sampled for uniformly
random input (``merge_steps``).

Every event carries the *units* of input it covers (elements sorted, edges, documents): a task
covers its own units, a merged result the sum of what was merged. Compute durations and message
sizes are cost models of those units (``predict.costmodel``). The synthetic trace lays each rank's
events out on its own timeline: compute regions last their fitted duration, MPI calls take no
time; a network model then gives the messages their cost when the trace is replayed
(``predict_makespan``), exactly as it would for a measured trace.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from apps.skeletons import hypercube, master_worker, pipeline, tree
from apps.skeletons.base import TAG_SERVER
from hindsight import trace as tf
from replay.synthetic import append_row, write_trace
from hindsight.errors import UserError


class SynthesisError(UserError, ValueError):
    """A configuration that cannot be synthesized; the message says why."""


#: Per application: how many input units the run covers, and units per task (from its flags).
UNIT_NAMES = {"sorting": "elements", "components": "edges", "feature_extraction": "documents"}


@dataclass(frozen=True)
class Spec:
    """One run configuration: application, paradigm, ranks, input units and units per task."""
    app: str
    paradigm: str
    P: int
    N: int
    per_task: int

    @property
    def n_tasks(self) -> int:
        return -(-self.N // self.per_task) if self.N > 0 else 0

    def task_units(self, i: int) -> int:
        return min(self.per_task, self.N - i * self.per_task)


def spec_from_manifest(manifest: dict[str, Any], where: str = "trace") -> Spec:
    """The configuration a measured trace ran (refused for what synthesis cannot reproduce)."""
    app, paradigm = manifest.get("app"), manifest.get("paradigm")
    args = manifest.get("args") or {}
    P = int(manifest.get("ranks") or 0)
    if app not in UNIT_NAMES:
        raise SynthesisError(f"{where}: app {app!r} is not one of {', '.join(UNIT_NAMES)}")
    if paradigm not in ("pipeline", "tree", "hypercube", "master-worker"):
        raise SynthesisError(f"{where}: unknown paradigm {paradigm!r}")
    if int(args.get("group_size") or 0) not in (0, P) or int(args.get("masters") or 0) > 1:
        raise SynthesisError(f"{where}: runs split into processor sets (--group-size/--masters) "
                             "are not synthesized; only one group of all ranks")
    if args.get("output"):
        raise SynthesisError(f"{where}: run wrote --output (an extra io phase synthesis does "
                             "not model); collect without --output")
    if app == "sorting":
        if args.get("input"):
            raise SynthesisError(f"{where}: sorting of an --input file is not synthesized")
        N = int(args["arrays"]) * int(args["array_size"])
        # the block sort's task is one block of --block-size (dealt, sorted, and the part size)
        per = int(args["block_size"] if paradigm == "master-worker" else args["array_size"])
    elif app == "components":
        graph = args.get("graph", "gnm")
        if graph == "file" or args.get("input"):
            raise SynthesisError(f"{where}: components on an --input file is not synthesized")
        N = int(args["edges"]) if graph == "gnm" else int(args["edge_factor"]) << int(args["scale"])
        per = int(args["edges_per_task"])
    else:
        if not args.get("docs"):
            raise SynthesisError(f"{where}: --docs 0 (all documents): the document count is not "
                                 "in the manifest")
        N, per = int(args["docs"]), int(args["docs_per_task"])
    return Spec(app, paradigm, P, N, per)


# ----------------------------------------------------------------------------------------------
# Events. One list per rank; each MPI event becomes one trace row (two for Sendrecv), each
# region one row at its exit, as the instrumentation records them.


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


def group_comm_id() -> int:
    """The id of the one group communicator ``make_groups`` splits off COMM_WORLD (the first
    communicator created from it, lowest member world rank 0)."""
    return tf.derived_comm_id(tf.COMM_WORLD_ID, 0, 0)


def is_block_sort(spec: Spec) -> bool:
    """Sorting on master/worker: paper 003's block sort (``master_worker.block_stream``)."""
    return spec.app == "sorting" and spec.paradigm == "master-worker"


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
    if spec.app == "components" and spec.paradigm != "hypercube":
        for r in ranks:  # every rank builds the graph before the skeleton starts
            r.region("io", spec.N, "load")
    if spec.paradigm == "hypercube":
        _hypercube(spec, ranks)
        return [r.ev for r in ranks]
    g = group_comm_id()
    for r in ranks:
        r.mpi("Comm_split", peer=g, comm=0)
    if spec.paradigm == "pipeline":
        acc = _pipeline(spec, ranks, g)
        root = spec.P - 1
    elif spec.paradigm == "tree":
        acc = _tree(spec, ranks, g)
        root = 0
    elif spec.paradigm == "master-worker":
        acc = _master_worker(spec, ranks, g, order)
        root = 0
    else:
        raise SynthesisError(f"unknown paradigm {spec.paradigm!r}")
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


def _pipeline(spec: Spec, ranks: list[_Rank], g: int) -> list[float]:
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


def _tree(spec: Spec, ranks: list[_Rank], g: int) -> list[float]:
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


def _hypercube(spec: Spec, ranks: list[_Rank]) -> None:
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
                r.mpi("Sendrecv_send", peer=arg, tag=hypercube.TAG_COMBINE, comm=0,
                      msg="result", units=covered)
                r.mpi("Sendrecv_recv", peer=arg, tag=hypercube.TAG_COMBINE, comm=0)
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


def _dealt(spec: Spec) -> list[int]:
    """Block sort: elements each rank sorts (block i goes to rank i mod P)."""
    held = [0] * spec.P
    for i in range(spec.n_tasks):
        held[i % spec.P] += spec.task_units(i)
    return held


def _parts(units: int, s: int) -> list[int]:
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
    held = _dealt(spec)
    for w in range(1, P):
        for i in range(w, spec.n_tasks, P):
            ranks[w].mpi("Recv", peer=0, tag=master_worker.TAG_BLOCK, comm=0)
            ranks[w].region("task", spec.task_units(i))
    for r in range(P):
        ranks[r].region("merge", held[r], work=merge_work(held[r], -(-held[r] // s)))
    for w in range(1, P):
        for j, u in enumerate(_parts(held[w], s) or [0]):  # an empty result: one empty message
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
    want = [max(len(_parts(held[w], s)) - 1, 0) for w in range(P)]
    if merged != spec.N or pulls[1:] != want[1:]:
        raise SynthesisError(f"block sort merge steps cover {merged} of {spec.N} elements and "
                             f"pull {pulls[1:]} parts from the workers, which hold {want[1:]} "
                             "more (steps of another configuration?)")


def merge_steps(spec: Spec, seed: int = 0) -> list[tuple[int, list[int]]]:
    """The block sort's merge steps for uniformly random input (the generated input of
    ``apps.sorting.data``), sampled without the data: ``[(elements merged, [workers pulled])]``.

    ``global_merge`` merges, at each step, every element up to the smallest last element of the
    current parts (the bound), then pulls the next part of each worker whose part ran out. Only
    order statistics matter: a rank's n sorted uniforms have the value at position c equal to
    ``S_c / S_(n+1)`` with ``S`` the running sum of unit exponentials, so the part ends are
    sampled as sums of Gamma(part size) spacings; inside a part, the elements below its end are
    uniform between the part's start and end, so the count at most the bound is binomial. Ties
    (equal integers) are ignored. Seeded: the same spec gives the same steps."""
    P, s = spec.P, spec.per_task
    rng = np.random.default_rng(seed)
    sizes = [_parts(u, s) for u in _dealt(spec)]
    ends = []
    for sz in sizes:
        g = rng.gamma(np.asarray(sz, float)) if sz else np.zeros(0)
        ends.append(np.cumsum(g) / (g.sum() + rng.exponential()))
    j = np.zeros(P, np.int64)                     # current part of each stream
    active = np.array([len(sz) > 0 for sz in sizes])
    lo = np.zeros(P)                              # values of the current part lie in (lo, hi]
    hi = np.array([e[0] if len(e) else np.inf for e in ends])
    cnt = np.array([sz[0] if sz else 0 for sz in sizes], np.int64)
    steps = []
    while active.any():
        k = np.flatnonzero(active)
        bound = hi[k].min()
        whole = hi[k] <= bound
        frac = np.where(whole, 1.0, (bound - lo[k]) / np.where(whole, 1.0, hi[k] - lo[k]))
        cut = np.where(whole, cnt[k], rng.binomial(np.maximum(cnt[k] - 1, 0), frac))
        cnt[k] -= cut
        lo[k] = np.maximum(lo[k], bound)
        pulled = []
        for r in k[cnt[k] == 0].tolist():
            j[r] += 1
            if j[r] < len(sizes[r]):
                lo[r], hi[r], cnt[r] = ends[r][j[r] - 1], ends[r][j[r]], sizes[r][j[r]]
                if r:
                    pulled.append(r)
            else:
                active[r] = False
        steps.append((int(cut.sum()), pulled))
    return steps


def measured_order(spec: Spec, rows: Any) -> list | None:
    """The data- or timing-dependent order of a measured run, from its trace rows (a pandas
    frame with ``op`` as strings): master/worker's result arrivals at rank 0, or the block
    sort's merge steps (rank 0's merge regions after its local one, each with the workers it
    pulled before the next). None for the other paradigms."""
    if spec.paradigm != "master-worker" or (spec.P < 2 and not is_block_sort(spec)):
        return None
    r0 = rows[rows["rank"] == 0].sort_values("seq")
    if not is_block_sort(spec):
        return r0[(r0["op"] == "Recv") & (r0["tag"] == master_worker.TAG_RESULT)]["peer"].tolist()
    steps: list[tuple[int, list[int]]] = []
    local_seen = False
    for r in r0.itertuples(index=False):
        if r.op == "region" and str(r.region) == "merge":
            if local_seen:
                steps.append((int(r.nbytes), []))
            local_seen = True
        elif r.op == "Send" and r.tag == master_worker.TAG_PULL and steps:
            steps[-1][1].append(int(r.peer))
    return steps


def simulate_order(spec: Spec, cost: Cost) -> list | None:
    """The order a prediction uses where the run's depends on timing or data (see ``events``)."""
    if is_block_sort(spec):
        return merge_steps(spec)
    if spec.paradigm == "master-worker":
        return simulate_arrivals(spec, cost)
    return None


# ----------------------------------------------------------------------------------------------
# Timelines and trace files

Cost = Callable[[str, float, int], float]   # (quantity, units, P) -> seconds or bytes


def simulate_arrivals(spec: Spec, cost: Cost) -> list[int]:
    """Master/worker: the order in which the master receives results, from the fitted compute
    costs (a worker's next message is ready one io + task after it got its work; the master
    takes messages in arrival order and merges after replying). Network costs are left out of
    this ordering; the replay adds them."""
    P = spec.P
    if P < 2:
        return []
    other = cost("other", 0, P)
    ready = [other * (1 + w) for w in range(P)]  # the bare requests arrive staggered
    tm, nxt, active, order = 0.0, 0, P - 1, []
    merged = 0.0
    done = [False] * P
    pending: dict[int, float] = {w: 0.0 for w in range(1, P)}  # units in each worker's message
    while active:
        cand = [w for w in range(1, P) if not done[w]]
        w = min(cand, key=lambda k: (max(ready[k], tm), ready[k], k))
        tm = max(tm, ready[w]) + 2 * other
        order.append(w)
        units = pending[w]
        if nxt < spec.n_tasks:
            u = spec.task_units(nxt)
            nxt += 1
            pending[w] = u
            ready[w] = tm + cost("io", u, P) + cost("task", u, P) + 2 * other
        else:
            done[w] = True
            active -= 1
        if merged and units:
            tm += cost("merge", merged + units, P)
        merged += units
    return order


def _gap(cost: Cost, pickled: float, P: int) -> float:
    """ns outside regions before an event: ``pickle`` of the bytes around it, else ``other``
    (as ``costmodel.samples`` measures them)."""
    return (cost("pickle", pickled, P) if pickled else cost("other", 0, P)) * 1e9


def rows(spec: Spec, evs: list[list[Ev]], cost: Cost) -> list[dict[str, list]]:
    """Per-rank trace columns: each rank on its own clock, compute regions at their modelled
    duration, unregioned overhead before each MPI call, MPI calls taking no time."""
    P = spec.P
    sent: dict[tuple[int, int, int, int], deque] = {}
    nbytes_of: list[list[int]] = []
    for me, ev in enumerate(evs):  # message sizes first: a receive gets what its sender sent
        out = []
        for e in ev:
            if e.kind == "mpi" and e.name in tf.SEND_OPS:
                b = max(1, int(round(cost(f"bytes:{e.msg}", e.units, P))))
                sent.setdefault((me, e.peer, e.comm, e.tag), deque()).append(b)
                out.append(b)
        nbytes_of.append(out)
    cols = []
    for me, ev in enumerate(evs):
        c = {k: [] for k in ("op", "region", "t_start", "t_end", "cpu_ns", "peer", "tag", "comm",
                             "nbytes", "request", "root")}
        t = 0.0
        stack: list[tuple[str, float]] = []
        sizes = iter(nbytes_of[me])
        unpickle = 0.0  # as costmodel.samples: "other" depends on the bytes around a call

        def row(op: str, t0: float, t1: float, region: str | None, peer=-1, tag=-1, comm=-1,
                nb=-1, req=-1, cpu=-1) -> None:
            append_row(c, op, t0, t1, peer, tag, comm, nb, req, -1, region, cpu)

        for e in ev:
            if e.kind == "enter":
                if e.name != "send_to_server":
                    t += _gap(cost, unpickle, P)
                    unpickle = 0.0
                stack.append((e.name, t))
            elif e.kind == "exit":
                name, t0 = stack.pop()
                if name != "send_to_server":
                    t += max(0.0, cost(e.cost_key, e.cost_units, P)) * 1e9
                size = -1 if e.cost_key == "load" else int(round(e.units))
                row("region", t0, t, name, nb=size, cpu=int(round(t - t0)))
            else:
                reg = stack[-1][0] if stack else None
                if e.name in tf.SEND_OPS:
                    nb = next(sizes)
                    t += _gap(cost, unpickle + nb, P)
                    row(e.name, t, t, reg, e.peer, e.tag, e.comm, nb, e.request)
                    unpickle = 0.0
                elif e.name in ("Recv", "Sendrecv_recv"):
                    q = sent.get((e.peer, me, e.comm, e.tag))
                    if not q:
                        raise SynthesisError(f"rank {me}: receive from {e.peer} tag {e.tag} "
                                             "without a matching send")
                    if e.name == "Recv":  # a Sendrecv_recv shares the send half's call
                        t += _gap(cost, unpickle, P)
                    nb = q.popleft()
                    if e.name == "Recv":  # a traced pickle-API recv: matched probe, receive
                        row("Probe", t, t, reg, e.peer, e.tag, e.comm, nb)
                    row(e.name, t, t, reg, e.peer, e.tag, e.comm, nb)
                    unpickle = float(nb)
                else:
                    t += _gap(cost, unpickle, P)
                    unpickle = 0.0
                    if e.name == "Wait":
                        row("Wait", t, t, reg, comm=e.comm, req=e.request)
                    elif e.name == "Comm_split":
                        row("Comm_split", t, t, reg, e.peer, -1, e.comm)
                    else:
                        raise SynthesisError(f"no row for event {e.name}")
        cols.append(c)
    return cols


def _manifest(spec: Spec, extra: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "app": spec.app, "paradigm": spec.paradigm, "complete": True, "result_verified": None,
        "args": {"units": spec.N, "unit": UNIT_NAMES[spec.app], "units_per_task": spec.per_task},
        "hosts": {"synthetic": list(range(spec.P))},
        "synthetic": {"generator": "predict.synthesize", **(extra or {})},
    }


def _comms(spec: Spec) -> dict[int, list[int]]:
    """The group communicator the reduction skeletons split off (hypercube and block sort run
    on COMM_WORLD)."""
    if spec.paradigm == "hypercube" or is_block_sort(spec):
        return {}
    return {group_comm_id(): list(range(spec.P))}


def columns(spec: Spec, cost: Cost, order: Sequence | None = None) -> list[dict]:
    """Per-rank trace columns of ``spec`` (``order`` simulated unless given)."""
    if order is None:
        order = simulate_order(spec, cost)
    return rows(spec, events(spec, order), cost)


def write(out_dir: Path | str, spec: Spec, cost: Cost, *,
          order: Sequence | None = None, extra: dict[str, Any] | None = None,
          model: Any = "hockney", params: dict[str, Any] | None = None,
          resolved: dict[str, Any] | None = None) -> Path:
    """Synthesize ``spec`` into the trace directory ``out_dir`` (manifest key ``synthetic``).

    The per-rank timelines are made causal by replaying them once under ``model`` (default: a
    network that costs nothing, so a receive simply ends no earlier than its send began;
    ``resolved`` = a model's parameters as ``replay.run`` takes them); the compute gaps between
    calls, which is what a later replay reads, do not change."""
    import replay

    cols = columns(spec, cost, order)
    naive = trace(spec, cost, order=order, extra=extra, _cols=cols)
    params = {"l": 0, "g": 0} if params is None and model == "hockney" else params
    res = replay.run(replay.prepare(naive), model, params, record=True, resolved=resolved)
    at = 0
    for c in cols:  # prepared rows are in (rank, seq) order, as the columns are
        n = len(c["op"])
        ts = np.rint(res.row_start_ns[at:at + n]).astype(np.int64)
        c["t_start"] = ts
        c["t_end"] = np.maximum(np.rint(res.row_end_ns[at:at + n]).astype(np.int64), ts)
        at += n
    info = {"timeline": f"replayed under {res.model} {res.params}", **(extra or {})}
    return write_trace(out_dir, cols, communicators=_comms(spec),
                       extra_manifest=_manifest(spec, info))


def trace(spec: Spec, cost: Cost, *, order: Sequence | None = None,
          extra: dict[str, Any] | None = None, _cols: list[dict] | None = None) -> tf.Trace:
    """The trace in memory (no files), each rank on its own clock (not causal across ranks,
    which replay does not need): what ``hindsight predict`` replays per (P, N)."""
    import pyarrow as pa

    cols = _cols if _cols is not None else columns(spec, cost, order)
    tables = []
    for r, c in enumerate(cols):
        regions = sorted({x for x in c["region"] if x is not None})
        idx = {x: i for i, x in enumerate(regions)}
        reg = np.array([idx[x] if x is not None else -1 for x in c["region"]], np.int64)
        ops = np.array([tf.OP_CODE[o] for o in c["op"]], np.int8)
        arr = {k: np.asarray(c[k], np.int64) for k in tf.COLUMNS[4:]}
        tables.append(tf.rows_to_table(r, 0, arr, ops, reg, regions))
    table = pa.concat_tables(tables, promote_options="permissive")
    manifest = {"format_version": tf.FORMAT_VERSION, "run_id": "synthetic", "ranks": spec.P,
                "rank_status": ["complete"] * spec.P,
                "communicators": {str(k): v for k, v in {0: list(range(spec.P)),
                                                         **_comms(spec)}.items()},
                **_manifest(spec, extra)}
    sources = [tf.RankSource(r, [], True, "complete") for r in range(spec.P)]
    return tf.Trace(Path(f"<synthetic {spec.app} {spec.paradigm} P={spec.P} N={spec.N}>"),
                    manifest, table, sources)
