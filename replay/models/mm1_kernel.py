"""The compiled part of the M/M/1 model (``replay.models.mm1``): utilisation measured from a
per-link histogram of busy time, and the queueing delay it gives each message. Kept apart so
that choosing or listing the model does not load numba."""

from __future__ import annotations

import numpy as np

from hindsight.jit import njit


@njit(cache=True, nogil=True)
def _ramp(hist, base, cells, x, sign):
    """Add sign·max(j - x, 0) at the integer points j to the cumulative series whose second
    differences ``hist[base:base + cells]`` holds (x >= 0, in buckets)."""
    i = int(x)
    c = i + 1 - x
    if i + 1 < cells:
        hist[base + i + 1] += sign * c
    if i + 2 < cells:
        hist[base + i + 2] += sign * (1.0 - c)


@njit(cache=True, nogil=True)
def _at(hist, base, nbk, x):
    """The cumulative busy time (buckets) at x in [0, nbk], linear inside a bucket."""
    j = min(int(x), nbk - 1)
    lo = hist[base + j]
    return lo + (x - j) * (hist[base + j + 1] - lo)


@njit(cache=True, nogil=True)
def _own(xa, xe, nbk, x):
    """The message's own share of ``_at``: its busy interval [xa, xe] seen the same way."""
    j = min(int(x), nbk - 1)
    lo = min(max(j - xa, 0.0), xe - xa)
    hi = min(max(j + 1 - xa, 0.0), xe - xa)
    return lo + (x - j) * (hi - lo)


@njit(cache=True, nogil=True)
def measured_delay(svc, up, mid, down, send_times, B, W, nbk, nlinks, rho_max, tau, hist,
                   win_svc):
    """Measured-utilisation delays in three sweeps (no temporaries). ``hist`` holds per link the
    cumulative busy time at the nbk + 1 bucket boundaries (in buckets of width B): first the
    second differences of each message's busy interval [t, t + s], then two running sums. Each
    message's window load is the cumulative time at its ends less its own interval's share, and
    eq. 7 applies per stage crossed."""
    M = len(svc)
    cells = nbk + 1
    hist[:] = 0.0
    for m in range(M):
        if svc[m] <= 0.0:
            continue
        xa = min(send_times[m] / B, float(nbk))
        xe = min((send_times[m] + svc[m]) / B, float(nbk))
        for links in (up, mid, down):
            if links[m] >= 0:
                _ramp(hist, links[m] * cells, cells, xa, 1.0)
                _ramp(hist, links[m] * cells, cells, xe, -1.0)
    for ln in range(nlinks):
        slope = 0.0
        acc = 0.0
        for j in range(cells):
            slope += hist[ln * cells + j]
            acc += slope
            hist[ln * cells + j] = acc
    delay = np.zeros(M)
    n_sat = 0
    max_rho = 0.0
    for m in range(M):
        s = svc[m]
        wm = max(W, win_svc * s)   # a window lasts at least win_svc of the message's service
        mid_t = send_times[m] + 0.5 * s
        lo = min(max((mid_t - 0.5 * wm) / B, 0.0), float(nbk))
        hi = min(max((mid_t + 0.5 * wm) / B, 0.0), float(nbk))
        xa = min(send_times[m] / B, float(nbk))
        xe = min((send_times[m] + s) / B, float(nbk))
        own = _own(xa, xe, nbk, hi) - _own(xa, xe, nbk, lo)
        sat = False
        for links in (up, mid, down):
            ln = links[m]
            if ln < 0:
                continue
            base = ln * cells
            busy = _at(hist, base, nbk, hi) - _at(hist, base, nbk, lo) - own
            rho = max(busy, 0.0) * B / wm
            if rho >= 1.0:
                sat = True
            if rho > max_rho:
                max_rho = rho
            delay[m] += s / (1.0 - min(rho, rho_max)) + tau
        if sat:
            n_sat += 1
    return delay, n_sat, max_rho
