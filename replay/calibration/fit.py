"""Fitting network parameters to micro-benchmark timings (plain numpy/scipy; formulas in
docs/calibration.md with their sources).

Inputs are per-size medians in seconds; message sizes in bytes. Timings span four orders of
magnitude, so every least-squares fit here weighs residuals relative to the measured value
(minimises sum(((model - t) / t)^2)): otherwise the 16 MiB point alone would decide the latency.
R^2 is computed on log10 of the times for the same reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from typing import TYPE_CHECKING

import numpy as np
from scipy.optimize import nnls

if TYPE_CHECKING:
    from replay.resume import ResumeCurve


def line_fit(k: np.ndarray, t: np.ndarray) -> tuple[float, float, float]:
    """t ~ a + b·k with a, b >= 0, relative residuals. Returns (a, b, sum of squared rel. res.)."""
    k, t = np.asarray(k, float), np.asarray(t, float)
    w = 1.0 / t
    A = np.column_stack([w, k * w])
    coef, _ = nnls(A, np.ones_like(t))
    a, b = float(coef[0]), float(coef[1])
    # A term under a millionth of the fitted time at every size (b's share peaks at the largest
    # size, a's at the smallest) is the solver's rounding (1e-19 s/B), below any timer: 0.
    b = 0.0 if b * k.max() < 1e-6 * (a + b * k.max()) else b
    a = 0.0 if a < 1e-6 * (a + b * k.min()) else a
    sse = float(np.sum(((a + b * k) / t - 1.0) ** 2))
    return a, b, sse


def r2_log(model: np.ndarray, t: np.ndarray) -> float:
    """Coefficient of determination of log10(model) against log10(t)."""
    y = np.log10(np.asarray(t, float))
    f = np.log10(np.maximum(np.asarray(model, float), 1e-300))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    return 1.0 - float(np.sum((y - f) ** 2)) / ss_tot if ss_tot > 0 else float("nan")


def _slope(k: np.ndarray, y: np.ndarray) -> float:
    """Slope of ``line_fit``, 0 unless at least 2 different sizes are given (pickled payloads
    below the ~130-byte header all have one size: a slope through them is noise)."""
    return line_fit(k, y)[1] if len(np.unique(k)) >= 2 else 0.0


def top_sizes(k: np.ndarray, above: float = -math.inf) -> np.ndarray:
    """Mask of the sizes that decide an asymptotic (long-message) slope: those within a factor 8
    of the largest (at least the 2 largest), restricted to those above ``above`` when at least 2
    remain. (Over a wider range, sizes that still fit a shaper's bucket or a socket buffer pull
    the slope down: 6.3 instead of 8.4 ns/B on a 1 Gbit/s link with 64 KiB..4 MiB.)"""
    k = np.asarray(k, float)
    top = (k >= k.max() / 8) | (k >= np.sort(k)[-min(len(k), 2)])
    sel = top & (k > above)
    return sel if sel.sum() >= 2 else top


def fit_hockney(k: np.ndarray, t: np.ndarray) -> dict:
    """Hockney t(k) = l + k·g (papers 001 §2, 002 §5: t_s + m·t_w, Ex = 2(l + K·g)) with g the
    inverse asymptotic bandwidth, Hockney's r_inf: the slope over the largest sizes
    (``top_sizes``); l the median of t - k·g over the smallest third. (A least-squares line
    over all sizes, with residuals relative to t, let the small sizes pull g: 61 ns/B for a
    100 Mbit/s link whose large messages take 83.6.)"""
    k = np.asarray(k, float)
    t = np.asarray(t, float)
    top = top_sizes(k)
    g = line_fit(k[top], t[top])[1]
    small = k <= np.sort(k)[max(0, len(k) // 3 - 1)]
    l = max(float(np.median(t[small] - g * k[small])), 0.0)
    model = l + g * k
    return {"l": l, "g": g, "r2": r2_log(model, t),
            "residuals": ((model - t) / t).tolist()}


@dataclass
class Break:
    S: float                  # largest size of the first segment (bytes); inf: no break
    index: int                # first index of the second segment (len(k) if none)
    small: tuple[float, float]
    large: tuple[float, float]
    bic_split: float
    bic_single: float


def find_break(k: np.ndarray, t: np.ndarray, min_points: int = 2) -> Break:
    """Segmented regression: two independent lines a1 + b1·k (k <= S) and a2 + b2·k (k > S); S is
    the split with the least relative squared error, kept only if it beats one line by the Bayesian
    information criterion (2 more parameters plus the break position)."""
    k = np.asarray(k, float)
    t = np.asarray(t, float)
    n = len(k)
    a, b, sse1 = line_fit(k, t)
    bic1 = n * math.log(max(sse1, 1e-300) / n) + 2 * math.log(n)
    best = Break(math.inf, n, (a, b), (a, b), math.inf, bic1)
    for i in range(min_points, n - min_points + 1):
        a1, b1, s1 = line_fit(k[:i], t[:i])
        a2, b2, s2 = line_fit(k[i:], t[i:])
        bic = n * math.log(max(s1 + s2, 1e-300) / n) + 5 * math.log(n)
        if bic < best.bic_split:
            best = Break(float(k[i - 1]), i, (a1, b1), (a2, b2), bic, bic1)
    if best.bic_split >= bic1:
        # one line explains the curve: no rendezvous switch seen within the measured sizes
        return Break(math.inf, n, (a, b), (a, b), best.bic_split, bic1)
    return best


def split_at(k: np.ndarray, t: np.ndarray, S: float) -> Break:
    """Two lines split at a known S (the measured protocol switch): k <= S, and the long-message
    line over the largest sizes above S (``top_sizes``). A small side with fewer than 2 sizes
    takes the line of all sizes."""
    k = np.asarray(k, float)
    t = np.asarray(t, float)
    i = int(np.searchsorted(k, S, side="right"))
    a, b, sse = line_fit(k, t)
    small = line_fit(k[:i], t[:i])[:2] if i >= 2 else (a, b)
    # the long-message line: sizes above S, but only the largest (a TCP switch at 128 B would
    # otherwise let 4 decades of sizes decide G)
    top = top_sizes(k, S)
    large = line_fit(k[top], t[top])[:2]
    return Break(float(S), i, small, large, math.nan, math.nan)


def long_message_slope(k: np.ndarray, t: np.ndarray, brk: Break) -> float:
    """Time per byte of long messages: the large segment's slope when a switch S was found,
    else the slope over the largest sizes (``top_sizes``)."""
    if math.isfinite(brk.S):
        return brk.large[1]
    top = top_sizes(k)
    return line_fit(k[top], t[top])[1]


def eager_limit(sizes: list[float], send_s: list[float], delay_s: float) -> float:
    """S from the eager probe: the largest size below the first one whose send lasted at least
    half the receiver's delay (it waited for the receive: rendezvous); inf if none did."""
    S = math.inf
    prev = 0.0
    for k, t in sorted(zip(sizes, send_s)):
        if t >= 0.5 * delay_s:
            return prev
        prev = float(k)
    return S


