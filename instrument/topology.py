"""Topology communicators (`Create_cart`, `Create_graph`, `Create_dist_graph*`): each rank's
out-neighbours, recorded when the communicator is made (the manifest's `neighbours`), and the
traced neighbourhood collectives, one row each (docs/trace-format.md).

A row's `nbytes` is what the rank sends each out-neighbour: the send buffer for
`Neighbor_allgather`, one block of it (the buffer over the out-degree) for `Neighbor_alltoall`,
and for the v-variants the whole send buffer (replay splits it evenly). The non-blocking forms
are a post row with a request id, as the other non-blocking collectives
(instrument.nonblocking)."""

from __future__ import annotations

from time import perf_counter_ns as _now, thread_time_ns as _cpu
from typing import Any, Callable

from mpi4py import MPI

from hindsight.trace import core as tf
from instrument import completion as _completion
from instrument import nonblocking as _nonblocking
from instrument.sizes import nbytes as _nbytes, pickled_size as _pickled_size
from instrument.tracer import RECORD as _ROW, pack as _pack

_T = MPI.Topocomm


def adopted(comm: Any, cid: int, members: list[int]) -> None:
    """Record the out-neighbours of a new traced communicator ``comm`` if it has a topology."""
    if isinstance(comm, _T):
        outs = [members[o] if o >= 0 else -1 for o in comm.outedges]
        _completion._T.add_neighbours(cid, outs)


def _per_neighbour(comm, buf) -> int:
    n = _nbytes(buf)
    deg = len(comm.outedges)
    return n // deg if n > 0 and deg else n


#: Per call: (comm, *args) -> the bytes its row records.
SIZES: dict[str, Callable[..., int]] = {
    "Neighbor_allgather": lambda c, sb, rb: _nbytes(sb),
    "Neighbor_allgatherv": lambda c, sb, rb: _nbytes(sb),
    "Neighbor_alltoall": lambda c, sb, rb: _per_neighbour(c, sb),
    "Neighbor_alltoallv": lambda c, sb, rb: _nbytes(sb),
    "neighbor_allgather": lambda c, obj: _pickled_size(obj),
    "neighbor_alltoall": lambda c, objs: (
        sum(_pickled_size(o) for o in objs) // max(1, len(objs))),
}


def _blocking(name: str, fn: Callable, size: Callable) -> Callable:
    code = tf.OP_CODE[name[0].upper() + name[1:]]

    def method(self, *args: Any, **kwargs: Any) -> Any:
        T = _completion._T
        cpu = T.cpu_all
        c0 = _cpu() if cpu else 0
        t0 = _now()
        out = fn(self, *args, **kwargs)
        t1 = _now()
        o = T.off
        _pack(T.buf, o, code, T.region, t0, _cpu() - c0 if cpu else -1, -1, -1, self._id,
              size(self, *args, **kwargs), -1, -1, t1)
        o += _ROW
        T.off = o
        if o >= T.end:
            T.roll()
        return out
    method.__name__ = name
    method.__doc__ = fn.__doc__
    return method


def _nonblocking_method(name: str, fn: Callable, size: Callable) -> Callable:
    code = tf.OP_CODE[name]

    def method(self, *args: Any, **kwargs: Any) -> Any:
        return _nonblocking.post(self, code, fn, args, kwargs, size(self, *args, **kwargs), -1)
    method.__name__ = name
    method.__doc__ = fn.__doc__
    return method


def methods() -> dict[str, Callable]:
    """The traced neighbourhood collectives, for the traced topology classes."""
    out = {name: _blocking(name, getattr(_T, name), size) for name, size in SIZES.items()}
    for name in ("Ineighbor_allgather", "Ineighbor_allgatherv", "Ineighbor_alltoall",
                 "Ineighbor_alltoallv"):
        out[name] = _nonblocking_method(name, getattr(_T, name), SIZES["N" + name[2:]])
    return out
