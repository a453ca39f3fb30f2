"""Sweeps: the replays of one prepared trace over a grid of parameter values
(``hindsight sweep``; docs/replay.md). ``sweep(prep, model, base, vary) -> DataFrame``."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from replay import models as M
from replay.engine import _display, run
from replay.errors import NoPredictionError
from replay.flags import FlagCosts
from replay.models.base import NetworkModel
from replay.prepare import Prepared
from replay.resume import Resume

if TYPE_CHECKING:
    import pandas as pd


def parse_vary(spec: str, mod: NetworkModel) -> tuple[str, list[float], list[str]]:
    """``NAME=LO..HI:log|lin:N`` or ``NAME=V1,V2,...`` -> (name, internal values, labels)."""
    if "=" not in spec:
        raise M.ParamError(f"{spec}: expected NAME=LO..HI:log:N or NAME=V1,V2,...")
    name, rhs = spec.split("=", 1)
    name = name.strip()
    targets = M._expand(mod, name)
    p0 = mod.PARAMS[targets[0]]
    if p0.kind == "choice":
        vals = [v.strip() for v in rhs.split(",")]
        for v in vals:
            M._parse_one(mod, targets[0], v)
        return name, vals, vals
    if ".." in rhs:
        try:
            rng, how, count = rhs.split(":")
            lo_s, hi_s = rng.split("..")
            count = int(count)
        except ValueError:
            raise M.ParamError(f"{spec}: expected NAME=LO..HI:log:N or NAME=LO..HI:lin:N")
        if count < 2:
            # (a range of one value sweeps nothing between its ends: a list says that value)
            raise M.ParamError(f"{spec}: N must be at least 2 (for one value: NAME=VALUE)")
        lo = M._parse_one(mod, targets[0], lo_s)
        hi = M._parse_one(mod, targets[0], hi_s)
        if lo == hi:
            raise M.ParamError(f"{spec}: LO and HI are the same value (for one value: "
                               "NAME=VALUE)")
        if how == "log":
            if lo <= 0 or hi <= 0:
                raise M.ParamError(f"{spec}: a log range needs positive ends")
            vals = np.geomspace(lo, hi, count).tolist()
        elif how == "lin":
            vals = np.linspace(lo, hi, count).tolist()
        else:
            raise M.ParamError(f"{spec}: spacing must be 'log' or 'lin', not '{how}'")
        # 12 digits: 2e-06, not the 2.0000000000000003e-06 of the spacing's rounding
        vals = [float(f"{v:.12g}") for v in vals]
    else:
        vals = [M._parse_one(mod, targets[0], v) for v in rhs.split(",")]
    return name, vals, [str(v) for v in vals]


@dataclass
class SweepPoint:
    """One configuration of a sweep grid, as a picklable callable: ``point(prep, ci)`` replays
    configuration ``ci`` and returns its CSV row. The same code runs on a thread of this process
    (local executor) or in another MPI process (replay/executors.py), so results are identical."""

    model: str
    values0: dict[str, Any]
    axes: list[tuple[str, list, list[str]]]
    combos: np.ndarray
    compute_scale: float
    region_scale: Mapping[str, float] | None
    cpu_time: bool
    algorithms: Mapping[str, str] | None
    measured_ns: float
    flags: FlagCosts | None = None
    tracer_cost: np.ndarray | None = None
    resume: Resume | None = None

    def __call__(self, prep: Prepared, ci: int) -> dict[str, Any]:
        mod = M.get_model(self.model)
        v = dict(self.values0)
        row: dict[str, Any] = {}
        for (name, vals, _), j in zip(self.axes, self.combos[ci]):
            for tgt in M._expand(mod, name):
                v[tgt] = vals[j]
            row[name] = _display(mod, {M._expand(mod, name)[0]: vals[j]})[M._expand(mod, name)[0]]
        mod.check(v)
        try:
            res = run(prep, mod, resolved=v, compute_scale=self.compute_scale,
                      region_scale=self.region_scale, cpu_time=self.cpu_time,
                      algorithms=self.algorithms, record=False, flags=self.flags,
                      tracer_cost=self.tracer_cost, resume=self.resume)
        except NoPredictionError as exc:
            # A configuration whose model has no prediction is a row saying why, not the end
            # of the sweep: the other configurations of the grid may well have one.
            row.update(predicted_makespan_s=math.nan, measured_makespan_s=self.measured_ns / 1e9,
                       rel_error_pct=math.nan, max_wait_s=math.nan, failed=str(exc))
            return row
        row.update(predicted_makespan_s=res.makespan_ns / 1e9,
                   measured_makespan_s=self.measured_ns / 1e9, rel_error_pct=res.rel_error_pct,
                   max_wait_s=float(res.rank_wait_ns.max()) / 1e9 if len(res.rank_wait_ns) else 0)
        if "saturated_messages" in res.info:
            row["saturated_messages"] = res.info["saturated_messages"]
        if "not_a_prediction" in res.info:
            row["not_a_prediction"] = res.info["not_a_prediction"]
        if "one_host" in res.info:
            row[NOTE_KEY] = f"M/M/1: {res.info['one_host']}"
        return row


#: a configuration's row key for a model's note (dropped from the rows, kept in ``attrs``)
NOTE_KEY = "_note"


def sweep(prep: Prepared, model: str, base: Mapping[str, Any] | Sequence = (),
          vary: Sequence[str] = (), *, profile: Mapping[str, Any] | None = None,
          compute_scale: float = 1.0, region_scale: Mapping[str, float] | None = None,
          cpu_time: bool = False, algorithms: Mapping[str, str] | None = None,
          workers: int | None = None,
          progress: Callable[[int], None] | None = None,
          executor: str = "local", flags: FlagCosts | None = None,
          tracer_cost: np.ndarray | None = None, resume: Resume | None = None
          ) -> pd.DataFrame:
    """Replay every point of the grid spanned by ``vary``; one row per configuration.

    ``executor="local"``: configurations run on ``workers`` threads (the kernel releases the
    GIL). ``executor="mpi"``: they are distributed over MPI processes with mpi4py.futures
    (replay/executors.py); the rows are the same, in the same order. ``flags``,
    ``tracer_cost``, ``resume``: as ``engine.run``'s.
    """
    import pandas as pd

    from replay import executors

    mod = M.get_model(model)
    values0 = M.resolve(mod, base, profile)
    axes = [parse_vary(v, mod) for v in vary]
    if not axes:
        raise M.ParamError("give at least one parameter to vary")
    names = [a[0] for a in axes]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise M.ParamError(f"{', '.join(twice)}: varied twice (give each parameter one --vary "
                           "with all its values)")
    grid = np.array(np.meshgrid(*[np.arange(len(a[1])) for a in axes], indexing="ij"))
    combos = grid.reshape(len(axes), -1).T
    measured = mod.MODE == "measured"
    # Build (and cache) the stream once here, not racing to build it in every worker thread.
    flags = None if measured else flags
    prep.stream(expand=not measured, algorithms=dict(algorithms or {}),
                shared_flags=flags.limits() if flags is not None else frozenset())
    point = SweepPoint(mod.NAME, values0, axes, combos, compute_scale, region_scale, cpu_time,
                       algorithms, prep.measured_makespan_ns,
                       flags, tracer_cost, resume)
    rows = executors.run_points(executor, prep, point, len(combos), workers, progress)
    notes = sorted({r.pop(NOTE_KEY) for r in rows if NOTE_KEY in r})
    df = pd.DataFrame(rows)
    df.attrs["notes"] = notes       # what the model says of its configurations, once each
    return df
