"""Hand-computed replays of rule ``unexpected_copy`` (LogGPS): an eager message whose data
arrived before its receive was posted, in the replayed timeline, costs the call that completes
the receive u(k) = o_unexpected + O_unexpected·k more (replay.rules.unexpected_copy).

Every case: L = 2 us, o = 300 ns, G = 0.5 ns/B, g = 0, S = 512 B, progress async; with the rule
o_unexpected = 1 us, O_unexpected = 1 ns/B, so a 100-byte message's u = 1,100 ns. Rank 0's
100-byte send entered at t0 ends at t0 + 300 and its data arrives at t0 + 300 + 2,000 + 99·0.5
= t0 + 2,349.5."""

from __future__ import annotations

import math

import pytest

import replay
from synthetic import simulate_to_dir

SETS = {"L": "2us", "o": "300ns", "G": "0.5ns", "g": "0", "S": "512B"}
RULE = {"o_unexpected": "1us", "O_unexpected": "1ns"}
U = 1000 + 100 * 1.0


def _run(tmp_path, progs, name, **extra):
    prep = replay.prepare(simulate_to_dir(tmp_path / name, progs), use_cache=False)
    return replay.run(prep, "loggps", dict(SETS, **extra))


def test_unexpected_recv_pays_the_copy_and_delays_what_follows(tmp_path):
    # Rank 1 computes 10 us, so rank 0's 100 bytes (there at 2,349.5) wait in the unexpected
    # queue: its Recv posted at 10,000 ends at 10,000 + o_r + u = 11,400 (10,300 without).
    # Its 8-byte answer then leaves u later: it ends 11,700, arrives 11,700 + 2,000 + 3.5 =
    # 13,703.5; rank 0, whose Recv was posted at 300 (expected: no copy), ends 14,003.5.
    progs = [[("send", 1, 100), ("recv", 1)],
             [("compute", 10_000), ("recv", 0), ("send", 0, 8)]]
    on = _run(tmp_path, progs, "a", **RULE)
    off = _run(tmp_path, progs, "a")
    assert on.rank_end_ns[1] == pytest.approx(10_000 + 300 + U + 300)
    assert on.rank_end_ns[0] == pytest.approx(10_000 + 300 + U + 300 + 2_003.5 + 300)
    assert off.rank_end_ns[0] == pytest.approx(10_000 + 300 + 300 + 2_003.5 + 300)
    assert on.makespan_ns - off.makespan_ns == pytest.approx(U)
    # the replay counts the receives that paid it (rank 0's was expected)
    assert on.info["unexpected_copy"] == {"receives": 1}
    assert "unexpected_copy" not in off.info


def test_irecv_wait_probe_and_sendrecv_of_an_unexpected_message(tmp_path):
    # An Irecv posted at 10,000 after the data arrived: its Wait pays u (10,000 + 300 + u).
    irecv = [[("send", 1, 100)], [("compute", 10_000), ("irecv", 0), ("wait", [0])]]
    assert _run(tmp_path, irecv, "i", **RULE).rank_end_ns[1] == pytest.approx(10_300 + U)
    # A Probe that finds the message there, then its Recv: the Recv is unexpected.
    probe = [[("send", 1, 100)], [("compute", 10_000), ("probe", 0), ("recv", 0)]]
    assert _run(tmp_path, probe, "p", **RULE).rank_end_ns[1] == pytest.approx(10_300 + U)
    # Sendrecv whose receive finds rank 1's 100 bytes there: u more for rank 0
    sr = [[("compute", 10_000), ("sendrecv", 1, 8, 1)], [("send", 0, 100), ("recv", 0)]]
    d = _run(tmp_path, sr, "s", **RULE).rank_end_ns[0] - _run(tmp_path, sr, "s").rank_end_ns[0]
    assert d == pytest.approx(U)


