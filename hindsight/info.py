"""`hindsight trace info`: what a trace holds, mostly from Parquet footers and a few columns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from hindsight import trace as tf
from hindsight.trace.manifest import untraced_text  # noqa: F401 (check.py reads it here)
from replay.units import fmt_params, fmt_time

#: How every command labels the makespan of a traced run (docs/trace-format.md, "Makespan"):
#: from the run's epoch (time 0, the start-up barrier) to the latest end of any rank's last
#: event, the manifest's ``makespan_ns``.
MAKESPAN_LABEL = "makespan (traced run)"


def traced_makespan_ns(t_first: int | None, t_last: int | None) -> int:
    """The makespan of a trace whose events span [t_first, t_last] ns: from the epoch (0; the
    first event if one lies before it) to the last event's end."""
    if t_first is None or t_last is None:
        return 0
    return int(t_last) - min(0, int(t_first))


def makespan_text(ns: float) -> str:
    """``makespan (traced run) 253.6 ms``: the one way commands print a traced run's makespan."""
    return f"{MAKESPAN_LABEL} {fmt_time(ns)}"


def trace_info(trace_dir: Path | str) -> dict[str, Any]:
    """A summary of one trace, from the Parquet footers plus the op and nbytes columns read one
    row group at a time (memory stays bounded by a row group, whatever the trace's size)."""
    trace_dir = Path(trace_dir)
    m = tf.read_manifest(trace_dir)
    sources = tf.rank_sources(trace_dir, m)
    nranks = int(m["ranks"])
    per_rank = np.zeros(nranks, np.int64)
    op_counts = np.zeros(len(tf.OPS) + 1, np.int64)  # last slot: names this version lacks
    is_send = np.append(tf.op_mask(np.arange(len(tf.OPS)), tf.SEND_OPS), False)
    codes = np.arange(len(tf.OPS))
    # bytes a one-sided operation moves: once, or twice for those that move them both ways
    rma_ways = np.append(tf.op_mask(codes, tf.RMA_OPS).astype(np.int64)
                         + tf.op_mask(codes, tf.RMA_BOTH_OPS), 0)
    sent = one_sided = 0
    poll_code = tf.OP_CODE["Poll"]
    poll_runs = polls = 0
    poll_ns = np.zeros(nranks, np.int64)    # per rank: time in runs of unsuccessful polls
    t_lo, t_hi = None, None
    for src in sources:
        for path in src.files:
            try:
                pf = src.open_file(path)
                tf.check_schema(path, pf.schema_arrow, None)
                per_rank[src.rank] += pf.metadata.num_rows
                for g in range(pf.metadata.num_row_groups):
                    if pf.metadata.row_group(g).num_rows == 0:
                        continue
                    lo, hi = _time_range(pf, g)
                    t_lo = lo if t_lo is None else min(t_lo, lo)
                    t_hi = hi if t_hi is None else max(t_hi, hi)
                    rg = pf.read_row_group(g, columns=["op", "nbytes", "peer"])
                    codes, _ = tf.table_columns(rg)
                    op = codes["op"].astype(np.int64)
                    op[op < 0] = len(tf.OPS)
                    op_counts += np.bincount(op, minlength=len(op_counts))
                    nb = codes["nbytes"]
                    # a send to MPI_PROC_NULL (peer -1) crosses no network
                    sent += int(np.maximum(nb[is_send[op] & (codes["peer"] >= 0)], 0).sum())
                    one_sided += int((np.maximum(nb, 0) * rma_ways[op]).sum())
                    is_poll = op == poll_code
                    if is_poll.any():   # (their times read only where there are some)
                        t = pf.read_row_group(g, columns=["t_start", "t_end"])
                        d = (t.column("t_end").to_numpy() - t.column("t_start").to_numpy())
                        poll_ns[src.rank] += int(d[is_poll].sum())
                        poll_runs += int(is_poll.sum())
                        polls += int(np.maximum(nb[is_poll], 0).sum())
            except tf.READ_ERRORS as exc:
                raise tf.TraceError(f"{path}: corrupt or truncated Parquet data ({exc})") from None
    names = list(tf.OPS) + ["(unknown)"]
    events_per_op = {names[i]: int(c) for i, c in enumerate(op_counts) if c}
    measured = traced_makespan_ns(t_lo, t_hi)
    complete = all(s.complete for s in sources) and bool(m.get("complete"))
    incomplete_ranks = [s.rank for s in sources if not s.complete]
    return {
        "path": str(trace_dir),
        "ranks": nranks,
        "events": int(per_rank.sum()),
        "events_per_rank": [int(x) for x in per_rank],
        "events_per_op": dict(sorted(events_per_op.items(), key=lambda kv: -kv[1])),
        "bytes_sent": int(sent),
        "bytes_one_sided": int(one_sided),
        "makespan_s": measured / 1e9,
        "poll_runs": poll_runs,
        "polls": polls,
        "poll_s_per_rank": [int(x) / 1e9 for x in poll_ns],
        "complete": complete,
        "incomplete_ranks": incomplete_ranks,
        "rank_status": [s.status for s in sources],
        "app": m.get("app"),
        "paradigm": m.get("paradigm"),
        "args": m.get("args"),
        "mpi_library": m.get("mpi_library"),
        "mpi_version": m.get("mpi_version"),
        "transport": m.get("transport"),
        "hosts": m.get("ranks_per_host"),
        "oversubscribed": m.get("oversubscribed"),
        "cpu_sampling": m.get("cpu_sampling"),
        "clock_method": (m.get("clock") or {}).get("method"),
        "result_verified": m.get("result_verified"),
        "wall_s": (m.get("wall_ns") or 0) / 1e9,
        "run_id": m.get("run_id"),
        "git_revision": m.get("git_revision"),
        "format_version": m.get("format_version"),
        "untraced_calls": dict(m.get("untraced_calls") or {}),
        "rank_errors": dict(m.get("rank_errors") or {}),
        "concurrent_mpi": tf.concurrent_text(m),
        "simulated": tf.timeline_made(m),
        "origin": m.get("origin") if isinstance(m.get("origin"), dict) else None,
        "run_problems": tf.run_problems(m),
        "timed_out_after_s": m.get("timed_out_after_s"),
        "stopped_in": m.get("stopped_in"),
        "replay": m.get("replay"),
    }


