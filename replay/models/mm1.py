"""M/M/1 delay over a leaf/spine switch (paper 000, Kuntraruk et al., §IV-A, eqs. 7-11).

Each switch stage a message crosses is an M/M/1 queue with utilisation rho = lambda·(k/C)::

    D(k) = (k/C) / (1 - rho) + tau                                  (eq. 7)
    T_comm = D_leaf1 + D_spine + D_leaf2                            (eq. 11)

Topology: hosts are numbered by rank placement (``ranks_per_host``, or the manifest's ``hosts``);
``hosts_per_leaf`` hosts hang off each leaf, every leaf connects to each of ``spines`` spines.
A message between hosts on different leaves crosses leaf1 (leaf -> spine link), spine (spine ->
leaf link) and leaf2 (leaf -> host link); on one leaf it crosses only the leaf -> host link; ranks
on one host bypass the switch (cost ``L_host + k/C_host``). The spine is chosen by
(source host + destination host) mod spines.

Utilisation ``rho``:

* ``analytic`` (the paper): lambda = fan-in / T_comp with fan-in ``hosts_per_leaf`` at leaf1 (eq. 8),
  ``leaves`` at the spine (eq. 9, 16 in the paper) and ``spines`` at leaf2 (eq. 10, 8 in the paper).
  T_comp defaults to the trace's total compute time divided by its number of messages.
* ``measured``: bytes that crossed the link in the ``window`` centred on the message's send
  time, divided by C·window, from the previous replay pass (fixed-point iteration, ``passes`` replays; the first
  pass uses rho = 0). Traffic is kept in window-wide buckets per link and the sliding window is
  interpolated between the buckets it straddles.

rho >= 1 means the link is saturated: the delay is computed with rho capped at ``rho_max`` and the
message is counted in ``saturated_messages``; a time is never negative or infinite.
"""

from __future__ import annotations

import math

import numpy as np

from replay.models import Param, ParamError

NAME = "mm1"
MODE = "network"
PARAMS: dict[str, Param] = {
    "C": Param("bandwidth", "10Gbit/s", "link capacity", strict=True, allow_inf=True),
    "tau": Param("time", 0.0, "propagation delay per stage (the paper sets 0)"),
    "hosts_per_leaf": Param("count", 8, "hosts per leaf switch (fan-in of leaf1)", minimum=1),
    "spines": Param("count", 8, "spine switches (fan-in of leaf2)", minimum=1),
    "leaves": Param("count", 16, "leaf links into each spine (fan-in of the spine stage)",
                    minimum=1),
    "ranks_per_host": Param("count", 0, "ranks per host; 0 = the manifest's placement or 1"),
    "rho": Param("choice", "analytic", "utilisation: analytic (paper) or measured (replayed)",
                 choices=("analytic", "measured")),
    "Tcomp": Param("time", 0.0, "T_comp for analytic rho; 0 = total compute / messages"),
    "window": Param("time", "10us", "sliding window for measured rho", strict=True),
    "passes": Param("count", 3, "replays for measured rho (fixed-point)", minimum=1),
    "rho_max": Param("factor", 0.99, "cap on rho when a link saturates", strict=True),
    "L_host": Param("time", 0.0, "latency between ranks on one host"),
    "C_host": Param("bandwidth", "inf", "bandwidth between ranks on one host", strict=True,
                    allow_inf=True),
}
ALIASES: dict[str, tuple[str, ...]] = {}


def check(v: dict) -> None:
    if v["rho_max"] >= 1.0:
        raise ParamError(f"rho_max={v['rho_max']}: must be below 1")


def kernel_params(v: dict, ctx) -> np.ndarray:
    from replay.kernel import make_params
    return make_params(P=float(ctx.nranks))


def passes(v: dict) -> int:
    return int(v["passes"]) if v["rho"] == "measured" else 1


