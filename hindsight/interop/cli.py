"""`hindsight export` and `hindsight import` (click commands registered by hindsight.cli).

The formats are the registries of ``hindsight.interop.formats``. User errors (unreadable or
malformed input, bad parameters) are one line (``hindsight.cli`` prints the library's errors)."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import click

from hindsight.errors import DataError, UsageError, UserError

from hindsight.interop.formats import EXPORTERS, IMPORTERS, ExportJob
from hindsight.outputs import (check_output, check_trace_folder, replace_dir, same_or_inside,
                               write_failed)
# NAME=VALUE options, --compute-scale and the shared flags, parsed as replay parses them
from hindsight.trace.manifest import untraced_note
from replay.budget import export_too_large
from replay.cli import FORCE, QUIET, _kv, check_compute_scale, note


def _file_errors(fn):
    """An OSError (an unwritable --out, a full disk) becomes one line naming the file."""

    @functools.wraps(fn)
    def inner(*a, **kw):
        try:
            return fn(*a, **kw)
        except OSError as exc:
            raise UserError(f"{exc.filename or ''}: {exc.strerror or exc}") from None
    return inner


@click.command("export")
@click.argument("trace", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(list(EXPORTERS)), required=True,
              help=", ".join(f"{e.name} ({e.help})" for e in EXPORTERS.values()))
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="output file (OTF2: directory) [next to TRACE]")
@click.option("--model", "model_name", default=None,
              help="export the timeline replayed under this model instead of the measured one")
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE",
              help="model parameter with units (with --model), e.g. L=2.5us")
@click.option("--profile", type=click.Path(path_type=Path),
              help="network profile for --model (from `hindsight calibrate`)")
@click.option("--compute-scale", type=float, default=1.0, show_default=True,
              help="factor on every computation burst (replayed timeline / GOAL calc)")
@click.option("--algo", multiple=True, metavar="COLLECTIVE=ALGORITHM",
              help="collective algorithm of the replay / GOAL schedule, e.g. Allreduce=ring")
@click.option("--with-measured", is_flag=True,
              help="perfetto: put the measured timeline next to the replayed one in one file")
@click.option("--allow-partial", is_flag=True,
              help="export the measured timeline of an incomplete trace (what its files hold)")
@FORCE
@QUIET
@_file_errors
def export_cmd(trace, fmt, out, model_name, sets, profile, compute_scale, algo, with_measured,
               allow_partial, force, quiet):
    """Write TRACE (or its replayed timeline) in another tool's format.

    \b
    hindsight export TRACE --format perfetto                      measured timeline
    hindsight export TRACE --format perfetto --model loggps --set L=5us --with-measured
    hindsight export TRACE --format otf2 --out DIR                 for Vampir / otf2-print
    hindsight export TRACE --format goal --out s.goal              for LogGOPSim
    """
    from hindsight import trace as tf

    exporter = EXPORTERS[fmt]
    replayed = model_name is not None or bool(sets) or profile is not None
    if (sets or profile) and model_name is None:
        model_name = "loggps"
    if replayed and not exporter.timeline:
        raise UsageError(f"--format {fmt} writes the schedule, not a timeline: --model, "
                         "--set and --profile do not apply")
    if with_measured and not (exporter.two_timelines and replayed):
        both = "/".join(e.name for e in EXPORTERS.values() if e.two_timelines)
        raise UsageError(f"--with-measured needs --format {both} and --model")
    check_compute_scale(compute_scale)
    algorithms = _kv(algo, "--algo")
    out = out or Path(str(trace).rstrip("/") + ("-replayed" if replayed else "")
                      + exporter.suffix)
    check_output(out, "--out", force=force, directory=fmt == "otf2")
    if same_or_inside(trace, out):
        raise UsageError(f"--out {out}: is the trace being exported or holds it; choose another "
                         "--out")
    if fmt == "otf2" and force:
        _check_otf2_archive(out)
    manifest = tf.read_manifest(trace)  # missing or foreign: one line before the readers load
    partial, unfinished = _incomplete(trace, fmt, replayed, allow_partial)
    too_large = export_too_large(manifest, fmt, replayed)
    if too_large:
        # (said at once, not after minutes of swapping and the out-of-memory killer's SIGKILL)
        raise DataError(f"{trace}: {too_large}: {_SMALLER[replayed, fmt == 'goal']}")
    if not exporter.timeline:
        job = ExportJob(trace, compute_scale=compute_scale, algorithms=algorithms)
    elif not replayed and exporter.by_rank:
        job = ExportJob(trace, manifest=manifest, nranks=int(manifest["ranks"]))
    elif not replayed:
        tr = tf.read_trace(trace)
        job = ExportJob(trace, table=tr.table, manifest=tr.manifest, nranks=tr.nranks)
    else:
        tr = tf.read_trace(trace)
        res = _replay(trace, model_name, sets, profile, compute_scale, algorithms)
        if not quiet:
            click.echo(f"replayed under {res.model}: makespan {res.makespan_ns / 1e9:.6f} s "
                       f"(measured {res.measured_makespan_ns / 1e9:.6f} s)")
        job = ExportJob(trace, table=res.to_arrow(), manifest=dict(tr.manifest),
                        nranks=tr.nranks, label=res.model,
                        measured=tr.table if with_measured else None)
    job = dataclasses.replace(job, incomplete=unfinished)
    try:
        if fmt == "otf2":
            _remove_otf2_archive(out)          # --force: the archive checked above
        line = exporter.write(job, out)
    except OSError as exc:
        raise write_failed(out, "--out", exc) from None
    click.echo(str(out) if quiet else line)
    if partial:
        note(f"{trace}: incomplete trace ({partial}): the export holds what its files hold")
    text = untraced_note(manifest)
    if text:
        note(text)


def _incomplete(trace: Path, fmt: str, replayed: bool, allow_partial: bool
                ) -> tuple[str | None, dict[int, str]]:
    """Why ``trace`` is incomplete (None when it is complete), and each rank that did not
    finish cleanly with its status. An incomplete trace is refused unless ``allow_partial``,
    which a measured timeline's export takes: what the files hold is a timeline, but not a
    schedule to simulate nor a run to replay whole."""
    from hindsight import trace as tf

    _, sources = tf.open_trace(trace, allow_partial=True)
    if all(s.complete for s in sources):
        return None, {}
    why = tf.incomplete_text(sources)
    if replayed or fmt == "goal":
        what = "a replayed timeline" if replayed else "--format goal"
        raise DataError(f"{trace}: incomplete trace ({why}); {what} needs a complete trace "
                        "(`hindsight replay --allow-partial` replays up to the last consistent "
                        "cut)")
    if not allow_partial:
        raise DataError(f"{trace}: incomplete trace ({why}); use --allow-partial to export what "
                        "was recorded")
    return why, {s.rank: s.status for s in sources if not s.complete}


# What to do instead, by (replayed, GOAL), when an export would not fit in memory.
_SMALLER = {
    (False, False): "--format otf2 reads one rank at a time, in bounded memory",
    (False, True): "the GOAL export prepares the whole trace; no format of a schedule streams",
    (True, False): "every format holds a replayed timeline whole; `hindsight replay` without "
                   "--out streams a trace this large",
}


def _otf2_parts(out: Path) -> list[Path]:
    """The files of the OTF2 archive an earlier export left in ``out``: its anchor, its global
    definitions and the per-location ``.evt``/``.def`` files of its event folder."""
    from hindsight.interop.otf2 import ARCHIVE_NAME

    parts = [p for p in (out / f"{ARCHIVE_NAME}.otf2", out / f"{ARCHIVE_NAME}.def") if p.is_file()]
    folder = out / ARCHIVE_NAME
    if folder.is_dir():
        parts += sorted(folder.iterdir())
    return parts


def _check_otf2_archive(out: Path) -> None:
    """``--force`` replaces an OTF2 archive only: refused where ``out``'s event folder holds
    anything an export does not write (it may be another program's ``traces/`` folder)."""
    from hindsight.interop.otf2 import ARCHIVE_NAME

    folder = out / ARCHIVE_NAME
    if not folder.exists():
        return
    if not (out / f"{ARCHIVE_NAME}.otf2").is_file() or not folder.is_dir() or any(
            not p.is_file() or p.suffix not in (".evt", ".def") for p in folder.iterdir()):
        raise UsageError(f"--out {out}: {folder} is not the event folder of an OTF2 archive "
                         "hindsight wrote; --force replaces such an archive only: choose "
                         "another --out")


def _remove_otf2_archive(out: Path) -> None:
    """Remove the archive ``_check_otf2_archive`` accepted, so that ``--force`` replaces it;
    other files in ``out`` stay."""
    from hindsight.interop.otf2 import ARCHIVE_NAME

    for part in _otf2_parts(out):
        part.unlink()
    if (out / ARCHIVE_NAME).is_dir():
        (out / ARCHIVE_NAME).rmdir()


def _replay(trace, model_name, sets, profile, compute_scale, algorithms):
    """The replayed timeline `export --model/--profile` writes: as `hindsight replay` computes
    it, with the profile's rules (shared_flag_meeting, binding_in_bursts,
    python_tracer_in_bursts)."""
    import replay
    from hindsight.trace import read_manifest
    from replay.cli import model_from_flags
    from replay.recorder_rules import trace_rules

    rules = trace_rules(profile, read_manifest(trace))
    mod, _, prof, assignments = model_from_flags(model_name, sets, profile, rules.below)
    prep = replay.prepare(trace, keep_table=True)
    return replay.run(prep, mod, assignments, profile=prof, compute_scale=compute_scale,
                      algorithms=algorithms, flags=rules.flags_for(mod),
                      tracer_cost=rules.tracer_ns(mod), resume=rules.resume_for(mod))


@click.command("import")
@click.argument("fmt", metavar="FORMAT", type=click.Choice(list(IMPORTERS)))
@click.argument("source", type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="new trace directory")
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE",
              help="goal: LogGOPS parameters of the simulated timeline (hindsight units, e.g. "
                   "L=2.5us o=1.5us g=1us G=6ns O=0ns S=65535B; these are LogGOPSim's defaults)")
