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


def _load_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
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


def check_profile(data: dict[str, Any], where: str) -> None:
    """ProfileError unless ``data`` has the format tag and every ``REQUIRED`` number."""
    if data.get("format") != FORMAT:
        raise ProfileError(f"profile {where}: format is {data.get('format')!r}, expected {FORMAT!r}")
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
            return "json", json.loads(text)
        except json.JSONDecodeError as exc:
            raise ProfileError(f"profile {path}: unreadable ({exc})") from None
    try:
        return "toml", tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"profile {path}: not valid TOML ({exc})") from None


def measured_on(path: Path | str) -> dict[str, Any]:
    """The [measured_on] table of a calibration profile ({} for JSON files or unreadable ones)."""
    try:
        kind, data = read_any(path)
    except ProfileError:
        return {}
    on = data.get("measured_on") if kind == "toml" and isinstance(data, dict) else None
    return dict(on) if isinstance(on, dict) else {}
