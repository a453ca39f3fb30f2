"""The network profile file: TOML, ``format = "hindsight-profile/1"`` (docs/calibration.md).

One module reads, checks and writes it; every other part of hindsight goes through it.

- ``write_profile(profile, path)``: what `hindsight calibrate` (and `validate`, copying a
  profile) writes; the profile is checked first, so a written profile is always readable.
- ``read_profile(path)``: a complete calibration profile, checked (every section of
  ``REQUIRED`` present, every value a number); errors are ``ProfileError`` naming the file.
- ``read_any(path)``: what ``--profile`` accepts: a TOML profile, or one of the JSON parameter
  files ``{"model": NAME, "params": {...}}``, ``{"models": {NAME: {...}}}`` or a flat
  ``{NAME: VALUE}``; returns ``("toml" | "json", data)`` unchecked (each model maps and checks
  the part it needs: ``replay.models``).
- ``measured_on(path)``: the [measured_on] table, or {} where a file has none.

Values are SI base units (seconds, bytes per second, bytes).
"""

from __future__ import annotations

import copy
import json
import math
import tomllib
from pathlib import Path
from typing import Any

from hindsight.errors import DataError
from hindsight.system import write_text_atomic

FORMAT = "hindsight-profile/1"

#: section -> names that must be present (numbers), in SI base units
REQUIRED: dict[str, tuple[str, ...]] = {
    "loggps": ("L", "o_send", "o_recv", "g", "G", "S", "O", "o_a", "o_b"),
    "hockney": ("l", "g"),
    "mm1": ("C", "tau"),
}


class ProfileError(DataError, ValueError):
    """A profile that cannot be read or written; the message names the file and the problem."""


def _clean(value: Any) -> Any:
    """TOML has no null and tomli-w no numpy types: plain Python values, None dropped."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value if v is not None]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return value.item()            # numpy scalar
    return value


def write_profile(profile: dict[str, Any], path: Path | str) -> None:
    """Check ``profile`` and write it as TOML to ``path`` (through a temporary name, so a reader
    never sees half a file). OSError propagates: the caller names the flag."""
    import tomli_w

    check_profile(profile, str(path))
    write_text_atomic(Path(path), tomli_w.dumps(_clean(profile)))


#: parsed profile texts of this process (text -> data), at most ``_PARSED_MAX``: a replay reads
#: its --profile file five times (model, rules, flags, notes), and parsing a calibration
#: profile's TOML (900 lines) takes 8-17 ms each time here; callers get copies
_PARSED: dict[tuple[bool, str], Any] = {}
_PARSED_MAX = 8


def _parse(text: str, as_json: bool) -> Any:
    """``text`` parsed as JSON or TOML (a copy of an earlier parse of the same text)."""
    key = (as_json, text)
    if key not in _PARSED:
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.pop(next(iter(_PARSED)))
        _PARSED[key] = json.loads(text) if as_json else tomllib.loads(text)
    return copy.deepcopy(_PARSED[key])


def _load_toml(path: Path) -> dict[str, Any]:
    try:
        return _parse(path.read_text(), False)
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"profile {path}: unreadable ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"profile {path}: not valid TOML ({exc})") from None


def read_profile(path: Path | str) -> dict[str, Any]:
    """A calibration profile, checked (``check_profile``)."""
    path = Path(path)
    data = _load_toml(path)
    check_profile(data, str(path))
    return data


def format_problem(data: dict[str, Any], where: str) -> str:
    """What is wrong with the format tag of a profile whose tag is not ``FORMAT``."""
    if "format" not in data:
        return (f"profile {where}: no format key (a profile `hindsight calibrate` writes "
                f"begins with format = {FORMAT!r})")
    return f"profile {where}: format is {data.get('format')!r}, expected {FORMAT!r}"


def check_profile(data: dict[str, Any], where: str) -> None:
    """ProfileError unless ``data`` has the format tag and every ``REQUIRED`` number."""
    if data.get("format") != FORMAT:
        raise ProfileError(format_problem(data, where))
    for section, names in REQUIRED.items():
        sec = data.get(section)
        if not isinstance(sec, dict):
            raise ProfileError(f"profile {where}: missing section [{section}]")
        for name in names:
            v = sec.get(name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v):
                raise ProfileError(f"profile {where}: [{section}] {name} must be a number, "
                                   f"not {v!r}")


def read_any(path: Path | str) -> tuple[str, Any]:
    """("toml", dict) for a TOML profile, ("json", data) for the JSON parameter files."""
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"profile {path}: unreadable ({exc})") from None
    if path.suffix.lower() == ".json" or text.lstrip().startswith("{"):
        try:
            return "json", _parse(text, True)
        except json.JSONDecodeError as exc:
            raise ProfileError(f"profile {path}: unreadable ({exc})") from None
    try:
        return "toml", _parse(text, False)
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"profile {path}: not valid TOML ({exc})") from None


def toml_of(path: Any, where: str) -> dict[str, Any] | None:
    """The content of the ``--profile`` file ``path`` when it is a TOML profile, None for no file
    or a JSON parameter file (which has no sections); an unreadable file is a DataError naming
    ``where``."""
    if path is None:
        return None
    try:
        kind, data = read_any(path)
    except ProfileError as exc:
        raise DataError(f"{where}: {exc}") from None
    return data if kind == "toml" and isinstance(data, dict) else None


def is_number(x: Any) -> bool:
    """A finite int or float (not a bool): what a profile's numeric values must be."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def time_section(profile: dict[str, Any] | None, name: str, keys: tuple[str, ...], where: str,
                 required: bool = True, ignored: tuple[str, ...] = ()) -> dict[str, float] | None:
    """Section ``[name]`` of a profile whose values are times in seconds (>= 0), as floats;
    None where the profile has no such section. Every key must be one of ``keys`` (or of
    ``ignored``, left out); with ``required`` every one of ``keys`` must be present. Anything
    else is a DataError naming ``where``, the section and the key."""
    if not profile or name not in profile:
        return None
    sec = profile[name]
    if not isinstance(sec, dict):
        raise DataError(f"{where}: [{name}] must be a table")
    unknown = sorted(set(sec) - set(keys) - set(ignored))
    if unknown:
        raise DataError(f"{where}: [{name}] {unknown[0]}: not one of {', '.join(keys)}")
    out = {}
    for key in keys:
        v = sec.get(key)
        if v is None and not required:
            continue
        if not is_number(v) or v < 0:
            raise DataError(f"{where}: [{name}] {key} must be a time >= 0 in seconds, "
                            f"not {v!r}")
        out[key] = float(v)
    return out


def measured_on(path: Path | str) -> dict[str, Any]:
    """The [measured_on] table of a calibration profile ({} for JSON files or unreadable ones)."""
    try:
        kind, data = read_any(path)
    except ProfileError:
        return {}
    on = data.get("measured_on") if kind == "toml" and isinstance(data, dict) else None
    return dict(on) if isinstance(on, dict) else {}
