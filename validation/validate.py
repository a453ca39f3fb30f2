"""`hindsight validate`: run an experiment matrix, predict every cell, write errors.csv.

Layout of the output directory (every number traceable to its run)::

    DIR/spec.toml                 the spec used (copied)
    DIR/profiles/<network>.toml   network profile, produced once per run and reused
    DIR/traces/<cell>/rep<k>/     the collected traces
    DIR/untraced/<cell>/rep<k>/   the untraced runs (manifest.json with the wall time only)
    DIR/cells/<cell>.json         per-cell results (written atomically: resume unit)
    DIR/cross/<cell>--<net>.json  cross-network predictions (spec ``predict_on``)
    DIR/errors.csv                one row per (cell, predictor) and per cross prediction

A cell is (app, paradigm, ranks, size, network). Actual time = the wall time (manifest
``wall_ns``: start barrier to the end of the program) of the untraced runs, each launched right
after the traced run of the same repetition, mean and sample sd over the repetitions
(``ground_truth = "traced"``: the traced runs' ``makespan_ns``, and no untraced runs). Replay and
analytic predictions use the trace of repetition ``replay_rep`` (default 0; ``"median"``: the
median run; ``"all"``: every repetition is predicted from its own trace and the predictions are
averaged as the actual time is).
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
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from hindsight.errors import UserError

DEFAULT_SPEC = Path(__file__).resolve().parent.parent / "specs" / "default.toml"
ERRORS_COLUMNS = ["app", "paradigm", "ranks", "size", "network", "predictor", "actual_s",
                  "actual_sd_s", "predicted_s", "rel_error_pct", "trace_network", "ground_truth",
                  "traced_s", "traced_makespan_s", "perturbation_pct", "predicted_min_s",
                  "predicted_max_s"]
#: `network` is where the actual run and the profile come from; `trace_network` is where the
#: replayed trace was collected (equal for same-network rows, different for cross-network rows);
#: `ground_truth` says whose times `actual_s` is ("untraced" or "traced" runs), `traced_s` is the
#: traced runs' time over the same interval (same statistic), `traced_makespan_s` their makespan
#: (start barrier to the last event) and `perturbation_pct` the tracing perturbation of the
#: network's cell (median traced / median untraced - 1, in %)
GROUND_TRUTHS = ("untraced", "traced")
REPLAY_MODELS = ("loggps", "loggp", "hockney", "mm1", "measured")
#: a network's ``calibrate`` -> `hindsight calibrate --api`; "hindsight" and "pingpong" are the
#: names older specs used for the buffer and the pickle ping-pong
CALIBRATE_API = {"pickle": "pickle", "buffer": "buffer", "pingpong": "pickle",
                 "hindsight": "buffer"}


class SpecError(UserError, ValueError):
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
    predict_on: list[str] = field(default_factory=list)  # networks to predict from this trace

    @property
    def key(self) -> str:
        return f"{self.app}-{self.paradigm}-n{self.ranks}-{self.size}-{self.network}"


@dataclass
class Spec:
    name: str
    repetitions: int
    replay_rep: int | str           # a repetition, "median" (the median run) or "all"
    timeout: float
    cells: list[Cell]
    networks: dict[str, dict[str, Any]]
    replay: list[str]
    replay_set: dict[str, list[str]]
    analytic: bool
    source: Path | None = None
    raw: dict = field(default_factory=dict)
    actual: str = "mean"            # "median": actual = median run (noisy shared machines)
    ground_truth: str = "untraced"  # whose runs give the actual time: "untraced" or "traced"

    @property
    def replay_median(self) -> bool:
        """Replay the run whose makespan is the median."""
        return self.replay_rep == "median"

    @property
    def replay_all(self) -> bool:
        """Replay every repetition; the prediction is their mean (or median, as ``actual``)."""
        return self.replay_rep == "all"


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
    try:
        return _parse_spec(path, raw)
    except SpecError:
        raise
    except (TypeError, ValueError, AttributeError, KeyError) as exc:
        # A value of the wrong kind somewhere (a string where a table belongs, ...): one line.
        raise SpecError(f"spec {path}: malformed ({type(exc).__name__}: {exc})") from None


#: Network names and size labels become parts of file and directory names under the output
#: directory; a "/" (or "\\", NUL) in one could name a path outside it (../../somewhere).
_SAFE_NAME = re.compile(r"^[^/\\\x00]{1,100}$")


def _safe_name(path: Path, what: str, name) -> str:
    if not isinstance(name, str) or not _SAFE_NAME.match(name) or name in (".", ".."):
        raise SpecError(f"spec {path}: {what} {name!r} may not contain '/', '\\' or NUL, nor "
                        "be '.' or '..' (it becomes part of a file name)")
    return name


def _parse_spec(path: Path, raw: dict) -> Spec:
    from apps import APPS

    nets_raw = raw.get("networks", {"shm": {"transport": "shm"}})
    accept_noisy = raw.get("accept_noisy_profiles", False)
    if not isinstance(accept_noisy, bool):
        raise SpecError(f"spec {path}: accept_noisy_profiles must be true or false")
    if not isinstance(nets_raw, dict) or not nets_raw:
        raise SpecError(f"spec {path}: [networks] must name at least one network")
    networks = {}
    for name, n in nets_raw.items():
        _safe_name(path, "network name", name)
        n = dict(n) if isinstance(n, dict) else {}
        n.setdefault("transport", "tcp" if "testbed" in n else name)
        if n["transport"] not in ("shm", "tcp"):
            raise SpecError(f"spec {path}: network {name}: transport must be shm or tcp")
        if "testbed" in n:
            _check_testbed(path, name, n)
        if n.get("calibrate", "pickle") not in CALIBRATE_API:
            raise SpecError(f"spec {path}: network {name}: calibrate must be 'pickle' or 'buffer'")
        n.setdefault("accept_noisy_profiles", accept_noisy)
        if not isinstance(n["accept_noisy_profiles"], bool):
            raise SpecError(f"spec {path}: network {name}: accept_noisy_profiles must be true or "
                            "false")
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
        predict_on = e.get("predict_on", [])
        if not isinstance(predict_on, list):
            raise SpecError(f"{where}: 'predict_on' must be a list of network names")
        # Every network predicted on is also run on: its measured time is the actual.
        nets = list(nets) + [n for n in predict_on if n not in nets]
        for n in nets:
            if n not in networks:
                raise SpecError(f"{where}: unknown network {n!r} (define it under [networks])")
        for label, args in sizes.items():
            _safe_name(path, "size label", label)
            if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
                raise SpecError(f"{where}: size {label!r} must be a list of strings")
            for net in nets:
                if e.get("baseline", True):
                    cells.append(Cell(app, "pipeline", 1, label, args, net, baseline=True))
                for p in paradigms:
                    for r in ranks:
                        if p == "hypercube" and r & (r - 1):
                            raise SpecError(f"{where}: hypercube needs power-of-two ranks, not {r}")
                        cells.append(Cell(app, p, r, label, args, net,
                                          predict_on=[b for b in predict_on if b != net]))
    pred = raw.get("predictors", {})
    replay = pred.get("replay", ["loggps", "hockney", "mm1"])
    for m in replay:
        if m not in REPLAY_MODELS:
            raise SpecError(f"spec {path}: unknown replay model {m!r} "
                            f"(choose from {', '.join(REPLAY_MODELS)})")
    reps = int(raw.get("repetitions", 2))
    if reps < 1:
        raise SpecError(f"spec {path}: repetitions must be >= 1")
    replay_rep = raw.get("replay_rep", 0)
    if replay_rep not in ("median", "all"):
        try:
            replay_rep = int(replay_rep)
        except (TypeError, ValueError):
            raise SpecError(f"spec {path}: replay_rep must be a repetition number, \"median\" "
                            "or \"all\"") from None
        if not 0 <= replay_rep < reps:
            raise SpecError(f"spec {path}: replay_rep must be in 0..{reps - 1}")
    actual = raw.get("actual", "mean")
    if actual not in ("mean", "median"):
        raise SpecError(f"spec {path}: actual must be \"mean\" or \"median\"")
    ground_truth = raw.get("ground_truth", "untraced")
    if ground_truth not in GROUND_TRUTHS:
        raise SpecError(f"spec {path}: ground_truth must be \"untraced\" or \"traced\", not "
                        f"{ground_truth!r}")
    seen: dict[str, Cell] = {}
    unique = []
    for c in cells:
        if c.key not in seen:
            seen[c.key] = c
            unique.append(c)
        else:
            seen[c.key].predict_on += [b for b in c.predict_on if b not in seen[c.key].predict_on]
    return Spec(name=str(raw.get("name", path.stem)), repetitions=reps, replay_rep=replay_rep,
                timeout=float(raw.get("timeout", 300)), cells=unique, networks=networks,
                replay=list(replay), replay_set={k: list(v) for k, v in pred.get("set", {}).items()},
                analytic=bool(pred.get("analytic", True)), source=path, raw=raw,
                actual=actual, ground_truth=ground_truth)


def _check_testbed(path: Path, name: str, n: dict[str, Any]) -> None:
    """``testbed = "NAME"`` (a testbed that is up) or ``testbed = {nodes = 2, rate = "1gbit"}``
    (brought up by `hindsight validate` for the run and removed afterwards)."""
    from hindsight import testbed as tb

    t = n["testbed"]
    try:
        if isinstance(t, str):
            n["testbed_name"] = tb.check_name(t)
        elif isinstance(t, dict):
            tb.check_nodes(int(t.get("nodes", 2)))
            tb.parse_rate(str(t.get("rate", "")))
            n["testbed_name"] = "v" + "".join(ch for ch in name.lower() if ch.isalnum())[:11]
            n["testbed_managed"] = True
        else:
            raise tb.TestbedError("testbed must be a name or a table {nodes = N, rate = R}")
    except tb.TestbedError as exc:
        raise SpecError(f"spec {path}: network {name}: {exc}") from None
    if n["transport"] != "tcp":
        raise SpecError(f"spec {path}: network {name}: a testbed network runs on tcp")


def testbeds_up(spec: Spec, log: Callable[[str], None]) -> list[str]:
    """Bring up the managed testbeds of the spec's networks that some cell uses; returns their
    names (for testbeds_down)."""
    from hindsight import testbed as tb

    used = {c.network for c in spec.cells}
    started: list[str] = []
    try:
        for name, n in spec.networks.items():
            if name not in used or "testbed_name" not in n:
                continue
            if not n.get("testbed_managed"):
                tb.require_up(n["testbed_name"])
                continue
            t = n["testbed"]
            tb.down(n["testbed_name"])          # leftovers of an interrupted validation
            log(f"testbed {n['testbed_name']} up for network {name}: {t.get('nodes', 2)} nodes "
                f"at {t['rate']}")
            tb.up(n["testbed_name"], int(t.get("nodes", 2)), str(t["rate"]))
            started.append(n["testbed_name"])
    except tb.TestbedError as exc:
        testbeds_down(started)
        raise SpecError(str(exc)) from None
    return started


def testbeds_down(names: list[str]) -> None:
    from hindsight import testbed as tb

    for name in names:
        tb.down(name)


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


def ensure_profile(out: Path, net_name: str, net: dict[str, Any], log: Callable[[str], None],
                   force: bool = False) -> Path:
    """The profile of one network, produced once per validation run and reused: the spec's
    ``profile`` if given (copied), else `hindsight calibrate` on the network's transport (or
    testbed). ``calibrate = "pickle"`` times mpi4py's pickle API the way the tracer records it
    (``--api pickle``: the path the applications' messages take), ``"buffer"`` the buffer API.

    A noisy profile (replay.calibration.quality.profile_problems: its fit misses its own
    measurements, or it was taken under load) is not used silently: one it calibrated is
    calibrated once more, and if that is noisy too, or the spec's own profile is, this stops
    (SpecError) unless the spec says ``accept_noisy_profiles = true`` (then a warning is logged)."""
    dest = out / "profiles" / f"{net_name}.toml"
    accept = bool(net.get("accept_noisy_profiles"))
    if dest.is_file() and not force:
        problems = _profile_problems(dest)
        if not problems:
            return dest
        if accept:
            log(f"warning: {_noisy(dest, net_name, problems)}")
            return dest
        # left by a run that stopped on it: produce it again
    dest.parent.mkdir(parents=True, exist_ok=True)
    if net.get("profile"):
        src = Path(net["profile"])
        problems = _profile_problems(src)
        if problems and not accept:
            raise SpecError(f"{_noisy(src, net_name, problems)} {_ACCEPT_HINT}")
        if problems:
            log(f"warning: {_noisy(src, net_name, problems)}")
        if src.suffix == ".toml":
            # Copied as is: `hindsight calibrate` profiles have top-level keys and nested tables
            # that write_profile's flat [section] layout cannot hold.
            _atomic_write(dest, src.read_text().rstrip("\n") + "\n\n[validation_source]\n"
                          f"profile = {json.dumps(str(src))}\n")
        else:
            write_profile(dest, read_profile(src) | {"validation_source": {"profile": str(src)}})
        return dest
    api = CALIBRATE_API[net.get("calibrate", "pickle")]
    log(f"calibrating network {net_name} with `hindsight calibrate --api {api}`")
    cmd = [sys.executable, "-m", "hindsight.cli", "calibrate", "--transport", net["transport"],
           "--api", api, "--out", str(dest)]
    if net.get("calibrate_sizes"):
        cmd += ["--sizes", str(net["calibrate_sizes"])]
    if net.get("testbed_name"):
        cmd += ["--testbed", net["testbed_name"]]
    # --accept-noisy: a noisy profile is written (marked) and judged here, so that it is kept
    # for inspection and the spec decides.
    cmd.append("--accept-noisy")
    for attempt in (1, 2):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0 or not dest.is_file():
            raise SpecError(f"calibration of network {net_name} failed: "
                            f"{(r.stderr or r.stdout).strip()[-300:]}")
        problems = _profile_problems(dest)
        if not problems:
            return dest
        if attempt == 1:
            log(f"profile of network {net_name} is noisy ({'; '.join(problems)}): calibrating "
                "once more")
    if accept:
        log(f"warning: {_noisy(dest, net_name, problems)}")
        return dest
    raise SpecError(f"{_noisy(dest, net_name, problems, ' after 2 calibrations')} "
                    f"{_ACCEPT_HINT}")


_ACCEPT_HINT = "(accept_noisy_profiles = true in the spec uses it anyway)"


def _noisy(path: Path, net_name: str, problems: list[str], when: str = "") -> str:
    return f"profile {path} of network {net_name} is noisy{when}: {'; '.join(problems)}"


def _profile_problems(path: Path) -> list[str]:
    """replay.calibration.quality.profile_problems of a profile file (an unreadable one is left
    to the readers that report it)."""
    from replay.calibration.quality import profile_problems
    try:
        return profile_problems(read_profile(path))
    except (OSError, ValueError):
        return []


def replay_params(model: str, profile: dict[str, dict[str, Any]],
                  path: Path | None = None) -> dict[str, Any]:
    """A replay model's parameters from a profile. A `hindsight calibrate` profile
    (``format = "hindsight-profile/1"``) is mapped exactly as `hindsight replay --profile` maps it
    (replay.models.load_profile); older flat profiles give their section (loggp reads the loggps
    section without S; mm1 also uses C and tau between ranks of one host)."""
    if model == "measured":
        return {}
    if profile.get("format") is not None and path is not None:
        from replay import models as M
        return M.load_profile(path, M.get_model(model))
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


def _trace_ok(d: Path, untraced: bool = False) -> dict | None:
    """The manifest of a complete run in ``d`` of the kind asked for, else None."""
    from hindsight import trace as tf
    try:
        m = tf.read_manifest(d)
    except Exception:
        return None
    if (m.get("traced") is False) != untraced:
        return None
    return m if m.get("complete") and m.get("makespan_ns") else None


def _run_rep(cell: Cell, spec: Spec, d: Path, untraced: bool) -> dict:
    """One repetition's run in ``d`` (reused if complete); returns its manifest."""
    from hindsight.collect import collect

    m = _trace_ok(d, untraced)
    if m is None:
        if d.exists():
            shutil.rmtree(d)                # a partial run from an interruption
        d.parent.mkdir(parents=True, exist_ok=True)
        net = spec.networks[cell.network]
        rc, m = collect(cell.ranks, d, app=cell.app, paradigm=cell.paradigm,
                        args=list(cell.args), transport=net["transport"],
                        timeout=spec.timeout, quiet=True, testbed=net.get("testbed_name"),
                        untraced=untraced)
        if rc != 0 or not m.get("complete") or not m.get("makespan_ns"):
            raise RuntimeError(f"{cell.key} {'untraced ' if untraced else ''}{d.name}: run "
                               f"failed (exit code {rc})")
    return m


def collect_reps(cell: Cell, spec: Spec, out: Path,
                 log: Callable[[str], None]) -> tuple[list[dict], list[dict]]:
    """Collect (or reuse complete) runs of every repetition: the traced run, then (ground truth
    "untraced") the untraced one, alternately, so that a drift of the machine's speed during the
    cell hits both kinds alike. Returns (traced manifests, untraced manifests)."""
    traced, untraced = [], []
    for k in range(spec.repetitions):
        traced.append(_run_rep(cell, spec, out / "traces" / cell.key / f"rep{k}", False))
        if spec.ground_truth == "untraced":
            untraced.append(_run_rep(cell, spec, out / "untraced" / cell.key / f"rep{k}", True))
    return traced, untraced


def replay_predictions(trace: Path, manifest: dict, profile: dict, spec: Spec,
                       profile_path: Path | None = None,
                       placed_like: dict | None = None) -> list[dict]:
    """Replay one trace under every replay model of the spec with one network's profile;
    ``placed_like`` is the manifest of a run on the predicted network, whose rank-to-host
    placement the replay takes (M/M/1 is the model that depends on it)."""
    import dataclasses

    import replay
    from replay.prepare import host_placement

    prep = replay.prepare(trace)
    if placed_like is not None:
        prep = dataclasses.replace(prep, host_of_rank=host_placement(placed_like, prep.nranks))
    lead = (manifest["makespan_ns"] - prep.measured_makespan_ns) / 1e9
    preds = []
    for model in spec.replay:
        params = replay_params(model, profile, profile_path)
        assigns = [tuple(s.split("=", 1)) for s in spec.replay_set.get(model, [])]
        try:
            r = replay.run(prep, model, assigns, profile=params, record=False)
            pred = r.makespan_ns / 1e9 + lead
            note = ""
        except (replay.ReplayError, replay.ParamError) as exc:
            pred, note = math.nan, str(exc)
        preds.append({"predictor": f"replay:{model}", "predicted_s": pred,
                      "params": params, "set": spec.replay_set.get(model, []),
                      "lead_in_s": lead, "note": note})
    return preds


def run_cell(cell: Cell, spec: Spec, out: Path, profile_path: Path,
             log: Callable[[str], None]) -> dict[str, Any]:
    import replay

    manifests, untraced = collect_reps(cell, spec, out, log)
    to_end = spec.ground_truth == "untraced"
    # Like with like: an untraced run's time runs from the start barrier to the end of the
    # program (`wall_ns`), so the traced runs are compared by the same interval; the old ground
    # truth is the traced makespan (start barrier to the last recorded event).
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
        "app": cell.app, "paradigm": cell.paradigm, "ranks": cell.ranks, "size": cell.size,
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
        "replayed_rep": rep,
        "traces": [str(Path("traces") / cell.key / f"rep{k}") for k in range(len(traced_times))],
        "untraced": [str(Path("untraced") / cell.key / f"rep{k}")
                     for k in range(len(untraced_times))],
        "profile": str(profile_path.relative_to(out)), "predictions": []}
    if cell.baseline:
        return res
    profile = read_profile(profile_path)
    reps = range(len(times)) if spec.replay_all else [rep]
    per_rep = []
    for k in reps:
        trace = out / "traces" / cell.key / f"rep{k}"
        preds = replay_predictions(trace, manifests[k], profile, spec, profile_path)
        if spec.analytic:
            from validation.params import analytic
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


