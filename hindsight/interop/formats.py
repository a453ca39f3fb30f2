"""The formats ``hindsight export`` writes and ``hindsight import`` reads: one registry each.

An ``Exporter`` writes one format: ``write(job, out)`` writes ``out`` (a file; for OTF2 a
directory) and returns the one line the command prints. ``suffix`` names the default output,
TRACE + suffix (TRACE-replayed + suffix for a replayed timeline). ``timeline`` says whether it
writes a timeline, which may then be a replayed one (``--model``), or the program itself (GOAL's
schedule), which no model changes. ``two_timelines``: it can put the measured timeline beside the
replayed one in one file (``--with-measured``).

An ``Importer`` reads one format: ``read(source, out, params)`` writes the trace directory
``out``; ``params`` (``--set NAME=VALUE`` pairs) only where ``takes_params``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from hindsight.system import write_atomic

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class ExportJob:
    """What an exporter writes: ``table`` is the timeline of ``trace`` (measured, or replayed
    under model ``label``; None for a format that writes the program, which ``compute_scale``
    and ``algorithms`` shape, and for the measured timeline of an exporter that reads the
    trace's files itself, ``Exporter.by_rank``); ``measured`` is the measured timeline to put
    beside a replayed one (``--with-measured``)."""

    trace: Path
    compute_scale: float = 1.0
    algorithms: dict[str, str] = field(default_factory=dict)
    table: pa.Table | None = None
    manifest: dict = field(default_factory=dict)
    nranks: int = 0
    label: str | None = None
    measured: pa.Table | None = None
    #: a partial export (``--allow-partial``): each rank that did not finish cleanly, and its
    #: status (``tf.RankSource.status``); the formats that can say so keep it
    incomplete: dict[int, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Exporter:
    name: str
    help: str
    suffix: str
    timeline: bool
    write: Callable[[ExportJob, Path], str]
    two_timelines: bool = False
    #: reads a trace's files itself, one rank at a time, when ``ExportJob.table`` is None
    by_rank: bool = False


@dataclass(frozen=True)
class Importer:
    name: str
    takes_params: bool
    read: Callable[[Path, Path, list[tuple[str, str]]], Path]
    #: ``(source, trace, problems)``: raises the format's own error when the messages of the
    #: imported trace do not match (``match_messages``' problems, from the check that reads the
    #: written trace back); None: the check's problems are reported as they are
    unmatched: Callable[[Path, Path, list[str]], None] | None = None
    #: ``(params)``: raises ``replay.models.ParamError`` for a ``--set`` the import cannot take,
    #: before any work
    check_params: Callable[[list[tuple[str, str]]], None] | None = None


# Each format's module is imported when it runs: the registry itself (the choices of
# `export --format`, `import FORMAT`) must load neither pyarrow nor numba.


def _otf2(job: ExportJob, out: Path) -> str:
    from hindsight.interop.otf2_export import write_otf2

    anchor, rows = write_otf2(job.trace, out, table=job.table, manifest=job.manifest or None,
                              timeline=f"replayed under {job.label}" if job.label else None,
                              incomplete=job.incomplete)
    return f"wrote {anchor}: OTF2 archive, {job.nranks} locations, {rows} trace rows"


def _perfetto(job: ExportJob, out: Path) -> str:
    from hindsight.interop.perfetto import export_perfetto

    timelines = [(job.label, job.table)]
    if job.measured is not None:
        timelines = [("measured", job.measured), (job.label, job.table)]
    meta = {"trace": str(job.trace), "ranks": job.nranks, "timeline": job.label or "measured",
            **({"incomplete_ranks": {str(r): s for r, s in sorted(job.incomplete.items())}}
               if job.incomplete else {})}
    nx, nflow = write_atomic(out, lambda tmp: export_perfetto(timelines, tmp, meta))
    return (f"wrote {out}: {job.nranks} ranks, {nx} slices, {nflow} message arrows "
            "(open in https://ui.perfetto.dev)")


def _goal(job: ExportJob, out: Path) -> str:
    from hindsight.interop.goal import export_goal
    from replay.loggopsim.simulator import SEND

    from replay.loggopsim.schedule import passive_round_trips
    from replay.prepare import prepare

    sched = write_atomic(out, lambda tmp: export_goal(job.trace, tmp,
                                                      compute_scale=job.compute_scale,
                                                      algorithms=job.algorithms))
    left_out = passive_round_trips(prepare(job.trace))
    return (f"wrote {out}: GOAL schedule of {sched.nranks} ranks, {sched.nops} operations "
            f"({int((sched.kind == SEND).sum())} messages)"
            + (f"; {left_out} one-sided passive round trips (lock epochs, PSCW gets) left out: "
               "GOAL has no passive target" if left_out else ""))


def _pipit(job: ExportJob, out: Path) -> str:
    from hindsight.interop.pipit import export_pipit

    events = write_atomic(out, lambda tmp: export_pipit(job.table, tmp))
    return f"wrote {out}: {events} events in pipit's columns"


def _import_otf2(source: Path, out: Path, params: list[tuple[str, str]]) -> Path:
    from hindsight.interop.otf2_import import import_otf2

    # the messages are matched once, by the check of the written trace (_otf2_unmatched)
    return import_otf2(source, out, match=False)


def _otf2_unmatched(source: Path, trace: Path, problems: list[str]) -> None:
    from hindsight import trace as tf
    from hindsight.interop.otf2_import import unmatched_error

    skipped = (tf.read_manifest(trace).get("import") or {}).get("skipped") or {}
    error = unmatched_error(source, problems, skipped)
    if error is not None:
        raise error


def _goal_params(params: list[tuple[str, str]]) -> None:
    from hindsight.interop.goal import import_values

    import_values(params)


def _import_goal(source: Path, out: Path, params: list[tuple[str, str]]) -> Path:
    from hindsight.interop.goal import import_goal

    return import_goal(source, out, params)


EXPORTERS: dict[str, Exporter] = {e.name: e for e in (
    Exporter("otf2", "Score-P/Vampir archive", "-otf2", True, _otf2, by_rank=True),
    Exporter("perfetto", "Chrome trace JSON", ".perfetto.json", True, _perfetto,
             two_timelines=True),
    Exporter("goal", "LogGOPSim schedule", ".goal", False, _goal),
    Exporter("pipit", "CSV of pipit's events frame", ".pipit.csv", True, _pipit),
)}

IMPORTERS: dict[str, Importer] = {i.name: i for i in (
    Importer("otf2", False, _import_otf2, _otf2_unmatched),
    Importer("goal", True, _import_goal, check_params=_goal_params),
)}
