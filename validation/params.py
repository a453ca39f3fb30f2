"""Parameters of the analytic models measured from a trace (region durations and sizes, message
sizes), and the analytic prediction of one cell. Every prediction returns its inputs too, so a
number in errors.csv can be traced back to what it was computed from."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from apps.skeletons import analytic_paper
from apps.skeletons.hypercube import TAG_COMBINE
from hindsight import trace as tf
from validation.models import ModelError, paper000, paper002, paper003, paper004


def load(trace_dir: Path) -> tuple[pd.DataFrame, dict]:
    tr = tf.read_trace(trace_dir, columns=["rank", "seq", "op", "region", "t_start", "t_end",
                                           "peer", "tag", "nbytes"])
    df = tr.to_pandas()
    df["op"] = df["op"].astype(str)
    df["region"] = df["region"].astype(object)
    df["dur"] = (df["t_end"] - df["t_start"]) / 1e9
    return df, tr.manifest


def regions(df: pd.DataFrame, name: str) -> pd.DataFrame:
    return df[(df["op"] == "region") & (df["region"] == name)]


def lead_in_s(df: pd.DataFrame) -> float:
    """Epoch to the first recorded event: start-up the models do not describe (kept as
    measured, as the replay keeps it)."""
    return float(df["t_start"].min()) / 1e9 if len(df) else 0.0


def profile_net(profile: dict[str, dict[str, float]]) -> dict[str, float]:
    """Network constants for the analytic models. Bandwidth-latency models (papers 000, 002,
    003) take the Hockney fit (l, g); paper 004 takes the LogGPS section (o_a, o_b, O when the
    profile has them: o = o_a + o_b·P + O·k)."""
    lg = profile.get("loggps", {})
    hk = profile.get("hockney", {})
    o_s = float(lg.get("o_a", lg.get("o_send", 0.0)))
    o_r = float(lg.get("o_a", lg.get("o_recv", 0.0)))
    O = float(lg.get("O", 0.0))
    O_s, O_r = float(lg.get("O_send", O)), float(lg.get("O_recv", O))
    G = float(lg.get("G", 0.0))
    per_byte = float(hk.get("g", 0.0)) or (G + O_s + O_r) or 1e-10
    return {"L": float(lg.get("L", 0.0)), "o_send": o_s, "o_recv": o_r, "G": G,
            "o_b": float(lg.get("o_b", 0.0)), "O_send": O_s, "O_recv": O_r,
            "l": float(hk.get("l", lg.get("L", 0.0) + o_s + o_r)), "g": per_byte}


def analytic(app: str, paradigm: str, trace_dir: Path,
             profile: dict[str, dict[str, float]]) -> list[dict[str, Any]]:
    """Analytic predictions that apply to this (app, paradigm): list of
    {predictor, predicted_s, inputs, terms} (predicted_s nan with a note if the model fails)."""
    df, manifest = load(trace_dir)
    P = int(manifest.get("ranks") or df["rank"].max() + 1)
    if P < 2:
        return []
    net = profile_net(profile)
    paper = analytic_paper(app, paradigm)
    if paper is None:
        return []
    try:
        out = [_FROM_TRACE[paper](app, df, manifest, P, net)]
    except ModelError as exc:
        out = [{"predictor": f"analytic:{paper}", "predicted_s": math.nan, "note": str(exc)}]
    lead = lead_in_s(df)
    for o in out:
        if not math.isnan(o["predicted_s"]):
            o["terms"]["lead_in_s"] = lead
            o["predicted_s"] += lead
    return out


def _sends(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["op"].isin(tf.SEND_OPS) & (df["nbytes"] > 0)]


def _paper000(app: str, df: pd.DataFrame, manifest: dict, P: int, net: dict) -> dict[str, Any]:
    """Eq. 6 with measured T_Comp (task + input per task), T_Merge (mean merge) and T_Comm from
    eq. 7 with one queue: ranks share one host, so the Myrinet leaf/spine hops (eqs. 8-10) become
    a single stage whose arrival rate is the P/2 senders of a pipeline step, λ = (P/2)/T_Comp,
    C = 8/g and τ = l from the profile's Hockney fit."""
    task, io, merge = regions(df, "task"), regions(df, "io"), regions(df, "merge")
    N = len(task)
    t_comp = (task["dur"].sum() + io[io["nbytes"] > 0]["dur"].sum()) / max(N, 1)
    t_merge = float(merge["dur"].mean()) if len(merge) else 0.0
    L = float(_sends(df)["nbytes"].mean()) if len(_sends(df)) else 0.0
    C = 8.0 / net["g"]
    tau = net["l"]
    t_comm = paper000.mm1_delay(L, C, (P / 2) / t_comp, tau)
    total = paper000.t_total(N, P, t_comp, t_comm, t_merge, drain=True)
    return {"predictor": "analytic:paper000", "predicted_s": total,
            "inputs": {"N": N, "P": P, "T_comp_s": t_comp, "T_merge_s": t_merge, "L_bytes": L,
                       "C_bit_s": C, "tau_s": tau},
            "terms": {"T_comm_s": t_comm, "model_s": total}}


