"""Hand-computed replays for each model, and the engine's error cases."""

from __future__ import annotations

import importlib
import math

import numpy as np
import pytest

import replay
from hindsight.trace import TraceError
from synthetic import EventRows, simulate_to_dir, write_trace

prep_mod = importlib.import_module("replay.prepare")  # the module (replay.prepare is the function)

NS = 1.0


def _prep(tmp_path, progs, name="t", **kw):
    return replay.prepare(simulate_to_dir(tmp_path / name, progs, **kw), use_cache=False)


PINGPONG = [[("send", 1, 1000), ("recv", 1)], [("recv", 0), ("send", 0, 1000)]]


def test_loggp_pingpong_eager(tmp_path):
    prep = _prep(tmp_path, PINGPONG)
    L, o, G, k = 2000.0, 300.0, 0.5, 1000
    res = replay.run(prep, "loggp", {"L": "2us", "o": "300ns", "G": "0.5ns", "g": "0"},
                     compute_scale=0.0)
    one_way = 2 * o + L + (k - 1) * G
    assert res.makespan_ns == pytest.approx(2 * one_way)
    assert res.rank_end_ns[1] == pytest.approx(one_way + o)  # returns after its send overhead


def test_loggps_pingpong_rendezvous(tmp_path):
    prep = _prep(tmp_path, PINGPONG)
    L, o, G, k = 2000.0, 300.0, 0.5, 1000
    sets = {"L": "2us", "o": "300ns", "G": "0.5ns", "S": "512B"}
    res = replay.run(prep, "loggps", sets, compute_scale=0.0)
    one_way = 2 * o + 3 * L + (k - 1) * G
    assert res.makespan_ns == pytest.approx(2 * one_way)
    # the sender of the pong is done when its data has left: o + 2L + (k-1)G after posting
    assert res.rank_end_ns[1] == pytest.approx(one_way + o + 2 * L + (k - 1) * G)
    # below the threshold the same trace is eager
    eager = replay.run(prep, "loggps", dict(sets, S="1MiB"), compute_scale=0.0)
    assert eager.makespan_ns == pytest.approx(2 * (2 * o + L + (k - 1) * G))


def test_negative_latency_overlaps_the_overheads(tmp_path):
    # calibrate finds T(1) < o_s + o_r on this machine's MPI paths: L < 0 makes the model's
    # one-way time the measured one; the library's own rendezvous hops take max(L, 0)
    prep = _prep(tmp_path, PINGPONG)
    o, L, G, k = 300.0, -200.0, 0.5, 1000
    eager = replay.run(prep, "loggps", {"L": "-200ns", "o": "300ns", "G": "0.5ns", "S": "1MiB"},
                       compute_scale=0.0)
    assert eager.makespan_ns == pytest.approx(2 * (2 * o + L + (k - 1) * G))
    rdv = replay.run(prep, "loggps", {"L": "-200ns", "o": "300ns", "G": "0.5ns", "S": "512B"},
                     compute_scale=0.0)
    # request to send at L (overlapping the send's overhead), clear to send and data at 0 each
    assert rdv.makespan_ns == pytest.approx(2 * (2 * o + L + (k - 1) * G))
    assert rdv.rank_end_ns[1] == pytest.approx(rdv.makespan_ns / 2 + o + L + (k - 1) * G)


def test_paper004_overhead_grows_with_P(tmp_path):
    prep = _prep(tmp_path, PINGPONG)
    base = replay.run(prep, "loggp", {"o": "12.1us", "L": "50us", "G": "0.0268us"},
                      compute_scale=0.0)
    more = replay.run(prep, "loggp", {"o": "12.1us", "L": "50us", "G": "0.0268us",
                                      "o_b": "0.182us", "O": "0.0708us"}, compute_scale=0.0)
    # two messages, each paying o_s and o_r: 4·(0.182·P + 0.0708·k) us more, P = 2, k = 1000
    assert more.makespan_ns - base.makespan_ns == pytest.approx(4 * (182 * 2 + 70.8 * 1000))


