"""Running one cell of the validation matrix and predicting it: its traced and untraced runs,
the actual time (the ground truth), the replay and analytic predictions, and cross-network
predictions from one network's trace to another network.

Actual time = the wall time (manifest ``wall_ns``: start barrier to the end of the program) of
the untraced runs, each launched right after the traced run of the same repetition (cells
that differ only in their recorder share them: ``untraced_key``), mean (or median, spec
``actual``) and sample sd over the repetitions (``ground_truth = "traced"``: the
traced runs' ``makespan_ns``, and no untraced runs). Replay and analytic predictions use the
trace of repetition ``replay_rep`` (default 0; ``"median"``: the median run; ``"all"``: every
repetition is predicted from its own trace and the predictions are averaged as the actual time
is).
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

import replay
from hindsight import trace as tf
from hindsight.trace.manifest import untraced_text
from hindsight.collect import INTERRUPTED, by_library, collect, plain_untraced
from replay import models as M
from replay.cache import remove_tree
from replay.prepare import host_placement
from replay.transport_cost import transport_cost
from validation.params import analytic
from validation.profiles import read_profile, replay_kwargs
from validation.spec import Cell, Spec, set_assignments

#: why a program's cell has no analytic prediction (its cell JSON's ``analytic_note``)
NO_ANALYTIC = ("no analytic model for a program: the analytic (paper) models describe the "
               "paradigms of hindsight's applications")


def _trace_ok(d: Path, untraced: bool = False) -> dict | None:
    """The manifest of a complete run in ``d`` of the kind asked for, else None."""
    try:
        m = tf.read_manifest(d)
    except Exception:
        return None
    if (m.get("traced") is False) != untraced:
        return None
    return m if m.get("complete") and m.get("makespan_ns") else None


def _run_of(m: dict, cell: Cell, net: dict) -> bool:
    """Whether a run's manifest is a run of ``cell`` (its app and paradigm, or its program's
    resolved path; ranks, arguments and transport), so that a run left by another spec under
    the same cell name is not reused."""
    if (m.get("program") or None) != cell.program:
        # a program's run records the program's path, an application's run none: runs of two
        # programs of one name (in two folders) are told apart here
        return False
    recorded = {"ranks": m.get("ranks"), "args": (m.get("args") or {}).get("argv"),
                "transport": (m.get("network") or {}).get("transport")}
    wanted = {"ranks": cell.ranks, "args": list(cell.args), "transport": net["transport"]}
    if m.get("traced") is False:
        if (m.get("launch") == "plain") != plain_untraced(cell.program):
            return False                    # not launched as this version launches it
    elif cell.program is not None \
            and (m.get("tracer") == "pmpi") != by_library(cell.program, cell.recorder):
        return False                        # a run launched for the other recorder
    if cell.program is None:
        recorded.update(app=m.get("app"), paradigm=m.get("paradigm"))
        wanted.update(app=cell.app, paradigm=cell.paradigm)
    return all(recorded[k] is None or recorded[k] == wanted[k] for k in wanted)


def _run_rep(cell: Cell, spec: Spec, d: Path, untraced: bool) -> dict:
    """One repetition's run in ``d`` (reused if complete and a run of ``cell``); returns its
    manifest."""
    net = spec.networks[cell.network]
    m = _trace_ok(d, untraced)
    if m is not None and not _run_of(m, cell, net):
        m = None                            # another command's run under this name
    if m is None:
        if d.exists():
            # a partial run from an interruption, or not this cell's
            remove_tree(d)
        d.parent.mkdir(parents=True, exist_ok=True)
        app = dict(program=cell.program) if cell.program else \
            dict(app=cell.app, paradigm=cell.paradigm)
        rc, m = collect(cell.ranks, d, **app, args=list(cell.args), transport=net["transport"],
                        timeout=spec.timeout, quiet=True, testbed=net.get("testbed_name"),
                        untraced=untraced, recorder=cell.recorder)
        if rc == INTERRUPTED:
            raise KeyboardInterrupt        # Ctrl-C stops the whole validation, not this cell
        if rc != 0 or not m.get("complete") or not m.get("makespan_ns"):
            raise RuntimeError(f"{'untraced' if untraced else 'traced'} run "
                               f"{Path(*d.parts[-3:])}: {run_failure(rc, m)}")
    return m


def run_failure(rc: int, manifest: dict) -> str:
    """Why a run failed, as `collect` says it: the exit code, the --timeout that stopped it and
    where each rank was then (manifest ``timed_out_after_s``, ``stopped_in``), what a rank
    raised (``rank_errors``); else the ranks that did not complete (``rank_status``)."""
    from instrument.stopped import describe

    parts = [f"exit code {rc}"]
    if manifest.get("timed_out_after_s"):
        parts.append(f"timed out after {manifest['timed_out_after_s']:g} s (the spec's timeout)")
    parts += describe(manifest.get("stopped_in") or {})
    errors = tf.rank_errors(manifest)
    for rank, error in errors:
        parts.append(f"rank {rank} raised: {error}")
    if not manifest.get("timed_out_after_s") and not errors:
        bad = [f"{r}:{s}" for r, s in enumerate(manifest.get("rank_status") or [])
               if s != "complete"]
        parts.append(f"ranks not complete: {' '.join(bad)}" if bad else
                     "the run is incomplete" if not manifest.get("complete") else
                     "no makespan recorded")
    return "; ".join(parts)


def untraced_note(manifest: dict) -> str:
    """``3 calls (Alltoallw 3) not traced: their traffic is not in the prediction`` from a
    replayed run's manifest ``untraced_calls``; "" when it counts none. Replay leaves those
    calls out: a prediction of that trace lacks their time."""
    counts = manifest.get("untraced_calls") or {}
    return f"{untraced_text(counts)} not traced: their traffic is not in the prediction" \
        if counts else ""


def untraced_key(cell: Cell, spec: Spec) -> str:
    """The folder (DIR/untraced/<key>) of ``cell``'s untraced runs: the key of the first cell
    of the spec that runs the same thing untraced (program or application and paradigm, ranks,
    arguments, network). Cells that differ only in their recorder (`recorder = "python"` and
    `"pmpi"` of one program) share their untraced runs, so that both are compared with the
    same ground truth rather than with two sets of runs taken minutes apart."""
    def same(c: Cell) -> tuple:
        return (c.program, c.app, c.paradigm, c.ranks, tuple(c.args), c.network)
    return next((c.key for c in spec.cells if same(c) == same(cell)), cell.key)


def collect_rep(cell: Cell, spec: Spec, out: Path, k: int) -> tuple[dict, dict | None]:
    """Collect (or reuse complete) repetition ``k`` of ``cell``: its traced run, then (ground
    truth "untraced") its untraced one, so that a drift of the machine's speed hits both kinds
    alike. Returns (traced manifest, untraced manifest or None)."""
    traced = _run_rep(cell, spec, out / "traces" / cell.key / f"rep{k}", False)
    if spec.ground_truth != "untraced":
        return traced, None
    return traced, _run_rep(cell, spec, out / "untraced" / untraced_key(cell, spec) / f"rep{k}",
                            True)


def collect_reps(cell: Cell, spec: Spec, out: Path) -> tuple[list[dict], list[dict]]:
    """Every repetition of ``cell`` (``collect_rep``). Returns (traced manifests, untraced
    manifests)."""
    traced, untraced = [], []
    for k in range(spec.repetitions):
        t, u = collect_rep(cell, spec, out, k)
        traced.append(t)
        if u is not None:
            untraced.append(u)
    return traced, untraced


def collect_rounds(cells: list[Cell], spec: Spec, out: Path,
                   progress: bool = True) -> dict[str, str]:
    """Spec ``order = "rounds"``: collect repetition 0 of every cell, then repetition 1, and so
    on. This VM's speed moves by up to 2x within minutes (docs/validation.md, "Order of the
    runs"); cell by cell, one cell's runs may all fall in a slow phase and the next cell's in a
    fast one, and a cross-network prediction compares the two. Round by round, every cell's runs
    sample the same phases, and its median is comparable with every other cell's. Returns
    {cell key: why its run failed}; a failed cell's later repetitions are not run."""
    from tqdm import tqdm

    failed: dict[str, str] = {}
    with tqdm(total=len(cells) * spec.repetitions, desc="runs", unit="rep",
              disable=None if progress else True, file=sys.stderr) as bar:   # (terminal only)
        for k in range(spec.repetitions):
            for cell in cells:
                bar.set_postfix_str(f"{cell.key} rep{k}")
                if cell.key not in failed:
                    try:
                        collect_rep(cell, spec, out, k)
                    except RuntimeError as exc:
                        failed[cell.key] = str(exc)
                        tqdm.write(f"cell {cell.key} failed: {exc}", file=sys.stderr)
                bar.update()
    return failed


