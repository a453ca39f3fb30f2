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
* ``measured``: the share of a window around the message during which *other* messages kept the
  link busy, from the previous replay pass (fixed-point iteration, ``passes`` replays; the first
  pass uses rho = 0). A message of service time s = k/C sent at t occupies every link it crosses
  during [t, t + s]; message m's window is centred on its own transmission and lasts
  W_m = max(``window``, 4·s_m)::

      rho_m = sum over the other messages j on the link of |[t_j, t_j + s_j] ∩ window_m| / W_m

  Why this rule: the message itself is not counted, so a lone message on an idle link waits for
  nothing (rho = 0); counting its own bytes against a window shorter than its transmission is what
  made one 1 MiB message at 100 Mbit/s (84 ms on the wire) read rho >> 1 over 10 us. Other
  traffic counts as the link time it takes inside the window, not as bytes at an instant, so
  rho >= 1 needs transmissions that overlap: more traffic than the link carries, the regime in
  which the queue has no steady state. A link kept busy back to back by others reads its busy
  fraction. The window is at least four of the message's own service times because a queue
  is built by the traffic of several transmissions: over a shorter one two equal messages sent
  together already read rho = 1. With four, m equal messages sent together read rho = (m-1)/4
  and take 1.33, 2 and 4 service times for m = 2, 3, 4 (first-come-first-served: 1.5, 2 and
  2.5 on average); five or more at once exceed the link over that span (rho >= 1). ``window``
  is the shortest window, the time scale over which traffic is taken as steady: set it longer
  than the program's bursts to average them with the quieter time around them. The busy time
  is kept per link in buckets of ``window``/4 and taken as spread evenly inside a bucket (a
  window's ends are placed to within a bucket); if the histogram would exceed ~16M cells the
  buckets widen and the shortest window with them (``window_s`` in the facts: the one used).

A link with rho >= 1 (analytic, or measured in the last pass) has no steady state: the M/M/1
premise fails and the model has no prediction. With ``saturation=refuse`` (the default) the replay
raises ``SaturationError`` saying how many messages and the largest rho; ``saturation=cap`` caps
rho at ``rho_max`` instead, counts the messages in ``saturated_messages`` and says in
``not_a_prediction`` that the makespan is not a prediction. A time is never negative or infinite.
"""

from __future__ import annotations

import math

from pathlib import Path

import numpy as np

from replay.errors import NoPredictionError
from replay.models.base import GAMMA, NetworkModel, Param, ParamError, profile_section, register

#: the measured window lasts at least this many service times of the message it is for
WINDOW_SERVICE_TIMES = 4.0
#: buckets of the busy-time histogram per shortest window: a window's ends fall inside a bucket,
#: whose busy time is taken as spread evenly, so they are that much finer than the window
BUCKETS_PER_WINDOW = 4
#: cells of the per-link busy-time histogram, at most (8 bytes each)
MAX_CELLS = 1 << 24


class SaturationError(NoPredictionError):
    """A link saturates (rho >= 1): the M/M/1 queue has no steady state, so no prediction."""


@register
class MM1(NetworkModel):
    NAME = "mm1"
    WHOLE_TRACE = True      # link utilisations over the whole run, before the replay
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
        "window": Param("time", "10us", "shortest window for measured rho (at least 4 service "
                        "times of each message)", strict=True),
        "passes": Param("count", 3, "replays for measured rho (fixed-point)", minimum=1),
        "saturation": Param("choice", "refuse", "rho >= 1: refuse (no prediction) or cap rho at "
                            "rho_max (a number that is not a prediction)",
                            choices=("refuse", "cap")),
        "rho_max": Param("factor", 0.99, "cap on rho with saturation=cap", strict=True),
        "L_host": Param("time", 0.0, "latency between ranks on one host"),
        "C_host": Param("bandwidth", "inf", "bandwidth between ranks on one host", strict=True,
                        allow_inf=True),
        "gamma": GAMMA,
    }

    def check(self, v: dict) -> None:
        if v["rho_max"] >= 1.0:
            raise ParamError(f"rho_max={v['rho_max']}: must be below 1")

    def kernel_params(self, v: dict, ctx) -> np.ndarray:
        from replay.kernel import make_params
        return make_params(P=float(ctx.nranks), gamma=v["gamma"])

    def passes(self, v: dict) -> int:
        return int(v["passes"]) if v["rho"] == "measured" else 1

    def message_delay(self, v: dict, ctx, send_times: np.ndarray | None = None,
                      horizon: float = 0.0, last: bool = True) -> tuple[np.ndarray, dict]:
        """Per-message network delay (ns) and saturation statistics; raises ``SaturationError``
        in the ``last`` pass if a message sees rho >= 1 and ``saturation`` is ``refuse``."""
        k = ctx.m_bytes
        C = v["C"]
        svc = k / C if math.isfinite(C) else np.zeros(len(k))
        # The topology does not change between the passes of one replay: compute the paths once.
        key = (v["ranks_per_host"], v["hosts_per_leaf"], v["spines"], v["leaves"])
        cached = getattr(ctx, "_mm1_paths", None)
        if cached is None or cached[0] != key:
            cached = _keep(ctx, "_mm1_paths", (key, _paths(v, ctx)))
        (up, mid, down), fan, down_fan, same_host, nlinks = cached[1]
        stages = [(up, fan[0]), (mid, fan[1]), (down, down_fan)]
        info: dict = {}
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
        elif send_times is None:  # first pass: no traffic known yet, so rho = 0
            crossed = sum((links >= 0).astype(float) for links, _ in stages)
            delay, n_sat, max_rho = crossed * (svc + v["tau"]), 0, 0.0
        else:
            delay, n_sat, max_rho, width = _measured(v, svc, (up, mid, down), nlinks, send_times,
                                                     horizon, ctx)
            info["window_s"] = width / 1e9
        host_cost = v["L_host"] + (k / v["C_host"] if math.isfinite(v["C_host"]) else 0.0)
        delay = np.where(same_host, host_cost, delay)
        info = {"saturated_messages": n_sat, "max_rho": max_rho, "links": int(nlinks), **info}
        if len(k) and same_host.all():
            # C, tau and the switch then change nothing, which a user setting them should hear
            info["one_host"] = ("every message is between ranks of one host, which cost L_host "
                                "+ k/C_host (here " + ("free" if v["L_host"] == 0 and
                                                       not math.isfinite(v["C_host"]) else
                                                       "as set") + "); C, tau and the switch do "
                                "not apply: set L_host and C_host, or give a --profile "
                                "measured on one host")
        # Only the last pass decides: the earlier ones start from rho = 0 and are not the answer.
        if n_sat and last:
            what = (f"M/M/1: {n_sat} messages cross a link with rho >= 1 (max rho {max_rho:.3g}"
                    f"{_how(v)}): the queue has no steady state, the model's premise fails")
            if v["saturation"] == "refuse":
                raise SaturationError(f"{what}, so there is no prediction (saturation=cap gives "
                                      f"a number with rho capped at {v['rho_max']:g}, which is "
                                      f"not a prediction)")
            info["not_a_prediction"] = (f"{what}; rho capped at {v['rho_max']:g}, so the "
                                        f"makespan is not a prediction")
        return delay, info

    def from_profile(self, data: dict, path: Path) -> dict:
        sec = profile_section(data, path, "mm1", ("C", "tau"))
        out = {"C": sec["C"], "tau": sec["tau"]}
        hosts = (data.get("measured_on") or {}).get("hosts")
        if isinstance(hosts, list) and len(hosts) == 1:
            # Measured between ranks of one host: that path is the model's host-internal one
            # (L_host + k/C_host); without this a one-host trace would get free messages.
            out.update({"L_host": sec["tau"], "C_host": sec["C"]})
        return out


def _how(v: dict) -> str:
    """How rho was obtained, for the saturation message."""
    if v["rho"] == "analytic":
        return ", analytic rho"
    return (f", measured over windows of at least {v['window'] / 1e9:g} s in the last of "
            f"{int(v['passes'])} passes")


def _measured(v: dict, svc: np.ndarray, links: tuple, nlinks: int, send_times: np.ndarray,
              horizon: float, ctx) -> tuple[np.ndarray, int, float, float]:
    """Measured-utilisation delays: (delay ns, saturated messages, max rho, shortest window ns)."""
    end = float(np.max(send_times + svc, initial=0.0))
    span = max(horizon, end)
    width = float(v["window"])
    bucket = width / BUCKETS_PER_WINDOW
    nbk = int(span // bucket) + 2
    if nbk * nlinks > MAX_CELLS:
        # Keep the histogram bounded: wider buckets, and windows as many buckets long as before.
        bucket = span / max(MAX_CELLS // max(nlinks, 1) - 2, 1)
        nbk = int(span // bucket) + 2
        width = max(width, BUCKETS_PER_WINDOW * bucket)
    # The histogram (up to 128 MB) is kept for the next pass: first-touching fresh memory
    # for it cost more than the pass's arithmetic (page faults; 2.6x on tree-allreduce P=512).
    need = (nbk + 1) * max(nlinks, 1)
    hist = getattr(ctx, "_mm1_hist", None)
    if hist is None or len(hist) < need:
        hist = _keep(ctx, "_mm1_hist", np.empty(need))
    from replay.models.mm1_kernel import measured_delay  # numba: only when the model runs

    up, mid, down = links
    delay, n_sat, max_rho = measured_delay(svc, up, mid, down, send_times, bucket, width, nbk,
                                           nlinks, float(v["rho_max"]), float(v["tau"]),
                                           hist[:need], WINDOW_SERVICE_TIMES)
    return delay, n_sat, max_rho, width


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
