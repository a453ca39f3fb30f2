"""Predicted scaling: synthesize and replay every (P, N), derive the papers' metrics.

Per size N the sequential work W is the predicted time at P = 1 (the skeleton's sequential
baseline, paper 000 eq. 1). From the predicted T_P (paper 001 §2.1): speedup S = W/T_P,
efficiency E = W/(p·T_P), overhead T_o = p·T_P - W (eq. 1). Optimal P = argmin T_P (paper 003
§4 asks the same question of its block sort); the smallest P within x % of that minimum is what
a scheduler should rather grant. Master/worker saturation (paper 004): the smallest P at which
the master is busy (waits less than ``SATURATED_WAIT`` of the run), so that more workers only
add overhead. Isoefficiency: ``validation.models.paper001.isoefficiency`` on the predicted
(p, W, T_P) of every size.

Beside each replay-based prediction the papers' closed forms are evaluated with the same fitted
block costs (``analytic``): paper 000 eq. 6 for the pipeline, paper 004's T(P) for
master/worker (paper 003's eq. 17 for its block sort), paper 002 §5 for the hypercube; the tree
has no closed form in the papers.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

import replay
from apps.skeletons import analytic_paper
from predict import synthesize as S
from predict.costmodel import CostModel
from predict.events import merge_work
from validation.models import ModelError, paper000, paper001, paper002, paper003, paper004
from validation.params import profile_net
from replay.models.base import NetworkModel

#: master/worker is saturated when the master waits less than this share of the run
SATURATED_WAIT = 0.10


def predict_one(cm: CostModel, P: int, N: int, model: NetworkModel, values: dict[str, Any],
                keep: Path | None = None) -> dict[str, Any]:
    """Synthesize (P, N), replay it under ``model``; makespan and the master's waiting share."""
    spec = cm.spec(P, N)
    tr = S.trace(spec, cm.cost, extra={"fitted_from": cm.traces})
    if keep is not None:
        S.write(keep / f"{cm.app}-{cm.paradigm}-N{N}-P{P}", spec, cm.cost,
                extra={"fitted_from": cm.traces}, model=model, resolved=values)
    prep = replay.prepare(tr)
    try:
        res = replay.run(prep, model, resolved=values, record=False)
    except replay.NoPredictionError as exc:      # this point only: the grid goes on
        return {"N": N, "P": P, "tasks": spec.n_tasks, "events": prep.nrows,
                "makespan_s": math.nan, "master_wait_share": math.nan, "failed": str(exc)}
    mk = res.makespan_ns / 1e9
    return {"N": N, "P": P, "tasks": spec.n_tasks, "events": prep.nrows, "makespan_s": mk,
            "master_wait_share": float(res.rank_wait_ns[0] / res.makespan_ns)
            if res.makespan_ns > 0 else math.nan}


def net_constants(model: NetworkModel, values: dict[str, Any],
                  profile_doc: dict[str, Any] | None) -> dict[str, float]:
    """Network constants for the analytic models (seconds, bytes): from the profile file like
    ``hindsight validate`` (``validation.params.profile_net``), else from the replay model's
    own parameters (ns internally)."""
    if profile_doc:
        return profile_net(profile_doc)
    ns = 1e-9
    if model.NAME in ("loggp", "loggps", "loggopsim"):
        L, G = values["L"] * ns, values["G"] * ns
        o_s, o_r = values["o_send"] * ns, values["o_recv"] * ns
        return {"L": L, "o_send": o_s, "o_recv": o_r, "G": G, "o_b": values["o_b_send"] * ns,
                "O_send": values["O_send"] * ns, "O_recv": values["O_recv"] * ns,
                "l": L + o_s + o_r, "g": G or 1e-10}
    if model.NAME == "hockney":
        l, g = values["l"] * ns, values["g"] * ns
        return {"L": l, "o_send": 0.0, "o_recv": 0.0, "G": g, "o_b": 0.0, "O_send": 0.0,
                "O_recv": 0.0, "l": l, "g": g}
    return {"L": 0.0, "o_send": 0.0, "o_recv": 0.0, "G": 0.0, "o_b": 0.0, "O_send": 0.0,
            "O_recv": 0.0, "l": 0.0, "g": 1e-10}