@click.option("--force", is_flag=True, help="replace an existing trace directory at --out")
@_file_errors
def import_cmd(fmt, source, out, sets, force):
    """Convert an OTF2 archive or a GOAL schedule into a hindsight trace.

    \b
    hindsight import otf2 scorep-run/traces.otf2 --out traces/app   (or the archive directory)
    hindsight import goal allreduce.goal --out traces/allreduce
    """
    from hindsight import trace as tf
    from replay import models as M

    importer = IMPORTERS[fmt]
    if sets and not importer.takes_params:
        which = ", ".join(i.name.upper() for i in IMPORTERS.values() if i.takes_params)
        raise UsageError(f"--set applies to {which} imports only")
    try:
        assignments = M.parse_assignments(list(sets))
        if importer.check_params is not None:
            importer.check_params(assignments)
    except M.ParamError as exc:
        raise UsageError(f"--set: {exc}") from None
    if same_or_inside(source, out):
        raise UsageError(f"--out {out}: holds the source {source}; choose another --out")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        check_output(out, "--out", directory=True, force=force)
        check_trace_folder(out, "--out")
    check_output(out, "--out", directory=True, exists_ok=True)

    def convert(tmp: Path) -> None:
        """Import into ``tmp``; an older trace at ``out`` is replaced only by a checked one."""
        problems = import_checked(fmt, source, tmp, assignments)
        made = tf.read_manifest(tmp)
        if made.get("complete") is False:
            # a partial export's source (its archive says which ranks did not finish): the
            # trace is as incomplete as the source, and its check finds what a check of the
            # source finds (messages to the lost ranks, their collectives): the line below
            # says so, rather than leaving nothing
            return
        if made.get("untraced_calls"):
            # calls the source's recorder counted but did not record: the source's own gap
            # (said below), not the conversion's
            from hindsight.check import untraced_problem
            problems = [p for p in problems if p != untraced_problem(tmp, made)]
        if problems:
            # never leave a trace behind that hindsight itself calls inconsistent
            raise UserError(f"{source}: the converted trace is inconsistent: {problems[0]}"
                            + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
    replace_dir(out, convert)
    from hindsight.info import makespan_text
    from hindsight.trace.manifest import untraced_text
    from hindsight.interop.skipped import skipped_line
    from replay.units import fmt_time

    m = tf.read_manifest(out)
    # an imported schedule's timeline was simulated (manifest origin.timeline), not measured
    how = (m.get("origin") or {}).get("timeline")
    span = (f"makespan ({how}) {fmt_time(m.get('makespan_ns') or 0)}" if how
            else makespan_text(m.get("makespan_ns") or 0))
    untraced = m.get("untraced_calls")
    if m.get("complete") is False:
        _, sources = tf.open_trace(out, allow_partial=True)
        checked = (f"an incomplete trace, as its source was ({tf.incomplete_text(sources)}; "
                   "`hindsight trace check` lists its problems): `replay --allow-partial` "
                   "replays it up to its last consistent cut")
    else:
        checked = "trace check: ok" + (f" but for the traffic of {untraced_text(untraced)} the "
                                       "source did not trace" if untraced else "")
    click.echo(f"imported {source} -> {out}: {m['ranks']} ranks, {sum(m.get('events') or [])} "
               f"events, {span}; {checked}")
    line = skipped_line((m.get("import") or {}).get("skipped") or {})
    if line:
        click.echo(line)


def import_checked(fmt: str, source: Path, out: Path,
                   params: list[tuple[str, str]]) -> list[str]:
    """What ``hindsight import FMT`` does: convert ``source`` into the trace directory ``out``
    (``IMPORTERS[fmt]``), then check the written trace, caching its prepared form for the first
    replay (``hindsight.check.check_and_prepare``). Returns the check's problems; raises the
    format's own error where the importer words unmatched messages (``Importer.unmatched``)."""
    from hindsight import trace as tf
    from hindsight.check import check_and_prepare
    from hindsight.system import release_freed_memory

    importer = IMPORTERS[fmt]
    importer.read(source, out, params)
    # the check reads the trace back through pyarrow's allocator: the import's freed arrays,
    # kept by glibc for reuse, would otherwise add to its peak
    release_freed_memory()
    # (a partial source's trace: its messages to the ranks it lost match nothing)
    unmatched = importer.unmatched if tf.read_manifest(out).get("complete", True) else None
    return check_and_prepare(out, None if unmatched is None else
                             lambda found: unmatched(source, out, found))
