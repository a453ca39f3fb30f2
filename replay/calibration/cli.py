"""`hindsight calibrate` (a click command registered lazily by hindsight.cli)."""

from __future__ import annotations

from pathlib import Path

import click

from hindsight.errors import UsageError
from hindsight.outputs import check_output, plot_format, write_failed


def _ranks(text: str | None) -> list[int] | None:
    if not text:
        return None
    try:
        return sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise UsageError(f"--overhead-ranks {text!r}: expected rank counts like 2,3") from None


@click.command("calibrate")
@click.option("-n", "nprocs", type=int, default=2, show_default=True,
              help="ranks P of the main run (ranks 0 and 1 communicate, the rest idle)")
@click.option("--transport", type=click.Choice(["shm", "tcp"]), default="shm", show_default=True,
              help="MPICH network: shared memory, or TCP over loopback (as hindsight collect)")
@click.option("--sizes", default="1B..16MiB", show_default=True,
              help="message sizes: LO..HI (powers of 2), LO..HI:F (factor F) or a,b,c")
@click.option("--repeat", type=int, default=100, show_default=True,
              help="round trips per size (fewer above 64 KiB, at least 10)")
@click.option("--overhead-ranks", default=None, metavar="P1,P2",
              help="rank counts for o = o_a + o_b·P [P and 3 if P=2, else P and 2]")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="profile file (TOML) to write")
@click.option("--testbed", default=None, metavar="NAME",
              help="measure between the nodes of testbed NAME, MPI over TCP (docs/testbed.md)")
@click.option("--api", type=click.Choice(["buffer", "pickle"]), default="buffer",
              show_default=True,
              help="mpi4py path to time: buffer (Send/Recv) or pickle (send/recv of objects, as "
                   "traced by hindsight; use it for applications that send Python objects)")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="PNG of the fit [the profile path with .png]")
@click.option("--attempts", type=click.IntRange(min=1), default=3, show_default=True,
              help="measurements taken until one passes the quality checks")
@click.option("--accept-noisy", is_flag=True,
              help="write the profile even if its fit misses its measurements or it was taken "
                   "under load (marked quality = \"noisy\", with a warning)")
@click.option("--force", is_flag=True, help="replace an existing profile and plot")
@click.option("--quiet", "-q", is_flag=True,
              help="print nothing but errors and the paths of the files written")
