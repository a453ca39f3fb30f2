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

from pathlib import Path

import numba as nb
import numpy as np

from replay.models.base import NetworkModel, Param, ParamError, profile_section, register


@register
class MM1(NetworkModel):
    NAME = "mm1"
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

    def check(self, v: dict) -> None:
        if v["rho_max"] >= 1.0:
            raise ParamError(f"rho_max={v['rho_max']}: must be below 1")

    def kernel_params(self, v: dict, ctx) -> np.ndarray:
        from replay.kernel import make_params
        return make_params(P=float(ctx.nranks))

    def passes(self, v: dict) -> int:
        return int(v["passes"]) if v["rho"] == "measured" else 1

    def message_delay(self, v: dict, ctx, send_times: np.ndarray | None = None,
                          horizon: float = 0.0) -> tuple[np.ndarray, dict]:
        """Per-message network delay (ns) and saturation statistics."""
        k = ctx.m_bytes
        C = v["C"]
        svc = k / C if math.isfinite(C) else np.zeros_like(k)
        # The topology does not change between the passes of one replay: compute the paths once.
        key = (v["ranks_per_host"], v["hosts_per_leaf"], v["spines"], v["leaves"])
        cached = getattr(ctx, "_mm1_paths", None)
        if cached is None or cached[0] != key:
            cached = _keep(ctx, "_mm1_paths", (key, _paths(v, ctx)))
        (up, mid, down), fan, down_fan, same_host, nlinks = cached[1]
        stages = [(up, fan[0]), (mid, fan[1]), (down, down_fan)]
        if v["rho"] == "analytic":
            delay = np.zeros(len(k))
            saturated = np.zeros(len(k), bool)
            max_rho = 0.0
            tcomp = v["Tcomp"] or ctx.default_tcomp()
            for links, fanin in stages:
                on = links >= 0
                rho = fanin / max(tcomp, 1e-300) * svc if tcomp > 0 else np.zeros_like(svc)
                saturated |= on & (rho >= 1.0)
                max_rho = max(max_rho, float(np.max(np.where(on, rho, 0.0), initial=0.0)))
                rho = np.minimum(rho, v["rho_max"])
                delay += np.where(on, svc / (1.0 - rho) + v["tau"], 0.0)
            n_sat = int(saturated.sum())
        else:
            W = float(v["window"])
            if send_times is None:  # first pass: no traffic known yet, so rho = 0 (infinite capacity)
                send_times, nb, cap = np.zeros(len(k)), 1, math.inf
            else:
                nb = int(horizon // W) + 2
                # Keep the histogram to at most ~16M cells; widen the window if needed (reported).
                if nb * nlinks > 1 << 24:
                    W = horizon / max((1 << 24) // max(nlinks, 1) - 2, 1)
                    nb = int(horizon // W) + 2
                cap = (C * W) if math.isfinite(C) else math.inf
            # The histogram (up to 128 MB) is kept for the next pass: first-touching fresh memory
            # for it cost more than the pass's arithmetic (page faults; 2.6x on tree-allreduce P=512).
            need = nb * max(nlinks, 1)
            hist = getattr(ctx, "_mm1_hist", None)
            if hist is None or len(hist) < need:
                hist = _keep(ctx, "_mm1_hist", np.empty(need))
            delay, n_sat, max_rho = _measured_delay(k, svc, up, mid, down, send_times, W, nb, nlinks,
                                                    cap, float(v["rho_max"]), float(v["tau"]),
                                                    hist[:need])
        host_cost = v["L_host"] + (k / v["C_host"] if math.isfinite(v["C_host"]) else 0.0)
        delay = np.where(same_host, host_cost, delay)
        return delay, {"saturated_messages": n_sat, "max_rho": max_rho,
                       "links": int(nlinks)}

    def from_profile(self, data: dict, path: Path) -> dict:
        sec = profile_section(data, path, "mm1", ("C", "tau"))
        out = {"C": sec["C"], "tau": sec["tau"]}
        hosts = (data.get("measured_on") or {}).get("hosts")
        if isinstance(hosts, list) and len(hosts) == 1:
            # Measured between ranks of one host: that path is the model's host-internal one
            # (L_host + k/C_host); without this a one-host trace would get free messages.
            out.update({"L_host": sec["tau"], "C_host": sec["C"]})
        return out


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


def _keep(ctx, name: str, value):
    """Remember ``value`` on the replay context for the next pass; returns it. A context that
    takes no attributes simply recomputes it each pass."""
    try:
        setattr(ctx, name, value)
    except AttributeError:
        pass
    return value


@nb.njit(cache=True, nogil=True)
def _measured_delay(k, svc, up, mid, down, send_times, W, nbk, nlinks, cap, rho_max, tau, hist):
    """Measured-utilisation delays in two passes over the messages (no temporaries): the
    per-link traffic histogram in window-wide buckets (``hist``, nlinks·nbk cells, overwritten),
    then each message's sliding-window load interpolated between the buckets its window
    straddles, and eq. 7 per stage crossed."""
    M = len(k)
    hist[:] = 0.0
    bucket = np.empty(M, np.int64)
    for m in range(M):
        b = int(send_times[m] // W)
        b = min(max(b, 0), nbk - 1)
        bucket[m] = b
        for links in (up, mid, down):
            if links[m] >= 0:
                hist[links[m] * nbk + b] += k[m]
    delay = np.zeros(M)
    n_sat = 0
    max_rho = 0.0
    for m in range(M):
        b = bucket[m]
        f = min(max(send_times[m] / W - b, 0.0), 1.0)
        sat = False
        for links in (up, mid, down):
            ln = links[m]
            if ln < 0:
                continue
            cell = ln * nbk + b
            # window [t - W/2, t + W/2]: bucket b plus the part of the neighbour it reaches
            load = hist[cell] * (1.0 - abs(f - 0.5))
            if f < 0.5 and b > 0:
                load += hist[cell - 1] * (0.5 - f)
            elif f >= 0.5 and b < nbk - 1:
                load += hist[cell + 1] * (f - 0.5)
            rho = load / cap
            if rho >= 1.0:
                sat = True
            if rho > max_rho:
                max_rho = rho
            delay[m] += svc[m] / (1.0 - min(rho, rho_max)) + tau
        if sat:
            n_sat += 1
    return delay, n_sat, max_rho