def _time_range(pf, group: int) -> tuple[int, int]:
    """(min t_start, max t_end) of a row group from its statistics; read the two columns only
    where a writer left no statistics."""
    rg = pf.metadata.row_group(group)
    names = [rg.column(i).path_in_schema for i in range(rg.num_columns)]
    st_lo = rg.column(names.index("t_start")).statistics
    st_hi = rg.column(names.index("t_end")).statistics
    if st_lo is not None and st_hi is not None and st_lo.has_min_max and st_hi.has_min_max:
        return int(st_lo.min), int(st_hi.max)
    import pyarrow.compute as pc    # here: replay prints makespan_text without reading Parquet

    t = pf.read_row_group(group, columns=["t_start", "t_end"])
    return int(pc.min(t.column("t_start")).as_py()), int(pc.max(t.column("t_end")).as_py())


def poll_text(info: dict[str, Any], top: int = 8) -> str:
    """``polling     2 runs of 1160 unsuccessful polls, 60.1 ms (per rank 60.1 ms, 0 ns)``:
    the time the ranks spent in runs of unsuccessful polls (``Poll`` rows), which a replay
    counts as waiting where the call ending the run found its message (rule poll_wait)."""
    per = info["poll_s_per_rank"]
    ranks = ", ".join(fmt_time(x * 1e9) for x in per[:top]) + (", ..." if len(per) > top else "")
    return (f"polling     {info['poll_runs']} runs of {info['polls']} unsuccessful polls, "
            f"{fmt_time(sum(per) * 1e9)} (per rank {ranks})")