def loggps_one_way(k: np.ndarray, p: dict) -> np.ndarray:
    """One-way time of a ping-pong under replay.models.loggps (see its docstring): eager
    o_s(k) + L + (k-1)·G + o_r(k); above S the clear to send and the data's hop add 2H,
    H = max(L, 0) + o_hop."""
    k = np.asarray(k, float)
    O_s, O_r = p.get("O_send", p["O"]), p.get("O_recv", p["O"])
    o = p["o_send"] + p["o_recv"] + (O_s + O_r) * k
    base = o + p["L"] + np.maximum(k - 1.0, 0.0) * p["G"]
    return np.where(k > p["S"], base + 2.0 * _hop(p), base)


def _hop(p: dict) -> float:
    """H = max(L, 0) + o_hop (replay.rules.protocol_hop)."""
    return max(p["L"], 0.0) + p.get("o_hop", 0.0)


#: the sizes above S whose one-way times measure the handshake's step: up to this factor of S
#: (further up, the per-byte terms fitted on the longest messages take over)
HOP_SIZES = 4.0


def fit_hop(k: np.ndarray, t: np.ndarray, p: dict) -> tuple[float, list[str]]:
    """o_hop of ``p``'s LogGPS fit and notes: half the step of the one-way time at S, the
    median over the sizes S < k <= HOP_SIZES·S (at least the first size above S) of
    t(k) − the model's one-way time with o_hop = 0, at least 0. 0 with a note when no size
    above S was measured."""
    k, t = np.asarray(k, float), np.asarray(t, float)
    above = k > p["S"]
    if not above.any():
        return 0.0, []
    sel = above & (k <= HOP_SIZES * p["S"])
    if not sel.any():
        sel = k == k[above].min()
    step = t[sel] - loggps_one_way(k[sel], {**p, "o_hop": 0.0})
    o_hop = float(np.median(step)) / 2.0
    if o_hop < 0:
        return 0.0, [f"the one-way time above S = {p['S']:g} B lies below the eager line's "
                     f"by {-2 * o_hop:.3g} s: o_hop set to 0"]
    return o_hop, []


