"""Collective algorithms as MPICH runs them, and MPICH's selection among them by size
(replay/collectives.py, replay/selection.py)."""

from __future__ import annotations

import numpy as np
import pytest
from synthetic import simulate_to_dir

import replay
from replay import collectives as C
from replay import selection as S


def _msgs(op, algo, p, root=0):
    """The messages as (step, src, dst, owner, mult), without rule reduction_combine's mark."""
    return sorted(tuple(m[:5]) for m in C._messages(op, algo, p, root))


def _sent(msgs, p):
    """Blocks each rank sends in all."""
    out = [0.0] * p
    for m in msgs:
        out[m[1]] += m[4]
    return out


# --- the new patterns, hand-checked on small p ---------------------------------------------

def test_rabenseifner_allreduce_on_four_ranks():
    # reduce-scatter by halving (masks 1, 2: halves then quarters), allgather by doubling
    # (masks 2, 1: quarters then halves), each rank's own block size
    want = [(0, r, r ^ 1, r, 0.5) for r in range(4)] + [(1, r, r ^ 2, r, 0.25) for r in range(4)]
    want += [(2, r, r ^ 2, r, 0.25) for r in range(4)] + [(3, r, r ^ 1, r, 0.5) for r in range(4)]
    assert _msgs("Allreduce", "rabenseifner", 4) == sorted(want)
    for p in (2, 4, 8, 16):  # 2 (p - 1) / p of the block per rank
        assert _sent(C._messages("Allreduce", "rabenseifner", p, 0), p) == \
            pytest.approx([2 * (p - 1) / p] * p)


@pytest.mark.parametrize("p", [2, 3, 4, 5, 8, 13])
def test_binomial_scatter_and_gather_carry_each_subtree(p):
    # every non-root rank receives (Scatter) or sends (Gather) exactly the blocks of its subtree:
    # the blocks that cross into a rank = those of the ranks it forwards to, plus its own
    for op, recv_side in (("Scatter", True), ("Gather", False)):
        msgs = C._messages(op, "binomial", p, 0)
        into = {}
        for _, src, dst, _, mult in msgs:
            child, parent = (dst, src) if recv_side else (src, dst)
            into[child] = mult
        children = {}
        for _, src, dst, _, _ in msgs:
            child, parent = (dst, src) if recv_side else (src, dst)
            children.setdefault(parent, []).append(child)

        def size(r):
            return 1 + sum(size(c) for c in children.get(r, []))
        assert {r: into[r] for r in range(1, p)} == {r: size(r) for r in range(1, p)}
        # the root sends (Scatter) or receives (Gather) every other rank's block once
        root_side = [mult for _, src, dst, _, mult in msgs if (src if recv_side else dst) == 0]
        assert sum(root_side) == p - 1
    if p == 8:  # rank 1 joins first and forwards to 3 and 5 (3 forwards to 7): 4 blocks
        assert (0, 0, 1, 0, 4) in C._messages("Scatter", "binomial", 8, 0)


def test_rabenseifner_allreduce_folds_a_non_power_of_two():
    # p = 3: rank 0 folds into 1 (whole block), 1 and 2 run p = 2, then 1 hands the result back
    assert _msgs("Allreduce", "rabenseifner", 3) == [
        (0, 0, 1, 0, 1), (1, 1, 2, 1, 0.5), (1, 2, 1, 2, 0.5),
        (2, 1, 2, 1, 0.5), (2, 2, 1, 2, 0.5), (3, 1, 0, 1, 1)]


