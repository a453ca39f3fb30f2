"""Rule ``transport_burst_cost``: the transport's cost in the program's compute bursts.

A program's compute between two MPI calls runs longer than the same compute with no call between,
by an amount that depends on the transport the calls went through: `hindsight calibrate`'s burst
probe (replay/calibration/bursts.py) measures, per transport T, the extra CPU time e_T(b) that a
burst of length b takes between 8-byte exchanges, at a few lengths b_1 < ... < b_n (the profile's
``[compute]`` section: ``burst_s``, ``extra_s``). A trace taken on transport A carries e_A in
every burst that follows a call; replayed as a run on transport B, that burst takes

    b' = max(0, b − e_A(b) + e_B(b))

    e_T(b) = the straight line through (0, 0), (b_1, e_1), ..., (b_n, e_n) for b <= b_n,
             e_n for b > b_n (the extra time of a long burst is bounded: what the calls
             disturbed is caught up within the burst)

The first burst of each rank (before its first call) and the trailing burst after its last call
are kept: no call precedes the one, the other is outside the calls' reach by the same bound. The
rule applies only when the profiles of both networks are known (``hindsight replay
--trace-profile``, or `hindsight validate`'s cross-network predictions, which have both) and
each has a ``[compute]`` section; same-network replays never change a burst. Evidence and
limits: docs/replay.md, "The transport's cost in the bursts".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from replay.profile import ProfileError

NAME = "transport_burst_cost"


@dataclass(frozen=True)
class BurstCurve:
    """e_T at the measured burst lengths of one transport (seconds; lengths increasing)."""
    transport: str
    burst_s: tuple[float, ...]
    extra_s: tuple[float, ...]

    def extra_ns(self, burst_ns: np.ndarray) -> np.ndarray:
        """e_T(b) for bursts b in ns (formula in the module docstring)."""
        xs = np.concatenate(([0.0], np.asarray(self.burst_s) * 1e9))
        ys = np.concatenate(([0.0], np.asarray(self.extra_s) * 1e9))
        return np.interp(np.asarray(burst_ns, np.float64), xs, ys)


def burst_curve(profile: Mapping[str, Any] | None, where: str = "profile") -> BurstCurve | None:
    """The ``[compute]`` curve of a calibration profile, None where it has none (profiles made
    before the burst probe). A malformed section is a ProfileError naming ``where``."""
    if not profile or "compute" not in profile:
        return None
    sec = profile["compute"]
    b, e = sec.get("burst_s"), sec.get("extra_s")
    ok = (isinstance(b, list) and isinstance(e, list) and len(b) == len(e) >= 1
          and all(isinstance(x, (int, float)) and math.isfinite(x) and x >= 0 for x in b + e)
          and all(x < y for x, y in zip(b, b[1:])) and b[0] > 0)
    if not ok:
        raise ProfileError(f"{where}: [compute] needs burst_s (increasing, > 0) and extra_s "
                         "(>= 0), lists of one length")
    transport = str((profile.get("measured_on") or {}).get("transport", "?"))
    return BurstCurve(transport, tuple(map(float, b)), tuple(map(float, e)))


@dataclass(frozen=True)
class TransportCost:
    """The rule's two curves: the trace's transport (``source``) and the replayed one's."""
    source: BurstCurve
    target: BurstCurve

    def apply(self, burst_ns: np.ndarray, first: np.ndarray) -> np.ndarray:
        """b' per burst (ns); ``first`` marks the bursts that precede a rank's first call,
        which are kept."""
        b = np.asarray(burst_ns, np.float64)
        out = np.maximum(b - self.source.extra_ns(b) + self.target.extra_ns(b), 0.0)
        out[first] = b[first]
        return out


def transport_cost(source_profile: Mapping[str, Any] | None,
                   target_profile: Mapping[str, Any] | None,
                   where: str = "--trace-profile") -> TransportCost | None:
    """The rule for a trace taken where ``source_profile`` was measured, replayed with
    ``target_profile``; None when either has no curve or both were measured on one transport
    (nothing to change)."""
    a = burst_curve(source_profile, where)
    b = burst_curve(target_profile, "--profile")
    if a is None or b is None or a.transport == b.transport:
        return None
    return TransportCost(a, b)