def loggps_send_time(k: np.ndarray, p: dict) -> np.ndarray:
    """Time a blocking Send lasts under replay.models.loggps when the receive is already posted:
    o_s(k) eager; above S the clear-to-send and the injection of the data follow,
    o_s(k) + L + H + (k-1)·G."""
    k = np.asarray(k, float)
    o = p["o_send"] + p.get("O_send", p["O"]) * k
    return np.where(k > p["S"], o + p["L"] + _hop(p)
                    + np.maximum(k - 1.0, 0.0) * p["G"], o)


@dataclass
class LogGPSFit:
    params: dict
    r2: float
    residuals: list[float]
    notes: list[str] = field(default_factory=list)
    brk: Break | None = None


def fit_loggps(k: np.ndarray, t: np.ndarray, o_send: np.ndarray, o_recv: np.ndarray,
               g_burst: float, S: float | None = None) -> LogGPSFit:
    """LogGPS parameters from one-way medians ``t`` and per-size overhead medians.

    S        the measured protocol switch (``eager_limit``) if given, else the break of the
             segmented fit of t(k)                                (LogGPS, paper 004 §2, Fig. 1)
    O_send   slope of o_s(k) over eager sizes (above S the send waits for the receiver)
    O_recv   the receiver's work after the data has arrived, per byte: above S the ping-pong's
             Send lasts until the transfer is done, so t(k) - o_s(k) is what the receiver still
             does (copy-out; for the pickle API, allocating and unpickling); O_recv is its slope
             over those sizes (at least 2), else the slope of o_r(k) over eager sizes
                                               (paper 004 §3: o = o' + O·k per side; PLogP's
                                                o_s(m), o_r(m), Kielmann et al. 2000)
    o_send, o_recv   medians over eager sizes of o_x(k) - O_x·k
    G        slope of t(k) above S minus O_send + O_recv: what the overheads do not explain
             (if they explain all of it, O_send = O_recv = 0 and G = the slope, noted)
    L        median over eager sizes of t(k) - o_s(k) - o_r(k) - (k-1)·G   (LogP: T = o_s + L + o_r)
    g        from back-to-back sends (given)
    ``O`` (the mean of O_send and O_recv) is kept for readers of older profiles.
    """
    k, t = np.asarray(k, float), np.asarray(t, float)
    o_send, o_recv = np.asarray(o_send, float), np.asarray(o_recv, float)
    notes: list[str] = []
    brk = find_break(k, t) if S is None else split_at(k, t, S)
    eager = k <= brk.S
    if eager.sum() < 2:
        eager = k <= k[min(1, len(k) - 1)]
    O_s = _slope(k[eager], o_send[eager])
    rdv = ~eager
    if len(np.unique(k[rdv])) >= 2:
        O_r = _slope(k[rdv], np.maximum(t[rdv] - o_send[rdv], 1e-9))
    else:
        O_r = _slope(k[eager], o_recv[eager])
    slope = long_message_slope(k, t, brk)
    G = slope - O_s - O_r
    if G <= 0 and O_s > 0:
        # O_send comes from the eager sizes only (a few KiB on shared memory) and is the least
        # supported term; the model would charge it to every byte of every send.
        notes.append(f"O_send + O_recv = {O_s + O_r:.3g} s/B is not below the large-message "
                     f"slope {slope:.3g} s/B: O_send ({O_s:.3g} s/B, eager sizes only) set to 0")
        O_s = 0.0
        G = slope - O_r
    if G <= 0:
        # The per-byte overheads alone already account for the whole large-message slope: the
        # measurement cannot tell O from G. Keep the model's slope equal to the measured one by
        # putting it all in G.
        notes.append(f"O_recv = {O_r:.3g} s/B is not below the large-message slope {slope:.3g} "
                     "s/B: O set to 0 and G to the slope")
        O_s, O_r, G = 0.0, 0.0, slope
    os0 = float(np.median(o_send[eager] - O_s * k[eager]))
    or0 = float(np.median(o_recv[eager] - O_r * k[eager]))
    Ls = t[eager] - (os0 + or0 + (O_s + O_r) * k[eager]) - np.maximum(k[eager] - 1, 0) * G
    L = float(np.median(Ls))
    if L < 0:
        # The calls' overheads overlap the transfer (the send call returns after the data is
        # there): a negative L keeps the model's one-way time the measured one. It cannot make a
        # message arrive before its send began.
        notes.append(f"o_send + o_recv exceed the small-message one-way time by {-L:.3g} s: "
                     "L is negative (the overheads overlap the transfer)")
        L = max(L, -max(os0, 0.0))
    params = {"L": L, "o_send": max(os0, 0.0), "o_recv": max(or0, 0.0), "g": max(g_burst, 0.0),
              "G": G, "S": brk.S, "O": 0.5 * (O_s + O_r), "O_send": O_s, "O_recv": O_r}
    params["o_hop"], hop_notes = fit_hop(k, t, params)
    notes.extend(hop_notes)
    model = loggps_one_way(k, params)
    return LogGPSFit(params, r2_log(model, t), ((model - t) / t).tolist(), notes, brk)