def test_a_sendrecv_posts_its_receive_before_its_send(tmp_path):
    """Rule sendrecv_posts_receive_first (MPICH's MPIR_Sendrecv_impl: MPID_Irecv, then
    MPID_Isend, then wait for both). Two ranks exchange 100 bytes with Sendrecv, 20 times, with
    L = -250 ns (a profile's L is negative where the calls' overheads overlap the transfer): a
    partner's data arrives at t + o_s + L = t + 50, after the receive was posted at t, so no
    receive is unexpected and each exchange costs o_s + o_r = 600 ns. Posted after the send,
    at t + o_s, every receive found its data queued and paid u."""
    n = 20
    progs = [[("sendrecv", 1, 100, 1)] * n, [("sendrecv", 0, 100, 0)] * n]
    res = _run(tmp_path, progs, "sr", **dict(RULE, L="-250ns", G="0"))
    assert res.info["unexpected_copy"] == {"receives": 0}
    assert res.rank_end_ns == pytest.approx([n * 600.0] * 2)
    st = res.prepared.stream(expand=True)
    from replay import kernel as K
    first_rank = st.kind[st.rank_off[0]:st.rank_off[1]].tolist()
    assert first_rank == [K.IRECV, K.ISEND, K.WRECV, K.WSEND] * n
    # the operations that post each message: rank 0's send its ISEND, its receive its IRECV
    ops = range(st.rank_off[0], st.rank_off[1])
    for i in ops:
        if st.kind[i] == K.ISEND:
            assert st.m_send_op[st.msg[i]] == i
        elif st.kind[i] == K.IRECV:
            assert st.m_recv_op[st.msg[i]] == i


def test_preposted_receive_costs_nothing_extra(tmp_path):
    # Irecv posted at 0, the data arrives at 2,349.5, the Wait comes at 10,000: the message was
    # expected (its receive existed when it arrived), although the Wait came later: 10,300.
    late_wait = [[("send", 1, 100)], [("irecv", 0), ("compute", 10_000), ("wait", [0])]]
    assert _run(tmp_path, late_wait, "w", **RULE).rank_end_ns[1] == pytest.approx(10_300)
    # A Recv waiting for a message sent 20 us later: 20,000 + 2,349.5 + o_r.
    waiting = [[("compute", 20_000), ("send", 1, 100)], [("recv", 0)]]
    assert _run(tmp_path, waiting, "r", **RULE).rank_end_ns[1] == pytest.approx(22_649.5)


def test_rendezvous_is_not_copied(tmp_path):
    # 1000 bytes > S: the request is there at 2,300, the receive posted at 10,000 answers
    # (clear to send, then the data: 10,000 + 2L + 999·G = 14,499.5), + o_r: 14,799.5 with or
    # without the rule.
    progs = [[("send", 1, 1000)], [("compute", 10_000), ("recv", 0)]]
    for extra in (RULE, {}):
        assert _run(tmp_path, progs, "z", **extra).rank_end_ns[1] == pytest.approx(14_799.5)


def test_zero_parameters_change_nothing(tmp_path):
    progs = [[("send", 1, 100), ("irecv", 1), ("compute", 3_000), ("wait", [0]),
              ("send", 1, 1000), ("recv", 1)],
             [("compute", 10_000), ("recv", 0), ("send", 0, 8), ("compute", 1_000),
              ("recv", 0), ("send", 0, 64)]]
    base = _run(tmp_path, progs, "d")
    zero = _run(tmp_path, progs, "d", o_unexpected="0", O_unexpected="0")
    assert list(zero.rank_end_ns) == list(base.rank_end_ns)
    assert _run(tmp_path, progs, "d", **RULE).makespan_ns > base.makespan_ns


def test_loggopsim_refuses_the_rule():
    from replay import models as M
    with pytest.raises(M.ParamError):
        M.resolve(M.get_model("loggopsim"), {"o_unexpected": "1us"}, None)


