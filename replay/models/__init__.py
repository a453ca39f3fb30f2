"""Network models for replay: one small module each, formula and source in its docstring.

Every model exposes ``NAME``, ``PARAMS`` (name -> ``Param``), ``ALIASES`` (a name that sets several
others, e.g. ``o`` sets ``o_send`` and ``o_recv``), ``MODE`` (``"network"``: messages cost what the
formula says; ``"measured"``: messages keep the times of the trace) and
``kernel_params(values, ctx) -> np.ndarray`` (the flat parameter vector of ``replay.kernel``).
A model may also define ``message_delay(values, ctx, send_times) -> np.ndarray`` (an extra
per-message delay in ns) and ``passes(values) -> int`` (how many fixed-point replays it needs).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Mapping

from replay import units
from hindsight.errors import UsageError


@dataclass(frozen=True)
class Param:
    kind: str                 # a key of replay.units.PARSERS, or "choice"
    default: Any
    doc: str
    minimum: float = 0.0      # values below are impossible
    strict: bool = False      # the minimum itself is impossible too (e.g. a bandwidth of 0)
    allow_inf: bool = False
    choices: tuple[str, ...] = ()


class ParamError(UsageError, ValueError):
    """A bad model parameter; the message names the parameter."""


def _registry() -> dict[str, ModuleType]:
    from replay.models import hockney, loggp, loggps, measured, mm1
    return {m.NAME: m for m in (loggp, loggps, hockney, mm1, measured)}


def names() -> list[str]:
    return list(_registry())


def get_model(name: str) -> ModuleType:
    reg = _registry()
    if name not in reg:
        raise ParamError(f"unknown model '{name}' (choose from {', '.join(reg)})")
    return reg[name]


def _parse_one(model: ModuleType, name: str, value: Any) -> Any:
    spec: Param = model.PARAMS[name]
    if spec.kind == "choice":
        v = str(value)
        if v not in spec.choices:
            raise ParamError(f"{name}={value}: choose one of {', '.join(spec.choices)}")
        return v
    try:
        v = units.parse(spec.kind, value)
    except ValueError as exc:
        raise ParamError(f"{name}: {exc}") from None
    if math.isinf(v) and not (spec.allow_inf and v > 0):
        raise ParamError(f"{name}={value}: must be finite")
    if v < spec.minimum or (spec.strict and v <= spec.minimum):
        raise ParamError(f"{name}={value}: impossible value (must be "
                         f"{'>' if spec.strict else '>='} {spec.minimum:g} in internal units)")
    return v


def _expand(model: ModuleType, name: str) -> list[str]:
    if name in model.PARAMS:
        return [name]
    aliases = getattr(model, "ALIASES", {})
    if name in aliases:
        return list(aliases[name])
    known = sorted(list(model.PARAMS) + list(aliases))
    raise ParamError(f"unknown parameter '{name}' for model {model.NAME} "
                     f"(known: {', '.join(known) if known else 'none'})")


def parse_assignments(items: list[str] | tuple[str, ...]) -> list[tuple[str, str]]:
    out = []
    for item in items:
        if "=" not in item:
            raise ParamError(f"--set {item}: expected NAME=VALUE")
        k, v = item.split("=", 1)
        if not k.strip() or not v.strip():
            raise ParamError(f"--set {item}: expected NAME=VALUE")
        out.append((k.strip(), v.strip()))
    return out


PROFILE_FORMAT = "hindsight-profile/1"


def _read_profile_file(path: Path) -> tuple[str, Any]:
    """("toml", dict) for a hindsight-profile TOML file, ("json", data) for the older JSON shapes."""
    import tomllib

    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ParamError(f"profile {path}: unreadable ({exc})") from None
    if path.suffix.lower() == ".json" or text.lstrip().startswith("{"):
        try:
            return "json", json.loads(text)
        except json.JSONDecodeError as exc:
            raise ParamError(f"profile {path}: unreadable ({exc})") from None
    try:
        return "toml", tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ParamError(f"profile {path}: not valid TOML ({exc})") from None


def _section(data: dict, path: Path, name: str, keys: tuple[str, ...]) -> dict[str, Any]:
    sec = data.get(name)
    if not isinstance(sec, dict):
        raise ParamError(f"profile {path}: has no [{name}] section")
    missing = [k for k in keys if k not in sec]
    if missing:
        raise ParamError(f"profile {path}: [{name}] lacks {', '.join(missing)}")
    for k in keys:
        if isinstance(sec[k], bool) or not isinstance(sec[k], (int, float)):
            raise ParamError(f"profile {path}: [{name}] {k} = {sec[k]!r} is not a number")
    return sec


def _from_calibration(data: dict, path: Path, model: ModuleType) -> dict[str, Any]:
    """Map a hindsight-profile/1 file (docs/calibration.md) onto ``model``'s parameters."""
    if data.get("format") != PROFILE_FORMAT:
        raise ParamError(f"profile {path}: format is {data.get('format')!r}, expected "
                         f"'{PROFILE_FORMAT}'")
    measured_on = data.get("measured_on") or {}
    if not isinstance(measured_on, dict):
        raise ParamError(f"profile {path}: [measured_on] must be a table")
    if model.NAME in ("loggp", "loggps"):
        sec = _section(data, path, "loggps", ("L", "o_send", "o_recv", "g", "G", "O", "o_b", "S"))
        # The profile's o_send/o_recv are the overheads measured with `ranks` ranks; the models
        # add o_b·P themselves (paper 004: o = o'_a + o'_b·P + O·k), so remove o_b·ranks here.
        ranks = measured_on.get("ranks")
        p_cal = float(ranks) if isinstance(ranks, (int, float)) and ranks > 0 else 2.0
        o_b = float(sec["o_b"])
        # o_b·P_cal may exceed a side's measured overhead (o_a < 0, a fit over few P): then that
        # side grows by what it has, so the overhead at P_cal stays the measured one.
        o_b_s = min(o_b, float(sec["o_send"]) / p_cal)
        o_b_r = min(o_b, float(sec["o_recv"]) / p_cal)
        # per-side per-byte overheads (profiles since the pickle API); older ones have O only
        O_s, O_r = sec.get("O_send", sec["O"]), sec.get("O_recv", sec["O"])
        out = {"L": sec["L"], "g": sec["g"], "G": sec["G"], "O_send": O_s, "O_recv": O_r,
               "o_b_send": o_b_s, "o_b_recv": o_b_r,
               "o_send": float(sec["o_send"]) - o_b_s * p_cal,
               "o_recv": float(sec["o_recv"]) - o_b_r * p_cal}
        if "S" in model.PARAMS:
            out["S"] = sec["S"]
        return out
    if model.NAME == "hockney":
        sec = _section(data, path, "hockney", ("l", "g"))
        return {"l": sec["l"], "g": sec["g"]}
    if model.NAME == "mm1":
        sec = _section(data, path, "mm1", ("C", "tau"))
        out = {"C": sec["C"], "tau": sec["tau"]}
        hosts = measured_on.get("hosts")
        if isinstance(hosts, list) and len(hosts) == 1:
            # Measured between ranks of one host: that path is the model's host-internal one
            # (L_host + k/C_host); without this a one-host trace would get free messages.
            out.update({"L_host": sec["tau"], "C_host": sec["C"]})
        return out
    raise ParamError(f"profile {path}: a calibration profile has no parameters for model "
                     f"{model.NAME}")


