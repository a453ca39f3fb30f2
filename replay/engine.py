"""Running replays: ``run(prepared, model, params) -> Result`` (sweeps: ``replay.sweeps``).

See docs/replay.md for the semantics. Times in results are ns from the trace's first event.
"""

from __future__ import annotations

import math
import os
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from hindsight import trace as tf
from hindsight.errors import UsageError
from replay import kernel as K
from replay import models as M
from replay.models.base import NetworkModel
from replay.errors import ReplayError, deadlock
from replay.prepare import Prepared
from replay.stream import Stream, call_classes
from replay.ack_cells import ACK_PASSES, ack_floors, cells_of
from replay.critical import critical_path_of, row_times as put_row_times
from replay.flags import FlagCosts, eligible, flag_summary, with_costs
from replay.resume import Resume, away_in_trace, warm_bursts
from replay.tracer_cost import less_tracer
from replay.transport_cost import TransportCost

# pandas and pyarrow are imported where they are used (the frames, writing a timeline): a replay
# that prints its summary needs neither, and importing them takes a third of a second.
if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa


@dataclass
class Result:
    """One replay. Per-rank arrays are indexed by rank; per-row arrays by the prepared rows."""

    model: str
    params: dict[str, Any]
    compute_scale: float
    makespan_ns: float
    measured_makespan_ns: float
    rank_end_ns: np.ndarray
    rank_compute_ns: np.ndarray
    rank_comm_ns: np.ndarray
    rank_wait_ns: np.ndarray
    measured_rank_end_ns: np.ndarray
    events: int
    operations: int
    messages: int
    algorithms: dict[str, str] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    row_start_ns: np.ndarray | None = None
    row_end_ns: np.ndarray | None = None
    critical_rows: np.ndarray | None = None     # bool per row
    critical_rank_ns: np.ndarray | None = None  # time on the critical path spent on each rank
    #: per rank, the noise delays put back (``delay_ns``), apart from its compute; None: none
    rank_noise_ns: np.ndarray | None = None
    prepared: Prepared | None = field(default=None, repr=False)
    #: per rank at its end: time, send and receive free, its last burst's end (the kernel's
    #: carry)
    carry: np.ndarray | None = field(default=None, repr=False)
    #: per rank, the trace time its last burst ended (rule resume_after_wait; None: not applied)
    resume_from: np.ndarray | None = field(default=None, repr=False)
    #: per trace message (``Prepared.msgs``), its send's post time, ns (with ``carry`` only)
    sent_ns: np.ndarray | None = field(default=None, repr=False)

    @property
    def rel_error_pct(self) -> float:
        if self.measured_makespan_ns <= 0:
            return float("nan")
        return 100.0 * (self.makespan_ns - self.measured_makespan_ns) / self.measured_makespan_ns

    def breakdown(self) -> pd.DataFrame:
        """Per rank: replayed end, compute, communication, waiting, the noise put back (when
        it was) and the critical path's share (seconds)."""
        import pandas as pd

        return pd.DataFrame(self.breakdown_columns())

    def breakdown_columns(self) -> dict[str, np.ndarray]:
        """``breakdown``'s columns as arrays (what the CLI prints, without importing pandas)."""
        cols = {
            "rank": np.arange(len(self.rank_end_ns)),
            "end_s": self.rank_end_ns / 1e9,
            "measured_end_s": self.measured_rank_end_ns / 1e9,
            "compute_s": self.rank_compute_ns / 1e9,
            "comm_s": self.rank_comm_ns / 1e9,
            "wait_s": self.rank_wait_ns / 1e9,
        }
        if self.rank_noise_ns is not None:
            cols["noise_s"] = self.rank_noise_ns / 1e9
        if self.critical_rank_ns is not None:
            cols["critical_s"] = self.critical_rank_ns / 1e9
        return cols

    def events_frame(self) -> pd.DataFrame:
        """Per trace row: rank, seq, op, measured and replayed start/end (ns), critical flag."""
        if self.row_start_ns is None or self.prepared is None:
            raise ReplayError("this result was computed without per-event times (record=False)")
        import pandas as pd

        r = self.prepared.rows
        return pd.DataFrame({
            "rank": r.rank, "seq": r.seq,
            "op": pd.Categorical.from_codes(np.where(r.op >= 0, r.op, 0),
                                            categories=list(tf.OPS)),
            "measured_start_ns": r.t_start - self.prepared.t0,
            "measured_end_ns": r.t_end - self.prepared.t0,
            "start_ns": self.row_start_ns, "end_ns": self.row_end_ns,
            "critical": self.critical_rows,
        })

    def summary(self) -> dict[str, Any]:
        """The JSON document of ``hindsight replay --json``."""
        out = {
            "model": self.model,
            "params": {k: v for k, v in self.params.items()},
            "compute_scale": self.compute_scale,
            "predicted_makespan_s": self.makespan_ns / 1e9,
            "measured_makespan_s": self.measured_makespan_ns / 1e9,
            "rel_error_pct": self.rel_error_pct,
            "events": self.events,
            "operations": self.operations,
            "messages": self.messages,
            "ranks": len(self.rank_end_ns),
            "breakdown": {
                "compute_s": (self.rank_compute_ns / 1e9).tolist(),
                "comm_s": (self.rank_comm_ns / 1e9).tolist(),
                "wait_s": (self.rank_wait_ns / 1e9).tolist(),
                "end_s": (self.rank_end_ns / 1e9).tolist(),
            },
            "algorithms": self.algorithms,
        }
        if self.rank_noise_ns is not None:
            out["breakdown"]["noise_s"] = (self.rank_noise_ns / 1e9).tolist()
        if self.critical_rank_ns is not None:
            cr = self.critical_rank_ns
            top = np.argsort(-cr)[:8]
            out["critical_path"] = {
                "events": int(self.critical_rows.sum()) if self.critical_rows is not None else 0,
                "ranks": {int(r): float(cr[r] / 1e9) for r in top if cr[r] > 0},
            }
        out.update(self.info)
        return out

    def to_arrow(self, table: pa.Table | None = None) -> pa.Table:
        """The replayed timeline in the trace schema (t_start/t_end replaced, ns from 0)."""
        if self.row_start_ns is None or self.prepared is None:
            raise ReplayError("this result was computed without per-event times (record=False)")
        import pyarrow as pa

        if table is None:
            if self.prepared.table is not None:
                table = self.prepared.table
            else:
                table = tf.read_trace(self.prepared.path).table
        rank = table.column("rank").to_numpy()
        seq = table.column("seq").to_numpy()
        # rows of the prepared form are in (rank, seq) order
        order = np.lexsort((seq, rank))
        table = table.take(pa.array(order))
        ts = np.rint(self.row_start_ns).astype(np.int64)
        te = np.maximum(np.rint(self.row_end_ns).astype(np.int64), ts)
        i0 = table.schema.get_field_index("t_start")
        table = table.set_column(i0, "t_start", pa.array(ts))
        i1 = table.schema.get_field_index("t_end")
        return table.set_column(i1, "t_end", pa.array(te))

    def write(self, out_dir: Path | str) -> Path:
        """Write the replayed timeline as a trace directory (readable by ``read_trace``)."""
        table = self.to_arrow()
        nr = len(self.rank_end_ns)
        bounds = tf.rank_offsets(table.column("rank").to_numpy(), nr)
        src = self.prepared.manifest if self.prepared else {}
        return tf.write_trace(
            out_dir, [table.slice(bounds[r], bounds[r + 1] - bounds[r]) for r in range(nr)],
            run_id="replay-" + uuid.uuid4().hex[:8],
            manifest={"makespan_ns": int(round(self.makespan_ns)),
                      "communicators": src.get("communicators", {}), "hosts": src.get("hosts"),
                      "app": src.get("app"),
                      "replay": {"of_run_id": src.get("run_id"), "model": self.model,
                                 "params": self.params, "compute_scale": self.compute_scale,
                                 "algorithms": self.algorithms}})


