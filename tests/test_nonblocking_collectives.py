"""Non-blocking collectives in replay: the measured model's meeting (CPOST at the post, CWAIT at
the completion) and the network models' split of the pattern (rule ``nonblocking_split``: the
first step's posts at the post row, the rest at a completion row, the first completion of it or
of a collective posted after it on its communicator: rule ``nonblocking_in_order``), checked by
hand and on real runs that complete collectives in different orders per rank."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from synthetic import simulate_to_dir

import replay
from hindsight import trace as tf
from hindsight.check import check_trace
from replay import collectives as C
from replay import kernel as K
from replay.errors import ReplayError
from replay.patterns import nonblocking_split, nonblocking_tails
from replay.streamed import run_streamed
from tests.conftest import PROGRAMS, hindsight
from tests.test_streamed import _same

L, G = 1000.0, 0.5
HOCKNEY = {"l": "1000ns", "g": "0.5ns"}
C_NS = 50_000.0


def _prep(tmp_path, name, programs):
    return replay.prepare(simulate_to_dir(tmp_path / name, programs), use_cache=False)


def test_split_puts_each_members_first_step_posts_at_the_post():
    # binomial Bcast on 4 ranks: the root sends at steps 0 and 1; rank 1 receives at step 0
    # and forwards at step 1; ranks 2 and 3 only receive
    pat = C.pattern("Bcast", "binomial", 4, 0)
    head = nonblocking_split(pat)
    assert head.tolist() == [1, 1, 1, 1]
    kinds = [pat.op_kind[pat.op_off[q]:pat.op_off[q + 1]].tolist() for q in range(4)]
    assert kinds[0] == [K.ISEND, K.WSEND, K.ISEND, K.WSEND]
    assert kinds[1] == [K.IRECV, K.WRECV, K.ISEND, K.WSEND]
    # recursive doubling Allreduce: each step posts a send and a receive
    rd = C.pattern("Allreduce", "recursive_doubling", 4, 0)
    assert nonblocking_split(rd).tolist() == [2, 2, 2, 2]


@pytest.mark.parametrize("p", [2, 4])
def test_a_nonblocking_allreduce_overlaps_the_compute_before_its_wait(tmp_path, p):
    # 24 bytes = 3 elements: recursive doubling on 4 ranks (2 exchanges of 24 B), Rabenseifner
    # on 2 (halves of 12 B out and back); a final Barrier (dissemination, log2 p empty steps)
    # ends the run
    steps = {4: [L + 24 * G] * 2, 2: [L + 12 * G] * 2}[p]
    barrier = {4: 2 * L, 2: L}[p]
    nb = [[("icoll", "Iallreduce", 24), ("compute", C_NS), ("wait", [0]),
           ("coll", "Barrier", 0)] for _ in range(p)]
    bl = [[("coll", "Allreduce", 24), ("compute", C_NS), ("coll", "Barrier", 0)]
          for _ in range(p)]
    nbr = replay.run(_prep(tmp_path, "nb", nb), "hockney", HOCKNEY)
    blr = replay.run(_prep(tmp_path, "bl", bl), "hockney", HOCKNEY)
    # the first step runs during the compute; the rest from the Wait on
    assert nbr.makespan_ns == pytest.approx(C_NS + sum(steps[1:]) + barrier)
    assert blr.makespan_ns == pytest.approx(sum(steps) + C_NS + barrier)
    # the measured model gives back the synthetic run exactly
    prep = _prep(tmp_path, "nb2", nb)
    assert replay.run(prep, "measured").makespan_ns == pytest.approx(prep.measured_makespan_ns)


def test_two_nonblocking_collectives_completed_by_one_waitall(tmp_path):
    progs = [[("icoll", "Ibarrier", 0), ("icoll", "Ibcast", 800, 1), ("compute", C_NS),
              ("wait", [0, 1])] for _ in range(4)]
    prep = _prep(tmp_path, "t", progs)
    assert replay.run(prep, "measured").makespan_ns == pytest.approx(prep.measured_makespan_ns)
    res = replay.run(prep, "hockney", HOCKNEY)
    # Ibarrier: dissemination, step 0 during the compute, step 1 at the Waitall (L); then
    # Ibcast: binomial from rank 1, steps 0 and 1 of 800 B; a leaf's only step is its receive,
    # posted before the compute, whose data arrived during it
    assert res.makespan_ns == pytest.approx(C_NS + L + (L + 800 * G))


def test_a_rank_may_wait_for_a_message_before_completing_its_collective(tmp_path):
    # rank 0 completes its Ibarrier only after rank 2's message, which rank 2 sends after
    # completing its own: valid MPI (the barrier completes once all have posted)
    progs = [[("icoll", "Ibarrier", 0), ("recv", 2), ("wait", [0])],
             [("icoll", "Ibarrier", 0), ("wait", [0])],
             [("icoll", "Ibarrier", 0), ("wait", [0]), ("send", 0, 8)],
             [("icoll", "Ibarrier", 0), ("wait", [0])]]
    prep = _prep(tmp_path, "t", progs)
    # the measured model enters at the post and meets at the completion: no deadlock
    assert replay.run(prep, "measured").makespan_ns == pytest.approx(prep.measured_makespan_ns)
    # the network models run the barrier's second step (dissemination: 0 sends to 2) at rank
    # 0's Wait, after the Recv that waits for rank 2, which waits in that step: the error
    # says why
    with pytest.raises(ReplayError, match="non-blocking collectives"):
        replay.run(prep, "hockney", HOCKNEY)


def test_a_nonblocking_collective_never_completed_is_reported(tmp_path):
    progs = [[("icoll", "Iallreduce", 8), ("coll", "Barrier", 0)] for _ in range(2)]
    d = simulate_to_dir(tmp_path / "t", progs)
    check = hindsight("trace", "check", d)
    assert check.returncode == 1
    assert "Iallreduce request 0 is never completed" in check.stdout


def _two_allreduces(first: list[int], second: list[int]) -> list[list[tuple]]:
    """Two ranks post a 24-byte and a 48-byte Iallreduce, compute, then each Waits for its
    requests in its own order (``first`` for rank 0, ``second`` for rank 1)."""
    return [[("icoll", "Iallreduce", 24), ("icoll", "Iallreduce", 48), ("compute", C_NS)]
            + [("wait", [q]) for q in order] for order in (first, second)]


def test_collectives_completed_in_opposite_orders_replay_in_post_order(tmp_path):
    # rank 0 completes the 24 B Iallreduce first, rank 1 the 48 B one: under the split alone
    # each waited in its first Wait for the other's second step, which the other ran only at
    # its second Wait. Rabenseifner on 2 ranks: halves out (step 0, at the post) and back
    # (step 1). Rule nonblocking_in_order runs both second steps in post order at each rank's
    # first completion: rank 1's first Wait runs the 24 B one's, then its own.
    prep = _prep(tmp_path, "opposite", _two_allreduces([0, 1], [1, 0]))
    res = replay.run(prep, "hockney", HOCKNEY)
    # the post of the second Iallreduce follows the first's step 0 send (Hockney's sender is
    # busy 12·G for its 12 B), then the compute, then the two steps 1 (12 B, then 24 B)
    expect = 12 * G + C_NS + (L + 12 * G) + (L + 24 * G)
    assert res.makespan_ns == pytest.approx(expect)
    assert res.rank_end_ns.tolist() == pytest.approx([expect, expect])
    # the completion order does not change the prediction: the same program in post order
    same = replay.run(_prep(tmp_path, "same", _two_allreduces([0, 1], [0, 1])), "hockney",
                      HOCKNEY)
    assert same.makespan_ns == pytest.approx(expect)
    assert replay.run(prep, "loggps").makespan_ns > C_NS
    assert replay.run(prep, "measured").makespan_ns == pytest.approx(prep.measured_makespan_ns)


def test_a_collective_on_another_communicator_keeps_its_own_completion(tmp_path):
    # a pending Iallreduce on a duplicate of WORLD is not advanced by the completion of a later
    # one on WORLD: its second step stays at its own Wait, after a compute of 3 C
    progs = [[("icoll", "Iallreduce", 24, 0, 5), ("icoll", "Iallreduce", 48),
              ("compute", C_NS), ("wait", [1]), ("compute", 3 * C_NS), ("wait", [0])]
             for _ in range(2)]
    prep = replay.prepare(simulate_to_dir(tmp_path / "t", progs, communicators={5: [0, 1]}),
                          use_cache=False)
    res = replay.run(prep, "hockney", HOCKNEY)
    first_wait = int(np.flatnonzero(prep.rows.op == tf.OP_CODE["Wait"])[0])
    assert res.row_end_ns[first_wait] == pytest.approx(12 * G + C_NS + (L + 24 * G))
    assert res.makespan_ns == pytest.approx(12 * G + C_NS + (L + 24 * G) + 3 * C_NS
                                            + (L + 12 * G))


@pytest.fixture(scope="module")
def opposite_trace(tmp_path_factory):
    """A real 2-rank trace whose ranks complete two Iallreduces in opposite orders (Wait) and an
    Iallreduce and an Ibcast by Waitany over arrays ordered differently per rank."""
    if shutil.which("mpiexec") is None:
        pytest.skip("mpiexec is not available")
    out = tmp_path_factory.mktemp("nbo") / "trace"
    p = hindsight("collect", "-n", "2", "--program", PROGRAMS / "nonblocking_order.py",
                  "--out", out, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "rank 0: 4 checks, all passed\nrank 1: 4 checks, all passed" in p.stdout
    return out


def test_a_real_run_completing_collectives_in_opposite_orders_replays(opposite_trace):
    assert check_trace(opposite_trace) == []
    df = tf.read_trace(opposite_trace).to_pandas()
    waits = [df[(df["rank"] == q) & (df["op"] == "Wait")]["request"].tolist() for q in (0, 1)]
    assert waits == [[0, 1], [1, 0]]            # the trace has the opposite orders
    prep = replay.prepare(opposite_trace, use_cache=False)
    for model in ("hockney", "loggps", "measured"):
        whole = replay.run(prep, model, record=False)
        assert whole.makespan_ns > 0
        # the streamed replay (cut where no collective is pending) gives the same
        for window in (3, 40):
            _same(whole, run_streamed(opposite_trace, model, window=window))
    cli = hindsight("replay", opposite_trace, "--model", "hockney")
    assert cli.returncode == 0, cli.stdout + cli.stderr


def test_three_collectives_completed_in_any_order_run_their_tails_in_post_order(tmp_path):
    # rank 0 completes C first, then A, then B; rank 1 in post order: rank 0's first Wait runs
    # the tails of A, B and C, in that order, one after the other; its later Waits run none
    progs = [[("icoll", "Iallreduce", 24), ("icoll", "Iallreduce", 48),
              ("icoll", "Iallreduce", 96), ("compute", C_NS)]
             + [("wait", [q]) for q in order] for order in ([2, 0, 1], [0, 1, 2])]
    prep = _prep(tmp_path, "t", progs)
    tail = np.full(len(prep.coll.rows), 2)
    tail_row, tail_off = nonblocking_tails(prep.coll, prep.rows.rank, tail)
    waits = np.flatnonzero(prep.rows.op == tf.OP_CODE["Wait"])
    w0, w1 = (waits[prep.rows.rank[waits] == r] for r in (0, 1))
    posts = prep.coll.rows

    def in_post_order(r: int) -> np.ndarray:     # rank r's entries of coll.rows: A, B, C
        mine = np.flatnonzero(prep.rows.rank[posts] == r)
        return mine[np.argsort(posts[mine])]
    on0, on1 = in_post_order(0), in_post_order(1)
    assert tail_row[on0].tolist() == [w0[0]] * 3 and tail_off[on0].tolist() == [0, 2, 4]
    assert tail_row[on1].tolist() == w1.tolist() and tail_off[on1].tolist() == [0, 0, 0]
    # and the prediction is the one of the same program completed in post order everywhere
    same = _prep(tmp_path, "same", [progs[1], progs[1]])
    assert replay.run(prep, "hockney", HOCKNEY).makespan_ns == pytest.approx(
        replay.run(same, "hockney", HOCKNEY).makespan_ns)