def test_rabenseifner_reduce_gathers_the_pieces_at_the_root():
    # p = 4, root 2: reduce-scatter as Allreduce, then 3 -> 2 and 1 -> 0 a quarter each, then
    # 0 -> 2 its half
    msgs = _msgs("Reduce", "rabenseifner", 4, root=2)
    assert [m for m in msgs if m[0] >= 2] == [(2, 1, 0, 1, 0.25), (2, 3, 2, 3, 0.25),
                                               (3, 0, 2, 0, 0.5)]
    assert sum(m[4] for m in msgs if m[2] == 2 and m[0] >= 2) == pytest.approx(3 / 4)
    # an even root below 2 (p - pof2) sits out: its odd neighbour sends it the result
    msgs3 = _msgs("Reduce", "rabenseifner", 3, root=0)
    assert msgs3[-1] == (3, 1, 0, 1, 1)


def test_bcast_scatter_then_ring_allgather():
    # p = 4, root 1: scatter 0->2 half (chunks 2, 3 relative), then 0->1 and 2->3 a quarter
    # (relative ranks; world = relative + 1), then 3 ring steps of a quarter of the root's block
    msgs = _msgs("Bcast", "scatter_ring_allgather", 4, root=1)
    assert [m for m in msgs if m[0] < 2] == [(0, 1, 3, 1, 0.5), (1, 1, 2, 1, 0.25),
                                              (1, 3, 0, 1, 0.25)]
    ring = [m for m in msgs if m[0] >= 2]
    assert ring == sorted((2 + s, r, (r + 1) % 4, 1, 0.25) for s in range(3) for r in range(4))
    # in all: the scatter moves each chunk once per tree level below the root (log2(p)/2 of the
    # block on a power of two), then p - 1 chunks per rank round the ring
    assert sum(m[4] for m in msgs) == pytest.approx(2 / 2 + 4 * 3 / 4)


def test_bcast_scatter_then_recursive_doubling_allgather():
    msgs = _msgs("Bcast", "scatter_recursive_doubling_allgather", 4, root=0)
    assert [m for m in msgs if m[0] >= 2] == sorted(
        [(2, r, r ^ 1, 0, 0.25) for r in range(4)] + [(3, r, r ^ 2, 0, 0.5) for r in range(4)])
    # not a power of two: the ring allgather
    assert _msgs("Bcast", "scatter_recursive_doubling_allgather", 5) == \
        _msgs("Bcast", "scatter_ring_allgather", 5)


def test_bruck_allgather():
    # p = 5: 1, 2 blocks to r - 1, r - 2, then the remaining 1 to r - 4
    msgs = _msgs("Allgather", "bruck", 5)
    assert msgs == sorted([(0, r, (r - 1) % 5, r, 1) for r in range(5)]
                          + [(1, r, (r - 2) % 5, r, 2) for r in range(5)]
                          + [(2, r, (r - 4) % 5, r, 1) for r in range(5)])
    for p in (2, 3, 4, 6, 7, 8):
        assert _sent(C._messages("Allgather", "bruck", p, 0), p) == [p - 1] * p


def test_bruck_alltoall():
    # p = 4: blocks with bit 0 set (1, 3) to r + 1, with bit 1 set (2, 3) to r + 2
    assert _msgs("Alltoall", "bruck", 4) == sorted(
        [(0, r, (r + 1) % 4, r, 2) for r in range(4)]
        + [(1, r, (r + 2) % 4, r, 2) for r in range(4)])
    # p = 5: 2, 2, 1 blocks (indices 1,3 / 2,3 / 4)
    assert [m[4] for m in _msgs("Alltoall", "bruck", 5) if m[1] == 0] == [2, 2, 1]


def test_scattered_alltoall_posts_throttle_peers_at_a_time():
    assert C.ALLTOALL_THROTTLE == 32
    msgs = C._messages("Alltoall", "scattered", 40, 0)
    # rank 0 sends to -1 .. -31 in step 0, -32 .. -39 in step 1
    assert sorted(m[2] for m in msgs if m[1] == 0 and m[0] == 0) == list(range(9, 40))
    assert sorted(m[2] for m in msgs if m[1] == 0 and m[0] == 1) == list(range(1, 9))
    assert _msgs("Alltoall", "scattered", 4) == sorted(
        (0, r, (r - j) % 4, r, 1) for j in (1, 2, 3) for r in range(4))
    assert [m[4] for m in C._messages("Alltoallv", "scattered", 4, 0)] == \
        [pytest.approx(1 / 3)] * 12