def _pipeline_paper000(cm: CostModel, P: int, N: int, n: int, t_comp: float,
                       net: dict[str, float]) -> tuple[str, float]:
    c, u = cm.cost, cm.per_task
    t_merge = c("merge", 2 * u, P)
    if P == 1:
        return "paper000 eq. 1", paper000.t_seq(n, t_comp, t_merge)
    L = c("bytes:result", u, P)
    t_comm = paper000.mm1_delay(L, 8.0 / net["g"], (P / 2) / t_comp, net["l"])
    return "paper000 eq. 6", paper000.t_total(n, P, t_comp, t_comm, t_merge)


def _block_sort_paper003(cm: CostModel, P: int, N: int, n: int, t_comp: float,
                         net: dict[str, float]) -> tuple[str, float]:
    """Eq. 17 with the fitted blocks: c_q from one block's sort (t_proc = c_q·s·ln s), c_m from
    a rank's local merge of N/P elements in (N/P)/s ways (eq. 8), b_io from reading one block,
    b_n from the block message's bytes per element."""
    c, u = cm.cost, cm.per_task
    n_loc = max(N / P, 1.0)
    c_q = c("task", u, P) / (u * math.log(max(u, 2)))
    c_m = c("merge", merge_work(n_loc, math.ceil(n_loc / u)), P) / (n_loc * max(n_loc / u, 1.0))
    t_io = c("io", u, P)
    b_io = u / t_io if t_io > 0 else math.inf
    b_n = u / max(c("bytes:block", u, P) * net["g"], 1e-300)
    r = paper003.t_total(N, P, u, c_q, c_m, b_io, net["l"], b_n, b_n)
    return "paper003 eq. 17", r["t_total_s"]


def _master_worker_paper004(cm: CostModel, P: int, N: int, n: int, t_comp: float,
                            net: dict[str, float]) -> tuple[str, float]:
    c, u = cm.cost, cm.per_task
    merges = sum(c("merge", (k + 1) * u, P) for k in range(1, n))
    if P == 1:
        return "paper004 T(P)", n * t_comp + merges
    r = paper004.t_ms(n, P, t_comp, c("bytes:control", 0, P), c("bytes:result", u, P),
                      net["L"], net["G"], net["o_send"], net["o_b"], net["O_send"],
                      net["O_recv"])
    return "paper004 T(P)", max(r["T_master_s"] + merges, r["T_worker_s"])


def _hypercube_paper002(cm: CostModel, P: int, N: int, n: int, t_comp: float,
                        net: dict[str, float]) -> tuple[str, float]:
    c = cm.cost
    d = int(round(math.log2(P)))
    t = c("load", N, P) + c("conquer", N / P, P)
    for j in range(d):
        t += c("divide", N / 2 ** j, P) + c("combine", N / 2 ** j, P)
        t += paper002.exchange(c("bytes:result", N / 2 ** (j + 1), P), net["l"], net["g"])
    return "paper002 §5", t


#: paper -> its closed form with fitted block costs; which paper applies:
#: apps.skeletons.analytic_paper
_CLOSED_FORMS = {"paper000": _pipeline_paper000, "paper003": _block_sort_paper003,
                 "paper004": _master_worker_paper004, "paper002": _hypercube_paper002}


def analytic(cm: CostModel, P: int, N: int, net: dict[str, float]) -> tuple[str, float]:
    """(model name, predicted seconds) of the paper's closed form for this paradigm, with the
    fitted block costs; nan where the model has no answer (e.g. an M/M/1 queue that saturates)
    and ("", nan) where the papers have none (the tree)."""
    paper = analytic_paper(cm.app, cm.paradigm)
    if paper is None:
        return "", math.nan
    c, u = cm.cost, cm.per_task
    t_comp = c("io", u, P) + c("task", u, P) + 2 * c("other", 0, P)
    try:
        return _CLOSED_FORMS[paper](cm, P, N, cm.spec(P, N).n_tasks, t_comp, net)
    except ModelError:
        return "analytic", math.nan


