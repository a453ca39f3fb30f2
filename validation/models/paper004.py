"""Paper 004: Mizutani, Ino, Hagihara, "Evaluation of Performance Prediction Method for
Master/Slave Parallel Programs".

LogGPS with a master overhead that grows with the number of processors (§3.2):
o = o'_a + o'_b·P + O·k (Table 2, MPICH on Fast Ethernet: 12.1 + 0.182·P + 0.0708·k µs for
MPI_Send, 12.1 + 0.182·P + 0.0722·k µs for MPI_Recv, L = 50 µs, G = 0.0268 µs/B), with o'_a and
o'_b solved from o' measured at two small P (§5: o'_a + 2·o'_b = 12.48 µs, o'_a + 8·o'_b = 13.57
µs). The worked example (§5.1): MASE's 1,048,576 round trips cost the master
2·o per round trip, so going from P = 8 to P = 64 adds 1,048,576·2·0.182·(64-8) µs = 21.4 s.

The time model here (the paper predicts by emulation, not by a closed formula; this is the
closed form its §5.1 argument implies): the master serialises, per task, one receive of the
result/request (k_recv bytes) and one send of the next task (k_send bytes); the P-1 workers share
the tasks. A run lasts about as long as the slower side:

    T_master(P) = n·(o_s(P, k_send) + o_r(P, k_recv))
    T_worker(P) = ceil(n/(P-1))·(t_task + o_s(P, k_recv) + o_r(P, k_send) + 2·L + G·(k_send+k_recv))
    T(P)        = max(T_master, T_worker)

The saturation point is the P at which T_master reaches T_worker; beyond it adding workers only
adds overhead (o grows with P), so the optimal number of workers is the P - 1 minimising T(P).
Units: seconds and bytes.
"""

from __future__ import annotations

import math
from typing import Any

from validation.models.base import Bound, COUNT, ModelError, SIZE, TIME, inputs

MAIN = "t_ms"
US = 1e-6


def overhead(P: float, k: float, o_a: float, o_b: float, O: float) -> float:
    """§3.2: o = o'_a + o'_b·P + O·k."""
    return o_a + o_b * P + O * k


def solve_overhead(P1: float, o1: float, P2: float, o2: float) -> tuple[float, float]:
    """§5: o'_a and o'_b from o' measured at two processor counts (a pair of linear equations)."""
    if P1 == P2:
        raise ModelError("need two different processor counts")
    o_b = (o2 - o1) / (P2 - P1)
    return o1 - o_b * P1, o_b


def linear_overhead_contribution(roundtrips: float, o_b: float, P_from: float,
                                 P_to: float) -> float:
    """§5.1: extra master time between P_from and P_to = roundtrips·2·o'_b·(P_to - P_from)."""
    return roundtrips * 2 * o_b * (P_to - P_from)


def master_time(n: float, P: float, k_send: float, k_recv: float, o_a: float, o_b: float,
                O_send: float, O_recv: float) -> float:
    """T_master = n·(o_s(P, k_send) + o_r(P, k_recv)): the master's serial communication work."""
    return n * (overhead(P, k_send, o_a, o_b, O_send) + overhead(P, k_recv, o_a, o_b, O_recv))


def worker_time(n: float, P: float, t_task: float, k_send: float, k_recv: float, L: float,
                G: float, o_a: float, o_b: float, O_send: float, O_recv: float) -> float:
    """T_worker = ceil(n/(P-1)) tasks, each its compute plus one round trip with the master."""
    if P < 2:
        raise ModelError("master/worker needs P >= 2 (one master, at least one worker)")
    per = t_task + overhead(P, k_recv, o_a, o_b, O_send) + overhead(P, k_send, o_a, o_b, O_recv) \
        + 2 * L + G * (k_send + k_recv)
    return math.ceil(n / (P - 1)) * per