# ------------------------------------------------------------------------------------------------


def scale_array(prep: Prepared, compute_scale: float,
                region_scale: Mapping[str, float] | None) -> np.ndarray:
    """Compute-scale factor per region code + 1 (index 0: no region): ``compute_scale``, with
    ``region_scale`` overriding it for the regions it names."""
    if not (compute_scale >= 0 and math.isfinite(compute_scale)):
        raise UsageError(f"--compute-scale {compute_scale}: must be a finite number >= 0")
    sc = np.full(len(prep.region_names) + 1, float(compute_scale))
    for name, f in (region_scale or {}).items():
        if not (f >= 0 and math.isfinite(f)):
            raise ReplayError(f"region scale {name}={f}: must be a finite number >= 0")
        if name not in prep.region_names:
            raise ReplayError(f"region scale {name}: the trace has no region named '{name}' "
                              f"(it has {', '.join(prep.region_names) or 'none'})")
        sc[prep.region_names.index(name) + 1] = float(f)
    return sc


def _kernel(st: Stream, prm: np.ndarray, mode: int, scale: np.ndarray, trail: np.ndarray,
            cpu: bool, m_delay: np.ndarray, record: bool,
            cost: np.ndarray | None = None,
            floor: np.ndarray | None = None,
            carry: K.Carry | None = None,
            no_queue: np.ndarray | None = None,
            starts: bool = True, resume: np.ndarray | None = None) -> tuple[int, K.Outputs]:
    """Replay ``st`` once (``cpu``: the bursts scaled by their region's CPU/wall ratio;
    ``cost``: each operation's own call overhead, ns, or None; ``floor``: per message the
    earliest end of its rendezvous send, rule ``ack_cells``, or None; ``carry``: where each rank
    starts and the messages sent before, ``kernel.Carry``, or None: at 0; ``resume``: rule
    resume_after_wait's table, ``Ops.resume``, or None). Returns how many
    ranks could not finish (0: success) and the outputs, per operation only with ``record``
    (their starts only with ``starts`` too)."""
    P = len(st.rank_off) - 1
    n = st.nops if record else 0
    out = K.Outputs(
        rank_end=np.zeros(P), rank_comp=np.zeros(P), rank_comm=np.zeros(P),
        rank_wait=np.zeros(P), m_sp=np.full(st.nmsg, -1.0), m_rp=np.full(st.nmsg, -1.0),
        op_start=np.empty(n if starts else 0), op_end=np.empty(n), pred=np.empty(n, np.int8),
        coll_last=np.full(len(st.coll_n) if record else 0, -1, np.int64),
        carry=K.start_carry(P) if carry is None else np.array(carry.ranks, np.float64))
    if carry is not None and carry.sent is not None:
        out.m_sp[st.trace_ids(carry.sent[0])] = carry.sent[1]
    ops = K.Ops(st.rank_off, st.kind, st.msg, st.burst_cpu if cpu else st.burst, st.reg,
                st.loc, st.dep_lat, st.coll_n, np.zeros(0) if cost is None else cost,
                np.zeros(0) if resume is None else resume, combine_after(st, prm, mode))
    sync = st.m_sync if st.m_sync is not None else np.zeros(st.nmsg, np.bool_)
    msgs = K.Messages(st.m_bytes, st.m_src, st.m_dst, m_delay, sync,
                      np.zeros(0) if floor is None else floor,
                      np.zeros(st.nmsg if prm[K.P_OU] > 0 or prm[K.P_OUK] > 0 else 0, np.bool_),
                      np.zeros(0, np.bool_) if no_queue is None else no_queue)
    status = K.replay_kernel(ops, msgs, out, scale, trail, prm, mode, record)
    return status, out._replace(unexpected=int(msgs.unexp.sum()) if len(msgs.unexp) else -1)