def _origin_line(info: dict[str, Any]) -> str:
    """Where the timeline comes from: the MPI library of a traced run, or the model of a replayed
    timeline (``replay --out``), which ran on no MPI."""
    rep = info.get("replay")
    if rep:
        return (f"replayed    {rep.get('model')} {fmt_params(rep.get('params') or {})}  "
                f"(from run {rep.get('of_run_id')}; "
                "not a measured run)")
    origin = info.get("origin")
    if origin and origin.get("format"):
        return (f"origin      {str(origin['format']).upper()} {origin.get('source', '')}"
                + (f"  ({info['simulated']}; not a measured run)" if info.get("simulated")
                   else ""))
    return f"mpi         {info['mpi_library']} (MPI {info['mpi_version']})"


def _made_label(made: str) -> str:
    """``replayed`` or ``simulated``: how a timeline no run measured was made, in a word."""
    return "replayed" if made.startswith("replayed") else "simulated"


def _run_line(run_id: Any, app: Any, paradigm: Any) -> str:
    """The run's line: its id, the application and its paradigm (a program has none)."""
    return (f"run         {run_id}  app={app}"
            + (f"  paradigm={paradigm}" if paradigm is not None else ""))


def format_info(info: dict[str, Any]) -> str:
    lines = [
        f"trace       {info['path']}",
        _run_line(info["run_id"], info["app"], info["paradigm"]),
        f"ranks       {info['ranks']}  hosts={info['hosts']}  oversubscribed={info['oversubscribed']}",
        _origin_line(info),
        f"complete    {'yes' if info['complete'] else 'NO'}"
        + ("" if info["complete"] else f"  (ranks {info['incomplete_ranks']}: "
           f"{[info['rank_status'][r] for r in info['incomplete_ranks']]})"),
    ]
    if info.get("timed_out_after_s"):
        lines.append(f"timed out   after {info['timed_out_after_s']:g} s (collect --timeout)")
    if info.get("stopped_in"):
        from instrument.stopped import describe
        lines.append("where       " + "\n            ".join(describe(info["stopped_in"])))
    # (set by applications that check their result: a program's run has nothing to say)
    lines += ([f"verified    {info['result_verified']}"]
              if info["result_verified"] is not None else []) + [
        f"makespan (replayed) {fmt_time(info['makespan_s'] * 1e9)}" if info.get("replay") else
        f"makespan ({_made_label(info['simulated'])}) {fmt_time(info['makespan_s'] * 1e9)}"
        if info.get("simulated") else makespan_text(info["makespan_s"] * 1e9),
        f"events      {info['events']}  ({info['bytes_sent']} bytes sent in p2p"
        + (f", {info['bytes_one_sided']} moved by one-sided operations"
           if info.get("bytes_one_sided") else "") + ")",
    ]
    if info.get("wall_s") and not (info.get("replay") or info.get("simulated")):
        # the program's run time, what an untraced run measures (replay's `run time` line)
        lines.insert(-1, _wall_line(info["wall_s"] * 1e9))
    if info.get("poll_runs"):
        lines.append(poll_text(info))
    width = max((len(k) for k in info["events_per_op"]), default=4)
    for op, n in info["events_per_op"].items():
        lines.append(f"  {op:<{width}}  {n}")
    if info["transport"]:
        lines.append("transport   " + " ".join(f"{k}={v}" for k, v in info["transport"].items()))
    untraced = info.get("untraced_calls") or {}
    lines.append("untraced    " + (untraced_text(untraced) + " not traced: the traffic is incomplete"
                                   if untraced else "none"))
    for rank, text in (info.get("rank_errors") or {}).items():
        lines.append(f"rank {rank} raised: {text}")
    if info.get("concurrent_mpi"):
        lines.append(f"threads     {info['concurrent_mpi']}: its recording stopped there")
    if info.get("run_problems"):
        lines.append("disturbed   " + "; ".join(info["run_problems"])
                     + ": the measured times include other work's")
    return "\n".join(lines)


