"""`hindsight validate`: run an experiment matrix, predict every cell, write errors.csv.

Layout of the output directory (every number traceable to its run)::

    DIR/spec.toml                 the spec used (copied)
    DIR/profiles/<network>.toml   network profile, produced once per run and reused
    DIR/traces/<cell>/rep<k>/     the collected traces
    DIR/cells/<cell>.json         per-cell results (written atomically: resume unit)
    DIR/errors.csv                one row per (cell, predictor)

A cell is (app, paradigm, ranks, size, network). Actual time = the trace's measured makespan
(manifest ``makespan_ns``), mean and sample sd over the repetitions. Replay and analytic
predictions use the trace of repetition ``replay_rep`` (default 0).
"""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

DEFAULT_SPEC = Path(__file__).resolve().parent.parent / "specs" / "default.toml"
ERRORS_COLUMNS = ["app", "paradigm", "ranks", "size", "network", "predictor", "actual_s",
                  "actual_sd_s", "predicted_s", "rel_error_pct"]
REPLAY_MODELS = ("loggps", "loggp", "hockney", "mm1", "measured")


class SpecError(ValueError):
    """A bad spec or output directory; one readable line."""


@dataclass
class Cell:
    app: str
    paradigm: str
    ranks: int
    size: str
    args: list[str]
    network: str
    baseline: bool = False          # P = 1 run for speedup / efficiency only (no predictions)

    @property
    def key(self) -> str:
        return f"{self.app}-{self.paradigm}-n{self.ranks}-{self.size}-{self.network}"


@dataclass
class Spec:
    name: str
    repetitions: int
    replay_rep: int
    timeout: float
    cells: list[Cell]
    networks: dict[str, dict[str, Any]]
    replay: list[str]
    replay_set: dict[str, list[str]]
    analytic: bool
    source: Path | None = None
    raw: dict = field(default_factory=dict)


def _req(d: dict, key: str, kind, where: str):
    if key not in d:
        raise SpecError(f"{where}: missing '{key}'")
    v = d[key]
    if kind is list and not isinstance(v, list):
        raise SpecError(f"{where}: '{key}' must be a list")
    return v


