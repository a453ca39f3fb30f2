"""The `hindsight` command line (click). Each command is a thin layer over a library function;
user errors become one readable line and a non-zero exit, never a traceback."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

# A command builds its objects once and keeps them (modules, numba's typing tables, a trace's
# columns): at the default threshold (700) the cyclic collector walked them all some 250 times in
# a replay, 0.2-0.3 s of `replay --model loggopsim`'s 1.5-2.5 s at 0.5 M operations, and ran
# 40-60 times while a command's modules were imported, before it started; at this one it rarely
# runs (mypy's setting). Set before the imports, so that they run under it too.
gc.set_threshold(200_000, 30, 30)

import hindsight

hindsight.own_settings()     # before numpy loads (hindsight/__init__.py says which and why)

import click

from hindsight import __version__
from hindsight import trace as tf
from hindsight.errors import DataError, UsageError, UserError


#: the exit code of a command stopped by Ctrl-C: 128 + SIGINT, as a shell reports it
INTERRUPTED = 130


class CommandFailed(click.ClickException):
    """One ``Error: <message>`` line on stderr and ``exit_code``; no usage text, no traceback."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _finish_writes() -> None:
    """Wait for the kernel streams a replay writes behind it (``replay.cache.
    save_stream_behind``; only where this command loaded that module), so the process ends with
    no thread left to join. A Ctrl-C meanwhile does not stop the wait, which is short (a few
    hundred MB of writing): interrupted, the command still stops with its one line."""
    from hindsight.system import wait_through_interrupts

    cache = sys.modules.get("replay.cache")
    if cache is not None:
        wait_through_interrupts(cache.flush_streams)


class LazyGroup(click.Group):
    """A group whose heavier commands (replay needs numba and pandas) are imported only when
    used, so `hindsight collect` and `hindsight trace` start quickly. The click-documented way."""

    lazy = {"replay": "replay.cli:replay_cmd", "sweep": "replay.sweep_cli:sweep_cmd",
            "calibrate": "replay.calibration.cli:calibrate_cmd",
            "model": "validation.cli:model_cmd", "validate": "validation.cli:validate_cmd",
            "report": "validation.cli:report_cmd",
            "export": "hindsight.interop.cli:export_cmd",
            "import": "hindsight.interop.cli:import_cmd",
            "predict": "predict.cli:predict_cmd",
            "testbed": "hindsight.testbed:testbed_cmd"}

    #: what `hindsight --help` lists for each lazy command, so that listing them imports none
    #: (tests/test_cli_outputs.py checks each against the command's own docstring)
    summaries = {
        "calibrate": "Measure LogGP/LogGPS, Hockney and M/M/1 parameters of the MPI...",
        "export": "Write TRACE (or its replayed timeline) in another tool's format.",
        "import": "Convert an OTF2 archive or a GOAL schedule into a hindsight...",
        "model": "Evaluate a paper's analytic model.",
        "predict": "Predict run time, speedup, efficiency and the best P for other...",
        "replay": "Replay TRACE under a network model; print predicted vs...",
        "report": "Markdown + self-contained HTML report with the papers' error...",
        "sweep": "Replay TRACE for every configuration of a parameter grid.",
        "testbed": "Emulated cluster nodes: network namespaces, veth links, tbf...",
        "validate": "Run the experiment matrix of SPEC.toml.",
    }

    def invoke(self, ctx):
        """Run the command; the library's user errors (``hindsight.errors``) become one line,
        ``Error: <message>``, with their exit code (2 usage, 1 data). Here, once, for every
        command."""
        try:
            result = super().invoke(ctx)
            _finish_writes()
            return result
        except UserError as exc:
            raise CommandFailed(str(exc), exc.exit_code) from None
        except KeyboardInterrupt:
            # Ctrl-C (or SIGTERM where a command turns it into this): 128 + SIGINT, one line
            _finish_writes()
            raise CommandFailed("interrupted", INTERRUPTED) from None

    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | set(self.lazy))

    def format_commands(self, ctx, formatter):
        """The command list of `hindsight --help`, without importing the lazy commands."""
        rows = []
        for name in self.list_commands(ctx):
            if name in self.lazy:
                rows.append((name, self.summaries[name]))
            else:
                cmd = super().get_command(ctx, name)
                if cmd is not None and not cmd.hidden:
                    rows.append((name, cmd.get_short_help_str(formatter.width - 6 - len(name))))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def get_command(self, ctx, name):
        if name in self.lazy:
            import importlib

            module, attr = self.lazy[name].split(":")
            return getattr(importlib.import_module(module), attr)
        return super().get_command(ctx, name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
# the version as a constant: click would read it from the installed package's metadata
# (importlib.metadata, a third of `hindsight --version`'s start-up); tests/test_cli_startup.py
# checks that it agrees with pyproject.toml
@click.version_option(version=__version__, prog_name="hindsight")
def main() -> None:
    """hindsight: collect MPI traces, replay them under other networks, validate predictions."""
    from hindsight.system import keep_freed_memory, skip_exit_collection
    keep_freed_memory()  # replay allocates and frees large arrays pass after pass
    skip_exit_collection()
    from hindsight.compiling import announce, lean_cache_loads, skip_blas_check
    skip_blas_check()
    lean_cache_loads()
    if sys.stderr.isatty():     # a person waiting; pipes and tests get no extra line
        announce()


# ---------------------------------------------------------------------------------------------
# collect


class _ParadigmOption(click.Option):
    """``--paradigm``, whose help names the paradigms (``apps.skeletons.SKELETONS``) when it is
    read (``--help``, shell completion): the registry is imported then, not by every command's
    start."""

    @property
    def help(self) -> str:
        from apps.skeletons import SKELETONS  # imports no MPI

        return f"execution paradigm: {', '.join(SKELETONS)}"

    @help.setter
    def help(self, value: str | None) -> None:
        pass                                # (click.Option sets it; it is made when read)


@main.command()
@click.option("-n", "nprocs", type=click.IntRange(min=1), required=True, help="number of ranks P")
@click.option("--paradigm", cls=_ParadigmOption, default=None)
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="trace directory [traces/<app>-<paradigm>-n<P>, -untraced appended with "
                   "--untraced]")
