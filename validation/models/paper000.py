"""Paper 000: Kuntraruk, Pottenger, Ross, "Application Resource Requirement Estimation in a
Parallel-Pipeline Model of Execution".

Speedup model (eqs. 1-5), total time of the parallel pipeline (eq. 6) and the M/M/1 delay of a
message crossing a Myrinet leaf/spine switch (eqs. 7-11). Worked examples: eq. 12 (feature
extraction, 128 processors in sets of 16, published 9.61 s) and eq. 13 (sorting, 8 processors,
published 208.03 s). Their published communication terms do not follow from eqs. 7-11; see
docs/models.md. Units: seconds, message sizes in bytes, channel capacity C in bits/s.
"""

from __future__ import annotations

import math
from typing import Any

from validation.models.base import (
    Bound, COUNT, FLAG, ModelError, POSITIVE_TIME, RATE, SIZE, TIME, inputs)

MAIN = "t_total"


def lg(P: float) -> float:
    """lg P = log2 P (footnote 1: the paper assumes P is a power of two)."""
    if P < 1:
        raise ModelError(f"P must be >= 1, not {P}")
    return math.log2(P)


def t_seq(N: float, t_comp: float, t_merge: float) -> float:
    """Eq. 1: T_Seq = N·T_Comp + (N - 1)·T_Merge."""
    return N * t_comp + (N - 1) * t_merge


def t_par(N: float, P: float, t_comp: float, t_merge: float, t_comm: float) -> float:
    """Eq. 2: T_Par = N/(P/2)·T_Comp + N/(P/2)·(T_Merge + T_Comm)·lg P."""
    sets = N / (P / 2)
    return sets * t_comp + sets * (t_merge + t_comm) * lg(P)


def pipeline_depth(P: float) -> float:
    """Eq. 3: pipeline depth = 2·lg P + 1."""
    return 2 * lg(P) + 1


def speedup_par(P: float) -> float:
    """Eq. 4: S_Par = P / (2·lg P + 1) (all stages equal, T_Comp ≈ T_Merge ≈ T_Comm)."""
    return P / pipeline_depth(P)


def speedup_overall(P: float) -> float:
    """Eq. 5: S_overall = S_Par · 2·lg P = P·2·lg P / (2·lg P + 1) (≈ P, near-linear).

    The pipeline factor is 2·lg P rather than the depth 2·lg P + 1 because of the functional
    hazard in the first two stages (§III-B)."""
    return speedup_par(P) * 2 * lg(P)


def steps(N: float, P: float) -> float:
    """(N - P)/(P/2): pipeline steps after the initial one (§IV). Fewer tasks than processors
    leave no steady-state steps (the formula would go negative)."""
    return max(N - P, 0.0) / (P / 2)


def t_total(N: float, P: float, t_comp: float, t_comm: float, t_merge: float | None = None,
            drain: bool = True) -> float:
    """Eq. 6: T_Total = ((N-P)/(P/2) + 1)·T_Comp + lg P·T_Merge + (N-P)/(P/2)·T_Comm
    + lg P·T_Comm.

    The paper replaces T_Merge by T_Comp (its optimality bound) when ``t_merge`` is None.
    ``drain=False`` drops the two lg P drain terms, as the worked examples do (footnotes 6, 7).
    """
    t_merge = t_comp if t_merge is None else t_merge
    s = steps(N, P)
    total = (s + 1) * t_comp + s * t_comm
    if drain:
        total += lg(P) * t_merge + lg(P) * t_comm
    return total


def mm1_delay(L: float, C: float, lam: float, tau: float = 0.0) -> float:
    """Eq. 7: D(L) = (L/C)/(1 - ρ) + τ with ρ = λ·L/C (L in bytes, so L/C = 8·L/C seconds).

    Raises ModelError when ρ >= 1 (the queue is unstable: no finite mean delay)."""
    service = 8.0 * L / C
    rho = lam * service
    if rho >= 1:
        raise ModelError(f"M/M/1 utilisation rho = {rho:.3f} >= 1 (lambda {lam:g}/s, "
                         f"L/C {service:g} s): the queue saturates")
    return service / (1 - rho) + tau