def calibrate_cmd(nprocs, transport, sizes, repeat, overhead_ranks, out, testbed, api, plot_path,
                  attempts, accept_noisy, force, quiet):
    """Measure LogGP/LogGPS, Hockney and M/M/1 parameters of the MPI in use; write a profile.

    The profile is what `hindsight replay --profile` reads (docs/calibration.md).

    \b
    hindsight calibrate --out profile.toml
    hindsight calibrate --transport tcp --sizes 1B..1MiB --repeat 50 --out tcp.toml
    """
    from replay.calibration.plot import plot_profiles
    from replay.profile import write_profile
    from replay.calibration.quality import profile_problems
    from replay.calibration.run import CalibrationError, NoQuietMeasurement, calibrate

    # Both outputs are checked before minutes of measuring, not after.
    png = plot_path or out.with_suffix(".png")
    if png.resolve() == out.resolve():
        raise UsageError(f"--plot {png}: the same file as --out")
    check_output(out, "--out", force=force)
    check_output(png, "--plot", force=force)
    plot_format(png)
    say = (lambda *a, **kw: None) if quiet else click.echo
    try:
        prof = calibrate(nprocs, transport, sizes, repeat, _ranks(overhead_ranks),
                         progress=lambda m: say(f"calibrate: {m}", err=True),
                         warn=lambda m: say(f"warning: {m}", err=True),
                         testbed=testbed, api=api, attempts=attempts, accept_noisy=accept_noisy)
    except NoQuietMeasurement as exc:
        n = len(exc.failed)
        raise CalibrationError(f"no quiet measurement in {n} attempt{'s' * (n > 1)}, {out} "
                               f"not written: {'; '.join(exc.failed)} (--accept-noisy writes "
                               "the best marked noisy)") from None
    problems = profile_problems(prof)
    try:
        write_profile(prof, out)
    except OSError as exc:
        raise write_failed(out, "--out", exc) from None
    if problems:
        say(f"warning: profile {out} is marked noisy: {'; '.join(problems)}", err=True)
    try:
        plot_profiles([prof], png)
    except OSError as exc:
        raise write_failed(png, "--plot", exc) from None
    if quiet:
        click.echo(str(out))
        click.echo(str(png))
        return
    m, lg, h, mm, f = (prof["measured_on"], prof["loggps"], prof["hockney"], prof["mm1"],
                       prof["fit"])
    us = 1e6
    net = f"testbed {testbed} ({m['network']['rate']})" if testbed else f"transport {transport}"
    click.echo(f"profile {out} ({m['mpi_library']}, {net}: "
               f"{m['transport_verified']})")
    click.echo(f"  LogGPS  L={lg['L'] * us:.3g}us o_send={lg['o_send'] * us:.3g}us "
               f"o_recv={lg['o_recv'] * us:.3g}us g={lg['g'] * us:.3g}us "
               f"G={lg['G'] * 1e9:.3g}ns/B S={lg['S']:g}B O={lg['O'] * 1e9:.3g}ns/B "
               f"o_a={lg['o_a'] * us:.3g}us o_b={lg['o_b'] * us:.3g}us/rank "
               f"o_hop={lg.get('o_hop', 0.0) * us:.3g}us  R2={f['r2_loggp']:.3f}")
    pp = f.get("progress_probe") or {}
    if "receiver_computes_wait_s" in pp:
        click.echo(f"  progress {lg['progress']} at {pp['rendezvous_size']}B: sender's Wait "
                   f"{pp['receiver_computes_wait_s'] * us:.0f}us while the receiver computed "
                   f"{(pp['D_s'] - pp['lead_s']) * us:.0f}us; receiver's Recv "
                   f"{pp['sender_computes_wait_s'] * us:.0f}us while the sender computed "
                   f"{pp['D_s'] * us:.0f}us")
    cp = f.get("call_probe") or {}
    if "o_call" in cp:
        click.echo("  calls   " + " ".join(f"{k}={lg[k] * us:.3g}us" for k in
                                          ("o_irecv", "o_wait", "o_probe", "o_call"))
                   + f" (median of {cp['n_calls']} calls each, {cp['api']} API)")
    up = f.get("unexpected_probe") or {}
    if up.get("u_s"):
        click.echo(f"  unexpected o_unexpected={lg['o_unexpected'] * us:.3g}us "
                   f"O_unexpected={lg['O_unexpected'] * 1e9:.3g}ns/B (u(k) at "
                   + ", ".join(f"{k}B {u * us:.3g}us" for k, u in zip(up["u_sizes"], up["u_s"]))
                   + f"; {up['batch']} messages a batch)")
    cu = prof.get("compute") or {}
    if cu.get("burst_s"):
        click.echo("  bursts  " + _curve(cu, [f"{k}B" for k in cu["bytes"]])
                   + " (a burst's CPU time between k-byte exchanges: length + the transport's "
                   "extra)")
    rs = prof.get("resume") or {}
    if rs.get("burst_s"):
        click.echo("  resume  " + _curve(rs, [f"{d * 1e3:g}ms away" for d in rs["away_s"]])
                   + " (a burst's CPU time after that long in other work: length + the extra)")
    sf = prof.get("shared_flag") or {}
    if sf:
        click.echo("  flags   " + _flags(sf) + " (shared-flag collectives at their smallest "
                   "size, root own/after, member own/after)")
    bd = prof.get("binding") or {}
    if bd:
        from replay.binding import CALLS
        click.echo("  binding " + " ".join(f"{c}={bd[c] * us:.2g}us" for c in CALLS if c in bd)
                   + " (mpi4py's own time per call; taken off a trace recorded below it)")
    nv = prof.get("native") or {}
    if nv:
        click.echo("  native  " + " ".join(f"{k}={v * us:.2g}us" for k, v in nv.items())
                   + " (the calls made from C; a trace recorded below mpi4py pays these)")
    nf = prof.get("native_shared_flag") or {}
    if nf:
        click.echo("  nflags  " + _flags(nf) + " (the same collectives made from C)")
    rd = prof.get("reduction") or {}
    if rd:
        ev = f.get("reduction_probe") or {}
        click.echo(f"  reduce  gamma={rd['gamma'] * 1e9:.3g}ns/B (MPI_Reduce_local, "
                   f"{ev.get('op', 'SUM')} of {ev.get('type', 'double')}s, "
                   + ", ".join(f"{k >> 10}KiB {t * us:.3g}us" for k, t in
                               zip(ev.get("sizes", []), ev.get("median_s", [])))
                   + "; a reduction step combines what it received in gamma per byte)")
    pt = prof.get("python_tracer") or {}
    if pt:
        click.echo("  tracer  " + " ".join(f"{k}={v * us:.2g}us" for k, v in pt.items())
                   + " (the Python tracer's own time per call; taken off its traces' bursts)")
    click.echo(f"  Hockney l={h['l'] * us:.3g}us g={h['g'] * 1e9:.3g}ns/B  R2={f['r2_hockney']:.3f}")
    click.echo(f"  M/M/1   C={mm['C'] / 1e9:.3g}GB/s tau={mm['tau'] * us:.3g}us")
    chk, waits = f["check"], [r.get("run_queue_wait_fraction")
                              for r in prof["conditions"].get("ranks", [])]
    click.echo(f"  quality {prof['quality']}: residual worst "
               f"{100 * chk['residual_worst']:+.0f}% at {chk['residual_worst_size']}B, median "
               f"{100 * chk['residual_median']:.0f}% (judged sizes, attempt "
               f"{chk.get('kept_attempt', chk['attempts'])} of {chk['attempts']}); "
               "ranks waited for a core "
               + "/".join("?" if w is None else f"{100 * w:.1f}%" for w in waits))
    for note in f["notes"]:
        click.echo(f"  note: {note}")
    click.echo(f"plot {png}")


def _curve(sec: dict, heads: list[str]) -> str:
    """One line of a burst curve: per row (``heads``) each burst length + its extra time."""
    return "; ".join(head + " " + " ".join(f"{b * 1e6:.3g}us+{e * 1e6:.3g}us"
                                           for b, e in zip(sec["burst_s"], row))
                     for head, row in zip(heads, sec["extra_s"]))


def _flags(sf: dict) -> str:
    """The shared-flag collectives' costs at their smallest size (what a program's frequent
    small collectives cost each member): root own/after, member own/after, in us."""
    return " ".join(f"{op} " + "/".join(f"{c[k][0] * 1e6:.3g}" for k in (
        "root_own_s", "root_after_s", "member_own_s", "member_after_s") if k in c) + "us"
        for op, c in ((o, sf[o]) for o in ("Barrier", "Bcast", "Reduce", "Allreduce") if o in sf))