@click.option("--program", type=click.Path(dir_okay=False), default=None,
              help="trace this unmodified mpi4py program instead of an application")
@click.option("--transport", type=click.Choice(["shm", "tcp"]), default="shm", show_default=True,
              help="MPICH network: shared memory, or TCP over loopback")
@click.option("--cpu-sampling", type=click.Choice(["regions", "all"]), default="regions",
              show_default=True, help="read the CPU clock on region rows only, or on MPI rows too")
@click.option("--timeout", type=click.FloatRange(min=1), default=None,
              help="stop the run after this many seconds")
@click.option("--testbed", default=None, metavar="NAME",
              help="run the ranks inside the nodes of testbed NAME, MPI over TCP (docs/testbed.md)")
@click.option("--untraced", is_flag=True,
              help="launch the same run without tracing; OUT/manifest.json gets its wall time "
                   "only (the ground truth a traced run is compared with)")
@click.option("--recorder", type=click.Choice(["auto", "python", "pmpi"]), default="auto",
              show_default=True,
              help="who records a Python --program's MPI calls: the PMPI library below mpi4py "
                   "(a few hundred ns a call), or the mpi4py tracer in Python (2-8 µs a call); "
                   "auto: the library, unless the program imports instrument (docs/cli.md)")
@click.option("--force", is_flag=True, help="replace the trace (or untraced run) in --out")
@click.argument("words", nargs=-1, type=click.UNPROCESSED, metavar="[APP] [-- ARGS...]")
def collect(nprocs, paradigm, out, program, transport, cpu_sampling, timeout, testbed, untraced,
            recorder, force, words):
    """Run APP (or --program prog.py) under mpiexec with tracing on (or off: --untraced).

    Arguments after `--` go to the application or program (`python -m apps.APP --help` lists
    an application's). Ctrl-C stops the run (exit 130); the trace stays, marked incomplete.

    \b
    hindsight collect sorting -n 4 --paradigm pipeline -- --arrays 8 --array-size 100000
    hindsight collect -n 3 --program hindsight/examples/ring.py -- --rounds 10
    """
    from hindsight.collect import collect as run_collect

    app, app_args = (None, words) if program else (words[0] if words else None, words[1:])

    flag = "--out " if out is not None else ""
    if out is None:
        name = app or Path(program or "program").stem
        # An untraced run gets a folder of its own: it must not replace the trace it measures.
        out = Path("traces") / (f"{name}{'-' + paradigm if paradigm else ''}-n{nprocs}"
                                + ("-untraced" if untraced else ""))
    if not force and (Path(out) / tf.MANIFEST_NAME).is_file():
        # a run's trace is not replaced by the next run unasked, as no command's output is
        raise UsageError(f"{flag}{out}: holds a run already; --force replaces it")
    if not force and (Path(out) / tf.STAGING_DIR).is_dir():
        raise UsageError(f"{flag}{out}: holds a stopped run's records (`hindsight trace seal "
                         f"{out}` makes them a trace); --force replaces them")
    from hindsight.outputs import check_output
    # (said as every command says it, before anything runs)
    check_output(out, "--out" if flag else "--out (default)", directory=True, exists_ok=True)
    rc, manifest = run_collect(nprocs, out, app=app, paradigm=paradigm, program=program,
                               args=list(app_args), transport=transport,
                               cpu_sampling=cpu_sampling, timeout=timeout, testbed=testbed,
                               untraced=untraced, recorder=recorder)
    what = program or app
    state = "complete" if manifest.get("complete") else "INCOMPLETE"
    if untraced:
        click.echo(f"untraced run {out}: {manifest.get('ranks')} ranks, {state}"
                   + (f", wall time {manifest['makespan_ns'] / 1e9:.4f} s"
                      if manifest.get("makespan_ns") else ""))
    else:
        events = sum(e for e in (manifest.get("events") or []) if e)
        click.echo(f"trace {out}: {manifest.get('ranks')} ranks, {events} events, {state}"
                   + (f", makespan {manifest['makespan_ns'] / 1e9:.4f} s"
                      if manifest.get("makespan_ns") else ""))
    from hindsight.trace.manifest import untraced_note

    note = untraced_note(manifest) if not untraced else None
    if note:
        click.echo(f"note: {note}", err=True)
    concurrent = tf.concurrent_text(manifest)
    disturbed = tf.run_problems(manifest)
    # a failed run gets its one Error line; how disturbed it was does not change what to do
    if (disturbed and not manifest.get("oversubscribed") and rc == 0 and not concurrent
            and manifest.get("complete")):
        click.echo("warning: the run was disturbed (" + "; ".join(disturbed) + "): "
                   "its times include other work's; run it again on a quieter machine",
                   err=True)
    if manifest.get("stopped_in"):
        from instrument.stopped import describe
        for line in describe(manifest["stopped_in"]):
            click.echo(f"  {line}")
    if manifest.get("timed_out_after_s"):
        raise UserError(f"{what}: timed out after {timeout:g} s; {out} is incomplete")
    if rc == INTERRUPTED:
        raise CommandFailed(f"{what}: interrupted; {out} is incomplete", INTERRUPTED)
    if concurrent and rc == 0:
        raise UserError(f"{concurrent}: its recording stopped there, so {out} holds its calls "
                        "up to then only; to trace the program, make its threads call MPI one "
                        "at a time (a lock around the calls, as MPI_THREAD_SERIALIZED asks)")
    if rc != 0 or not manifest.get("complete"):
        bad = [f"{r}:{s}" for r, s in enumerate(manifest.get("rank_status", []))
               if s != "complete"]
        status = manifest.get("rank_status") or []
        if rc == 0 and status and all(st == "missing" for st in status):
            # a binary that exits 0 without MPI_Init (not an MPI program, or another MPI's):
            # no rank staged a record, so the launch's own note is all the staging area holds
            staging = Path(out) / tf.STAGING_DIR
            if staging.is_dir() and {p.name for p in staging.iterdir()} <= {"start.json"}:
                import shutil
                shutil.rmtree(staging, ignore_errors=True)
            raise UserError(f"{what}: no rank initialised MPI, so "
                            + ("no wall time was measured" if untraced else "nothing was traced")
                            + " (is it an MPI program built with this MPICH's mpicc?)")
        # the first rank's own error (an exception, a crash, MPI_Abort) says which rank failed
        errors = tf.rank_errors(manifest)
        raise UserError(f"{what}: run failed (mpiexec exit code {rc}); ranks not complete: "
                        f"{' '.join(bad) or 'none'}"
                        + (f"; rank {errors[0][0]}: {errors[0][1]}".splitlines()[0]
                           if errors else ""))