def _paper003(app: str, df: pd.DataFrame, manifest: dict, P: int, net: dict) -> dict[str, Any]:
    """Eq. 17 with c_q from the task regions (Σ t / Σ s·ln s), c_m from the workers' local
    merges (Σ t / Σ elements·ways), b_io from rank 0's io regions (elements/s), b_n, l_n from the
    profile's Hockney fit (8-byte elements) and b_gather = b_n (no separate gather measurement)."""
    args = manifest.get("args") or {}
    N = float(args.get("arrays", 0)) * float(args.get("array_size", 0))
    s = float(args.get("block_size", 16384))
    task, merge, io = regions(df, "task"), regions(df, "merge"), regions(df, "io")
    sz = task["nbytes"].clip(lower=2).astype(float)
    c_q = float(task["dur"].sum() / (sz * np.log(sz)).sum())
    # eq. 8: producing s elements of an (n/p)-way merge costs c_m·s·(n/p), so c_m is the
    # merge time per element and per way; the workers' local merges (rank 0 also merges
    # globally) of `size` elements have size/s ways
    local = merge[merge["rank"] != 0]
    local = local if len(local) else merge
    sizes = local["nbytes"].clip(lower=1).astype(float)
    c_m = float(local["dur"].sum() / max((sizes * np.maximum(sizes / s, 1.0)).sum(), 1.0))
    # b_io: rank 0 reads N elements (io regions of size 0 = reads) and writes the sized ones
    io0 = io[io["rank"] == 0]
    moved = N + float(io0["nbytes"].clip(lower=0).sum())
    b_io = moved / float(io0["dur"].sum()) if len(io0) and io0["dur"].sum() > 0 else math.inf
    b_n = 1.0 / (8.0 * net["g"])
    l_n = net["l"]
    r = paper003.t_total(N, P, s, c_q, c_m, b_io, l_n, b_n, b_n)
    return {"predictor": "analytic:paper003", "predicted_s": r["t_total_s"],
            "inputs": {"N": N, "p": P, "s": s, "c_q": c_q, "c_m": c_m, "b_io": b_io, "b_n": b_n,
                       "l_n": l_n, "b_gather": b_n},
            "terms": {k: v for k, v in r.items()}}


def _paper004(app: str, df: pd.DataFrame, manifest: dict, P: int, net: dict) -> dict[str, Any]:
    """max(T_master, T_worker) with the master's own merges added to T_master (this skeleton's
    master merges each result after replying; paper 004's programs have no merge). t_task =
    (task + input time) per task; message sizes = the master's mean send / receive sizes."""
    task, io, merge = regions(df, "task"), regions(df, "io"), regions(df, "merge")
    n = len(task[task["rank"] != 0]) or len(task)
    t_task = (task["dur"].sum() + io[io["nbytes"] > 0]["dur"].sum()) / max(len(task), 1)
    m_send = _sends(df[df["rank"] == 0])
    m_recv = df[(df["rank"] == 0) & df["op"].isin(["Recv", "Wait", "Waitany", "Sendrecv_recv"])
                & (df["nbytes"] > 0)]
    k_send = float(m_send["nbytes"].mean()) if len(m_send) else 0.0
    k_recv = float(m_recv["nbytes"].mean()) if len(m_recv) else 0.0
    r = paper004.t_ms(n, P, t_task, k_send, k_recv, net["L"], net["G"], net["o_send"],
                      net["o_b"], net["O_send"], net["O_recv"])
    master_merge = float(merge[merge["rank"] == 0]["dur"].sum())
    total = max(r["T_master_s"] + master_merge, r["T_worker_s"])
    return {"predictor": "analytic:paper004", "predicted_s": total,
            "inputs": {"n_tasks": n, "P": P, "t_task_s": t_task, "k_send": k_send,
                       "k_recv": k_recv, "L": net["L"], "G": net["G"], "o_a": net["o_send"],
                       "o_b": net["o_b"], "master_merge_s": master_merge},
            "terms": {**r, "model_s": total}}