def predict_grid(cm: CostModel, Ps: Sequence[int], Ns: Sequence[int], model: NetworkModel,
                 values: dict[str, Any], net: dict[str, float],
                 keep: Path | None = None) -> pd.DataFrame:
    """One row per (N, P), P = 1 always included as the baseline W."""
    rows = []
    for N in Ns:
        for P in sorted(set(Ps) | {1}):
            r = predict_one(cm, P, N, model, values, keep)
            r["analytic_model"], r["analytic_s"] = analytic(cm, P, N, net)
            rows.append(r)
    df = pd.DataFrame(rows)
    W = df[df["P"] == 1].set_index("N")["makespan_s"]
    df["W_s"] = df["N"].map(W)
    df["speedup"] = df["W_s"] / df["makespan_s"]
    df["efficiency"] = df["speedup"] / df["P"]
    df["overhead_s"] = df["P"] * df["makespan_s"] - df["W_s"]
    Wa = df[df["P"] == 1].set_index("N")["analytic_s"]
    df["analytic_speedup"] = df["N"].map(Wa) / df["analytic_s"]
    return df


def optimum(df: pd.DataFrame, within_pct: float) -> pd.DataFrame:
    """Per N: the P of least predicted time, and the smallest P within ``within_pct`` % of it."""
    out = []
    for N, g in df.groupby("N"):
        g = g[g["makespan_s"].notna()]         # points the model gave no prediction for
        if g.empty:
            continue
        best = g.loc[g["makespan_s"].idxmin()]
        ok = g[g["makespan_s"] <= best["makespan_s"] * (1 + within_pct / 100)]
        small = ok.loc[ok["P"].idxmin()]
        row = {"N": int(N), "P_opt": int(best["P"]), "T_opt_s": float(best["makespan_s"]),
               "P_within": int(small["P"]), "T_within_s": float(small["makespan_s"]),
               "within_pct": within_pct}
        if g["analytic_s"].notna().any():
            a = g.loc[g["analytic_s"].idxmin()]
            row["analytic_P_opt"] = int(a["P"])
        out.append(row)
    return pd.DataFrame(out)


def saturation(df: pd.DataFrame, cm: CostModel, net: dict[str, float]) -> pd.DataFrame:
    """Demand-driven master/worker only (not the block sort, whose blocks are dealt
    statically): per N the replay-based saturation point (first P >= 2 whose master
    waits less than SATURATED_WAIT of the run) and paper 004's (first P with T_master >=
    T_worker, with the fitted task time and message sizes)."""
    out = []
    c = cm.cost
    u = cm.per_task
    for N, g in df[df["P"] >= 2].groupby("N"):
        sat = g[g["master_wait_share"] < SATURATED_WAIT]["P"]
        n = cm.spec(2, int(N)).n_tasks
        t_task = c("io", u, 2) + c("task", u, 2) + 2 * c("other", 0, 2)
        a = paper004.saturation(n, t_task, c("bytes:control", 0, 2), c("bytes:result", u, 2),
                                net["L"], net["G"], net["o_send"], net["o_b"], net["O_send"],
                                net["O_recv"], P_max=int(max(g["P"].max(), 2)))
        out.append({"N": int(N), "saturation_P": int(sat.min()) if len(sat) else math.nan,
                    "paper004_saturation_P": a["saturation_P"],
                    "paper004_optimal_P": a["optimal_P"]})
    return pd.DataFrame(out)


def isoefficiency(df: pd.DataFrame, E: float) -> dict[str, Any]:
    """paper 001's isoefficiency estimate from the predicted runs (``paper001.isoefficiency``,
    which takes T_o constant in W with one size; the command says one size is not enough, as
    T_o's growth with W is what the estimate rests on)."""
    runs = [(float(r.P), float(r.W_s), float(r.makespan_s)) for r in df.itertuples()]
    return paper001.isoefficiency(runs, E)
