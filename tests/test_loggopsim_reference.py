"""The compiled LogGOPSim simulator against a plain reference of LogGOPSim's own algorithm.

The reference below is LogGOPSim's event loop as its source has it, written for clarity: a heap
of (time, stamp, event), queues scanned from the front for the first match, and an event that
finds its CPU/NIC busy re-queued at the time it frees (keeping its stamp). The compiled simulator
matches by buckets and parks waiting events behind one token per resource (linear instead of
quadratic); on random schedules both must give the same start, end and partner of every
operation, to the bit.
"""

from __future__ import annotations

import heapq

import numpy as np
import pytest

from replay.loggopsim import simulator as LG
from replay.loggopsim.simulator import ANY, CALC, RECV, SEND


def reference(s: LG.Schedule, prm: np.ndarray):
    L, o_s, o_r, O_s, O_r, g, G, S = (float(x) for x in prm)
    n = s.nops
    rank, kind, size = s.rank.tolist(), s.kind.tolist(), s.size.tolist()
    peer, tag, cpu, nic = s.peer.tolist(), s.tag.tolist(), s.cpu.tolist(), s.nic.tolist()
    succ = [[] for _ in range(n)]
    cnt = [0] * n
    for a, b, st in zip(s.dep_op.tolist(), s.dep_on.tolist(), s.dep_start.tolist()):
        succ[b].append((a, st))
        cnt[a] += 1
    nexto, nextgs, nextgr = {}, {}, {}
    start, end, match = [-1.0] * n, [-1.0] * n, [-1] * n
    rq = [[] for _ in range(s.nranks)]
    uq = [[] for _ in range(s.nranks)]
    heap, stamp = [], 0
    freed = [i for i in range(n) if cnt[i] == 0]
    completed = [False] * n

    def release(x, start_only):
        completed[x] |= not start_only
        for d, st in succ[x]:
            if st == start_only:
                cnt[d] -= 1
                if cnt[d] == 0:
                    freed.append(d)

    def rendezvous(m, t, c, k):
        """The sender's request completes at the match; its clocks move up to t."""
        end[m] = max(end[m], t)
        release(m, False)
        sr = rank[m]
        nexto[sr, c] = max(nexto.get((sr, c), 0.0), t)
        nextgs[sr, k] = max(nextgs.get((sr, k), 0.0), t)

    first = True
    while True:
        for x in sorted(freed, key=lambda x: (rank[x], kind[x], x)):
            h = rank[x]
            t = 0.0 if first else nexto.get((h, cpu[x]), 0.0)
            if not first and kind[x] == SEND:
                t = max(t, nextgs.get((h, nic[x]), 0.0))
            heapq.heappush(heap, (t, stamp, x))
            stamp += 1
        freed.clear()
        first = False
        if not heap:
            break
        t, st, code = heapq.heappop(heap)
        if code >= 0:
            x, h = code, rank[code]
            c, k = (h, cpu[code]), (h, nic[code])
            if kind[x] == CALC:
                if nexto.get(c, 0.0) > t:
                    heapq.heappush(heap, (nexto[c], st, x))
                    continue
                nexto[c] = t + size[x]
                start[x], end[x] = t, t + size[x]
                release(x, True)
                release(x, False)
            elif kind[x] == SEND:
                free_at = max(nexto.get(c, 0.0), nextgs.get(k, 0.0))
                if free_at > t:
                    heapq.heappush(heap, (free_at, st, x))
                    continue
                start[x] = t
                release(x, True)
                s1 = size[x] - 1.0
                nexto[c] = t + o_s + s1 * O_s
                nextgs[k] = t + g + s1 * G
                end[x] = nexto[c]
                heapq.heappush(heap, (t + o_s + L, stamp, -x - 1))
                stamp += 1
                if size[x] <= S:
                    release(x, False)
            else:
                start[x] = t
                release(x, True)
                m = next((m for m in uq[h] if (peer[x] in (ANY, rank[m]))
                          and (tag[x] in (ANY, tag[m]))), None)
                if m is None:
                    rq[h].append(x)
                    continue
                uq[h].remove(m)
                match[x], match[m] = m, x
                if size[x] > S:
                    rendezvous(m, t, cpu[x], nic[x])
                end[x] = t
                release(x, False)
        else:
            m = -code - 1
            h = peer[m]
            c, k = (h, cpu[m]), (h, nic[m])
            free_at = max(nexto.get(c, 0.0), nextgr.get(k, 0.0))
            if free_at > t:
                heapq.heappush(heap, (free_at, st, code))
                continue
            s1 = size[m] - 1.0
            nexto[c] = t + o_r + max(s1 * O_r, s1 * G)
            nextgr[k] = t + g + s1 * G
            x = next((x for x in rq[h] if (peer[x] in (ANY, rank[m]))
                      and (tag[x] in (ANY, tag[m]))), None)
            if x is None:
                uq[h].append(m)
                continue
            rq[h].remove(x)
            match[x], match[m] = m, x
            if size[m] > S:
                rendezvous(m, t, cpu[m], nic[m])
            end[x] = nexto[c]
            release(x, False)
    left = sum(map(len, rq)) + sum(map(len, uq))
    return np.array(start), np.array(end), np.array(match), all(completed) and not left


