"""Click commands of the validation package: `hindsight model`, `hindsight validate`,
`hindsight report` (registered lazily in hindsight/cli.py). Library errors (``UserError``) are
turned into one line by the CLI group."""

from __future__ import annotations

import difflib
import json
import math
import re
from pathlib import Path

import click

from hindsight.errors import UsageError
from hindsight.outputs import check_output, same_or_inside, write_failed

_SUFFIX = {"k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2.0 ** 10, "Mi": 2.0 ** 20,
           "Gi": 2.0 ** 30, "m": 1e-3, "u": 1e-6, "µ": 1e-6, "n": 1e-9}


def parse_number(text: str) -> float:
    """A float with an optional SI/binary multiplier, as the papers write them: 1.28G, 8M,
    23720, 0.182u, 64Ki."""
    m = re.fullmatch(r"\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(Ki|Mi|Gi|[kKMGTmuµn])?\s*",
                     text)
    if not m:
        raise ValueError(f"not a number: {text!r}")
    return float(m.group(1)) * (_SUFFIX[m.group(2)] if m.group(2) else 1.0)


def _did_you_mean(word: str, choices: list[str]) -> str:
    near = difflib.get_close_matches(word, choices, n=1)
    return f" (did you mean '{near[0]}'?)" if near else f" (choose from {', '.join(choices)})"


def _fmt(v) -> str:
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.6g}"
    return str(v)


@click.command("model")
@click.argument("name", required=False)
@click.option("--param", "-p", "params", multiple=True, metavar="K=V",
              help="set an input (numbers may carry k M G Ki Mi Gi m u n multipliers)")
@click.option("--list", "list_", is_flag=True, help="list the models and their inputs")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def model_cmd(name, params, list_, as_json):
    """Evaluate a paper's analytic model: NAME is paper000..paper004 or paper000.t_comm etc.

    Inputs default to the paper's published worked example (see docs/models.md), so
    `hindsight model paper000` reproduces eq. 12 and `hindsight model paper003.p_opt` eq. 20."""
    from validation.models import ModelError, check_inputs, parameters, registry

    reg = registry()
    if list_ or not name:
        for key, fn in reg.items():
            doc = (fn.__doc__ or "").strip().splitlines()[0]
            click.echo(f"{key}: {doc}")
            click.echo("    " + " ".join(f"{k}={_fmt(v)}" for k, v in parameters(fn).items()))
        if not list_:
            raise UsageError("name a model (see the list above)")
        return
    if name not in reg:
        raise UsageError(f"unknown model {name!r}{_did_you_mean(name, list(reg))}")
    fn = reg[name]
    known = parameters(fn)
    values = {}
    for item in params:
        if "=" not in item:
            raise UsageError(f"--param {item}: expected NAME=VALUE")
        k, v = (s.strip() for s in item.split("=", 1))
        if k not in known:
            raise UsageError(f"--param {item}: unknown parameter {k!r} for {name}"
                             f"{_did_you_mean(k, list(known))}")
        try:
            values[k] = parse_number(v)
        except ValueError as exc:
            raise UsageError(f"--param {item}: {exc}") from None
    check_inputs(fn, values)
    try:
        out = fn(**values)
    except ModelError as exc:
        raise UsageError(f"{name}: {exc}") from None
    except (ZeroDivisionError, OverflowError, ValueError) as exc:
        # every input is in its declared range, so this is an input combination the model
        # cannot take; say so rather than print the arithmetic error
        raise UsageError(f"{name}: these inputs are outside what the model can evaluate "
                         f"({type(exc).__name__}); see `hindsight model --list`") from None
    inputs = {**known, **values}
    if as_json:
        click.echo(json.dumps({"model": name, "inputs": inputs, "outputs": out}, indent=2,
                              default=str))
        return
    click.echo(f"{name}: " + (fn.__doc__ or "").strip().splitlines()[0])
    click.echo("inputs:  " + " ".join(f"{k}={_fmt(v)}" for k, v in inputs.items()))
    for k, v in out.items():
        click.echo(f"  {k:<22} {_fmt(v)}")


@click.command("validate")
@click.argument("spec", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="output directory (errors.csv, cells/, traces/, profiles/)")
@click.option("--force", is_flag=True, help="re-run cells already done")
@click.option("--no-progress", is_flag=True, help="no progress bar")
@click.option("--quiet", "-q", is_flag=True,
              help="no progress bar and no progress lines; warnings and failures still shown")
@click.option("--json", "as_json", is_flag=True, help="the summary as a JSON document")
def validate_cmd(spec, out, force, no_progress, quiet, as_json):
    """Run the experiment matrix of SPEC.toml (default: specs/default.toml) and compare measured
    runs with replayed and analytic predictions; an interrupted run resumes where it stopped.

    A cell is reused only if it was made with the same spec inputs; results of another spec
    found in OUT are moved to OUT/stale/<n>/ first (one warning line each)."""
    from validation.spec import load_spec

    def log(message: str) -> None:
        if not quiet or message.startswith("warning:"):
            click.echo(message, err=True)

    sp = load_spec(spec)
    _note_bare_set_times(sp)
    # the folder is made and resumed by validate: it may exist, but must take new entries
    check_output(out, "--out", directory=True, exists_ok=True)
    from validation.validate import validate
    log(f"spec {sp.source}: {len(sp.cells)} cells x {sp.repetitions} repetitions -> {out}")
    try:
        summary = validate(sp, out, force=force, progress=not (no_progress or quiet), log=log)
    except OSError as exc:
        raise _write_error(out, exc) from None
    if as_json:
        click.echo(json.dumps({"spec": str(sp.source), "out": str(out), **summary}, indent=2))
    else:
        click.echo(f"{summary['run']} cells run, {summary['skipped']} reused, {summary['failed']} "
                   f"failed; {summary['errors_csv']}")
    if summary["failed"]:
        raise SystemExit(1)


def _note_bare_set_times(sp) -> None:
    """``replay --set``'s note on a time given as a bare number (seconds), for ``set.MODEL``."""
    from replay import models as M
    from replay.cli import _note_bare_times
    from validation.spec import set_assignments

    for model, entries in sp.replay_set.items():
        _note_bare_times(M.get_model(model), set_assignments(entries),
                         flag=f"spec {sp.source}: set.{model}:")


@click.command("report")
@click.argument("vdir", type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="report directory [VDIR/report, rewritten each time]")
@click.option("--force", is_flag=True, help="write into an --out folder that holds files")
def report_cmd(vdir, out, force):
    """Markdown + self-contained HTML report with the papers' error tables and plots."""
    from validation.report import load_results, report

    results = load_results(vdir)            # VDIR's own errors first, before --out is made
    # the default folder is the validation's own report, rewritten each time; a folder named
    # with --out that holds anything is the user's, written into only with --force
    named = out is not None
    out = out or Path(vdir) / "report"
    if named and not force and out.is_dir() and any(out.iterdir()):
        raise UsageError(f"--out {out}: holds files; --force writes the report into it (its "
                         "other files stay)")
    check_output(out, "--out", directory=True, exists_ok=True)
    try:
        paths = report(vdir, out, results)
    except OSError as exc:
        raise _write_error(out, exc) from None
    for p in paths:
        click.echo(str(p))


def _write_error(out: Path, exc: OSError) -> Exception:
    """The one-line error of a write into ``out`` that failed half-way (a full disk); an
    OSError on any other path is not --out's and is returned as it is."""
    name = exc.filename
    if isinstance(name, (str, Path)) and same_or_inside(name, out):
        return write_failed(out, "--out", exc)
    return exc
