"""The orders of a run that depend on timing or data, which ``predict.events`` takes as an
argument: master/worker hands out tasks in the order results arrive, and paper 003's block sort
(sorting on master/worker) pulls a worker's next part when rank 0's p-way merge runs out of its
current one, which depends on the values. Fitting reads them from a measured trace
(``measured_order``), prediction simulates them (``simulate_order``: ``simulate_arrivals`` with
the fitted compute costs, ``merge_steps`` for uniformly random input).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from apps.skeletons import skeleton
from apps.skeletons import master_worker
from predict.config import Cost, Spec, is_block_sort
from predict.events import dealt, parts


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
    sizes = [parts(u, s) for u in dealt(spec)]
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
    if not skeleton(spec.paradigm).demand_driven or (spec.P < 2 and not is_block_sort(spec)):
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
    """The order a prediction uses where the run's depends on timing or data (see the module
    docstring)."""
    if is_block_sort(spec):
        return merge_steps(spec)
    if skeleton(spec.paradigm).demand_driven:
        return simulate_arrivals(spec, cost)
    return None



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