def test_hockney_exchange_is_paper002(tmp_path):
    # paper 002: exchanging K bytes costs Ex = 2(l + K·g)
    prep = _prep(tmp_path, PINGPONG)
    res = replay.run(prep, "hockney", {"l": "3us", "g": "0.2ns"}, compute_scale=0.0)
    assert res.makespan_ns == pytest.approx(2 * (3000 + 1000 * 0.2))


def test_three_rank_chain(tmp_path):
    progs = [[("send", 1, 4000)], [("recv", 0), ("send", 2, 4000)], [("recv", 1)]]
    prep = _prep(tmp_path, progs)
    l, g, k = 1500.0, 0.25, 4000
    res = replay.run(prep, "hockney", {"l": f"{l}ns", "g": f"{g}ns"}, compute_scale=0.0)
    assert res.rank_end_ns.tolist() == pytest.approx([0.0, l + k * g, 2 * (l + k * g)])
    assert res.critical_rank_ns[2] > 0 and res.critical_rank_ns[1] > 0


@pytest.mark.parametrize("p", [4, 8, 5])
def test_binomial_broadcast(tmp_path, p):
    # Round j: relative ranks v < 2^j send to v + 2^j. For p = 2^n the chain 0 -> 1 -> 3 -> 7
    # (each the sender's first message of its round) takes n·(l + k·g). For p = 5 the root's third
    # message (to 4) leaves after two others: l + 3·k·g, later than rank 3's 2·(l + k·g).
    progs = [[("coll", "Bcast", 2000, 0)] for _ in range(p)]
    prep = _prep(tmp_path, progs)
    l, g, k = 1000.0, 0.5, 2000
    res = replay.run(prep, "hockney", {"l": f"{l}ns", "g": f"{g}ns"}, compute_scale=0.0)
    expect = {4: 2 * (l + k * g), 8: 3 * (l + k * g), 5: max(2 * (l + k * g), l + 3 * k * g)}
    assert res.makespan_ns == pytest.approx(expect[p])
    assert res.algorithms["Bcast"] == "mpich"          # MPICH's selection: short -> binomial
    assert prep.stream(True).selected["Bcast"] == {"binomial": 1}
    lin = replay.run(prep, "hockney", {"l": f"{l}ns", "g": f"{g}ns"}, compute_scale=0.0,
                     algorithms={"Bcast": "linear"})
    # linear: the root injects p - 1 copies back to back; the last one arrives l after them
    assert lin.makespan_ns == pytest.approx(l + (p - 1) * k * g)


def test_allreduce_algorithms_differ_and_are_recorded(tmp_path):
    progs = [[("coll", "Allreduce", 1 << 20)] for _ in range(8)]
    prep = _prep(tmp_path, progs)
    l, g, k, p = 1000.0, 0.1, 1 << 20, 8
    rd = replay.run(prep, "hockney", {"l": f"{l}ns", "g": f"{g}ns"}, compute_scale=0.0,
                    algorithms={"Allreduce": "recursive_doubling"})
    ring = replay.run(prep, "hockney", {"l": f"{l}ns", "g": f"{g}ns"}, compute_scale=0.0,
                      algorithms={"Allreduce": "ring"})
    # MPICH's selection: 1 MiB on 8 ranks is Rabenseifner (reduce-scatter by recursive halving,
    # allgather by recursive doubling): 2·log2(p) steps moving 2·(p-1)/p of the block in all
    rab = replay.run(prep, "hockney", {"l": f"{l}ns", "g": f"{g}ns"}, compute_scale=0.0)
    assert rab.makespan_ns == pytest.approx(6 * l + 2 * (p - 1) / p * k * g)
    assert rd.makespan_ns == pytest.approx(3 * (l + k * g))
    assert ring.makespan_ns == pytest.approx(2 * (p - 1) * (l + k / p * g))
    assert ring.algorithms["Allreduce"] == "ring"
    with pytest.raises(replay.ParamError, match="Allreduce=bogus"):   # the caller's choice
        replay.run(prep, "hockney", algorithms={"Allreduce": "bogus"})