def run_cross(cell: Cell, network: str, spec: Spec, out: Path, profile_path: Path) -> dict | None:
    """Predict ``network`` from the trace ``cell`` collected on its own network: replay that
    trace with ``network``'s profile and compare with the run of the same cell on ``network``.
    None while one of the two cells has no result yet."""
    other = Cell(cell.app, cell.paradigm, cell.ranks, cell.size, cell.args, network)
    a_path, b_path = out / "cells" / f"{cell.key}.json", out / "cells" / f"{other.key}.json"
    if not (a_path.is_file() and b_path.is_file()):
        return None
    a, b = json.loads(a_path.read_text()), json.loads(b_path.read_text())
    from hindsight import trace as tf

    reps = range(len(a["traces"])) if spec.replay_all else [a["replayed_rep"]]
    profile = read_profile(profile_path)
    # The predicted run's ranks sit where runs on that network put them (two testbed nodes, or
    # one machine), not where the traced run's did.
    target = tf.read_manifest(out / b["traces"][b["replayed_rep"]])
    to_end = b.get("ground_truth", "traced") == "untraced"
    per_rep = []
    for k in reps:
        m = tf.read_manifest(out / a["traces"][k])
        per_rep.append(add_tail(replay_predictions(out / a["traces"][k], m, profile, spec,
                                                   profile_path, placed_like=target), m, to_end))
    preds = combine_reps(per_rep, spec.actual)
    for p in preds:
        q, act = p["predicted_s"], b["actual_s"]
        p["rel_error_pct"] = (q - act) / act * 100 if act > 0 and not math.isnan(q) else math.nan
    return {"app": cell.app, "paradigm": cell.paradigm, "ranks": cell.ranks, "size": cell.size,
            "network": network, "trace_network": cell.network,
            "trace": a["traces"][a["replayed_rep"]] if len(reps) == 1 else a["traces"],
            "actual_cell": f"cells/{other.key}.json", "actual_s": b["actual_s"],
            "actual_sd_s": b["actual_sd_s"], "ground_truth": b.get("ground_truth", "traced"),
            "traced_s": b.get("traced_s", b["actual_s"]),
            "traced_makespan_s": b.get("traced_makespan_s", b.get("traced_s", b["actual_s"])),
            "perturbation_pct": b.get("perturbation_pct", math.nan),
            "profile": str(profile_path.relative_to(out)), "predictions": preds}