def combine_after(st: Stream, prm: np.ndarray, mode: int) -> np.ndarray:
    """Rule ``reduction_combine`` (network mode): per operation, the time its rank then spends
    combining what a reduction's step received, γ·k ns (``Stream.combine_op``); empty where
    γ is 0 or nothing combines."""
    if not _combines(st, prm, mode):
        return np.zeros(0)
    return np.bincount(st.combine_op, weights=prm[K.P_GAMMA] * np.maximum(st.combine_bytes, 0.0),
                       minlength=st.nops)


def _combines(st: Stream, prm: np.ndarray, mode: int) -> bool:
    """Whether rule ``reduction_combine`` changes this replay: γ > 0 in network mode and a
    reduction step in the stream that combines."""
    return (mode != K.MODE_MEASURED and prm[K.P_GAMMA] > 0.0 and st.combine_op is not None
            and len(st.combine_op) > 0)


def run(prep: Prepared, model: str | NetworkModel = "loggps",
        params: Mapping[str, Any] | Sequence[tuple[str, Any]] | None = None, *,
        profile: Mapping[str, Any] | str | os.PathLike | None = None,
        compute_scale: float = 1.0,
        region_scale: Mapping[str, float] | None = None, cpu_time: bool = False,
        algorithms: Mapping[str, str] | None = None, record: bool = True,
        resolved: dict[str, Any] | None = None, delay_ns: np.ndarray | None = None,
        transport_cost: TransportCost | None = None,
        carry: K.Carry | None = None, flags: FlagCosts | None = None,
        row_times: bool = True, tracer_cost: np.ndarray | None = None,
        resume: Resume | None = None, resume_from: np.ndarray | None = None) -> Result:
    """Replay ``prep`` under ``model``.

    ``params`` are ``NAME -> VALUE`` (strings with units or numbers in SI base units), applied
    over the model defaults and ``profile`` (the parameters ``replay.models.load_profile``
    gives, or a profile file's path, read so); ``resolved`` skips parsing (internal units). The
    profile's rules that ``hindsight replay`` also applies are arguments of their own here
    (``flags``, ``tracer_cost``, ``resume``, ``transport_cost``; ``replay.recorder_rules``).
    ``record`` keeps per-event times and computes the critical path; ``row_times=False`` keeps
    the critical path only (no ``row_start_ns``/``row_end_ns``: 24 bytes a row). ``delay_ns``
    (per prepared row, ns) holds the rank that long just before it enters the row's call
    (injected noise, ``replay.noise``): added to the burst before the call's first operation,
    unscaled by ``compute_scale``, and reported as ``noise_injected_s`` rather than as compute.
    ``transport_cost`` (``replay.transport_cost``, network models run by the kernel) replaces
    the trace transport's cost in each burst after a call by the replayed transport's; the
    change is ``info["transport_burst_cost_s"]``. ``flags`` (a profile's ``[shared_flag]``
    costs, ``replay.flags``; network models run by the kernel) prices the collectives MPICH
    runs on shared flags within a node by rule shared_flag_meeting instead of their patterns.
    ``tracer_cost`` (per kernel kind, ns: ``replay.tracer_cost.per_kind_ns``; network models run
    by the kernel) takes the Python tracer's own time per call out of the burst before each
    operation (rule python_tracer_in_bursts); the change is ``info["python_tracer_in_bursts_s"]``.
    ``resume`` (``replay.resume``, network models run by the kernel): each burst after a
    rank's first call loses what the traced time away added to it and takes what the replayed
    one adds (rule resume_after_wait; ``info["resume_after_wait_s"]``); ``resume_from``: per
    rank, the trace time the previous segment's last burst ended (streamed replays;
    ``Result.resume_from`` of that segment).
    """
    mod = M.get_model(model) if isinstance(model, str) else model
    if isinstance(profile, (str, os.PathLike)):
        profile = M.load_profile(profile, mod)
    values = resolved if resolved is not None else M.resolve(mod, params or {}, profile)
    if mod.OWN_SIMULATOR:
        # a model with a simulator of its own (loggopsim): it replays, the engine reports
        if transport_cost is not None:
            raise ReplayError(f"--model {mod.NAME} replays in a simulator of its own: rule "
                              "transport_burst_cost is not applied there (drop --trace-profile)")
        out = mod.run_replay(prep, values, scale=scale_array(prep, compute_scale, region_scale),
                             cpu_time=cpu_time, algorithms=algorithms, record=record,
                             delay_ns=delay_ns)
        return Result(model=mod.NAME, params=_display(mod, values), compute_scale=compute_scale,
                      measured_makespan_ns=prep.measured_makespan_ns,
                      measured_rank_end_ns=prep.measured_rank_end_ns, events=prep.nrows,
                      prepared=prep, **out._asdict())
    measured = mod.MODE == "measured"
    flags = None if measured else flags
    st = prep.stream(expand=not measured, algorithms=dict(algorithms or {}),
                     shared_flags=flags.limits() if flags is not None else frozenset())
    if st.meetings is not None:
        loc, dep_lat = with_costs(st.loc, st.dep_lat, st.nops, st.meetings, flags)
        st = replace(st, loc=loc, dep_lat=dep_lat)
    away = resume_to = None
    if resume is not None and not measured:
        away, resume_to = away_in_trace(st.rank_off, st.burst, st.op_row, prep.rows.t_start,
                                        resume_from)
    tracer_change = None
    if tracer_cost is not None and not measured:
        st, tracer_change = _less_tracer(st, tracer_cost)
    resume_removed = None
    if away is not None:
        st, resume_removed = _warm(st, resume, away)
    burst_change = None
    if transport_cost is not None and not measured:
        st, burst_change = _with_transport_cost(st, transport_cost)
    ctx = _Ctx(prep, st)
    prm = mod.kernel_params(values, ctx)
    scale = scale_array(prep, compute_scale, region_scale)
    mode = K.MODE_MEASURED if measured else K.MODE_NETWORK
    trail = prep.trail
    injected = None
    if delay_ns is not None:
        st, scale, trail, injected = _with_delays(prep, st, scale, cpu_time, delay_ns)
    cost = None
    table = mod.call_costs(values)
    if table is not None and np.any(table > 0):
        cost = table[call_classes(st, prep.rows.op)]
    passes = mod.passes(values)
    resume_tab = resume.target.table() if resume_removed is not None else None
    no_queue = _never_queued(st, prep.host_of_rank) if prm[K.P_OU] > 0 or prm[K.P_OUK] > 0 \
        else None
    cells = cells_of(values, prm, measured)
    record_all = cells > 0          # rule ack_cells reads every operation's replayed times
    out = None
    for p in range(passes):
        # a model's per-message delay may depend on the previous pass (M/M/1's measured rho)
        send_times = out.m_sp if out is not None else None
        horizon = float(out.rank_end.max()) if out is not None and len(out.rank_end) else 0.0
        last = p == passes - 1
        m_delay, info = mod.message_delay(values, ctx, send_times, horizon, last)
        if len(m_delay) == 0:
            m_delay = np.zeros(1)
        stuck, out = _kernel(st, prm, mode, scale, trail, cpu_time, m_delay,
                             (record or record_all) and last, cost, carry=carry,
                             no_queue=no_queue, starts=row_times or record_all,
                             resume=resume_tab)
        if stuck:
            S = values.get("S", np.inf) if "S" in mod.PARAMS else np.inf
            raise deadlock(stuck, bool(len(st.coll_done_rows)), S,
                           int(np.count_nonzero(st.m_bytes > S)) if np.isfinite(S) else 0)
    if cells:
        out = _with_ack_cells(st, prm, mode, scale, trail, cpu_time, m_delay, cost, out, cells,
                              info, carry, no_queue, resume_tab)
    res = Result(
        model=mod.NAME, params=_display(mod, values), compute_scale=compute_scale,
        makespan_ns=float(out.rank_end.max()) if len(out.rank_end) else 0.0,
        measured_makespan_ns=prep.measured_makespan_ns,
        rank_end_ns=out.rank_end, rank_compute_ns=out.rank_comp, rank_comm_ns=out.rank_comm,
        rank_wait_ns=out.rank_wait, measured_rank_end_ns=prep.measured_rank_end_ns,
        events=prep.nrows, operations=st.nops, messages=st.nmsg, algorithms=st.algorithms,
        info=info, prepared=prep, carry=out.carry,
        sent_ns=None if carry is None else out.m_sp[st.trace_ids(np.arange(len(prep.msgs.bytes)))])
    if out.unexpected >= 0:
        res.info["unexpected_copy"] = {"receives": out.unexpected}   # rule unexpected_copy
    if _combines(st, prm, mode):                # rule reduction_combine
        combined = float(np.maximum(st.combine_bytes, 0.0).sum())
        res.info["reduction_combine"] = {"steps": int(len(st.combine_op)), "bytes": combined,
                                         "seconds": prm[K.P_GAMMA] * combined / 1e9}
    if st.selected:
        # what MPICH's selection ("mpich") ran, per collective: algorithm -> instances
        res.info["collective_algorithms_run"] = st.selected
    if flags is not None and not measured:
        # (the instances the rule would price at any size: those above the probe are said)
        candidates = eligible(prep.coll, prep.comm_members, prep.host_of_rank,
                              prep.algorithms(algorithms),
                              {op: math.inf for op in flags.ops()}, prep.rows.nbytes)
        summary = flag_summary(st.meetings, flags, prep.coll, prep.rows.nbytes, candidates)
        if summary:
            res.info["shared_flag_meeting"] = summary
    if tracer_change is not None:
        res.info["python_tracer_in_bursts_s"] = tracer_change
    if resume_removed is not None:
        res.resume_from = resume_to
        res.info["resume_after_wait_s"] = {
            "removed": resume_removed, "added": _resume_added(st, out, scale, trail, cpu_time)}
    if burst_change is not None:
        res.info["transport_burst_cost_s"] = burst_change
        res.info["transport_burst_cost"] = (f"{transport_cost.source.transport} -> "
                                            f"{transport_cost.target.transport}")
    if injected is not None:
        # the kernel counted the delays as bursts; they are the machine's, not the program's
        res.rank_compute_ns = out.rank_comp - injected
        res.rank_noise_ns = injected
        res.info["noise_injected_s"] = float(injected.sum()) / 1e9
    if record:
        if row_times:
            put_row_times(res, prep, st, out)
        critical_path_of(res, prep, st, out)
    return res


