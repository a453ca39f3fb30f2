"""Noise told apart from the network: the time inside MPI calls a network model cannot explain.

A traced run on a shared machine contains stalls (preemption, page faults, other jobs) that
happen while ranks are inside MPI calls. Every network model replaces the time inside MPI calls
with modelled transfer time, so such stalls vanish from a prediction. This module measures them
against a replay (``analyse``), and builds per-row delays that put them back (``trace_delays``,
``sample_delays``; ``replay.run(..., delay_ns=...)`` injects them). docs/replay.md, "Noise".

Definitions (per MPI call c = one non-region row with the rows that continue it, e.g. the rows of
one Waitall or Sendrecv; times in ns from the trace's first event):

* measured duration        D_c = t_end - t_start
* replayed duration        R_c = end' - start'  (the replay under the model, ``Result.row_*``)
* partner post             p_c, p'_c: the latest measured (and replayed) *start* of the calls c
  depends on on other ranks: for a call that completes a receive or a probe, the call that
  posted the send; for a call that completes a rendezvous or synchronous-mode send (k > S,
  Ssend/Issend, Sendrecv's send half), the call that posted the receive; for a collective, the
  last member's entry. Calls with no such dependency have none.
* explained duration       X_c = max(R_c, (p_c - t_start) + (end' - max(start', p'_c)))
  the replayed duration, or, when the partner posted later in the measurement than in the replay
  (it was held by computation or by an earlier stall), the measured wait for that partner plus
  the model's cost from the moment both sides were there.
* unexplained (excess)     e_c = max(0, D_c - X_c)
  placed at the end of the call, [t_end - e_c, t_end]: the explained part (waiting for the
  partner, then the transfer) comes first.

Per rank: in-MPI time = sum of D_c; unexplained = sum of e_c; machine-wide = the part of the
rank's unexplained intervals during which at least one other rank was in an unexplained interval
too (rule SHARED of ``_sweep``); single-rank = unexplained - machine-wide.
A *stall* (episode) is a maximal stretch of measured time during which at least one rank is in
an unexplained interval (rule EPISODE): its start, wall duration, ranks and rank-time.

Without a model (``in_mpi_overlap``): the stretches when every rank was inside an MPI call at
once (rule ALL). No rank computed then; a correct replay has such time only while messages or
collectives are in flight, so it bounds machine-wide noise from above (collectives and
exchanges count too).

Limits: the trace cannot tell a rank that was stalled inside its call from one held inside a
receive by a partner stalled inside *its* posting call (the partner entered on time): both count
as unexplained, and their overlap as machine-wide.
"""

from __future__ import annotations

import math
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hindsight import trace as tf
from hindsight.jit import njit
from replay import kernel as K
from replay.prepare import Prepared, ReplayError

# Episode wall durations of the histogram (ns): <10 us, 10-100 us, ..., >= 100 ms.
HIST_EDGES_NS = np.array([0.0, 1e4, 1e5, 1e6, 1e7, 1e8, math.inf])
TOP_STALLS = 10

_SR_SEND = tf.OP_CODE["Sendrecv_send"]
_SYNC = tf.op_lut(("Ssend", "Issend"))


# ------------------------------------------------------------------------------------------------
# Kernels


