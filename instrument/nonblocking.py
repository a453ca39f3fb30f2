"""The traced non-blocking collectives (`Ibarrier`, `Iallreduce`, ...): each call is one post row
with a request id, sized as its blocking collective is (`instrument.comm`), and returns a
`TracedRequest`, whose `Wait*`/`Test*` records the completion row (docs/trace-format.md)."""

from __future__ import annotations

from time import perf_counter_ns as _now
from typing import Any, Callable

from mpi4py import MPI

from hindsight.trace import core as tf
from instrument import completion as _completion
from instrument.completion import TracedRequest
from instrument.sizes import nbytes as _nbytes
from instrument.tracer import RECORD as _ROW, pack as _pack

_IN_PLACE = MPI.IN_PLACE


def post(comm, op: int, fn: Callable, args: tuple, kwargs: dict, nbytes: int,
          root: int) -> TracedRequest:
    """Call ``fn`` (mpi4py's non-blocking collective) on ``comm``, record its post row and
    return its request, traced."""
    T = _completion._T     # the tracer of this process (``instrument.comm.set_tracer``)
    t0 = _now()
    req = fn(comm, *args, **kwargs)
    t1 = _now()
    rid = T.next_request
    T.next_request = rid + 1
    w = comm._w
    o = T.off
    _pack(T.buf, o, op, T.region, t0, -1, -1, -1, comm._id, nbytes, rid,
          root if w is None or root < 0 else w[root], t1)
    o += _ROW
    T.off = o
    if o >= T.end:
        T.roll()
    r = TracedRequest(req)
    r._hid = rid
    r._cid = comm._id
    return r


def _reduced(sendbuf, recvbuf) -> int:
    return _nbytes(sendbuf) if sendbuf is not _IN_PLACE else _nbytes(recvbuf)


#: Per call, what its blocking collective records for the same arguments:
#: ``(comm, *args) -> (nbytes, root as a communicator rank, or -1)``.
SIZES: dict[str, Callable[..., tuple[int, int]]] = {
    "Ibarrier": lambda c: (0, -1),
    "Ibcast": lambda c, buf, root=0: (_nbytes(buf), root),
    "Ireduce": lambda c, sb, rb, op=None, root=0: (_reduced(sb, rb), root),
    "Iallreduce": lambda c, sb, rb, op=None: (_reduced(sb, rb), -1),
    "Iscan": lambda c, sb, rb, op=None: (_reduced(sb, rb), -1),
    "Iexscan": lambda c, sb, rb, op=None: (_reduced(sb, rb), -1),
    "Igather": lambda c, sb, rb, root=0: (
        _nbytes(sb) if sb is not _IN_PLACE else c._share(rb), root),
    "Igatherv": lambda c, sb, rb, root=0: (_nbytes(sb) if sb is not _IN_PLACE else -1, root),
    "Iscatter": lambda c, sb, rb, root=0: (
        _nbytes(rb) if rb is not _IN_PLACE else c._share(sb), root),
    "Iscatterv": lambda c, sb, rb, root=0: (
        _nbytes(sb) if c.Get_rank() == root and sb is not None else _nbytes(rb), root),
    "Iallgather": lambda c, sb, rb: (_nbytes(sb) if sb is not _IN_PLACE else c._share(rb), -1),
    "Iallgatherv": lambda c, sb, rb: (_nbytes(sb), -1),
    "Ialltoall": lambda c, sb, rb: (c._share(sb if sb is not _IN_PLACE else rb), -1),
    "Ialltoallv": lambda c, sb, rb: (_nbytes(sb if sb is not _IN_PLACE else rb), -1),
    "Ireduce_scatter": lambda c, sb, rb, counts=None, op=None: (
        _nbytes(sb if sb is not _IN_PLACE else rb), -1),
    "Ireduce_scatter_block": lambda c, sb, rb, op=None: (_nbytes(rb), -1),
}
assert set(SIZES) == tf.NONBLOCKING_COLLECTIVE_OPS - tf.NEIGHBOR_OPS  # (those: instrument.topology)


def _method(name: str, fn: Callable, size: Callable) -> Callable:
    """The traced ``name``: mpi4py's ``fn``, a post row sized by ``size``, a traced request."""
    code = tf.OP_CODE[name]

    def method(self, *args: Any, **kwargs: Any) -> TracedRequest:
        nbytes, root = size(self, *args, **kwargs)
        return post(self, code, fn, args, kwargs, nbytes, root)
    method.__name__ = name
    method.__doc__ = fn.__doc__
    return method


def install(cls: type) -> None:
    """Give ``cls`` (``TracedComm``) the traced non-blocking collectives."""
    for name, size in SIZES.items():
        setattr(cls, name, _method(name, getattr(MPI.Intracomm, name), size))
