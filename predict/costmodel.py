"""Cost models of compute blocks and message sizes, fitted from traces of one app and paradigm.

Paper 002 (§7, Tables 1-3) fits each block's cost function by linear least squares from trace
files and reports R². Here every quantity gets a small search over candidate terms, in the
manner of Extra-P: ``c0 [+ c1·f(u)] [+ c2·g(P)]`` with f from {u, u·log2 u, √u, u²} (u = input
units the block covers: elements, edges, documents) and g from {log2 P, P}: at most one term
per variable (Extra-P's single-term hypotheses). u terms when u takes two or more values, only
f = u with two (two sizes fix a line, not its form), P terms when P takes three or more (the
same reason); ``pickle`` (work on a message's bytes) is linear in them, f = u only. Each
candidate is fitted by weighted least squares (``numpy.linalg.lstsq``, weights 1/y so that small
and large blocks count alike: relative error). The tool exists to extrapolate, so candidates are
ranked by the worse of two errors: forward validation (fit on the smaller two thirds of the
distinct u, predict the largest third; with four or more distinct u; the same along P with
three or more distinct P) and leave-one-out; a near tie (5 %) goes to the fewest terms, then to
the form nearest the line. Samples are first reduced to their mean per distinct (u, P) (the
mean, not the median: a makespan sums durations, preemption spikes included), and a mean of k
samples gets k times the weight. A fit's ``error`` is the worse of its leave-one-out and
forward errors; extrapolating a fit whose error exceeds the limit (or that rests on one point)
is refused by ``CostModel.check``.

Quantities: the regions ``io`` (one task's input), ``load`` (the whole input), ``task``,
``merge``, ``divide``, ``conquer``, ``combine``, ``global_merge`` (one step of the block sort's
p-way merge on rank 0); ``other`` (time between events outside every
region and call: interpreter, tracing) and ``pickle`` (the same gap next to a call that moves
data: the pickle API pickles before a send and unpickles after a receive, so it is modelled
against those bytes); ``bytes:result`` / ``bytes:problem`` / ``bytes:block`` / ``bytes:part`` /
``bytes:control`` (message sizes of a partial result, of a divided problem, of a dealt block, of
a sorted part, of a task index or request). The unit counts of each measured block come from the
same skeleton event generator that synthesis uses (``predict.events.events``), aligned row by
row with the trace.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from hindsight import trace as tf
from hindsight.errors import DataError
from predict.config import UNIT_NAMES, Spec, SynthesisError, spec_from_manifest
from predict.events import Ev, events
from predict.order import measured_order


class FitError(DataError, ValueError):
    """A trace that cannot be used, or a prediction from a fit too poor to trust."""


def _lg(x: np.ndarray) -> np.ndarray:
    return np.log2(np.maximum(x, 1.0))


#: Candidate u terms, in the order that breaks a near tie: the linear term first (the
#: simplest hypothesis), then the forms further from it.
U_TERMS: dict[str, Any] = {
    "u": lambda u: u,
    "u·log2(u)": lambda u: u * _lg(u),
    "√u": lambda u: np.sqrt(np.maximum(u, 0.0)),
    "u²": lambda u: u * u,
}
#: Candidate u terms of a quantity when not all of U_TERMS. Work on a message's bytes (pickling,
#: allocating and first-touching the receive buffer, unpickling) is a pass over them: linear in
#: the bytes, whichever curve fits a few sizes best.
#: A √u that fits 1 KiB..2 MiB predicts half the cost of a 4 MiB message.
U_FORMS_OF: dict[str, tuple[str, ...]] = {"pickle": ("u",)}

P_TERMS: dict[str, Any] = {
    "log2(P)": lambda P: _lg(P),
    "P": lambda P: P,
}


def _column(term: str, u: np.ndarray, P: np.ndarray) -> np.ndarray:
    return U_TERMS[term](u) if term in U_TERMS else P_TERMS[term](P)


@dataclass
class Fit:
    """``y = c0 + Σ c_i·term_i(u, P)`` with its quality and the data range it was fitted on."""
    quantity: str
    terms: tuple[str, ...]
    coef: tuple[float, ...]            # intercept first
    r2: float
    cv_rel_err: float                  # leave-one-out relative RMS error on the fitted points
    max_rel_resid: float               # largest |residual|/y on the fitted points
    points: int                        # distinct (u, P) points fitted
    samples: int                       # raw samples behind them
    u_range: tuple[float, float]
    P_range: tuple[int, int]
    residuals: list[float] = field(default_factory=list)  # relative, per point
    fwd_rel_err: float = math.nan      # forward validation: smaller u predicting the larger
    u_levels: int = 1                  # distinct u (within 1 %): the form is tested from 3

    @property
    def error(self) -> float:
        """The error that decides whether the fit may be extrapolated: the worse of the
        leave-one-out and the forward-validation errors (nan when neither could be computed)."""
        errs = [e for e in (self.cv_rel_err, self.fwd_rel_err) if not math.isnan(e)]
        return max(errs) if errs else math.nan

    def __call__(self, u: float | np.ndarray, P: float | np.ndarray) -> Any:
        u = np.asarray(u, float)
        P = np.asarray(P, float)
        y = self.coef[0] + sum(c * _column(t, u, P) for t, c in zip(self.terms, self.coef[1:]))
        return y if np.ndim(y) else float(y)

    def formula(self, unit: str = "") -> str:
        parts = [f"{self.coef[0]:.4g}"] + [f"{c:+.4g}·{t}" for t, c in zip(self.terms,
                                                                          self.coef[1:])]
        return " ".join(parts) + (f" {unit}" if unit else "")

    def bad(self, max_rel_err: float) -> bool:
        return not (self.error <= max_rel_err)

    def as_dict(self) -> dict[str, Any]:
        return {"quantity": self.quantity, "formula": self.formula(), "terms": list(self.terms),
                "coef": list(self.coef), "r2": self.r2, "cv_rel_err": self.cv_rel_err,
                "fwd_rel_err": self.fwd_rel_err, "max_rel_resid": self.max_rel_resid,
                "points": self.points, "samples": self.samples, "u_levels": self.u_levels,
                "u_range": list(self.u_range), "P_range": list(self.P_range)}


def _levels(x: np.ndarray) -> int:
    """How many distinct values ``x`` takes, values within 1 % above the smallest of a group
    counting as one (messages of 131209 and 131216 bytes are one size: they cannot tell a curve
    from a line); a range of close values spread wide counts as many."""
    levels, top = 0, -math.inf
    for v in np.unique(x).tolist():
        if v > top:
            levels, top = levels + 1, v + 0.01 * abs(v)
    return levels


def _identifiable(A: np.ndarray) -> bool:
    """Whether the points of design ``A`` pin every term down: each non-constant column spreads
    over at least 1e-3 of its magnitude (points at one u, give or take a few bytes, fix a
    level but no slope)."""
    for col in A.T[1:]:
        if np.ptp(col) <= 1e-3 * max(float(np.abs(col).max()), 1e-300):
            return False
    return True


def _loo_rel(A: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    """Leave-one-out relative RMS error of a weighted linear fit (refit per left-out point).

    A point whose removal leaves the rest unable to determine the terms (the only small
    message among many of one size) is not left out: that refit would have no slope to
    predict with, and its error would say nothing about the model (it would favour the model
    without the term). inf when no point can be left out."""
    n = len(y)
    if n <= A.shape[1]:
        return math.inf
    errs = []
    for i in range(n):
        keep = np.arange(n) != i
        if not _identifiable(A[keep]):
            continue
        sol, *_ = np.linalg.lstsq(A[keep] * w[keep, None], y[keep] * w[keep], rcond=None)
        errs.append((A[i] @ sol - y[i]) / max(abs(y[i]), 1e-300))
    return float(np.sqrt(np.mean(np.square(errs)))) if errs else math.inf


def _forward_rel(A: np.ndarray, y: np.ndarray, w: np.ndarray, u: np.ndarray,
                 min_levels: int = 4) -> float:
    """Forward (extrapolation) validation: fit on the points of the smaller two thirds of the
    distinct values of u (or P), predict the largest third; relative RMS error. inf when it
    cannot be done."""
    levels = np.unique(u)
    if len(levels) < min_levels:
        return math.inf
    cut = levels[int(math.ceil(len(levels) * 2 / 3)) - 1]
    train, test = u <= cut, u > cut
    if train.sum() <= A.shape[1] or not test.any():
        return math.inf
    sol, *_ = np.linalg.lstsq(A[train] * w[train, None], y[train] * w[train], rcond=None)
    err = (A[test] @ sol - y[test]) / np.maximum(np.abs(y[test]), 1e-300)
    return float(np.sqrt(np.mean(np.square(err))))


def fit(quantity: str, u: Sequence[float], P: Sequence[float], y: Sequence[float]) -> Fit:
    """Fit one quantity from samples (u, P, y); see the module docstring for the search."""
    df = pd.DataFrame({"u": np.asarray(u, float), "P": np.asarray(P, float),
                       "y": np.asarray(y, float)})
    df = df[np.isfinite(df["y"])]
    if df.empty:
        raise FitError(f"{quantity}: no samples to fit")
    g = df.groupby(["u", "P"], as_index=False)["y"].agg(["mean", "count"])
    uu, PP, yy = g["u"].to_numpy(), g["P"].to_numpy(), g["mean"].to_numpy()
    # relative error, and a mean of k samples counts as k (its variance is 1/k of one sample's)
    w = np.sqrt(g["count"].to_numpy()) / np.maximum(np.abs(yy),
                                                    max(1e-12, float(np.abs(yy).max()) * 1e-9))
    forms = U_FORMS_OF.get(quantity, tuple(U_TERMS))
    # Two sizes fix a line but not its form: every curve through the two means fits them
    # exactly, and leave-one-out, refitting at the same sizes, cannot tell the curves apart.
    # So with two sizes only the linear term is a candidate; curves need three or more.
    u_levels = _levels(uu)
    u_terms = [None] + (list(forms) if u_levels >= 3 else ["u"] if u_levels == 2 else [])
    # Two rank counts fix a line through two points but not its form, and extrapolating a
    # guessed form from P = 1, 2 to thousands is wild: P terms need three or more distinct P
    # (with fewer, the P effect is averaged into the other coefficients).
    P_terms = [None] + ([t for t in P_TERMS] if len(np.unique(PP)) >= 3 else [])
    # The tool exists to extrapolate, so hypotheses are ranked by the worse of how well the
    # smaller u predict the larger ones (forward validation, with enough distinct u) and
    # leave-one-out; ties (within 5 %, or 0.5 % absolute) go to the fewest terms, then to the
    # earlier u form in U_TERMS (the linear first).
    results = []
    for tu, tp in itertools.product(u_terms, P_terms):  # one term per variable, as Extra-P
        terms = tuple(t for t in (tu, tp) if t)
        if terms and len(terms) + 1 > len(yy) - 1:
            continue  # validation needs more points than parameters
        A = np.column_stack([np.ones(len(yy))] + [_column(t, uu, PP) for t in terms])
        loo = _loo_rel(A, yy, w) if len(yy) > len(terms) + 1 else math.inf
        # forward in u, and in P as well when there are three or more P: a P term has to
        # predict the largest P from the smaller ones to be believed
        fwds = [f for f in (_forward_rel(A, yy, w, uu), _forward_rel(A, yy, w, PP, 3))
                if math.isfinite(f)]
        fwd = max(fwds) if fwds else math.inf
        results.append((max(fwd, loo) if math.isfinite(fwd) else loo, loo, fwd, terms))
    pool = [r for r in results if math.isfinite(r[0])] or [(math.inf, math.inf, math.inf, ())]
    lowest = min(r[0] for r in pool)
    rank = {t: i for i, t in enumerate(itertools.chain(U_TERMS, P_TERMS))}
    _, loo, fwd, terms = min((r for r in pool if r[0] <= lowest * 1.05 + 0.005),
                             key=lambda r: (len(r[3]), [rank[t] for t in r[3]], r[0]))
    A = np.column_stack([np.ones(len(yy))] + [_column(t, uu, PP) for t in terms])
    sol, *_ = np.linalg.lstsq(A * w[:, None], yy * w, rcond=None)
    pred = A @ sol
    ss_tot = float(((yy - yy.mean()) ** 2).sum())
    r2 = 1 - float(((yy - pred) ** 2).sum()) / ss_tot if ss_tot > 0 else math.nan
    rel = (pred - yy) / np.maximum(np.abs(yy), 1e-300)
    if not math.isfinite(loo):  # one point: nothing to validate against; say so via nan
        loo = math.nan if len(yy) == 1 else loo
    return Fit(quantity, tuple(terms), tuple(float(c) for c in sol), r2, loo,
               float(np.abs(rel).max()), len(yy), len(df),
               (float(uu.min()), float(uu.max())), (int(PP.min()), int(PP.max())),
               [float(x) for x in rel], fwd if math.isfinite(fwd) else math.nan, u_levels)


# ----------------------------------------------------------------------------------------------
# Samples from traces


def _expected_rows(evs: list[Ev]) -> list[Ev]:
    """The trace rows an event list produces, in order (regions at their exit)."""
    return [e for e in evs if e.kind != "enter"]


def samples(trace_dir: Path | str, cpu_time: bool = False) -> tuple[Spec, pd.DataFrame]:
    """(spec, samples) of one measured trace: columns quantity, u, P, y, trace.

    ``cpu_time`` takes region durations from their CPU time (``cpu_ns``) instead of the wall
    clock: what the blocks cost on a dedicated core, without the preemption of a shared or
    oversubscribed machine (as ``hindsight replay --cpu-time``)."""
    trace_dir = Path(trace_dir)
    try:
        tr = tf.read_trace(trace_dir, allow_partial=False)
    except tf.TraceError as exc:
        raise FitError(str(exc)) from None
    if tr.manifest.get("synthetic"):
        raise FitError(f"{trace_dir}: a synthetic trace; fit from measured runs")
    try:
        spec = spec_from_manifest(tr.manifest, str(trace_dir))
    except SynthesisError as exc:
        raise FitError(str(exc)) from None
    df = tr.to_pandas()
    df["op"] = df["op"].astype(str)
    df["region"] = df["region"].astype(object)
    try:
        evs = events(spec, measured_order(spec, df))
    except SynthesisError as exc:
        raise FitError(f"{trace_dir}: {exc}") from None
    out: list[tuple[str, float, int, float]] = []
    P = spec.P
    for r in range(P):
        rows, alloc = _merge_probes(df[df["rank"] == r].sort_values("seq"))
        exp = _expected_rows(evs[r])
        if len(rows) != len(exp):
            raise FitError(f"{trace_dir}: rank {r} has {len(rows)} events, the {spec.paradigm} "
                           f"skeleton gives {len(exp)} for {spec.N} {UNIT_NAMES[spec.app]} "
                           "(a trace of another program or version?)")
        last_end = None
        unpickle = 0.0  # bytes received by the previous call: unpickled after it returns
        pending_alloc = 0.0
        for row, e in zip(rows.itertuples(index=False), exp):
            want = "region" if e.kind == "exit" else e.name
            if row.op != want or (e.kind == "mpi" and e.name != "Comm_split"
                                  and (row.peer != e.peer or row.tag != e.tag)):
                raise FitError(f"{trace_dir}: rank {r} event {row.seq} is {row.op} peer "
                               f"{row.peer} tag {row.tag}; the skeleton expects {want} peer "
                               f"{e.peer} tag {e.tag}")
            dur = (row.t_end - row.t_start) / 1e9
            if cpu_time and row.op == "region" and row.cpu_ns >= 0:
                dur = row.cpu_ns / 1e9
            if e.kind == "exit":
                if e.name == "send_to_server":
                    continue
                out.append((e.cost_key, e.cost_units, P, dur))
            elif row.op in tf.SEND_OPS:
                out.append((f"bytes:{e.msg}", e.units, P, float(row.nbytes)))
            # Time outside every region and call ("other"): interpreter, tracing, and the
            # pickling the pickle API does before a send and after a receive, so it is
            # modelled against those bytes.
            pickled = unpickle + (float(row.nbytes) if row.op in tf.SEND_OPS else 0.0)
            if last_end is not None:
                out.append(("pickle" if pickled else "other", pickled, P,
                            max(0.0, (row.t_start - last_end) / 1e9) + pending_alloc))
            pending_alloc = 0.0
            unpickle = float(row.nbytes) if row.op == "Recv" else 0.0
            if row.op == "Recv":
                pending_alloc = alloc.get(row.seq, 0.0)
            last_end = row.t_end if last_end is None else max(last_end, row.t_end)
    frame = pd.DataFrame(out, columns=["quantity", "u", "P", "y"])
    frame["trace"] = str(trace_dir)
    return spec, frame


def _merge_probes(rows: pd.DataFrame) -> tuple[pd.DataFrame, dict[int, float]]:
    """One rank's rows with each traced pickle-API recv as one row again: a Probe row followed by
    the Recv of the same message (``hindsight.trace.probes_before_receives``) becomes that Recv
    starting at the probe (the skeletons
    describe the program's calls, not mpi4py's inner ones). Returns the rows and, per merged
    Recv (by seq), the seconds between the two rows (allocating the receive buffer), which the
    caller counts with the unpickling after the receive: both are the receiver's work on the
    received bytes."""
    rows = rows.reset_index(drop=True)
    op = rows["op"].to_numpy()
    pr = tf.probes_before_receives(op == "Probe", op == "Recv", rows["peer"].to_numpy(),
                                   rows["tag"].to_numpy(), rows["comm"].to_numpy())
    if not len(pr):
        return rows, {}
    t_start = rows["t_start"].to_numpy().copy()
    gap = (t_start[pr + 1] - rows["t_end"].to_numpy()[pr]) / 1e9
    t_start[pr + 1] = t_start[pr]
    rows = rows.assign(t_start=t_start)
    alloc = dict(zip(rows["seq"].to_numpy()[pr + 1].tolist(), np.maximum(gap, 0.0).tolist()))
    return rows.drop(index=pr).reset_index(drop=True), alloc


def _trace_dirs(paths: Iterable[Path | str]) -> list[Path]:
    """Trace directories among ``paths``: a trace itself, or a directory holding traces."""
    out: list[Path] = []
    for p in map(Path, paths):
        if (p / tf.MANIFEST_NAME).is_file():
            out.append(p)
        elif p.is_dir():
            found = sorted(d for d in p.iterdir() if (d / tf.MANIFEST_NAME).is_file())
            if not found:
                raise FitError(f"{p}: neither a trace nor a directory of traces")
            out.extend(found)
        else:
            raise FitError(f"{p}: no such trace or directory")
    return out


@dataclass
class CostModel:
    """Fitted models of one app and paradigm; ``cost(quantity, u, P)`` in seconds or bytes."""
    app: str
    paradigm: str
    per_task: int
    fits: dict[str, Fit]
    traces: list[str]
    configs: list[tuple[int, int]]            # measured (P, N)
    queried: dict[str, tuple[float, float]] = field(default_factory=dict)  # max (u, P) asked
    least_u: dict[str, float] = field(default_factory=dict)  # min u > 0 asked
    untraced: list[str] = field(default_factory=list)   # untraced runs found beside the traces
    disturbed: list[str] = field(default_factory=list)  # fitted traces whose runs were disturbed
    negative: dict[str, tuple[float, float, float]] = field(default_factory=dict)  # (u, P, y)

    def cost(self, quantity: str, u: float, P: int) -> float:
        f = self.fits.get(quantity)
        if f is None:
            return 0.0  # a block this configuration never ran (e.g. no merge at P = 1)
        qu, qP = self.queried.get(quantity, (0.0, 0.0))
        self.queried[quantity] = (max(qu, u), max(qP, P))
        if u > 0:
            self.least_u[quantity] = min(self.least_u.get(quantity, u), u)
        y = f(u, P)
        if y < 0 and quantity not in self.negative:
            self.negative[quantity] = (u, P, y)
        return max(0.0, y)

    def spec(self, P: int, N: int) -> Spec:
        return Spec(self.app, self.paradigm, P, N, self.per_task)

    def check(self, max_rel_err: float) -> tuple[list[str], list[str]]:
        """(errors, warnings) about the queries made so far: extrapolating from a bad fit is an
        error, from a good one a warning that says how far."""
        errors, warnings = [], []
        p_free: list[str] = []
        p_max, p_fit = 0, 0
        for q, (u, P) in sorted(self.queried.items()):
            f = self.fits[q]
            far = []
            if u > f.u_range[1] * 1.001 and u > 0:
                far.append(f"u up to {u:.4g} ({u / max(f.u_range[1], 1e-300):.3g}x the "
                           f"largest fitted {f.u_range[1]:.4g})")
            low = self.least_u.get(q, 0.0)
            if 0 < low < f.u_range[0] * 0.999:
                # below the measured sizes too (a --size smaller than a task): never silent
                far.append(f"u down to {low:.4g} (the smallest fitted {f.u_range[0]:.4g})")
            if P > f.P_range[1]:
                if any(t in P_TERMS for t in f.terms):
                    far.append(f"P up to {int(P)} (fitted up to {f.P_range[1]})")
                else:
                    # A fit without a P term asserts the cost does not depend on P: beyond the
                    # measured P that is an assumption (said once), not an extrapolated formula.
                    p_free.append(q)
                    p_max, p_fit = max(p_max, int(P)), max(p_fit, f.P_range[1])
            if not far:
                continue
            fwd = "" if math.isnan(f.fwd_rel_err) else \
                f", forward-validation error {f.fwd_rel_err * 100:.1f} %"
            msg = (f"{q}: {f.formula()} extrapolated to " + " and ".join(far) +
                   f"; fit R² {f.r2:.3f}, leave-one-out error {f.cv_rel_err * 100:.1f} %{fwd}")
            if u > f.u_range[1] * 1.001 and u > 0 and f.u_levels == 2 and f.terms[:1] == ("u",):
                # the errors above measure the scatter at the two sizes, not the line's form
                msg += "; from 2 distinct sizes, so linear in u is assumed, not tested"
            if f.bad(max_rel_err):
                errors.append(msg + f" (limit {max_rel_err * 100:.0f} %)")
            else:
                warnings.append(msg)
        for q, (u, P, y) in sorted(self.negative.items()):
            # A fitted form that goes below zero where it is used does not describe the cost
            # there (it is clipped to 0): never a silent answer.
            f = self.fits[q]
            errors.append(f"{q}: {f.formula()} is negative ({y:.3g}) at u = {u:.4g}, P = {int(P)}"
                          f" (fitted on u {f.u_range[0]:.4g}..{f.u_range[1]:.4g}, P "
                          f"{f.P_range[0]}..{f.P_range[1]})")
        if p_free:
            warnings.append(f"{', '.join(p_free)}: taken as independent of P beyond the measured "
                            f"P <= {p_fit} (predicted up to P = {p_max})")
        return errors, warnings

    def table(self) -> pd.DataFrame:
        rows = []
        for q, f in sorted(self.fits.items()):
            d = f.as_dict()
            d["unit"] = "B" if q.startswith("bytes") else "s"
            rows.append(d)
        return pd.DataFrame(rows)


def fit_traces(paths: Iterable[Path | str], app: str | None = None,
               paradigm: str | None = None, cpu_time: bool = False) -> CostModel:
    """Fit every quantity from the traces (or directories of traces) in ``paths``
    (``cpu_time``: region costs from CPU time, see ``samples``)."""
    paths = list(paths)
    given = {Path(p) for p in paths}
    dirs = _trace_dirs(paths)
    if not dirs:
        raise FitError("no traces given")
    specs, frames, seen, untraced, disturbed = [], [], [], [], []
    for d in dirs:
        try:
            man = tf.read_manifest(d)
        except tf.TraceError as exc:
            raise FitError(str(exc)) from None
        if man.get("traced") is False and d not in given:
            # the ground truth of a traced run, kept beside it (collect --untraced): no costs
            untraced.append(str(d))
            continue
        seen.append(f"{man.get('app')} on {man.get('paradigm')}")
        if app and man.get("app") != app or paradigm and man.get("paradigm") != paradigm:
            continue  # filter on the manifest before reading any rows
        spec, fr = samples(d, cpu_time)
        specs.append((d, spec))
        frames.append(fr)
        why = (["oversubscribed"] if man.get("oversubscribed") else []) + tf.run_problems(man)
        if why:
            disturbed.append(f"{d} ({'; '.join(why)})")
    if not specs and not seen:
        raise FitError(f"only untraced runs (no costs to fit): {', '.join(untraced)}")
    if not specs:
        wanted = " on ".join(filter(None, (app, paradigm))) if app else f"on {paradigm}"
        raise FitError(f"none of the {len(seen)} traces is {wanted} (they are "
                       f"{', '.join(sorted(set(seen)))})")
    first = specs[0][1]
    for d, s in specs:
        if (s.app, s.paradigm) != (first.app, first.paradigm):
            raise FitError(f"{d}: {s.app} on {s.paradigm}, but {specs[0][0]} is {first.app} on "
                           f"{first.paradigm}; give --app and --paradigm to choose")
        if s.per_task != first.per_task:
            raise FitError(f"{d}: {s.per_task} units per task, {specs[0][0]} has "
                           f"{first.per_task}; fit runs of one task granularity")
    data = pd.concat(frames, ignore_index=True)
    fits = {q: fit(q, g["u"], g["P"], g["y"]) for q, g in data.groupby("quantity")}
    return CostModel(first.app, first.paradigm, first.per_task, fits, [str(d) for d, _ in specs],
                     sorted({(s.P, s.N) for _, s in specs}), untraced=untraced,
                     disturbed=disturbed)
