"""`hindsight validate`: run an experiment matrix, predict every cell, write errors.csv.

Layout of the output directory (every number traceable to its run)::

    DIR/spec.toml                 the spec used (copied)
    DIR/profiles/<network>.toml   network profile, produced once per run and reused
    DIR/traces/<cell>/rep<k>/     the collected traces
    DIR/untraced/<cell>/rep<k>/   the untraced runs (manifest.json with the wall time only)
    DIR/cells/<cell>.json         per-cell results (written atomically: resume unit)
    DIR/cross/<cell>--<net>.json  cross-network predictions (spec ``predict_on``)
    DIR/errors.csv                one row per (cell, predictor) and per cross prediction

The parts: ``validation.spec`` (the spec and its cells), ``validation.profiles`` (a network's
profile), ``validation.matrix`` (running and predicting one cell, the ground truth),
``validation.errors_table`` (errors.csv); this module runs them over the matrix, resuming.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any, Callable

from hindsight import testbed as tb
from hindsight.system import write_text_atomic
from validation.errors_table import write_errors
from validation.matrix import cross_key, run_cell, run_cross
from validation.profiles import ensure_profile
from validation.spec import Cell, Spec, SpecError


def testbeds_up(spec: Spec, log: Callable[[str], None]) -> list[str]:
    """Bring up the managed testbeds of the spec's networks that some cell uses; returns their
    names (for testbeds_down)."""
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
    """Remove the testbeds ``testbeds_up`` started."""
    for name in names:
        tb.down(name)


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
    if spec.source and spec.source.resolve() != (out / "spec.toml").resolve():
        shutil.copyfile(spec.source, out / "spec.toml")
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
            res = run_cell(cell, spec, out, profiles[cell.network])
        except RuntimeError as exc:
            failed += 1
            tqdm.write(f"cell {cell.key} failed: {exc}", file=sys.stderr)
            continue
        write_text_atomic(dest, json.dumps(res, indent=1, default=float))
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
                write_text_atomic(dest, json.dumps(res, indent=1, default=float))
    write_errors(out)
    return {"cells": len(spec.cells), "run": done, "skipped": skipped, "failed": failed,
            "errors_csv": str(out / "errors.csv")}