def replay_predictions(trace: Path, manifest: dict, profile: dict, spec: Spec,
                       profile_path: Path | None = None,
                       placed_like: dict | None = None,
                       trace_profile: dict | None = None) -> list[dict]:
    """Replay one trace under every replay model of the spec with one network's profile;
    ``placed_like`` is the manifest of a run on the predicted network, whose rank-to-host
    placement the replay takes (M/M/1 is the model that depends on it); ``trace_profile``, the
    profile of the network the trace was taken on, lets rule transport_burst_cost
    (replay.transport_cost) swap that transport's cost in the bursts for ``profile``'s."""
    prep = replay.prepare(trace)
    if placed_like is not None:
        prep = dataclasses.replace(prep, host_of_rank=host_placement(placed_like, prep.nranks))
    lead = (manifest["makespan_ns"] - prep.measured_makespan_ns) / 1e9
    cost = transport_cost(trace_profile, profile, "trace network's profile")
    preds = []
    for model in spec.replay:
        mod = M.get_model(model)
        kw, rules = replay_kwargs(model, profile, profile_path, manifest)
        if trace_profile is not None:
            kw["resume"] = rules.resume_for(mod, trace_profile)
        assigns = set_assignments(spec.replay_set.get(model, []))
        try:
            r = replay.run(prep, model, assigns, record=False,
                           transport_cost=None if mod.OWN_SIMULATOR else cost, **kw)
            pred = r.makespan_ns / 1e9 + lead
            note = ""
        except (replay.ReplayError, replay.ParamError) as exc:
            pred, note, r = math.nan, str(exc), None
        rule = {}
        if r is not None and "transport_burst_cost_s" in r.info:
            rule = {"transport_burst_cost_s": r.info["transport_burst_cost_s"],
                    "transport_burst_cost": r.info["transport_burst_cost"]}
        if r is not None and "shared_flag_meeting" in r.info:
            rule["shared_flag_meeting"] = r.info["shared_flag_meeting"]
        if r is not None:
            rule.update(rules.json(mod, r.info))
        # the parameters the replay ran with (the profile's, then the spec's set.MODEL)
        preds.append({"predictor": f"replay:{model}", "predicted_s": pred,
                      "params": kw["profile"] if r is None else r.params,
                      "set": spec.replay_set.get(model, []),
                      "lead_in_s": lead, "note": note, **rule})
    return preds