def test_in_call_progress_queues_only_what_a_call_took_in(tmp_path):
    # Progress in-call: the library takes a message in only inside the receiver's calls.
    # Rank 0's two 100-byte sends end at 300 and 600 and arrive at 2,349.5 and 2,649.5; rank 1
    # computes 10 us without a call, so its first Recv (posted at 10,000) finds its message
    # still in the transport: expected, ends 10,300. The second arrived before that Recv, which
    # ran the progress engine and queued it: the second Recv is unexpected, 10,300 + 300 + u.
    # With async progress both were queued on arrival: 10,000 + 2·(300 + u).
    progs = [[("send", 1, 100), ("send", 1, 100)],
             [("compute", 10_000), ("recv", 0), ("recv", 0)]]
    on = _run(tmp_path, progs, "c", progress="in-call", **RULE)
    assert on.rank_end_ns[1] == pytest.approx(10_600 + U)
    assert _run(tmp_path, progs, "c", **RULE).rank_end_ns[1] == pytest.approx(10_600 + 2 * U)
    # a Probe takes the message in: the Recv after it is unexpected under in-call too
    probe = [[("send", 1, 100)], [("compute", 10_000), ("probe", 0), ("recv", 0)]]
    assert _run(tmp_path, probe, "q", progress="in-call", **RULE).rank_end_ns[1] == \
        pytest.approx(10_300 + U)


def test_fit_unexpected_reads_the_difference_of_medians():
    from replay.calibration.fit import fit_unexpected
    # u(8) = 1 us, u(4104) = 1 us + 4096·0.5 ns = 3.048 us: a line through both
    probe = {"sizes": [8, 4104], "batch": 16, "rounds": 3,
             "unexpected_s": [[3e-6, 3e-6, None], [5.048e-6, 9e-6, 5.048e-6]],
             "expected_s": [[2e-6, 2e-6, 2e-6], [2e-6, 2e-6, None]]}
    fit = fit_unexpected(probe)
    assert fit.params["O_unexpected"] == pytest.approx(0.5e-9)
    assert fit.params["o_unexpected"] == pytest.approx(1e-6 - 8 * 0.5e-9)
    assert fit.evidence["valid"] == [[2, 3], [3, 2]] and not fit.notes
    # unexpected receives faster than expected ones: the rule is off, and said so
    fast = fit_unexpected(dict(probe, unexpected_s=[[1e-6] * 3, [1e-6] * 3]))
    assert fast.params == {"o_unexpected": 0.0, "O_unexpected": 0.0}
    assert any("rule unexpected_copy off" in n for n in fast.notes)
    # no size with valid samples of both cases: no fit
    assert fit_unexpected(dict(probe, expected_s=[[None] * 3, [None] * 3])) is None


