"""Rule ``resume_after_wait``: a burst of compute takes longer when the rank comes back to it
after a long time in MPI calls.

`hindsight calibrate`'s resume probe (replay/calibration/resume.py) measures on the machine the
extra CPU time w(b, d) of a burst of length b that starts d after the rank's previous burst
ended (d spent waiting in ``Recv`` for a late peer, or spinning), at a few lengths b_1 < ... <
b_n and times away d_1 < ... < d_m (the profile's ``[resume]`` section: ``burst_s``, ``away_s``,
``extra_s`` with one row per d). Every burst of a trace after the rank's first call holds
w(b, d) for the d of the traced run; replayed, it takes the w of the replayed run's d:

    b_w  = the warm burst: b_w + w_A(b_w, d_trace) = b       (w_A: the trace's machine)
    b'   = b_w + w_B(b_w, d_replay)                          (w_B: the replayed machine)

    w(b, d) = bilinear between the measured points and the origin (w(0, d) = w(b, 0) = 0),
              the last point's value beyond b_n or d_m (the extra time is bounded: what the
              time away disturbed is caught up within the burst, and after some tens of ms
              everything it could disturb is)
    d       = the time from the end of the rank's previous burst (its call's start) to the
              start of this one: in the trace from the rows' times, in the replay from the
              replayed times (the kernel, ``rules.resume_extra``); the rank's first call starts
              the clock

A replay on the traced network whose calls last as they did changes nothing; a trace taken on a
slow network, whose calls waited for milliseconds, replayed on a fast one loses what the waits
added to its bursts. w_A is w_B (the replayed profile's) unless ``--trace-profile`` names a
profile measured on other hosts with a section of its own. A rank's first burst stays as it is;
the measured model replays the measured bursts and the loggopsim model its own simulator, so
neither applies the rule. Evidence and limits: docs/replay.md, "Bursts
after a long wait".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from hindsight.jit import njit
from replay.profile import ProfileError, is_number
from replay.rules import resume_extra

NAME = "resume_after_wait"


@dataclass(frozen=True)
class ResumeCurve:
    """w at the measured burst lengths and times away (seconds, increasing):
    ``extra_s[j][i]`` for a burst of ``burst_s[i]`` after ``away_s[j]``."""
    burst_s: tuple[float, ...]
    away_s: tuple[float, ...]
    extra_s: tuple[tuple[float, ...], ...]

    def extra(self, b: float, d: float) -> float:
        """w(b, d) in seconds (the kernel's ``rules.resume_extra``, in numpy: along b per
        measured d, then along d)."""
        if b <= 0 or d <= 0:
            return 0.0
        xb = np.concatenate(([0.0], self.burst_s))
        per_d = [float(np.interp(b, xb, np.concatenate(([0.0], row)))) for row in self.extra_s]
        return float(np.interp(d, np.concatenate(([0.0], self.away_s)),
                               np.concatenate(([0.0], per_d))))

    def table(self) -> np.ndarray:
        """The kernel's flat table in ns (``rules.resume_extra``)."""
        w = np.asarray(self.extra_s, np.float64).ravel() * 1e9
        return np.concatenate(([len(self.burst_s), len(self.away_s)],
                               np.asarray(self.burst_s) * 1e9, np.asarray(self.away_s) * 1e9, w))


def resume_curve(profile: Mapping[str, Any] | None,
                 where: str = "profile") -> ResumeCurve | None:
    """The ``[resume]`` curve of a calibration profile, None where it has none (profiles made
    before the resume probe). A malformed section is a ProfileError naming ``where``."""
    if not profile or "resume" not in profile:
        return None
    sec = profile["resume"]
    b, d, e = (sec.get(k) if isinstance(sec, Mapping) else None
               for k in ("burst_s", "away_s", "extra_s"))
    ok = (isinstance(b, list) and isinstance(d, list) and isinstance(e, list)
          and len(b) >= 1 and len(d) >= 1 and len(e) == len(d)
          and all(isinstance(r, list) and len(r) == len(b) for r in e)
          and all(is_number(x) for x in b + d + [y for r in e for y in r])
          and all(x > 0 for x in b + d) and all(y >= 0 for r in e for y in r)
          and all(x < y for x, y in zip(b, b[1:])) and all(x < y for x, y in zip(d, d[1:])))
    if not ok:
        raise ProfileError(f"{where}: [resume] needs burst_s and away_s (> 0, increasing) and "
                           "extra_s (one list as long as burst_s per away_s, each >= 0)")
    return ResumeCurve(tuple(map(float, b)), tuple(map(float, d)),
                       tuple(tuple(map(float, r)) for r in e))


