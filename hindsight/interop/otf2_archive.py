"""What an OTF2 archive says of itself besides its events, for ``otf2_import``: the
properties hindsight's export writes (``HINDSIGHT::*``, ``hindsight.interop.otf2``), and
whether each location's event file is there."""

from __future__ import annotations

import json
from pathlib import Path

from hindsight import trace as tf
from hindsight.interop.otf2 import PROP_INCOMPLETE, PROP_UNTRACED, OtfError


def archive_property(trace, name: str) -> str | None:
    """The archive's property ``name`` (``PROP_TIMELINE``, ``PROP_APP``, ...: what hindsight's
    export wrote), or None."""
    import _otf2

    names = {str(n).upper() for n in _otf2.Reader_GetPropertyNames(trace._handle)}
    return _otf2.Reader_GetProperty(trace._handle, name) if name in names else None


def _json_property(trace, name: str):
    """Property ``name`` read as JSON: {} when the archive has none, None when it is not
    JSON (the caller names the property)."""
    text = archive_property(trace, name)
    try:
        return json.loads(text) if text else {}
    except ValueError:
        return None


def untraced_calls(trace, anchor: Path) -> dict[str, int]:
    """The calls hindsight's recorder counted but did not record (``PROP_UNTRACED``), as the
    exported manifest had them; empty for other archives."""
    counts = _json_property(trace, PROP_UNTRACED)
    if not isinstance(counts, dict) or not all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
            for k, v in counts.items()):
        raise OtfError(f"{anchor}: property {PROP_UNTRACED} is not a JSON object of call "
                       "counts")
    return counts


def incomplete_ranks(trace, anchor: Path, nranks: int) -> dict[int, str]:
    """The ranks a partial export's source trace had not finished, with their status
    (``PROP_INCOMPLETE``); empty for a complete source and for other archives."""
    got = _json_property(trace, PROP_INCOMPLETE)
    if not isinstance(got, dict) or not all(
            isinstance(k, str) and k.isdigit() and int(k) < nranks and isinstance(v, str) and v
            for k, v in got.items()):
        raise OtfError(f"{anchor}: property {PROP_INCOMPLETE} is not a JSON object of ranks "
                       f"below {nranks} and their status")
    # (a rank whose file went missing has, in the imported trace, a file of no rows)
    return {int(k): "missing" if v == tf.REMOVED else v for k, v in got.items()}


def check_event_files(defs, anchor: Path) -> None:
    """Each location that announces events has its event file, ``<ref>.evt`` in the archive's
    event folder, where the archive keeps them as files of their own (the POSIX substrate; a
    folder of other files, SIONlib's containers, is not looked into): the C library's error
    for a missing one names no file (INVALID_ARGUMENT)."""
    announced = [loc for loc in defs.locations if loc.number_of_events]
    if not announced:
        return
    folder = anchor.with_suffix("")
    if not folder.is_dir():
        raise OtfError(f"{anchor}: damaged OTF2 archive: its event folder {folder} is missing "
                       "(an archive is the anchor file, its .def file and that folder)")
    names = {p.name for p in folder.iterdir()}
    if not names:
        raise OtfError(f"{anchor}: damaged OTF2 archive: its event folder {folder} is empty")
    if not any(n.endswith(".evt") for n in names):
        return
    for loc in announced:
        if f"{loc._ref}.evt" not in names:
            raise OtfError(f"{anchor}: damaged OTF2 archive: {folder / f'{loc._ref}.evt'}, the "
                           f"event file of location '{loc.name}' ({loc.number_of_events} "
                           "events), is missing")
