"""Hand-computed replays of rule ``ack_cells`` (LogGPS, progress ``in-call``): a receiver
acknowledges a rendezvous completion through one of ``ack_cells`` cells, which its sender frees
only inside an MPI call; a held acknowledgement leaves in the receiver's next call that waits
(replay.rules.ack_cells).

Every case: L = 2 us, o = 300 ns, G = 0.5 ns/B, g = 0, S = 512 B, ack_cells = 2; rank 0 Isends
three 1000-byte (rendezvous) messages, injected at 0, 499.5 and 999 ns (the NIC is busy 999·G
per message), each Isend ending o_s after its injection (1,299), computes, Waitalls them,
computes 50 us and receives an 8-byte message from rank 1. Rank 1 computes 20 us, receives the
three (each request is there when its Recv starts), computes 200 us and sends the 8 bytes.

Rank 1, in-call: Recv j is posted at p_j and answers at once; data at p_j + 2L + 999·G, + o_r:
e_0 = 24,799.5, e_1 = 29,599, e_2 = 34,398.5 ns; its Send starts at 234,398.5 and ends at
234,698.5 (o_s); the 8 bytes arrive at 234,698.5 + L + 7·G = 236,702."""

from __future__ import annotations

from pathlib import Path

import pytest

import replay
from synthetic import simulate_to_dir

K = 1000
SETS = {"L": "2us", "o": "300ns", "G": "0.5ns", "g": "0", "S": "512B", "progress": "in-call"}
E2, SEND1, ARRIVE = 34_398.5, 234_398.5, 236_702.0


def _progs(sender_compute):
    return [[("isend", 1, K), ("isend", 1, K), ("isend", 1, K), ("compute", sender_compute),
             ("wait", [0, 1, 2]), ("compute", 50_000), ("recv", 1)],
            [("compute", 20_000), ("recv", 0), ("recv", 0), ("recv", 0), ("compute", 200_000),
             ("send", 0, 8)]]


def _run(tmp_path, sender_compute, **extra):
    prep = replay.prepare(simulate_to_dir(tmp_path / "t", _progs(sender_compute)),
                          use_cache=False)
    return replay.run(prep, "loggps", dict(SETS, **extra))


def test_third_acknowledgement_waits_for_the_receivers_send(tmp_path):
    # Rank 0 computes 100 us after its Isends (no MPI call), so it reads no acknowledgement
    # before its Waitall at 101,299. Acks 0 and 1 fill rank 1's two cells; ack 2 (e_2 =
    # 34,398.5) finds none free (ack 0 is read at 101,299 > e_2) and is held. Rank 1's Recvs
    # after that find their messages there (no waiting call); its next waiting call is the
    # Send at 234,398.5: ack 2 leaves then, rank 0 (in its Waitall) reads it at once.
    # Rank 0: Waitall ends 234,398.5, computes 50 us to 284,398.5, receives the 8 bytes that
    # are already there: ends at 284,398.5 + o_r.
    held = _run(tmp_path, 100_000, ack_cells="2")
    assert held.rank_end_ns[0] == pytest.approx(SEND1 + 50_000 + 300)
    assert held.rank_end_ns[1] == pytest.approx(SEND1 + 300)
    assert held.info["ack_cells"]["held"] == 1 and held.info["ack_cells"]["settled"]
    # Waitall's wait is counted as waiting for the receiver: 234,398.5 - 101,299
    assert held.rank_wait_ns[0] == pytest.approx(SEND1 - 101_299)
    # without the limit (3 cells, or none): Waitall ends at 101,299, rank 0 waits for the
    # 8 bytes in its Recv: 236,702 + o_r
    for extra in ({"ack_cells": "3"}, {}):
        free = _run(tmp_path, 100_000, **extra)
        assert free.rank_end_ns[0] == pytest.approx(ARRIVE + 300)
        assert "ack_cells" not in free.info or free.info["ack_cells"]["held"] == 0


def test_a_sender_already_waiting_frees_the_cells(tmp_path):
    # Rank 0 computes only 30 us: its Waitall starts at 31,299, before e_2 = 34,398.5, and
    # reads acks 0 and 1 there, so ack 2 finds a free cell: nothing is held and the replay is
    # the in-call replay without the rule.
    with_rule = _run(tmp_path, 30_000, ack_cells="2")
    without = _run(tmp_path, 30_000)
    assert with_rule.info["ack_cells"]["held"] == 0
    assert with_rule.rank_end_ns.tolist() == pytest.approx(without.rank_end_ns.tolist())


def test_rule_needs_progress_in_call(tmp_path):
    # With async progress the library moves transfers on its own: the rule does not apply.
    a = _run(tmp_path, 100_000, ack_cells="2", progress="async")
    b = _run(tmp_path, 100_000, progress="async")
    assert "ack_cells" not in a.info
    assert a.rank_end_ns.tolist() == b.rank_end_ns.tolist()