def write_errors(out: Path) -> Path:
    """Rebuild DIR/errors.csv from every DIR/cells/*.json and DIR/cross/*.json (so it is always
    consistent)."""
    rows = []
    files = sorted((out / "cells").glob("*.json")) + sorted((out / "cross").glob("*.json"))
    for f in files:
        c = json.loads(f.read_text())
        # A cell written without untraced runs measured the traced ones.
        truth = c.get("ground_truth", "traced")
        traced = c.get("traced_s", c["actual_s"] if truth == "traced" else math.nan)
        makespan = c.get("traced_makespan_s", traced)
        for p in c.get("predictions", []):
            # Each repetition predicted from its own trace: the predictions' range, not only
            # their mean (equal to it when one trace was replayed).
            reps = [v for v in p.get("per_rep_s") or [p["predicted_s"]] if not math.isnan(v)]
            lo, hi = (min(reps), max(reps)) if reps else (math.nan, math.nan)
            rows.append({"app": c["app"], "paradigm": c["paradigm"], "ranks": c["ranks"],
                         "size": c["size"], "network": c["network"], "predictor": p["predictor"],
                         "actual_s": f"{c['actual_s']:.6f}", "actual_sd_s": f"{c['actual_sd_s']:.6f}",
                         "predicted_s": f"{p['predicted_s']:.6f}",
                         "rel_error_pct": f"{p['rel_error_pct']:.3f}",
                         "trace_network": c.get("trace_network", c["network"]),
                         "ground_truth": truth, "traced_s": f"{traced:.6f}",
                         "traced_makespan_s": f"{makespan:.6f}",
                         "perturbation_pct": f"{c.get('perturbation_pct', math.nan):.3f}",
                         "predicted_min_s": f"{lo:.6f}", "predicted_max_s": f"{hi:.6f}"})
    path = out / "errors.csv"
    tmp = path.with_name("errors.csv.tmp")
    with open(tmp, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=ERRORS_COLUMNS)
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, path)
    return path


