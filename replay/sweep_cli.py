"""`hindsight sweep` (a click command registered by hindsight.cli): the replays of one trace over
a parameter grid (``replay.sweeps.sweep``), written as CSV, JSON or a plot."""

from __future__ import annotations

import json
from pathlib import Path

import click

from hindsight.errors import DataError, UsageError
from hindsight.outputs import check_output, plot_format, write_failed
from hindsight.system import write_atomic
from hindsight.trace import read_manifest
from replay.cli import (FORCE, QUIET, _common, _kv, _load, _note_bare_times, _region_scale,
                        _say, _untraced_note, check_compute_scale, note)


@click.command("sweep")
@_common
@click.option("--vary", multiple=True, required=True, metavar="NAME=LO..HI:log|lin:N",
              help="parameter range (or NAME=V1,V2,...); several --vary make a grid")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="CSV file of the rows (required unless --json)")
@click.option("--plot", type=click.Path(path_type=Path), help="PNG of the predicted makespan")
@click.option("--json", "as_json", is_flag=True, help="print the rows as one JSON document")
@click.option("--workers", type=int, default=0,
              help="threads (default: all cores); with --executor mpi outside mpi4py.futures, "
                   "the number of MPI processes to spawn")
@click.option("--executor", type=click.Choice(["local", "mpi"]), default="local",
              show_default=True,
              help="local threads, or MPI processes via mpi4py.futures (run under `mpiexec -n K "
                   "python -m mpi4py.futures -m hindsight.cli sweep ...`, docs/replay.md)")
@FORCE
@QUIET
def sweep_cmd(trace, model_name, sets, profile, compute_scale, region_scale, cpu_time, algo,
              allow_partial, vary, out, plot, as_json, workers, executor, force, quiet):
    """Replay TRACE for every configuration of a parameter grid; one CSV row each.

    \b
    hindsight sweep TRACE --vary L=1us..1ms:log:7 --out sweep.csv --plot sweep.png
    hindsight sweep TRACE --model hockney --vary g=0.05ns,0.1ns,1ns --json
    """
    if out is None and not as_json:
        raise UsageError("--out FILE: where to write the CSV (or --json to print the rows)")
    check_compute_scale(compute_scale)
    algorithms = _kv(algo, "--algo")
    if out is not None:
        check_output(out, "--out", force=force)
    if plot is not None:
        if out is not None and Path(plot).resolve() == Path(out).resolve():
            raise UsageError(f"--plot {plot}: the same file as --out")
        check_output(plot, "--plot", force=force)
        plot_format(plot)
    from replay.budget import SWEEP_BYTES_PER_ROW, too_large
    reason = too_large(read_manifest(trace), SWEEP_BYTES_PER_ROW, "a sweep")
    if reason:
        # (said at once, not after minutes of swapping and the out-of-memory killer's SIGKILL)
        raise DataError(f"{trace}: {reason}: sweeps replay in memory; `hindsight replay` "
                        "streams a trace this large, one configuration at a time")
    from replay import models as M
    from replay.sweeps import parse_vary, sweep
    try:
        mod = M.get_model(model_name)
    except M.ParamError as exc:
        raise UsageError(f"--model: {exc}") from None
    try:
        # before the trace is read: a misspelled --vary is one line, without the trace's notes
        axes = [parse_vary(v, mod) for v in vary]
    except M.ParamError as exc:
        raise UsageError(f"--vary: {exc}") from None
    _set_and_varied(mod, sets, [a[0] for a in axes])
    mod, values, prof, assignments, prep, rules = _load(trace, model_name, sets, profile,
                                                        allow_partial, quiet)
    _untraced_note(prep.manifest)
    from tqdm import tqdm
    _note_bare_times(mod, [pair for v in vary for pair in _vary_texts(v)], "--vary")
    scales = _region_scale(region_scale, prep.region_names)
    total = 1
    for a in axes:
        total *= len(a[1])
    try:
        with tqdm(total=total, desc="sweep", unit="cfg", disable=True if quiet else None) as bar:
            df = sweep(prep, mod.NAME, assignments, vary, profile=prof,
                       compute_scale=compute_scale, region_scale=scales,
                       cpu_time=cpu_time, algorithms=algorithms, flags=rules.flags_for(mod),
                       tracer_cost=rules.tracer_ns(mod), resume=rules.resume_for(mod),
                       workers=workers or None, progress=bar.update, executor=executor)
    except M.ParamError as exc:
        raise UsageError(f"--vary: {exc}") from None
    for text in df.attrs.get("notes", []):
        note(text)
    say = _say(quiet)
    if out is not None:
        try:
            write_atomic(out, lambda tmp: df.to_csv(tmp, index=False), keep_suffix=True)
        except OSError as exc:
            raise write_failed(out, "--out", exc) from None
        click.echo(str(out) if quiet else f"{len(df)} configurations written to {out}")
    if plot:
        try:
            _plot(df, [a[0] for a in axes], plot, [v for v in vary], mod, trace)
        except OSError as exc:
            raise write_failed(plot, "--plot", exc) from None
        click.echo(str(plot) if quiet else f"plot written to {plot}")
    if as_json:
        click.echo(json.dumps(df.to_dict("records"), indent=2, default=float))
    elif out is None:
        say(df.to_string(index=False))