def test_recursive_halving_reduce_scatter():
    # Reduce_scatter_block on 4: 4 blocks in all; 2 to r ^ 2, then 1 to r ^ 1
    assert _msgs("Reduce_scatter_block", "recursive_halving", 4) == sorted(
        [(0, r, r ^ 2, r, 2.0) for r in range(4)] + [(1, r, r ^ 1, r, 1.0) for r in range(4)])
    # Reduce_scatter records the whole send buffer: fractions of it
    assert _sent(C._messages("Reduce_scatter", "recursive_halving", 4, 0), 4) == [0.75] * 4
    # p = 3: 0 sends its 3 blocks to 1; 1 and 2 halve; 1 sends 0 its share
    assert _msgs("Reduce_scatter_block", "recursive_halving", 3) == [
        (0, 0, 1, 0, 3), (1, 1, 2, 1, 1.5), (1, 2, 1, 2, 1.5), (2, 1, 0, 1, 1.0)]


# --- the selection --------------------------------------------------------------------------

@pytest.mark.parametrize("op, p, nbytes, want", [
    # Bcast: binomial on <= 8 ranks (csel tests comm_size<8 as <= 8) or <= 12288 bytes
    ("Bcast", 8, 10**6, "binomial"),
    ("Bcast", 16, 12288, "binomial"),
    ("Bcast", 16, 12289, "scatter_recursive_doubling_allgather"),
    ("Bcast", 16, 524288, "scatter_recursive_doubling_allgather"),
    ("Bcast", 16, 524289, "scatter_ring_allgather"),
    ("Bcast", 12, 12289, "scatter_ring_allgather"),
    ("Bcast", 9, 12288, "binomial"),
    # Allreduce: <= 8 bytes or fewer 8-byte elements than pof2: recursive doubling
    ("Allreduce", 4, 8, "recursive_doubling"),
    ("Allreduce", 4, 31, "recursive_doubling"),
    ("Allreduce", 4, 32, "rabenseifner"),
    ("Allreduce", 2, 9, "recursive_doubling"),
    ("Allreduce", 2, 16, "rabenseifner"),
    ("Allreduce", 6, 32, "rabenseifner"),
    # Reduce: <= 2048 bytes binomial
    ("Reduce", 4, 2048, "binomial"),
    ("Reduce", 4, 2049, "rabenseifner"),
    ("Reduce", 512, 4088, "binomial"),       # 511 elements < pof2(512)
    ("Reduce", 600, 4096, "rabenseifner"),   # 512 elements, pof2(600) = 512
    # Alltoall: Bruck only above 8 ranks and <= 256 bytes; scattered <= 32768
    ("Alltoall", 8, 16, "scattered"),
    ("Alltoall", 9, 256, "bruck"),
    ("Alltoall", 9, 257, "scattered"),
    ("Alltoall", 4, 32768, "scattered"),
    ("Alltoall", 4, 32769, "pairwise"),
    ("Alltoallv", 4, 10**6, "scattered"),
    ("Gather", 4, 10**6, "binomial"),
    ("Scatterv", 4, 10, "linear"),
    ("Barrier", 5, 0, "dissemination"),
])
def test_selection_picks_by_size(op, p, nbytes, want):
    assert S.choose(op, p, nbytes, S.total_bytes(op, p, nbytes, p * nbytes)) == want