def _less_tracer(st: Stream, c_ns: np.ndarray) -> tuple[Stream, float]:
    """A copy of ``st`` whose bursts follow rule ``python_tracer_in_bursts``, and the change of
    the bursts' sum in seconds (wall)."""
    burst = less_tracer(st.burst, st.kind, c_ns)
    burst_cpu = less_tracer(st.burst_cpu, st.kind, c_ns)
    return replace(st, burst=burst, burst_cpu=burst_cpu), float(burst.sum() - st.burst.sum()) / 1e9


def _warm(st: Stream, rule: Resume, away: np.ndarray) -> tuple[Stream, float]:
    """A copy of ``st`` whose bursts lost what the traced time away added (rule
    resume_after_wait), and what they lost in seconds (wall)."""
    tab = rule.source.table()
    burst = warm_bursts(tab, np.asarray(st.burst, np.float64), away)
    cpu = burst if st.burst_cpu is st.burst else \
        warm_bursts(tab, np.asarray(st.burst_cpu, np.float64), away)
    return replace(st, burst=burst, burst_cpu=cpu), float(st.burst.sum() - burst.sum()) / 1e9


def _resume_added(st: Stream, out: K.Outputs, scale: np.ndarray, trail: np.ndarray,
                  cpu: bool) -> float:
    """What the kernel's rule resume_after_wait added to all ranks' compute (s): their
    compute less the bursts and trails it was given."""
    b = st.burst_cpu if cpu else st.burst
    given = float((b * scale[st.reg + 1]).sum()) + float((trail * scale[0]).sum())
    return max(float(out.rank_comp.sum()) - given, 0.0) / 1e9


