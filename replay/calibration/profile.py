"""The network profile file: TOML, ``format = "hindsight-profile/1"`` (docs/calibration.md).

Read with the standard library's ``tomllib``, written with ``tomli-w``. Values are SI base units.
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Any
from hindsight.errors import DataError

FORMAT = "hindsight-profile/1"

#: section -> names that must be present (numbers), in SI base units
REQUIRED: dict[str, tuple[str, ...]] = {
    "loggps": ("L", "o_send", "o_recv", "g", "G", "S", "O", "o_a", "o_b"),
    "hockney": ("l", "g"),
    "mm1": ("C", "tau"),
}


class ProfileError(DataError, ValueError):
    """A profile that cannot be read; the message names the file and the problem."""


def _clean(value: Any) -> Any:
    """TOML has no null and tomli-w no numpy types: plain Python values, None dropped."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value if v is not None]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return value.item()            # numpy scalar
    return value


def write_profile(profile: dict, path: Path | str) -> None:
    import tomli_w
    check_profile(profile, str(path))
    Path(path).write_text(tomli_w.dumps(_clean(profile)))


def read_profile(path: Path | str) -> dict:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"profile {path}: unreadable ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"profile {path}: not valid TOML ({exc})") from None
    check_profile(data, str(path))
    return data


def check_profile(data: dict, where: str) -> None:
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