def t_comm(L: float, C: float, t_comp: float, leaf_in: float = 8, spine_in: float = 16,
           leaf_out: float = 8, tau: float = 0.0) -> float:
    """Eqs. 8-11: T_Comm = D_leaf1 + D_spine + D_leaf2 over a 16-port Myrinet leaf/spine switch.

    Arrival rates λ = fan-in / T_Comp: 8 hosts per leaf (eq. 8), 16 leaf links into a spine
    (eq. 9), 8 spines into the destination leaf (eq. 10); τ = 0 in the paper."""
    return (mm1_delay(L, C, leaf_in / t_comp, tau) + mm1_delay(L, C, spine_in / t_comp, tau)
            + mm1_delay(L, C, leaf_out / t_comp, tau))


# -- evaluators for `hindsight model` (defaults = the paper's published inputs) ----------------


@inputs(N=COUNT, P=COUNT, t_comp=POSITIVE_TIME, L=SIZE, C=RATE,
        t_merge=Bound("a time >= 0 s, or < 0 for T_Comp"), drain=FLAG)
def eval_t_total(*, N: float = 4096 / 8, P: float = 16, t_comp: float = 0.15,
                 L: float = 23720, C: float = 1.28e9, t_merge: float = -1.0,
                 drain: float = 0) -> dict[str, Any]:
    """Eq. 6 with T_Comm from eqs. 8-11. Defaults: eq. 12 (feature extraction, 4096 documents on
    8 sets of 16 processors, T_Comp 0.15 s, L 23,720 B, C 1.28 Gbit/s). t_merge < 0 means
    T_Merge = T_Comp (the paper's substitution); drain=0 drops the lg P terms as eq. 12 does."""
    tc = t_comm(L, C, t_comp)
    s = steps(N, P)
    total = t_total(N, P, t_comp, tc, None if t_merge < 0 else t_merge, drain=bool(drain))
    return {"steps": s, "T_Comm_s": tc, "compute_term_s": (s + 1) * t_comp,
            "comm_term_s": s * tc, "T_Total_s": total}


@inputs(P=COUNT)
def eval_speedup(*, P: float = 16) -> dict[str, Any]:
    """Eqs. 3-5 for P processors (default 16: 'SP from SP Model' of Table I is P)."""
    return {"pipeline_depth": pipeline_depth(P), "S_par": speedup_par(P),
            "S_overall": speedup_overall(P)}


@inputs(L=SIZE, C=RATE, t_comp=POSITIVE_TIME, tau=TIME)
def eval_t_comm(*, L: float = 23720, C: float = 1.28e9, t_comp: float = 0.15,
                tau: float = 0.0) -> dict[str, Any]:
    """Eqs. 7-11: one message's three-hop M/M/1 delay."""
    s = 8 * L / C
    return {"L_over_C_s": s, "D_leaf1_s": mm1_delay(L, C, 8 / t_comp, tau),
            "D_spine_s": mm1_delay(L, C, 16 / t_comp, tau),
            "D_leaf2_s": mm1_delay(L, C, 8 / t_comp, tau), "T_Comm_s": t_comm(L, C, t_comp, tau=tau)}


@inputs(N=COUNT, P=COUNT, t_comp=POSITIVE_TIME, L=SIZE, C=RATE)
def eval_sorting(*, N: float = 512, P: float = 8, t_comp: float = 1.39, L: float = 8e6,
                 C: float = 1.28e9) -> dict[str, Any]:
    """Eq. 13 (sorting 512 arrays of 10^6 integers on 8 processors, L = 8 MB): eq. 6 without
    the drain terms, T_Comm from eqs. 8-11."""
    return eval_t_total(N=N, P=P, t_comp=t_comp, L=L, C=C)


@inputs(N=COUNT, t_comp=TIME, t_merge=TIME)
def eval_t_seq(*, N: float = 4096, t_comp: float = 0.15, t_merge: float = 0.15) -> dict[str, Any]:
    """Eq. 1."""
    return {"T_Seq_s": t_seq(N, t_comp, t_merge)}


EVALUATORS = {"t_total": eval_t_total, "eq13": eval_sorting, "t_comm": eval_t_comm,
              "speedup": eval_speedup, "t_seq": eval_t_seq}