def test_bad_ack_cells_is_a_usage_error(tmp_path):
    prep = replay.prepare(simulate_to_dir(tmp_path / "t", _progs(100_000)), use_cache=False)
    for bad in ("0", "2.5", "-1", "many"):
        with pytest.raises(replay.ParamError, match="ack_cells"):
            replay.run(prep, "loggps", dict(SETS, ack_cells=bad))


def _probe(env_extra):
    import json
    import os
    import subprocess
    import sys

    from hindsight.collect import find_mpiexec, launch_env
    env = dict(launch_env(2), **env_extra)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                         env.get("PYTHONPATH", "")])
    r = subprocess.run([find_mpiexec(), "-n", "2", "-bind-to", "core", sys.executable, "-m",
                        "replay.calibration.queue", "--bytes", "65536"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_queue_probe_finds_the_shared_memory_cells():
    # MPICH's shared-memory cells per process (MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_NUM_CELLS,
    # default 64): the probe finds the count of completions acknowledged without the sender,
    # and follows the variable when it is changed (so it measures the cells, not a constant)
    default = _probe({})
    assert default["ack_cells"] == pytest.approx(64, abs=2), default
    fewer = _probe({"MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_NUM_CELLS": "16"})
    assert fewer["ack_cells"] == pytest.approx(16, abs=2), fewer


def test_fit_queue_reads_the_largest_count_not_held():
    from replay.calibration.fit import fit_queue
    probe = {"split": 0.5, "samples": 3, "max_count": 512, "largest_not_held": 64,
             "first_held": 65, "held": {"64": ["not held", "not held", "invalid",
                                               "not held"],
                                        "65": ["held", "not held", "held"]}}
    fit = fit_queue(probe)
    assert fit.ack_cells == 64
    assert any("at 65 messages 2 of 3" in n for n in fit.notes)
    none = fit_queue(dict(probe, largest_not_held=512, first_held=None, held={}))
    assert none.ack_cells == float("inf") and "no limit" in none.notes[0]


def test_replay_says_how_many_sends_were_held(tmp_path):
    from click.testing import CliRunner

    import hindsight.cli
    trace = simulate_to_dir(tmp_path / "t", _progs(100_000))
    sets = [x for k, v in dict(SETS, ack_cells="2").items() for x in ("--set", f"{k}={v}")]
    r = CliRunner().invoke(hindsight.cli.main, ["replay", str(trace), "--model", "loggps",
                                                *sets])
    assert r.exit_code == 0, r.output
    assert ("ack_cells  1 rendezvous send held until the receiver's next waiting call (all 2 "
            "acknowledgement cells taken; 1 more replay)") in r.output
    r = CliRunner().invoke(hindsight.cli.main, ["replay", str(trace), "--model", "loggps",
                                                *sets[:-2]])
    assert r.exit_code == 0 and "ack_cells " not in r.output.replace("ack_cells=", "")


def test_the_cells_are_the_receivers_for_all_its_senders(tmp_path):
    # MPICH's cells belong to the receiving process, shared by its acknowledgements to every
    # sender. Rank 1 takes one message from rank 0 and two from rank 2 (e_0 = 24,799.5, e_1 =
    # 29,599, e_2 = 34,398.5 as above: same posts, same sizes); ranks 0 and 2 compute 100 us
    # after their Isends (rank 0's Wait at 100,300, rank 2's Waitall at 100,799.5: it injects
    # at 0 and 499.5). Ack 2 (to rank 2) finds both cells unread (c_0 = 100,300, c_1 =
    # 100,799.5 > e_2): held until rank 1's first waiting call after min(c_0, c_1), its Send to
    # rank 0 at 234,398.5. Rank 2's Waitall ends then, it computes 50 us, receives its 8 bytes
    # (there since 237,002): 284,698.5. Rank 0's acknowledgement was not held: it receives the
    # 8 bytes rank 1 sends it at 234,698.5 + L + 7·G = 236,702, ends 237,002. Counting per
    # sender (two cells each) nothing would be held and rank 2 would end at 237,002 + o_r.
    progs = [[("isend", 1, K), ("compute", 100_000), ("wait", [0]), ("compute", 50_000),
              ("recv", 1)],
             [("compute", 20_000), ("recv", 0), ("recv", 2), ("recv", 2), ("compute", 200_000),
              ("send", 0, 8), ("send", 2, 8)],
             [("isend", 1, K), ("isend", 1, K), ("compute", 100_000), ("wait", [0, 1]),
              ("compute", 50_000), ("recv", 1)]]
    prep = replay.prepare(simulate_to_dir(tmp_path / "t", progs), use_cache=False)
    res = replay.run(prep, "loggps", dict(SETS, ack_cells="2"))
    assert res.info["ack_cells"]["held"] == 1
    assert res.rank_end_ns[0] == pytest.approx(ARRIVE + 300)
    assert res.rank_end_ns[2] == pytest.approx(SEND1 + 50_000 + 300)
    free = replay.run(prep, "loggps", dict(SETS, ack_cells="3"))
    assert free.rank_end_ns[2] == pytest.approx(ARRIVE + 300 + 300)