@njit(cache=True, nogil=True)
def _sweep(t, delta, rank, P, with_episodes):
    """Sweep over interval endpoints sorted by time (ends before starts at equal times, so
    touching intervals do not overlap). ``delta`` +1 opens an interval of ``rank``, -1 closes it;
    a rank's own intervals never overlap.

    Rules:
      ALONE    per rank, time during which it is the only rank inside an interval
      SHARED   per rank, its interval time minus ALONE (at least one other rank inside too)
      EPISODE  maximal stretches with at least one rank inside: start, end, distinct ranks,
               rank-time (the integral of the number of ranks inside)
      ALL      maximal stretches with all P ranks inside
    Returns (alone, union_wall, several_wall, ep_start, ep_end, ep_nranks, ep_rank_time,
    all_start, all_end), the episode and ALL arrays trimmed to their counts.
    """
    n = len(t)
    alone = np.zeros(P)
    union_wall = 0.0
    several_wall = 0.0
    cap = n // 2 + 1 if with_episodes else 1
    ep_start = np.empty(cap)
    ep_end = np.empty(cap)
    ep_nranks = np.zeros(cap, np.int64)
    ep_rt = np.zeros(cap)
    all_start = np.empty(n // 2 + 1)
    all_end = np.empty(n // 2 + 1)
    last_ep = np.full(P, -1, np.int64)
    count = 0
    id_sum = 0   # the sum of the ranks inside: the one rank when count == 1
    ne = -1
    na = 0
    for i in range(n):
        if i > 0 and count > 0:
            dt = t[i] - t[i - 1]
            union_wall += dt
            if count == 1:
                alone[id_sum] += dt
            else:
                several_wall += dt
            if with_episodes:
                ep_rt[ne] += dt * count
        r = rank[i]
        if delta[i] > 0:
            if count == 0 and with_episodes:
                ne += 1
                ep_start[ne] = t[i]
            if with_episodes and last_ep[r] != ne:
                last_ep[r] = ne
                ep_nranks[ne] += 1
            count += 1
            id_sum += r
            if count == P:
                all_start[na] = t[i]
        else:
            if count == P:
                all_end[na] = t[i]
                if all_end[na] > all_start[na]:
                    na += 1
            count -= 1
            id_sum -= r
            if count == 0 and with_episodes:
                ep_end[ne] = t[i]
    return (alone, union_wall, several_wall, ep_start[:ne + 1], ep_end[:ne + 1],
            ep_nranks[:ne + 1], ep_rt[:ne + 1], all_start[:na], all_end[:na])


@njit(cache=True, nogil=True)
def _place(call_off, call_end, unit_rank, unit_time):
    """Rule PLACE: per unit (a delay of rank r at replayed time u), the call of rank r in progress
    at u or the next one (the first whose replayed end is after u; the rank's last call when u
    is after all of them; -1 for a rank without calls). ``call_end`` is sorted within each
    rank's slice ``call_off[r]:call_off[r+1]``."""
    out = np.full(len(unit_rank), -1, np.int64)
    for j in range(len(unit_rank)):
        r = unit_rank[j]
        a = call_off[r]
        b = call_off[r + 1]
        if b == a:
            continue
        k = a + np.searchsorted(call_end[a:b], unit_time[j], side="right")
        out[j] = min(k, b - 1)
    return out


def _sorted_events(s: np.ndarray, e: np.ndarray, rank: np.ndarray):
    """The endpoints of the intervals [s, e) (empty ones left out) as (time, +1 start / -1 end,
    rank), by time, ends before starts at equal times, else in interval order."""
    keep = e > s
    if not keep.all():
        s, e, rank = s[keep], e[keep], rank[keep]
    # The ends first, then the starts: a stable sort by time alone then puts ends first at
    # equal times. Each rank's intervals come in order, so the times are a few sorted runs,
    # which NumPy's stable sort (timsort) merges.
    t = np.concatenate([e, s])
    delta = np.concatenate([-np.ones(len(e), np.int8), np.ones(len(s), np.int8)])
    rk = np.concatenate([rank, rank]).astype(np.int64, copy=False)
    order = np.argsort(t, kind="stable")
    return t[order].astype(np.float64, copy=False), delta[order], rk[order]


# ------------------------------------------------------------------------------------------------
# Calls


@dataclass
class Calls:
    """One entry per MPI call, in (rank, seq) order: its first row, rank, measured start/end."""

    row: np.ndarray
    rank: np.ndarray
    t_start: np.ndarray   # ns from the trace's first event (float)
    t_end: np.ndarray
    grp: np.ndarray       # per prepared row: the index of its call (-1: not an MPI row)


def calls_of(prep: Prepared) -> Calls:
    """The MPI calls of a prepared trace (region rows and rows of unknown ops excluded)."""
    rows = prep.rows
    return Calls(*_calls(rows["op"], rows["cont"], rows["rank"], rows["t_start"], rows["t_end"],
                         prep.t0))


@njit(cache=True, nogil=True)
def _calls(op, cont, rank, t_start, t_end, t0):
    """``Calls`` fields: a call starts at each MPI row (op > 0) that does not continue the call
    before it (rows continuing a call follow its first row directly: same rank, same times)."""
    n = len(op)
    nc = 0
    for i in range(n):
        if op[i] > 0 and not cont[i]:
            nc += 1
    row = np.empty(nc, np.int64)
    crank = np.empty(nc, np.int64)
    ts = np.empty(nc)
    te = np.empty(nc)
    grp = np.empty(n, np.int64)
    c = -1
    for i in range(n):
        if op[i] <= 0:
            grp[i] = -1
        elif cont[i]:
            grp[i] = c
        else:
            c += 1
            grp[i] = c
            row[c] = i
            crank[c] = rank[i]
            ts[c] = float(t_start[i] - t0)
            te[c] = float(t_end[i] - t0)
    return row, crank, ts, te, grp


@njit(cache=True, nogil=True)
def _p2p_partners(kind, msg, op, t_start, t0, rs, send_row, recv_row, m_bytes, S, sync_of,
                  sr_send):
    """Per row, the measured and replayed start of its point-to-point partner's posting row
    (-inf: none): a row completing a receive or a probe, the send's; a row completing a
    rendezvous or synchronous-mode send (or Sendrecv's send half), the receive's."""
    n = len(kind)
    pm = np.full(n, -np.inf)
    pr = np.full(n, -np.inf)
    M0 = len(m_bytes)
    for i in range(n):
        m = msg[i]
        k = kind[i]
        if m < 0 or m >= M0 or k == K.COLL:
            continue
        if k == K.RECV or k == K.WRECV or k == K.PROBE:
            p = send_row[m]
            pm[i] = float(t_start[p] - t0)
            pr[i] = rs[p]
        if k == K.SEND or k == K.WSEND or op[i] == sr_send:
            so = op[send_row[m]]
            if m_bytes[m] > S or sync_of[so if so >= 0 else len(sync_of) - 1]:
                p = recv_row[m]
                pm[i] = float(t_start[p] - t0)
                pr[i] = rs[p]
    return pm, pr


@njit(cache=True, nogil=True)
def _excess(grp, pm, pr, c_rank, c_ts, c_te, s_rep, e_rep, P):
    """Per call its unexplained time e_c (the module docstring's definitions; a call's partner
    post is the latest over its rows with one), and per rank the sums of D_c and of e_c."""
    nc = len(c_rank)
    cp_m = np.full(nc, -np.inf)
    cp_r = np.full(nc, -np.inf)
    for i in range(len(grp)):
        g = grp[i]
        if g >= 0 and np.isfinite(pm[i]):
            cp_m[g] = np.maximum(cp_m[g], pm[i])
            cp_r[g] = np.maximum(cp_r[g], pr[i])
    excess = np.empty(nc)
    in_mpi = np.zeros(P)
    unexpl = np.zeros(P)
    for c in range(nc):
        D = c_te[c] - c_ts[c]
        R = e_rep[c] - s_rep[c]
        W = -np.inf
        if np.isfinite(cp_m[c]):
            W = (cp_m[c] - c_ts[c]) + (e_rep[c] - np.maximum(s_rep[c], cp_r[c]))
        excess[c] = np.maximum(D - np.maximum(R, W), 0.0)
        r = c_rank[c]
        if 0 <= r < P:
            in_mpi[r] += D
            unexpl[r] += excess[c]
    return excess, in_mpi, unexpl


# ------------------------------------------------------------------------------------------------
# The report


@dataclass
class NoiseReport:
    """Unexplained in-MPI time of one replay (ns). Per-rank arrays are indexed by rank, per-call
    arrays by ``calls``."""

    model: str
    nranks: int
    calls: Calls
    excess: np.ndarray            # e_c per call
    in_mpi: np.ndarray            # per rank: sum of D_c
    unexplained: np.ndarray       # per rank: sum of e_c
    shared: np.ndarray            # per rank: machine-wide part of unexplained
    union_wall: float             # wall time with at least one rank unexplained
    several_wall: float           # wall time with at least two
    ep_start: np.ndarray
    ep_end: np.ndarray
    ep_nranks: np.ndarray
    ep_rank_time: np.ndarray
    ep_of_call: np.ndarray = field(repr=False)   # per call with excess > 0: its episode (-1)
    makespan: float = 0.0

    @property
    def total_in_mpi(self) -> float:
        return float(self.in_mpi.sum())

    @property
    def total_unexplained(self) -> float:
        return float(self.unexplained.sum())

    @property
    def total_shared(self) -> float:
        return float(self.shared.sum())

    def stalls(self, top: int = TOP_STALLS) -> list[dict[str, Any]]:
        """The longest episodes (wall duration): start and duration in s, ranks, rank-time."""
        dur = self.ep_end - self.ep_start
        out = []
        for k in np.argsort(-dur, kind="stable")[:top]:
            sel = self.ep_of_call == k
            ranks = np.unique(self.calls.rank[sel])
            out.append({"start_s": float(self.ep_start[k]) / 1e9,
                        "duration_s": float(dur[k]) / 1e9,
                        "ranks": [int(r) for r in ranks[:16]],
                        "nranks": int(self.ep_nranks[k]),
                        "rank_time_s": float(self.ep_rank_time[k]) / 1e9})
        return out

    def histogram(self) -> list[dict[str, Any]]:
        """Episodes by wall duration (decades from 10 us): count and unexplained rank-time."""
        dur = self.ep_end - self.ep_start
        b = np.clip(np.searchsorted(HIST_EDGES_NS, dur, side="right") - 1, 0,
                    len(HIST_EDGES_NS) - 2)
        cnt = np.bincount(b, minlength=len(HIST_EDGES_NS) - 1)
        rt = np.bincount(b, weights=self.ep_rank_time, minlength=len(HIST_EDGES_NS) - 1)
        return [{"from_s": float(HIST_EDGES_NS[i]) / 1e9,
                 "to_s": float(HIST_EDGES_NS[i + 1]) / 1e9 if i + 2 < len(HIST_EDGES_NS)
                 else None, "count": int(cnt[i]), "rank_time_s": float(rt[i]) / 1e9}
                for i in range(len(cnt))]

    def summary(self) -> dict[str, Any]:
        """The ``noise`` object of ``--json`` (seconds; rank-times summed over ranks)."""
        return {
            "model": self.model,
            "in_mpi_s": self.total_in_mpi / 1e9,
            "unexplained_s": self.total_unexplained / 1e9,
            "machine_wide_s": self.total_shared / 1e9,
            "single_rank_s": (self.total_unexplained - self.total_shared) / 1e9,
            "unexplained_wall_s": self.union_wall / 1e9,
            "several_ranks_wall_s": self.several_wall / 1e9,
            "calls": int(len(self.excess)),
            "calls_with_excess": int((self.excess > 0).sum()),
            "per_rank": {"in_mpi_s": (self.in_mpi / 1e9).tolist(),
                         "unexplained_s": (self.unexplained / 1e9).tolist(),
                         "machine_wide_s": (self.shared / 1e9).tolist()},
            "stalls": self.stalls(),
            "histogram": self.histogram(),
        }

    def line(self) -> str:
        """``noise: X of Y inside MPI calls not explained by MODEL (Z on several ranks at once)``"""
        from replay.units import fmt_time
        return (f"noise: {fmt_time(self.total_unexplained)} of {fmt_time(self.total_in_mpi)} "
                f"inside MPI calls not explained by {self.model} "
                f"({fmt_time(self.total_shared)} on several ranks at once)")


def _eager_limit(params: dict[str, Any]) -> float:
    s = params.get("S")
    try:
        return float(s) if s is not None else math.inf
    except (TypeError, ValueError):
        return math.inf


def analyse(prep: Prepared, res: Any) -> NoiseReport:
    """The unexplained in-MPI time of ``prep`` under the replay ``res`` (``replay.run`` with
    ``record=True``); definitions in the module docstring."""
    if res.row_start_ns is None:
        raise ReplayError("noise analysis needs per-event times (replay with record=True)")
    rows = prep.rows
    calls = calls_of(prep)
    P = prep.nranks
    rs, re_ = res.row_start_ns, res.row_end_ns
    # Partner posts per row (measured and replayed start of the posting row), -inf: none.
    pm, pr = _p2p_partners(rows["kind"], rows["msg"], rows["op"], rows["t_start"], prep.t0, rs,
                           prep.msgs["send_row"], prep.msgs["recv_row"], prep.msgs["bytes"],
                           _eager_limit(res.params), _SYNC, _SR_SEND)
    # a collective: the last member's entry
    coll = prep.coll
    if len(coll["comm"]) and len(coll["rows"]):
        ts = (rows["t_start"] - prep.t0).astype(np.float64)
        crow = np.asarray(coll["rows"], np.int64)
        off = np.asarray(coll["off"], np.int64)
        nonempty = np.diff(off) > 0
        starts = off[:-1][nonempty]
        last_m = np.maximum.reduceat(ts[crow], starts)
        last_r = np.maximum.reduceat(rs[crow], starts)
        inst = np.repeat(np.arange(nonempty.sum()), np.diff(off)[nonempty])
        pm[crow] = last_m[inst]
        pr[crow] = last_r[inst]
    excess, in_mpi, unexpl = _excess(calls.grp, pm, pr, calls.rank, calls.t_start,
                                     calls.t_end, rs[calls.row], re_[calls.row], P)
    pos = np.flatnonzero(excess > 0)
    x_start = calls.t_end[pos] - excess[pos]
    t, delta, rk = _sorted_events(x_start, calls.t_end[pos], calls.rank[pos])
    alone, union_wall, several_wall, ep_s, ep_e, ep_n, ep_rt, _, _ = _sweep(
        t, delta, rk, max(P, 1), True)
    shared = np.maximum(unexpl - alone, 0.0)
    # episode of each call: the last episode starting at or before the call's excess starts
    ep_of_call = np.full(len(excess), -1, np.int64)
    if len(ep_s):
        ep_of_call[pos] = np.searchsorted(ep_s, x_start, side="right") - 1
    return NoiseReport(res.model, P, calls, excess, in_mpi, unexpl, shared, float(union_wall),
                       float(several_wall), ep_s, ep_e, ep_n, ep_rt, ep_of_call,
                       float(prep.measured_makespan_ns))


# ------------------------------------------------------------------------------------------------
# Injection


def trace_delays(report: NoiseReport) -> np.ndarray:
    """Per prepared row: the trace's own unexplained time of each call, at the call's first row
    (``replay.run(..., delay_ns=...)`` holds the rank that long just before entering the call)."""
    n = len(report.calls.grp)
    d = np.zeros(n)
    d[report.calls.row] = report.excess
    return d


def sample_delays(report: NoiseReport, res: Any, rng: np.random.Generator) -> np.ndarray:
    """Per prepared row: delays drawn from the trace's episodes (docs/replay.md, "Noise").

    As many episodes as the trace had are drawn with replacement; each is placed at a uniform
    random time of the noiseless replay ``res`` (``record=True``) and keeps its shape: each of its
    unexplained intervals lands on the same rank, at the same offset from the episode's start,
    on the call of that rank in progress at that replayed time (or the next one, rule PLACE).
    Co-stalls of several ranks stay together; the expected total is the trace's."""
    calls = report.calls
    n = len(calls.grp)
    d = np.zeros(n)
    pos = np.flatnonzero(report.excess > 0)
    E = len(report.ep_start)
    if not len(pos) or not E:
        return d
    ep = report.ep_of_call[pos]
    order = np.argsort(ep, kind="stable")
    pos, ep = pos[order], ep[order]
    ep_off = np.searchsorted(ep, np.arange(E + 1))
    offset = calls.t_end[pos] - report.excess[pos] - report.ep_start[ep]
    draw = rng.integers(0, E, size=E)
    span = max(float(res.makespan_ns), 1.0)
    at = rng.uniform(0.0, span, size=E)
    sizes = ep_off[draw + 1] - ep_off[draw]
    idx = np.concatenate([np.arange(ep_off[k], ep_off[k + 1]) for k in draw]) if sizes.sum() \
        else np.zeros(0, np.int64)
    u = np.repeat(at, sizes) + offset[idx]
    urank = calls.rank[pos[idx]]
    # replayed call ends per rank, sorted within each rank (calls come in rank, seq order)
    P = report.nranks
    cend = res.row_end_ns[calls.row]
    call_off = tf.rank_offsets(calls.rank, P)
    cend_sorted = cend.copy()
    for r in np.flatnonzero(np.diff(call_off) > 1):
        a, b = call_off[r], call_off[r + 1]
        cend_sorted[a:b] = np.maximum.accumulate(cend[a:b])
    target = _place(call_off.astype(np.int64), cend_sorted, urank.astype(np.int64),
                    u.astype(np.float64))
    ok = target >= 0
    np.add.at(d, calls.row[target[ok]], report.excess[pos[idx]][ok])
    return d


# ------------------------------------------------------------------------------------------------
# Without a model


def in_mpi_overlap(prep: Prepared, top: int = TOP_STALLS) -> dict[str, Any]:
    """What the measured times tell without a model: per rank the time inside MPI calls, and the
    stretches when every rank was inside an MPI call at once (rule ALL of ``_sweep``)."""
    calls = calls_of(prep)
    P = prep.nranks
    D = calls.t_end - calls.t_start
    in_mpi = np.bincount(calls.rank, weights=D, minlength=P)[:P]
    t, delta, rk = _sorted_events(calls.t_start, calls.t_end, calls.rank)
    _, union_wall, several_wall, _, _, _, _, a_s, a_e = _sweep(t, delta, rk, max(P, 1), False)
    dur = a_e - a_s
    order = np.argsort(-dur, kind="stable")[:top]
    return {
        "in_mpi_s": float(in_mpi.sum()) / 1e9,
        "per_rank_in_mpi_s": (in_mpi / 1e9).tolist(),
        "any_rank_in_mpi_wall_s": float(union_wall) / 1e9,
        "all_ranks_in_mpi_s": float(dur.sum()) / 1e9 if P > 1 else 0.0,
        "all_ranks_in_mpi_intervals": int(len(dur)) if P > 1 else 0,
        "longest_all_in_mpi": [{"start_s": float(a_s[k]) / 1e9, "duration_s": float(dur[k]) / 1e9}
                               for k in order] if P > 1 else [],
        "makespan_s": float(prep.measured_makespan_ns) / 1e9,
    }


def noise_info(trace_dir: Path | str, profile: Path | str | None = None,
               model: str = "loggps") -> dict[str, Any]:
    """What the trace tells about noise inside MPI calls (replay/noise.py, docs/replay.md
    "Noise"): without a profile, the time every rank was inside an MPI call at once; with a
    calibrated profile, also the in-MPI time that profile's network cannot explain, and how much
    of it was on several ranks at once. Reads and prepares the whole trace (the replay cache),
    so it runs only when asked. Raises ``TraceError``, ``ReplayError`` or models' ``ParamError``."""
    from replay import models as M
    from replay.engine import run
    from replay.prepare import prepare

    trace_dir = Path(trace_dir)
    manifest = tf.read_manifest(trace_dir)
    complete = bool(manifest.get("complete"))
    prep = prepare(trace_dir, allow_partial=not complete)
    out: dict[str, Any] = {"without_model": in_mpi_overlap(prep)}
    if profile is not None:
        mod = M.get_model(model)
        from replay.recorder_rules import trace_rules
        rules = trace_rules(profile, manifest)
        values = M.resolve(mod, {}, M.load_profile(profile, mod, rules.below))
        res = run(prep, mod, resolved=values, record=True, flags=rules.flags_for(mod),
                  tracer_cost=rules.tracer_ns(mod), resume=rules.resume_for(mod))
        rep = analyse(prep, res)
        out["with_model"] = rep.summary()
        out["with_model"]["profile"] = str(profile)
        out["with_model"]["predicted_makespan_s"] = res.makespan_ns / 1e9
        out["with_model"]["line"] = rep.line()
    return out