def fit_overhead_vs_ranks(ranks: list[int], o_prime: list[float]) -> tuple[float, float]:
    """o' = o_a + o_b·P by least squares over the rank counts (paper 004 §3.2 and §5: two values
    of o' measured at two P, solved for o'_a and o'_b). One rank count gives o_b = 0. The fitted
    o_b may be negative (noise); the caller decides."""
    P = np.asarray(ranks, float)
    o = np.asarray(o_prime, float)
    if len(set(ranks)) < 2:
        return float(o.mean()), 0.0
    A = np.column_stack([np.ones_like(P), P])
    (oa, ob), *_ = np.linalg.lstsq(A, o, rcond=None)
    return float(oa), float(ob)


def fit_mm1(k: np.ndarray, t: np.ndarray, brk: Break) -> dict:
    """M/M/1 at zero load (paper 000 §IV-A eq. 7 with rho = 0): D(k) = k/C + tau. C is the
    capacity, the asymptotic bandwidth of the large-message segment; tau the rest of the
    small-message time."""
    k, t = np.asarray(k, float), np.asarray(t, float)
    slope = long_message_slope(k, t, brk)
    C = 1.0 / slope if slope > 0 else math.inf
    small = k <= brk.S if math.isfinite(brk.S) else k <= k[0]
    tau = float(np.median(t[small] - k[small] / C))
    return {"C": C, "tau": max(tau, 0.0)}


#: a probed wait lasting at least this share of the peer's compute waited for the peer to enter
#: MPI (in-call progress); a shorter one did not (async)
PROGRESS_SPLIT = 0.5
#: medians at most / at least these shares are a clear verdict; in between the probe is unclear
PROGRESS_CLEAR = (0.25, 0.75)
#: share of the samples that must fall on the verdict's side of the split for a clear verdict
PROGRESS_AGREE = 0.8


