"""Non-blocking collectives in replay: the measured model's meeting (CPOST at the post, CWAIT at
the completion) and the network models' split of the pattern (rule ``nonblocking_split``: the
first step's posts at the post row, the rest at the completion row), checked by hand."""

from __future__ import annotations

import pytest
from synthetic import simulate_to_dir

import replay
from replay import collectives as C
from replay import kernel as K
from replay.errors import ReplayError
from replay.patterns import nonblocking_split
from tests.conftest import hindsight

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
