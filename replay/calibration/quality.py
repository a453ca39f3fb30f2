"""Whether a profile can be trusted: its fit against its own measurements, and the machine's
conditions while they were taken (docs/calibration.md, "Quality and conditions").

`calibrate` judges each measurement with `fit_check` and `attempt_problems`; everything that reads
a profile (`hindsight replay/sweep --profile`, `hindsight validate`) asks `profile_problems`, which
applies the same rules to what the profile recorded.

Judged sizes: the ones the LogGPS fit claims to follow, i.e. the eager sizes (k <= S: their medians
give o_send, o_recv and L) and the long-message sizes that give G (``fit.top_sizes``: within a
factor 8 of the largest, above S). Sizes in between are recorded but not judged: no straight
line follows the protocol steps and cache effects there, and a quiet machine's fit misses them by
up to 66 % (docs/calibration.md).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from hindsight import conditions as C

#: A judged size whose fitted one-way time is more than this factor above or below its measured
#: median misses. Quiet runs here: at most 1.75x (pickle API, 8 MiB), 1.6x (buffer API, 2 MiB).
MAX_FACTOR = 2.0
#: The median over the judged sizes of |model - T| / T may not exceed this. Quiet runs here:
#: up to 0.35 (pickle API: o_send + o_recv exceed the small-message time, L clipped at 0).
MAX_MEDIAN = 0.5
#: Measurements `calibrate` takes before it gives up on a quiet one (noise here comes in bursts).
DEFAULT_ATTEMPTS = 3


def _size(k: float) -> str:
    for unit, n in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if k >= n and k % n == 0:
            return f"{int(k // n)} {unit}"
    return f"{int(k)} B"


def _time(t: float) -> str:
    return f"{t * 1e3:.3g} ms" if t >= 1e-3 else f"{t * 1e6:.3g} us"


def judged_sizes(sizes: list[float], S: float) -> list[bool]:
    """Which sizes the fit is judged on: eager (k <= S) and the long-message sizes of G."""
    import numpy as np

    from replay.calibration.fit import top_sizes

    k = np.asarray(sizes, float)
    return ((k <= S) | top_sizes(k, S)).tolist()


def miss_factor(r: float) -> float:
    """How far off a relative residual r = (model - T) / T is, as a factor >= 1."""
    ratio = 1.0 + r
    return math.inf if ratio <= 0 else max(ratio, 1.0 / ratio)


def fit_check(sizes: list[float], residuals: list[float], one_way_s: list[float] | None,
              S: float) -> dict[str, Any]:
    """The LogGPS fit against its own per-size medians: worst and median relative residual over
    the judged sizes, and one line per miss (beyond MAX_FACTOR, or the median beyond
    MAX_MEDIAN)."""
    judged = judged_sizes(sizes, S)
    idx = [i for i, j in enumerate(judged) if j] or list(range(len(sizes)))
    worst = max(idx, key=lambda i: miss_factor(residuals[i]))
    median = statistics.median(abs(residuals[i]) for i in idx)
    misses = []
    for i in idx:
        f = miss_factor(residuals[i])
        if f > MAX_FACTOR:
            where = "above" if residuals[i] > 0 else "below"
            measured = f", measured {_time(one_way_s[i])}" if one_way_s else ""
            misses.append(f"{_size(sizes[i])} fitted {f:.1f}x {where} the measurement"
                          f"{measured}")
    if median > MAX_MEDIAN:
        misses.append(f"median residual {100 * median:.0f} % over the judged sizes")
    return {"judged_sizes": [int(sizes[i]) for i in idx], "residual_worst": residuals[worst],
            "residual_worst_size": int(sizes[worst]), "residual_median": median,
            "max_factor": MAX_FACTOR, "max_median": MAX_MEDIAN, "misses": misses}


def rank_conditions(rank_info: list[dict]) -> list[dict[str, Any]]:
    """What the communicating ranks (0 and 1) saw over the measurement: its length, their
    involuntary context switches and the share of it they spent waiting for a core."""
    out = []
    for info in rank_info[:2]:
        secs, wait, cs = info.get("measured_s"), info.get("run_queue_wait_s"), \
            info.get("ctx_switches")
        out.append({"rank": info.get("rank"), "seconds": secs,
                    "involuntary_ctx_switches": cs[1] if cs else None,
                    "run_queue_wait_fraction": round(wait / secs, 4)
                    if wait is not None and secs else None})
    return out


def conditions_problems(cond: dict[str, Any] | None) -> list[str]:
    """Load problems of a profile's [conditions] (`record`): steal over the measurement and the
    ranks' waits for a core. The 1-minute load average is recorded but not judged: it lags (it
    read 0.42 while two busy loops, started a second earlier, kept the ranks waiting 40 % of the
    time) and counts the user's own preceding work, such as the runs before a calibration."""
    if not isinstance(cond, dict):
        return []
    probs = C.load_problems({**cond, "loadavg_1m_before": None})
    ranks = [r for r in cond.get("ranks", []) if isinstance(r, dict)]
    probs += C.preemption_problems({f"rank {r.get('rank')}": r.get("run_queue_wait_fraction")
                                    for r in ranks})
    return probs


