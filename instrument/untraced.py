"""Calls the tracer does not model, counted so that a trace says its traffic is incomplete.

Persistent collectives, `Alltoallw` and `Ialltoallw`, partitioned and combined
non-blocking send-receives, neighbourhood collectives, intercommunicator traffic and some window
calls (instrument.rma) are not recorded as rows (replay has no model for them). Each such call is
counted per name in `COUNTS`; the rank's file metadata carries the totals and the manifest
their sum over the ranks (`untraced_calls`, instrument/seal.py). Only these methods are wrapped:
the calls traced as rows keep their own wrappers and cost nothing more.
"""

from __future__ import annotations

from typing import Any, Callable

from mpi4py import MPI

#: call name -> times this rank called it.
COUNTS: dict[str, int] = {}

#: Methods of an intracommunicator that are counted, not traced.
COMM_UNTRACED = (
    "Alltoallw", "Isendrecv", "Isendrecv_replace", "Ialltoallw",
    "Barrier_init", "Bcast_init", "Gather_init", "Gatherv_init", "Scatter_init", "Scatterv_init",
    "Allgather_init", "Allgatherv_init", "Alltoall_init", "Alltoallv_init", "Alltoallw_init",
    "Reduce_init", "Allreduce_init", "Reduce_scatter_init", "Reduce_scatter_block_init",
    "Scan_init", "Exscan_init", "Psend_init", "Precv_init",
    "Create_intercomm", "Spawn", "Spawn_multiple", "Accept", "Connect", "Join")

#: Neighbourhood collectives of a communicator with a topology (Cartcomm, Graphcomm, ...) that
#: instrument.topology does not trace.
TOPO_UNTRACED = (
    "Neighbor_alltoallw", "Ineighbor_alltoallw", "Neighbor_allgather_init",
    "Neighbor_allgatherv_init", "Neighbor_alltoall_init", "Neighbor_alltoallv_init",
    "Neighbor_alltoallw_init")

#: Everything that moves data or synchronises on an intercommunicator (counted as
#: "Intercomm.<name>").
INTERCOMM_UNTRACED = (
    "Send", "Ssend", "Bsend", "Rsend", "Recv", "Isend", "Issend", "Ibsend", "Irsend", "Irecv",
    "Sendrecv", "Sendrecv_replace", "Probe", "Iprobe", "send", "ssend", "bsend", "recv", "isend",
    "issend", "ibsend", "irecv", "sendrecv", "probe", "iprobe", "Send_init", "Ssend_init",
    "Bsend_init", "Rsend_init", "Recv_init", "Barrier", "Bcast", "Gather", "Gatherv", "Scatter",
    "Scatterv", "Allgather", "Allgatherv", "Alltoall", "Alltoallv", "Reduce", "Allreduce",
    "Reduce_scatter", "Reduce_scatter_block", "barrier", "bcast", "gather", "scatter",
    "allgather", "alltoall", "reduce", "allreduce", "Dup", "Split", "Ibarrier", "Ibcast",
    "Igather", "Igatherv", "Iscatter", "Iscatterv", "Iallgather", "Iallgatherv", "Ialltoall",
    "Ialltoallv", "Ireduce", "Iallreduce", "Ireduce_scatter", "Ireduce_scatter_block", "Iscan",
    "Iexscan") + COMM_UNTRACED

def count(name: str) -> None:
    """One more call of `name` on this rank."""
    COUNTS[name] = COUNTS.get(name, 0) + 1


def counting(name: str, fn: Callable) -> Callable:
    """`fn` (a method), counting each call under `name` before it runs."""
    def method(*args: Any, **kwargs: Any) -> Any:
        count(name)
        return fn(*args, **kwargs)
    # its name in the code object too, so that a stack dump (instrument.stopped) names the call
    own = getattr(fn, "__name__", name)
    method.__code__ = method.__code__.replace(co_name=own, co_qualname=own)
    method.__name__ = method.__qualname__ = own
    method.__doc__ = getattr(fn, "__doc__", None)
    return method


def add_counters(cls: type, base: type, names: tuple[str, ...], prefix: str = "") -> None:
    """Give `cls` a counting wrapper of each of `base`'s methods in `names` it does not define."""
    for name in names:
        fn = getattr(base, name, None)
        if fn is not None and name not in cls.__dict__:
            setattr(cls, name, counting(prefix + name, fn))


#: Calls of `COMM_SELF` that make inter-process traffic (its own traffic is each rank's alone and
#: not counted): dynamic processes, as `mpi4py.futures` starts its workers.
SELF_UNTRACED = ("Spawn", "Spawn_multiple", "Accept", "Connect")


class SelfComm(MPI.Intracomm):
    """The traced program's `COMM_SELF`: the real one, its dynamic-process calls counted."""


add_counters(SelfComm, MPI.Intracomm, SELF_UNTRACED)


class TracedIntercomm(MPI.Intercomm):
    """An intercommunicator whose traffic is counted (not recorded)."""


add_counters(TracedIntercomm, MPI.Intercomm, INTERCOMM_UNTRACED, "Intercomm.")
