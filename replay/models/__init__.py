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


@dataclass(frozen=True)
class Param:
    kind: str                 # a key of replay.units.PARSERS, or "choice"
    default: Any
    doc: str
    minimum: float = 0.0      # values below are impossible
    strict: bool = False      # the minimum itself is impossible too (e.g. a bandwidth of 0)
    allow_inf: bool = False
    choices: tuple[str, ...] = ()


class ParamError(ValueError):
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


def load_profile(path: Path | str, model: ModuleType) -> dict[str, Any]:
    """A network profile: ``{"model": NAME, "params": {...}}``, ``{"models": {NAME: {...}}}`` or a
    flat ``{NAME: VALUE}``. Values are numbers in SI base units or strings with units."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ParamError(f"profile {path}: unreadable ({exc})") from None
    if not isinstance(data, dict):
        raise ParamError(f"profile {path}: expected a JSON object")
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
