"""`hindsight validate`: run an experiment matrix, predict every cell, write errors.csv.

Layout of the output directory (every number traceable to its run)::

    DIR/spec.toml                 the spec used (copied)
    DIR/profiles/<network>.toml   network profile, produced once per run and reused
    DIR/traces/<cell>/rep<k>/     the collected traces
    DIR/untraced/<cell>/rep<k>/   the untraced runs (manifest.json with the wall time only)
    DIR/cells/<cell>.json         per-cell results (written atomically: resume unit)
    DIR/failed/<cell>.json        why a cell has no results (its failed run); removed once it has
    DIR/cross/<cell>--<net>.json  cross-network predictions (spec ``predict_on``)
    DIR/errors.csv                one row per (cell, predictor) and per cross prediction
    DIR/stale/<n>/                results of an earlier spec, moved aside (with its spec.toml)

Every cell file records the spec-derived inputs that define it (``spec_inputs``, from
``cell_inputs``); a cell is reused only when they equal the spec's. Results that do not match
the spec (a changed cell, a cell the spec no longer has, its cross predictions, its failure
record, the profile of a redefined network) are moved aside to DIR/stale/<n>/ before anything
runs, so that DIR/spec.toml always describes every result left in DIR (docs/validation.md,
"Resuming").

The parts: ``validation.spec`` (the spec and its cells), ``validation.profiles`` (a network's
profile), ``validation.matrix`` (running and predicting one cell, the ground truth),
``validation.errors_table`` (errors.csv); this module runs them over the matrix, resuming.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path
from typing import Any, Callable

from hindsight import testbed as tb
from hindsight.system import write_text_atomic
from replay.cache import remove_tree
from validation.errors_table import write_errors
from validation.matrix import collect_rounds, cross_key, load_summary, run_cell, run_cross
from validation.profiles import check_profile, ensure_profile
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


def run_inputs(cell: Cell, spec: Spec) -> dict[str, Any]:
    """What a cell's runs (DIR/traces, DIR/untraced) are runs of."""
    net = spec.networks[cell.network]
    d = {"app": cell.app, "paradigm": cell.paradigm, "ranks": cell.ranks,
         "args": list(cell.args), "network": cell.network, "transport": net["transport"],
         "testbed": net.get("testbed")}
    if cell.program:
        d["program"] = cell.program
        # an edited or rebuilt program is another program: its runs are not reused
        d["program_sha256"] = _file_sha256(cell.program)
        if cell.recorder != "python":
            d["recorder"] = cell.recorder
    return d


def _file_sha256(path: str) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def network_inputs(net: dict[str, Any]) -> dict[str, Any]:
    """What defines a network's profile: how it is calibrated, or the profile file's content."""
    d = {k: net[k] for k in ("transport", "testbed", "calibrate", "calibrate_sizes") if k in net}
    if net.get("profile"):
        d["profile_sha256"] = _file_sha256(net["profile"])
    return json.loads(json.dumps(d))        # as it reads back from a file


def cell_inputs(cell: Cell, spec: Spec) -> dict[str, Any]:
    """Everything of the spec that defines a cell's results (stored as the cell file's
    ``spec_inputs``); predictors do not apply to a baseline cell, which has none. The run
    timeout and the cross-network pairs (``predict_on``, DIR/cross) are not part of it."""
    d: dict[str, Any] = {
        "runs": run_inputs(cell, spec), "size": cell.size, "baseline": cell.baseline,
        "profile": network_inputs(spec.networks[cell.network]),
        "repetitions": spec.repetitions, "actual": spec.actual,
        "ground_truth": spec.ground_truth}
    if not cell.baseline:
        d.update(replay_rep=spec.replay_rep, replay=list(spec.replay),
                 replay_set={k: list(v) for k, v in sorted(spec.replay_set.items())},
                 analytic=spec.analytic)
    return json.loads(json.dumps(d))        # as it reads back from the cell file


#: a cell file written before ``spec_inputs`` existed: its own fields, compared where present
_LEGACY = {"app": ("runs", "app"), "paradigm": ("runs", "paradigm"), "ranks": ("runs", "ranks"),
           "args": ("runs", "args"), "network": ("runs", "network"), "size": ("size",),
           "baseline": ("baseline",), "repetitions": ("repetitions",),
           "actual_stat": ("actual",)}


def changed_inputs(cell_json: Path, current: dict[str, Any]) -> list[str]:
    """The inputs of ``current`` a cell file was not made with ([] when it matches); an
    unreadable file is ["unreadable"]."""
    try:
        stored = json.loads(cell_json.read_text())
        if not isinstance(stored, dict):
            raise ValueError
    except (OSError, ValueError):
        return ["unreadable"]
    if "spec_inputs" in stored:
        old = stored["spec_inputs"]
        runs = [k for k in current["runs"] if (old.get("runs") or {}).get(k) != current["runs"][k]]
        return runs + [k for k in sorted(set(old) | set(current))
                       if k != "runs" and old.get(k) != current.get(k)]
    out = []
    for field_, path in _LEGACY.items():
        want = current
        for p in path:
            want = want[p]
        if field_ in stored and stored[field_] != want:
            out.append(path[-1])
    # files without the key were measured against the traced runs
    if stored.get("ground_truth", "traced") != current["ground_truth"]:
        out.append("ground_truth")
    return out