# ---------------------------------------------------------------------------------------------
# trace info / check


@main.group()
def trace() -> None:
    """Inspect and check trace directories."""


@trace.command()
@click.argument("trace_dir", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
@click.option("--noise", "noise", is_flag=True,
              help="also the time every rank was inside MPI calls at once (reads the whole trace)")
@click.option("--profile", type=click.Path(path_type=Path), default=None,
              help="calibrated network profile: also the in-MPI time its network cannot explain "
                   "(implies --noise)")
@click.option("--model", "model_name", default="loggps", show_default=True,
              help="network model of --profile")
def info(trace_dir, as_json, noise, profile, model_name):
    """Ranks, events per op, bytes, makespan, completeness and run metadata."""
    import json

    from hindsight.info import format_info, format_untraced, trace_info

    if profile is None and click.get_current_context().get_parameter_source(
            "model_name") == click.core.ParameterSource.COMMANDLINE:
        raise UsageError(f"--model {model_name}: the model of --profile's network (it explains "
                         "in-MPI time with that profile); give --profile too")
    manifest = tf.read_manifest(trace_dir)
    if manifest.get("traced") is False:
        # an untraced run's manifest is all there is, and what it measured (the wall time)
        if noise or profile is not None:
            raise tf.UntracedRunError(f"{trace_dir}: an untraced run (wall time only): it has "
                                      "no noise to analyse")
        click.echo(json.dumps(manifest, indent=2, default=str) if as_json
                   else format_untraced(trace_dir, manifest))
        return
    data = trace_info(trace_dir)
    if noise or profile is not None:
        from hindsight.trace import read_manifest, simulated_timeline

        simulated = simulated_timeline(read_manifest(trace_dir))
        if simulated:
            flag = "--noise" if noise else "--profile"
            raise UsageError(f"{flag}: {trace_dir}'s timeline was {simulated}, not measured: "
                             "it has no noise")
        data["noise"] = _noise_info(trace_dir, profile, model_name)
    if as_json:
        click.echo(json.dumps(data, indent=2, default=str))
        return
    click.echo(format_info(data))
    if "noise" in data:
        from hindsight.info import format_noise
        click.echo(format_noise(data["noise"]))


def _noise_info(trace_dir: Path, profile: Path | None, model_name: str) -> dict:
    """``noise_info`` with its errors as one line: the model as usage (exit 2), a missing or
    unusable profile and an unreplayable trace as data (exit 1)."""
    from replay import models as M
    from replay.noise import noise_info
    from replay.prepare import ReplayError

    if profile is not None and not profile.is_file():
        raise DataError(f"--profile {profile}: no such file")
    try:
        return noise_info(trace_dir, profile, model_name)
    except M.ProfileParamError as exc:
        raise DataError(f"--profile: {exc}") from None
    except M.ParamError as exc:
        flag = "--model" if str(exc).startswith("unknown model") else "--profile"
        raise UsageError(f"{flag}: {exc}") from None
    except ReplayError as exc:
        raise UserError(f"{trace_dir}: {exc}" if str(trace_dir) not in str(exc)
                                   else str(exc)) from None


@trace.command()
@click.argument("trace_dir", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True,
              help="print one JSON document: {trace, ok, problems}")
@click.option("--window", type=click.IntRange(min=16), default=None, metavar="ROWS",
              help="stream the trace: read ROWS rows of each rank at a time, in bounded memory "
                   "(default: only when the trace does not fit in memory)")
def check(trace_dir, as_json, window):
    """Verify schema, ordering and message matching; exit 0 only if complete and consistent.

    Problems found in a readable trace are printed on stdout, one a line (exit 1); a trace that
    cannot be read at all is one `Error:` line on stderr (exit 1)."""
    from hindsight.check import check_result, format_check
    from replay.budget import CHECK_BYTES_PER_ROW, small_window_note, streamed_window

    if window is None:
        window, why = streamed_window(tf.read_manifest(trace_dir), CHECK_BYTES_PER_ROW)
        if window is not None:
            click.echo(f"note: {why} in windows of {window} rows per rank", err=True)
    else:
        small = small_window_note(tf.read_manifest(trace_dir), window)
        if small:
            click.echo(f"note: {small}", err=True)
    result = check_result(trace_dir, window)
    click.echo(format_check(result, as_json))
    if not result["ok"]:
        sys.exit(1)


@trace.command()
@click.argument("trace_dir", type=click.Path(path_type=Path))
def seal(trace_dir):
    """Write rank files from the staged records of ranks that did not finish (a job started with
    mpiexec directly and stopped; `hindsight collect` does this itself) and finish the manifest.
    The trace stays marked incomplete."""
    from instrument.seal import finalize_manifest
    from instrument.tracer import TraceWriteError, still_recording

    if not Path(trace_dir).is_dir():
        raise tf.TraceError(tf.not_a_trace_dir(trace_dir))
    if (Path(trace_dir) / tf.MANIFEST_NAME).is_file():
        if tf.read_manifest(trace_dir).get("traced") is False:
            raise tf.UntracedRunError(f"{trace_dir}: an untraced run (wall time only): "
                                      "nothing to seal")
    live = sorted(int(p.name.split("-")[1]) for p in (Path(trace_dir) / tf.STAGING_DIR).glob(
        "rank-*") if still_recording(p))
    if live:
        raise UserError(f"{trace_dir}: rank {live[0]} is still running (its tracer "
                                   "holds its staged records); stop the job first")
    try:
        m = finalize_manifest(trace_dir)
    except TraceWriteError as exc:
        raise UserError(f"{trace_dir}: {exc}") from None
    except (OSError, ValueError) as exc:
        raise UserError(f"{trace_dir}: cannot seal: {exc}") from None
    states = ", ".join(f"rank {r} {s}" for r, s in enumerate(m["rank_status"]) if s != "complete")
    click.echo(f"{trace_dir}: " + ("complete" if m["complete"] else f"sealed, incomplete ({states})"))


# ---------------------------------------------------------------------------------------------
# demo


DEMO_APP = ("feature_extraction", "pipeline", ["--docs", "400", "--docs-per-task", "20"])


@main.command()
@click.option("-n", "nprocs", type=click.IntRange(min=1), default=4, show_default=True)
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              default=Path("traces/demo"), show_default=True)
@click.option("--validation/--no-validation", default=True, show_default=True,
              help="also run the default validation matrix and its report (a few minutes)")
