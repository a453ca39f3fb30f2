"""`hindsight predict`: fit cost models from traces, synthesize other P and N, replay, report."""
from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from pathlib import Path

import click

from apps.skeletons import SKELETONS
from hindsight.errors import DataError, UsageError, UserError
from hindsight.outputs import check_output, write_failed
from hindsight.system import write_atomic, write_text_atomic


def parse_ranks(spec: str) -> list[int]:
    """``1,2,8``, ``2..4096`` (the powers of two in between, ends included) or ``2..64:2``
    (every 2nd), combined with commas."""
    out: set[int] = set()
    for item in (s.strip() for s in spec.split(",") if s.strip()):
        m = re.fullmatch(r"(\d+)\.\.(\d+)(?::(\d+))?", item)
        if m:
            a, b = int(m.group(1)), int(m.group(2))
            if a < 1 or b < a:
                raise click.BadParameter(f"{item}: need 1 <= a <= b", param_hint="--ranks")
            if m.group(3):
                step = int(m.group(3))
                if step < 1:
                    raise click.BadParameter(f"{item}: step must be >= 1", param_hint="--ranks")
                out.update(range(a, b + 1, step))
            else:
                out.update({a, b})
                p = 1
                while p <= b:
                    if p >= a:
                        out.add(p)
                    p *= 2
        elif item.isdigit() and int(item) >= 1:
            out.add(int(item))
        else:
            raise click.BadParameter(f"{item!r} is not a rank count, a..b or a..b:step",
                                     param_hint="--ranks")
    if not out:
        raise click.BadParameter("no rank counts given", param_hint="--ranks")
    if max(out) > 65536:
        raise click.BadParameter(f"{max(out)} ranks: at most 65536", param_hint="--ranks")
    return sorted(out)


#: --size suffixes: counts of input units, so decimal (k, M, G) or binary (Ki, Mi, Gi)
_SIZE_SUFFIX = {"k": 10 ** 3, "K": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9, "Ki": 2 ** 10,
                "Mi": 2 ** 20, "Gi": 2 ** 30}


def parse_sizes(spec: str) -> list[int]:
    """``100000,4M,1Mi``: input sizes in the app's units, with an optional k/M/G (powers of
    1000) or Ki/Mi/Gi (powers of 1024) suffix."""
    out = []
    for item in (s.strip() for s in spec.split(",") if s.strip()):
        m = re.fullmatch(r"(.*?)\s*(Ki|Mi|Gi|k|K|M|G)", item)
        try:
            # decimal, so that 4.1M is 4 100 000 exactly (in floats 4099999.9999999995)
            v = float(Decimal(m.group(1)) * Decimal(_SIZE_SUFFIX[m.group(2)])) if m \
                else float(item)
        except (ValueError, ArithmeticError):
            raise click.BadParameter(f"{item!r} is not a number (suffixes: k, M, G, Ki, Mi, Gi)",
                                     param_hint="--size") from None
        if not math.isfinite(v) or v < 1 or v != int(v):
            raise click.BadParameter(f"{item}: a size is a positive whole number of input units",
                                     param_hint="--size")
        out.append(int(v))
    if not out:
        raise click.BadParameter("no sizes given", param_hint="--size")
    return sorted(set(out))


