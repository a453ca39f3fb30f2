"""`hindsight replay` and `hindsight sweep` (click commands registered by hindsight.cli)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import click

from hindsight.errors import UsageError, UserError

from hindsight.trace import TraceError
from replay import models as M
from replay.units import fmt_time


def _kv(items: tuple[str, ...], flag: str) -> dict[str, str]:
    out = {}
    for it in items:
        if "=" not in it or not it.split("=", 1)[0].strip():
            raise UsageError(f"{flag} {it}: expected NAME=VALUE")
        k, v = it.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _region_scale(items: tuple[str, ...]) -> dict[str, float]:
    out = {}
    for k, v in _kv(items, "--region-scale").items():
        try:
            out[k] = float(v)
        except ValueError:
            raise UsageError(f"--region-scale {k}={v}: not a number") from None
    return out


def _common(f):
    opts = [
        click.argument("trace", type=click.Path(path_type=Path)),
        click.option("--model", "model_name", default="loggps", show_default=True,
                     help=f"network model: {', '.join(M.names())}"),
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


def _load(trace: Path, model_name: str, sets, profile, allow_partial: bool):
    from replay.prepare import ReplayError, prepare
    try:
        mod = M.get_model(model_name)
    except M.ParamError as exc:
        raise UsageError(f"--model: {exc}") from None
    try:
        assignments = M.parse_assignments(list(sets))
        prof = M.load_profile(profile, mod) if profile else None
        values = M.resolve(mod, assignments, prof)
    except M.ParamError as exc:
        flag = "--profile" if str(exc).startswith("profile") else "--set"
        raise UsageError(f"{flag}: {exc}") from None
    try:
        if allow_partial:
            # An incomplete trace is replayed up to its last consistent cut (replay/partial.py),
            # and the user is told so: it is not a replay of the whole run.
            from replay.partial import prepare_partial
            prep, cut = prepare_partial(trace)
            if cut is not None:
                click.echo(cut.describe(trace), err=True)
        else:
            prep = prepare(trace, allow_partial=False)
    except TraceError as exc:
        raise UserError(f"{exc}") from None
    except ReplayError as exc:
        raise UserError(f"{trace}: {exc}" if str(trace) not in str(exc)
                                   else str(exc)) from None
    if profile:
        _note_mismatch(profile, prep.manifest)
        _warn_noisy(profile)
    return mod, values, prof, assignments, prep


def _note_mismatch(profile: Path, manifest: dict) -> None:
    """One line on stderr when the profile was measured on another network than the trace ran on
    (allowed: that is what-if replay)."""
    origin = M.profile_measured_on(profile)
    diffs = []
    for mine, theirs, what in (("transport", "transport_name", "transport"),
                               ("mpi_library", "mpi_library", "MPI library")):
        a, b = origin.get(mine), manifest.get(theirs)
        if a and b and a != b:
            diffs.append(f"{what} {a!r} (profile) vs {b!r} (trace)")
    if diffs:
        click.echo(f"note: profile {profile} was measured on another network than the trace: "
                   + "; ".join(diffs), err=True)


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
def replay_cmd(trace, model_name, sets, profile, compute_scale, region_scale, cpu_time, algo,
               allow_partial, as_json, out, noise_mode, noise_runs, noise_seed):
    """Replay TRACE under a network model; print predicted vs measured makespan."""
    from replay.engine import run
    from replay.prepare import ReplayError
    if noise_mode != "sample" and (noise_runs is not None or noise_seed is not None):
        raise UsageError("--noise-runs/--noise-seed: only with --noise sample")
    mod, values, prof, assignments, prep = _load(trace, model_name, sets, profile, allow_partial)
    if not math.isfinite(compute_scale) or compute_scale < 0:
        raise UsageError(f"--compute-scale {compute_scale}: must be a number >= 0")
    if noise_mode != "none" and mod.MODE == "measured":
        raise UsageError("--noise: the measured model keeps every call's measured duration,"
                               " noise included; choose a network model")
    if noise_mode != "none" and mod.OWN_SIMULATOR:
        raise UsageError(f"--noise: not available with model {mod.NAME}")
    kw = dict(resolved=values, compute_scale=compute_scale,
              region_scale=_region_scale(region_scale), cpu_time=cpu_time,
              algorithms=_kv(algo, "--algo"))
    try:
        res = run(prep, mod, record=True, **kw)
        noise, injected = _noise(prep, mod, res, noise_mode, noise_runs, noise_seed, kw)
    except ReplayError as exc:
        raise UserError(str(exc)) from None
    # With the trace's own noise the prediction is that one replay: its timeline and breakdown.
    shown_res = injected["result"] if injected and "result" in injected else res
    if out:
        shown_res.write(out)
    if as_json:
        doc = res.summary()
        doc["trace"] = str(trace)
        if prep.manifest.get("partial_cut"):
            doc["partial_cut"] = prep.manifest["partial_cut"]
        if out:
            doc["out"] = str(out)
        if noise is not None:
            doc["noise"] = noise.summary()
        if injected:
            doc["noise_injection"] = {k: v for k, v in injected.items() if k != "result"}
        click.echo(json.dumps(doc, indent=2, default=float))
        return
    click.echo(f"trace      {trace}  ({res.events} events, {len(res.rank_end_ns)} ranks, "
               f"{res.messages} messages)")
    click.echo(f"model      {res.model}  " +
               " ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                        for k, v in res.params.items()))
    click.echo(f"measured   {fmt_time(res.measured_makespan_ns)}")
    click.echo(f"predicted  {fmt_time(res.makespan_ns)}  ({res.rel_error_pct:+.2f} %)")
    if res.info.get("saturated_messages"):
        click.echo(f"saturation {res.info['saturated_messages']} messages crossed a link with "
                   f"rho >= 1 (max rho {res.info['max_rho']:.3g}); rho capped")
    if noise is not None:
        click.echo(noise.line())
    if injected:
        click.echo(_injected_line(injected))
    df = shown_res.breakdown()
    click.echo("rank   end        compute    comm       wait       critical")
    shown = df if len(df) <= 16 else df.nlargest(16, "end_s").sort_values("rank")
    for r in shown.itertuples():
        click.echo(f"{r.rank:<6} {fmt_time(r.end_s * 1e9):<10} {fmt_time(r.compute_s * 1e9):<10} "
                   f"{fmt_time(r.comm_s * 1e9):<10} {fmt_time(r.wait_s * 1e9):<10} "
                   # no critical path under loggopsim: "-" rather than 0
                   + (fmt_time(r.critical_s * 1e9) if hasattr(r, "critical_s") else "-"))
    if len(df) > 16:
        click.echo(f"... {len(df) - 16} more ranks (use --json)")
    if out:
        click.echo(f"replayed timeline written to {out}")


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


def _injected_line(inj: dict) -> str:
    if inj["mode"] == "trace":
        return (f"with noise {fmt_time(inj['predicted_makespan_s'] * 1e9)}  "
                f"({inj['rel_error_pct']:+.2f} %; each call's unexplained time put back)")
    p, e = inj["predicted_makespan_s"], inj["rel_error_pct"]
    return (f"with noise {fmt_time(p['min'] * 1e9)} / {fmt_time(p['median'] * 1e9)} / "
            f"{fmt_time(p['max'] * 1e9)}  ({e['min']:+.2f} % / {e['median']:+.2f} % / "
            f"{e['max']:+.2f} %; min / median / max of {inj['runs']} runs with stalls drawn "
            f"from the trace, seed {inj['seed']})")


@click.command("sweep")
@_common
@click.option("--vary", multiple=True, required=True, metavar="NAME=LO..HI:log|lin:N",
              help="parameter range (or NAME=V1,V2,...); several --vary make a grid")
@click.option("--out", type=click.Path(path_type=Path), required=True, help="CSV file")
@click.option("--plot", type=click.Path(path_type=Path), help="PNG of the predicted makespan")
@click.option("--workers", type=int, default=0,
              help="threads (default: all cores); with --executor mpi outside mpi4py.futures, "
                   "the number of MPI processes to spawn")
@click.option("--executor", type=click.Choice(["local", "mpi"]), default="local",
              show_default=True,
              help="local threads, or MPI processes via mpi4py.futures (run under `mpiexec -n K "
                   "python -m mpi4py.futures -m hindsight.cli sweep ...`, docs/replay.md)")
def sweep_cmd(trace, model_name, sets, profile, compute_scale, region_scale, cpu_time, algo,
              allow_partial, vary, out, plot, workers, executor):
    """Replay TRACE for every configuration of a parameter grid; one CSV row each."""
    from tqdm import tqdm

    from replay.engine import sweep
    from replay.executors import ExecutorError
    from replay.prepare import ReplayError
    mod, values, prof, assignments, prep = _load(trace, model_name, sets, profile, allow_partial)
    try:
        from replay.engine import parse_vary
        axes = [parse_vary(v, mod) for v in vary]
    except M.ParamError as exc:
        raise UsageError(f"--vary: {exc}") from None
    total = 1
    for a in axes:
        total *= len(a[1])
    try:
        with tqdm(total=total, desc="sweep", unit="cfg", disable=None) as bar:
            df = sweep(prep, mod.NAME, assignments, vary, profile=prof,
                       compute_scale=compute_scale, region_scale=_region_scale(region_scale),
                       cpu_time=cpu_time, algorithms=_kv(algo, "--algo"),
                       workers=workers or None, progress=bar.update, executor=executor)
    except M.ParamError as exc:
        raise UsageError(f"--vary: {exc}") from None
    except ExecutorError as exc:
        raise UserError(str(exc)) from None
    except ReplayError as exc:
        raise UserError(str(exc)) from None
    df.to_csv(out, index=False)
    click.echo(f"{len(df)} configurations written to {out}")
    if plot:
        _plot(df, [a[0] for a in axes], plot, [v for v in vary])
        click.echo(f"plot written to {plot}")


def _plot(df, names, path: Path, specs) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    logx = ":log:" in specs[0]
    if len(names) == 1:
        ax.plot(df[names[0]], df["predicted_makespan_s"], marker="o", label="predicted")
        ax.axhline(df["measured_makespan_s"].iloc[0], color="k", ls="--", label="measured")
        ax.set_xlabel(names[0])
        if logx:
            ax.set_xscale("log")
    else:
        for val, g in df.groupby(names[1]):
            ax.plot(g[names[0]], g["predicted_makespan_s"], marker=".", label=f"{names[1]}={val:g}"
                    if isinstance(val, float) else f"{names[1]}={val}")
        ax.set_xlabel(names[0])
        if logx:
            ax.set_xscale("log")
    ax.set_ylabel("makespan (s)")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
