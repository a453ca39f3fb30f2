"""The lines ``hindsight replay`` prints of a replay's result: the trace's messages, the
measured and predicted makespans, the rules' lines and the per-rank table. Each takes ``say``
(print a line, or not under ``--quiet``) and plain values, so the in-memory and the streamed
replay print alike."""

from __future__ import annotations

from replay.units import fmt_time


def messages_text(res) -> str:
    """The trace's point-to-point messages, and those the model adds for its collective and
    one-sided patterns (``Result.messages`` counts both)."""
    if res.prepared is not None:
        p2p = len(res.prepared.msgs.bytes)
    elif "p2p_messages" in res.info.get("streamed", {}):
        p2p = res.info["streamed"]["p2p_messages"]
    else:
        return f"{res.messages} messages"
    more = res.messages - p2p
    return f"{p2p} point-to-point message{'s' * (p2p != 1)}" + (
        f", {more} more in the model's collective and one-sided patterns" if more > 0 else "")


def measured_lines(say, res, epoch_ns: float | None, simulated: str | None = None,
                   run_time: dict | None = None) -> None:
    """The measured and predicted makespans. The models replay from the first traced event; the
    trace's makespan counts from the run's epoch (docs/trace-format.md, "Makespan"): both are
    printed, labelled, when they differ. A timeline no run measured (``simulated``) is named so.
    ``run_time`` (``replay.run_time``): the whole program's, when it differs."""
    if simulated:
        say(f"timeline   {fmt_time(res.measured_makespan_ns)}  ({simulated}, not measured)")
        say(f"predicted  {fmt_time(res.makespan_ns)}  ({_pct(res.rel_error_pct)} % vs the trace's "
            "timeline)")
        return
    say(f"measured   {fmt_time(res.measured_makespan_ns)}  (first traced event to the last)")
    if epoch_ns and abs(epoch_ns - res.measured_makespan_ns) > 0.0005 * epoch_ns:
        from hindsight.info import makespan_text
        say(makespan_text(epoch_ns) + "  (from the run's start barrier)")
    # the traced run is what a replay has; against the untraced one: hindsight validate
    say(f"predicted  {fmt_time(res.makespan_ns)}  ({_pct(res.rel_error_pct)} % vs the measured "
        f"{fmt_time(res.measured_makespan_ns)})")
    if run_time:
        r = run_time
        say(f"run time   {fmt_time(r['predicted_s'] * 1e9)} predicted, start barrier to the "
            f"program's end: the replay plus the {fmt_time(r['lead_in_s'] * 1e9)} before the "
            f"first traced event and {fmt_time(r['tail_s'] * 1e9)} after the last, as traced "
            f"(the traced run: {fmt_time(r['traced_wall_s'] * 1e9)})")


def ack_line(say, ack: dict | None) -> None:
    if ack and ack["held"]:
        say(f"ack_cells  {ack['held']} rendezvous send{'' if ack['held'] == 1 else 's'} held "
            f"until the receiver's next waiting call (all {ack['cells']} acknowledgement "
            f"cells taken; {ack['passes']} more replay{'' if ack['passes'] == 1 else 's'}"
            + ("" if ack["settled"] else ", not settled: the last one is shown") + ")")


def unexpected_line(say, unexp: dict | None) -> None:
    if unexp is not None:
        n = unexp["receives"]
        say(f"unexpected {n} eager receive{'' if n == 1 else 's'} found the message queued "
            "and paid o_unexpected + O_unexpected·k (rule unexpected_copy)")


def combine_line(say, comb: dict | None) -> None:
    if comb is not None:
        say(f"reduce     {comb['steps']} reduction steps combined {comb['bytes'] / 1e6:.3g} MB "
            f"in {comb['seconds'] * 1e3:.3g} ms over all ranks (gamma per byte, rule "
            "reduction_combine)")


def rule_lines(say, info: dict, more: list[str]) -> None:
    """The lines of the rules that changed this replay (``Result.info``), then ``more`` (the
    recorder's rules, ``TraceRules.lines``): in memory and streamed alike."""
    ack_line(say, info.get("ack_cells"))
    unexpected_line(say, info.get("unexpected_copy"))
    combine_line(say, info.get("reduction_combine"))
    flags_line(say, info)
    for line in more:
        say(line)


def flags_line(say, info: dict) -> None:
    from replay.flags import flag_line
    line = flag_line(info)
    if line:
        say(line)


def breakdown(say, cols: dict) -> None:
    """The per-rank table (``Result.breakdown_columns``): every rank, or the 16 that end last."""
    import numpy as np

    # (with noise put back, its own column: end = compute + comm + wait + noise)
    noise = cols.get("noise_s")
    say("rank   end        compute    comm       wait       "
        + ("noise      " * (noise is not None)) + "critical")
    n = len(cols["rank"])
    shown = np.arange(n) if n <= 16 else np.sort(np.argsort(-cols["end_s"], kind="stable")[:16])
    crit = cols.get("critical_s")
    for i in shown.tolist():
        say(f"{cols['rank'][i]:<6} {fmt_time(cols['end_s'][i] * 1e9):<10} "
            f"{fmt_time(cols['compute_s'][i] * 1e9):<10} {fmt_time(cols['comm_s'][i] * 1e9):<10} "
            f"{fmt_time(cols['wait_s'][i] * 1e9):<10} "
            + (f"{fmt_time(noise[i] * 1e9):<10} " if noise is not None else "")
            # no critical path under loggopsim: "-" rather than 0
            + (fmt_time(crit[i] * 1e9) if crit is not None else "-"))
    if n > 16:
        say(f"... {n - 16} more ranks (use --json)")


def injected_line(inj: dict) -> str:
    if inj["mode"] == "trace":
        return (f"with noise {fmt_time(inj['predicted_makespan_s'] * 1e9)}  "
                f"({_pct(inj['rel_error_pct'])} %; each call's unexplained time put back)")
    p, e = inj["predicted_makespan_s"], inj["rel_error_pct"]
    return (f"with noise {fmt_time(p['min'] * 1e9)} / {fmt_time(p['median'] * 1e9)} / "
            f"{fmt_time(p['max'] * 1e9)}  ({_pct(e['min'])} % / {_pct(e['median'])} % / "
            f"{_pct(e['max'])} %; min / median / max of {inj['runs']} runs with stalls drawn "
            f"from the trace, seed {inj['seed']})")


def _pct(x: float) -> str:
    """A signed percentage to 0.01, never "-0.00" (a difference that rounds to nothing)."""
    return f"{round(x, 2) + 0.0:+.2f}"
