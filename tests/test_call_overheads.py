"""Hand-computed replays of the per-call overheads of LogGP/LogGPS (o_irecv, o_wait, o_probe,
o_call): the program's calls that move no message of their own cost what the library spends in
them, paid when the call starts; a collective's internal steps never pay them.

L = 2 us, o = 300 ns, G = 0.5 ns/B, g = 0; messages of 8 bytes (eager): one arrives
o + L + 7·G = 2303.5 ns after its send started."""

from __future__ import annotations

import numpy as np
import pytest

import replay
from replay import stream as S
from synthetic import NULL as S_NULL, simulate_to_dir

L, O, G = 2000.0, 300.0, 0.5
SETS = {"L": "2us", "o": "300ns", "G": "0.5ns", "g": "0"}
ARRIVE = O + L + 7 * G


def _prep(tmp_path, progs, name="t"):
    return replay.prepare(simulate_to_dir(tmp_path / name, progs), use_cache=False)


def _ends(prep, **extra):
    return replay.run(prep, "loggps", dict(SETS, **extra)).rank_end_ns.tolist()


def test_irecv_post_costs_o_irecv_and_posts_at_its_end(tmp_path):
    # rank 0 posts an Irecv at 0, computes 10 us, Waits; the data is there long before
    prep = _prep(tmp_path, [[("irecv", 1), ("compute", 10_000), ("wait", [0])],
                            [("send", 0, 8)]])
    assert _ends(prep)[0] == pytest.approx(10_000 + O)
    assert _ends(prep, o_irecv="1us")[0] == pytest.approx(1_000 + 10_000 + O)


def test_wait_on_a_send_costs_o_wait(tmp_path):
    prep = _prep(tmp_path, [[("isend", 1, 8), ("compute", 5_000), ("wait", [0])],
                            [("recv", 0)]])
    assert _ends(prep)[0] == pytest.approx(O + 5_000)
    assert _ends(prep, o_wait="700ns")[0] == pytest.approx(O + 5_000 + 700)
    # a Wait that completes a receive pays o_r(k), not o_wait
    prep = _prep(tmp_path, [[("irecv", 1), ("compute", 10_000), ("wait", [0])],
                            [("send", 0, 8)]], name="r")
    assert _ends(prep, o_wait="700ns")[0] == pytest.approx(10_000 + O)


def test_probe_costs_o_probe_when_the_message_is_there(tmp_path):
    prep = _prep(tmp_path, [[("send", 1, 8)],
                            [("compute", 10_000), ("probe", 0), ("recv", 0)]])
    assert _ends(prep)[1] == pytest.approx(10_000 + O)
    assert _ends(prep, o_probe="500ns")[1] == pytest.approx(10_000 + 500 + O)
    # a probe that waits for the envelope returns when it is there, as before
    early = _prep(tmp_path, [[("compute", 20_000), ("send", 1, 8)],
                             [("probe", 0), ("recv", 0)]], name="early")
    assert _ends(early, o_probe="500ns")[1] == pytest.approx(20_000 + ARRIVE + O)


def test_collective_steps_pay_no_call_overheads(tmp_path):
    progs = [[("coll", "Allreduce", 64), ("coll", "Barrier", 0)] for _ in range(4)]
    prep = _prep(tmp_path, progs)
    plain = _ends(prep)
    costly = _ends(prep, o_irecv="5us", o_wait="5us", o_probe="5us", o_call="5us")
    assert costly == pytest.approx(plain)
    classes = S.call_classes(prep.stream(True), prep.rows.op)
    assert not classes.any()


def test_call_classes_of_a_mixed_program(tmp_path):
    prep = _prep(tmp_path, [[("irecv", 1), ("isend", 1, 8), ("wait", [0, 1]),
                             ("probe", 1), ("recv", 1)],
                            [("irecv", 0), ("send", 0, 8), ("wait", [0]), ("send", 0, 8)]])
    st = prep.stream(True)
    cls = S.call_classes(st, prep.rows.op)
    r0 = cls[st.rank_off[0]:st.rank_off[1]].tolist()
    # Irecv, Isend, Wait(recv), Wait(send), Probe, Recv
    assert r0 == [S.CALL_IRECV, S.CALL_NONE, S.CALL_NONE, S.CALL_WAIT, S.CALL_PROBE,
                  S.CALL_NONE]


def test_profile_call_overheads_are_read(tmp_path):
    prep_dir = simulate_to_dir(tmp_path / "t", [[("irecv", 1), ("compute", 10_000),
                                                 ("wait", [0])], [("send", 0, 8)]])
    prof = tmp_path / "p.toml"
    prof.write_text('format = "hindsight-profile/1"\n[measured_on]\nranks = 2\n[loggps]\n'
                    'L = 2e-6\no_send = 3e-7\no_recv = 3e-7\ng = 0.0\nG = 5e-10\nO = 0.0\n'
                    'o_b = 0.0\nS = 65536\no_irecv = 1e-6\n')
    model = replay.models.get_model("loggps")
    params = replay.models.load_profile(prof, model)
    assert params["o_irecv"] == 1e-6 and "o_wait" not in params
    res = replay.run(replay.prepare(prep_dir, use_cache=False), "loggps", {}, profile=params)
    assert res.rank_end_ns[0] == pytest.approx(1_000 + 10_000 + O)
    prof.write_text(prof.read_text().replace("o_irecv = 1e-6", "o_irecv = -1e-6"))
    with pytest.raises(replay.ParamError, match="p.toml.*o_irecv"):
        replay.models.load_profile(prof, model)


def test_hockney_has_no_call_overheads():
    assert replay.models.get_model("hockney").call_costs({}) is None
    table = replay.models.get_model("loggp").call_costs(
        {"o_irecv": 1.0, "o_wait": 2.0, "o_probe": 3.0, "o_call": 4.0})
    assert np.array_equal(table, [0, 1, 2, 3, 4])


def test_a_sendrecv_is_one_call_whatever_its_null_halves(tmp_path):
    """Rule sendrecv_one_call: a Sendrecv's half to or from MPI_PROC_NULL costs nothing of its
    own where the other half moves a message (whose o is the call's), and a Sendrecv with both
    halves null costs o_call once, not once per half."""
    N = S_NULL
    prep = _prep(tmp_path, [[("sendrecv", 1, 8, N), ("sendrecv", N, 8, N)],
                            [("sendrecv", N, 8, 0)]])
    # rank 0: its send's o, then one o_call; rank 1: receives the message as a Recv would
    assert _ends(prep) == pytest.approx([O, ARRIVE + O])
    assert _ends(prep, o_call="5us") == pytest.approx([O + 5_000, ARRIVE + O])
    st = prep.stream(True)
    cls = S.call_classes(st, prep.rows.op)
    assert sorted(cls.tolist()) == sorted([S.CALL_OTHER] + [S.CALL_NONE] * (st.nops - 1))