def load_spec(path: Path | None) -> Spec:
    """Read and check a spec (see docs/validation.md for the format)."""
    path = Path(path) if path else DEFAULT_SPEC
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise SpecError(f"spec not found: {path}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SpecError(f"spec {path}: not valid TOML ({exc})") from None
    from apps import APPS

    nets_raw = raw.get("networks", {"shm": {"transport": "shm"}})
    if not isinstance(nets_raw, dict) or not nets_raw:
        raise SpecError(f"spec {path}: [networks] must name at least one network")
    networks = {}
    for name, n in nets_raw.items():
        n = dict(n) if isinstance(n, dict) else {}
        n.setdefault("transport", name)
        if n["transport"] not in ("shm", "tcp"):
            raise SpecError(f"spec {path}: network {name}: transport must be shm or tcp")
        if "profile" in n:
            p = Path(n["profile"])
            n["profile"] = str(p if p.is_absolute() else (path.parent / p))
            if not Path(n["profile"]).is_file():
                raise SpecError(f"spec {path}: network {name}: profile not found: {n['profile']}")
        networks[name] = n
    cells: list[Cell] = []
    exps = raw.get("experiment", [])
    if not isinstance(exps, list) or not exps:
        raise SpecError(f"spec {path}: needs at least one [[experiment]]")
    for i, e in enumerate(exps):
        where = f"spec {path}: experiment {i + 1}"
        app = _req(e, "app", str, where)
        if app not in APPS:
            raise SpecError(f"{where}: unknown app {app!r} (choose from {', '.join(APPS)})")
        paradigms = _req(e, "paradigms", list, where)
        for p in paradigms:
            if p not in APPS[app]:
                raise SpecError(f"{where}: {app} does not run on paradigm {p!r}")
        ranks = _req(e, "ranks", list, where)
        if not all(isinstance(r, int) and r >= 2 for r in ranks):
            raise SpecError(f"{where}: ranks must be integers >= 2 (P = 1 is 'baseline')")
        sizes = _req(e, "sizes", dict, where)
        if not isinstance(sizes, dict) or not sizes:
            raise SpecError(f"{where}: [experiment.sizes] must map a label to argument lists")
        nets = e.get("networks", list(networks))
        for n in nets:
            if n not in networks:
                raise SpecError(f"{where}: unknown network {n!r} (define it under [networks])")
        for label, args in sizes.items():
            if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
                raise SpecError(f"{where}: size {label!r} must be a list of strings")
            for net in nets:
                if e.get("baseline", True):
                    cells.append(Cell(app, "pipeline", 1, label, args, net, baseline=True))
                for p in paradigms:
                    for r in ranks:
                        if p == "hypercube" and r & (r - 1):
                            raise SpecError(f"{where}: hypercube needs power-of-two ranks, not {r}")
                        cells.append(Cell(app, p, r, label, args, net))
    pred = raw.get("predictors", {})
    replay = pred.get("replay", ["loggps", "hockney", "mm1"])
    for m in replay:
        if m not in REPLAY_MODELS:
            raise SpecError(f"spec {path}: unknown replay model {m!r} "
                            f"(choose from {', '.join(REPLAY_MODELS)})")
    reps = int(raw.get("repetitions", 2))
    if reps < 1:
        raise SpecError(f"spec {path}: repetitions must be >= 1")
    replay_rep = int(raw.get("replay_rep", 0))
    if not 0 <= replay_rep < reps:
        raise SpecError(f"spec {path}: replay_rep must be in 0..{reps - 1}")
    seen, unique = set(), []
    for c in cells:
        if c.key not in seen:
            seen.add(c.key)
            unique.append(c)
    return Spec(name=str(raw.get("name", path.stem)), repetitions=reps, replay_rep=replay_rep,
                timeout=float(raw.get("timeout", 300)), cells=unique, networks=networks,
                replay=list(replay), replay_set={k: list(v) for k, v in pred.get("set", {}).items()},
                analytic=bool(pred.get("analytic", True)), source=path, raw=raw)


# -- profiles ------------------------------------------------------------------------------------


def read_profile(path: Path) -> dict[str, dict[str, Any]]:
    """A TOML profile ([loggps], [hockney], [mm1], [measured_on] sections) or a JSON one
    ({"models": {...}}) as model -> params."""
    path = Path(path)
    text = path.read_text()
    if path.suffix == ".json":
        data = json.loads(text)
        return dict(data.get("models", {data.get("model", "loggps"): data.get("params", data)}))
    return tomllib.loads(text)


def _toml_value(v: Any) -> str:
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, float) and math.isinf(v):
        return "inf"
    return repr(v)