@dataclass
class ProgressFit:
    progress: str                       # "in-call" or "async": the receiver-computes case
    evidence: dict
    notes: list[str] = field(default_factory=list)


def progress_side(waits: list[float], compute_s: float) -> tuple[str, float, bool]:
    """Verdict of one case of the progress probe: ("in-call" | "async", median share of the
    compute the wait lasted, whether the verdict is clear)."""
    f = np.asarray(waits, float) / compute_s
    m = float(np.median(f))
    verdict = "in-call" if m >= PROGRESS_SPLIT else "async"
    agree = float(np.mean((f >= PROGRESS_SPLIT) == (verdict == "in-call")))
    clear = (m >= PROGRESS_CLEAR[1] or m <= PROGRESS_CLEAR[0]) and agree >= PROGRESS_AGREE
    return verdict, m, clear


def fit_progress(probe: dict) -> ProgressFit:
    """``progress`` from the progress probe (bench.py): "in-call" if a rendezvous send's Wait
    lasted until the receiver, computing outside MPI, entered its Wait (MPICH without
    MPIR_CVAR_ASYNC_PROGRESS), "async" if it ended after about the transfer time.

    Receiver computes: rank 0's Isend + Wait, started ``lead_s`` into rank 1's compute D, against
    D - lead_s. Sender computes: rank 1's Recv against D. Each case: the median share of the
    compute over the samples; at least ``PROGRESS_SPLIT`` waited for the peer. A median between
    the ``PROGRESS_CLEAR`` shares, samples split across the split, or an eager control that waited
    too are noted. The receiver case decides ``progress`` (the replay rule: the handshake needs the
    receiver in a call); the sender case is evidence of whether the sender must be in a call."""
    D, lead = float(probe["D_s"]), float(probe.get("lead_s", 0.0))
    notes: list[str] = []
    ev = {"D_s": D, "lead_s": lead, "compute": probe.get("compute"),
          "rendezvous_size": probe.get("rendezvous_size"), "eager_size": probe.get("eager_size"),
          "split": PROGRESS_SPLIT, "took_s": probe.get("took_s"),
          "samples": {"receiver_computes_s": probe["receiver_computes_s"],
                      "sender_computes_s": probe["sender_computes_s"]}}
    if probe.get("rendezvous_size") is None:
        notes.append("progress not probed: the eager probe saw no rendezvous size among the "
                     "measured sizes (S = inf); progress = \"async\" written, which no transfer "
                     "of an eager-only network depends on")
        return ProgressFit("async", ev, notes)
    cases = (("receiver", "receiver_computes_s", D - lead, "rank 0's Isend + Wait"),
             ("sender", "sender_computes_s", D, "rank 1's Recv"))
    verdicts = {}
    for who, key, compute, timed in cases:
        rdv = probe[key]["rendezvous"]
        verdict, share, clear = progress_side(rdv, compute)
        verdicts[who] = verdict
        ev[f"{who}_computes_wait_s"] = float(np.median(rdv))
        ev[f"{who}_computes_share"] = share
        ev[f"{who}_side"] = verdict
        if not clear:
            notes.append(f"progress probe unclear ({who} computes {compute * 1e3:.3g} ms): "
                         f"{timed} at {probe['rendezvous_size']} B lasted a median "
                         f"{share:.2f} of it over {len(rdv)} samples (clear: <= "
                         f"{PROGRESS_CLEAR[0]} or >= {PROGRESS_CLEAR[1]}, {PROGRESS_AGREE:.0%} "
                         f"of the samples on one side); {verdict!r} by the {PROGRESS_SPLIT} split")
        eager = probe[key].get("eager") or []
        if eager:
            ev[f"{who}_computes_eager_wait_s"] = float(np.median(eager))
            control = float(np.median(np.asarray(eager, float) / compute))
            if control > PROGRESS_CLEAR[0]:
                notes.append(f"progress probe: the eager control ({probe['eager_size']} B, "
                             f"{who} computes) waited {control:.2f} of the compute too, so the "
                             "probe does not separate the protocols here (ranks sharing a core?)")
    if probe.get("eager_size") is None:
        notes.append("progress probe: no eager size below the rendezvous one, no control")
    return ProgressFit(verdicts["receiver"], ev, notes)


