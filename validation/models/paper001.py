"""Paper 001: Grama, Gupta, Han, Kumar, "Parallel Algorithm Scalability Issues in PetaFLOPS
Architectures".

§2.1: speedup S = W/T_P, efficiency E = S/p = W/(p·T_P), overhead function T_o = p·T_P - W
(eq. 1), E = 1/(1 + T_o/W) (eq. 2); isoefficiency: to keep E fixed, W = K·T_o(W, p) with
K = E/(1 - E) (§3.3; §3.2 prints K = 1/(1 - E), see docs/models.md). §3.1: T_comm = t_s + m·t_w
(uncongested), t_s + m·t_w·f(A, C, p) with congestion. W is the serial run time in seconds.

Isoefficiency from a series of runs (this project's estimate, not a formula of the paper):
measure T_o at several (W, p); per p fit T_o = a(p) + b(p)·W (or take T_o constant in W if only
one W was run), solve W = K·(a + b·W) for W_iso(p) = K·a/(1 - K·b), and fit W_iso ∝ p^x by least
squares on logs; x is the empirical isoefficiency exponent.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Iterable

import numpy as np

from validation.models.base import Bound, COUNT, ModelError, POSITIVE_TIME, SIZE, TIME, inputs

MAIN = "metrics"


def speedup(W: float, T_P: float) -> float:
    """S = W / T_P (§2.1)."""
    return W / T_P


def efficiency(W: float, T_P: float, p: float) -> float:
    """E = W / (p·T_P) (§2.1)."""
    return W / (p * T_P)


def overhead(W: float, T_P: float, p: float) -> float:
    """Eq. 1: T_o = p·T_P - W."""
    return p * T_P - W


def efficiency_from_overhead(W: float, T_o: float) -> float:
    """Eq. 2: E = 1 / (1 + T_o/W)."""
    return 1.0 / (1.0 + T_o / W)


def K_of(E: float) -> float:
    """K = E/(1 - E) (§3.3)."""
    if not 0 < E < 1:
        raise ModelError(f"efficiency must be in (0, 1), not {E}")
    return E / (1 - E)


def t_comm(m: float, t_s: float, t_w: float, f: float = 1.0) -> float:
    """§3.1: T_comm = t_s + m·t_w·f(A, C, p) (f = 1: uncongested)."""
    return t_s + m * t_w * f


def isoefficiency(runs: Iterable[tuple[float, float, float]], E: float) -> dict[str, Any]:
    """Isoefficiency estimate from runs (p, W, T_P); see the module docstring.

    Returns per p the fitted a, b and W_iso, and the exponent x of W_iso ∝ p^x (nan with fewer
    than two usable p). p = 1 runs carry no overhead information and are skipped."""
    K = K_of(E)
    by_p: dict[float, list[tuple[float, float]]] = defaultdict(list)
    for p, W, T_P in runs:
        if p > 1:
            by_p[p].append((W, overhead(W, T_P, p)))
    table = []
    for p in sorted(by_p):
        Ws = np.array([w for w, _ in by_p[p]])
        To = np.array([t for _, t in by_p[p]])
        if len(set(Ws.tolist())) >= 2:
            b, a = np.polyfit(Ws, To, 1)
        else:
            a, b = float(To.mean()), 0.0
        W_iso = K * a / (1 - K * b) if K * b < 1 and a > 0 else math.nan
        table.append({"p": p, "a_s": float(a), "b": float(b), "W_iso_s": W_iso})
    pts = [(r["p"], r["W_iso_s"]) for r in table if r["W_iso_s"] > 0]
    x = math.nan
    if len(pts) >= 2:
        x = float(np.polyfit(np.log([p for p, _ in pts]), np.log([w for _, w in pts]), 1)[0])
    return {"E": E, "K": K, "per_p": table, "exponent": x}


@inputs(W=POSITIVE_TIME, T_P=POSITIVE_TIME, p=COUNT)
def eval_metrics(*, W: float = 100.0, T_P: float = 100 / (4 * 0.75),
                 p: float = 4) -> dict[str, Any]:
    """Speedup, efficiency, T_o (eq. 1) and E from T_o (eq. 2). Defaults: §2.1.1's example of
    a problem with efficiency 0.75 on 4 processors (W = 100 s, so T_P = 100/(4·0.75))."""
    T_o = overhead(W, T_P, p)
    return {"S": speedup(W, T_P), "E": efficiency(W, T_P, p), "T_o_s": T_o,
            "E_from_T_o": efficiency_from_overhead(W, T_o)}


@inputs(m=SIZE, t_s=TIME, t_w=TIME, f=Bound("a factor >= 1 (1: no congestion)", 1))
def eval_t_comm(*, m: float = 1024, t_s: float = 1e-5, t_w: float = 1e-9,
                f: float = 1.0) -> dict[str, Any]:
    """§3.1 (illustrative inputs; the paper gives no numeric example)."""
    return {"T_comm_s": t_comm(m, t_s, t_w, f)}


EVALUATORS = {"metrics": eval_metrics, "t_comm": eval_t_comm}