def demo(nprocs, out, validation):
    """The main job on built-in inputs: collect, describe, check and replay a trace.

    HDDI feature extraction on the parallel pipeline (paper 000) over the built-in corpus of
    standard-library docstrings, then replays under the measured transfer times (self-check),
    LogGPS and Hockney defaults, and a what-if slower network (L=50us, G=1ns).
    """
    from hindsight.check import check_trace
    from hindsight.collect import collect as run_collect
    from hindsight.info import format_info, trace_info

    app, paradigm, args = DEMO_APP
    # (the demo replaces its own trace: the command that does the same says --force)
    click.echo(f"== 1. hindsight collect {app} -n {nprocs} --paradigm {paradigm} --out {out} "
               f"--force -- {' '.join(args)}")
    rc, manifest = run_collect(nprocs, out, app=app, paradigm=paradigm, args=args)
    if rc != 0 or not manifest.get("complete"):
        raise UserError(f"demo run failed (exit code {rc})")
    click.echo(f"\n== 2. hindsight trace info {out}")
    click.echo(format_info(trace_info(out)))
    click.echo(f"\n== 3. hindsight trace check {out}")
    problems = check_trace(out)
    for line in problems:
        click.echo(line)
    if problems:
        raise UserError("demo trace failed its check")
    click.echo(f"{out}: ok")
    # (one line per replay, each what `hindsight replay TRACE --model NAME --set ...` predicts)
    click.echo(f"\n== 4. replays of {out}, a line each (hindsight replay {out} --model NAME "
               "[--set ...])")
    import replay

    prep = replay.prepare(out)
    cases = [("measured", {}, "transfer times as recorded (self-check)"),
             ("loggps", {}, "LogGPS defaults"),
             ("hockney", {}, "Hockney defaults"),
             ("loggps", {"L": "50us", "G": "1ns"}, "what-if: L=50us G=1ns (a slow network)")]
    click.echo(f"{'model':<10} {'predicted':>12} {'measured':>12} {'error':>9}  parameters")
    for model, params, what in cases:
        res = replay.run(prep, model, params)
        click.echo(f"{model:<10} {res.makespan_ns / 1e9:>11.4f}s "
                   f"{res.measured_makespan_ns / 1e9:>11.4f}s {res.rel_error_pct:>+8.2f}%  {what}")
    if not validation:
        return
    from validation.cli import report_cmd, validate_cmd

    vdir = out.parent / "validation"
    click.echo(f"\n== 5. hindsight validate specs/default.toml --out {vdir}  (resumes if "
               "interrupted; --force re-runs)")
    click.get_current_context().invoke(validate_cmd, spec=None, out=vdir, force=False,
                                       no_progress=False)
    click.echo(f"\n== 6. hindsight report {vdir}")
    click.get_current_context().invoke(report_cmd, vdir=vdir, out=None)


if __name__ == "__main__":
    main()
