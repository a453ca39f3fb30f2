"""Skeleton-driven trace synthesis: the trace an application would record at any P and N,
without running it.

``predict.events`` gives every rank's events (from the skeletons' own schedules), in the order
``predict.order`` reads from a measured run or simulates; here they become trace rows. Compute
durations and message sizes are cost models of the units each event covers
(``predict.costmodel``). The synthetic trace lays each rank's events out on its own timeline:
compute regions last their fitted duration, MPI calls take no time; a network model then gives
the messages their cost when the trace is replayed, exactly as it would for a measured trace.
"""
from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

import replay
from apps.skeletons import skeleton
from hindsight import trace as tf
from hindsight.trace.write import EventRows, write_trace
from predict.config import UNIT_NAMES, Cost, Spec, SynthesisError, group_comm_id, is_block_sort
from predict.events import Ev, events
from predict.order import simulate_order


def _gap(cost: Cost, pickled: float, P: int) -> float:
    """ns outside regions before an event: ``pickle`` of the bytes around it, else ``other``
    (as ``costmodel.samples`` measures them)."""
    return (cost("pickle", pickled, P) if pickled else cost("other", 0, P)) * 1e9


def rows(spec: Spec, evs: list[list[Ev]], cost: Cost) -> list[dict[str, list]]:
    """Per-rank trace columns: each rank on its own clock, compute regions at their modelled
    duration, unregioned overhead before each MPI call, MPI calls taking no time."""
    P = spec.P
    sent: dict[tuple[int, int, int, int], deque] = {}
    nbytes_of: list[list[int]] = []
    for me, ev in enumerate(evs):  # message sizes first: a receive gets what its sender sent
        out = []
        for e in ev:
            if e.kind == "mpi" and e.name in tf.SEND_OPS:
                b = max(1, int(round(cost(f"bytes:{e.msg}", e.units, P))))
                sent.setdefault((me, e.peer, e.comm, e.tag), deque()).append(b)
                out.append(b)
        nbytes_of.append(out)
    cols = []
    for me, ev in enumerate(evs):
        c = EventRows()
        t = 0.0
        stack: list[tuple[str, float]] = []
        sizes = iter(nbytes_of[me])
        unpickle = 0.0  # as costmodel.samples: "other" depends on the bytes around a call

        def row(op: str, t0: float, t1: float, region: str | None, peer=-1, tag=-1, comm=-1,
                nb=-1, req=-1, cpu=-1) -> None:
            c.append(op, t0, t1, peer, tag, comm, nb, req, -1, region, cpu)

        for e in ev:
            if e.kind == "enter":
                if e.name != "send_to_server":
                    t += _gap(cost, unpickle, P)
                    unpickle = 0.0
                stack.append((e.name, t))
            elif e.kind == "exit":
                name, t0 = stack.pop()
                if name != "send_to_server":
                    t += max(0.0, cost(e.cost_key, e.cost_units, P)) * 1e9
                size = -1 if e.cost_key == "load" else int(round(e.units))
                row("region", t0, t, name, nb=size, cpu=int(round(t - t0)))
            else:
                reg = stack[-1][0] if stack else None
                if e.name in tf.SEND_OPS:
                    nb = next(sizes)
                    t += _gap(cost, unpickle + nb, P)
                    row(e.name, t, t, reg, e.peer, e.tag, e.comm, nb, e.request)
                    unpickle = 0.0
                elif e.name == "Recv":
                    q = sent.get((e.peer, me, e.comm, e.tag))
                    if not q:
                        raise SynthesisError(f"rank {me}: receive from {e.peer} tag {e.tag} "
                                             "without a matching send")
                    t += _gap(cost, unpickle, P)
                    nb = q.popleft()
                    # a traced pickle-API recv: matched probe, receive
                    row("Probe", t, t, reg, e.peer, e.tag, e.comm, nb)
                    row(e.name, t, t, reg, e.peer, e.tag, e.comm, nb)
                    unpickle = float(nb)
                else:
                    t += _gap(cost, unpickle, P)
                    unpickle = 0.0
                    if e.name == "Wait":
                        row("Wait", t, t, reg, comm=e.comm, req=e.request)
                    elif e.name == "Comm_split":
                        row("Comm_split", t, t, reg, e.peer, -1, e.comm)
                    else:
                        raise SynthesisError(f"no row for event {e.name}")
        cols.append(c)
    return cols


