"""`hindsight export` and `hindsight import` (click commands registered by hindsight.cli).

User errors (unreadable or malformed input, bad parameters) are one line and exit code 1."""

from __future__ import annotations

import functools
import json
import shutil
from pathlib import Path

import click

from replay.cli import _kv  # NAME=VALUE options, parsed as replay parses them

FORMATS = ("otf2", "perfetto", "goal", "pipit")


def _user_errors(fn):
    """Every importer/exporter error class becomes a one-line click error."""

    @functools.wraps(fn)
    def inner(*a, **kw):
        from hindsight.interop.goal import GoalError
        from hindsight.interop.otf2 import OtfError
        from hindsight.trace import TraceError
        from replay.loggopsim import ScheduleError
        from replay.models import ParamError
        from replay.prepare import ReplayError

        try:
            return fn(*a, **kw)
        except ParamError as exc:
            raise click.UsageError(str(exc)) from None
        except (TraceError, ReplayError, OtfError, GoalError, ScheduleError) as exc:
            raise click.ClickException(str(exc)) from None
        except OSError as exc:
            raise click.ClickException(f"{exc.filename or ''}: {exc.strerror or exc}") from None
    return inner


def _default_out(trace: Path, fmt: str, replayed: bool) -> Path:
    stem = str(trace).rstrip("/") + ("-replayed" if replayed else "")
    return Path({"otf2": f"{stem}-otf2", "perfetto": f"{stem}.perfetto.json",
                 "goal": f"{stem}.goal", "pipit": f"{stem}.pipit.csv"}[fmt])


@click.command("export")
@click.argument("trace", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(FORMATS), required=True,
              help="otf2 (Score-P/Vampir archive), perfetto (Chrome trace JSON), goal "
                   "(LogGOPSim schedule), pipit (CSV of pipit's events frame)")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="output file (OTF2: directory) [next to TRACE]")
@click.option("--model", "model_name", default=None,
              help="export the timeline replayed under this model instead of the measured one")
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE",
              help="model parameter with units (with --model), e.g. L=2.5us semantics=loggopsim")
@click.option("--profile", type=click.Path(path_type=Path),
              help="network profile for --model (from `hindsight calibrate`)")
@click.option("--compute-scale", type=float, default=1.0, show_default=True,
              help="factor on every computation burst (replayed timeline / GOAL calc)")
@click.option("--algo", multiple=True, metavar="COLLECTIVE=ALGORITHM",
              help="collective algorithm of the replay / GOAL schedule, e.g. Allreduce=ring")
@click.option("--with-measured", is_flag=True,
              help="perfetto: put the measured timeline next to the replayed one in one file")