def _paper002(app: str, df: pd.DataFrame, manifest: dict, P: int, net: dict) -> dict[str, Any]:
    """§5 with block costs fitted from this trace's divide / combine / conquer regions
    (T_div = a + b·M, T_comb = a + b·N, T_seq = a + b·N + c·M), the exchange 2(l + K·g) per level
    with K the measured bytes of that level's exchange and Hockney l, g from the profile, plus rank
    0's input loading (io), which the paper leaves out (it is measured, not modelled)."""
    args = manifest.get("args") or {}
    div, comb, conq = regions(df, "divide"), regions(df, "combine"), regions(df, "conquer")
    if app == "components":
        n_vert = float(args.get("vertices") or 0)
        N_of = lambda r: np.full(len(r), n_vert)             # the root vector: n entries
    else:
        N_of = lambda r: r["nbytes"].to_numpy(float)         # sorting: elements merged
    f_div = paper002.fit(("M",), div["nbytes"].to_numpy(float).reshape(-1, 1),
                         div["dur"].to_numpy()) if len(div) else paper002.BlockCost(("M",), (0, 0))
    f_comb = paper002.fit(("N",), (comb["nbytes"].to_numpy(float) if app != "components"
                                   else N_of(comb)).reshape(-1, 1), comb["dur"].to_numpy())
    f_seq = paper002.fit(("N", "M"), np.column_stack([N_of(conq), conq["nbytes"].to_numpy(float)]),
                         conq["dur"].to_numpy())
    d = int(round(math.log2(P)))
    M0 = float(div[div["rank"] == 0]["nbytes"].max()) if len(div) else float(conq["nbytes"].sum())
    # per level j (0 = top), the sizes the fitted functions are evaluated at
    if app == "components":
        N0 = n_vert
        comb_at = [N0] * d
    else:
        N0 = M0
        comb_at = [N0 / 2 ** j for j in range(d)]
    t_div = sum(f_div(M=M0 / 2 ** j) for j in range(d))
    t_comb = sum(f_comb(N=comb_at[j]) for j in range(d))
    t_seq = f_seq(N=N0, M=M0 / P)
    # the exchange's send half: the pickle-API sendrecv is recorded as mpi4py's Isend, receive
    # and Wait; a sendrecv into a buffer as Sendrecv_send and Sendrecv_recv
    sr = df[df["op"].isin(["Isend", "Sendrecv_send"]) & (df["tag"] == TAG_COMBINE)]
    K_levels = sr.groupby("rank")["nbytes"].apply(list)
    K = [float(np.mean([ks[j] for ks in K_levels if len(ks) > j])) for j in range(d)]
    t_ex = sum(paper002.exchange(k, net["l"], net["g"]) for k in K)
    load = float(regions(df, "io")[lambda r: r["rank"] == 0]["dur"].sum())
    total = t_div + t_comb + t_seq + t_ex + load
    return {"predictor": "analytic:paper002", "predicted_s": total,
            "inputs": {"P": P, "M": M0, "N": N0, "K_bytes": K, "l": net["l"], "g": net["g"],
                       "fit_divide": f_div.as_dict(), "fit_combine": f_comb.as_dict(),
                       "fit_sequential": f_seq.as_dict()},
            "terms": {"divide_s": t_div, "combine_s": t_comb, "sequential_s": t_seq,
                      "exchange_s": t_ex, "load_s": load, "model_s": total}}


#: paper -> its model's prediction from a trace; which paper applies: apps.skeletons.analytic_paper
_FROM_TRACE = {"paper000": _paper000, "paper002": _paper002, "paper003": _paper003,
               "paper004": _paper004}