def _synthesized(path: Path) -> bool:
    """Whether ``path`` is a trace ``predict --keep-traces`` wrote (its manifest says so)."""
    import json

    try:
        m = json.loads((path / "manifest.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(m, dict) and (m.get("synthetic") or {}).get("generator") == \
        "predict.synthesize"


@click.command("predict")
@click.argument("traces", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--app", default=None, help="use only the traces of this application")
@click.option("--paradigm", default=None,
              help=f"use only the traces of this paradigm ({', '.join(SKELETONS)})")
@click.option("--ranks", "ranks_spec", default="1..64", show_default=True,
              help="rank counts: 1,2,8 or 2..4096 (powers of two) or 2..64:2")
@click.option("--size", "size_spec", default=None,
              help="input sizes in the app's units (sorting: elements, components: edges, "
                   "feature_extraction: documents), comma-separated, k/M/G or Ki/Mi/Gi "
                   "suffixes allowed [largest measured]")
@click.option("--model", "model_name", default="loggps", show_default=True,
              help="network model of the replay")
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE",
              help="model parameter with units, e.g. L=2.5us")
@click.option("--profile", type=click.Path(path_type=Path),
              help="network profile (TOML) written by `hindsight calibrate`")
@click.option("--cpu-time", is_flag=True,
              help="fit block costs from their CPU time: predict dedicated cores from runs on "
                   "a shared or oversubscribed machine")
@click.option("--within", type=float, default=5.0, show_default=True,
              help="report the smallest P within this % of the best time")
@click.option("--efficiency", "target_e", type=float, default=0.5, show_default=True,
              help="efficiency E of the isoefficiency estimate")
@click.option("--max-fit-error", type=float, default=25.0, show_default=True,
              help="a fit whose error (the worse of leave-one-out and forward validation) "
                   "exceeds this % is bad: extrapolating it is refused")
@click.option("--accept-bad-fit", is_flag=True,
              help="extrapolate bad fits anyway (the warning stays)")
@click.option("--out", type=click.Path(path_type=Path),
              help="write predict.csv, fits.csv, summary.json and predict.png here")
@click.option("--keep-traces", is_flag=True,
              help="also write every synthesized trace under OUT/traces/")
@click.option("--json", "as_json", is_flag=True,
              help="print the predictions (and the summary) as one JSON document")
@click.option("--force", is_flag=True, help="replace the files of an existing --out folder")
@click.option("--quiet", "-q", is_flag=True,
              help="print nothing but errors and the paths of the files written")
def predict_cmd(traces, app, paradigm, ranks_spec, size_spec, model_name, sets, profile, cpu_time,
                within, target_e, max_fit_error, accept_bad_fit, out, keep_traces, as_json,
                force, quiet) -> None:
    """Predict run time, speedup, efficiency and the best P for other rank counts and sizes,
    from cost models fitted to TRACES (trace directories, or directories of them).

    TRACES are runs of hindsight's applications (sorting, components, feature_extraction),
    whose schedules predict synthesises at other P and N; a --program trace is replayed
    (`hindsight replay`, `sweep`), not predicted (docs/predict.md).

    \b
    hindsight predict traces/sorting-pipeline-n2 traces/sorting-pipeline-n4 --ranks 1..64
    hindsight predict TRACE --ranks 2..16 --size 100000,1000000 --out predictions --json
    """
    from apps.skeletons import skeleton, uses_block_stream
    from predict.config import UNIT_NAMES

    Ps = parse_ranks(ranks_spec)
    if not (0 < within < 1000):
        raise click.BadParameter(f"{within}: must be between 0 and 1000", param_hint="--within")
    if not (0 < target_e < 1):
        raise click.BadParameter(f"{target_e}: must be between 0 and 1",
                                 param_hint="--efficiency")
    if max_fit_error <= 0:
        raise click.BadParameter(f"{max_fit_error}: must be > 0", param_hint="--max-fit-error")
    if keep_traces and out is None:
        raise UsageError("--keep-traces needs --out DIR")
    if out is not None:
        check_output(out, "--out", force=force, directory=True)
    # stdout carries the text report, or the JSON document (--json), or the paths (--quiet)
    say = (lambda *a, **kw: None) if (quiet or as_json) else click.echo

    def warn(line: str) -> None:
        if not quiet:
            click.echo(line, err=True)
    from replay import models as M
    try:
        mod = M.get_model(model_name)
    except M.ParamError as exc:
        raise UsageError(f"--model: {exc}") from None
    if mod.MODE == "measured" or mod.OWN_SIMULATOR:
        # the schedules predict synthesises have no measured transfers, and live in memory
        raise UsageError(f"--model {mod.NAME}: predict replays schedules it synthesises, which "
                         + ("have no measured transfers to replay" if mod.MODE == "measured"
                            else "are no trace directory for LogGOPSim's simulator to read")
                         + "; choose " + ", ".join(
                             n for n in M.names() if n != mod.NAME and (
                                 M.get_model(n).MODE != "measured"
                                 and not M.get_model(n).OWN_SIMULATOR)))
    profile_doc = None
    try:
        assignments = M.parse_assignments(list(sets))
        prof = M.load_profile(profile, mod, overrides=assignments) if profile else None
        values = M.resolve(mod, assignments, prof)
        if profile:
            import tomllib
            try:
                profile_doc = tomllib.loads(Path(profile).read_text())
            except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError):
                profile_doc = None  # a JSON parameter file: analytic constants from the model
    except M.ProfileParamError as exc:
        raise DataError(f"--profile: {exc}") from None       # the file's content: exit 1
    except M.ParamError as exc:
        raise UsageError(f"--set: {exc}") from None

    from predict import costmodel as C
    from predict import scaling

    cm = C.fit_traces(traces, app, paradigm, cpu_time)
    Ns = parse_sizes(size_spec) if size_spec else [max(n for _, n in cm.configs)]
    if skeleton(cm.paradigm).power_of_two:
        bad = [p for p in Ps if p & (p - 1)]
        if bad:
            raise click.BadParameter(f"the {cm.paradigm} needs powers of two; {bad[0]} is not",
                                     param_hint="--ranks")
    net = scaling.net_constants(mod, values, profile_doc)
    keep = (out / "traces") if keep_traces else None
    if keep is not None:
        foreign = [d for d in (sorted(keep.iterdir()) if keep.is_dir() else [])
                   if not _synthesized(d)]
        if foreign:
            raise UsageError(f"--keep-traces: {keep} holds {foreign[0].name}, which predict did "
                             "not write; choose another --out")
        try:
            from replay.cache import remove_tree
            remove_tree(keep, ignore_errors=True)       # --force: the last run's traces only
            keep.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise write_failed(keep, "--out", exc) from None
    df = scaling.predict_grid(cm, Ps, Ns, mod, values, net, keep)
    errors, warnings = cm.check(max_fit_error / 100)
    unit = UNIT_NAMES[cm.app]
    fits = cm.table()

    say(f"{cm.app} on {cm.paradigm}: fitted from {len(cm.traces)} traces "
        f"(P, {unit}) = {', '.join(f'({p}, {n})' for p, n in cm.configs)}; "
        f"{cm.per_task} {unit} per task; model {mod.NAME}")
    say("cost models (u = input units covered; bytes:* in bytes, others in seconds):")
    for f in cm.fits.values():
        cv = "n/a (1 point)" if math.isnan(f.cv_rel_err) else f"{f.cv_rel_err * 100:.1f} %"
        if f.u_levels == 2 and "u" in f.terms:
            cv += " (2 sizes)"  # the scatter at two sizes: it cannot test the line's form
        r2 = "n/a" if math.isnan(f.r2) else f"{f.r2:.3f}"
        say(f"  {f.quantity:<14} {f.formula():<40} R² {r2:<6} LOO err {cv:<14} "
            f"points {f.points}, u {f.u_range[0]:.4g}..{f.u_range[1]:.4g}, "
            f"P {f.P_range[0]}..{f.P_range[1]}")
    if cm.untraced:
        warn(f"note: {len(cm.untraced)} untraced run(s) skipped (no costs to fit): "
             + ", ".join(cm.untraced))
    if cm.disturbed and not cpu_time:
        # wall-time costs of a run that waited for cores are the machine's, not the program's
        warn(f"warning: {len(cm.disturbed)} of {len(cm.traces)} fitted traces ran disturbed or "
             f"oversubscribed, so their costs include waits for a core: "
             + ", ".join(cm.disturbed) + "; --cpu-time fits the blocks' CPU time instead")
    for w in warnings:
        warn(f"warning: {w}")
    if errors:
        if not accept_bad_fit:
            # every refused fit is named: the one that matters may not be the first
            for e in errors[1:]:
                warn(f"warning: bad fit: {e}")
            raise UserError(
                f"refusing to extrapolate a bad fit: {errors[0]}"
                + (f" (and the {len(errors) - 1} above)" if len(errors) > 1 else "")
                + "; measure runs nearer the target, or pass --accept-bad-fit")
        for e in errors:
            warn(f"warning: bad fit extrapolated (--accept-bad-fit): {e}")

    opt = scaling.optimum(df, within)
    demand_driven = (skeleton(cm.paradigm).demand_driven
                     and not uses_block_stream(cm.app, cm.paradigm))
    sat = scaling.saturation(df, cm, net) if demand_driven else None
    iso = scaling.isoefficiency(df, target_e)
    say("")
    say(f"{unit:>10} {'P':>6} {'T_P s':>11} {'speedup':>8} {'eff':>6} {'T_o s':>11} "
        f"{'analytic s':>11}")
    for r in df.itertuples():
        say(f"{r.N:>10} {r.P:>6} {r.makespan_s:>11.5g} {r.speedup:>8.3f} "
            f"{r.efficiency:>6.3f} {r.overhead_s:>11.4g} "
            # (the papers have no model of this paradigm: n/a, not a NaN that reads as the
            # model's own failure, which stays NaN)
            + (f"{'n/a':>11}" if not r.analytic_model else f"{r.analytic_s:>11.5g}")
            + (f"  no prediction: {r.failed}" if isinstance(getattr(r, "failed", None), str)
               else ""))
    say("")
    for o in opt.itertuples():
        say(f"N={o.N}: optimal P = {o.P_opt} ({o.T_opt_s:.4g} s); smallest P within "
            f"{within:g} % = {o.P_within} ({o.T_within_s:.4g} s)"
            + (f"; analytic optimum P = {o.analytic_P_opt}"
               if "analytic_P_opt" in opt.columns and not math.isnan(o.analytic_P_opt)
               else ""))
    if sat is not None:
        top = int(df["P"].max())

        def first_p(p: float) -> str:     # (nan: no P of the grid saturates it)
            return f"from P = {int(p)}" if not math.isnan(p) else f"not up to P = {top}"
        for s in sat.itertuples():
            say(f"N={s.N}: master saturated {first_p(s.saturation_P)} (replay: master "
                f"waits < {scaling.SATURATED_WAIT:.0%}); paper 004: saturated "
                f"{first_p(s.paper004_saturation_P)}, optimal P = {s.paper004_optimal_P}")
    x = iso["exponent"]
    # T_o's growth with W is what the estimate rests on: one size cannot show it, and an
    # exponent below 0 (W_iso falling as p grows) says T_o did not grow with p in these runs
    why = None      # (the reason, and how the line puts it after "not estimable")
    if df["N"].nunique() < 2:
        why = ("one size: T_o's growth with W needs two or more --size", " from ")
    elif not math.isnan(x) and x < 0:
        why = (f"the fitted W_iso falls as p grows (p^{x:.2f}): T_o does not grow with p in "
               "these runs", ": ")
    if why is not None:
        iso["not_estimable"], iso["exponent"] = why[0], math.nan
        say(f"isoefficiency (E = {target_e:g}): not estimable{why[1]}{why[0]}")
    elif not math.isnan(x):
        used = [int(r["p"]) for r in iso["per_p"] if r["W_iso_s"] > 0]
        say(f"isoefficiency (E = {target_e:g}): W must grow as p^{x:.2f} to keep E "
            f"(fitted on the {len(used)} P where some W keeps it: "
            f"{', '.join(map(str, used))})")
    elif (df["P"] > 1).sum() and df.loc[df["P"] > 1, "P"].nunique() < 2:
        say(f"isoefficiency (E = {target_e:g}): not estimable from one P > 1")
    else:
        say(f"isoefficiency (E = {target_e:g}): not estimable: fewer than two P where "
            f"some size keeps E = {target_e:g} (T_o grows as fast as W or faster)")

    summary = {"app": cm.app, "paradigm": cm.paradigm, "unit": unit,
               "fitted_from": cm.traces, "model": mod.NAME, "optimum": opt.to_dict("records"),
               "saturation": sat.to_dict("records") if sat is not None else None,
               "isoefficiency": iso, "fits": [f.as_dict() for f in cm.fits.values()],
               "warnings": warnings, "bad_fits": errors}
    if out is not None:
        try:
            out.mkdir(parents=True, exist_ok=True)
            write_atomic(out / "predict.csv", lambda tmp: df.to_csv(tmp, index=False),
                         keep_suffix=True)
            write_atomic(out / "fits.csv", lambda tmp: fits.to_csv(tmp, index=False),
                         keep_suffix=True)
            write_text_atomic(out / "summary.json",
                              json.dumps(summary, indent=2, default=float) + "\n")
            plot(df, opt, cm, unit, out / "predict.png", bad_fit=bool(errors))
        except OSError as exc:
            raise write_failed(out, "--out", exc) from None
        written = [out / f for f in ("predict.csv", "fits.csv", "summary.json", "predict.png")]
        if quiet:
            for f in written:
                click.echo(str(f))
        elif not as_json:
            click.echo(f"wrote {written[0]}, fits.csv, summary.json, predict.png")
    if as_json:
        doc = {**summary, "predictions": df.to_dict("records"),
               "out": str(out) if out is not None else None}
        click.echo(json.dumps(doc, indent=2, default=_json_value))


def _json_value(v):
    """A value json cannot write as is: numpy scalars as numbers, NaN as null."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    return None if math.isnan(f) else f


def extrapolated(df, cm):
    """The rows of ``df`` beyond what was measured: a P above the largest measured P or a size
    above the largest measured size (where a fit is used outside the points it was fitted on)."""
    p_max = max(p for p, _ in cm.configs)
    n_max = max(n for _, n in cm.configs)
    return (df["P"] > p_max) | (df["N"] > n_max)


def plot(df, opt, cm, unit: str, path: Path, bad_fit: bool = False) -> None:
    """Four panels against P: time, speedup, efficiency, overhead; analytic model dashed. With
    ``bad_fit`` (bad fits accepted with --accept-bad-fit) the points extrapolated beyond the
    measured P and sizes are circled in red: they rest on a fit that failed its checks."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(2, 2, figsize=(11, 8), constrained_layout=True)
    name = " / ".join(dict.fromkeys(df.loc[df["analytic_s"].notna(), "analytic_model"]))
    if bad_fit:
        far = df[extrapolated(df, cm)]
        mark = dict(ls="none", marker="o", ms=12, mfc="none", mec="red", mew=1.5)
        axes[0, 0].plot(far["P"], far["makespan_s"], **mark,
                        label="extrapolated from a bad fit (--accept-bad-fit)")
        axes[0, 1].plot(far["P"], far["speedup"], **mark)
        axes[1, 0].plot(far["P"], far["efficiency"], **mark)
        far1 = far[far["P"] > 1]
        axes[1, 1].plot(far1["P"], far1["overhead_s"].clip(lower=1e-9), **mark)
    for i, (N, g) in enumerate(df.groupby("N")):
        col = f"C{i}"
        g = g.sort_values("P")
        lab = f"N={N} {unit}"
        axes[0, 0].plot(g["P"], g["makespan_s"], "o-", color=col, label=f"{lab} (replay)")
        if g["analytic_s"].notna().any():
            axes[0, 0].plot(g["P"], g["analytic_s"], "--", color=col, label=f"{lab} ({name})")
            axes[0, 1].plot(g["P"], g["analytic_speedup"], "--", color=col)
        o = opt[opt["N"] == N].iloc[0]
        axes[0, 0].plot([o["P_opt"]], [o["T_opt_s"]], "*", color=col, ms=14)
        axes[0, 1].plot(g["P"], g["speedup"], "o-", color=col, label=lab)
        axes[1, 0].plot(g["P"], g["efficiency"], "o-", color=col, label=lab)
        gg = g[g["P"] > 1]
        axes[1, 1].plot(gg["P"], gg["overhead_s"].clip(lower=1e-9), "o-", color=col, label=lab)
    Pmax = df["P"].max()
    # (drawn through many points: on a linear P axis against a log speedup axis, a straight
    # segment between its ends is not speedup = P)
    line = np.linspace(1, Pmax, 256)
    axes[0, 1].plot(line, line, ":", color="grey", label="linear")
    titles = [("predicted time T_P (s); ★ = optimal P", True, True),
              ("speedup W / T_P", True, True), ("efficiency W / (p·T_P)", True, False),
              ("overhead T_o = p·T_P − W (s)", True, True)]
    for ax, (t, lx, ly) in zip(axes.flat, titles):
        ax.set_title(t)
        ax.set_xlabel("ranks P")
        if lx and Pmax > 8:
            ax.set_xscale("log", base=2)
        if ly:
            ax.set_yscale("log")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=8)
    axes[1, 0].set_ylim(0, 1.05)
    note = "" if name else "; the papers give no closed form for this paradigm"
    if name and df["analytic_s"].isna().any():
        name += " (gaps: no finite answer, e.g. a saturated M/M/1 queue)"
    warn = ("\nred circles: extrapolated from a fit that failed its checks (--accept-bad-fit)"
            if bad_fit else "")
    fig.suptitle(f"hindsight predict: {cm.app} on {cm.paradigm} (fitted from "
                 f"{len(cm.traces)} traces{note}); dashed: {name or 'none'}{warn}")
    write_atomic(path, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    plt.close(fig)