def _wall_line(ns: float) -> str:
    """The ``wall time`` line: a run's time from its start barrier to its program's end."""
    return f"wall time   {fmt_time(ns)}  (start barrier to the program's end)"


def format_untraced(path: Path | str, m: dict[str, Any]) -> str:
    """``trace info`` of an untraced run (``collect --untraced``): its manifest's facts."""
    status = m.get("rank_status") or []
    lines = [f"untraced    {path}: an untraced run (collect --untraced), no events",
             _run_line(m.get("run_id"), m.get("app"), m.get("paradigm")),
             # (ranks per host, as a trace's description gives them)
             f"ranks       {m.get('ranks')}  "
             f"hosts={m.get('ranks_per_host') or _ranks_per_host(m.get('hosts'))}  "
             f"oversubscribed={m.get('oversubscribed')}",
             f"complete    {'yes' if m.get('complete') else 'NO'}"
             + ("" if m.get("complete") else f"  (ranks: {status}, mpiexec exit code "
                f"{m.get('launcher_exit_code')})")]
    if m.get("makespan_ns"):
        lines.append(_wall_line(m["makespan_ns"]))
    problems = tf.run_problems(m)
    if problems:
        lines.append("disturbed   " + "; ".join(problems) + ": the wall time includes other "
                     "work's")
    return "\n".join(lines)


def _ranks_per_host(hosts: Any) -> Any:
    """``{host: rank count}`` of a manifest's ``hosts`` (host -> ranks), as is otherwise."""
    if isinstance(hosts, dict):
        return {h: len(rs) if isinstance(rs, list) else rs for h, rs in hosts.items()}
    return hosts


def format_noise(noise: dict[str, Any]) -> str:
    """The text of ``trace info --noise`` / ``--profile``."""
    def ms(s: float) -> str:
        return f"{s * 1e3:.3f} ms"

    w = noise["without_model"]
    lines = [f"in MPI      {ms(w['in_mpi_s'])} summed over ranks (per rank "
             + ", ".join(f"{x * 1e3:.3f}" for x in w["per_rank_in_mpi_s"][:8])
             + (" ..." if len(w["per_rank_in_mpi_s"]) > 8 else "") + " ms)",
             f"all in MPI  {ms(w['all_ranks_in_mpi_s'])} in {w['all_ranks_in_mpi_intervals']} "
             f"stretches with every rank inside an MPI call (of the {ms(w['makespan_s'])} "
             "from the first traced event to the last; the times below count from the first)"]
    for st in w["longest_all_in_mpi"][:5]:
        lines.append(f"  at {ms(st['start_s'])}: {ms(st['duration_s'])}")
    m = noise.get("with_model")
    if m:
        lines.append(m["line"] + f"  [profile {m['profile']}]")
        # unexplained is all a trace can tell: the machine's stalls, or what the model misses
        lines.append(f"  single rank {ms(m['single_rank_s'])}, several ranks at once "
                     f"{ms(m['machine_wide_s'])} ({ms(m['several_ranks_wall_s'])} wall time); "
                     "the machine's stalls or the model's own misses (docs/replay.md, Noise)")
        for st in m["stalls"][:5]:
            lines.append(f"  unexplained at {ms(st['start_s'])}: {ms(st['duration_s'])} on ranks "
                         + ",".join(str(r) for r in st["ranks"])
                         + ("..." if st["nranks"] > len(st["ranks"]) else ""))
        hist = [h for h in m["histogram"] if h["count"]]
        if hist:
            lines.append("  unexplained by duration: " + "; ".join(
                (f">= {ms(h['from_s'])}" if h["to_s"] is None
                 else f"{ms(h['from_s'])}-{ms(h['to_s'])}")
                + f": {h['count']} ({ms(h['rank_time_s'])} rank-time)" for h in hist))
    return "\n".join(lines)
