"""Hockney: a message of k bytes costs t = l + k·g (papers 001 t_s + m·t_w, 002 §4-5, 003).

The sender is occupied only by injection: consecutive messages of one rank leave k·g apart, the
receiver gets the message at t_send + l + k·g and the call returns then. There is no CPU
overhead and no rendezvous. Paper 002's exchange cost Ex = 2(l + K·g) is what two sequential
messages (a send, then the reply) cost a rank; the tests check it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from replay.models.base import GAMMA, NetworkModel, Param, profile_section, register


@register
class Hockney(NetworkModel):
    NAME = "hockney"
    PARAMS: dict[str, Param] = {
        "l": Param("time", "1us", "latency (start-up cost) per message"),
        "g": Param("time_per_byte", "0.1ns", "time per byte (inverse bandwidth)"),
        "gamma": GAMMA,
    }

    def kernel_params(self, v: dict, ctx) -> np.ndarray:
        from replay.kernel import make_params
        return make_params(os0=0.0, osP=0.0, Os=0.0, or0=0.0, orP=0.0, Or=0.0, L=v["l"],
                           G=v["g"], gap=0.0, S=float("inf"), kshift=0.0, P=float(ctx.nranks),
                           gamma=v["gamma"])

    def from_profile(self, data: dict, path: Path) -> dict:
        sec = profile_section(data, path, "hockney", ("l", "g"))
        return {"l": sec["l"], "g": sec["g"]}
