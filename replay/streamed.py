"""A streamed replay: a trace larger than memory, replayed segment by segment.

``run_streamed(trace_dir, model, ...)`` reads the trace a window of rows per rank at a time,
cuts it where nothing is in flight (``replay.segments``), prepares each segment as a trace of
its own and replays it from where the segment before ended: each rank starts at its time,
with its sending and receiving free when they were (``replay_kernel``'s carry), its first burst
beginning at the end of its MPI rows before. Nothing crosses a consistent cut but eager
messages, which start the segment that receives them with the post time their send had (rule
``carried_message``), so the result is the in-memory replay's (``tests/test_streamed.py``
compares them), in memory for one window.

What needs the whole trace at once is refused in one line: per-event times (``--out``, the
critical path), ``--cpu-time`` (a region's CPU share is written after the rows it encloses),
noise, a partial trace, and models that look at all messages before replaying (``mm1``) or run
their own simulator (``loggopsim``). Rule ``ack_cells`` applies within each segment: an
acknowledgement still held at a cut is not carried (``info["streamed"]`` says how many
segments there were).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np

from replay import kernel as K
from replay import models as M
from replay.engine import Result, run
from replay.flags import FlagCosts
from replay.kernel import Carry, start_carry
from replay.errors import ReplayError
from replay.prepare import _prepare_columns
from replay.resume import Resume
from replay.segments import segments

#: rows per rank a streamed replay reads at a time unless told (``--window``)
DEFAULT_WINDOW = 1 << 17


def refuse(model: M.NetworkModel, values: dict[str, Any]) -> None:
    """Raise ``ReplayError`` when ``model`` cannot be streamed."""
    if model.OWN_SIMULATOR:
        raise ReplayError(f"--model {model.NAME} runs a simulator of its own on the whole "
                          "trace's schedule: not available in a streamed replay")
    if model.WHOLE_TRACE or model.passes(values) > 1:
        raise ReplayError(f"--model {model.NAME} needs the whole trace in memory (it looks at "
                          "every message before replaying): not available in a streamed replay")


def run_streamed(trace_dir: Path | str, model: str | M.NetworkModel = "loggps",
                 params: Mapping[str, Any] | None = None, *,
                 profile: Mapping[str, Any] | None = None, compute_scale: float = 1.0,
                 region_scale: Mapping[str, float] | None = None,
                 algorithms: Mapping[str, str] | None = None,
                 resolved: dict[str, Any] | None = None,
                 window: int = DEFAULT_WINDOW, max_window: int | None = None,
                 flags: FlagCosts | None = None, tracer_cost: np.ndarray | None = None,
                 resume: Resume | None = None) -> Result:
    """Replay the complete trace ``trace_dir`` under ``model`` a segment at a time (at least
    ``window`` rows per rank read at once, at most ``max_window`` where no cut is found sooner:
    ``replay.segments``). The result has no per-event times. ``flags``, ``tracer_cost``,
    ``resume``: as ``engine.run``'s (each segment's bursts start rule resume_after_wait's clock
    where the segment before left it)."""
    mod = M.get_model(model) if isinstance(model, str) else model
    values = resolved if resolved is not None else M.resolve(mod, params or {}, profile)
    refuse(mod, values)
    region_scale = dict(region_scale or {})
    seen: set[str] = set()
    carry = resume_from = None
    sent_before: dict[tuple[int, int], float] = {}  # (rank, seq) of a send -> its post time
    comp = comm = wait = rank_end = measured_end = None
    ended = None
    events = operations = messages = p2p = nseg = 0
    info: dict[str, Any] = {}
    last: tuple | None = None         # the model's name, parameters and algorithms
    for seg in segments(trace_dir, window, _eager_limit(mod, values), max_window=max_window):
        t0 = seg.t0
        prep = _prepare_columns(seg.cols, False, t0=t0, since=seg.since,
                                last=seg.last or seg.done)
        P = prep.nranks
        sent, crossing = _stand_ins(prep, seg, sent_before)
        names = set(prep.region_names)
        seen |= names
        res = run(prep, mod, resolved=values, compute_scale=compute_scale,
                  region_scale={k: v for k, v in region_scale.items() if k in names},
                  algorithms=algorithms, record=False, flags=flags, tracer_cost=tracer_cost,
                  carry=Carry(start_carry(P) if carry is None else carry, sent),
                  resume=resume, resume_from=resume_from)
        carry = res.carry
        resume_from = res.resume_from
        sent_before = {key: float(res.sent_ns[m]) for key, m in crossing.items()}
        if comp is None:
            comp, comm, wait = np.zeros(P), np.zeros(P), np.zeros(P)
            measured_end = np.zeros(P)
        comp += res.rank_compute_ns
        comm += res.rank_comm_ns
        wait += res.rank_wait_ns
        if rank_end is None:
            rank_end, ended = np.zeros(P), np.zeros(P, bool)
        live = ~ended                 # a rank's end (with its trail) is the segment's ending it
        rank_end[live] = res.rank_end_ns[live]
        ended |= seg.done
        real = ~seg.stand_in
        if real.any():
            np.maximum.at(measured_end, prep.rows.rank[real],
                          (prep.rows.t_end[real] - t0).astype(float))
        events += int(real.sum())
        operations += res.operations
        messages += res.messages - len(crossing)
        p2p += len(prep.msgs.bytes) - len(crossing)
        nseg += 1
        _merge_info(info, res.info)
        if prep.notes:
            info.setdefault("notes", []).extend(n for n in prep.notes
                                                if n not in info.get("notes", []))
        last = (res.model, res.params, res.algorithms)
        del prep, res                 # before the next window is read
    if last is None:
        # No rank recorded a row (a program without MPI calls): nothing to stream, and the
        # answer is the in-memory replay's, so that both paths agree.
        from replay.prepare import prepare
        res = run(prepare(trace_dir), mod, resolved=values, compute_scale=compute_scale,
                  region_scale=region_scale, algorithms=algorithms, record=False, flags=flags,
                  tracer_cost=tracer_cost, resume=resume)
        res.info["streamed"] = {"segments": 0, "window": int(window)}
        return res
    missing = sorted(set(region_scale) - seen)
    if missing:
        raise ReplayError(f"region scale {missing[0]}: the trace has no region named "
                          f"'{missing[0]}'")
    info["streamed"] = {"segments": nseg, "window": int(window), "p2p_messages": p2p}
    return Result(model=last[0], params=last[1], compute_scale=compute_scale,
                  makespan_ns=float(rank_end.max()) if len(rank_end) else 0.0,
                  measured_makespan_ns=float(measured_end.max()) if len(measured_end) else 0.0,
                  rank_end_ns=rank_end, rank_compute_ns=comp, rank_comm_ns=comm,
                  rank_wait_ns=wait, measured_rank_end_ns=measured_end, events=events,
                  operations=operations, messages=messages, algorithms=last[2],
                  info=info, carry=carry)


def _eager_limit(mod: M.NetworkModel, values: dict[str, Any]) -> float:
    """The largest message the model sends eagerly (its threshold S): such a message may cross a
    cut (rule ``carried_message``)."""
    class _Ctx:
        nranks = 1
    return float(mod.kernel_params(values, _Ctx())[K.P_S])


def _stand_ins(prep, seg, sent_before: dict[tuple[int, int], float]):
    """Rule ``carried_message`` on a prepared segment: its stand-in rows become rows of no
    operation (op 0), the messages whose send stands in get the post time that send had in its
    own segment. Returns (those messages and times, for ``Carry``) and, per send whose receive
    stands in (a later segment receives it), its (rank, seq) -> message."""
    rows = prep.rows
    idx = np.flatnonzero(seg.stand_in)
    ids, times = [], []
    crossing: dict[tuple[int, int], int] = {}
    for i in idx.tolist():
        m = int(rows.msg[i])
        if seg.later[i]:
            s = int(prep.msgs.send_row[m])
            crossing[(int(rows.rank[s]), int(rows.seq[s]))] = m
        else:
            key = (int(rows.rank[i]), int(rows.seq[i]))
            if m >= 0 and key in sent_before:
                ids.append(m)
                times.append(sent_before[key])
            elif m >= 0:
                raise ReplayError(f"internal: the send of rank {key[0]} seq {key[1]} crossed a "
                                  "cut without its post time")
    rows.op[idx] = 0
    rows.kind[idx] = K.NOP
    rows.burst[idx] = 0.0
    sent = (np.asarray(ids, np.int64), np.asarray(times, np.float64)) if ids else None
    return sent, crossing


def _merge_info(total: dict[str, Any], one: dict[str, Any]) -> None:
    """Add a segment's ``Result.info`` to the replay's: counts summed (also inside nested
    dicts), rule ack_cells's passes the most any segment took, 'settled' only if every
    segment's was; rule shared_flag_meeting's calls and calls above the probe summed, its
    largest communicator the largest; anything else as the last segment has it."""
    for k, v in one.items():
        have = total.get(k)
        if k == "ack_cells" and have is not None:
            have["held"] += v["held"]
            have["passes"] = max(have["passes"], v["passes"])
            have["settled"] = have["settled"] and v["settled"]
        elif k == "shared_flag_meeting" and have is not None:
            for op, n in v["calls"].items():
                have["calls"][op] = have["calls"].get(op, 0) + n
            have["largest_communicator"] = max(have["largest_communicator"],
                                               v["largest_communicator"])
            above = have.setdefault("above_probe", {})
            for op, (n, k) in (v.get("above_probe") or {}).items():
                above[op] = [above.get(op, [0, k])[0] + n, k]
        elif isinstance(v, dict) and isinstance(have, dict):
            _merge_info(have, v)
        elif isinstance(v, (int, float)) and not isinstance(v, bool) and \
                isinstance(have, (int, float)):
            total[k] = have + v
        else:
            total[k] = dict(v) if isinstance(v, dict) else v
