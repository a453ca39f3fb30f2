"""The experiment matrix of `hindsight validate`: reading and checking a spec (docs/validation.md).

A cell is (app, paradigm, ranks, size, network), or (program, ranks, size, network) for an
experiment that names a program of the user's instead of one of the project's applications;
``load_spec`` expands a spec's experiments into its cells and refuses, in one line
(``SpecError``), anything the run would trip over later.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from apps import APPS
from apps.skeletons import skeleton
from hindsight import testbed as tb
from hindsight.collect import RECORDERS, resolve_recorder
from hindsight.programs import imports_instrument, not_executable, not_python
from hindsight.errors import UserError

DEFAULT_SPEC = Path(__file__).resolve().parent.parent / "specs" / "default.toml"
GROUND_TRUTHS = ("untraced", "traced")
#: The order of a validation's runs: repetition by repetition over every cell ("rounds"), or
#: every repetition of one cell before the next cell ("cells"); validation.matrix.collect_rounds
ORDERS = ("rounds", "cells")
REPLAY_MODELS = ("loggps", "loggp", "hockney", "mm1", "measured", "loggopsim")
#: a network's ``calibrate`` -> `hindsight calibrate --api`; "pingpong" and "hindsight" are
#: accepted as other names of the pickle and the buffer ping-pong
CALIBRATE_API = {"pickle": "pickle", "buffer": "buffer", "pingpong": "pickle",
                 "hindsight": "buffer"}


class SpecError(UserError, ValueError):
    """A bad spec or output directory; one readable line."""


#: The keys each table of a spec may hold (docs/validation.md); any other key is an error, so
#: that a misspelt key is not silently ignored (``repetiton = 5`` would otherwise run 2).
TOP_KEYS = ("name", "repetitions", "replay_rep", "actual", "timeout", "ground_truth", "order",
            "accept_noisy_profiles", "networks", "predictors", "experiment")
NETWORK_KEYS = ("transport", "calibrate", "calibrate_sizes", "profile", "testbed",
                "accept_noisy_profiles")
TESTBED_KEYS = ("nodes", "rate")
PREDICTOR_KEYS = ("replay", "analytic", "set")
EXPERIMENT_KEYS = ("app", "program", "paradigms", "ranks", "sizes", "baseline", "networks",
                   "predict_on", "recorder")
#: the paradigm column of a program's cells (errors.csv, the report): a program has no paradigm
PROGRAM = "program"


def check_keys(path: Path, table: str, d: Any, allowed: tuple[str, ...]) -> None:
    """Refuse a key of table ``d`` that is not in ``allowed``, with the closest allowed key."""
    if not isinstance(d, dict):
        return
    for key in d:
        if key not in allowed:
            near = difflib.get_close_matches(str(key), allowed, n=1)
            hint = (f"did you mean '{near[0]}'?" if near else f"known: {', '.join(allowed)}")
            raise SpecError(f"spec {path}: {table}: unknown key '{key}' ({hint})")


@dataclass
class Cell:
    app: str                        # an application, or a program's name (its file's stem)
    paradigm: str                   # PROGRAM for a program's cell
    ranks: int
    size: str
    args: list[str]
    network: str
    baseline: bool = False          # P = 1 run for speedup / efficiency only (no predictions)
    predict_on: list[str] = field(default_factory=list)  # networks to predict from this trace
    program: str | None = None      # a program's resolved path (None: an application)
    recorder: str = "python"        # a program's recorder, resolved (collect --recorder)

    @property
    def key(self) -> str:
        if self.program is not None:
            return f"{self.app}-n{self.ranks}-{self.size}-{self.network}"
        return f"{self.app}-{self.paradigm}-n{self.ranks}-{self.size}-{self.network}"

    def on(self, network: str) -> "Cell":
        """The same cell run on ``network`` (the other side of a cross-network prediction)."""
        return dataclasses.replace(self, network=network, baseline=False, predict_on=[])


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
    order: str = "rounds"           # ORDERS: the order in which the runs are made

    @property
    def replay_median(self) -> bool:
        """Replay the run whose makespan is the median."""
        return self.replay_rep == "median"

    @property
    def replay_all(self) -> bool:
        """Replay every repetition; the prediction is their mean (or median, as ``actual``)."""
        return self.replay_rep == "all"


#: What each typed value must be: (test, words for the error)
_KINDS = {
    "strings": (lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
                "a list of strings, e.g. [\"a\", \"b\"]"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "int": (lambda v: isinstance(v, int) and not isinstance(v, bool), "a whole number"),
    "number": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0,
               "a number > 0"),
    "string": (lambda v: isinstance(v, str), "a string"),
}


def _get(d: dict, key: str, kind: str, where: str, default: Any = None) -> Any:
    """``d[key]`` (``default`` if absent), refused in one line unless it is of ``kind``
    (``_KINDS``): a TOML value of the wrong type is never read some other way (a string where a
    list belongs iterated by character, "false" taken as true)."""
    if key not in d:
        return default
    ok, words = _KINDS[kind]
    if not ok(d[key]):
        raise SpecError(f"{where}: '{key}' must be {words}, not {d[key]!r}")
    return d[key]


def _req(d: dict, key: str, kind, where: str):
    if key not in d:
        raise SpecError(f"{where}: missing '{key}'")
    v = d[key]
    if kind is list and not isinstance(v, list):
        raise SpecError(f"{where}: '{key}' must be a list")
    return v


def set_assignments(entries: list[str]) -> list[tuple[str, str]]:
    """A ``[predictors.set]`` list as ``(NAME, VALUE)`` pairs."""
    return [tuple(e.split("=", 1)) for e in entries]


def _check_set(where: str, model: str, entries: list[str]) -> None:
    """Each ``NAME=VALUE`` of ``set.MODEL`` names a parameter of the model and a value it takes,
    checked over the model's defaults (as ``--set`` is) before any run: a bad one would leave
    every prediction of the model empty after the whole matrix ran."""
    from replay import models as M

    for e in entries:
        if "=" not in e:
            raise SpecError(f"{where}: set.{model}: {e!r} is not NAME=VALUE")
    try:
        M.resolve(M.get_model(model), set_assignments(entries))
    except M.ParamError as exc:
        raise SpecError(f"{where}: set.{model}: {exc}") from None


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
    check_keys(path, "top level", raw, TOP_KEYS)
    nets_raw = raw.get("networks", {"shm": {"transport": "shm"}})
    accept_noisy = raw.get("accept_noisy_profiles", False)
    if not isinstance(accept_noisy, bool):
        raise SpecError(f"spec {path}: accept_noisy_profiles must be true or false")
    if not isinstance(nets_raw, dict) or not nets_raw:
        raise SpecError(f"spec {path}: [networks] must name at least one network")
    networks = {}
    for name, n in nets_raw.items():
        _safe_name(path, "network name", name)
        if not isinstance(n, dict):
            raise SpecError(f"spec {path}: [networks.{name}] must be a table")
        check_keys(path, f"[networks.{name}]", n, NETWORK_KEYS)
        check_keys(path, f"[networks.{name}] testbed", n.get("testbed"), TESTBED_KEYS)
        n = dict(n)
        n.setdefault("transport", "tcp" if "testbed" in n else name)
        if n["transport"] not in ("shm", "tcp"):
            raise SpecError(f"spec {path}: network {name}: transport must be shm or tcp")
        if "testbed" in n:
            _check_testbed(path, name, n)
        if n.get("calibrate", "pickle") not in CALIBRATE_API:
            raise SpecError(f"spec {path}: network {name}: calibrate must be 'pickle' or 'buffer'")
        if "calibrate_sizes" in n:
            # checked here, not by the calibration after the runs
            from replay.calibration.run import CalibrationUsageError, parse_sizes
            try:
                parse_sizes(str(n["calibrate_sizes"]))
            except CalibrationUsageError as exc:
                raise SpecError(f"spec {path}: network {name}: calibrate_sizes "
                                f"{str(exc).removeprefix('--sizes ')}") from None
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
    ground_truth = raw.get("ground_truth", "untraced")
    if ground_truth not in GROUND_TRUTHS:
        raise SpecError(f"spec {path}: ground_truth must be \"untraced\" or \"traced\", not "
                        f"{ground_truth!r}")
    cells: list[Cell] = []
    exps = raw.get("experiment", [])
    if not isinstance(exps, list) or not exps:
        raise SpecError(f"spec {path}: needs at least one [[experiment]]")
    for i, e in enumerate(exps):
        where = f"spec {path}: experiment {i + 1}"
        if not isinstance(e, dict):
            raise SpecError(f"{where}: must be a table ([[experiment]])")
        check_keys(path, f"[[experiment]] {i + 1}", e, EXPERIMENT_KEYS)
        if ("app" in e) == ("program" in e):
            raise SpecError(f"{where}: give exactly one of 'app' (an application of hindsight's) "
                            "or 'program' (a program of yours), not "
                            + ("both" if "app" in e else "neither"))
        program = None
        if "program" in e:
            program = _program(path, where, e)
            app, paradigms = Path(program).stem, [PROGRAM]
        else:
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
        nets = _get(e, "networks", "strings", where, list(networks))
        predict_on = _get(e, "predict_on", "strings", where, [])
        baseline = _get(e, "baseline", "bool", where, program is None)
        recorder = _get(e, "recorder", "string", where, "auto")
        if recorder not in RECORDERS:
            raise SpecError(f"{where}: 'recorder' must be one of {', '.join(RECORDERS)}, "
                            f"not {recorder!r}")
        if recorder == "pmpi" and program is None:
            raise SpecError(f"{where}: 'recorder' is for a 'program' (an application records "
                            "its calls through instrument's Python API)")
        if recorder == "pmpi" and imports_instrument(program):
            raise SpecError(f"{where}: 'recorder' pmpi: {program} imports instrument, whose "
                            "regions only the Python tracer records (use \"python\" or "
                            "\"auto\")")
        recorder = resolve_recorder(program, recorder)
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
                # a program's P = 1 run only when asked: a program of the user's may need P >= 2
                if baseline:
                    cells.append(Cell(app, PROGRAM if program else "pipeline", 1, label, args,
                                      net, baseline=True, program=program, recorder=recorder))
                for p in paradigms:
                    for r in ranks:
                        if program is None and skeleton(p).power_of_two and r & (r - 1):
                            raise SpecError(f"{where}: {p} needs power-of-two ranks, not {r}")
                        cells.append(Cell(app, p, r, label, args, net,
                                          predict_on=[b for b in predict_on if b != net],
                                          program=program, recorder=recorder))
    pred = raw.get("predictors", {})
    if not isinstance(pred, dict):
        raise SpecError(f"spec {path}: [predictors] must be a table")
    check_keys(path, "[predictors]", pred, PREDICTOR_KEYS)
    check_keys(path, "[predictors.set]", pred.get("set", {}), REPLAY_MODELS)
    where = f"spec {path}: [predictors]"
    replay = _get(pred, "replay", "strings", where, ["loggps", "hockney", "mm1"])
    analytic = _get(pred, "analytic", "bool", where, True)
    sets = pred.get("set", {})
    if not isinstance(sets, dict):
        raise SpecError(f"{where}: 'set' must be a table of model = [\"NAME=VALUE\", ...]")
    for model in sets:
        _get(sets, model, "strings", f"{where} set", [])
        _check_set(where, model, sets[model])
    for i, m in enumerate(replay):
        if m not in REPLAY_MODELS:
            raise SpecError(f"spec {path}: unknown replay model {m!r} "
                            f"(choose from {', '.join(REPLAY_MODELS)})")
        if m in replay[:i]:
            # each model is one predictor of the report: twice would count its cells twice
            raise SpecError(f"{where}: replay names {m!r} twice")
    top = f"spec {path}: top level"
    reps = _get(raw, "repetitions", "int", top, 2)
    timeout = _get(raw, "timeout", "number", top, 300)
    name = _get(raw, "name", "string", top, path.stem)
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
    order = raw.get("order", "rounds")
    if order not in ORDERS:
        raise SpecError(f"spec {path}: order must be \"rounds\" or \"cells\", not {order!r}")
    seen: dict[str, Cell] = {}
    unique = []
    for c in cells:
        if c.key not in seen:
            seen[c.key] = c
            unique.append(c)
        else:
            if seen[c.key].program != c.program:
                # two programs of one name (in two folders), or a program named like a cell
                # of an application: their results would share one file
                raise SpecError(f"spec {path}: two experiments make cell {c.key}: "
                                f"{seen[c.key].program or 'application ' + c.app} and "
                                f"{c.program or 'application ' + c.app} (rename one program)")
            seen[c.key].predict_on += [b for b in c.predict_on if b not in seen[c.key].predict_on]
    return Spec(name=name, repetitions=reps, replay_rep=replay_rep,
                timeout=float(timeout), cells=unique, networks=networks,
                replay=list(replay), replay_set={k: list(v) for k, v in sets.items()},
                analytic=analytic, source=path, raw=raw,
                actual=actual, ground_truth=ground_truth, order=order)


def _program(path: Path, where: str, e: dict[str, Any]) -> str:
    """An experiment's ``program``: its resolved path (relative to the spec's folder unless
    absolute), checked to exist. A Python script or a compiled program (traced through PMPI,
    docs/native.md); both have untraced runs."""
    if "paradigms" in e:
        raise SpecError(f"{where}: 'paradigms' is for an 'app'; a program runs as it is")
    prog = e["program"]
    if not isinstance(prog, str) or not prog:
        raise SpecError(f"{where}: 'program' must be a path (a string)")
    p = Path(prog)
    p = (p if p.is_absolute() else path.parent / p).resolve()
    if not p.is_file():
        raise SpecError(f"{where}: program not found: {p}")
    from instrument.native import is_native

    why = not_executable(p) if is_native(p) else not_python(p)
    if why:                 # (said here, before any run, as collect --program would say it)
        raise SpecError(f"{where}: program {p}: {why}")
    return str(p)


def _check_testbed(path: Path, name: str, n: dict[str, Any]) -> None:
    """``testbed = "NAME"`` (a testbed that is up) or ``testbed = {nodes = 2, rate = "1gbit"}``
    (brought up by `hindsight validate` for the run and removed afterwards)."""
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