#: the call probe's quantities: profile key -> (the probe's samples, the call timed per API)
CALL_QUANTITIES = {
    "o_irecv": ("irecv_s", {"buffer": "comm.Irecv(buf, source, tag), nothing arriving",
                            "pickle": "comm.irecv(source=, tag=), nothing arriving"}),
    "o_wait": ("wait_s", {"buffer": "Request.Wait() on a complete eager Isend",
                          "pickle": "Request.wait() on a complete eager Isend of pickled bytes"}),
    "o_probe": ("probe_s", {"buffer": "comm.Probe(source, tag), the message queued",
                            "pickle": "comm.Mprobe(source, tag), the message queued"}),
    "o_call": ("iprobe_s", {"buffer": "comm.Iprobe(source, tag), nothing pending",
                            "pickle": "comm.Iprobe(source, tag), nothing pending"}),
}
#: an interquartile range over the batches wider than this share of the median is noted
CALL_WIDE_IQR = 0.5


@dataclass
class CallFit:
    params: dict                        # o_irecv, o_wait, o_probe, o_call (seconds)
    evidence: dict
    notes: list[str] = field(default_factory=list)


def fit_calls(probe: dict) -> CallFit:
    """The per-call overheads from the call probe (calls.py): per quantity the median over the
    batches of the time per call, less the median time per iteration of an empty loop over the
    same items (in a trace that iteration is a burst between calls, not part of a call). The
    interquartile range over the batches is kept; one wider than ``CALL_WIDE_IQR`` of the median
    is noted. A value at or below the loop's own time is kept at 0 and noted."""
    api = probe.get("api", "buffer")
    loop = float(np.median(probe["loop_s"])) if probe.get("loop_s") else 0.0
    n = int(probe["batch"]) * int(probe["batches"])
    params: dict = {}
    notes: list[str] = []
    ev: dict = {"api": api, "batch": int(probe["batch"]), "batches": int(probe["batches"]),
                "n_calls": n, "message_bytes": probe.get("bytes"), "loop_s": loop,
                "took_s": probe.get("took_s")}

    def summary(samples: list[float]) -> tuple[float, float]:
        a = np.asarray(samples, float)
        return (float(np.median(a)) - loop,
                float(np.percentile(a, 75) - np.percentile(a, 25)))

    for key, (samples_key, calls) in CALL_QUANTITIES.items():
        med, iqr = summary(probe[samples_key])
        ev[key] = {"call": calls[api], "median_s": med, "iqr_s": iqr, "n": n}
        if med <= 0:
            notes.append(f"call probe: {key} ({calls[api]}) measured no longer than the empty "
                         f"loop ({loop * 1e9:.0f} ns a call): {key} set to 0")
            med = 0.0
        elif iqr > CALL_WIDE_IQR * med:
            notes.append(f"call probe: {key} varied widely over its {probe['batches']} batches "
                         f"(IQR {iqr * 1e6:.3g} us, median {med * 1e6:.3g} us): the machine was "
                         "busy, the median is kept")
        params[key] = med
    if probe.get("test_s"):
        med, iqr = summary(probe["test_s"])
        ev["test_incomplete"] = {"call": "Request.Test() of a pending receive (evidence; "
                                         "o_call is the Iprobe)", "median_s": med, "iqr_s": iqr,
                                 "n": n}
    return CallFit(params, ev, notes)


@dataclass
class BurstFit:
    params: dict                        # burst_s, extra_s: the [compute] section
    evidence: dict
    notes: list[str] = field(default_factory=list)


@dataclass
class QueueFit:
    ack_cells: float                    # the largest count not held; inf: none held
    evidence: dict
    notes: list[str] = field(default_factory=list)