@pytest.mark.parametrize("op, p, total, want", [
    # power of two ranks: recursive doubling below 524288 bytes in all, else ring
    ("Allgather", 4, 524287, "recursive_doubling"),
    ("Allgather", 4, 524288, "ring"),
    # other counts: Bruck below 81920, else ring
    ("Allgather", 5, 81919, "bruck"),
    ("Allgather", 5, 81920, "ring"),
    ("Allgatherv", 3, 81919, "bruck"),
    ("Allgatherv", 8, 524288, "ring"),
    ("Reduce_scatter_block", 4, 524287, "recursive_halving"),
    ("Reduce_scatter_block", 4, 524288, "pairwise"),
])
def test_selection_by_total_size(op, p, total, want):
    assert S.choose(op, p, total / p, total) == want


def test_total_bytes_follows_mpich():
    assert S.total_bytes("Allgather", 4, 100, 250) == 400
    assert S.total_bytes("Allgatherv", 4, 100, 250) == 250   # the members' blocks summed
    assert S.total_bytes("Reduce_scatter", 4, 100, 400) == 100   # its buffer holds all shares
    assert S.total_bytes("Reduce_scatter_block", 4, 100, 400) == 400


def test_selection_is_the_default_of_every_collective_and_names_registered_algorithms():
    for op, names in C.ALGORITHMS.items():
        assert C.DEFAULT_ALGORITHMS[op] == S.SELECTION
        assert S.SELECTION in names
        for p in (2, 3, 4, 9, 16):
            for nbytes in (0, 8, 300, 5000, 40000, 600000):
                assert S.choose(op, p, nbytes, p * nbytes) in names


# --- replay -----------------------------------------------------------------------------------

def _replay(tmp_path, name, op, nbytes, **kw):
    progs = [[("coll", op, nbytes)] for _ in range(4)]
    prep = replay.prepare(simulate_to_dir(tmp_path / name, progs), use_cache=False)
    return replay.run(prep, "hockney", {"l": "1000ns", "g": "0.5ns"}, compute_scale=0.0, **kw)


def test_replay_allreduce_either_side_of_the_count_threshold(tmp_path):
    l, g = 1000.0, 0.5
    # 24 bytes = 3 elements < pof2 = 4: recursive doubling, two exchanges of the block
    small = _replay(tmp_path, "small", "Allreduce", 24)
    assert small.makespan_ns == pytest.approx(2 * (l + 24 * g))
    # 32 bytes = 4 elements: Rabenseifner, halves then quarters, quarters then halves
    big = _replay(tmp_path, "big", "Allreduce", 32)
    assert big.makespan_ns == pytest.approx(4 * l + 2 * (16 + 8) * g)
    assert small.algorithms["Allreduce"] == big.algorithms["Allreduce"] == "mpich"
    # --algo still forces one algorithm
    forced = _replay(tmp_path, "forced", "Allreduce", 32,
                     algorithms={"Allreduce": "recursive_doubling"})
    assert forced.makespan_ns == pytest.approx(2 * (l + 32 * g))
    assert forced.algorithms["Allreduce"] == "recursive_doubling"


def test_replay_allgather_either_side_of_the_long_threshold(tmp_path):
    l, g = 1000.0, 0.5
    k = 524288 // 4  # a block; 4 of them is the threshold
    # 4 ranks (a power of two), total just below: recursive doubling, 1 then 2 blocks
    rd = _replay(tmp_path, "rd", "Allgather", k - 1)
    assert rd.makespan_ns == pytest.approx(2 * l + 3 * (k - 1) * g)
    # at the threshold: the ring, 3 steps of one block
    ring = _replay(tmp_path, "ring", "Allgather", k)
    assert ring.makespan_ns == pytest.approx(3 * (l + k * g))


def test_stream_records_what_the_selection_picked(tmp_path):
    progs = [[("coll", "Allreduce", 8), ("coll", "Allreduce", 64), ("coll", "Allreduce", 64)]
             for _ in range(4)]
    prep = replay.prepare(simulate_to_dir(tmp_path / "t", progs), use_cache=False)
    st = prep.stream(True)
    assert st.selected == {"Allreduce": {"recursive_doubling": 1, "rabenseifner": 2}}
    assert st.algorithms["Allreduce"] == "mpich"