class _Stash:
    """DIR/stale/<n>/, created on the first move: results of an earlier spec, moved aside with
    the spec.toml they were made with."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.dir: Path | None = None
        self.moved: list[str] = []

    def move(self, paths: list[Path]) -> Path:
        if self.dir is None:
            root = self.out / "stale"
            n = 1 + max((int(p.name) for p in root.glob("*") if p.name.isdigit()), default=0)
            self.dir = root / str(n)
            self.dir.mkdir(parents=True)
            if (self.out / "spec.toml").is_file():
                shutil.copyfile(self.out / "spec.toml", self.dir / "spec.toml")
        for p in paths:
            if p.exists():
                dest = self.dir / p.relative_to(self.out)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(str(p), str(dest))
                self.moved.append(str(p.relative_to(self.out)))
        return self.dir


def retire_stale(spec: Spec, out: Path, log: Callable[[str], None]) -> list[str]:
    """Move aside every result in ``out`` the spec does not define (see the module docstring);
    one ``warning:`` line per cell or profile moved. Returns the paths moved (relative)."""
    current = {c.key: cell_inputs(c, spec) for c in spec.cells}
    stash = _Stash(out)
    gone: set[str] = set()
    for f in sorted((out / "cells").glob("*.json")):
        key = f.stem
        runs = [out / "traces" / key, out / "untraced" / key]
        if key not in current:
            where = stash.move([f] + runs)
            log(f"warning: cell {key} is not in spec {spec.source}: its results moved to "
                f"{where}/")
            gone.add(key)
            continue
        changed = changed_inputs(f, current[key])
        if not changed:
            continue
        # the runs are kept when they are runs of the same thing (only predictions or
        # statistics changed): they are reused, and only the missing ones are run
        runs_changed = bool(set(changed) & (set(current[key]["runs"]) | {"unreadable"}))
        where = stash.move([f] + (runs if runs_changed else []))
        log(f"warning: cell {key} was made with another spec (changed: {', '.join(changed)}): "
            f"its results {'and runs ' if runs_changed else ''}moved to {where}/"
            + ("" if runs_changed else "; its runs are reused"))
        gone.add(key)
    for f in sorted((out / "failed").glob("*.json")):
        # a failure of another spec's cell: the spec does not describe it
        if f.stem not in current or changed_inputs(f, current[f.stem]):
            where = stash.move([f])
            log(f"warning: the failure of cell {f.stem} was met with another spec: its record "
                f"moved to {where}/")
    for kind in ("traces", "untraced"):     # runs of cells the spec no longer has
        for d in sorted((out / kind).glob("*")) if (out / kind).is_dir() else []:
            if d.name not in current:
                where = stash.move([d])
                log(f"warning: {kind}/{d.name} belongs to no cell of spec {spec.source}: "
                    f"moved to {where}/")
    pairs = {cross_key(c, n): (c.key, c.on(n).key) for c in spec.cells for n in c.predict_on}
    for f in sorted((out / "cross").glob("*.json")):
        if f.stem not in pairs or set(pairs[f.stem]) & gone:
            stash.move([f])
    for name, net in spec.networks.items():
        prof, rec = out / "profiles" / f"{name}.toml", out / "profiles" / f"{name}.inputs.json"
        try:
            stale = prof.is_file() and json.loads(rec.read_text()) != network_inputs(net)
        except (OSError, ValueError):
            stale = False                   # no record: a profile of an older hindsight, kept
        if stale:
            where = stash.move([prof, rec])
            log(f"warning: profile of network {name} was made for another definition of the "
                f"network: moved to {where}/")
    return stash.moved


def write_failure(out: Path, cell: Cell, inputs: dict[str, Any], reason: str) -> Path:
    """DIR/failed/<cell>.json: the cell (as its results would name it), why it has no results
    (``reason``: its run that failed and how) and its ``spec_inputs``, so that the report lists
    it and a spec that no longer has the cell moves it aside."""
    dest = out / "failed" / f"{cell.key}.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    rec = {"cell": cell.key, "app": cell.app, "paradigm": cell.paradigm,
           "program": cell.program, "ranks": cell.ranks, "size": cell.size,
           "network": cell.network, "baseline": cell.baseline, "reason": reason,
           "spec_inputs": inputs}
    write_text_atomic(dest, json.dumps(rec, indent=1))
    return dest


def validate(spec: Spec, out: Path, force: bool = False, progress: bool = True,
             log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run every cell not already done (all with ``force``); returns a small summary. Results in
    ``out`` that the spec does not define are moved aside first (``retire_stale``). Testbeds
    the spec asks for (``testbed = {nodes, rate}``) are up only for the duration of the call."""
    out = Path(out)
    if out.is_dir() and any(out.iterdir()) and not ((out / "spec.toml").is_file()
                                                    or (out / "cells").is_dir()):
        # results of this spec are moved aside in their own folder only, never in another one
        raise SpecError(f"--out {out}: a folder that holds no validation results; choose a new "
                        "or empty --out")
    (out / "cells").mkdir(parents=True, exist_ok=True)
    moved = retire_stale(spec, out, log)
    # only now: every result left in ``out`` is one of this spec
    if spec.source and spec.source.resolve() != (out / "spec.toml").resolve():
        shutil.copyfile(spec.source, out / "spec.toml")
    started = testbeds_up(spec, log)
    try:
        summary = _validate(spec, out, force, progress, log)
    finally:
        testbeds_down(started)
    summary["moved_aside"] = moved
    return summary


