"""Hand-computed replays of the progress rule (``progress = "in-call"`` of LogGPS): a rendezvous
handshake happens only while the receiver is inside an MPI call (replay.rules.handshake_time).

Every case uses L = 2 us, o = 300 ns, G = 0.5 ns/B, g = 0, S = 512 B and a 1000-byte rendezvous
message (so its wire time is (k - 1)·G = 499.5 ns); small messages are 8 bytes, eager. The traces
are simulated (tests/synthetic.py), so each rank's compute bursts are exactly the programs'."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import hindsight.cli
import replay
from synthetic import simulate_to_dir

L, O, G, K = 2000.0, 300.0, 0.5, 1000
WIRE = (K - 1) * G
SETS = {"L": "2us", "o": "300ns", "G": "0.5ns", "g": "0", "S": "512B"}


def _prep(tmp_path, progs, name="t"):
    return replay.prepare(simulate_to_dir(tmp_path / name, progs), use_cache=False)


def _both(prep, record=True):
    a = replay.run(prep, "loggps", SETS, record=record)
    b = replay.run(prep, "loggps", dict(SETS, progress="in-call"), record=record)
    return a, b


def test_receiver_computing_delays_the_handshake_to_its_wait(tmp_path):
    # rank 1 posts its Irecv at 0 and computes 100 us; rank 0 Isends at 10 us. The request
    # arrives at 10 us + o + L = 12.3 us, while rank 1 computes: in-call, rank 1 answers when it
    # enters its Wait at 100 us.
    progs = [[("compute", 10_000), ("isend", 1, K), ("wait", [0])],
             [("irecv", 0), ("compute", 100_000), ("wait", [0])]]
    asy, inc = _both(_prep(tmp_path, progs))
    # async (LogGPS): the handshake at the request's arrival
    assert asy.rank_end_ns[0] == pytest.approx(10_000 + O + 2 * L + WIRE)
    assert asy.rank_end_ns[1] == pytest.approx(100_000 + O)
    # in-call: clear to send at 100 us + L, the data then leaves; it arrives 2L + wire after
    h = 100_000.0
    assert inc.rank_end_ns[0] == pytest.approx(h + L + WIRE)
    assert inc.rank_end_ns[1] == pytest.approx(h + 2 * L + WIRE + O)


def test_request_waiting_at_the_post_is_answered_there(tmp_path):
    # the receive is posted after the request arrived: the posting call answers it, as in async
    progs = [[("isend", 1, K), ("wait", [0])],
             [("compute", 50_000), ("irecv", 0), ("compute", 100_000), ("wait", [0])]]
    asy, inc = _both(_prep(tmp_path, progs))
    assert inc.rank_end_ns.tolist() == pytest.approx(asy.rank_end_ns.tolist())
    assert inc.rank_end_ns[0] == pytest.approx(50_000 + L + WIRE)


def test_first_call_after_the_request_is_found_in_the_receivers_past(tmp_path):
    # rank 0 posts its Irecv, blocks in a Recv from rank 2 (which sends at once), computes
    # 100 us, Recvs again from rank 2 (sent at 300 us), then Waits. Rank 1's request (sent at
    # 50 us) arrives while rank 0 computes; rank 0's next call is the second Recv, entered at
    # e2 + 100 us. The kernel learns that only after rank 0 ran past it (rank 1 waits for it).
    e2 = O + L + 7 * G + O             # the first small message received (sent at 0)
    progs = [[("irecv", 1), ("recv", 2), ("compute", 100_000), ("recv", 2), ("wait", [0])],
             [("compute", 50_000), ("isend", 0, K), ("wait", [0])],
             [("send", 0, 8), ("compute", 300_000), ("send", 0, 8)]]
    asy, inc = _both(_prep(tmp_path, progs))
    h = e2 + 100_000
    assert inc.rank_end_ns[1] == pytest.approx(h + L + WIRE)
    assert asy.rank_end_ns[1] == pytest.approx(50_000 + O + 2 * L + WIRE)


def test_a_receiver_blocking_after_the_request_answers_at_its_call(tmp_path):
    # as above, but rank 2's second send waits for a message from rank 1, sent after rank 1's
    # Wait: rank 0 blocks in its second Recv (entered at e2 + 100 us, after the request) before
    # the kernel knows when it ends; the handshake is at that call's start.
    e2 = O + L + 7 * G + O
    progs = [[("irecv", 1), ("recv", 2), ("compute", 100_000), ("recv", 2), ("wait", [0])],
             [("compute", 50_000), ("isend", 0, K), ("wait", [0]), ("send", 2, 8)],
             [("send", 0, 8), ("recv", 1), ("send", 0, 8)]]
    _, inc = _both(_prep(tmp_path, progs))
    h = e2 + 100_000
    w = h + L + WIRE                   # rank 1's Wait ends, then it sends to rank 2
    assert inc.rank_end_ns[1] == pytest.approx(w + O)
    rank2 = w + O + L + 7 * G + O      # rank 2 receives it ...
    assert inc.rank_end_ns[2] == pytest.approx(rank2 + O)  # ... and sends on


def test_receiver_blocked_on_the_sender_gets_the_request_in_its_call(tmp_path):
    # rank 0 posts an Irecv for a large message, then a blocking Recv of a small one that rank 1
    # sends only after its large send completed. Neither can go on in the kernel until the
    # handshake is known; rank 0 is inside its Recv the whole time, so the handshake is at the
    # request's arrival, as in async (no "replay deadlock").
    progs = [[("irecv", 1, 0), ("recv", 1, 1), ("wait", [0])],
             [("compute", 10_000), ("isend", 0, K, 0), ("wait", [0]), ("send", 0, 8, 1)]]
    asy, inc = _both(_prep(tmp_path, progs))
    assert inc.rank_end_ns.tolist() == pytest.approx(asy.rank_end_ns.tolist())
    assert inc.rank_end_ns[1] == pytest.approx(10_000 + O + 2 * L + WIRE + O)


def test_without_per_event_records_the_same_times(tmp_path):
    # sweeps replay with record=False: the rule must not depend on the per-event outputs
    progs = [[("irecv", 1), ("recv", 2), ("compute", 100_000), ("recv", 2), ("wait", [0])],
             [("compute", 50_000), ("isend", 0, K), ("wait", [0]), ("send", 2, 8)],
             [("send", 0, 8), ("recv", 1), ("send", 0, 8)]]
    prep = _prep(tmp_path, progs)
    _, rec = _both(prep)
    _, fast = _both(prep, record=False)
    assert fast.rank_end_ns.tolist() == rec.rank_end_ns.tolist()


def test_blocking_send_to_self_and_eager_messages_are_unchanged(tmp_path):
    progs = [[("irecv", 0), ("isend", 0, K), ("compute", 20_000), ("wait", [0, 1]),
              ("send", 1, 8), ("compute", 5_000), ("send", 1, 8)],
             [("compute", 40_000), ("recv", 0), ("compute", 40_000), ("recv", 0)]]
    asy, inc = _both(_prep(tmp_path, progs))
    # rank 0's request to itself arrives at o + L = 2.3 us while it computes: async, the data
    # is in long before its Waitall (entered at o + 20 us), which takes o_r; in-call the
    # Waitall answers it, and the data arrives 2L + wire later
    assert inc.rank_end_ns[0] - asy.rank_end_ns[0] == pytest.approx(2 * L + WIRE)
    assert inc.rank_end_ns[1] == pytest.approx(asy.rank_end_ns[1])  # eager: no handshake


def test_profile_progress_is_read_and_checked(tmp_path):
    progs = [[("compute", 10_000), ("isend", 1, K), ("wait", [0])],
             [("irecv", 0), ("compute", 100_000), ("wait", [0])]]
    trace = simulate_to_dir(tmp_path / "t", progs)
    body = ('format = "hindsight-profile/1"\n[measured_on]\nranks = 2\n[loggps]\n'
            'L = 2e-6\no_send = 3e-7\no_recv = 3e-7\ng = 0.0\nG = 5e-10\nO = 0.0\no_b = 0.0\n'
            'S = 512\nprogress = "{}"\n')
    prof = tmp_path / "p.toml"
    prof.write_text(body.format("in-call"))
    r = CliRunner().invoke(hindsight.cli.main, ["replay", str(trace), "--model", "loggps",
                                                "--profile", str(prof), "--json"])
    assert r.exit_code == 0, r.output
    assert '"progress": "in-call"' in r.output
    assert replay.run(replay.prepare(trace, use_cache=False), "loggps", {},
                      profile=replay.models.load_profile(
                          prof, replay.models.get_model("loggps"))).rank_end_ns[0] == \
        pytest.approx(100_000 + L + WIRE)
    prof.write_text(body.format("sometimes"))
    r = CliRunner().invoke(hindsight.cli.main, ["replay", str(trace), "--model", "loggps",
                                                "--profile", str(prof)])
    assert r.exit_code != 0 and r.output.count("Error:") == 1
    assert "p.toml" in r.output and "progress" in r.output
    r = CliRunner().invoke(hindsight.cli.main, ["replay", str(trace), "--model", "loggps",
                                                "--set", "progress=never"])
    assert r.exit_code == 2 and "progress" in r.output


def test_kernel_names_the_rules_it_was_compiled_with():
    # numba's on-disk cache watches replay/kernel.py only; RULES_SHA1 there ties it to the rules
    import hashlib
    from pathlib import Path

    from replay import kernel
    rules = Path(kernel.__file__).with_name("rules.py").read_bytes()
    assert hashlib.sha1(rules).hexdigest()[:12] == kernel.RULES_SHA1, \
        "replay/rules.py changed: set RULES_SHA1 in replay/kernel.py to its new sha1[:12]"


def test_models_without_the_rule_refuse_it(tmp_path):
    # LogGOPSim's simulator has no progress rule or per-call overheads: setting them is refused,
    # and a calibrated profile's values are not shown as if they took part
    progs = [[("compute", 10_000), ("isend", 1, K), ("wait", [0])],
             [("irecv", 0), ("compute", 100_000), ("wait", [0])]]
    prep = replay.prepare(simulate_to_dir(tmp_path / "t", progs), use_cache=False)
    for name in ("progress", "o_irecv"):
        with pytest.raises(replay.ParamError, match=name):
            replay.run(prep, "loggopsim", {name: "in-call" if name == "progress" else "1us"})
    from validation.profiles import replay_params
    flat = {"loggps": {"L": 2e-6, "o_send": 3e-7, "o_recv": 3e-7, "g": 0.0, "G": 5e-10,
                       "S": 512, "progress": "in-call", "o_irecv": 1e-6}}
    assert "progress" not in replay_params("loggp", flat) and "S" not in replay_params(
        "loggp", flat)
    assert "o_irecv" in replay_params("loggp", flat)
    assert set(replay_params("loggopsim", flat)) == {"L", "o_send", "o_recv", "g", "G", "S"}