def _with_transport_cost(st: Stream, cost: TransportCost) -> tuple[Stream, float]:
    """A copy of ``st`` whose bursts follow rule ``transport_burst_cost`` (the bursts before
    each rank's first operation kept), and the change of the bursts' sum in seconds (wall)."""
    first = np.zeros(len(st.burst), np.bool_)
    starts = np.asarray(st.rank_off[:-1], np.int64)
    first[starts[starts < len(st.burst)]] = True
    k = _bytes_before(st, first)
    burst = cost.apply(st.burst, first, k)
    burst_cpu = cost.apply(st.burst_cpu, first, k)
    return replace(st, burst=burst, burst_cpu=burst_cpu), float(burst.sum() - st.burst.sum()) / 1e9


#: the kernel operations whose ``msg`` is a message (not a collective instance) that moves bytes
_MOVES_BYTES = (K.SEND, K.RECV, K.ISEND, K.IRECV, K.WSEND, K.WRECV, K.PSEND, K.PRECV)


def _bytes_before(st: Stream, first: np.ndarray) -> np.ndarray:
    """Per operation, rule transport_burst_cost's k: the largest message moved by the
    operations between the previous burst and this one (the call before the burst: a
    Sendrecv's send and receive, a Waitall's completions), 0 when they moved none or for a
    rank's first operation; only operations with a burst before them need it."""
    n = len(st.burst)
    k = np.zeros(n)
    if n < 2:
        return k
    mb = np.zeros(n)
    moved = np.isin(st.kind, _MOVES_BYTES) & (st.msg >= 0)
    mb[moved] = np.asarray(st.m_bytes)[st.msg[moved]]
    start = (np.asarray(st.burst) > 0) | first
    start[0] = True
    seg = np.cumsum(start) - 1
    segmax = np.maximum.reduceat(mb, np.flatnonzero(start))
    after = start & ~first & (seg > 0)
    k[after] = segmax[seg[after] - 1]
    return k


