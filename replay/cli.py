"""`hindsight replay`, a click command registered by hindsight.cli (`hindsight sweep`:
replay.sweep_cli)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import click

from hindsight.errors import DataError, UsageError, UserError
from hindsight.outputs import (check_output, check_trace_folder, replace_dir, same_or_inside,
                               write_failed)
from hindsight.trace import read_manifest, run_problems, simulated_timeline
from replay.recorder_rules import trace_rules
from replay.replay_lines import (breakdown, injected_line, measured_lines, messages_text,
                                  rule_lines)
from replay.run_time import run_time
from replay.units import fmt_params

#: the names ``replay.models.names()`` gives, in its order, for ``--model``'s help: the registry
#: imports every model, and numpy and numba with them (tests/test_cli_startup.py compares both)
MODEL_NAMES = ("loggp", "loggps", "hockney", "mm1", "measured", "loggopsim")


def _kv(items: tuple[str, ...], flag: str) -> dict[str, str]:
    out = {}
    for it in items:
        if "=" not in it or not it.split("=", 1)[0].strip():
            raise UsageError(f"{flag} {it}: expected NAME=VALUE")
        k, v = it.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _region_scale(items: tuple[str, ...], regions: list[str] | None = None) -> dict[str, float]:
    """``--region-scale REGION=X`` pairs; with ``regions`` (the trace's region names) a region
    the trace does not have is refused too."""
    out = {}
    for k, v in _kv(items, "--region-scale").items():
        try:
            out[k] = float(v)
        except ValueError:
            raise UsageError(f"--region-scale {k}={v}: not a number") from None
        if not (math.isfinite(out[k]) and out[k] >= 0):
            raise UsageError(f"--region-scale {k}={v}: must be a finite number >= 0")
        if regions is not None and k not in regions:
            raise UsageError(f"--region-scale {k}: the trace has no region named '{k}' (it has "
                             f"{', '.join(regions) or 'none'})")
    return out


def check_compute_scale(value: float) -> float:
    """``--compute-scale``: a finite factor >= 0 (checked before any work)."""
    if not (math.isfinite(value) and value >= 0):
        raise UsageError(f"--compute-scale {value:g}: must be a finite number >= 0")
    return value


def _check_trace_out(out: Path, force: bool, trace: Path) -> None:
    """``--out DIR`` of a replayed timeline, before the replay: writable, not an existing output
    unless ``--force``; and ``--force`` replaces a trace directory only, never another folder,
    never the trace being replayed or a folder holding it."""
    if same_or_inside(trace, out):
        raise UsageError(f"--out {out}: is the trace being replayed or holds it; choose another "
                         "--out")
    check_output(out, "--out", force=force, directory=True)
    check_trace_folder(out, "--out")


def _write_trace_out(res, out: Path) -> None:
    """Write the replayed timeline to ``out`` (an older trace there replaced, once the new one
    is complete: ``--force``)."""
    try:
        replace_dir(out, res.write)
    except OSError as exc:
        raise write_failed(out, "--out", exc) from None


def _say(quiet: bool):
    """``click.echo`` unless ``--quiet`` (which keeps errors and the paths of written files)."""
    return (lambda *a, **kw: None) if quiet else click.echo


def note(text: str, kind: str = "note") -> None:
    """A ``note: TEXT`` line on stderr (what the result leaves out or assumes; ``kind``
    ``warning``: what makes it less trustworthy), unless the running command was given
    ``--quiet``, which prints nothing but errors and the paths of the files written."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.params.get("quiet"):
        return
    click.echo(f"{kind}: {text}", err=True)


FORCE = click.option("--force", is_flag=True, help="replace an existing output")
QUIET = click.option("--quiet", "-q", is_flag=True,
                     help="print nothing but errors and the paths of the files written")


def _common(f):
    opts = [
        click.argument("trace", type=click.Path(path_type=Path)),
        click.option("--model", "model_name", default="loggps", show_default=True,
                     help=f"network model: {', '.join(MODEL_NAMES)}"),
        click.option("--set", "sets", multiple=True, metavar="NAME=VALUE",
                     help="model parameter with units, e.g. L=2.5us G=0.08ns C=10Gbit/s"),
        click.option("--profile", type=click.Path(path_type=Path),
                     help="network profile (TOML) written by `hindsight calibrate`; the "
                          "model's parameters are taken from it (older JSON profiles too)"),
        click.option("--compute-scale", type=float, default=1.0, show_default=True,
                     help="factor on every computation burst"),
        click.option("--region-scale", multiple=True, metavar="REGION=X",
                     help="factor on the bursts of one region (replaces --compute-scale there)"),
        click.option("--cpu-time", is_flag=True,
                     help="bursts from recorded CPU time (predict a dedicated-core run)"),
        click.option("--algo", multiple=True, metavar="COLLECTIVE=ALGORITHM",
                     help="collective algorithm, e.g. Allreduce=ring"),
        click.option("--allow-partial", is_flag=True, help="replay an incomplete trace"),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def model_from_flags(model_name: str, sets, profile, below_binding: bool | str = False):
    """(model, its resolved values, the profile's parameters, the --set assignments) from the
    command line; a bad value is one usage line naming --model, --profile or --set. For a trace
    recorded ``below_binding``, the profile's per-call costs are the native ones or lose
    mpi4py's own (replay.binding; as ``replay.models.load_profile`` takes it)."""
    from replay import models as M
    try:
        mod = M.get_model(model_name)
    except M.ParamError as exc:
        raise UsageError(f"--model: {exc}") from None
    assignments: list = []
    try:
        assignments = M.parse_assignments(list(sets))
        prof = M.load_profile(profile, mod, below_binding, assignments) if profile else None
        values = M.resolve(mod, assignments, prof)
    except M.ProfileParamError as exc:
        raise DataError(f"--profile: {exc}") from None       # the file's content: exit 1
    except M.ParamError as exc:
        raise UsageError(f"{_conflict(mod, assignments, profile)}: {exc}") from None
    return mod, values, prof, assignments


def _conflict(mod, assignments, profile) -> str:
    """Who a bad value comes from: --set alone, or --set against the profile's values (a rule
    between parameters that --set's values keep on their own, such as L >= -o_send)."""
    from replay import models as M
    if profile and assignments:
        try:
            M.resolve(mod, assignments, None)
        except M.ParamError:
            return "--set"
        return f"--set with --profile {profile}"
    return "--set"


_UNIT_OF = {"time": "s", "time_per_byte": "s/B"}


def _note_bare_times(mod, assignments, flag: str = "--set") -> None:
    """A bare number for a time is seconds (SI base units, as documented): ``--set L=5`` is
    5 s. Say so, since a user who meant microseconds gets a prediction a million times off."""
    from replay import models as M

    for name, value in assignments:
        try:
            param = mod.PARAMS[M._expand(mod, name)[0]]     # (an alias, o: o_send and o_recv)
        except (M.ParamError, KeyError, IndexError):
            continue
        if param.kind not in _UNIT_OF:
            continue
        try:
            x = float(str(value))
        except ValueError:
            continue                     # it has a unit
        if x != 0:
            # a per-byte time is a fraction of a ns on any network: the example says ns
            eg = "ns/B for nanoseconds per byte" if param.kind == "time_per_byte" \
                else "us for microseconds"
            note(f"{flag} {name}={value}: a number without a unit is in "
                 f"{_UNIT_OF[param.kind]} ({x:g} {_UNIT_OF[param.kind]}); write e.g. "
                 f"{value}{eg}")


def _load(trace: Path, model_name: str, sets, profile, allow_partial: bool, quiet: bool = False):
    mod, values, prof, assignments = model_from_flags(model_name, sets, profile)
    _note_bare_times(mod, assignments)
    # the manifest alone tells a missing or foreign trace, before the readers (pandas) load
    rules = trace_rules(profile, read_manifest(trace))
    if rules.below:
        mod, values, prof, assignments = model_from_flags(model_name, sets, profile,
                                                          rules.below)
    from replay.prepare import ReplayError, prepare
    try:
        if allow_partial:
            # An incomplete trace is replayed up to its last consistent cut (replay/partial.py),
            # and the user is told so: it is not a replay of the whole run.
            from replay.partial import prepare_partial
            prep, cut = prepare_partial(trace)
            if cut is not None and not quiet:
                click.echo(cut.describe(trace), err=True)
        else:
            prep = prepare(trace, allow_partial=False)
    except ReplayError as exc:
        raise UserError(f"{trace}: {exc}" if str(trace) not in str(exc)
                                   else str(exc)) from None
    for text in prep.notes:
        note(text)
    if profile and not quiet:
        _note_mismatch(profile, prep.manifest)
        _warn_noisy(profile)
    return mod, values, prof, assignments, prep, rules


def _note_mismatch(profile: Path, manifest: dict) -> None:
    """One line on stderr when the profile was measured on another network than the trace ran on
    (allowed: that is what-if replay)."""
    from replay import models as M
    origin = M.profile_measured_on(profile)
    diffs = []
    for mine, theirs, what in (("transport", "transport_name", "transport"),
                               ("mpi_library", "mpi_library", "MPI library")):
        a, b = origin.get(mine), manifest.get(theirs)
        if a and b and a != b:
            diffs.append(f"{what} {a!r} (profile) vs {b!r} (trace)")
    if diffs:
        note(f"profile {profile} was measured on another network than the trace: "
             + "; ".join(diffs))


def _warn_noisy(profile: Path) -> None:
    """One line on stderr when the profile's fit misses its own measurements or it was taken
    under load (replay.calibration.quality): the prediction inherits that noise."""
    import tomllib

    from replay.calibration.quality import profile_problems
    try:
        data = tomllib.loads(Path(profile).read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return                  # JSON profiles carry no record to judge
    problems = profile_problems(data)
    if problems:
        click.echo(f"warning: profile {profile} is noisy: " + "; ".join(problems), err=True)


@click.command("replay")
@_common
@click.option("--json", "as_json", is_flag=True, help="print one JSON document")
@click.option("--out", type=click.Path(path_type=Path),
              help="write the replayed timeline as a trace directory")
@click.option("--noise", "noise_mode", type=click.Choice(["none", "trace", "sample"]),
              default="none", show_default=True,
              help="put measured noise back: 'trace' adds each call's unexplained time to that "
                   "call; 'sample' draws it from the trace's stalls, --noise-runs times")
@click.option("--noise-runs", type=click.IntRange(min=1), default=None,
              help="replays with sampled noise (with --noise sample; default 20)")
@click.option("--noise-seed", type=int, default=None,
              help="random seed of --noise sample (default 0)")
@click.option("--trace-profile", type=click.Path(path_type=Path),
              help="profile of the network the trace was taken on: with --profile of another "
                   "transport, each burst after a call trades that transport's measured cost "
                   "for --profile's (rule transport_burst_cost)")
@click.option("--window", type=click.IntRange(min=16), default=None, metavar="ROWS",
              help="stream the trace: read ROWS rows of each rank at a time and replay it "
                   "segment by segment in bounded memory (default: only when the trace does not "
                   "fit in memory)")
@FORCE
@QUIET
def replay_cmd(trace, model_name, sets, profile, compute_scale, region_scale, cpu_time, algo,
               allow_partial, as_json, out, noise_mode, noise_runs, noise_seed, trace_profile,
               window, force, quiet):
    """Replay TRACE under a network model; print predicted vs measured makespan.

    \b
    hindsight replay TRACE --model hockney --set l=5us --set g=0.1ns
    hindsight replay TRACE --profile profile.toml --out TRACE-replayed --json
    """
    if noise_mode != "sample" and (noise_runs is not None or noise_seed is not None):
        raise UsageError("--noise-runs/--noise-seed: only with --noise sample")
    check_compute_scale(compute_scale)
    algorithms = _kv(algo, "--algo")
    if out:
        _check_trace_out(out, force, trace)
    stream = _streamed(trace, window, allow_partial, model_name, sets, profile)
    if stream is not None:
        used = [flag for flag, on in (("--out", out), ("--noise", noise_mode != "none"),
                                      ("--cpu-time", cpu_time), ("--allow-partial", allow_partial),
                                      ("--trace-profile", trace_profile)) if on]
        if used:
            raise UsageError(f"{used[0]}: needs the whole trace in memory, and {stream[1]}")
        if window is None:
            note(f"{stream[1]} in windows of {stream[0]} rows per rank")
        else:
            from replay.budget import small_window_note
            small = small_window_note(read_manifest(trace), window)
            if small:
                note(small)
        return _replay_streamed(trace, stream[0], model_name, sets, profile, compute_scale,
                                region_scale, algorithms, as_json, quiet)
    mod, values, prof, assignments, prep, rules = _load(trace, model_name, sets, profile,
                                                        allow_partial, quiet)
    if noise_mode != "none" and mod.MODE == "measured":
        raise UsageError("--noise: the measured model keeps every call's measured duration,"
                               " noise included; choose a network model")
    if noise_mode != "none" and mod.OWN_SIMULATOR:
        raise UsageError(f"--noise: not available with model {mod.NAME}")
    simulated = simulated_timeline(prep.manifest)
    if noise_mode != "none" and simulated:
        raise UsageError(f"--noise: {trace}'s timeline was {simulated}, not measured: it has "
                         "no noise to put back")
    from replay.engine import run
    kw = dict(resolved=values, compute_scale=compute_scale,
              region_scale=_region_scale(region_scale, prep.region_names), cpu_time=cpu_time,
              algorithms=algorithms)
    cost_note = None
    kw["flags"] = rules.flags_for(mod)
    kw["tracer_cost"] = rules.tracer_ns(mod)
    kw["resume"] = rules.resume_for(mod)
    if trace_profile is not None:
        from replay.transport_cost import for_flags
        kw["transport_cost"], cost_note = for_flags(trace_profile, profile, mod)
    # Per-event times feed --out and the noise report; a model with its own simulator has no
    # critical path, so on a simulated timeline without --out they would go unused (at 5 M
    # operations: a second of mapping operations back to rows and some 500 MB).
    record = bool(out) or not (mod.OWN_SIMULATOR and simulated)
    # ... and the critical path needs no row's times: without --out or a noise report they
    # would be 24 bytes a row held for nothing
    res = run(prep, mod, record=record, row_times=bool(out) or not simulated, **kw)
    # A simulated timeline's unexplained time is the other simulation's model, not noise.
    noise, injected = (None, None) if simulated else _noise(prep, mod, res, noise_mode,
                                                             noise_runs, noise_seed, kw)
    # With the trace's own noise the prediction is that one replay: its timeline and breakdown.
    shown_res = injected["result"] if injected and "result" in injected else res
    if out:
        _write_trace_out(shown_res, out)
    if as_json:
        doc = res.summary()
        doc["trace"] = str(trace)
        if prep.manifest.get("partial_cut"):
            doc["partial_cut"] = prep.manifest["partial_cut"]
        if out:
            doc["out"] = str(out)
        if noise is not None:
            doc["noise"] = noise.summary()
        if simulated:
            doc["timeline_not_measured"] = simulated
        if prep.manifest.get("untraced_calls"):
            doc["untraced_calls"] = dict(prep.manifest["untraced_calls"])
        whole = None if simulated else run_time(res, prep.manifest)
        if whole:
            doc["run_time"] = whole
        if injected:
            doc["noise_injection"] = {k: v for k, v in injected.items() if k != "result"}
        doc.update(rules.json(mod, res.info))
        click.echo(json.dumps(doc, indent=2, default=float))
        return
    say = _say(quiet)
    say(f"trace      {trace}  ({res.events} events, {len(res.rank_end_ns)} ranks, "
        f"{messages_text(res)})")
    say(f"model      {res.model}  {fmt_params(res.params)}")
    measured_lines(say, res, res.prepared.manifest.get("makespan_ns") if res.prepared else None,
                    simulated, None if simulated else run_time(res, prep.manifest))
    if res.info.get("not_a_prediction"):
        say(f"saturation {res.info['not_a_prediction']}")
    if res.info.get("not_modelled"):
        note(res.info["not_modelled"])
    _untraced_note(prep.manifest)
    _run_notes(prep.manifest, cpu_time, prep)
    _imported_params_note(prep.manifest, mod, values)
    _latency_note(mod, values, rules.profile)
    if res.info.get("one_host"):
        note(f"M/M/1: {res.info['one_host']}")
    rule_lines(say, res.info, rules.lines(mod, res.info))
    if noise is not None:
        say(noise.line())
    elif simulated:
        say(f"noise: not analysed (the trace's timeline was {simulated}, not measured)")
    if injected:
        say(injected_line(injected))
    if "transport_burst_cost_s" in res.info:
        say(f"transport  bursts {res.info['transport_burst_cost']} (rule transport_burst_cost): "
            f"{res.info['transport_burst_cost_s'] * 1e3:+.3g} ms of compute over all ranks")
    elif cost_note:
        note(cost_note)
    breakdown(say, shown_res.breakdown_columns())
    if out:
        click.echo(str(out) if quiet else f"replayed timeline written to {out}")


def _streamed(trace: Path, window: int | None, allow_partial: bool, model_name: str, sets,
              profile) -> tuple[int, str] | None:
    """(rows per rank of a streamed replay's window, why it streams) or None for the in-memory
    replay: ``--window``, else a streamed replay when the trace would not fit in memory. The
    model's flags are checked first."""
    model_from_flags(model_name, sets, profile)
    manifest = read_manifest(trace)
    if window is not None:
        return window, "--window streams it"
    from replay.budget import streamed_window
    w, why = streamed_window(manifest)
    return None if w is None or allow_partial else (w, why)


def _replay_streamed(trace: Path, window: int, model_name: str, sets, profile, compute_scale,
                     region_scale, algorithms, as_json: bool, quiet: bool) -> None:
    """``hindsight replay`` of a trace streamed segment by segment (``replay.streamed``)."""
    manifest = read_manifest(trace)
    rules = trace_rules(profile, manifest)
    mod, values, prof, assignments = model_from_flags(model_name, sets, profile, rules.below)
    from replay.errors import ReplayError
    from replay.budget import max_window
    from replay.streamed import refuse, run_streamed
    try:
        refuse(mod, values)
    except ReplayError as exc:
        raise UsageError(str(exc)) from None
    try:
        res = run_streamed(trace, mod, resolved=values, compute_scale=compute_scale,
                           region_scale=_region_scale(region_scale), algorithms=algorithms,
                           window=window, max_window=max_window(manifest),
                           flags=rules.flags_for(mod), tracer_cost=rules.tracer_ns(mod),
                           resume=rules.resume_for(mod))
    except ReplayError as exc:
        raise UserError(f"{trace}: {exc}" if str(trace) not in str(exc) else str(exc)) from None
    if as_json:
        doc = res.summary()
        doc["trace"] = str(trace)
        if manifest.get("untraced_calls"):
            doc["untraced_calls"] = dict(manifest["untraced_calls"])
        doc.update(rules.json(mod, res.info))
        click.echo(json.dumps(doc, indent=2, default=float))
        return
    say = _say(quiet)
    for text in res.info.get("notes", []):
        note(text)
    if profile and not quiet:
        _note_mismatch(profile, manifest)
        _warn_noisy(profile)
    _run_notes(manifest, False)
    st = res.info["streamed"]
    say(f"trace      {trace}  ({res.events} events, {len(res.rank_end_ns)} ranks, "
        f"{messages_text(res)})")
    say(f"streamed   {st['segments']} segments, windows of {st['window']} rows per rank "
        "(no per-event times, no critical path)")
    say(f"model      {res.model}  {fmt_params(res.params)}")
    measured_lines(say, res, manifest.get("makespan_ns"))
    _untraced_note(manifest)
    rule_lines(say, res.info, rules.lines(mod, res.info))
    breakdown(say, res.breakdown_columns())


def _run_notes(manifest: dict, cpu_time: bool, prep=None) -> None:
    """What the traced run's conditions (``manifest``) mean for this replay: an oversubscribed
    run's bursts hold the time its ranks waited for a core; ``--cpu-time`` needs regions with
    CPU samples, which only the prepared trace ``prep`` tells (a streamed replay, with none,
    takes no --cpu-time)."""
    import numpy as np

    oversubscribed = bool(manifest.get("oversubscribed"))
    disturbed = run_problems(manifest)
    if not cpu_time and not oversubscribed and not disturbed:
        return          # (nothing to say: the rows' CPU shares, 4 bytes a row, are not read)
    no_samples = prep is None or bool(np.all(prep.rows.ratio == 1.0))
    if disturbed and not oversubscribed:
        # (an oversubscribed run waits for cores by design: said below, once). --cpu-time is
        # offered only where it changes something: bursts inside regions with CPU samples.
        note("the traced run was disturbed (" + "; ".join(disturbed) + "): its "
             "measured times, and the bursts replayed as compute, include other work's"
             + ("" if cpu_time or no_samples else "; --cpu-time takes regions' CPU time"),
             "warning")
    if cpu_time and no_samples:
        note("--cpu-time: no burst lies in a region with CPU-time samples (the program's "
             "instrument.region blocks, sampled by default; --cpu-sampling all adds the MPI "
             "calls' CPU time, not the bursts'), so the bursts keep their wall time")
    if oversubscribed and not cpu_time:
        note("the traced run was oversubscribed (more ranks than cores): its bursts hold the "
             "time ranks waited for a core"
             + ("" if no_samples else "; --cpu-time scales them by their regions' CPU share"))


def _latency_note(mod, values: dict, profile: dict | None) -> None:
    """``--model loggopsim`` takes a profile's negative L (calibrate's fit where the calls'
    overheads overlap the transfer) as 0: said, as the model line shows only the 0."""
    lat = ((profile or {}).get("loggps") or {}).get("L")
    if mod.OWN_SIMULATOR and isinstance(lat, (int, float)) and lat < 0 and values.get("L") == 0:
        note(f"the profile's L = {lat * 1e6:.3g} us is replayed as L = 0: LogGOPSim's rules "
             "take a latency >= 0 (--set L to replay another)")


def _imported_params_note(manifest: dict, mod, values: dict) -> None:
    """A GOAL import's timeline was simulated with LogGOPSim's rules and the import's parameters
    (``origin.params_ns``); a ``--model loggopsim`` replay with others predicts another timeline
    by design, which the line's error against the trace's timeline does not say."""
    origin = manifest.get("origin") if isinstance(manifest.get("origin"), dict) else {}
    used = origin.get("params_ns")
    if not mod.OWN_SIMULATOR or origin.get("format") != "goal" or not isinstance(used, dict):
        return
    differ = []
    for k, v in used.items():
        try:                    # (a non-finite value is the string "inf" in the manifest)
            was, now = float(v), float(values[k])
        except (KeyError, TypeError, ValueError, OverflowError):
            continue
        if not math.isclose(was, now, rel_tol=1e-9, abs_tol=1e-9):
            differ.append((k, was, now))
    if differ:
        def text(k: str, x: float) -> str:
            return f"{k}={x:.10g}{'B' if k == 'S' else 'ns'}"
        note("the trace's timeline was simulated at its import with "
             + " ".join(text(k, was) for k, was, _ in differ) + "; this replay's are "
             + " ".join(text(k, now) for k, _, now in differ)
             + " (--set them to replay it as imported)")


def _untraced_note(manifest: dict) -> None:
    from hindsight.trace.manifest import untraced_note

    text = untraced_note(manifest)
    if text:
        note(text)


def _noise(prep, mod, res, mode: str, runs: int | None, seed: int | None, kw: dict):
    """The noise report of ``res`` (None under the measured model, which explains everything
    by construction) and, with ``--noise trace|sample``, the replays with noise put back."""
    import numpy as np

    from replay import noise as N
    from replay.engine import run
    if mod.MODE == "measured":
        return None, None
    report = N.analyse(prep, res)
    meas = res.measured_makespan_ns

    def err(x: float) -> float:
        return 100.0 * (x - meas) / meas if meas > 0 else float("nan")

    if mode == "trace":
        r = run(prep, mod, record=True, delay_ns=N.trace_delays(report), **kw)
        return report, {"mode": "trace", "predicted_makespan_s": r.makespan_ns / 1e9,
                        "rel_error_pct": err(r.makespan_ns),
                        "injected_s": report.total_unexplained / 1e9,
                        "breakdown": r.summary()["breakdown"], "result": r}
    if mode == "sample":
        runs = 20 if runs is None else runs
        seed = 0 if seed is None else seed
        rng = np.random.default_rng(seed)
        spans = np.array([run(prep, mod, record=False,
                              delay_ns=N.sample_delays(report, res, rng), **kw).makespan_ns
                          for _ in range(runs)])
        q = {"min": float(spans.min()), "median": float(np.median(spans)),
             "max": float(spans.max())}
        return report, {"mode": "sample", "runs": runs, "seed": seed,
                        "predicted_makespan_s": {k: v / 1e9 for k, v in q.items()},
                        "rel_error_pct": {k: err(v) for k, v in q.items()},
                        "runs_makespan_s": (spans / 1e9).tolist()}
    return report, None