def median_iqr(diff: np.ndarray) -> tuple[float, float]:
    """The median and the IQR of one curve point's per-round differences (the burst and resume
    probes' extra times)."""
    return float(np.median(diff)), float(np.percentile(diff, 75) - np.percentile(diff, 25))


def fit_bursts(probe: dict, resume: ResumeCurve | None = None) -> BurstFit:
    """The transport's extra compute time per burst from the burst probe (bursts.py): per kernel
    size, the burst's length b = the median CPU time per kernel of the silent blocks (over every
    message size's series), and per message size k its extra time e(k, b) = the median over the
    rounds (both ranks) of exchanged − silent of one round (adjacent blocks, so a drift of the
    machine's speed cancels). A negative e (the calls made no difference beyond the noise) is
    kept at 0 and noted; so is an IQR of the differences wider than e itself. The params are
    the ``[compute]`` section: burst_s, bytes and extra_s (one row per message size).

    With ``resume`` (this calibration's ``[resume]`` curve) each difference first loses w(b, d),
    d its block's mean exchange time, which rule resume_after_wait prices."""
    notes: list[str] = []
    nsizes = len(probe["sizes"])
    burst = [float(np.median(np.concatenate([np.asarray(series[i], float)
                                             for series in probe["silent_s"]])))
             for i in range(nsizes)]
    order = np.argsort(burst)
    extra, iqr = [], []
    took = probe.get("exchange_s")
    for k_at, (k, sil_k, exc_k) in enumerate(zip(probe["bytes"], probe["silent_s"],
                                                 probe["exchanged_s"])):
        row, row_iqr = [], []
        for i in order:
            d = np.asarray(exc_k[i], float) - np.asarray(sil_k[i], float)
            if resume is not None and took is not None:
                d = d - np.array([resume.extra(burst[i], x) for x in took[k_at][i]])
            e, spread = median_iqr(d)
            if e < 0:
                notes.append(f"burst probe: a {burst[i] * 1e6:.3g} us kernel took "
                             f"{-e * 1e6:.3g} us less between {k}-byte exchanges than alone: "
                             "extra time set to 0")
                e = 0.0
            elif spread > e:
                notes.append(f"burst probe: the extra time of a {burst[i] * 1e6:.3g} us kernel "
                             f"after {k}-byte exchanges varied widely (IQR "
                             f"{spread * 1e6:.3g} us, median {e * 1e6:.3g} us): the machine was "
                             "busy, the median is kept")
            row.append(e)
            row_iqr.append(spread)
        extra.append(row)
        iqr.append(row_iqr)
    params = {"burst_s": [burst[i] for i in order], "bytes": [int(k) for k in probe["bytes"]],
              "extra_s": extra}
    ev = {"kernel_doubles": [int(probe["sizes"][i]) for i in order],
          "rounds": int(probe["rounds"]), "message_bytes": [int(k) for k in probe["bytes"]],
          "extra_iqr_s": iqr,
          "silent_s": [[series[i] for i in order] for series in probe["silent_s"]],
          "exchanged_s": [[series[i] for i in order] for series in probe["exchanged_s"]],
          "exchange_s": [[series[i] for i in order] for series in took] if took else [],
          "less_resume": resume is not None and bool(took),
          "took_s": probe.get("took_s")}
    return BurstFit(params, ev, notes)


