"""The hindsight trace format, the bottom layer: the contract docs/trace-format.md describes.

A trace is a directory::

    DIR/manifest.json          run metadata (JSON)
    DIR/rank-00000.parquet     one Parquet file per rank, one row per event
    ...

While a run is in progress each rank writes raw records (``core.RAW_COLUMNS``) into
``DIR/.staging/rank-NNNNN/events.raw``; a rank that finishes seals them into its Parquet file. A
rank that dies leaves its raw records: the readers convert them in memory and report that rank
as incomplete. Nothing incomplete is ever presented as complete.

Modules, each importing only those above it in this list:

- ``core``: op names and codes, sentinels, the raw record, manifest writing (standard library
  only: a traced rank loads nothing heavier while the program runs);
- ``oplut``: op lookup tables and row-order rules (NumPy only: a replay of a cached trace
  loads no pyarrow);
- ``schema``: the Parquet schema, write/read options;
- ``manifest``: reading and checking ``manifest.json``;
- ``raw``: raw staging records read back as Arrow tables;
- ``write``: the one writer (``RankEvents``, ``write_trace``, sealing staged records);
- ``read``: locating each rank's data and reading a trace as one Arrow table;
- ``columns``: the fast reader into flat NumPy arrays;
- ``windows``: the reader of a trace larger than memory, rank by rank in batches.

Every public name of these modules is also an attribute of this package, loaded on first use
(``from hindsight import trace as tf; tf.read_trace(...)``), so that importing ``trace.core``
does not load pyarrow.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

_MODULES = ("core", "oplut", "schema", "manifest", "raw", "write", "read", "columns", "windows")
_INDEX: dict[str, str] = {}
#: a definition at the start of a line: ``def``/``class NAME``, ``NAME [: type] =``, ``A = B =``
_DEFINED = re.compile(r"^(?:(?:def|class)\s+(\w+)|((?:\w+\s*=\s*)+)(?!=)|(\w+)\s*:[^=\n]*=)",
                      re.M)


def _index() -> dict[str, str]:
    """Public name -> the module that defines it (not one that imports it), read from the
    modules' source without importing them, so that a lookup loads one module only.

    The names are the module-level definitions, found by a pattern at the start of each line
    (``ast.parse`` of the nine modules took 24 ms of every command's start-up);
    tests/test_layers.py checks the index against the modules' syntax trees."""
    if not _INDEX:
        here = Path(__file__).parent
        for mod in reversed(_MODULES):          # a name defined twice belongs to the lower module
            for m in _DEFINED.finditer((here / f"{mod}.py").read_text()):
                names = [m.group(1) or m.group(3)] if m.group(1) or m.group(3) else \
                    re.findall(r"\w+", m.group(2))
                _INDEX.update({n: mod for n in names if not n.startswith("_")})
    return _INDEX


def __getattr__(name: str) -> Any:
    if name in _MODULES or name == "rowscan":
        # `from hindsight.trace import core` asks for the attribute first: load that module only
        return importlib.import_module(f"{__name__}.{name}")
    mod = _index().get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value          # found once; later lookups skip this function
    return value
