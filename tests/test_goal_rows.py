"""Rule ``rows_without_gaps`` of the GOAL import (``hindsight.interop.goal._linearise``): every
row starts where the rank's previous row ended, so the time between MPI rows, which every other
model replays as compute, is exactly the schedule's calcs. LogGOPSim charges a receive's cost on
the CPU when its message arrives, between the schedule's operations; before the rule, that charge
(o + (s - 1)·G: 50.6 µs for 8 KiB at LogGOPSim's defaults) fell between rows and loggps counted
it as compute, and a calc listed before a Wait fell inside the Wait."""

from __future__ import annotations

import numpy as np
import pytest

import replay
from hindsight import trace as tf
from hindsight.interop import goal as G

# rank 1 posts its receive, computes 100 us in two calcs; rank 0's 8 KiB message arrives during
# the first calc, so LogGOPSim charges its receive cost between the two (CPU busy until then)
CHARGE_BETWEEN_CALCS = """num_ranks 2
rank 0 {
l1: send 8192b to 1 tag 0
l2: recv 8b from 1 tag 1
}
rank 1 {
l1: recv 8192b from 0 tag 0
l2: calc 50000
l3: calc 50000
l4: send 8b to 0 tag 1
l3 requires l2
l4 requires l3
l4 requires l1
}
"""
# rank 1 posts a receive, computes, then sends once the receive completed: its calc lies between
# the post and the Wait
CALC_BEFORE_WAIT = """num_ranks 2
rank 0 {
l1: calc 20000
l2: send 8192b to 1 tag 0
l2 requires l1
l3: recv 8b from 1 tag 1
}
rank 1 {
l1: recv 8192b from 0 tag 0
l2: calc 100000
l3: send 8b to 0 tag 1
l3 requires l1
l3 requires l2
}
"""


@pytest.mark.parametrize("text, calcs", [(CHARGE_BETWEEN_CALCS, [0, 100000]),
                                         (CALC_BEFORE_WAIT, [20000, 100000])],
                         ids=["charge-between-calcs", "calc-before-wait"])
def test_imported_rows_have_the_calcs_as_their_only_compute(tmp_path, text, calcs):
    src = tmp_path / "s.goal"
    src.write_text(text)
    G.import_goal(src, tmp_path / "t")
    table = tf.read_trace(tmp_path / "t").table.to_pandas()
    for r, want in enumerate(calcs):
        rows = table[table["rank"] == r].sort_values("seq")
        # no time outside the rows (the rows of one Waitall share its interval), and the calc
        # rows are the calcs
        start, end = rows["t_start"].to_numpy(), rows["t_end"].to_numpy()
        assert start[0] == 0 and (start[1:] <= np.maximum.accumulate(end)[:-1]).all()
        calc = rows[rows["op"] == "region"]
        assert int((calc["t_end"] - calc["t_start"]).sum()) == want
    # so a replay under another model finds the calcs as compute, to the nanosecond
    res = replay.run(replay.prepare(tmp_path / "t"), "loggps")
    assert np.round(np.asarray(res.breakdown_columns()["compute_s"]) * 1e9).tolist() == calcs
    # and the import keeps LogGOPSim's makespan: the rows end where the simulation did
    sim = replay.run(replay.prepare(tmp_path / "t"), "loggopsim", dict(G.LOGGOPSIM_DEFAULTS))
    ends = table.groupby("rank")["t_end"].max().to_numpy()
    assert ends.tolist() == np.round(sim.rank_end_ns).astype(np.int64).tolist()


# the receive's charge lands between two calcs at the end of rank 1, and no MPI row follows but
# the final Wait of the receive: the calcs move back to the post, whose row absorbs the charge,
# and the rank still ends where the simulation did
CHARGE_BEFORE_THE_LAST_CALC = """num_ranks 2
rank 0 {
l1: send 8192b to 1 tag 0
}
rank 1 {
l1: recv 8192b from 0 tag 0
l2: calc 50000
l3: calc 50000
l3 requires l2
}
"""
# calcs on two CPUs of one rank overlap: their rows keep the simulated times
TWO_CPUS = """num_ranks 1
rank 0 {
l1: calc 50000 cpu 0
l2: calc 50000 cpu 1
}
"""