def test_mm1_analytic_matches_paper_eq_8_to_11(tmp_path):
    # two ranks on hosts in different leaves: three stages, fan-ins 8, 16, 8 as in the paper
    prep = _prep(tmp_path, [[("compute", 10**6), ("send", 1, 5000)],
                            [("compute", 10**6), ("recv", 0)]])
    C = 1.25  # bytes/ns = 10 Gbit/s
    Tcomp = 150e3
    res = replay.run(prep, "mm1", {"C": "10Gbit/s", "Tcomp": "150us", "hosts_per_leaf": "1",
                                   "leaves": "16", "spines": "8"}, compute_scale=0.0)
    s = 5000 / C

    def D(fan):
        return s / (1 - fan / Tcomp * s)
    # hosts_per_leaf=1 is the fan-in of leaf1 here
    assert res.makespan_ns == pytest.approx(D(1) + D(16) + D(8))
    assert res.info["saturated_messages"] == 0


def test_mm1_places_a_testbed_run_by_its_nodes(tmp_path):
    # A testbed run shares one machine (one entry in `hosts`), but its ranks sat in different
    # testbed nodes: a message between nodes crosses the switch, one within a node does not.
    progs = [[("send", 2, 5000)], [("send", 3, 5000)], [("recv", 0)], [("recv", 1)]]
    one_host = {"hosts": {"machine": [0, 1, 2, 3]}}
    flat = _prep(tmp_path, progs, "flat", **one_host)
    tb = _prep(tmp_path, progs, "tb", **one_host, manifest={
        "network": {"transport": "tcp", "node_of_rank": [0, 0, 1, 1]}})
    assert flat.host_of_rank.tolist() == [0, 0, 0, 0]
    assert tb.host_of_rank.tolist() == [0, 0, 1, 1]
    sets = {"C": "10Gbit/s", "hosts_per_leaf": "1"}
    t_flat = replay.run(flat, "mm1", sets, compute_scale=0.0).makespan_ns
    t_tb = replay.run(tb, "mm1", sets, compute_scale=0.0).makespan_ns
    assert t_tb > t_flat  # 0 -> 2 and 1 -> 3 now cross the switch
    bad = simulate_to_dir(tmp_path / "bad", progs, manifest={
        "network": {"node_of_rank": [0, 1]}})
    with pytest.raises(TraceError, match="node_of_rank"):
        replay.prepare(bad, use_cache=False)


def test_mm1_saturation_is_reported_not_infinite(tmp_path):
    prep = _prep(tmp_path, [[("send", 1, 10**6)], [("recv", 0)]])
    res = replay.run(prep, "mm1", {"C": "1Gbit/s", "Tcomp": "1us", "saturation": "cap"},
                     compute_scale=0.0)
    assert res.info["saturated_messages"] == 1 and res.info["max_rho"] >= 1
    assert "not a prediction" in res.info["not_a_prediction"]
    assert math.isfinite(res.makespan_ns) and res.makespan_ns > 0


def test_mm1_measured_utilisation_slows_an_incast(tmp_path):
    # five senders, each a 16 us transfer every 160 us: the receiver's link is busy about half
    # the time, a load the queue carries (a flood beyond it is refused: tests/test_mm1.py)
    n = 6
    progs = [[("recv", r, 0) for r in range(1, n) for _ in range(20)]] + \
            [[x for _ in range(20) for x in (("compute", 160_000), ("send", 0, 20000, 0))]
             for _ in range(1, n)]
    prep = _prep(tmp_path, progs)
    base = {"C": "10Gbit/s", "window": "400us", "hosts_per_leaf": "8"}
    quiet = replay.run(prep, "mm1", dict(base, rho="analytic", Tcomp="1s"))
    busy = replay.run(prep, "mm1", dict(base, rho="measured"))
    assert busy.makespan_ns > quiet.makespan_ns
    assert busy.info["max_rho"] > 0.5