def t_ms(n: float, P: float, t_task: float, k_send: float, k_recv: float, L: float, G: float,
         o_a: float, o_b: float, O_send: float, O_recv: float) -> dict[str, float]:
    """T(P) = max(T_master, T_worker) with both parts."""
    tm = master_time(n, P, k_send, k_recv, o_a, o_b, O_send, O_recv)
    tw = worker_time(n, P, t_task, k_send, k_recv, L, G, o_a, o_b, O_send, O_recv)
    return {"T_master_s": tm, "T_worker_s": tw, "T_s": max(tm, tw),
            "bound": "master" if tm >= tw else "workers"}


def saturation(n: float, t_task: float, k_send: float, k_recv: float, L: float, G: float,
               o_a: float, o_b: float, O_send: float, O_recv: float,
               P_max: int = 4096) -> dict[str, float]:
    """Saturation point (first P where the master is the bottleneck) and the optimal P (the
    minimum of T(P)) over P = 2..P_max."""
    best_P, best_T, sat = 2, math.inf, math.nan
    for P in range(2, P_max + 1):
        r = t_ms(n, P, t_task, k_send, k_recv, L, G, o_a, o_b, O_send, O_recv)
        if math.isnan(sat) and r["bound"] == "master":
            sat = P
        if r["T_s"] < best_T:
            best_P, best_T = P, r["T_s"]
    return {"saturation_P": sat, "optimal_P": best_P, "optimal_workers": best_P - 1,
            "T_opt_s": best_T}


# -- evaluators (defaults: Table 2 and MASE-SI's 1,048,576 round trips, T = 1) -------------------


@inputs(roundtrips=SIZE, o_b=TIME, P_from=COUNT, P_to=COUNT)
def eval_overhead_growth(*, roundtrips: float = 1048576, o_b: float = 0.182 * US,
                         P_from: float = 8, P_to: float = 64) -> dict[str, Any]:
    """§5.1's 21.4 s: the linear-overhead contribution between P = 8 and P = 64."""
    return {"extra_master_time_s": linear_overhead_contribution(roundtrips, o_b, P_from, P_to)}


@inputs(P1=COUNT, o1=TIME, P2=COUNT, o2=TIME)
def eval_solve_overhead(*, P1: float = 2, o1: float = 12.48 * US, P2: float = 8,
                        o2: float = 13.57 * US) -> dict[str, Any]:
    """§5: o'_a, o'_b from o' at P = 2 and P = 8 (Table 2 rounds them to 12.1 and 0.182 µs)."""
    a, b = solve_overhead(P1, o1, P2, o2)
    return {"o_a_s": a, "o_b_s": b}


#: one master and at least one worker; the saturation search scans every P up to it
_WORKERS_P = Bound("an integer in 2..65536", 2, high=65536, integer=True)


@inputs(n=COUNT, P=_WORKERS_P,
        t_task=TIME, k_send=SIZE, k_recv=SIZE, L=TIME, G=TIME, o_a=TIME, o_b=TIME, O_send=TIME,
        O_recv=TIME)
def eval_t_ms(*, n: float = 1048576, P: float = 64, t_task: float = 0.0,
              k_send: float = 8, k_recv: float = 12, L: float = 50 * US,
              G: float = 0.0268 * US, o_a: float = 12.1 * US, o_b: float = 0.182 * US,
              O_send: float = 0.0708 * US, O_recv: float = 0.0722 * US) -> dict[str, Any]:
    """T(P) and the saturation point; defaults: Table 2, MASE-SI with T = 1 (8-byte task
    messages, 4T + 8 = 12-byte results). t_task (per-task compute) is not published: 0 s."""
    out: dict[str, Any] = dict(t_ms(n, P, t_task, k_send, k_recv, L, G, o_a, o_b, O_send,
                                    O_recv))
    out.update(saturation(n, t_task, k_send, k_recv, L, G, o_a, o_b, O_send, O_recv,
                          P_max=max(int(P), 256)))
    return out


EVALUATORS = {"t_ms": eval_t_ms, "overhead_growth": eval_overhead_growth,
              "solve_overhead": eval_solve_overhead}