def _set_and_varied(mod, sets, varied: list[str]) -> None:
    """A parameter both ``--set`` and ``--vary`` give is a usage error: the sweep would take
    the varied values and drop the set one without a word."""
    from replay import models as M

    try:
        given = {t: name for name, _ in M.parse_assignments(list(sets))
                 for t in M._expand(mod, name)}
    except M.ParamError:
        return                          # (--set's own error comes when it is parsed)
    for name in varied:
        both = [given[t] for t in M._expand(mod, name) if t in given]
        if both:
            raise UsageError(f"--vary {name}: --set {both[0]} gives it too; keep one")


#: the unit of a swept parameter in the CSV and on the plot's axis (engine._display: SI units)
_AXIS_UNITS = {"time": "s", "time_per_byte": "s/byte", "bytes": "bytes", "bandwidth": "bytes/s"}


def _axis_label(mod, name: str) -> str:
    """``name (unit)`` for a swept parameter (an alias is labelled by the first it sets)."""
    from replay import models as M
    try:
        kind = mod.PARAMS[M._expand(mod, name)[0]].kind
    except (KeyError, IndexError, M.ParamError):
        return name
    unit = _AXIS_UNITS.get(kind)
    return f"{name} ({unit})" if unit else name


def _vary_texts(spec: str) -> list[tuple[str, str]]:
    """(name, value as written) of each value of a ``--vary`` (``parse_vary`` checked it): a
    list's values, or a range's two ends."""
    name, rhs = spec.split("=", 1)
    values = rhs.split(":")[0].split("..") if ".." in rhs else rhs.split(",")
    return [(name.strip(), v.strip()) for v in values]


def plot_lines(df, names: list[str]) -> list[tuple[str, list, list]]:
    """The plot's lines: predicted makespan against the first varied parameter, one line per
    combination of the others' values (labelled ``G=1e-10, o=0``; "predicted" when only one
    parameter varies), each in the first parameter's order."""
    others = names[1:]
    if not others:
        return [("predicted", df[names[0]].tolist(), df["predicted_makespan_s"].tolist())]
    out = []
    for key, g in df.groupby(others, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        g = g.sort_values(names[0], kind="stable")
        label = ", ".join(f"{n}={v:g}" if isinstance(v, float) else f"{n}={v}"
                          for n, v in zip(others, key))
        out.append((label, g[names[0]].tolist(), g["predicted_makespan_s"].tolist()))
    return out


def _plot(df, names, path: Path, specs, mod, trace: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    logx = ":log:" in specs[0]
    for label, x, y in plot_lines(df, names):
        ax.plot(x, y, marker="o" if len(names) == 1 else ".", label=label)
    ax.axhline(df["measured_makespan_s"].iloc[0], color="k", ls="--", label="measured")
    ax.set_xlabel(_axis_label(mod, names[0]))
    if logx:
        ax.set_xscale("log")
    ax.set_ylabel("predicted makespan (s)")
    ax.set_title(f"hindsight sweep: {Path(str(trace).rstrip('/')).name} under {mod.NAME}, "
                 f"varying {', '.join(names)}", fontsize="medium")
    ax.legend(fontsize="small")
    fig.tight_layout()
    write_atomic(path, lambda tmp: fig.savefig(tmp, dpi=100, format=plot_format(path)))
    plt.close(fig)
