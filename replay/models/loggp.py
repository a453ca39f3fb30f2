"""LogGP (Alexandrov et al. 1995) with the P-dependent overhead of paper 004 (Mizutani et al.).

A message of k bytes from p to q, sender entering the send at t::

    send CPU overhead   o_s(k) = o_send + o_b_send·P + O_send·k        (paper 004 §3: o = o'_a + o'_b·P + O·k)
    recv CPU overhead   o_r(k) = o_recv + o_b_recv·P + O_recv·k
    injection start     t_s = max(t, NIC of p free)                     NIC then busy g + (k-1)·G
    arrival at q        a = t_s + o_s(k) + L + (k-1)·G                  (LogGP: o + (k-1)G + L + o end to end)
    receive completes   max(receive posted, a, receive NIC free) + o_r(k); receive NIC then busy g

L may be negative, down to -o_s (at P = 2): calibrate measures one-way times below o_s + o_r on every
MPI path here (the sender's call returns after its data is already at the receiver, the
receiver's call spends part of its o_r before looking for it), and L = T(1) - o_s - o_r is then
what makes the model give the measured one-way time. The hops the library makes on its own (a
rendezvous's clear to send and data) take max(L, 0) (``replay.rules.protocol_hop``; ``loggps``
adds the library's own work per hop, o_hop).

Blocking and non-blocking sends return after o_s(k). Everything is eager (no rendezvous); see
``loggps`` for the synchronising variant. Paper 004 Table 2 (MPICH over Fast Ethernet):
L = 50 us, G = 0.0268 us/byte, o = 12.1 + 0.182·P + 0.0708·k us.

The program's calls that move no message of their own cost what the library spends in them
(``hindsight calibrate`` measures each; 0 unless set): posting an ``Irecv`` o_irecv (the receive
is posted at its end), a ``Wait``/``Test`` completing a send o_wait per request, a ``Probe``
o_probe (it returns no earlier than the call's start + o_probe), any other traced call
(``Iprobe``, a ``Test`` that completed nothing) o_call. Each is paid when the call starts, before
the rules above (a Wait that completes a receive pays o_r(k); a collective's own messages pay
o_s and o_r). LogP counts only per-message overheads; this adds the per-call cost that
PLogP-style measurements of a real library show (Kielmann et al. 2000).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from replay.models.base import GAMMA, NetworkModel, Param, ParamError, profile_section, register


#: the per-call overheads a profile's [loggps] section may carry (seconds)
CALL_OVERHEADS = ("o_irecv", "o_wait", "o_probe", "o_call")
#: rule ``unexpected_copy`` (loggps): u(k) = o_unexpected + O_unexpected·k
UNEXPECTED = ("o_unexpected", "O_unexpected")
#: the other keys of a calibrated profile's [loggps] section (``from_profile`` reads them where
#: present; o_a, the overhead's constant part, is there for the record: o_send and o_recv
#: hold it)
SECTION_KEYS = ("O_send", "O_recv", "o_a", "progress", "o_hop", "ack_cells", *CALL_OVERHEADS,
                *UNEXPECTED)


@register
class LogGP(NetworkModel):
    NAME = "loggp"
    PARAMS: dict[str, Param] = {
        "L": Param("time", "1us", "latency; may be negative down to -o_s (the data is at "
                   "the receiver before the send call returns)", minimum=-math.inf),
        "o_send": Param("time", "0.5us", "send overhead o'_a (per message)"),
        "o_recv": Param("time", "0.5us", "receive overhead o'_a (per message)"),
        "o_b_send": Param("time", 0.0, "send overhead per process o'_b (paper 004)"),
        "o_b_recv": Param("time", 0.0, "receive overhead per process o'_b (paper 004)"),
        "O_send": Param("time_per_byte", 0.0, "send overhead per byte O"),
        "O_recv": Param("time_per_byte", 0.0, "receive overhead per byte O"),
        "g": Param("time", 0.0, "gap between consecutive messages of one NIC"),
        "G": Param("time_per_byte", "0.1ns", "gap per byte (inverse bandwidth)"),
        "o_irecv": Param("time", 0.0, "overhead of posting an Irecv (the call, nothing moves)"),
        "o_wait": Param("time", 0.0, "overhead of a Wait/Test per send request it completes"),
        "o_probe": Param("time", 0.0, "overhead of a Probe, the message being there"),
        "o_call": Param("time", 0.0, "overhead of any other traced call (Iprobe, an empty Test)"),
        "gamma": GAMMA,
    }
    ALIASES = {"o": ("o_send", "o_recv"), "o_b": ("o_b_send", "o_b_recv"),
               "O": ("O_send", "O_recv"), "o_a": ("o_send", "o_recv")}

    def kernel_params(self, v: dict, ctx) -> np.ndarray:
        from replay import kernel as K
        return K.make_params(os0=v["o_send"], osP=v["o_b_send"], Os=v["O_send"], or0=v["o_recv"],
                             orP=v["o_b_recv"], Or=v["O_recv"], L=v["L"], G=v["G"], gap=v["g"],
                             S=v.get("S", math.inf), kshift=1.0, P=float(ctx.nranks),
                             progress=K.PROGRESS_IN_CALL if v.get("progress") == "in-call"
                             else K.PROGRESS_ASYNC,
                             ou=v.get("o_unexpected", 0.0), Ou=v.get("O_unexpected", 0.0),
                             o_hop=v.get("o_hop", 0.0), gamma=v["gamma"])

    def check(self, v: dict) -> None:
        # o_s at the fewest ranks that send messages (P = 2); o_b >= 0 only makes it larger
        o_s2 = v["o_send"] + 2.0 * v["o_b_send"]
        if v["L"] < -o_s2:
            raise ParamError(f"L={v['L']:g} ns: a message cannot arrive before its send began "
                             f"(L >= -(o_send + 2·o_b_send) = {-o_s2:g} ns)")

    def call_costs(self, v: dict) -> np.ndarray:
        """Per call class (``replay.stream.CALL_*``): none, Irecv, Wait on a send, Probe,
        other. The sends and receives themselves pay o_s(k) and o_r(k)."""
        return np.array([0.0, v["o_irecv"], v["o_wait"], v["o_probe"], v["o_call"]])

    def from_profile(self, data: dict, path: Path) -> dict:
        """The profile's [loggps] section. Its o_send/o_recv are the overheads measured with
        ``measured_on.ranks`` ranks; the model adds o_b·P itself (paper 004: o = o'_a + o'_b·P +
        O·k), so o_b·ranks is taken off here."""
        sec = profile_section(data, path, "loggps",
                              ("L", "o_send", "o_recv", "g", "G", "O", "o_b", "S"), SECTION_KEYS)
        ranks = (data.get("measured_on") or {}).get("ranks")
        p_cal = float(ranks) if isinstance(ranks, (int, float)) and ranks > 0 else 2.0
        o_b = float(sec["o_b"])
        # o_b·P_cal may exceed a side's measured overhead (o_a < 0, a fit over few P): then that
        # side grows by what it has, so the overhead at P_cal stays the measured one.
        o_b_s = min(o_b, float(sec["o_send"]) / p_cal)
        o_b_r = min(o_b, float(sec["o_recv"]) / p_cal)
        # per-side per-byte overheads where the profile has them, else the shared O
        O_s, O_r = sec.get("O_send", sec["O"]), sec.get("O_recv", sec["O"])
        out = {"L": sec["L"], "g": sec["g"], "G": sec["G"], "O_send": O_s, "O_recv": O_r,
               "o_b_send": o_b_s, "o_b_recv": o_b_r,
               "o_send": float(sec["o_send"]) - o_b_s * p_cal,
               "o_recv": float(sec["o_recv"]) - o_b_r * p_cal}
        if "S" in self.PARAMS:
            out["S"] = sec["S"]
        for name in CALL_OVERHEADS:                 # measured by calibrate's call probe
            if name in sec:
                out[name] = sec[name]
        if "progress" in self.PARAMS and "progress" in sec:
            out["progress"] = sec["progress"]       # measured by calibrate's progress probe
        if "o_hop" in self.PARAMS and "o_hop" in sec:
            out["o_hop"] = sec["o_hop"]             # calibrate's fit of the step at S
        if "ack_cells" in self.PARAMS and "ack_cells" in sec:
            out["ack_cells"] = sec["ack_cells"]     # measured by calibrate's queue probe
        for name in UNEXPECTED:                     # measured by calibrate's unexpected probe
            if name in self.PARAMS and name in sec:
                out[name] = sec[name]
        return out