def _manifest(spec: Spec, extra: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "app": spec.app, "paradigm": spec.paradigm, "complete": True, "result_verified": None,
        "args": {"units": spec.N, "unit": UNIT_NAMES[spec.app], "units_per_task": spec.per_task},
        "hosts": {"synthetic": list(range(spec.P))},
        "synthetic": {"generator": "predict.synthesize", **(extra or {})},
    }


def _comms(spec: Spec) -> dict[int, list[int]]:
    """The group communicator the reduction skeletons split off (hypercube and block sort run
    on COMM_WORLD)."""
    if not skeleton(spec.paradigm).processor_sets or is_block_sort(spec):
        return {}
    return {group_comm_id(): list(range(spec.P))}


def columns(spec: Spec, cost: Cost, order: Sequence | None = None) -> list[dict]:
    """Per-rank trace columns of ``spec`` (``order`` simulated unless given)."""
    if order is None:
        order = simulate_order(spec, cost)
    return rows(spec, events(spec, order), cost)


def write(out_dir: Path | str, spec: Spec, cost: Cost, *,
          order: Sequence | None = None, extra: dict[str, Any] | None = None,
          model: Any = "hockney", params: dict[str, Any] | None = None,
          resolved: dict[str, Any] | None = None) -> Path:
    """Synthesize ``spec`` into the trace directory ``out_dir`` (manifest key ``synthetic``).

    The per-rank timelines are made causal by replaying them once under ``model`` (default: a
    network that costs nothing, so a receive simply ends no earlier than its send began;
    ``resolved`` = a model's parameters as ``replay.run`` takes them); the compute gaps between
    calls, which is what a later replay reads, do not change."""
    cols = columns(spec, cost, order)
    naive = trace(spec, cost, order=order, extra=extra, _cols=cols)
    params = {"l": 0, "g": 0} if params is None and model == "hockney" else params
    res = replay.run(replay.prepare(naive), model, params, record=True, resolved=resolved)
    at = 0
    ranks = [c.events(r) for r, c in enumerate(cols)]
    for ev in ranks:  # prepared rows are in (rank, seq) order, as the events are
        n = len(ev)
        ts = np.rint(res.row_start_ns[at:at + n]).astype(np.int64)
        ev.ints["t_start"] = ts
        ev.ints["t_end"] = np.maximum(np.rint(res.row_end_ns[at:at + n]).astype(np.int64), ts)
        at += n
    info = {"timeline": f"replayed under {res.model} {res.params}", **(extra or {})}
    return write_trace(out_dir, ranks, communicators=_comms(spec),
                       manifest=_manifest(spec, info))


def trace(spec: Spec, cost: Cost, *, order: Sequence | None = None,
          extra: dict[str, Any] | None = None, _cols: list[EventRows] | None = None) -> tf.Trace:
    """The trace in memory (no files), each rank on its own clock (not causal across ranks,
    which replay does not need): what ``hindsight predict`` replays per (P, N)."""
    cols = _cols if _cols is not None else columns(spec, cost, order)
    tables = [c.events(r).to_table() for r, c in enumerate(cols)]
    table = pa.concat_tables(tables, promote_options="permissive")
    manifest = {"format_version": tf.FORMAT_VERSION, "run_id": "synthetic", "ranks": spec.P,
                "rank_status": ["complete"] * spec.P,
                "communicators": {str(k): v for k, v in {0: list(range(spec.P)),
                                                         **_comms(spec)}.items()},
                **_manifest(spec, extra)}
    sources = [tf.RankSource(r, [], True, "complete") for r in range(spec.P)]
    return tf.Trace(Path(f"<synthetic {spec.app} {spec.paradigm} P={spec.P} N={spec.N}>"),
                    manifest, table, sources)