def fit_queue(probe: dict) -> QueueFit:
    """``ack_cells`` from the queue probe (queue.py): the largest count of rendezvous messages
    a receiver took in, while their sender computed outside MPI, without the sender's Waitall
    then lasting until the receiver's next MPI call (``largest_not_held``). No count up to
    ``max_count`` held: inf, noted. A count whose valid samples disagree is noted."""
    ev = {k: probe.get(k) for k in ("gap_s", "tail_s", "D_s", "split", "samples", "max_count",
                                    "compute", "one_clock", "shares", "held",
                                    "largest_not_held", "first_held", "took_s")}
    notes: list[str] = []
    for n, verdicts in (probe.get("held") or {}).items():
        valid = [v == "held" for v in verdicts if v != "invalid"]
        if not valid:
            notes.append(f"queue probe: at {n} messages no sample had the receiver done before "
                         "the sender's Waitall (a busy machine): decided by the Waitalls' length")
        elif len(valid) < int(probe["samples"]):
            notes.append(f"queue probe: at {n} messages only {len(valid)} of {len(verdicts)} "
                         "samples had the receiver done before the sender's Waitall (a busy "
                         "machine); the verdict rests on those")
        if 0 < sum(valid) < len(valid):
            notes.append(f"queue probe: at {n} messages {sum(valid)} of {len(valid)} valid "
                         "samples held the sender until the receiver's next MPI call")
    if probe.get("first_held") is None:
        notes.append(f"queue probe: no count up to {probe['max_count']} held a send until the "
                     "receiver's next MPI call: ack_cells = inf (no limit)")
        return QueueFit(math.inf, ev, notes)
    return QueueFit(float(probe["largest_not_held"]), ev, notes)


@dataclass
class UnexpectedFit:
    params: dict                        # o_unexpected (s), O_unexpected (s/byte)
    evidence: dict
    notes: list[str] = field(default_factory=list)


def fit_unexpected(probe: dict) -> UnexpectedFit | None:
    """Rule ``unexpected_copy``'s u(k) = o_unexpected + O_unexpected·k from the unexpected probe
    (unexpected.py): per size u(k) = median of the valid unexpected samples − median of the
    valid expected ones (seconds per message), then a least-squares line over the sizes. A
    negative slope is set to 0 with o_unexpected the median u; a negative intercept is set to
    0 with the slope through the origin; a negative u throughout gives 0 and 0. Each is noted.
    None when no size has valid samples of both cases."""
    ks, us, n_valid = [], [], []
    notes: list[str] = []
    for k, un, ex in zip(probe["sizes"], probe["unexpected_s"], probe["expected_s"]):
        a = [v for v in un if v is not None]
        b = [v for v in ex if v is not None]
        n_valid.append([len(a), len(b)])
        if not a or not b:
            notes.append(f"unexpected probe: no valid samples of both cases at {k} B (the "
                         "sender was still sending when the timing began: a busy machine)")
            continue
        ks.append(float(k))
        us.append(float(np.median(a)) - float(np.median(b)))
    ev = {"sizes": [int(k) for k in probe["sizes"]], "batch": probe.get("batch"),
          "rounds": probe.get("rounds"), "D_s": probe.get("D_s"),
          "unexpected_s": [[("invalid" if v is None else v) for v in un]
                           for un in probe["unexpected_s"]],
          "expected_s": [[("invalid" if v is None else v) for v in ex]
                         for ex in probe["expected_s"]],
          "valid": n_valid, "u_sizes": [int(k) for k in ks], "u_s": us,
          "took_s": probe.get("took_s")}
    if not ks:
        return None
    k = np.asarray(ks)
    u = np.asarray(us)
    if len(k) >= 2 and np.ptp(k) > 0:
        O_u, o_u = (float(x) for x in np.polyfit(k, u, 1))
    else:
        O_u, o_u = 0.0, float(np.median(u))
    if O_u < 0:
        notes.append(f"unexpected probe: u(k) fell with k (slope {O_u:.3g} s/B): "
                     "O_unexpected set to 0, o_unexpected to the median u")
        O_u, o_u = 0.0, float(np.median(u))
    if o_u < 0:
        O_u = max(float(np.dot(k, u) / np.dot(k, k)), 0.0)
        notes.append(f"unexpected probe: u(k) had a negative intercept: o_unexpected set to 0, "
                     f"O_unexpected {O_u:.3g} s/B through the origin")
        o_u = 0.0
    if o_u == 0.0 and O_u == 0.0:
        notes.append("unexpected probe: unexpected receives were not slower than expected "
                     "ones: rule unexpected_copy off (0, 0)")
    return UnexpectedFit({"o_unexpected": o_u, "O_unexpected": O_u}, ev, notes)
