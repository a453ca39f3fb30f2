"""Paper 003: Juhász, Charaf, "Performance Modelling of Cooperating Tasks in PC Clusters".

Bottleneck-bandwidth model of a master/worker block sort whose reading, network and compute
overlap: the slowest of the overlapped resources sets each phase's bandwidth (eqs. 1-4, 6-9, 17)
and the optimal cluster size is where the merge ("resolution") bandwidth meets the gathering
bandwidth (eqs. 18-19; worked example eq. 20, p = 5.13).

Units as in the paper: N and s in elements, bandwidths in elements/s (the paper's "M/s" is
10^6 32-bit integers per second), c_q and c_m in s per element, l_n in s.
"""

from __future__ import annotations

import math
from typing import Any

from validation.models.base import COUNT, ModelError, POSITIVE, POSITIVE_TIME, RATE, TIME, inputs

MAIN = "t_total"


def b_dist(s: float, l_n: float, b_n: float) -> float:
    """Eq. 1: b_dist = s / (l_n + s/b_n) (one source sending blocks of s elements)."""
    return s / (l_n + s / b_n)


def t_proc(s: float, c_q: float) -> float:
    """Eq. 6: quicksort of one block, t_proc(s) = c_q·s·ln s."""
    return c_q * s * math.log(s) if s > 1 else 0.0


def b_proc(s: float, c_q: float) -> float:
    """Eq. 7: b_proc = s / t_proc(s) = 1/(c_q·ln s)."""
    t = t_proc(s, c_q)
    return math.inf if t == 0 else s / t


def t_local(N: float, p: float, c_m: float) -> float:
    """Eq. 8 (= eq. 14): local n/p-way merge up to the first result block, c_m·s·(N/s)/p =
    c_m·N/p."""
    return c_m * N / p


def b_resolution(N: float, p: float, s: float, c_m: float) -> float:
    """Eq. 9: b_resolution = 1/(c_m·(N/(s·p) + p)) = s·p/(c_m·(N + s·p²)) (eq. 15): master's
    own local merge plus its p-way global merge, which cannot overlap."""
    return s * p / (c_m * (N + s * p * p))


def t_read(N: float, b_io: float, b_dist_: float, b_proc_: float) -> float:
    """Eq. 2: t_read = N / min(b_io, b_dist, b_proc)."""
    return N / min(b_io, b_dist_, b_proc_)


def t_write(N: float, b_io: float, b_gather: float, b_res: float) -> float:
    """Eq. 3: t_write = N / min(b_io, b_gather, b_resolution)."""
    return N / min(b_io, b_gather, b_res)


def t_total(N: float, p: float, s: float, c_q: float, c_m: float, b_io: float, l_n: float,
            b_n: float, b_gather: float) -> dict[str, float]:
    """Eq. 4 / eq. 17: t_total = t_read + t_proc(s) + t_local(N/p) + t_write, every term
    returned."""
    if p < 1 or N <= 0 or s <= 0:
        raise ModelError(f"need p >= 1, N > 0, s > 0 (got p={p}, N={N}, s={s})")
    bd, bp = b_dist(s, l_n, b_n), b_proc(s, c_q)
    br = b_resolution(N, p, s, c_m)
    parts = {"b_dist": bd, "b_proc": bp, "b_resolution": br,
             "t_read_s": t_read(N, b_io, bd, bp), "t_proc_s": t_proc(s, c_q),
             "t_local_s": t_local(N, p, c_m), "t_write_s": t_write(N, b_io, b_gather, br)}
    parts["t_total_s"] = parts["t_read_s"] + parts["t_proc_s"] + parts["t_local_s"] + \
        parts["t_write_s"]
    return parts


def quadratic(N: float, s: float, c_m: float, b_gather: float) -> tuple[float, float, float]:
    """Eq. 18: (b_gather·c_m·s)·p² - s·p + b_gather·c_m·N = 0, coefficients (a, b, c)."""
    return b_gather * c_m * s, -s, b_gather * c_m * N


def p_opt(N: float, s: float, c_m: float, b_gather: float) -> float:
    """Eq. 19: the smaller root, p = (1 - sqrt(1 - 4·N·(b_gather·c_m)²/s)) / (2·b_gather·c_m).

    Returns nan when the discriminant is negative: b_resolution never reaches b_gather, so
    the merge stays the bottleneck at every p."""
    bc = b_gather * c_m
    disc = 1 - 4 * N * bc * bc / s
    if disc < 0:
        return math.nan
    return (1 - math.sqrt(disc)) / (2 * bc)


# -- evaluators (defaults: §5's measured constants, s = 65536, N_3 = 2·10^7) ---------------------

_M = 1e6


@inputs(N=POSITIVE, p=COUNT, s=COUNT, c_q=TIME, c_m=POSITIVE_TIME, b_io=RATE, l_n=TIME,
        b_n=RATE, b_gather=RATE)
def eval_t_total(*, N: float = 2e7, p: float = 6, s: float = 65536, c_q: float = 0.066e-6,
                 c_m: float = 0.04e-6, b_io: float = 0.54 * _M, l_n: float = 0.030,
                 b_n: float = 1.2 * _M, b_gather: float = 0.387 * _M) -> dict[str, Any]:
    """Eq. 17 with the constants of §5 (Figs. 1-3 'calculated time')."""
    return t_total(N, p, s, c_q, c_m, b_io, l_n, b_n, b_gather)


@inputs(N=POSITIVE, s=COUNT, c_m=POSITIVE_TIME, b_gather=RATE)
def eval_p_opt(*, N: float = 2e7, s: float = 65536, c_m: float = 0.04e-6,
               b_gather: float = 0.387 * _M) -> dict[str, Any]:
    """Eq. 19/20: optimal cluster size (published p = 5.13 for N_3 = 2·10^7)."""
    a, b, c = quadratic(N, s, c_m, b_gather)
    return {"a": a, "b": b, "c": c, "p_opt": p_opt(N, s, c_m, b_gather)}


@inputs(s=COUNT, c_q=TIME, l_n=TIME, b_n=RATE)
def eval_bandwidths(*, s: float = 65536, c_q: float = 0.066e-6, l_n: float = 0.030,
                    b_n: float = 1.2 * _M) -> dict[str, Any]:
    """Eqs. 10, 11, 13: b_dist (published 0.775 M/s), b_proc (1.366 M/s), t_proc (0.04749 s)."""
    return {"b_dist": b_dist(s, l_n, b_n), "b_proc": b_proc(s, c_q), "t_proc_s": t_proc(s, c_q)}


EVALUATORS = {"t_total": eval_t_total, "p_opt": eval_p_opt, "bandwidths": eval_bandwidths}