def test_measured_model_reproduces(tmp_path):
    from synthetic import ANY
    progs = [
        [("compute", 1000, "work"), ("send", 1, 100, 0), ("recv", 1, 0), ("isend", 2, 10, 1),
         ("wait", [0]), ("coll", "Allreduce", 8), ("coll", "Bcast", 64, 0)],
        [("recv", 0, 0), ("compute", 500), ("send", 0, 200, 0), ("coll", "Allreduce", 8),
         ("sendrecv", 2, 50, 2, 3), ("coll", "Bcast", 64, 0), ("compute", 700, "tail")],
        [("irecv", ANY, 1), ("compute", 2000), ("wait", [0]), ("coll", "Allreduce", 8),
         ("sendrecv", 1, 50, 1, 3), ("coll", "Bcast", 64, 0)],
    ]
    prep = _prep(tmp_path, progs)
    res = replay.run(prep, "measured")
    assert res.makespan_ns == pytest.approx(res.measured_makespan_ns, rel=0.01)
    assert res.rank_end_ns == pytest.approx(res.measured_rank_end_ns, rel=0.01)
    ev = res.events_frame()
    assert np.allclose(ev["start_ns"], ev["measured_start_ns"], atol=1.0)
    assert np.allclose(ev["end_ns"], ev["measured_end_ns"], atol=1.0)
    # halving compute can only help, and per-region factors apply to their region only
    faster = replay.run(prep, "measured", compute_scale=0.5)
    assert faster.makespan_ns < res.makespan_ns
    tail = replay.run(prep, "measured", region_scale={"work": 1.0})
    assert tail.makespan_ns == pytest.approx(res.makespan_ns)


def test_written_replay_reads_back(tmp_path):
    from hindsight.trace import read_trace
    prep = _prep(tmp_path, PINGPONG)
    res = replay.run(prep, "loggp", compute_scale=0.0)
    out = res.write(tmp_path / "out")
    tr = read_trace(out)
    assert tr.complete and tr.table.num_rows == prep.nrows
    t = tr.table.to_pydict()
    assert max(t["t_end"]) == round(res.makespan_ns)
    again = replay.run(replay.prepare(out, use_cache=False), "measured")
    assert again.makespan_ns == pytest.approx(res.makespan_ns, rel=0.01)


def _manual(tmp_path, ranks_rows):
    ranks = []
    for r, rows in enumerate(ranks_rows):
        c = EventRows()
        for (op, t0, t1, peer, tag, nb) in rows:
            c.append(op, t0, t1, peer=peer, tag=tag, nbytes=nb)
        ranks.append(c.events(r))
    return write_trace(tmp_path / "m", ranks)


def test_unmatched_message_is_a_clear_error(tmp_path):
    d = _manual(tmp_path, [[("Send", 0, 10, 1, 5, 8)], [("Recv", 0, 10, 0, 6, 8)]])
    with pytest.raises(replay.ReplayError, match="Recv from 0 tag 6 comm 0 has no matching send"):
        replay.prepare(d, use_cache=False)


def test_ranks_disagreeing_on_a_collective_is_a_clear_error(tmp_path):
    # the second collective of the two ranks: Allreduce on rank 0, Barrier on rank 1
    d = _manual(tmp_path, [[("Barrier", 0, 10, -1, -1, 0), ("Allreduce", 10, 20, -1, -1, 8)],
                           [("Barrier", 0, 10, -1, -1, 0), ("Barrier", 10, 20, -1, -1, 0)]])
    with pytest.raises(replay.ReplayError,
                       match=r"rank 1: collective #1 on comm 0 is Barrier .* but rank 0 calls "
                             r"Allreduce"):
        replay.prepare(d, use_cache=False)