def run_cell(cell: Cell, spec: Spec, out: Path, profile_path: Path) -> dict[str, Any]:
    """Run (or reuse) every repetition of ``cell`` and predict it: the per-cell result written
    to DIR/cells/<cell>.json (actual times, traced times, perturbation, predictions with their
    relative error (predicted - actual) / actual in %)."""
    manifests, untraced = collect_reps(cell, spec, out)
    to_end = spec.ground_truth == "untraced"
    # Like with like: an untraced run's time runs from the start barrier to the end of the
    # program (`wall_ns`), so the traced runs are compared by the same interval; the traced
    # ground truth is the traced makespan (start barrier to the last recorded event).
    traced_times = [(wall_s(m) if to_end else m["makespan_ns"] / 1e9) for m in manifests]
    untraced_times = [wall_s(m) for m in untraced]
    times = untraced_times if to_end else traced_times
    stat = statistics.median if spec.actual == "median" else statistics.mean
    if isinstance(spec.replay_rep, int):
        rep = spec.replay_rep
    else:
        # the traced run in the middle (also the one shown when every run is replayed): on a
        # shared machine, a run disturbed by other jobs carries the disturbance in its compute
        # times, which every replay of its trace would inherit
        rep = sorted(range(len(traced_times)), key=traced_times.__getitem__)[
            (len(traced_times) - 1) // 2]
    res: dict[str, Any] = {
        "app": cell.app, "paradigm": cell.paradigm, "program": cell.program,
        "recorder": cell.recorder, "ranks": cell.ranks, "size": cell.size,
        "args": cell.args, "network": cell.network, "baseline": cell.baseline,
        "repetitions": len(times), "ground_truth": spec.ground_truth, "actual_runs_s": times,
        "actual_s": stat(times), "actual_stat": spec.actual,
        "actual_sd_s": statistics.stdev(times) if len(times) > 1 else 0.0,
        "traced_runs_s": traced_times, "traced_s": stat(traced_times),
        "traced_makespan_runs_s": [m["makespan_ns"] / 1e9 for m in manifests],
        "traced_makespan_s": stat([m["makespan_ns"] / 1e9 for m in manifests]),
        "traced_sd_s": statistics.stdev(traced_times) if len(traced_times) > 1 else 0.0,
        "untraced_runs_s": untraced_times,
        "perturbation_pct": perturbation_pct(traced_times, untraced_times),
        "under_load": under_load(manifests + untraced),
        # a wait for a core is not judged where more ranks than cores ran (by design)
        "oversubscribed": any(bool(m.get("oversubscribed")) for m in manifests + untraced),
        "replayed_rep": rep,
        "traces": [str(Path("traces") / cell.key / f"rep{k}") for k in range(len(traced_times))],
        "untraced": [str(Path("untraced") / untraced_key(cell, spec) / f"rep{k}")
                     for k in range(len(untraced_times))],
        "profile": str(profile_path.relative_to(out)), "predictions": []}
    if cell.baseline:
        return res
    if spec.analytic and cell.program:
        res["analytic_note"] = NO_ANALYTIC
    profile = read_profile(profile_path)
    reps = range(len(times)) if spec.replay_all else [rep]
    # the replayed traces' calls that replay leaves out (the first that counts any: a program
    # makes the same calls in every repetition)
    note = next((n for n in (untraced_note(manifests[k]) for k in reps) if n), "")
    if note:
        res["note"] = note
    per_rep = []
    for k in reps:
        trace = out / "traces" / cell.key / f"rep{k}"
        preds = replay_predictions(trace, manifests[k], profile, spec, profile_path)
        if spec.analytic and not cell.program:
            preds += analytic(cell.app, cell.paradigm, trace, profile)
        per_rep.append(add_tail(preds, manifests[k], to_end))
    res["predictions"] = combine_reps(per_rep, spec.actual)
    for p in res["predictions"]:
        a, q = res["actual_s"], p["predicted_s"]
        p["rel_error_pct"] = (q - a) / a * 100 if a > 0 and not math.isnan(q) else math.nan
    return res


def under_load(manifests: list[dict]) -> list[str]:
    """Why some of a cell's runs were not a quiet machine's (the manifests' `conditions`, see
    hindsight/conditions.py), one line per distinct reason; empty when none says so."""
    seen: list[str] = []
    for m in manifests:
        for p in (m.get("conditions") or {}).get("problems") or []:
            if p not in seen:
                seen.append(p)
    return seen


def load_summary(reasons: list[str]) -> str:
    """A cell's load reasons (one per run and rank) in one short phrase: the worst wait for a
    core and the worst steal, other reasons as they are."""
    import re

    waits, steals, other = [], [], []
    for r in reasons:
        if m := re.fullmatch(r"rank \d+ waited for a core ([\d.]+) % of the time", r):
            waits.append(float(m.group(1)))
        elif m := re.fullmatch(r"([\d.]+) % of the CPU time stolen by the hypervisor", r):
            steals.append(float(m.group(1)))
        elif r not in other:
            other.append(r)
    return "; ".join(([f"ranks waited for a core up to {max(waits):g} % of a run"] if waits else [])
                     + ([f"hypervisor steal up to {max(steals):g} %"] if steals else []) + other)


def wall_s(manifest: dict) -> float:
    """A run's wall time: start barrier to the end of the program on the last rank to end
    (manifest ``wall_ns``); a manifest without it gives its makespan."""
    return (manifest.get("wall_ns") or manifest["makespan_ns"]) / 1e9


def add_tail(preds: list[dict], manifest: dict, to_end: bool) -> list[dict]:
    """Extend predictions (start barrier to the last event) to the end of the program when the
    actual time is a wall time: the traced run's time from its last event to its program's end
    (compute after the last MPI call, which no model changes) is added unchanged, as the
    lead-in is. ``tail_s`` records it (0 for the traced ground truth)."""
    tail = wall_s(manifest) - manifest["makespan_ns"] / 1e9 if to_end else 0.0
    for p in preds:
        p["tail_s"] = tail
        if not math.isnan(p["predicted_s"]):
            p["predicted_s"] += tail
    return preds


def perturbation_pct(traced_s: list[float], untraced_s: list[float]) -> float:
    """How much tracing changed the program's time: median traced / median untraced - 1, in %
    (positive: the traced runs were slower); nan without untraced runs. Medians, so that one run
    disturbed by another job does not pass for an effect of the tracer."""
    if not traced_s or not untraced_s or statistics.median(untraced_s) <= 0:
        return math.nan
    return (statistics.median(traced_s) / statistics.median(untraced_s) - 1) * 100


def combine_reps(per_rep: list[list[dict]], stat: str) -> list[dict]:
    """One prediction per predictor from the predictions of several repetitions' traces: their
    mean (or median, as the actual time is), each repetition's value kept in ``per_rep_s``.
    Predicting every run from its own trace and averaging compares like with like: the actual
    time is an average over the same runs."""
    if len(per_rep) == 1:
        return per_rep[0]
    out = []
    for i, p in enumerate(per_rep[0]):
        vals = [preds[i]["predicted_s"] for preds in per_rep]
        ok = [v for v in vals if not math.isnan(v)]
        q = dict(p)
        q["per_rep_s"] = vals
        if len(ok) < len(vals):
            q["predicted_s"] = math.nan
            q["note"] = next(preds[i].get("note", "") for preds in per_rep
                             if math.isnan(preds[i]["predicted_s"])) or p.get("note", "")
        else:
            q["predicted_s"] = statistics.median(ok) if stat == "median" else statistics.mean(ok)
        out.append(q)
    return out


def cross_key(cell: Cell, network: str) -> str:
    return f"{cell.key}--{network}"


def run_cross(cell: Cell, network: str, spec: Spec, out: Path, profile_path: Path,
              trace_profile_path: Path | None = None) -> dict | None:
    """Predict ``network`` from the trace ``cell`` collected on its own network: replay that
    trace with ``network``'s profile and compare with the run of the same cell on ``network``.
    None while one of the two cells has no result yet."""
    other = cell.on(network)
    a_path, b_path = out / "cells" / f"{cell.key}.json", out / "cells" / f"{other.key}.json"
    if not (a_path.is_file() and b_path.is_file()):
        return None
    a, b = json.loads(a_path.read_text()), json.loads(b_path.read_text())

    reps = range(len(a["traces"])) if spec.replay_all else [a["replayed_rep"]]
    profile = read_profile(profile_path)
    source = read_profile(trace_profile_path) if trace_profile_path is not None else None
    # The predicted run's ranks sit where runs on that network put them (two testbed nodes, or
    # one machine), not where the traced run's did.
    target = tf.read_manifest(out / b["traces"][b["replayed_rep"]])
    to_end = b.get("ground_truth", "traced") == "untraced"
    per_rep = []
    for k in reps:
        m = tf.read_manifest(out / a["traces"][k])
        per_rep.append(add_tail(replay_predictions(out / a["traces"][k], m, profile, spec,
                                                   profile_path, placed_like=target,
                                                   trace_profile=source), m, to_end))
    preds = combine_reps(per_rep, spec.actual)
    for p in preds:
        q, act = p["predicted_s"], b["actual_s"]
        p["rel_error_pct"] = (q - act) / act * 100 if act > 0 and not math.isnan(q) else math.nan
    return {"app": cell.app, "paradigm": cell.paradigm, "program": cell.program,
            "ranks": cell.ranks, "size": cell.size, "network": network,
            "trace_network": cell.network,
            "trace": a["traces"][a["replayed_rep"]] if len(reps) == 1 else a["traces"],
            "actual_cell": f"cells/{other.key}.json", "actual_s": b["actual_s"],
            "actual_sd_s": b["actual_sd_s"], "ground_truth": b.get("ground_truth", "traced"),
            "traced_s": b.get("traced_s", b["actual_s"]),
            "traced_makespan_s": b.get("traced_makespan_s", b.get("traced_s", b["actual_s"])),
            "perturbation_pct": b.get("perturbation_pct", math.nan),
            "profile": str(profile_path.relative_to(out)), "predictions": preds}