def _validate(spec: Spec, out: Path, force: bool, progress: bool,
              log: Callable[[str], None]) -> dict[str, Any]:
    from tqdm import tqdm

    profiles = {}
    for name, net in spec.networks.items():
        if any(c.network == name for c in spec.cells):
            profiles[name] = ensure_profile(out, name, net, log, force=force)
            check_profile(profiles[name], name, net, spec.replay)
            write_text_atomic(out / "profiles" / f"{name}.inputs.json",
                              json.dumps(network_inputs(net), indent=1))
    done = skipped = failed = 0
    failures: dict[str, str] = {}
    todo: list[tuple[Cell, dict[str, Any]]] = []
    for cell in spec.cells:
        inputs = cell_inputs(cell, spec)
        dest = out / "cells" / f"{cell.key}.json"
        if dest.is_file() and not force and not changed_inputs(dest, inputs):
            skipped += 1
            continue
        if force:
            remove_tree(out / "traces" / cell.key, ignore_errors=True)
            remove_tree(out / "untraced" / cell.key, ignore_errors=True)
        todo.append((cell, inputs))
    if spec.order == "rounds" and len(todo) > 1:
        failures.update(collect_rounds([c for c, _ in todo], spec, out, progress))
    # (a bar only on a terminal: disable=None lets tqdm look)
    bar = tqdm(todo, desc="validate", unit="cell", disable=None if progress else True,
               file=sys.stderr)
    for cell, inputs in bar:
        bar.set_postfix_str(cell.key)
        dest = out / "cells" / f"{cell.key}.json"
        try:
            if cell.key in failures:
                raise RuntimeError(failures[cell.key])
            res = run_cell(cell, spec, out, profiles[cell.network])
        except RuntimeError as exc:
            failed += 1
            if cell.key not in failures:
                tqdm.write(f"cell {cell.key} failed: {exc}", file=sys.stderr)
            failures[cell.key] = str(exc)
            write_failure(out, cell, inputs, str(exc))
            continue
        res["spec_inputs"] = inputs
        write_text_atomic(dest, json.dumps(res, indent=1, default=float))
        (out / "failed" / f"{cell.key}.json").unlink(missing_ok=True)
        if res.get("note"):
            tqdm.write(f"warning: cell {cell.key}: {res['note']}", file=sys.stderr)
        for pred in res.get("predictions", []):
            if pred.get("note"):        # (its predicted_s is NaN: the report leaves it out)
                tqdm.write(f"warning: cell {cell.key}: {pred['predictor']} predicted nothing: "
                           f"{pred['note']}", file=sys.stderr)
        if res.get("under_load"):
            tqdm.write(f"warning: cell {cell.key} ran under load "
                       f"({load_summary(res['under_load'])}): its times are not a quiet "
                       "machine's", file=sys.stderr)
        done += 1
        write_errors(out)
    # Cross-network predictions, once both cells of a pair have their results.
    for cell in spec.cells:
        for net in cell.predict_on:
            dest = out / "cross" / f"{cross_key(cell, net)}.json"
            other = cell.on(net)
            cells_mtime = max((f.stat().st_mtime for f in (out / "cells" / f"{cell.key}.json",
                                                           out / "cells" / f"{other.key}.json")
                               if f.is_file()), default=0.0)
            if dest.is_file() and not force and dest.stat().st_mtime >= cells_mtime:
                continue                    # up to date with both cells it compares
            res = run_cross(cell, net, spec, out, profiles[net], profiles.get(cell.network))
            if res is not None:
                dest.parent.mkdir(parents=True, exist_ok=True)
                write_text_atomic(dest, json.dumps(res, indent=1, default=float))
    write_errors(out)
    return {"cells": len(spec.cells), "run": done, "skipped": skipped, "failed": failed,
            "failed_cells": list(failures), "failures": failures,
            "errors_csv": str(out / "errors.csv")}
