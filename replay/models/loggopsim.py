"""LogGOPSim (Hoefler, Schneider, Lumsdaine, "LogGOPSim - Simulating Large-Scale Applications in
the LogGOPS Model", HPDC 2010): the trace as a GOAL schedule, replayed with that simulator's rules.

Each rank's program order becomes a schedule (``replay.loggopsim.schedule``: bursts are ``calc``,
a blocking call is ``required`` by the next operation, a non-blocking post ``irequired`` and its
Wait ``requires`` it; collectives are their algorithms' messages). A trace imported from GOAL
replays the schedule it came from instead. The simulator (``replay.loggopsim.simulator``)
charges, for a message of s bytes (times in ns)::

    send issued at t      t >= CPU free and send NIC free
    sender CPU busy       until t + o_s + (s-1)·O_s           send NIC busy until t + g + (s-1)·G
    first byte arrives    t + o_s + L
    message handled at    h = max(arrival, receiver CPU free, receive NIC free), posted or not
    receiver CPU busy     until h + o_r + (s-1)·max(O_r, G)   receive NIC busy until h + g + (s-1)·G
    receive completes     then, if it was posted; else when it is posted (posting is free)
    send completes        when issued if s <= S (eager), else when the receive matches it

Matching is first-match on (source, tag), in posted / arrival order; a rank ends when its CPU was
last busy. LogGOPSim has one o and one O; hindsight's o_send/o_recv, O_send/O_recv and the o_b·P
term of paper 004 (o = o'_a + o'_b·P) are kept: with equal sides and o_b = 0 this is LogGOPSim's
model, and whole-ns parameters give its end times to the nanosecond. Where these rules differ
from ``loggps``, and why: docs/interop.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, NamedTuple

import numpy as np

from replay.errors import ReplayError
from replay.models.base import NetworkModel, Param, ParamError, register
from replay.models.loggps import LogGPS

if TYPE_CHECKING:
    from replay.loggopsim.schedule import TraceSchedule
    from replay.prepare import Prepared

# The simulator (numba) is imported when a replay runs: choosing the model, listing it or
# checking its parameters needs none of it.


class Replayed(NamedTuple):
    """What the simulator computed; ``replay.engine.run`` turns it into a ``Result`` (same field
    names). Per-rank arrays in ns; per-row arrays (prepared rows) None without ``record``."""

    makespan_ns: float
    rank_end_ns: np.ndarray
    rank_compute_ns: np.ndarray
    rank_comm_ns: np.ndarray
    rank_wait_ns: np.ndarray
    operations: int
    messages: int
    algorithms: dict[str, str]
    info: dict[str, Any]
    row_start_ns: np.ndarray | None
    row_end_ns: np.ndarray | None


def params_from_values(values: Mapping[str, float], nranks: int) -> np.ndarray:
    """The simulator's parameter vector from resolved values (internal units) for ``nranks``."""
    from replay.loggopsim.simulator import params_vector

    return params_vector(
        L=values["L"], o_send=values["o_send"] + values["o_b_send"] * nranks,
        o_recv=values["o_recv"] + values["o_b_recv"] * nranks, O_send=values["O_send"],
        O_recv=values["O_recv"], g=values["g"], G=values["G"], S=values["S"])


#: LogGPS's parameters LogGOPSim has no rule for (progress, ack_cells, per-call overheads, a
#: reduction's combining time): accepting them would show them in a result they took no part in
NOT_SIMULATED = ("progress", "ack_cells", "o_irecv", "o_wait", "o_probe", "o_call",
                 "o_unexpected", "O_unexpected", "o_hop", "gamma")


