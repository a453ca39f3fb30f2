"""Measured: every message and collective keeps the time observed in the trace.

For a receive (or the Wait that completes an Irecv) that ended at E and whose send was posted at
s (both measured), the transfer time is lat = E - s. Replayed, the receive completes at::

    max(start' + min(d, lat), s' + lat)

where d is the call's measured duration and primes are replayed times. A collective member
completes at max(start' + min(d, lat), max over members of start' + lat) with lat = E - (latest
measured entry). Sends keep their measured duration; with ``S`` set, sends of more than S bytes
also wait for their receive to be posted (rendezvous), keeping E - (receive posted) likewise.

With the measured bursts (compute scale 1) every replayed time equals the measured one, which is
the engine's self-consistency check.
"""

from __future__ import annotations

import math

import numpy as np

from replay.models.base import NetworkModel, Param, register


@register
class Measured(NetworkModel):
    NAME = "measured"
    MODE = "measured"
    PARAMS: dict[str, Param] = {
        "S": Param("bytes", "inf", "sends above S bytes wait for the receive (rendezvous)",
                   allow_inf=True),
    }

    def kernel_params(self, v: dict, ctx) -> np.ndarray:
        from replay.kernel import make_params
        return make_params(S=v.get("S", math.inf), P=float(ctx.nranks))
