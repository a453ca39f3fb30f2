"""Properties on random valid traces (hypothesis)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import replay
from synthetic import simulate_to_dir

COLLS = ["Barrier", "Bcast", "Allreduce", "Reduce", "Allgather", "Alltoall", "Gather", "Scatter",
         "Scan"]


@st.composite
def programs(draw):
    """A global sequence of events appended to every participant in the same order: whatever
    the network (eager or rendezvous), the earliest unfinished event always has all its
    participants at it, so these programs never deadlock."""
    p = draw(st.integers(2, 5))
    progs = [[] for _ in range(p)]
    for _ in range(draw(st.integers(1, 12))):
        what = draw(st.sampled_from(["p2p", "nb", "sr", "coll", "compute"]))
        if what == "compute":
            r = draw(st.integers(0, p - 1))
            progs[r].append(("compute", draw(st.integers(1, 50_000))))
            continue
        if what == "coll":
            name = draw(st.sampled_from(COLLS))
            nb = draw(st.integers(0, 200_000))
            root = draw(st.integers(0, p - 1))
            for r in range(p):
                progs[r].append(("coll", name, nb, root))
            continue
        a, b = draw(st.lists(st.integers(0, p - 1), min_size=2, max_size=2, unique=True))
        nb = draw(st.sampled_from([0, 8, 1000, 70_000, 1 << 20]))
        tag = draw(st.integers(0, 2))
        if what == "p2p":
            progs[a].append(("send", b, nb, tag))
            progs[b].append(("recv", a, tag))
        elif what == "nb":
            qa = sum(1 for o in progs[a] if o[0] in ("isend", "irecv"))
            qb = sum(1 for o in progs[b] if o[0] in ("isend", "irecv"))
            progs[a] += [("isend", b, nb, tag), ("wait", [qa])]
            progs[b] += [("irecv", a, tag), ("compute", 100), ("wait", [qb])]
        else:
            progs[a].append(("sendrecv", b, nb, b, tag))
            progs[b].append(("sendrecv", a, nb, a, tag))
    return progs


def _prep(progs):
    # (hypothesis runs an example many times per test: a pytest tmp_path would be shared)
    with tempfile.TemporaryDirectory(prefix="hs-prop-") as d:
        return replay.prepare(simulate_to_dir(Path(d) / "t", progs), use_cache=False)


SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(programs())
def test_measured_model_reproduces_the_trace(progs):
    prep = _prep(progs)
    res = replay.run(prep, "measured")
    assert res.makespan_ns == pytest.approx(res.measured_makespan_ns, rel=0.01)
    assert res.rank_end_ns == pytest.approx(res.measured_rank_end_ns, rel=0.01, abs=1.0)


@SETTINGS
@given(programs(), st.sampled_from(["L", "o", "G", "g", "o_recv", "O"]),
       st.floats(1.0, 100.0), st.sampled_from(["1KiB", "64KiB", "inf"]),
       st.floats(0.0, 2.0))
def test_raising_a_cost_never_shortens_the_makespan(progs, name, factor, S, cs):
    prep = _prep(progs)
    base = {"L": "1us", "o": "200ns", "G": "0.1ns", "g": "50ns", "O": "0.01ns", "S": S}
    lo = replay.run(prep, "loggps", base, compute_scale=cs, record=False)
    unit = "ns"
    raised = dict(base)
    raised[name] = f"{(1000 if name == 'L' else 200 if name in ('o', 'o_recv') else 0.1 if name == 'G' else 50 if name == 'g' else 0.01) * factor}{unit}"
    hi = replay.run(prep, "loggps", raised, compute_scale=cs, record=False)
    assert hi.makespan_ns >= lo.makespan_ns * (1 - 1e-12) - 1e-6


@SETTINGS
@given(programs(), st.sampled_from(["loggp", "loggps", "hockney"]))
def test_zero_compute_and_free_network_take_no_time(progs, model):
    prep = _prep(progs)
    zero = {"loggp": {"L": 0, "o": 0, "G": 0, "g": 0},
            "loggps": {"L": 0, "o": 0, "G": 0, "g": 0, "S": 0},
            "hockney": {"l": 0, "g": 0}}[model]
    res = replay.run(prep, model, zero, compute_scale=0.0)
    assert res.makespan_ns == 0.0
    assert res.rank_wait_ns.max() == 0.0


def test_collective_instances_are_kth_call_per_communicator():
    """prepare's compiled numbering of collective instances against its definition: the k-th
    collective of each rank on a communicator is instance (communicator, k), every COMM_SELF
    call is one of its own; ids in order of first appearance, rows sorted by instance then
    rank, and where each instance's rows start in that order."""
    import numpy as np
    import pandas as pd

    from hindsight.trace import COMM_SELF_ID
    from replay.instances import _number_instances

    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(1, 40))
        rank = np.sort(rng.integers(0, 5, n))
        comm = rng.choice([0, COMM_SELF_ID, 7, 123456789], n)
        ccode, uc = pd.factorize(comm)
        inst, order, off = _number_instances(
            rank * len(uc) + ccode, 5 * len(uc), ccode, len(uc), comm == COMM_SELF_ID)
        keys, want = {}, []
        seen: dict = {}
        for i in range(n):
            k = seen.get((rank[i], comm[i]), 0)
            seen[(rank[i], comm[i])] = k + 1
            key = (comm[i], k, rank[i] if comm[i] == COMM_SELF_ID else -1)
            want.append(keys.setdefault(key, len(keys)))
        assert inst.tolist() == want and len(off) - 1 == len(keys)
        assert order.tolist() == sorted(range(n), key=lambda i: (want[i], rank[i]))
        assert off[0] == 0 and np.diff(off).tolist() == [want.count(x) for x in range(len(keys))]
