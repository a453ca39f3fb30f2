"""Network models for replay: one small module each, formula and source in its docstring.

The contract (``NetworkModel``) and the registry are in ``replay.models.base``; this package
registers the models and gives the functions the rest of hindsight uses: ``names()``,
``get_model(name)``, ``resolve(model, assignments, profile)`` (defaults, then a profile, then
``--set`` values, validated, in internal units), ``parse_assignments``, ``load_profile``.
Adding a model: docs/extending.md.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

from hindsight.errors import DataError
from replay import profile, units
from replay.models.base import (REGISTRY, NetworkModel, Param, ParamError,  # noqa: F401
                                ProfileParamError, profile_gamma, register)


#: The order ``--model`` lists the models in; models registered by other modules come after.
ORDER = ("loggp", "loggps", "hockney", "mm1", "measured", "loggopsim")


def _registry() -> dict[str, NetworkModel]:
    from replay.models import hockney, loggopsim, loggp, loggps, measured, mm1  # noqa: F401
    return {name: REGISTRY[name] for name in sorted(REGISTRY, key=lambda n: (
        ORDER.index(n) if n in ORDER else len(ORDER), n))}


def names() -> list[str]:
    return list(_registry())


def get_model(name: str) -> NetworkModel:
    reg = _registry()
    if name not in reg:
        raise ParamError(f"unknown model '{name}' (choose from {', '.join(reg)})")
    return reg[name]


def _parse_one(model: NetworkModel, name: str, value: Any) -> Any:
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


def _expand(model: NetworkModel, name: str) -> list[str]:
    if name in model.PARAMS:
        return [name]
    aliases = model.ALIASES
    if name in aliases:
        return list(aliases[name])
    if name in model.RETIRED:
        raise ParamError(f"parameter '{name}' is gone from model {model.NAME}: "
                         f"{model.RETIRED[name]}")
    known = sorted(list(model.PARAMS) + list(aliases))
    raise ParamError(f"unknown parameter '{name}' for model {model.NAME} "
                     f"(known: {', '.join(known) if known else 'none'})")


def parse_assignments(items: list[str] | tuple[str, ...]) -> list[tuple[str, str]]:
    out = []
    for item in items:
        if "=" not in item:
            raise ParamError(f"{item}: expected NAME=VALUE")
        k, v = item.split("=", 1)
        if not k.strip() or not v.strip():
            raise ParamError(f"{item}: expected NAME=VALUE")
        out.append((k.strip(), v.strip()))
    return out


def load_profile(path: Path | str, model: NetworkModel, below_binding: bool | str = False,
                 overrides: Sequence[tuple[str, Any]] = ()) -> dict[str, Any]:
    """Parameters for ``model`` from a network profile file; for a trace recorded
    ``below_binding`` (``replay.binding.below_binding``; ``replay.recorder_rules.TraceRules.below``
    says "C" or "Python"), a TOML profile's per-call costs are its ``[native]`` section's (rule
    native_call_costs; not for "Python": calls made through mpi4py), else less its ``[binding]``
    section's (rule binding_in_bursts). A profile whose values break a rule between
    parameters (L >= -o_send, ...) is an error unless ``overrides`` (the command's ``--set``
    assignments, which take precedence) mend it.

    The format `hindsight calibrate` writes (TOML, ``format = "hindsight-profile/1"``; sections
    [loggps], [hockney], [mm1], see docs/calibration.md) is mapped onto the model's names; the
    older JSON shapes ``{"model": NAME, "params": {...}}``, ``{"models": {NAME: {...}}}`` and a
    flat ``{NAME: VALUE}`` are still read. Values are numbers in SI base units or strings with
    units. Errors are ProfileParamError (a data error, exit 1) naming the file."""
    try:
        return _load_profile(Path(path), model, below_binding, overrides)
    except ProfileParamError:
        raise
    except ParamError as exc:
        raise ProfileParamError(str(exc)) from None


def _load_profile(path: Path, model: NetworkModel, below_binding: bool | str,
                  overrides: Sequence[tuple[str, Any]] = ()) -> dict[str, Any]:
    try:
        kind, data = profile.read_any(path)
    except profile.ProfileError as exc:
        raise ParamError(str(exc)) from None
    if not isinstance(data, dict):
        raise ParamError(f"profile {path}: expected a JSON object")
    if kind == "toml":
        if data.get("format") != profile.FORMAT:
            raise ParamError(profile.format_problem(data, str(path)))
        if not isinstance(data.get("measured_on") or {}, dict):
            raise ParamError(f"profile {path}: [measured_on] must be a table")
        out = model.from_profile(data, path)
        if "gamma" in model.PARAMS:         # rule reduction_combine: one section for every model
            out.update(profile_gamma(data, path))
        if below_binding:
            from replay.binding import binding_costs, less_binding, native_costs, with_native
            try:
                native = (native_costs(data, f"profile {path}") if below_binding != "Python"
                          else None)
                costs = binding_costs(data, f"profile {path}")
            except DataError as exc:
                raise ParamError(str(exc)) from None
            if native:                  # rule native_call_costs, else binding_in_bursts
                out = model.within_own_bounds(with_native(out, native, model.PARAMS))
            elif costs:
                out = less_binding(out, costs)
        for name, raw in out.items():       # validate here so the error names the file
            for target in _expand(model, name):
                try:
                    _parse_one(model, target, raw)
                except ParamError as exc:
                    raise ParamError(f"profile {path}: {exc}") from None
        try:                                # and the rules between them (L >= -o_send, ...)
            resolve(model, (), out)
        except ParamError as exc:
            if not overrides or not _mended(model, overrides, out):
                raise ParamError(f"profile {path}: {exc}") from None
        return out
    if "models" in data:
        if not isinstance(data["models"], dict):
            raise ParamError(f"profile {path}: 'models' must be an object")
        if model.NAME not in data["models"]:
            raise ParamError(f"profile {path}: has no parameters for model {model.NAME} "
                             f"(it has {', '.join(data['models'])})")
        params = data["models"][model.NAME]
    elif "params" in data:
        if data.get("model") not in (None, model.NAME):
            raise ParamError(f"profile {path}: written for model {data['model']}, "
                             f"not {model.NAME}")
        params = data["params"]
    else:
        params = {k: v for k, v in data.items() if not k.startswith("_")}
    if not isinstance(params, dict):
        raise ParamError(f"profile {path}: the parameters of model {model.NAME} must be an "
                         "object")
    _check_profile_params(path, model, params)
    return dict(params)


def _mended(model: NetworkModel, overrides: Sequence[tuple[str, Any]],
            params: Mapping[str, Any]) -> bool:
    """Whether ``params`` pass the model's rules once ``overrides`` replace their values (an
    error in the overrides themselves is the caller's to report, as a --set error)."""
    try:
        resolve(model, overrides, params)
    except ParamError:
        return False
    return True


def _check_profile_params(path: Path, model: NetworkModel, params: Mapping[str, Any]) -> None:
    """Every name of a JSON profile is a parameter of ``model`` with a valid value; the error
    names the file (the values reach ``resolve`` only later, where the file is not known)."""
    known = list(model.PARAMS) + list(model.ALIASES)
    for name, raw in params.items():
        if name not in known and name not in model.RETIRED:
            import difflib

            near = difflib.get_close_matches(str(name), known, n=1)
            hint = f"did you mean '{near[0]}'?" if near else f"known: {', '.join(sorted(known))}"
            raise ParamError(f"profile {path}: unknown parameter '{name}' for model "
                             f"{model.NAME} ({hint})")
        try:
            for target in _expand(model, name):
                _parse_one(model, target, raw)
        except ParamError as exc:
            raise ParamError(f"profile {path}: {exc}") from None


def profile_measured_on(path: Path | str) -> dict[str, Any]:
    """The [measured_on] table of a calibration profile ({} for the JSON parameter files)."""
    return profile.measured_on(path)


def resolve(model: NetworkModel, assignments: Mapping[str, Any] | list[tuple[str, Any]] = (),
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
    model.check(values)
    return values