@_user_errors
def export_cmd(trace, fmt, out, model_name, sets, profile, compute_scale, algo, with_measured):
    """Write TRACE (or its replayed timeline) in another tool's format.

    \b
    hindsight export TRACE --format perfetto                      measured timeline
    hindsight export TRACE --format perfetto --model loggps --set L=5us --with-measured
    hindsight export TRACE --format otf2 --out DIR                 for Vampir / otf2-print
    hindsight export TRACE --format goal --out s.goal              for LogGOPSim
    """
    from hindsight import trace as tf

    replayed = model_name is not None or bool(sets) or profile is not None
    if (sets or profile) and model_name is None:
        model_name = "loggps"
    if fmt == "goal" and replayed:
        raise click.UsageError("--format goal writes the schedule, not a timeline: --model, "
                               "--set and --profile do not apply")
    if with_measured and not (fmt == "perfetto" and replayed):
        raise click.UsageError("--with-measured needs --format perfetto and --model")
    algorithms = _kv(algo, "--algo")
    out = out or _default_out(trace, fmt, replayed)

    if fmt == "goal":
        from hindsight.interop.goal import export_goal
        sched = export_goal(trace, out, compute_scale=compute_scale, algorithms=algorithms)
        click.echo(f"wrote {out}: GOAL schedule of {sched.nranks} ranks, {sched.nops} operations "
                   f"({int((sched.kind == 1).sum())} messages)")
        return

    tr = tf.read_trace(trace)
    table, manifest, label = tr.table, tr.manifest, None
    if replayed:
        res = _replay(trace, model_name, sets, profile, compute_scale, algorithms)
        table = res.to_arrow()
        manifest = dict(tr.manifest)
        label = f"{res.model}"
        click.echo(f"replayed under {res.model}: makespan {res.makespan_ns / 1e9:.6f} s "
                   f"(measured {res.measured_makespan_ns / 1e9:.6f} s)")
    if fmt == "perfetto":
        from hindsight.interop.perfetto import to_perfetto, write_perfetto
        timelines = [(label, table)]
        if with_measured:
            timelines = [("measured", tr.table), (label, table)]
        doc = to_perfetto(timelines, {"trace": str(trace), "ranks": tr.nranks,
                                      "timeline": label or "measured"})
        write_perfetto(doc, out)
        nflow = sum(1 for e in doc["traceEvents"] if e["ph"] == "s")
        nx = sum(1 for e in doc["traceEvents"] if e["ph"] == "X")
        click.echo(f"wrote {out}: {tr.nranks} ranks, {nx} slices, {nflow} message arrows "
                   "(open in https://ui.perfetto.dev)")
    elif fmt == "otf2":
        from hindsight.interop.otf2 import export_otf2
        anchor = export_otf2(trace, out, table=table, manifest=manifest)
        click.echo(f"wrote {anchor}: OTF2 archive, {tr.nranks} locations, "
                   f"{table.num_rows} trace rows")
    else:
        from hindsight.interop.pipit import to_pipit
        df = to_pipit(table)
        df = df.assign(Attributes=[json.dumps(a) if a is not None else ""
                                   for a in df["Attributes"]])
        df.to_csv(out, index=False)
        click.echo(f"wrote {out}: {len(df)} events in pipit's columns")


def _replay(trace, model_name, sets, profile, compute_scale, algorithms):
    import replay
    from replay import models as M

    mod = M.get_model(model_name)
    prof = M.load_profile(profile, mod) if profile else None
    prep = replay.prepare(trace, keep_table=True)
    return replay.run(prep, mod, M.parse_assignments(list(sets)), profile=prof,
                      compute_scale=compute_scale, algorithms=algorithms)


@click.command("import")
@click.argument("fmt", metavar="FORMAT", type=click.Choice(("otf2", "goal")))
@click.argument("source", type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="new trace directory")
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE",
              help="goal: LogGOPS parameters of the simulated timeline (hindsight units, e.g. "
                   "L=2.5us o=1.5us g=1us G=6ns O=0ns S=65535B; these are LogGOPSim's defaults)")
@_user_errors
def import_cmd(fmt, source, out, sets):
    """Convert an OTF2 archive or a GOAL schedule into a hindsight trace.

    \b
    hindsight import otf2 scorep-run/traces.otf2 --out traces/app   (or the archive directory)
    hindsight import goal allreduce.goal --out traces/allreduce
    """
    from hindsight import trace as tf
    from hindsight.check import check_trace

    if fmt == "otf2":
        if sets:
            raise click.UsageError("--set applies to GOAL imports only")
        from hindsight.interop.otf2 import import_otf2
        import_otf2(source, out)
    else:
        from hindsight.interop.goal import import_goal
        from replay import models as M
        import_goal(source, out, M.parse_assignments(list(sets)))
    problems = check_trace(out)
    if problems:
        # never leave a trace behind that hindsight itself calls inconsistent
        shutil.rmtree(out, ignore_errors=True)
        raise click.ClickException(f"{source}: the converted trace is inconsistent: "
                                   f"{problems[0]}" + (f" (and {len(problems) - 1} more)"
                                                       if len(problems) > 1 else ""))
    m = tf.read_manifest(out)
    click.echo(f"imported {source} -> {out}: {m['ranks']} ranks, {sum(m.get('events') or [])} "
               f"events, makespan {(m.get('makespan_ns') or 0) / 1e9:.6f} s; trace check: ok")