def _never_queued(st: Stream, host_of_rank: np.ndarray) -> np.ndarray | None:
    """Per message, whether rule ``unexpected_copy`` never queues it: a message of the stand-in
    pattern of a collective MPICH runs on shared flags (``Stream.m_shared_flag``) between two
    ranks of one host. None: no such message."""
    if st.m_shared_flag is None:
        return None
    hosts = np.asarray(host_of_rank)
    return st.m_shared_flag & (hosts[st.m_src] == hosts[st.m_dst])


def _with_ack_cells(st: Stream, prm: np.ndarray, mode: int, scale: np.ndarray,
                    trail: np.ndarray, cpu: bool, m_delay: np.ndarray,
                    cost: np.ndarray | None, out: K.Outputs, cells: int,
                    info: dict[str, Any], carry: np.ndarray | None = None,
                    no_queue: np.ndarray | None = None,
                    resume: np.ndarray | None = None) -> K.Outputs:
    """Replay again under rule ``ack_cells`` until the floors it sets no longer change (at
    most ``ACK_PASSES`` replays; ``info["ack_cells"]`` says how many acknowledgements were
    held, the passes taken and whether they settled)."""
    prev = None
    held = 0
    settled = False
    passes = 0
    for _ in range(ACK_PASSES):
        floor = ack_floors(st, prm, m_delay, out, cells)
        held = int((floor >= 0).sum())
        if held == 0 and prev is None:
            settled = True
            break
        if prev is not None and np.array_equal(floor, prev):
            settled = True
            break
        stuck, out = _kernel(st, prm, mode, scale, trail, cpu, m_delay, True, cost, floor, carry,
                             no_queue, resume=resume)
        passes += 1
        if stuck:
            raise deadlock(stuck, False, where=" under rule ack_cells", by_values=True)
        prev = floor
    info["ack_cells"] = {"cells": cells, "held": held, "passes": passes, "settled": settled}
    return out