def test_cyclic_dependencies_are_a_clear_error(tmp_path):
    # both ranks receive first: matched messages, but each waits for the other forever
    d = _manual(tmp_path, [[("Recv", 0, 10, 1, 0, 8), ("Send", 10, 20, 1, 0, 8)],
                           [("Recv", 0, 10, 0, 0, 8), ("Send", 10, 20, 0, 0, 8)]])
    prep = replay.prepare(d, use_cache=False)
    with pytest.raises(replay.ReplayError, match="deadlock"):
        replay.run(prep, "loggp")


def test_parameter_errors_are_clear(tmp_path):
    prep = _prep(tmp_path, PINGPONG)
    with pytest.raises(replay.ParamError, match="unknown parameter 'Q'"):
        replay.run(prep, "loggp", {"Q": "1"})
    # L may be negative (the overheads overlap the transfer), but not below -o_send
    with pytest.raises(replay.ParamError, match="cannot arrive before its send began"):
        replay.run(prep, "loggp", {"L": "-1us", "o": "300ns"})
    with pytest.raises(replay.ParamError, match="LogGOPSim's rules take a latency >= 0"):
        replay.run(prep, "loggopsim", {"L": "-1us", "o": "2us"})
    with pytest.raises(replay.ParamError, match="l=-1us: impossible"):
        replay.run(prep, "hockney", {"l": "-1us"})
    with pytest.raises(replay.ParamError, match="unknown time unit"):
        replay.run(prep, "loggp", {"L": "3 parsecs"})
    with pytest.raises(replay.ParamError, match="C=0Gbit/s"):
        replay.run(prep, "mm1", {"C": "0Gbit/s"})
    with pytest.raises(replay.ParamError, match="unknown model"):
        replay.run(prep, "logp")


def test_cache_is_used_and_invalidated(tmp_path):
    d = simulate_to_dir(tmp_path / "t", PINGPONG)
    a = replay.prepare(d)
    assert list((d / ".replay-cache").glob("prepared-*/meta.json"))
    b = replay.prepare(d)
    assert replay.run(b, "loggp").makespan_ns == replay.run(a, "loggp").makespan_ns
    # the cached arrays are mapped copy-on-write: changing one in memory leaves the file alone
    b.rows["burst"][:] = 123.0
    assert replay.prepare(d).rows["burst"].max() != 123.0
    (d / ".replay-cache" / "prepared-0123456789abcdef.npz").write_bytes(b"an older version's")
    simulate_to_dir(d, [[("send", 1, 10)], [("recv", 0)]])
    c = replay.prepare(d)
    assert c.nrows == 2
    assert [p.name for p in (d / ".replay-cache").iterdir()] == \
        [f"prepared-{importlib.import_module('replay.cache').fingerprint(d)}"]  # older caches are gone


def test_region_scale_and_cpu_time(tmp_path):
    # rank 0 computes 10 us in region "solve" of which only 4 us on the CPU (oversubscribed)
    progs = [[("compute", 10_000, "solve", 4_000), ("send", 1, 8)],
             [("compute", 1_000, "io"), ("recv", 0)]]
    prep = _prep(tmp_path, progs)
    free = {"L": 0, "o": 0, "G": 0, "g": 0}
    base = replay.run(prep, "loggp", free)
    assert base.makespan_ns == pytest.approx(10_000, abs=2)
    half = replay.run(prep, "loggp", free, region_scale={"solve": 0.5})
    assert half.makespan_ns == pytest.approx(5_000, abs=2)
    other = replay.run(prep, "loggp", free, region_scale={"io": 0.0})
    assert other.makespan_ns == pytest.approx(10_000, abs=2)
    cpu = replay.run(prep, "loggp", free, cpu_time=True)
    assert cpu.makespan_ns == pytest.approx(4_000, abs=2)
    with pytest.raises(replay.ReplayError, match="no region named 'nope'"):
        replay.run(prep, "loggp", free, region_scale={"nope": 2.0})