def write_profile(path: Path, sections: dict[str, dict[str, Any]]) -> None:
    lines = []
    for sec, vals in sections.items():
        lines.append(f"[{sec}]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in vals.items()]
        lines.append("")
    _atomic_write(path, "\n".join(lines))


def _calibrate_command_available() -> bool:
    from hindsight.cli import LazyGroup, main
    return "calibrate" in LazyGroup.lazy or "calibrate" in main.commands


def ensure_profile(out: Path, net_name: str, net: dict[str, Any], log: Callable[[str], None],
                   force: bool = False) -> Path:
    """The profile of one network, produced once per validation run and reused: the spec's
    ``profile`` if given (copied), else `hindsight calibrate` if this installation has it, else
    the ping-pong of validation.pingpong (also when the network says ``calibrate = "pingpong"``:
    it sends through mpi4py's pickle API, the path the applications' messages take)."""
    dest = out / "profiles" / f"{net_name}.toml"
    if dest.is_file() and not force:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    if net.get("profile"):
        src = Path(net["profile"])
        write_profile(dest, read_profile(src) | {"validation_source": {"profile": str(src)}})
        return dest
    method = net.get("calibrate", "hindsight")
    if method not in ("hindsight", "pingpong"):
        raise SpecError(f"network {net_name}: calibrate must be 'hindsight' or 'pingpong'")
    if method == "hindsight" and _calibrate_command_available():
        log(f"calibrating network {net_name} with `hindsight calibrate`")
        cmd = [sys.executable, "-m", "hindsight.cli", "calibrate", "--transport",
               net["transport"], "--out", str(dest)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode == 0 and dest.is_file():
            return dest
        log(f"`hindsight calibrate` failed ({(r.stderr or r.stdout).strip()[-200:]}); "
            "using the fallback ping-pong")
    from hindsight.collect import find_mpiexec, launch_env
    from validation.pingpong import fit_profile

    log(f"calibrating network {net_name} ({net['transport']}) with validation.pingpong "
        "(pickle API)")
    raw_path = dest.with_suffix(".pingpong.json")
    cmd = [find_mpiexec(), "-n", "2", sys.executable, "-m", "validation.pingpong", str(raw_path)]
    r = subprocess.run(cmd, env=launch_env(2, net["transport"]), capture_output=True, text=True,
                       timeout=300)
    if r.returncode != 0 or not raw_path.is_file():
        raise SpecError(f"calibration of network {net_name} failed: {r.stderr.strip()[-300:]}")
    sections = fit_profile(json.loads(raw_path.read_text()))
    sections["measured_on"] = {"transport": net["transport"], "mpi_library": "mpich (wheel)",
                               "method": "validation.pingpong (mpi4py pickle API ping-pong)",
                               "raw": raw_path.name}
    write_profile(dest, sections)
    return dest


def replay_params(model: str, profile: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The profile's section for a replay model (loggp reads the loggps section without S; mm1
    also uses C and tau between ranks of one host, where this project's runs live)."""
    if model == "measured":
        return {}
    sec = dict(profile.get("loggps" if model == "loggp" else model, {}))
    if model == "loggp":
        sec.pop("S", None)
    if model == "mm1" and "C" in sec:
        sec.setdefault("C_host", sec["C"])
        sec.setdefault("L_host", sec.get("tau", 0.0))
    return sec


# -- running cells -------------------------------------------------------------------------------


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def _trace_ok(d: Path) -> dict | None:
    from hindsight import traceformat as tf
    try:
        m = tf.read_manifest(d)
    except Exception:
        return None
    return m if m.get("complete") and m.get("makespan_ns") else None


def collect_reps(cell: Cell, spec: Spec, out: Path, log: Callable[[str], None]) -> list[dict]:
    """Collect (or reuse complete) traces of every repetition; returns their manifests."""
    from hindsight.collect import collect

    manifests = []
    for k in range(spec.repetitions):
        d = out / "traces" / cell.key / f"rep{k}"
        m = _trace_ok(d)
        if m is None:
            if d.exists():
                shutil.rmtree(d)            # a partial run from an interruption
            d.parent.mkdir(parents=True, exist_ok=True)
            rc, m = collect(cell.ranks, d, app=cell.app, paradigm=cell.paradigm,
                            args=list(cell.args), transport=spec.networks[cell.network]["transport"],
                            timeout=spec.timeout, quiet=True)
            if rc != 0 or not m.get("complete"):
                raise RuntimeError(f"{cell.key} rep{k}: run failed (exit code {rc})")
        manifests.append(m)
    return manifests


def run_cell(cell: Cell, spec: Spec, out: Path, profile_path: Path,
             log: Callable[[str], None]) -> dict[str, Any]:
    import replay

    manifests = collect_reps(cell, spec, out, log)
    times = [m["makespan_ns"] / 1e9 for m in manifests]
    res: dict[str, Any] = {
        "app": cell.app, "paradigm": cell.paradigm, "ranks": cell.ranks, "size": cell.size,
        "args": cell.args, "network": cell.network, "baseline": cell.baseline,
        "repetitions": len(times), "actual_runs_s": times, "actual_s": statistics.mean(times),
        "actual_sd_s": statistics.stdev(times) if len(times) > 1 else 0.0,
        "replayed_rep": spec.replay_rep,
        "traces": [str(Path("traces") / cell.key / f"rep{k}") for k in range(len(times))],
        "profile": str(profile_path.relative_to(out)), "predictions": []}
    if cell.baseline:
        return res
    trace = out / "traces" / cell.key / f"rep{spec.replay_rep}"
    profile = read_profile(profile_path)
    prep = replay.prepare(trace)
    lead = (manifests[spec.replay_rep]["makespan_ns"] - prep.measured_makespan_ns) / 1e9
    for model in spec.replay:
        params = replay_params(model, profile)
        assigns = [tuple(s.split("=", 1)) for s in spec.replay_set.get(model, [])]
        try:
            r = replay.run(prep, model, assigns, profile=params, record=False)
            pred = r.makespan_ns / 1e9 + lead
            note = ""
        except (replay.ReplayError, replay.ParamError) as exc:
            pred, note = math.nan, str(exc)
        res["predictions"].append({"predictor": f"replay:{model}", "predicted_s": pred,
                                   "params": params, "set": spec.replay_set.get(model, []),
                                   "lead_in_s": lead, "note": note})
    if spec.analytic:
        from validation.params import analytic
        res["predictions"] += analytic(cell.app, cell.paradigm, trace, profile)
    for p in res["predictions"]:
        a, q = res["actual_s"], p["predicted_s"]
        p["rel_error_pct"] = (q - a) / a * 100 if a > 0 and not math.isnan(q) else math.nan
    return res


def write_errors(out: Path) -> Path:
    """Rebuild DIR/errors.csv from every DIR/cells/*.json (so it is always consistent)."""
    rows = []
    for f in sorted((out / "cells").glob("*.json")):
        c = json.loads(f.read_text())
        for p in c.get("predictions", []):
            rows.append({"app": c["app"], "paradigm": c["paradigm"], "ranks": c["ranks"],
                         "size": c["size"], "network": c["network"], "predictor": p["predictor"],
                         "actual_s": f"{c['actual_s']:.6f}", "actual_sd_s": f"{c['actual_sd_s']:.6f}",
                         "predicted_s": f"{p['predicted_s']:.6f}",
                         "rel_error_pct": f"{p['rel_error_pct']:.3f}"})
    path = out / "errors.csv"
    tmp = path.with_name("errors.csv.tmp")
    with open(tmp, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=ERRORS_COLUMNS)
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, path)
    return path


def validate(spec: Spec, out: Path, force: bool = False, progress: bool = True,
             log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run every cell not already done (all with ``force``); returns a small summary."""
    from tqdm import tqdm

    out = Path(out)
    (out / "cells").mkdir(parents=True, exist_ok=True)
    if spec.source:
        shutil.copyfile(spec.source, out / "spec.toml") if spec.source.resolve() != \
            (out / "spec.toml").resolve() else None
    profiles = {}
    for name, net in spec.networks.items():
        if any(c.network == name for c in spec.cells):
            profiles[name] = ensure_profile(out, name, net, log, force=force)
    done = skipped = failed = 0
    bar = tqdm(spec.cells, desc="validate", unit="cell", disable=not progress, file=sys.stderr)
    for cell in bar:
        bar.set_postfix_str(cell.key)
        dest = out / "cells" / f"{cell.key}.json"
        if dest.is_file() and not force:
            skipped += 1
            continue
        if force:
            shutil.rmtree(out / "traces" / cell.key, ignore_errors=True)
        try:
            res = run_cell(cell, spec, out, profiles[cell.network], log)
        except RuntimeError as exc:
            failed += 1
            tqdm.write(f"cell {cell.key} failed: {exc}", file=sys.stderr)
            continue
        _atomic_write(dest, json.dumps(res, indent=1, default=float))
        done += 1
        write_errors(out)
    write_errors(out)
    return {"cells": len(spec.cells), "run": done, "skipped": skipped, "failed": failed,
            "errors_csv": str(out / "errors.csv")}