def test_unexpected_probe_on_shared_memory():
    """The probe on 2 real ranks (MPICH shared memory, eager limit 4 KiB there): every size
    gets valid samples; u(k) is finite, and at the largest eager size the receives whose
    messages were queued take no less than those posted first (MPICH copies those twice), within
    0.2 µs: on a fast machine the second copy of 4 KiB is a few hundred ns at most, and a median
    difference of 5 rounds has been seen 20 ns below 0."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from hindsight.collect import find_mpiexec, launch_env
    env = dict(launch_env(2))
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                         env.get("PYTHONPATH", "")])
    # (a second measurement where the first's 4 KiB difference came out below the tolerance:
    # on this shared 2-core VM a burst of other work during one of 5 rounds moved it -1.7 us)
    for attempt in range(2):
        r = subprocess.run([find_mpiexec(), "-n", "2", "-bind-to", "core", sys.executable,
                            "-m", "replay.calibration.unexpected", "--eager-max", "4096",
                            "--batch", "8", "--rounds", "5"], env=env, capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout.strip().splitlines()[-1])
        ev = out["evidence"]
        assert ev["u_sizes"] == [8, 512, 4096]
        assert all(a > 0 and b > 0 for a, b in ev["valid"])
        u = ev["u_s"]
        assert all(math.isfinite(x) and abs(x) < 1e-3 for x in u)
        if u[-1] >= -0.2e-6:
            break
    assert u[-1] >= -0.2e-6, ev
    p = out["params"]
    assert p["o_unexpected"] >= 0 and p["O_unexpected"] >= 0


def test_calibrate_writes_the_unexpected_cost(monkeypatch, tmp_path):
    """The probe's fit goes into [loggps] (seconds) and fit.unexpected_probe; loggps reads it
    (ns), loggopsim leaves it out; the summary prints u(k)."""
    from click.testing import CliRunner

    from hindsight.cli import main
    from replay import models as M
    from replay.calibration import run as R
    from replay.profile import read_profile
    from tests.test_calibration_quality import _bench

    probe = {"sizes": [8, 4104], "batch": 16, "rounds": 3, "D_s": 4e-3,
             "unexpected_s": [[3e-6] * 3, [5.048e-6] * 3],
             "expected_s": [[2e-6] * 3, [2e-6] * 3]}
    monkeypatch.setattr(R, "run_bench", lambda *a, **kw: ({**_bench(),
                                                           "unexpected_probe": probe}, ""))
    monkeypatch.setattr(R.time, "sleep", lambda s: None)
    out = tmp_path / "p.toml"
    r = CliRunner().invoke(main, ["calibrate", "-n", "2", "--overhead-ranks", "2",
                                  "--out", str(out)])
    assert r.exit_code == 0, r.output
    prof = read_profile(out)
    assert prof["loggps"]["O_unexpected"] == pytest.approx(0.5e-9)
    assert prof["fit"]["unexpected_probe"]["u_s"] == pytest.approx([1e-6, 3.048e-6])
    assert "unexpected o_unexpected=0.996us O_unexpected=0.5ns/B" in r.output
    v = M.resolve(M.get_model("loggps"), {}, M.load_profile(out, M.get_model("loggps")))
    assert v["o_unexpected"] == pytest.approx(996.0) and v["O_unexpected"] == pytest.approx(0.5)
    off = M.resolve(M.get_model("loggps"), {"o_unexpected": "0", "O_unexpected": "0"},
                    M.load_profile(out, M.get_model("loggps")))
    assert off["o_unexpected"] == 0.0 and off["O_unexpected"] == 0.0
    v = M.resolve(M.get_model("loggopsim"), {}, M.load_profile(out, M.get_model("loggopsim")))
    assert "o_unexpected" not in v
    # the pickle API's receives are all unexpected: its L is fitted without o_unexpected
    pk = tmp_path / "pk.toml"
    r = CliRunner().invoke(main, ["calibrate", "-n", "2", "--overhead-ranks", "2", "--api",
                                  "pickle", "--out", str(pk)])
    assert r.exit_code == 0, r.output
    lp = read_profile(pk)["loggps"]
    want = max(prof["loggps"]["L"] - prof["loggps"]["o_unexpected"], -lp["o_send"])
    assert lp["L"] == pytest.approx(want) and lp["L"] < prof["loggps"]["L"]
    assert any("every receive is unexpected" in n for n in read_profile(pk)["fit"]["notes"])


def test_shared_flag_collectives_on_one_host_are_never_queued(tmp_path):
    # Rank 1 enters the Allreduce 10 us late: in the recursive-doubling pattern that stands in
    # for it, rank 0's 8 bytes arrive long before rank 1 posts its receive. On one host MPICH
    # runs an Allreduce under its own selection on shared flags (no point-to-point message, so
    # no unexpected queue): the rule charges nothing. Forced to a point-to-point algorithm, or
    # across two hosts, the same message is queued and its receive pays u.
    progs = [[("coll", "Allreduce", 8)], [("compute", 10_000), ("coll", "Allreduce", 8)]]

    def replay_of(name, hosts, **kw):
        prep = replay.prepare(simulate_to_dir(tmp_path / name, progs, hosts=hosts),
                              use_cache=False)
        on = replay.run(prep, "loggps", dict(SETS, **RULE), **kw)
        off = replay.run(prep, "loggps", SETS, **kw)
        # rank 1, the late one, is the receiver that may find the message queued
        return on.info["unexpected_copy"]["receives"], on.rank_end_ns[1] - off.rank_end_ns[1]

    one, two = {"n0": [0, 1]}, {"n0": [0], "n1": [1]}
    assert replay_of("one", one) == (0, 0.0)
    assert replay_of("forced", one, algorithms={"Allreduce": "recursive_doubling"}) == \
        (1, pytest.approx(U - 100 + 8))
    assert replay_of("two", two) == (1, pytest.approx(U - 100 + 8))
