"""Rule ``transport_burst_cost``: the transport's cost in the program's compute bursts.

A program's compute between two MPI calls runs longer than the same compute with no call between,
by an amount that depends on the transport the calls went through and on the bytes they moved:
`hindsight calibrate`'s burst probe (replay/calibration/bursts.py) measures, per transport T,
the extra CPU time e_T(k, b) that a burst of length b takes between k-byte exchanges, at a few
lengths b_1 < ... < b_n and message sizes k_1 < ... < k_m (the profile's ``[compute]`` section:
``burst_s``, ``bytes``, ``extra_s`` with one row per message size; a section without ``bytes``
is one row measured with 8-byte exchanges). A trace taken on transport A carries e_A in every
burst that follows a call; replayed as a run on transport B, that burst takes

    b' = max(0, b − e_A(k, b) + e_B(k, b))      k: the largest message the call before the
                                                 burst moved (0 if none): the probe's k-byte
                                                 Sendrecv has k

    e_T(k_j, b) = the straight line through (0, 0), (b_1, e_j1), ..., (b_n, e_jn) for b <= b_n,
                  e_jn for b > b_n (the extra time of a long burst is bounded: what the calls
                  disturbed is caught up within the burst)
    e_T(k, b)   = linear in log2(k) between the two measured sizes around k; the smallest
                  size's row below k_1, the largest's above k_m

The first burst of each rank (before its first call) and the trailing burst after its last call
are kept: no call precedes the one, the other is outside the calls' reach by the same bound. The
rule applies only when the profiles of both networks are known (``hindsight replay
--trace-profile``, or `hindsight validate`'s cross-network predictions, which have both) and
each has a ``[compute]`` section; same-network replays never change a burst. Evidence and
limits: docs/replay.md, "The transport's cost in the bursts".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from replay.profile import ProfileError, is_number

NAME = "transport_burst_cost"
#: the message size of a ``[compute]`` section without ``bytes`` (the first probe's exchanges)
LEGACY_BYTES = 8


@dataclass(frozen=True)
class BurstCurve:
    """e_T at the measured burst lengths (seconds, increasing) and message sizes (bytes,
    increasing) of one transport: ``extra_s[j][i]`` after ``bytes[j]``-byte calls, for a burst
    of ``burst_s[i]``."""
    transport: str
    burst_s: tuple[float, ...]
    extra_s: tuple[tuple[float, ...], ...]
    bytes: tuple[int, ...] = (LEGACY_BYTES,)

    def extra_ns(self, burst_ns: np.ndarray, k: np.ndarray | None = None) -> np.ndarray:
        """e_T(k, b) for bursts b in ns after calls of k bytes (formula in the module
        docstring; k None: the smallest size's row)."""
        b = np.asarray(burst_ns, np.float64)
        xs = np.concatenate(([0.0], np.asarray(self.burst_s) * 1e9))
        rows = [np.interp(b, xs, np.concatenate(([0.0], np.asarray(r) * 1e9)))
                for r in self.extra_s]
        if len(rows) == 1 or k is None:
            return rows[0]
        lb = np.log2(np.asarray(self.bytes, np.float64))
        x = np.clip(np.log2(np.maximum(np.asarray(k, np.float64), 1.0)), lb[0], lb[-1])
        j = np.clip(np.searchsorted(lb, x, side="right") - 1, 0, len(lb) - 2)
        w = (x - lb[j]) / (lb[j + 1] - lb[j])
        v = np.stack(rows)
        cols = np.arange(len(b))
        return v[j, cols] * (1.0 - w) + v[j + 1, cols] * w


def burst_curve(profile: Mapping[str, Any] | None, where: str = "profile") -> BurstCurve | None:
    """The ``[compute]`` curve of a calibration profile, None where it has none (profiles made
    before the burst probe). A malformed section is a ProfileError naming ``where``."""
    if not profile or "compute" not in profile:
        return None
    sec = profile["compute"]
    b, e, k = sec.get("burst_s"), sec.get("extra_s"), sec.get("bytes")
    rows = e if k is not None else [e]
    sizes = k if k is not None else [LEGACY_BYTES]
    ok = (isinstance(b, list) and isinstance(rows, list) and isinstance(sizes, list)
          and len(b) >= 1 and len(rows) == len(sizes) >= 1
          and all(isinstance(r, list) and len(r) == len(b) for r in rows)
          and all(is_number(x) and x >= 0 for x in b + [y for r in rows for y in r])
          and all(x < y for x, y in zip(b, b[1:])) and b[0] > 0
          and all(is_number(x) and x >= 1 for x in sizes)
          and all(x < y for x, y in zip(sizes, sizes[1:])))
    if not ok:
        raise ProfileError(f"{where}: [compute] needs burst_s (increasing, > 0) and extra_s "
                           "(>= 0, a list as long as burst_s, or one such list per size of "
                           "bytes, increasing, >= 1)")
    transport = str((profile.get("measured_on") or {}).get("transport", "?"))
    return BurstCurve(transport, tuple(map(float, b)),
                      tuple(tuple(map(float, r)) for r in rows), tuple(int(x) for x in sizes))


@dataclass(frozen=True)
class TransportCost:
    """The rule's two curves: the trace's transport (``source``) and the replayed one's."""
    source: BurstCurve
    target: BurstCurve

    def apply(self, burst_ns: np.ndarray, first: np.ndarray,
              k: np.ndarray | None = None) -> np.ndarray:
        """b' per burst (ns); ``first`` marks the bursts that precede a rank's first call,
        which are kept; ``k`` the bytes of the call before each burst (None: the smallest
        measured size everywhere)."""
        b = np.asarray(burst_ns, np.float64)
        out = np.maximum(b - self.source.extra_ns(b, k) + self.target.extra_ns(b, k), 0.0)
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


def for_flags(trace_profile: Path, profile: Path | None, mod: Any) -> tuple[Any, str | None]:
    """``replay --trace-profile``: (rule transport_burst_cost from ``trace_profile`` to
    ``profile``, or None with the reason it does not apply); a flag that cannot be used is a
    UsageError, a profile that cannot be read a DataError."""
    from hindsight.errors import DataError, UsageError
    from replay.profile import read_any

    if profile is None:
        raise UsageError("--trace-profile: needs --profile (the network to predict)")
    if mod.OWN_SIMULATOR or mod.MODE == "measured":
        raise UsageError(f"--trace-profile: not available with model {mod.NAME}")
    try:
        docs = {}
        for flag, path in (("--trace-profile", trace_profile), ("--profile", profile)):
            kind, data = read_any(path)
            docs[flag] = data if kind == "toml" else {}
            burst_curve(docs[flag], f"{flag} {path}")
    except ProfileError as exc:
        raise DataError(str(exc)) from None
    src, dst = docs["--trace-profile"], docs["--profile"]
    for flag, d in (("--trace-profile", src), ("--profile", dst)):
        if "compute" not in d:
            return None, (f"{flag} has no [compute] section (calibrated before the burst "
                          "probe): bursts kept as measured")
    cost = transport_cost(src, dst)
    if cost is None:
        return None, "both profiles were measured on one transport: bursts kept as measured"
    return cost, None