def random_schedule(rng) -> LG.Schedule:
    """Random messages between few ranks (some wildcard receives, three sizes around S),
    calcs, per-rank dependencies, and CPU/NIC indices: busy CPUs and backlogs are common."""
    P = int(rng.integers(2, 5))
    ops = {r: [] for r in range(P)}
    for _ in range(int(rng.integers(1, 60))):
        src = int(rng.integers(0, P))
        dst = (src + int(rng.integers(1, P))) % P
        t, nb = int(rng.integers(0, 3)), int(rng.choice([8, 100, 70000]))
        ops[src].append((rng.random(), SEND, nb, dst, t))
        ops[dst].append((rng.random(), RECV, nb, -1 if rng.random() < 0.05 else src,
                         -1 if rng.random() < 0.05 else t))
    for r in range(P):
        for _ in range(int(rng.integers(0, 5))):
            ops[r].append((rng.random(), CALC, int(rng.integers(1, 5000)), ANY, 0))
    cols = {k: [] for k in ("rank", "kind", "size", "peer", "tag", "dop", "don", "dst")}
    base = 0
    for r in range(P):
        for i, (_, k, sz, p, t) in enumerate(sorted(ops[r])):
            for key, v in zip(("rank", "kind", "size", "peer", "tag"), (r, k, sz, p, t)):
                cols[key].append(v)
            if i and rng.random() < 0.15:
                cols["dop"].append(base + i)
                cols["don"].append(base + int(rng.integers(0, i)))
                cols["dst"].append(bool(rng.random() < 0.3))
        base += len(ops[r])
    i64 = lambda x: np.asarray(x, np.int64)  # noqa: E731
    n = len(cols["kind"])
    return LG.Schedule(P, i64(cols["rank"]), i64(cols["kind"]), np.asarray(cols["size"], float),
                       i64(cols["peer"]), i64(cols["tag"]), i64(rng.integers(0, 2, n)),
                       i64(rng.integers(0, 2, n)), i64(cols["dop"]), i64(cols["don"]),
                       np.asarray(cols["dst"], bool))


PARAMS = [LG.params_vector(2500, 1500, 1500, 0, 0, 1000, 6, 65535),   # LogGOPSim's defaults
          LG.params_vector(0, 0, 0, 0, 0, 0, 0, 65535),               # everything at once: ties
          LG.params_vector(100, 1000, 700, 1, 2, 3000, 2, 90)]        # rendezvous above 90 B


@pytest.mark.parametrize("seed,unit0", [(seed, "") for seed in range(6)]
                         + [(seed, u) for seed in (6, 7) for u in ("cpu", "nic", "cpu nic")])
def test_simulator_equals_loggopsims_algorithm(seed, unit0):
    """``unit0``: the columns (CPU, NIC) whose every operation is on unit 0, which the simulator
    then reads as one entry (``simulate``'s ``umask``)."""
    rng = np.random.default_rng(seed)
    finished = 0
    for trial in range(150):
        s = random_schedule(rng)
        for column in unit0.split():
            getattr(s, column)[:] = 0
        prm = PARAMS[trial % 3]
        start, end, match, ok = reference(s, prm)
        try:
            sim = LG.simulate(s, prm)
        except LG.ScheduleError:
            assert not ok, (seed, trial)    # the reference too left something unfinished
            continue
        assert ok, (seed, trial)
        finished += 1
        assert np.array_equal(sim.op_start, start), (seed, trial)
        assert np.array_equal(sim.op_end, end), (seed, trial)
        assert np.array_equal(sim.match, match), (seed, trial)
        # without the operations' times and partners kept (a replay that maps no times to
        # rows): the same ranks' ends and busy times
        lean = LG.simulate(s, prm, times=False)
        assert len(lean.op_start) == len(lean.op_end) == len(lean.match) == 0
        for a, b in ((sim.rank_end, lean.rank_end), (sim.rank_cpu_busy, lean.rank_cpu_busy),
                     (sim.rank_overhead, lean.rank_overhead)):
            assert np.array_equal(a, b), (seed, trial)
    assert finished >= 20       # enough schedules ran to the end to mean something


@pytest.mark.parametrize("spread", [10**7, 2**32])
def test_simulator_same_when_tags_are_far_apart_or_wide(spread):
    """Tags far apart number their match buckets by a sort instead of a table over all keys, and
    tags beyond int32 keep their width (narrowed, they would wrap and collide): the same
    schedule with its tags spread out (order kept) simulates the same."""
    rng = np.random.default_rng(7)
    checked = 0
    for trial in range(60):
        s = random_schedule(rng)
        if len(set(s.tag[s.tag != ANY].tolist())) < 2:
            continue
        try:
            sim = LG.simulate(s, PARAMS[trial % 3])
        except LG.ScheduleError:
            continue
        wide = LG.Schedule(**{**s.__dict__, "tag": np.where(s.tag == ANY, ANY, s.tag * spread)})
        again = LG.simulate(wide, PARAMS[trial % 3])
        for a, b in ((sim.op_start, again.op_start), (sim.op_end, again.op_end),
                     (sim.match, again.match)):
            assert np.array_equal(a, b), trial
        checked += 1
    assert checked >= 10