@pytest.mark.parametrize("p", [2, 4, 8, 5])
def test_reduce_scatter_algorithms_move_the_same_shares(p):
    # a member records its whole send buffer (every member's share); each algorithm delivers
    # the others' shares, (p - 1)/p of it per rank, not p - 1 whole buffers
    for algo in ("pairwise", "recursive_halving"):
        if algo == "recursive_halving" and p & (p - 1):
            continue
        sent = _sent(C._messages("Reduce_scatter", algo, p, 0), p)
        assert sent == pytest.approx([(p - 1) / p] * p), algo


# --- rule reduction_combine: which messages a reduction's receiver combines -----------------

def _combined_steps(op, algo, p):
    """(step, combined) of every message, as the algorithm marks them."""
    return sorted({(m[0], len(m) > 5 and m[5] == 1) for m in C._messages(op, algo, p, 0)})


@pytest.mark.parametrize("p", [2, 3, 4, 5, 8])
def test_reductions_mark_their_reducing_phases_only(p):
    # ring: reduce-scatter (p - 1 steps) combined, allgather not
    assert _combined_steps("Allreduce", "ring", p) == \
        [(s, s < p - 1) for s in range(2 * (p - 1))]
    # every receive of a binomial or linear Reduce, a scan, a pairwise Reduce_scatter combines
    for op, algo in (("Reduce", "binomial"), ("Reduce", "linear"), ("Scan", "linear"),
                     ("Exscan", "recursive_doubling"), ("Reduce_scatter", "pairwise"),
                     ("Reduce_scatter_block", "pairwise")):
        assert all(c for _, c in _combined_steps(op, algo, p)), (op, algo)
    # nothing of a collective that reduces nothing is combined
    for op, algo in (("Gather", "linear"), ("Bcast", "binomial"), ("Alltoall", "pairwise"),
                     ("Allgather", "ring")):
        assert not any(c for _, c in _combined_steps(op, algo, p)), (op, algo)
    # Rabenseifner: each rank of a power of two combines 1/2 + 1/4 + ... + 1/p of its block,
    # (p - 1)/p in all, and passes the rest on uncombined
    if p & (p - 1) == 0:
        got = [0.0] * p
        for m in C._messages("Allreduce", "rabenseifner", p, 0):
            if len(m) > 5 and m[5]:
                got[m[2]] += m[4]
        assert got == pytest.approx([(p - 1) / p] * p)
    # reduce_bcast: the Reduce's steps combined, the Bcast's not
    marks = _combined_steps("Allreduce", "reduce_bcast", p)
    first_bcast = min(s for s, c in marks if not c)
    assert all(c == (s < first_bcast) for s, c in marks)


def test_combine_steps_charge_each_step_after_its_last_wait():
    from replay import kernel as K
    from replay.patterns import combine_steps

    pat = C.pattern("Allreduce", "recursive_doubling", 4, 0)
    member, local, msgs, start = combine_steps(pat)
    # two exchange steps, each combined by every member: one entry per member and step, at the
    # last wait of the step, combining the one message it received there
    assert len(member) == 8 and list(np.diff(start)) == [1] * 8
    for q, j, e in zip(member, local, range(len(member))):
        ops = range(pat.op_off[q], pat.op_off[q + 1])
        at = pat.op_off[q] + j
        assert pat.op_kind[at] in (K.WRECV, K.WSEND)
        # the next operation (if any) of the member posts the next step
        if at + 1 < pat.op_off[q + 1]:
            assert pat.op_kind[at + 1] in (K.ISEND, K.IRECV)
        m = msgs[start[e]]
        assert pat.dst[m] == q and pat.combine[m]
        assert any(pat.op_kind[i] == K.WRECV and pat.op_msg[i] == m for i in ops)
    # a pattern with nothing to combine has no entries
    assert len(combine_steps(C.pattern("Bcast", "binomial", 4, 0))[0]) == 0