def record(before: dict, after: dict, rank_info: list[dict]) -> dict[str, Any]:
    """The profile's [conditions] table: `conditions.between` of two snapshots, the ranks'
    readings, and the problems found in them."""
    cond = C.between(before, after) | {"ranks": rank_conditions(rank_info)}
    cond["problems"] = conditions_problems(cond)
    return cond


def attempt_problems(check: dict[str, Any], cond: dict[str, Any]) -> list[str]:
    """Why one measurement should not become a profile (empty: it may)."""
    return list(check["misses"]) + list(cond["problems"])


def _missed(check: dict[str, Any]) -> list[str]:
    """A fit check's misses as a problem (summarised), or nothing."""
    return ["the fit misses its own measurements: " + _summary(check)] if check.get("misses") \
        else []


def _loaded(load: list[str]) -> list[str]:
    """The conditions' problems as one problem, or nothing."""
    return ["taken under load: " + "; ".join(load)] if load else []


def attempt_text(check: dict[str, Any], cond: dict[str, Any]) -> str:
    """Why one measurement failed, in the words of ``profile_problems``."""
    return "; ".join(_missed(check) + _loaded(cond["problems"]))


def _summary(check: dict[str, Any]) -> str:
    """A fit check's misses in one short phrase: all of them when few, else the count and the
    worst (the profile keeps the whole list)."""
    misses = list(check["misses"])
    if len(misses) <= 3:
        return "; ".join(misses)
    sizes = [m for m in misses if not m.startswith("median")]
    worst_r = check.get("residual_worst")
    worst = (f", worst {_size(check['residual_worst_size'])} {miss_factor(worst_r):.1f}x "
             f"{'above' if worst_r > 0 else 'below'}") if worst_r is not None else ""
    median = [m for m in misses if m.startswith("median")]
    return (f"{len(sizes)} of {len(check.get('judged_sizes') or sizes)} judged sizes off by more "
            f"than {check.get('max_factor', MAX_FACTOR):g}x{worst}" +
            (f"; {median[0]}" if median else ""))


def profile_problems(profile: dict[str, Any]) -> list[str]:
    """Why a profile (as read from its TOML) should not be trusted as a quiet machine's fit; empty
    if nothing says so. The rules of `calibrate` applied to what the profile recorded; a profile
    without a recorded check (older ones) is judged on its residuals if it has them."""
    if not isinstance(profile, dict) or "format" not in profile:
        return []
    out = []
    fit = profile.get("fit") if isinstance(profile.get("fit"), dict) else {}
    check = fit.get("check")
    try:
        if not isinstance(check, dict):
            res = (fit.get("residuals") or {}).get("loggp")
            sizes, S = fit.get("sizes"), (profile.get("loggps") or {}).get("S", math.inf)
            if res and sizes and len(res) == len(sizes):
                check = fit_check(sizes, res, fit.get("one_way_s"), float(S))
        if isinstance(check, dict):
            out += _missed(check)
    except (TypeError, ValueError, KeyError):
        out.append("its fit record is unreadable")
    out += _loaded(conditions_problems(profile.get("conditions")))
    if not out and profile.get("quality") == "noisy":
        out.append("marked noisy")
    return out