def test_synchronous_sends_always_rendezvous(tmp_path):
    """Ssend completes only once the receive matched: the rendezvous path whatever S is."""
    from synthetic import simulate
    cols = simulate(PINGPONG)
    for c in cols:
        c["op"] = ["Ssend" if o == "Send" else o for o in c["op"]]
    prep = replay.prepare(write_trace(tmp_path / "ssend", cols), use_cache=False)
    L, o, G, k = 2000.0, 300.0, 0.5, 1000
    res = replay.run(prep, "loggps", {"L": "2us", "o": "300ns", "G": "0.5ns", "S": "1MiB"},
                     compute_scale=0.0)
    assert res.makespan_ns == pytest.approx(2 * (2 * o + 3 * L + (k - 1) * G))
    plain = _prep(tmp_path, PINGPONG, name="send")
    eager = replay.run(plain, "loggps", {"L": "2us", "o": "300ns", "G": "0.5ns", "S": "1MiB"},
                       compute_scale=0.0)
    assert eager.makespan_ns == pytest.approx(2 * (2 * o + L + (k - 1) * G))


def test_probe_waits_for_the_envelope_and_the_allocation_delays_the_receive(tmp_path):
    """A traced pickle-API recv: Probe (wait for the message), the receiver's own work (the buffer
    allocation, a burst), Recv. Eager: the probe waits for the data; rendezvous: for the request,
    and the data moves only once the receive is posted after the allocation, so the sender's
    blocking send waits through it."""
    A, k = 50_000.0, 100_000
    progs = [[("send", 1, k)], [("probe", 0), ("compute", A), ("recv", 0)]]
    prep = _prep(tmp_path, progs)
    from replay import kernel as K
    assert K.PROBE in prep.rows["kind"]
    L, o, G = 2000.0, 300.0, 0.5
    kg = (k - 1) * G
    sets = {"L": "2us", "o": "300ns", "G": "0.5ns", "g": "0"}
    eager = replay.run(prep, "loggps", dict(sets, S="1MiB"))
    assert eager.rank_end_ns[1] == pytest.approx(o + L + kg + A + o)
    assert eager.rank_end_ns[0] == pytest.approx(o)
    rdv = replay.run(prep, "loggps", dict(sets, S="1KiB"))
    assert rdv.rank_end_ns[1] == pytest.approx(o + 3 * L + A + kg + o)
    assert rdv.rank_end_ns[0] == pytest.approx(o + 2 * L + A + kg)
    # the receiver waited in the probe, not in the receive
    ev = rdv.events_frame()
    probe = ev[ev["op"] == "Probe"].iloc[0]
    assert probe["end_ns"] - probe["start_ns"] == pytest.approx(o + L)
    assert replay.run(prep, "measured").rel_error_pct == pytest.approx(0.0, abs=1e-9)


def test_collective_algorithm_registry():
    """Every collective of the trace format has a default algorithm; every registered algorithm
    documents itself and sends only between the communicator's ranks, each member's block."""
    from hindsight import trace as tf
    from replay import collectives as C

    # (a neighbourhood collective's one pattern is its topology's: tests/test_neighbours.py)
    blocking = set(tf.COLLECTIVE_OPS) - set(tf.NONBLOCKING_COLLECTIVE_OPS) - set(tf.NEIGHBOR_OPS)
    assert set(C.DEFAULT_ALGORITHMS) == blocking | set(tf.COMM_OPS)
    # a non-blocking collective runs its blocking collective's algorithms
    assert set(tf.BLOCKING_OF.values()) <= blocking | set(tf.NEIGHBOR_OPS)
    for op, names in C.ALGORITHMS.items():
        assert C.DEFAULT_ALGORITHMS[op] in names
        for name in names:
            assert C._BUILDERS[(op, name)].__doc__
            for p in (2, 3, 5, 8):
                msgs = C._messages(op, name, p, root=p - 1)
                assert msgs, (op, name, p)
                assert all(0 <= m[1] < p and 0 <= m[2] < p and m[1] != m[2] and 0 <= m[3] < p
                           for m in msgs), (op, name, p)
    with pytest.raises(ValueError, match="no pattern"):
        C._messages("Bcast", "nonesuch", 4, 0)