def _ground_truth_of(cell_json: Path) -> str | None:
    """Whose runs a cell file's actual time comes from (files without the key: the traced
    runs); None if unreadable. A cell measured against another ground truth is redone, reusing
    its traces."""
    try:
        return json.loads(cell_json.read_text()).get("ground_truth", "traced")
    except (OSError, ValueError):
        return None


def validate(spec: Spec, out: Path, force: bool = False, progress: bool = True,
             log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run every cell not already done (all with ``force``); returns a small summary. Testbeds
    the spec asks for (``testbed = {nodes, rate}``) are up only for the duration of the call."""
    out = Path(out)
    (out / "cells").mkdir(parents=True, exist_ok=True)
    if spec.source:
        shutil.copyfile(spec.source, out / "spec.toml") if spec.source.resolve() != \
            (out / "spec.toml").resolve() else None
    started = testbeds_up(spec, log)
    try:
        return _validate(spec, out, force, progress, log)
    finally:
        testbeds_down(started)


def _validate(spec: Spec, out: Path, force: bool, progress: bool,
              log: Callable[[str], None]) -> dict[str, Any]:
    from tqdm import tqdm

    profiles = {}
    for name, net in spec.networks.items():
        if any(c.network == name for c in spec.cells):
            profiles[name] = ensure_profile(out, name, net, log, force=force)
    done = skipped = failed = 0
    bar = tqdm(spec.cells, desc="validate", unit="cell", disable=not progress, file=sys.stderr)
    for cell in bar:
        bar.set_postfix_str(cell.key)
        dest = out / "cells" / f"{cell.key}.json"
        if dest.is_file() and not force and _ground_truth_of(dest) == spec.ground_truth:
            skipped += 1
            continue
        if force:
            shutil.rmtree(out / "traces" / cell.key, ignore_errors=True)
            shutil.rmtree(out / "untraced" / cell.key, ignore_errors=True)
        try:
            res = run_cell(cell, spec, out, profiles[cell.network], log)
        except RuntimeError as exc:
            failed += 1
            tqdm.write(f"cell {cell.key} failed: {exc}", file=sys.stderr)
            continue
        _atomic_write(dest, json.dumps(res, indent=1, default=float))
        if res.get("under_load"):
            tqdm.write(f"warning: cell {cell.key} ran under load ({'; '.join(res['under_load'])})"
                       ": its times are not a quiet machine's", file=sys.stderr)
        done += 1
        write_errors(out)
    # Cross-network predictions, once both cells of a pair have their results.
    for cell in spec.cells:
        for net in cell.predict_on:
            dest = out / "cross" / f"{cross_key(cell, net)}.json"
            other = Cell(cell.app, cell.paradigm, cell.ranks, cell.size, cell.args, net)
            cells_mtime = max((f.stat().st_mtime for f in (out / "cells" / f"{cell.key}.json",
                                                           out / "cells" / f"{other.key}.json")
                               if f.is_file()), default=0.0)
            if dest.is_file() and not force and dest.stat().st_mtime >= cells_mtime:
                continue                    # up to date with both cells it compares
            res = run_cross(cell, net, spec, out, profiles[net])
            if res is not None:
                dest.parent.mkdir(parents=True, exist_ok=True)
                _atomic_write(dest, json.dumps(res, indent=1, default=float))
    write_errors(out)
    return {"cells": len(spec.cells), "run": done, "skipped": skipped, "failed": failed,
            "errors_csv": str(out / "errors.csv")}