@dataclass(frozen=True)
class Resume:
    """The rule for one replay: the trace machine's curve (``source``) and the replayed
    one's (``target``)."""
    source: ResumeCurve
    target: ResumeCurve


def resume_rule(profile: Mapping[str, Any] | None,
                trace_profile: Mapping[str, Any] | None = None,
                where: str = "profile") -> Resume | None:
    """The rule under ``profile`` (None where it has no ``[resume]``); the trace's curve is
    ``trace_profile``'s only where that profile has one and was measured on other hosts."""
    target = resume_curve(profile, where)
    if target is None:
        return None
    source = target
    if trace_profile is not None and _hosts(trace_profile) != _hosts(profile):
        source = resume_curve(trace_profile, "--trace-profile") or target
    return Resume(source, target)


def _hosts(profile: Mapping[str, Any] | None) -> list[str]:
    return list((profile or {}).get("measured_on", {}).get("hosts", []))


def away_in_trace(rank_off: np.ndarray, burst: np.ndarray, op_row: np.ndarray,
                  t_start: np.ndarray, before: np.ndarray | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Per operation, the traced d of the burst before it (ns; 0 where the rule leaves the
    burst alone: a rank's first operation, no burst, an operation without a row), and per rank
    the trace time its last burst ended (the start of the call after it; -1: none). ``before``
    is that per rank from the previous segment of a streamed replay (None: the trace's start)."""
    return _away(np.asarray(rank_off, np.int64), np.asarray(burst, np.float64),
                 np.asarray(op_row, np.int64), np.asarray(t_start, np.int64),
                 np.full(len(rank_off) - 1, -1.0) if before is None
                 else np.asarray(before, np.float64))


@njit(cache=True, nogil=True)
def _away(rank_off, burst, op_row, t_start, before):
    away = np.zeros(len(burst))
    last = before.copy()
    for r in range(len(rank_off) - 1):
        for i in range(rank_off[r], rank_off[r + 1]):
            if burst[i] <= 0.0 and last[r] >= 0.0:
                continue
            row = op_row[i]
            if row < 0:
                continue
            call = float(t_start[row])
            if last[r] >= 0.0 and burst[i] > 0.0:
                away[i] = max(call - burst[i] - last[r], 0.0)
            last[r] = call
    return away, last


@njit(cache=True, nogil=True)
def warm_bursts(tab: np.ndarray, burst: np.ndarray, away: np.ndarray) -> np.ndarray:
    """b_w per burst: the burst that, resumed after ``away``, takes ``burst`` (w of ``tab``,
    ``rules.resume_extra``; piecewise linear in b_w, so inverted segment by segment; bursts
    with no d kept)."""
    out = burst.copy()
    if len(tab) == 0:
        return out
    nb_ = int(tab[0])
    for i in range(len(burst)):
        b, d = burst[i], away[i]
        if b <= 0.0 or d <= 0.0:
            continue
        x0, g0 = 0.0, 0.0
        done = False
        for k in range(nb_):
            x1 = tab[2 + k]
            g1 = max(x1 + resume_extra(tab, x1, d), g0)   # b_w + w(b_w, d) never decreases
            if b < g1:
                out[i] = x0 + (b - g0) * (x1 - x0) / (g1 - g0)
                done = True
                break
            x0, g0 = x1, g1
        if not done:
            out[i] = x0 + (b - g0)       # beyond the last length w stays w(b_n, d)
    return out
