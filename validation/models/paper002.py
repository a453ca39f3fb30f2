"""Paper 002: Saez, Printista, "Performance Predictability of Divide and Conquer Skeletons".

Hypercube divide and conquer (HDC) on P = 2^d processors (§5)::

    T_HDC,P(SIZE) = sum_{j=0}^{lg P - 1} [ max_i T_Div,i(SIZE/2^j) + max_i T_Comb,i(SIZE/2^j)
                                           + max_i T_Ex,i(K_j, g, l) ]
                    + max_i T_Seq,i(SIZE/2^lg P)

with the exchange of K words Ex(K, g, l) = t_send + t_recv = 2·(l + K·g) (§4) and per-block cost
functions fitted by linear least squares from the trace's region events (§7):
T_Div = Div_0 + Div_1·M, T_Comb = Comb_0 + Comb_1·N, T_Seq = Seq_0 + Seq_1·N + Seq_2·M (Table 3,
reported with R²). For connected components the edge list (M) halves at every level while the
root vector (N vertices) does not, so combine and exchange keep size N at every level.

Worked example (§7): N = 1024K, M = 2048K, P = 8, l = 2.43e-4 s, g = 1.51e-7 s/word: exchange
term 0.929202 s (reproduced exactly with 1024K = 1,024,000 words), total published 1.916492 s,
which the formula with Table 3's coefficients does not give (docs/models.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from validation.models.base import Bound, INTEGER_COUNT, ModelError, SIZE, TIME, inputs

MAIN = "t_hdc"


@dataclass
class BlockCost:
    """A fitted cost function c_0 + sum c_i·x_i over named basis variables."""

    names: tuple[str, ...]                 # basis variable names, e.g. ("M",)
    coef: tuple[float, ...]                # intercept first, then one per name
    r2: float = math.nan                   # coefficient of determination of the fit
    n: int = 0                             # samples used
    dropped: tuple[str, ...] = field(default=())  # variables constant in the data (folded in c_0)

    def __call__(self, **x: float) -> float:
        return self.coef[0] + sum(c * x[n] for n, c in zip(self.names, self.coef[1:]))

    def as_dict(self) -> dict[str, Any]:
        return {"names": list(self.names), "coef": list(self.coef), "r2": self.r2, "n": self.n,
                "dropped": list(self.dropped)}


def fit(names: Sequence[str], X: np.ndarray, y: np.ndarray) -> BlockCost:
    """Linear least squares y ≈ c_0 + X·c (§7), with R² = 1 - SS_res/SS_tot.

    A basis variable that is constant over the samples cannot be told apart from the intercept
    (e.g. N within one run of connected components); it is dropped (coefficient 0) and named in
    ``dropped`` rather than given an arbitrary minimum-norm value."""
    X = np.asarray(X, dtype=float).reshape(len(y), -1)
    y = np.asarray(y, dtype=float)
    if len(y) == 0:
        raise ModelError("no samples to fit")
    keep = [i for i in range(X.shape[1]) if np.ptp(X[:, i]) > 0]
    dropped = tuple(n for i, n in enumerate(names) if i not in keep)
    A = np.column_stack([np.ones(len(y))] + [X[:, i] for i in keep])
    sol, *_ = np.linalg.lstsq(A, y, rcond=None)
    pred = A @ sol
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1 - float(((y - pred) ** 2).sum()) / ss_tot if ss_tot > 0 else math.nan
    coef = [float(sol[0])] + [0.0] * len(names)
    for j, i in enumerate(keep):
        coef[1 + i] = float(sol[1 + j])
    return BlockCost(tuple(names), tuple(coef), r2, len(y), dropped)


def exchange(K: float, l: float, g: float) -> float:
    """§4: Ex(K, g, l) = t_send + t_recv = 2·(l + K·g), K words."""
    return 2 * (l + K * g)


def t_hdc(P: int, N: float, M: float, div: BlockCost, comb: BlockCost, seq: BlockCost,
          l: float, g: float, K: float | None = None,
          halve: Sequence[str] = ("M",)) -> dict[str, float]:
    """§5: sum over lg P levels of divide, combine and exchange, plus the sequential leaf.

    At level j the variables named in ``halve`` are divided by 2^j (connected components: the
    edges M), the others are kept (the root vector N). K words are exchanged per level
    (default: N, the whole root vector, as in §7)."""
    d = int(round(math.log2(P))) if P >= 1 else -1
    if P < 1 or 2 ** d != P:
        raise ModelError(f"the hypercube needs P a power of two, not {P}")
    K = N if K is None else K

    def at(j: int) -> dict[str, float]:
        return {"N": N / 2 ** j if "N" in halve else N, "M": M / 2 ** j if "M" in halve else M}

    t_div = sum(div(**at(j)) for j in range(d))
    t_comb = sum(comb(**at(j)) for j in range(d))
    t_ex = sum(exchange(K / 2 ** j if "K" in halve else K, l, g) for j in range(d))
    t_seq = seq(**at(d))
    return {"divide_s": t_div, "combine_s": t_comb, "exchange_s": t_ex, "sequential_s": t_seq,
            "total_s": t_div + t_comb + t_ex + t_seq}


# -- evaluator: §7's worked example ---------------------------------------------------------------


#: a block's cost coefficient (s, or s per word): a negative one would give negative times
_COEF = Bound("a cost coefficient >= 0", 0)


@inputs(P=INTEGER_COUNT, N=SIZE, M=SIZE, l=TIME, g=TIME, div0=_COEF, div1=_COEF,
        comb0=_COEF, comb1=_COEF, seq0=_COEF, seq1=_COEF, seq2=_COEF)
def eval_t_hdc(*, P: float = 8, N: float = 1024000, M: float = 2048000, l: float = 2.43e-4,
               g: float = 1.51e-7, div0: float = 2.25e-6, div1: float = 1.94e-8,
               comb0: float = 2.32e-3, comb1: float = 2.19e-7, seq0: float = 0.0,
               seq1: float = 1.35e-7, seq2: float = 4.60e-7) -> dict[str, Any]:
    """§7: T_HDC,8(1024K, 2048K). Table 3's coefficients are printed with the intercept and the
    slope swapped (Table 1's data give a slope of ~1.94e-8 s per edge for divide); the defaults
    take the slope from the data: Div = 2.25e-6 + 1.94e-8·M, Comb = 2.32e-3 + 2.19e-7·N,
    Seq = 1.35e-7·N + 4.60e-7·M."""
    div = BlockCost(("M",), (div0, div1))
    comb = BlockCost(("N",), (comb0, comb1))
    seq = BlockCost(("N", "M"), (seq0, seq1, seq2))
    return t_hdc(int(P), N, M, div, comb, seq, l, g)


EVALUATORS = {"t_hdc": eval_t_hdc}
