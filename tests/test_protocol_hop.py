"""The library's own work per protocol hop (loggps ``o_hop``; ``replay.rules.protocol_hop``): a
hop the library makes on its own (a rendezvous's clear to send and data) takes
H = max(L, 0) + o_hop. Hand-computed replays for both signs of L, eager messages unchanged, the
calibration's fit of the step at S, and the profile's value read by the model.

A 1000-byte Send from rank 0 to rank 1 above S = 512 B, the receive posted at 0 (rank 1 starts
in its Recv), o = 0.3 us, G = g = 0, progress async (us):

* L = 1, o_hop = 2: H = 3. The request arrives at 0.3 + 1 = 1.3 (ready); the send completes at
  ready + H = 4.3; the data arrives at ready + 2H = 7.3, the receive completes at 7.6.
  Without o_hop: H = 1, send 2.3, receive 1.3 + 2 + 0.3 = 3.6.
* L = -0.2, o_hop = 2: H = 2. Send: 0.3 - 0.2 + 2 = 2.1; arrival 0.3 - 0.2 + 4 = 4.1, receive
  4.4. Without o_hop: H = 0, send 0.1, receive 0.4.
"""

from __future__ import annotations

import numpy as np
import pytest

import replay
from replay import models as M
from replay.calibration import fit as F
from synthetic import simulate_to_dir

BASE = {"o": "300ns", "G": "0", "g": "0", "S": "512B", "progress": "async"}
RDV = [[("send", 1, 1000)], [("recv", 0)]]


def _ends(tmp_path, progs, name, **sets):
    prep = replay.prepare(simulate_to_dir(tmp_path / name, progs), use_cache=False)
    r = replay.run(prep, "loggps", {**BASE, **sets}, record=True)
    return [round(x) for x in r.rank_end_ns]


@pytest.mark.parametrize("L, o_hop, ends", [
    ("1us", "2us", [4300, 7600]), ("1us", "0", [2300, 3600]),
    ("-200ns", "2us", [2100, 4400]), ("-200ns", "0", [100, 400])])
def test_rendezvous_hops_take_latency_plus_the_librarys_work(tmp_path, L, o_hop, ends):
    assert _ends(tmp_path, RDV, "t", L=L, o_hop=o_hop) == ends


def test_eager_messages_take_no_hop(tmp_path):
    eager = [[("send", 1, 100)], [("recv", 0)]]
    # 0.3 + 1 + 0.3 = 1.6 us whatever o_hop
    assert _ends(tmp_path, eager, "a", L="1us", o_hop="5us") == [300, 1600]
    assert _ends(tmp_path, eager, "b", L="1us") == [300, 1600]


def test_the_fit_measures_half_the_step_at_S():
    k = np.array([1, 64, 512, 4096, 8192, 16384, 65536, 1 << 20], float)
    true = {"L": -1e-6, "o_send": 3e-6, "o_recv": 2e-6, "O_send": 0.0, "O_recv": 0.0, "O": 0.0,
            "G": 1e-10, "S": 4096.0, "o_hop": 2.5e-6}
    t = F.loggps_one_way(k, true)
    # the step is 2·(max(L, 0) + o_hop) = 5 us above S, none below
    assert t[4] - t[3] == pytest.approx(5e-6 + 4096 * 1e-10, rel=1e-6)
    o_hop, notes = F.fit_hop(k, t, {**true, "o_hop": 0.0})
    assert o_hop == pytest.approx(2.5e-6, rel=1e-6) and notes == []
    # a one-way time that falls at S: no negative work, and it is said
    o_hop, notes = F.fit_hop(k, t - np.where(k > 4096, 8e-6, 0.0), {**true, "o_hop": 0.0})
    assert o_hop == 0.0 and "o_hop set to 0" in notes[0]
    # no size above S (S = inf): nothing to measure
    assert F.fit_hop(k, t, {**true, "S": np.inf}) == (0.0, [])
    # the whole fit recovers it from one-way times and overheads
    fit = F.fit_loggps(k, t, np.full(len(k), 3e-6), np.full(len(k), 2e-6), 0.0, S=4096.0)
    assert fit.params["o_hop"] == pytest.approx(2.5e-6, rel=0.05)
    assert max(abs(r) for r in fit.residuals) < 0.02


def test_the_committed_tcp_profile_carries_it(tmp_path):
    """calibrate's fit on the committed TCP profile's own one-way times: the step at S = 128 B
    is about 8.5 us here, o_hop half of it; the model then meets the sizes above S."""
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "docs" / "calibration" / "tcp.toml"
    p = M.load_profile(path, M.get_model("loggps"))
    assert 1e-6 < p["o_hop"] < 20e-6
    assert "o_hop" not in M.load_profile(path, M.get_model("loggopsim"))
    with pytest.raises(M.ParamError, match="o_hop"):
        M.resolve(M.get_model("loggopsim"), [("o_hop", "1us")], {})