@pytest.mark.parametrize("text, calcs", [(CHARGE_BEFORE_THE_LAST_CALC, [0, 100000]),
                                         (TWO_CPUS, None)], ids=["trailing-calc", "two-cpus"])
def test_the_rows_end_where_the_simulation_did(tmp_path, text, calcs):
    src = tmp_path / "s.goal"
    src.write_text(text)
    G.import_goal(src, tmp_path / "t")
    table = tf.read_trace(tmp_path / "t").table.to_pandas()
    sim = replay.run(replay.prepare(tmp_path / "t"), "loggopsim", dict(G.LOGGOPSIM_DEFAULTS))
    ends = table.groupby("rank")["t_end"].max().to_numpy()
    assert ends.tolist() == np.round(sim.rank_end_ns).astype(np.int64).tolist()
    assert tf.read_manifest(tmp_path / "t")["makespan_ns"] == int(ends.max())
    if calcs is None:
        assert ends.tolist() == [50000]     # the two calcs at once, as simulated
        return
    res = replay.run(replay.prepare(tmp_path / "t"), "loggps")
    assert np.round(np.asarray(res.breakdown_columns()["compute_s"]) * 1e9).tolist() == calcs


# rank 0's 100 kB send goes by rendezvous (above S): it completes once rank 1 has posted its
# receive, 50 us later, while rank 0 computes 20 us meanwhile (``irequires``: the calc starts
# when the send has). Rule send_row_until_next: the Isend row ends when the calc starts, and
# its completion is the Wait's. Were the row to span the send until it completed, the calc
# would move 48.5 us later than simulated, and the rows after it with it, until a Wait absorbed
# the difference; where a send came first, it started after its receiver had received it, and
# the import's check refused the trace ("clock skew": a new user's program, exported and
# imported back)
RENDEZVOUS_BESIDE_A_CALC = """num_ranks 2
rank 0 {
l0: send 100000b to 1 tag 1
l1: calc 20000
l1 irequires l0
l2: recv 8b from 1 tag 2
l2 requires l1
l3: calc 1000
l3 requires l2
l4: send 8b to 1 tag 3
l4 requires l3
l4 requires l0
}
rank 1 {
l0: calc 50000
l1: recv 100000b from 0 tag 1
l1 requires l0
l2: send 8b to 0 tag 2
l2 requires l1
l3: recv 8b from 0 tag 3
l3 requires l2
}
"""


def test_a_rendezvous_send_row_ends_when_the_rank_moves_on(tmp_path):
    src = tmp_path / "s.goal"
    src.write_text(RENDEZVOUS_BESIDE_A_CALC)
    G.import_goal(src, tmp_path / "t")
    table = tf.read_trace(tmp_path / "t").table.to_pandas()
    rows = table[table["rank"] == 0].sort_values("seq")
    send = rows[(rows["op"] == "Isend") & (rows["tag"] == 1)].iloc[0]
    calc = rows[rows["op"] == "region"].iloc[0]
    # the call is its overhead (o = 1500 ns at LogGOPSim's defaults), the calc right after it
    assert (int(send["t_start"]), int(send["t_end"])) == (0, 1500)
    assert (int(calc["t_start"]), int(calc["t_end"])) == (1500, 21500)
    sim = replay.run(replay.prepare(tmp_path / "t"), "loggopsim", dict(G.LOGGOPSIM_DEFAULTS))
    ends = table.groupby("rank")["t_end"].max().to_numpy()
    assert ends.tolist() == np.round(sim.rank_end_ns).astype(np.int64).tolist()
    res = replay.run(replay.prepare(tmp_path / "t"), "loggps")
    assert np.round(np.asarray(res.breakdown_columns()["compute_s"]) * 1e9).tolist() == [21000,
                                                                                         50000]
