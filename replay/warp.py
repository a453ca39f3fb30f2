"""Replayed times of the trace rows that the replay's operations do not time directly, compiled:
the rows of one call together (``join_call_rows``), and rule *time warp* for the rows the
replay has no operation for (``time_warp``). Used by ``replay.engine`` and
``replay.loggopsim.rows``."""

from __future__ import annotations

import numpy as np

from hindsight.jit import njit


@njit(cache=True, nogil=True)
def join_call_rows(cont, rs, re):
    """A call recorded as several rows (``cont``: the row continues the call of the row before)
    starts where its first row starts, and all its rows end together, when the last one does:
    per call, ``rs`` of its further rows becomes its first row's, and where the latest of its
    rows' ``re`` is >= 0 every row's ``re`` becomes at least that. In place."""
    n = len(cont)
    i = 0
    while i < n:
        j = i + 1
        while j < n and cont[j]:
            j += 1
        end = -1.0
        for k in range(i, j):
            end = np.maximum(end, re[k])
        for k in range(i + 1, j):
            rs[k] = rs[i]
        if end >= 0:
            for k in range(i, j):
                re[k] = np.maximum(re[k], end)
        i = j


@njit(cache=True, nogil=True)
def time_warp(rank_off, has, t_start, t_end, t0, rs, re, end_x, end_y):
    """Rule *time warp*: rows without replayed times (``has`` false: regions, calls without an
    operation) get them through their rank's piecewise-linear map from measured to replayed
    time, whose anchors are (0, 0), each timed row's (start, replayed start) and (end, replayed
    end), and (the rank's measured end ``end_x``, its replayed end ``end_y``); anchors sorted by
    measured time (a stable sort: ties in that order), replayed times made non-decreasing.
    Measured times are the rows' ``t_start`` and ``t_end`` less ``t0`` (ns, integers). Rows are
    grouped by rank (``rank_off``); ``rs``/``re`` are filled in place."""
    for r in range(len(rank_off) - 1):
        lo, hi = rank_off[r], rank_off[r + 1]
        nmiss = 0
        for i in range(lo, hi):
            if not has[i]:
                nmiss += 1
        if nmiss == 0:
            continue
        ax, ay = _anchors(lo, hi, has, t_start, t_end, t0, rs, re, end_x[r], end_y[r])
        for j in range(1, len(ay)):
            if ay[j] < ay[j - 1]:
                ay[j] = ay[j - 1]
        # The rows come in measured order, so each lookup starts from the anchor the one
        # before found (a rank's lookups cost O(rows) instead of O(rows · log anchors)).
        at = 0
        for i in range(lo, hi):
            if not has[i]:
                rs[i], at = _interp(float(t_start[i] - t0), ax, ay, at)
                re[i], at = _interp(float(t_end[i] - t0), ax, ay, at)


@njit(cache=True, nogil=True)
def _anchors(lo, hi, has, t_start, t_end, t0, rs, re, x_end, y_end):
    """The time warp's anchors of rows lo:hi as (measured, replayed) arrays, stably sorted by
    measured time from the order (0, 0), each timed row's start then end, the end.

    The timed rows' starts and ends usually each come in order (the rows of one call repeat
    its times, so together they do not): then the sort is a merge of the two, where at equal
    times a start goes first when its row is not after the end's row, as a stable sort of the
    interleaved anchors puts them. Otherwise that stable sort runs."""
    m = 0
    for i in range(lo, hi):
        if has[i]:
            m += 1
    sx = np.empty(m)
    sy = np.empty(m)
    ex = np.empty(m)
    ey = np.empty(m)
    j = 0
    for i in range(lo, hi):
        if has[i]:
            sx[j], sy[j] = float(t_start[i] - t0), rs[i]
            ex[j], ey[j] = float(t_end[i] - t0), re[i]
            j += 1
    ax = np.empty(2 + 2 * m)
    ay = np.empty(2 + 2 * m)
    ax[0], ay[0] = 0.0, 0.0
    ax[-1], ay[-1] = x_end, y_end
    merge = True
    for j in range(1, m):
        if sx[j] < sx[j - 1] or ex[j] < ex[j - 1]:
            merge = False
            break
    if m and not (sx[0] >= 0.0 and ex[0] >= 0.0 and sx[-1] <= x_end and ex[-1] <= x_end):
        merge = False       # an anchor that sorts before (0, 0) or after the end
    if merge:
        a = 0
        b = 0
        for k in range(1, 1 + 2 * m):
            if b == m or (a < m and (sx[a] < ex[b] or (sx[a] == ex[b] and a <= b))):
                ax[k], ay[k] = sx[a], sy[a]
                a += 1
            else:
                ax[k], ay[k] = ex[b], ey[b]
                b += 1
        return ax, ay
    for j in range(m):
        ax[1 + 2 * j], ay[1 + 2 * j] = sx[j], sy[j]
        ax[2 + 2 * j], ay[2 + 2 * j] = ex[j], ey[j]
    o = np.argsort(ax, kind="mergesort")
    return ax[o], ay[o]


@njit(cache=True, nogil=True, inline="always")
def _interp(x, xp, fp, hint):
    """``np.interp(x, xp, fp)`` for one point, with NumPy's rules (the last of equal xp; an
    exact hit returns fp there), and the segment it found: (value, segment). The search
    starts at segment ``hint``; the segment (the last j with xp[j] <= x) is one whatever the
    start, and so is the value. Written out: numba's np.interp loads SciPy's BLAS check."""
    n = len(xp)
    if x > xp[n - 1] or x == xp[n - 1]:
        return fp[n - 1], hint
    if x < xp[0]:
        return fp[0], hint
    lo, hi = 0, n - 1           # xp[lo] <= x < xp[hi]
    if hint < n - 1 and xp[hint] <= x:
        lo = hint               # gallop forward from the hint
        step = 1
        while lo + step < n - 1 and xp[lo + step] <= x:
            lo += step
            step *= 2
        hi = min(lo + step, n - 1)
    elif hint < n - 1:
        hi = hint               # xp[hint] > x: the segment is before it
    while hi - lo > 1:
        mid = (lo + hi) >> 1
        if xp[mid] <= x:
            lo = mid
        else:
            hi = mid
    if xp[lo] == x:
        return fp[lo], lo
    slope = (fp[lo + 1] - fp[lo]) / (xp[lo + 1] - xp[lo])
    y = slope * (x - xp[lo]) + fp[lo]
    if np.isnan(y):
        y = slope * (x - xp[lo + 1]) + fp[lo + 1]
        if np.isnan(y) and fp[lo] == fp[lo + 1]:
            y = fp[lo]
    return y, lo
