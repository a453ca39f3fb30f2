"""Matched probes and the receives of the messages they return, recorded as the rows of a probe
and a receive: the rows a pickle-API `recv` gives (instrument.comm) and the PMPI library writes
for `MPI_Mprobe`/`MPI_Mrecv`.

- `Mprobe` / `mprobe`: a `Probe` row (source, tag, bytes of the matched message); `Improbe` /
  `improbe`: an `Iprobe` row when they find a message, one more poll of the rank's Poll row
  when they do not (as `Iprobe`);
- the message's `Recv`: a `Recv` row; `recv` (pickle): a `Recv` row for the transfer into a
  buffer of the probed size, the unpickling after it in the rank's own time (as `recv`);
- `Irecv` / `irecv`: an `Irecv` post naming the matched source and tag, its request traced and
  completed like any other (instrument.completion).

The probes are `TracedComm`'s methods (`attach`); the program's `MPI.Message` is `TracedMessage`
(instrument/run.py), whose class-method probes (`MPI.Message.Probe(comm, ...)`) go through a
traced communicator's, and which `isinstance` sees as mpi4py's class.
"""

from __future__ import annotations

from time import perf_counter_ns as _now

from mpi4py import MPI

from hindsight.trace import core as tf
from instrument.completion import failed_poll, recv_post

_M = MPI.Message
_BYTE = MPI.BYTE
_ANY_SOURCE = MPI.ANY_SOURCE
_ANY_TAG = MPI.ANY_TAG
_PROBE, _IPROBE, _RECV, _IRECV = (tf.OP_CODE[n] for n in ("Probe", "Iprobe", "Recv", "Irecv"))


class SameAs(type):
    """`isinstance` and `issubclass` against the class answer as against mpi4py's own base
    (the traced program's `MPI.Message`, and instrument.groups' `Intracomm`/`Intercomm`)."""

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, cls.__mro__[1])

    def __subclasscheck__(cls, sub) -> bool:
        return issubclass(sub, cls.__mro__[1])


class TracedMessage(_M, metaclass=SameAs):
    """A matched message of a traced communicator, whose receive is recorded."""

    __slots__ = ("_comm", "_src", "_tag", "_n")     # as probed (source: communicator rank)

    def Recv(self, buf, status: MPI.Status | None = None) -> None:
        st = status if status is not None else MPI.Status()
        t0 = _now()
        _M.Recv(self, buf, st)
        t1 = _now()
        self._comm._rec(_RECV, t0, t1, -1, self._src, self._tag, st.Get_count(_BYTE))

    def recv(self, status: MPI.Status | None = None):
        data = bytearray(self._n)
        self.Recv([data, _BYTE], status)
        # (a probe of MPI_PROC_NULL's empty message: mpi4py's recv returns None)
        return None if self._src == MPI.PROC_NULL else MPI.pickle.loads(data)

    def Irecv(self, buf) -> MPI.Request:
        return recv_post(_IRECV, lambda comm, b, src, tag: _M.Irecv(self, b))(
            self._comm, buf, self._src, self._tag)

    def irecv(self) -> MPI.Request:
        return recv_post(_IRECV, lambda comm, b, src, tag: _M.irecv(self))(
            self._comm, None, self._src, self._tag)


def _through(probe: str):
    """`MPI.Message.<name>(comm, ...)`, the class-method form of a matched probe: `comm`'s
    `probe` (a traced communicator's records it)."""
    def method(cls, comm, source: int = _ANY_SOURCE, tag: int = _ANY_TAG,
               status: MPI.Status | None = None):
        return getattr(comm, probe)(source, tag, status)
    method.__name__ = probe
    return classmethod(method)


for _name, _probe in (("Probe", "Mprobe"), ("Iprobe", "Improbe"), ("probe", "mprobe"),
                      ("iprobe", "improbe")):
    setattr(TracedMessage, _name, _through(_probe))


def _matched(comm, op: int, fn, source: int, tag: int, status):
    """Call the probe `fn`; a found message gives a row `op` and a TracedMessage, else None."""
    st = status if status is not None else MPI.Status()
    t0 = _now()
    m = fn(comm, source, tag, st)
    t1 = _now()
    if m is None:
        failed_poll(t0, t1)     # an Improbe that found nothing (an Mprobe always finds one)
        return None
    src, tg, n = st.Get_source(), st.Get_tag(), st.Get_count(_BYTE)
    comm._rec(op, t0, t1, -1, src, tg, n)
    msg = TracedMessage(m)
    msg._comm, msg._src, msg._tag, msg._n = comm, src, tg, n
    return msg


def attach(cls: type, base: type) -> None:
    """Give the traced communicator class `cls` (a subclass of mpi4py's `base`) the matched
    probes above."""
    def make(op: int, fn):
        def probe(self, source: int = _ANY_SOURCE, tag: int = _ANY_TAG,
                  status: MPI.Status | None = None):
            return _matched(self, op, fn, source, tag, status)
        probe.__name__, probe.__doc__ = fn.__name__, fn.__doc__
        return probe
    for name, op in (("Mprobe", _PROBE), ("mprobe", _PROBE), ("Improbe", _IPROBE),
                     ("improbe", _IPROBE)):
        setattr(cls, name, make(op, getattr(base, name)))
