"""Neighbourhood collectives: each rank's out-neighbours recorded when a topology communicator
is made (the manifest's `neighbours`), one row per call, replayed as one message per topology
edge; checked by hand and on a real program."""

from __future__ import annotations

from collections import Counter

import pytest

import replay
from hindsight.trace.write import EventRows, write_trace
from replay.errors import ReplayError
from tests.test_coverage import _traced

TOPO = 55
L, G = 1000.0, 0.5
HOCKNEY = {"l": "1000ns", "g": "0.5ns"}


def _ring_trace(tmp_path, op, nbytes, neighbours=True, p=3):
    ranks = []
    for r in range(p):
        ev = EventRows()
        ev.append("Comm_create", 0, 100, TOPO, -1, 0, -1)
        ev.append(op, 100, 200, -1, -1, TOPO, nbytes)
        ranks.append(ev.events(r))
    nbrs = {str(TOPO): {str(r): [(r - 1) % p, (r + 1) % p] for r in range(p)}}
    d = write_trace(tmp_path / op, ranks, communicators={TOPO: list(range(p))},
                    manifest={"neighbours": nbrs} if neighbours else None)
    return replay.prepare(d, use_cache=False)


@pytest.mark.parametrize("op, per_edge", [("Neighbor_allgather", 1000),
                                          ("Neighbor_alltoall", 1000),
                                          ("Neighbor_alltoallv", 500)])
def test_a_ring_neighbourhood_collective_sends_one_message_per_edge(tmp_path, op, per_edge):
    prep = _ring_trace(tmp_path, op, 1000)
    st = prep.stream(True)
    assert st.selected[op] == {"neighbours": 1}
    # the creation (dissemination, 2 empty steps on 3 ranks), then each rank's two sends
    # leave per_edge·g apart and its two receives end when the later one arrives
    res = replay.run(prep, "hockney", HOCKNEY, compute_scale=0.0)
    assert res.makespan_ns == pytest.approx(2 * L + L + 2 * per_edge * G)
    assert replay.run(prep, "measured").makespan_ns == pytest.approx(prep.measured_makespan_ns)


def test_a_neighbourhood_collective_without_its_topology_is_refused(tmp_path):
    prep = _ring_trace(tmp_path, "Neighbor_allgather", 8, neighbours=False)
    with pytest.raises(ReplayError, match="does not record its topology"):
        replay.run(prep, "hockney", HOCKNEY)


def test_a_real_program_on_a_ring_and_a_graph(tmp_path):
    df, m = _traced(tmp_path, "neighbours.py", 3)
    assert m["untraced_calls"] == {}
    made = df[df["op"] == "Comm_create"]
    ring, graph = [int(x) for x in made[made["rank"] == 0]["peer"]]
    # the Cartesian ring: MPI orders each dimension's neighbours down, then up
    assert m["neighbours"][str(ring)] == {str(r): [(r - 1) % 3, (r + 1) % 3] for r in range(3)}
    assert m["neighbours"][str(graph)] == {str(r): [(r + 1) % 3, (r + 2) % 3] for r in range(3)}
    for r in range(3):
        ops = Counter(df[df["rank"] == r]["op"].astype(str))
        assert ops["Neighbor_allgather"] == 2 and ops["Neighbor_alltoall"] == 1
        assert ops["Ineighbor_allgather"] == 1 and ops["Neighbor_allgatherv"] == 1
        mine = df[df["rank"] == r]
        sizes = dict(zip(mine["op"].astype(str), mine["nbytes"]))
        assert sizes["Neighbor_alltoall"] == 24          # 6 doubles over 2 out-neighbours
        assert sizes["Neighbor_allgatherv"] == 16
    prep = replay.prepare(tmp_path / "trace", use_cache=False)
    assert replay.run(prep, "measured").makespan_ns == \
        pytest.approx(prep.measured_makespan_ns, rel=1e-9)
    assert replay.run(prep, "loggps").makespan_ns > 0
