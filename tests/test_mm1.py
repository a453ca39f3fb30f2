"""M/M/1 with measured utilisation over windows that match the traffic, and a saturated link
(rho >= 1: no steady state) refused, or capped and labelled as not a prediction."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

import replay
from replay.models.mm1 import SaturationError
from synthetic import simulate_to_dir

C = 0.0125        # bytes/ns: 100 Mbit/s
MIB = 1 << 20
S = MIB / C       # one MiB on the wire: 83.9 ms
TAU = 5000.0      # ns per stage
# one rank per host, every host on one leaf: a message crosses only its receiver's leaf -> host link
NET = {"C": "100Mbit/s", "tau": "5us", "ranks_per_host": "1", "hosts_per_leaf": "16",
       "spines": "1", "leaves": "1", "rho": "measured"}


def _prep(tmp_path, progs, name="t"):
    return replay.prepare(simulate_to_dir(tmp_path / name, progs), use_cache=False)


def _incast(n):
    """``n`` ranks send one MiB each to rank 0 at the same moment."""
    return [[("recv", r) for r in range(1, n + 1)]] + [[("send", 0, MIB)] for _ in range(n)]


def test_a_lone_large_message_sees_an_idle_link(tmp_path):
    # 84 ms on the wire against a 10 us window: the message itself is not its link's load
    prep = _prep(tmp_path, [[("send", 1, MIB)], [("recv", 0)]])
    res = replay.run(prep, "mm1", NET, compute_scale=0.0)
    assert res.info["max_rho"] == 0.0 and res.info["saturated_messages"] == 0
    assert res.makespan_ns == pytest.approx(S + TAU, rel=1e-12)   # zero load: k/C + tau
    assert "not_a_prediction" not in res.summary()


def test_two_messages_sent_together_read_a_quarter(tmp_path):
    # the window is 4 service times: the other message's whole transmission fills a quarter
    res = replay.run(_prep(tmp_path, _incast(2)), "mm1", NET, compute_scale=0.0)
    assert res.info["max_rho"] == pytest.approx(0.25, rel=1e-9)
    assert res.makespan_ns == pytest.approx(S / (1 - 0.25) + TAU, rel=1e-9)


def test_a_link_busy_half_the_time_reads_half(tmp_path):
    # Rank 2 (host 2) streams 10 ms transfers every 20 ms into host 0's link; rank 3 sends one
    # small probe at 300 ms into the same link (to rank 1 on host 0). Over a 200 ms window the
    # stream keeps the link busy exactly half the time: the probe is delayed by s / (1 - 0.5).
    period, k = 20_000_000, 125_000                   # 125 kB at 100 Mbit/s: 10 ms
    progs = [[("recv", 2) for _ in range(30)], [("recv", 3)],
             [x for _ in range(30) for x in (("compute", period), ("send", 0, k))],
             [("compute", 300_000_000), ("send", 1, 1000)]]
    prep = replay.prepare(simulate_to_dir(tmp_path / "t", progs), use_cache=False)
    res = replay.run(prep, "mm1", dict(NET, ranks_per_host="2", window="200ms"))
    s_probe = 1000 / C
    assert res.rank_end_ns[1] - 300e6 == pytest.approx(s_probe / (1 - 0.5) + TAU, rel=1e-6)
    assert res.info["saturated_messages"] == 0


def test_a_flood_beyond_capacity_is_refused(tmp_path):
    # eight MiB messages at once into one link: over 4 service times the others need 7
    prep = _prep(tmp_path, _incast(8))
    with pytest.raises(SaturationError, match=r"8 messages cross a link with rho >= 1 "
                       r"\(max rho 1\.75.*premise fails, so there is no prediction"):
        replay.run(prep, "mm1", NET, compute_scale=0.0)
    assert issubclass(SaturationError, replay.ReplayError)


def test_analytic_saturation_is_refused_too(tmp_path):
    prep = _prep(tmp_path, [[("send", 1, 10**6)], [("recv", 0)]])
    with pytest.raises(SaturationError, match="analytic rho"):
        replay.run(prep, "mm1", {"C": "1Gbit/s", "Tcomp": "1us"}, compute_scale=0.0)


def test_saturation_cap_gives_the_capped_number_labelled(tmp_path):
    prep = _prep(tmp_path, _incast(8))
    res = replay.run(prep, "mm1", dict(NET, saturation="cap"), compute_scale=0.0)
    # every message: s / (1 - rho_max) + tau, all sent at time 0
    assert res.makespan_ns == pytest.approx(S / (1 - 0.99) + TAU, rel=1e-9)
    doc = res.summary()
    assert doc["saturated_messages"] == 8 and doc["max_rho"] == pytest.approx(1.75)
    assert "not a prediction" in doc["not_a_prediction"]


def test_cli_refuses_in_one_line_and_labels_the_capped_number(tmp_path):
    import hindsight.cli

    trace = simulate_to_dir(tmp_path / "t", _incast(8))
    sets = [a for k, v in NET.items() for a in ("--set", f"{k}={v}")]
    r = CliRunner().invoke(hindsight.cli.main, ["replay", str(trace), "--model", "mm1", *sets])
    assert r.exit_code == 1
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: M/M/1: 8 messages")
    assert "no prediction" in lines[0]
    capped = [*sets, "--set", "saturation=cap"]
    r = CliRunner().invoke(hindsight.cli.main, ["replay", str(trace), "--model", "mm1", *capped])
    assert r.exit_code == 0
    assert any(ln.startswith("saturation ") and "not a prediction" in ln
               for ln in r.output.splitlines())
    r = CliRunner().invoke(hindsight.cli.main,
                           ["replay", str(trace), "--model", "mm1", *capped, "--json"])
    assert r.exit_code == 0 and "not a prediction" in json.loads(r.output)["not_a_prediction"]


def test_validate_records_no_prediction_for_a_saturated_model(tmp_path):
    from validation.matrix import replay_predictions

    trace = simulate_to_dir(tmp_path / "t", _incast(8))
    spec = SimpleNamespace(replay=["mm1"], replay_set={"mm1": [f"{k}={v}" for k, v in
                                                              NET.items()]})
    pred = replay_predictions(trace, {"makespan_ns": 0}, {}, spec)[0]
    assert math.isnan(pred["predicted_s"]) and "premise fails" in pred["note"]


def test_sweep_records_a_saturated_configuration_as_failed(tmp_path):
    prep = _prep(tmp_path, _incast(8))
    base = [(k, v) for k, v in NET.items()]
    df = replay.sweep(prep, "mm1", base, ["window=10us,10s"], compute_scale=0.0, workers=1)
    short, long_ = df.iloc[0], df.iloc[1]
    assert math.isnan(short["predicted_makespan_s"]) and "premise fails" in short["failed"]
    # over 10 s the seven others fill 7 x 84 ms: rho = 0.0587, a prediction
    rho = 7 * S / 1e10
    assert long_["predicted_makespan_s"] == pytest.approx((S / (1 - rho) + TAU) / 1e9, rel=1e-6)
    assert not isinstance(long_["failed"], str)