def _with_delays(prep: Prepared, st: Stream, scale: np.ndarray, cpu: bool,
                 delay_ns: np.ndarray) -> tuple[Stream, np.ndarray, np.ndarray, np.ndarray]:
    """A copy of ``st`` whose bursts are already scaled and carry ``delay_ns`` (per row) before
    each row's first operation, with a scale of ones: a delay is the machine's time, not a
    computation that ``compute_scale`` may shrink. Returns (stream, scale, trail, per-rank
    injected ns)."""
    delay_ns = np.asarray(delay_ns, np.float64)
    if delay_ns.shape != (prep.nrows,) or not np.all(np.isfinite(delay_ns)) \
            or (delay_ns < 0).any():
        raise ReplayError("delay_ns: one finite delay >= 0 per prepared row is needed")
    base = st.burst_cpu if cpu else st.burst
    eff = base * scale[st.reg.astype(np.int64) + 1]
    rows = np.flatnonzero(delay_ns > 0)
    first = np.searchsorted(st.op_row, rows, side="left")
    ok = first < len(st.op_row)
    ok[ok] = st.op_row[first[ok]] == rows[ok]
    eff[first[ok]] += delay_ns[rows[ok]]
    injected = np.bincount(prep.rows.rank[rows[ok]], weights=delay_ns[rows[ok]],
                           minlength=prep.nranks)[:prep.nranks]
    st2 = replace(st, burst=eff, burst_cpu=eff)
    return st2, np.ones_like(scale), prep.trail * scale[0], injected


class _Ctx:
    """What a model may look at: sizes and endpoints of every message, placement, defaults."""

    def __init__(self, prep: Prepared, st: Stream):
        self.nranks = prep.nranks
        self.m_bytes = st.m_bytes
        self.m_src = st.m_src
        self.m_dst = st.m_dst
        self.host_of_rank = prep.host_of_rank
        self._prep = prep
        self._st = st

    def default_tcomp(self) -> float:
        return float((self._st.burst.sum() + self._prep.trail.sum()) / max(self._st.nmsg, 1))


def _display(mod: NetworkModel, values: dict[str, Any]) -> dict[str, Any]:
    """Parameters in SI base units (seconds, bytes, bytes/s, s/byte) for reports."""
    out = {}
    for k, v in values.items():
        kind = mod.PARAMS[k].kind
        if kind in ("time", "time_per_byte"):
            out[k] = v / 1e9
        elif kind == "bandwidth":
            out[k] = v * 1e9
        else:
            out[k] = v
        if isinstance(out[k], float) and math.isinf(out[k]):
            out[k] = "inf"
    return out