def _paths(v: dict, ctx):
    """Per message: the three link ids (-1 = stage not crossed), analytic fan-ins, same-host."""
    if v["ranks_per_host"] > 0:
        host = np.arange(ctx.nranks) // int(v["ranks_per_host"])
    else:
        host = ctx.host_of_rank
    hpl = int(v["hosts_per_leaf"])
    ns = int(v["spines"])
    nh = int(host.max()) + 1 if len(host) else 1
    nl = -(-nh // hpl)
    hs, hd = host[ctx.m_src], host[ctx.m_dst]
    ls, ld = hs // hpl, hd // hpl
    spine = (hs + hd) % ns
    same_host = hs == hd
    cross = (ls != ld) & ~same_host
    up = np.where(cross, ls * ns + spine, -1)
    mid = np.where(cross, nl * ns + spine * nl + ld, -1)
    down = np.where(same_host, -1, 2 * nl * ns + hd)
    nlinks = 2 * nl * ns + nh
    fan = np.array([hpl, v["leaves"], ns], float)
    # A message on one leaf only crosses the leaf -> host link, whose fan-in is the leaf's hosts.
    down_fan = np.where(cross, ns, hpl).astype(float)
    return (up, mid, down), fan, down_fan, same_host, nlinks


def message_delay(v: dict, ctx, send_times: np.ndarray | None = None,
                  horizon: float = 0.0) -> tuple[np.ndarray, dict]:
    """Per-message network delay (ns) and saturation statistics."""
    k = ctx.m_bytes
    C = v["C"]
    svc = k / C if math.isfinite(C) else np.zeros_like(k)
    (up, mid, down), fan, down_fan, same_host, nlinks = _paths(v, ctx)
    stages = [(up, fan[0]), (mid, fan[1]), (down, down_fan)]
    delay = np.zeros(len(k))
    saturated = np.zeros(len(k), bool)
    max_rho = 0.0
    if v["rho"] == "analytic":
        tcomp = v["Tcomp"] or ctx.default_tcomp()
        for links, fanin in stages:
            on = links >= 0
            rho = fanin / max(tcomp, 1e-300) * svc if tcomp > 0 else np.zeros_like(svc)
            saturated |= on & (rho >= 1.0)
            max_rho = max(max_rho, float(np.max(np.where(on, rho, 0.0), initial=0.0)))
            rho = np.minimum(rho, v["rho_max"])
            delay += np.where(on, svc / (1.0 - rho) + v["tau"], 0.0)
    else:
        W = float(v["window"])
        if send_times is None:
            rho_of = [np.zeros(len(k))] * 3
        else:
            nb = int(horizon // W) + 2
            # Keep the histogram to at most ~16M cells; widen the window if needed (reported).
            if nb * nlinks > 1 << 24:
                W = horizon / max((1 << 24) // max(nlinks, 1) - 2, 1)
                nb = int(horizon // W) + 2
            b = np.clip((send_times // W).astype(np.int64), 0, nb - 1)
            f = np.clip(send_times / W - b, 0.0, 1.0)
            rho_of = []
            hist = np.zeros(nlinks * nb)
            for links, _ in stages:
                on = links >= 0
                hist += np.bincount(links[on] * nb + b[on], weights=k[on], minlength=nlinks * nb)
            cap = (C * W) if math.isfinite(C) else math.inf
            for links, _ in stages:
                on = links >= 0
                cell = np.where(on, links, 0) * nb + b
                # window [t - W/2, t + W/2]: bucket b plus the part of the neighbour it reaches
                prev = np.where(b > 0, hist[np.maximum(cell - 1, 0)], 0.0)
                nxt = np.where(b < nb - 1, hist[np.minimum(cell + 1, len(hist) - 1)], 0.0)
                load = hist[cell] * (1.0 - np.abs(f - 0.5)) + \
                    np.where(f < 0.5, prev * (0.5 - f), nxt * (f - 0.5))
                rho_of.append(np.where(on, load / cap, 0.0))
        for (links, _), rho in zip(stages, rho_of):
            on = links >= 0
            saturated |= on & (rho >= 1.0)
            max_rho = max(max_rho, float(np.max(rho, initial=0.0)))
            rho = np.minimum(rho, v["rho_max"])
            delay += np.where(on, svc / (1.0 - rho) + v["tau"], 0.0)
    host_cost = v["L_host"] + (k / v["C_host"] if math.isfinite(v["C_host"]) else 0.0)
    delay = np.where(same_host, host_cost, delay)
    return delay, {"saturated_messages": int(saturated.sum()), "max_rho": max_rho,
                   "links": int(nlinks)}