def load_profile(path: Path | str, model: ModuleType) -> dict[str, Any]:
    """Parameters for ``model`` from a network profile file.

    The format `hindsight calibrate` writes (TOML, ``format = "hindsight-profile/1"``; sections
    [loggps], [hockney], [mm1], see docs/calibration.md) is mapped onto the model's names; the
    older JSON shapes ``{"model": NAME, "params": {...}}``, ``{"models": {NAME: {...}}}`` and a
    flat ``{NAME: VALUE}`` are still read. Values are numbers in SI base units or strings with
    units. Errors are ParamError naming the file."""
    path = Path(path)
    kind, data = _read_profile_file(path)
    if not isinstance(data, dict):
        raise ParamError(f"profile {path}: expected a JSON object")
    if kind == "toml":
        out = _from_calibration(data, path, model)
        for name, raw in out.items():       # validate here so the error names the file
            for target in _expand(model, name):
                try:
                    _parse_one(model, target, raw)
                except ParamError as exc:
                    raise ParamError(f"profile {path}: {exc}") from None
        return out
    if "models" in data:
        if model.NAME not in data["models"]:
            raise ParamError(f"profile {path}: has no parameters for model {model.NAME} "
                             f"(it has {', '.join(data['models'])})")
        return dict(data["models"][model.NAME])
    if "params" in data:
        if data.get("model") not in (None, model.NAME):
            raise ParamError(f"profile {path}: written for model {data['model']}, "
                             f"not {model.NAME}")
        return dict(data["params"])
    return {k: v for k, v in data.items() if not k.startswith("_")}


def profile_measured_on(path: Path | str) -> dict[str, Any]:
    """The [measured_on] table of a calibration profile ({} for the older JSON profiles)."""
    try:
        kind, data = _read_profile_file(Path(path))
    except ParamError:
        return {}
    on = data.get("measured_on") if kind == "toml" and isinstance(data, dict) else None
    return dict(on) if isinstance(on, dict) else {}


def resolve(model: ModuleType, assignments: Mapping[str, Any] | list[tuple[str, Any]] = (),
            profile: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Defaults, then the profile, then ``assignments`` (later wins); validated and in internal
    units."""
    values = {name: (spec.default if spec.kind == "choice" else
                     _parse_one(model, name, spec.default) if isinstance(spec.default, str)
                     else float(spec.default))
              for name, spec in model.PARAMS.items()}
    items = list(profile.items()) if profile else []
    items += list(assignments.items()) if isinstance(assignments, Mapping) else list(assignments)
    for name, raw in items:
        for target in _expand(model, name):
            values[target] = _parse_one(model, target, raw)
    check = getattr(model, "check", None)
    if check:
        check(values)
    return values
