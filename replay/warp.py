"""Rule *time warp*: replayed times for the rows the replay has no operation for (regions,
calls without an operation), compiled. Used by ``replay.engine`` and ``replay.loggopsim.rows``."""

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True, nogil=True)
def time_warp(rank_off, has, ts, te, rs, re, end_x, end_y):
    """Rule *time warp*: rows without replayed times (``has`` false: regions, calls without an
    operation) get them through their rank's piecewise-linear map from measured to replayed
    time, whose anchors are (0, 0), each timed row's (start, replayed start) and (end, replayed
    end), and (the rank's measured end ``end_x``, its replayed end ``end_y``); anchors sorted by
    measured time, replayed times made non-decreasing. Rows are grouped by rank (``rank_off``);
    ``rs``/``re`` are filled in place. Anchors come in order when a rank's calls do not overlap,
    so they are sorted only when they are not."""
    for r in range(len(rank_off) - 1):
        lo, hi = rank_off[r], rank_off[r + 1]
        nmiss = 0
        for i in range(lo, hi):
            if not has[i]:
                nmiss += 1
        if nmiss == 0:
            continue
        na = 2 + 2 * (hi - lo - nmiss)
        ax = np.empty(na)
        ay = np.empty(na)
        ax[0], ay[0] = 0.0, 0.0
        k = 1
        for i in range(lo, hi):
            if has[i]:
                ax[k], ay[k] = ts[i], rs[i]
                ax[k + 1], ay[k + 1] = te[i], re[i]
                k += 2
        ax[k], ay[k] = end_x[r], end_y[r]
        ordered = True
        for j in range(1, na):
            if ax[j] < ax[j - 1]:
                ordered = False
                break
        if not ordered:
            o = np.argsort(ax, kind="mergesort")
            ax = ax[o]
            ay = ay[o]
        for j in range(1, na):
            if ay[j] < ay[j - 1]:
                ay[j] = ay[j - 1]
        for i in range(lo, hi):
            if not has[i]:
                rs[i] = _interp(ts[i], ax, ay)
                re[i] = _interp(te[i], ax, ay)


@nb.njit(cache=True, nogil=True, inline="always")
def _interp(x, xp, fp):
    """``np.interp(x, xp, fp)`` for one point, with NumPy's rules (the last of equal xp; an
    exact hit returns fp there). Written out: numba's np.interp loads SciPy's BLAS check."""
    n = len(xp)
    if x > xp[n - 1] or x == xp[n - 1]:
        return fp[n - 1]
    if x < xp[0]:
        return fp[0]
    lo, hi = 0, n - 1           # xp[lo] <= x < xp[hi]
    while hi - lo > 1:
        mid = (lo + hi) >> 1
        if xp[mid] <= x:
            lo = mid
        else:
            hi = mid
    if xp[lo] == x:
        return fp[lo]
    slope = (fp[lo + 1] - fp[lo]) / (xp[lo + 1] - xp[lo])
    y = slope * (x - xp[lo]) + fp[lo]
    if np.isnan(y):
        y = slope * (x - xp[lo + 1]) + fp[lo + 1]
        if np.isnan(y) and fp[lo] == fp[lo + 1]:
            y = fp[lo]
    return y