@register
class LogGOPSim(NetworkModel):
    NAME = "loggopsim"
    OWN_SIMULATOR = True
    RETIRED = {"semantics": "this model applies LogGOPSim's rules; nothing to choose"}
    # LogGPS's parameters, read from the same [loggps] section of a calibration profile, except
    # the rules LogGOPSim does not have (NOT_SIMULATED)
    PARAMS: dict[str, Param] = {k: v for k, v in LogGPS.PARAMS.items() if k not in NOT_SIMULATED}
    ALIASES = dict(LogGPS.ALIASES)

    def check(self, v: dict) -> None:
        if v["L"] < 0:
            raise ParamError(f"L={v['L']:g} ns: LogGOPSim's rules take a latency >= 0")

    def from_profile(self, data: dict, path: Path) -> dict:
        """[loggps] less what LogGOPSim has no rule for; a negative L (calibrate's fit when the
        calls' overheads overlap the transfer) is LogGOPSim's L = 0."""
        out = {k: v for k, v in LogGPS.from_profile(self, data, path).items()
               if k not in NOT_SIMULATED}
        return self.within_own_bounds(out)

    def within_own_bounds(self, values: dict) -> dict:
        """LogGOPSim's L = 0 for a negative L (calibrate's fit, rule native_call_costs)."""
        return {**values, "L": max(float(values["L"]), 0.0)}

    def run_replay(self, prep: Prepared, values: Mapping[str, float], *, scale: np.ndarray,
                   cpu_time: bool = False, algorithms: Mapping[str, str] | None = None,
                   record: bool = True, delay_ns: np.ndarray | None = None) -> Replayed:
        """Replay ``prep`` under LogGOPSim's rules; ``scale`` multiplies the bursts (per region
        + 1, as ``replay.engine`` computes it). Injected delays (``delay_ns``) are not
        supported."""
        from hindsight.system import page_out
        from replay.loggopsim.goal import GoalError
        from replay.loggopsim.rows import row_times
        from replay.loggopsim.schedule import (passive_round_trips, schedule_from_trace,
                                               sidecar_schedule)
        from replay.loggopsim.simulator import CALC, SEND, ScheduleError, simulate

        if delay_ns is not None:
            raise ReplayError(f"injected delays are not supported by model {self.NAME}")
        traced: TraceSchedule | None = None
        try:
            sched = sidecar_schedule(prep)
        except GoalError as exc:        # the trace's own schedule file: a trace problem
            raise ReplayError(str(exc)) from None
        if sched is not None:
            if scale[0] != 1.0:     # x·1 is x: no pass over the operations for it
                sched.size = np.where(sched.kind == CALC, sched.size * scale[0], sched.size)
            source = "the GOAL schedule the trace was imported from"
        else:
            traced = schedule_from_trace(prep, scale, cpu_time, algorithms)
            sched = traced.schedule
            source = "the trace's program order as a GOAL schedule"
        try:
            # a schedule from the trace's cache is mapped: the pages read only to set the run
            # up would stay resident through it (9 bytes a dependency, 8 an operation)
            # without ``record`` no row's times are made: no operation's start or partner kept
            sim = simulate(sched, params_from_values(values, prep.nranks), read=page_out,
                           times=record)
        except ScheduleError as exc:
            raise ReplayError(f"replay deadlock (model {self.NAME}): {exc}") from None
        info: dict[str, Any] = {"schedule": source}
        left_out = passive_round_trips(prep) if traced is not None else 0
        if left_out:
            info["not_modelled"] = (f"{left_out} one-sided passive round trips (lock epochs, "
                                    "PSCW gets) are left out: LogGOPSim's rules have no "
                                    "passive target")
        comp = sim.rank_cpu_busy
        comm = sim.rank_overhead
        rs = re = None
        if record:
            rs, re = row_times(prep, sched, sim, traced)
        return Replayed(
            makespan_ns=float(sim.rank_end.max()) if len(sim.rank_end) else 0.0,
            rank_end_ns=sim.rank_end, rank_compute_ns=comp, rank_comm_ns=comm,
            rank_wait_ns=np.maximum(sim.rank_end - comp - comm, 0.0), operations=sched.nops,
            messages=int((sched.kind == SEND).sum()),
            algorithms=dict(traced.stream.algorithms) if traced is not None else {},
            info=info, row_start_ns=rs, row_end_ns=re)
