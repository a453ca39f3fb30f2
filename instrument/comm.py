"""A traced stand-in for mpi4py's communicator and request classes.

`TracedComm` subclasses `MPI.Intracomm`, so `isinstance` checks and every untraced method keep
working; the methods below call the real one and append one row to the rank's buffer. Peers and
roots are recorded as world ranks, so replay never needs to translate communicator-local ranks.

A pickle-API ``recv`` is recorded as the MPI calls mpi4py makes for it: a ``Probe`` row (the
matched probe) and a ``Recv`` row (the receive); allocation and unpickling lie between and after.

Not traced (they pass through unchanged): persistent requests (`*_init`), the program's own
matched probes (`Mprobe`/`Improbe`), non-blocking collectives, one-sided communication and
intercommunicators.
"""

from __future__ import annotations

import pickle as _pickle
from time import perf_counter_ns as _now, thread_time_ns as _cpu
from typing import Any, Sequence

from mpi4py import MPI

from hindsight.trace import core as tf
from instrument import completion as _completion
from instrument.completion import TracedRequest
from instrument.tracer import RECORD as _ROW, pack as _pack

_C = MPI.Intracomm
_dumps = MPI.pickle.dumps
_loads = MPI.pickle.loads
_BYTE = MPI.BYTE
_ANY_SOURCE = MPI.ANY_SOURCE
_ANY_TAG = MPI.ANY_TAG
_IN_PLACE = MPI.IN_PLACE

OP = tf.OP_CODE
(_SEND, _SSEND, _BSEND, _RSEND, _RECV, _ISEND, _ISSEND, _IRECV, _SR_SEND, _SR_RECV, _PROBE,
 _IPROBE) = (
    OP[n] for n in ("Send", "Ssend", "Bsend", "Rsend", "Recv", "Isend", "Issend", "Irecv",
                    "Sendrecv_send", "Sendrecv_recv", "Probe", "Iprobe"))

# The tracer of this process; set by instrument.session.start(). Module global: the cheapest
# lookup from a wrapper.
_T = None


def set_tracer(tracer) -> None:
    """Record into ``tracer`` from now on (None: stop), here and in ``instrument.completion``."""
    global _T
    _T = tracer
    _completion.set_tracer(tracer)


def _nbytes(buf: Any) -> int:
    """Bytes described by an mpi4py buffer specification, or -1 if it cannot be told."""
    if buf is None or buf is _IN_PLACE:
        return -1
    n = getattr(buf, "nbytes", None)
    if n is not None:
        return n
    if isinstance(buf, (bytes, bytearray)):
        return len(buf)
    if isinstance(buf, (list, tuple)) and buf:
        dtype = buf[-1] if isinstance(buf[-1], MPI.Datatype) else None
        if dtype is not None and len(buf) >= 3:
            count = buf[1]
            if isinstance(count, int):
                return count * dtype.size
            if isinstance(count, (list, tuple)) and count:
                if len(buf) == 3 and len(count) == 2 and isinstance(count[0], int):
                    return count[0] * dtype.size          # [data, (count, displ), type]
                return sum(count) * dtype.size            # [data, counts, displs, type]
        return _nbytes(buf[0])
    try:
        return memoryview(buf).nbytes
    except TypeError:
        return -1


class _ByteCounter:
    """A file that only counts what is written to it."""
    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0

    def write(self, data) -> None:
        self.n += memoryview(data).nbytes


_counter = _ByteCounter()
_sizer = _pickle.Pickler(_counter, protocol=MPI.pickle.PROTOCOL)


def _pickled_size(obj: Any) -> int:
    """The length of mpi4py's pickle of `obj`, without building it: the pickler streams to a
    counter in frames of at most 64 KiB and hands large buffers over without copying, so the
    size of a large object costs no large allocation (one would change the program's malloc
    thresholds: docs/robustness.md, "No observer effect"). An object the standard pickler
    refuses (a program may have given mpi4py another pickler, e.g. cloudpickle's) is sized by
    mpi4py's own; one neither can pickle is recorded as -1 (unknown), never an error in the
    program."""
    _counter.n = 0
    try:
        _sizer.clear_memo()
        _sizer.dump(obj)
        return _counter.n
    except Exception:
        try:
            return len(_dumps(obj))
        except Exception:
            return -1


class TracedComm(_C):
    """An MPI intracommunicator whose calls are recorded. Use it exactly like mpi4py's."""

    # _st: a scratch Status for calls whose caller passed none (MPI use is single-threaded here).
    __slots__ = ("_id", "_w", "_ncreated", "_st")

    def __new__(cls, comm: MPI.Intracomm, comm_id: int = tf.COMM_WORLD_ID,
                world_ranks: Sequence[int] | None = None):
        self = super().__new__(cls, comm)
        self._id = comm_id
        self._w = None if world_ranks is None else tuple(world_ranks)   # None: world numbering
        self._ncreated = 0
        self._st = MPI.Status()
        return self

    # -- recording helper --------------------------------------------------------------------------

    def _rec(self, op, t0, t1, c, peer=-1, tag=-1, nbytes=-1, request=-1, root=-1):
        T = _T
        o = T.off
        _pack(T.buf, o, op, T.region, t0, c, self._world(peer), tag, self._id, nbytes, request,
              self._world(root), t1)
        o += _ROW
        T.off = o
        if o >= T.end:
            T.roll()

    def _world(self, r: int) -> int:
        return r if self._w is None or r < 0 else self._w[r]

    # -- blocking point-to-point -------------------------------------------------------------------

    def _traced_send(self, op, fn, buf, dest, tag):
        # The hot path: one Python call level below the public method, no helper calls.
        T = _T
        cpu = T.cpu_all
        c0 = _cpu() if cpu else 0
        t0 = _now()
        fn(self, buf, dest, tag)
        t1 = _now()
        n = getattr(buf, "nbytes", None)
        w = self._w
        o = T.off
        _pack(T.buf, o, op, T.region, t0, _cpu() - c0 if cpu else -1,
              dest if w is None or dest < 0 else w[dest], tag, self._id,
              _nbytes(buf) if n is None else n, -1, -1, t1)
        o += _ROW
        T.off = o
        if o >= T.end:
            T.roll()

    def Send(self, buf, dest: int, tag: int = 0) -> None:
        self._traced_send(_SEND, _C.Send, buf, dest, tag)

    def Ssend(self, buf, dest: int, tag: int = 0) -> None:
        self._traced_send(_SSEND, _C.Ssend, buf, dest, tag)

    def Bsend(self, buf, dest: int, tag: int = 0) -> None:
        self._traced_send(_BSEND, _C.Bsend, buf, dest, tag)

    def Rsend(self, buf, dest: int, tag: int = 0) -> None:
        self._traced_send(_RSEND, _C.Rsend, buf, dest, tag)

    def Recv(self, buf, source: int = _ANY_SOURCE, tag: int = _ANY_TAG,
             status: MPI.Status | None = None) -> None:
        T = _T
        st = status if status is not None else self._st
        cpu = T.cpu_all
        c0 = _cpu() if cpu else 0
        t0 = _now()
        _C.Recv(self, buf, source, tag, st)
        t1 = _now()
        src = st.Get_source()
        w = self._w
        o = T.off
        _pack(T.buf, o, _RECV, T.region, t0, _cpu() - c0 if cpu else -1,
              src if w is None or src < 0 else w[src], st.Get_tag(), self._id,
              st.Get_count(_BYTE), -1, -1, t1)
        o += _ROW
        T.off = o
        if o >= T.end:
            T.roll()

    # Pickle API: pickle once here so the wire size is known, then send the bytes exactly as
    # mpi4py's own send does (one message of MPI.BYTE), so receivers of either kind interoperate.
    def send(self, obj: Any, dest: int, tag: int = 0) -> None:
        self._traced_send(_SEND, _C.Send, [_dumps(obj), _BYTE], dest, tag)

    def ssend(self, obj: Any, dest: int, tag: int = 0) -> None:
        self._traced_send(_SSEND, _C.Ssend, [_dumps(obj), _BYTE], dest, tag)

    def recv(self, buf=None, source: int = _ANY_SOURCE, tag: int = _ANY_TAG,
             status: MPI.Status | None = None) -> Any:
        st = status if status is not None else MPI.Status()
        cpu = _T.cpu_all
        c0 = _cpu() if cpu else 0
        t0 = _now()
        if buf is not None:  # into the caller's buffer: mpi4py unpickles inside, one row
            obj = _C.recv(self, buf, source, tag, st)
            t1 = _now()
            self._rec(_RECV, t0, t1, _cpu() - c0 if cpu else -1, st.Get_source(), st.Get_tag(),
                      st.Get_count(_BYTE))
            return obj
        # What mpi4py's recv does, as its MPI calls: a matched probe (waits for the message),
        # a buffer of the probed size, the receive (the transfer); then unpickling. The probe and
        # the receive are rows; allocating the buffer (page faults on fresh memory) and
        # unpickling are the receiver's own work and fall into its bursts, as pickling falls
        # into the sender's. Replay models the two rows and keeps the work as measured.
        m = _C.Mprobe(self, source, tag, st)
        t1 = _now()
        src, tg, n = st.Get_source(), st.Get_tag(), st.Get_count(_BYTE)
        self._rec(_PROBE, t0, t1, _cpu() - c0 if cpu else -1, src, tg, n)
        data = bytearray(n)
        c0 = _cpu() if cpu else 0
        t2 = _now()
        m.Recv([data, _BYTE])
        t3 = _now()
        self._rec(_RECV, t2, t3, _cpu() - c0 if cpu else -1, src, tg, n)
        return _loads(data)

    def Sendrecv(self, sendbuf, dest: int, sendtag: int = 0, recvbuf=None,
                 source: int = _ANY_SOURCE, recvtag: int = _ANY_TAG,
                 status: MPI.Status | None = None) -> None:
        st = status if status is not None else MPI.Status()
        cpu = _T.cpu_all
        c0 = _cpu() if cpu else 0
        t0 = _now()
        _C.Sendrecv(self, sendbuf, dest, sendtag, recvbuf, source, recvtag, st)
        t1 = _now()
        self._rec(_SR_SEND, t0, t1, _cpu() - c0 if cpu else -1, dest, sendtag, _nbytes(sendbuf))
        self._rec(_SR_RECV, t0, t1, -1, st.Get_source(), st.Get_tag(), st.Get_count(_BYTE))

    def sendrecv(self, sendobj: Any, dest: int, sendtag: int = 0, recvbuf=None,
                 source: int = _ANY_SOURCE, recvtag: int = _ANY_TAG,
                 status: MPI.Status | None = None) -> Any:
        st = status if status is not None else MPI.Status()
        data = _dumps(sendobj)
        cpu = _T.cpu_all
        c0 = _cpu() if cpu else 0
        t0 = _now()
        # A send posted before the receive, as MPI_Sendrecv does, so two partners cannot deadlock.
        req = _C.Isend(self, [data, _BYTE], dest, sendtag)
        if recvbuf is None:
            # the MPI part of mpi4py's recv (see recv); the allocation stays in this one call
            m = _C.Mprobe(self, source, recvtag, st)
            got = bytearray(st.Get_count(_BYTE))
            m.Recv([got, _BYTE])
        else:
            obj = _C.recv(self, recvbuf, source, recvtag, st)
        req.Wait()
        t1 = _now()
        self._rec(_SR_SEND, t0, t1, _cpu() - c0 if cpu else -1, dest, sendtag, len(data))
        self._rec(_SR_RECV, t0, t1, -1, st.Get_source(), st.Get_tag(), st.Get_count(_BYTE))
        return _loads(got) if recvbuf is None else obj

    def _traced_probe(self, fn, op, source, tag, status):
        st = status if status is not None else MPI.Status()
        t0 = _now()
        found = fn(self, source, tag, st)
        t1 = _now()
        if found:
            self._rec(op, t0, t1, -1, st.Get_source(), st.Get_tag(), st.Get_count(_BYTE))
        return found

    def Probe(self, source: int = _ANY_SOURCE, tag: int = _ANY_TAG,
              status: MPI.Status | None = None):
        return self._traced_probe(_C.Probe, _PROBE, source, tag, status)

    def Iprobe(self, source: int = _ANY_SOURCE, tag: int = _ANY_TAG,
               status: MPI.Status | None = None) -> bool:
        return self._traced_probe(_C.Iprobe, _IPROBE, source, tag, status)

    probe = Probe
    iprobe = Iprobe

    # -- non-blocking point-to-point ----------------------------------------------------------------

    def _post(self, op, fn, buf, peer, tag, nbytes, is_recv) -> "TracedRequest":
        T = _T
        t0 = _now()
        req = fn(self, buf, peer, tag)
        t1 = _now()
        rid = T.next_request
        T.next_request = rid + 1
        if is_recv:
            peer = tf.ANY_SOURCE if peer == _ANY_SOURCE else peer
            tag = tf.ANY_TAG if tag == _ANY_TAG else tag
        w = self._w
        # The record written here rather than by _rec: a method call less on a hot path (a
        # halo step posts four requests an iteration).
        o = T.off
        _pack(T.buf, o, op, T.region, t0, -1, peer if w is None or peer < 0 else w[peer], tag,
              self._id, nbytes, rid, -1, t1)
        o += _ROW
        T.off = o
        if o >= T.end:
            T.roll()
        r = TracedRequest(req)
        r._hid = rid
        r._comm = self if is_recv else None
        r._cid = self._id
        return r

    def Isend(self, buf, dest: int, tag: int = 0) -> "TracedRequest":
        return self._post(_ISEND, _C.Isend, buf, dest, tag, _nbytes(buf), False)

    def Issend(self, buf, dest: int, tag: int = 0) -> "TracedRequest":
        return self._post(_ISSEND, _C.Issend, buf, dest, tag, _nbytes(buf), False)

    def Irecv(self, buf, source: int = _ANY_SOURCE, tag: int = _ANY_TAG) -> "TracedRequest":
        return self._post(_IRECV, _C.Irecv, buf, source, tag, _nbytes(buf), True)

    def isend(self, obj: Any, dest: int, tag: int = 0) -> "TracedRequest":
        data = [_dumps(obj), _BYTE]
        return self._post(_ISEND, _C.Isend, data, dest, tag, len(data[0]), False)

    def issend(self, obj: Any, dest: int, tag: int = 0) -> "TracedRequest":
        data = [_dumps(obj), _BYTE]
        return self._post(_ISSEND, _C.Issend, data, dest, tag, len(data[0]), False)

    def irecv(self, buf=None, source: int = _ANY_SOURCE, tag: int = _ANY_TAG) -> "TracedRequest":
        return self._post(_IRECV, _C.irecv, buf, source, tag, _nbytes(buf), True)

    # -- collectives ---------------------------------------------------------------------------------

    def _coll(self, op_name: str, fn, args: tuple, nbytes: int, root: int = -1,
              size_of_result: bool = False):
        cpu = _T.cpu_all
        c0 = _cpu() if cpu else 0
        t0 = _now()
        out = fn(self, *args)
        t1 = _now()
        if size_of_result:
            nbytes = _pickled_size(out)
        self._rec(OP[op_name], t0, t1, _cpu() - c0 if cpu else -1, -1, -1, nbytes, -1, root)
        return out

    def _share(self, buf) -> int:
        n = _nbytes(buf)
        return n // self.Get_size() if n > 0 else n

    def Barrier(self) -> None:
        self._coll("Barrier", _C.Barrier, (), 0)

    def barrier(self) -> None:
        self._coll("Barrier", _C.barrier, (), 0)

    def Bcast(self, buf, root: int = 0) -> None:
        self._coll("Bcast", _C.Bcast, (buf, root), _nbytes(buf), root)

    def Reduce(self, sendbuf, recvbuf, op=MPI.SUM, root: int = 0) -> None:
        n = _nbytes(sendbuf) if sendbuf is not _IN_PLACE else _nbytes(recvbuf)
        self._coll("Reduce", _C.Reduce, (sendbuf, recvbuf, op, root), n, root)

    def Allreduce(self, sendbuf, recvbuf, op=MPI.SUM) -> None:
        n = _nbytes(sendbuf) if sendbuf is not _IN_PLACE else _nbytes(recvbuf)
        self._coll("Allreduce", _C.Allreduce, (sendbuf, recvbuf, op), n)

    def Scan(self, sendbuf, recvbuf, op=MPI.SUM) -> None:
        n = _nbytes(sendbuf) if sendbuf is not _IN_PLACE else _nbytes(recvbuf)
        self._coll("Scan", _C.Scan, (sendbuf, recvbuf, op), n)

    def Exscan(self, sendbuf, recvbuf, op=MPI.SUM) -> None:
        n = _nbytes(sendbuf) if sendbuf is not _IN_PLACE else _nbytes(recvbuf)
        self._coll("Exscan", _C.Exscan, (sendbuf, recvbuf, op), n)

    def Gather(self, sendbuf, recvbuf, root: int = 0) -> None:
        n = _nbytes(sendbuf) if sendbuf is not _IN_PLACE else self._share(recvbuf)
        self._coll("Gather", _C.Gather, (sendbuf, recvbuf, root), n, root)

    def Gatherv(self, sendbuf, recvbuf, root: int = 0) -> None:
        n = _nbytes(sendbuf) if sendbuf is not _IN_PLACE else -1
        self._coll("Gatherv", _C.Gatherv, (sendbuf, recvbuf, root), n, root)

    def Scatter(self, sendbuf, recvbuf, root: int = 0) -> None:
        n = _nbytes(recvbuf) if recvbuf is not _IN_PLACE else self._share(sendbuf)
        self._coll("Scatter", _C.Scatter, (sendbuf, recvbuf, root), n, root)

    def Scatterv(self, sendbuf, recvbuf, root: int = 0) -> None:
        mine = self.Get_rank() == root
        n = _nbytes(sendbuf) if mine and sendbuf is not None else _nbytes(recvbuf)
        self._coll("Scatterv", _C.Scatterv, (sendbuf, recvbuf, root), n, root)

    def Allgather(self, sendbuf, recvbuf) -> None:
        n = _nbytes(sendbuf) if sendbuf is not _IN_PLACE else self._share(recvbuf)
        self._coll("Allgather", _C.Allgather, (sendbuf, recvbuf), n)

    def Allgatherv(self, sendbuf, recvbuf) -> None:
        self._coll("Allgatherv", _C.Allgatherv, (sendbuf, recvbuf), _nbytes(sendbuf))

    def Alltoall(self, sendbuf, recvbuf) -> None:
        n = self._share(sendbuf if sendbuf is not _IN_PLACE else recvbuf)
        self._coll("Alltoall", _C.Alltoall, (sendbuf, recvbuf), n)

    def Alltoallv(self, sendbuf, recvbuf) -> None:
        n = _nbytes(sendbuf if sendbuf is not _IN_PLACE else recvbuf)
        self._coll("Alltoallv", _C.Alltoallv, (sendbuf, recvbuf), n)

    def Reduce_scatter(self, sendbuf, recvbuf, recvcounts=None, op=MPI.SUM) -> None:
        n = _nbytes(sendbuf if sendbuf is not _IN_PLACE else recvbuf)
        self._coll("Reduce_scatter", _C.Reduce_scatter, (sendbuf, recvbuf, recvcounts, op), n)

    def Reduce_scatter_block(self, sendbuf, recvbuf, op=MPI.SUM) -> None:
        self._coll("Reduce_scatter_block", _C.Reduce_scatter_block, (sendbuf, recvbuf, op),
                   _nbytes(recvbuf))

    # Pickle-API collectives: mpi4py's own implementation runs; the recorded size is the pickled
    # size of this rank's object, which costs one extra pickling (prefer the buffer API for bulk).
    def bcast(self, obj: Any, root: int = 0) -> Any:
        return self._coll("Bcast", _C.bcast, (obj, root), -1, root, size_of_result=True)

    def reduce(self, sendobj: Any, op=MPI.SUM, root: int = 0) -> Any:
        return self._coll("Reduce", _C.reduce, (sendobj, op, root), _pickled_size(sendobj), root)

    def allreduce(self, sendobj: Any, op=MPI.SUM) -> Any:
        return self._coll("Allreduce", _C.allreduce, (sendobj, op), _pickled_size(sendobj))

    def scan(self, sendobj: Any, op=MPI.SUM) -> Any:
        return self._coll("Scan", _C.scan, (sendobj, op), _pickled_size(sendobj))

    def exscan(self, sendobj: Any, op=MPI.SUM) -> Any:
        return self._coll("Exscan", _C.exscan, (sendobj, op), _pickled_size(sendobj))

    def gather(self, sendobj: Any, root: int = 0) -> Any:
        return self._coll("Gather", _C.gather, (sendobj, root), _pickled_size(sendobj), root)

    def allgather(self, sendobj: Any) -> Any:
        return self._coll("Allgather", _C.allgather, (sendobj,), _pickled_size(sendobj))

    def scatter(self, sendobj: Any, root: int = 0) -> Any:
        return self._coll("Scatter", _C.scatter, (sendobj, root), -1, root, size_of_result=True)

    def alltoall(self, sendobj: Any) -> Any:
        n = sum(_pickled_size(o) for o in sendobj) // max(1, len(sendobj))
        return self._coll("Alltoall", _C.alltoall, (sendobj,), n)

    # -- communicator creation ------------------------------------------------------------------------

    def _derive(self, op_name: str, fn, args: tuple):
        t0 = _now()
        new = fn(self, *args)
        t1 = _now()
        index = self._ncreated
        self._ncreated += 1
        if new == MPI.COMM_NULL:
            self._rec(OP[op_name], t0, t1, -1)
            return new
        members = MPI.Group.Translate_ranks(new.Get_group(), list(range(new.Get_size())),
                                            MPI.COMM_WORLD.Get_group())
        members = [int(m) for m in members]
        cid = tf.derived_comm_id(self._id, index, min(members))
        T = _T
        T.add_communicator(cid, members)
        # `peer` of a comm-creation row holds the child's id (see docs/trace-format.md), so it
        # bypasses _rec's rank translation.
        o = T.off
        _pack(T.buf, o, OP[op_name], T.region, t0, -1, cid, -1, self._id, -1, -1, -1, t1)
        o += _ROW
        T.off = o
        if o >= T.end:
            T.roll()
        return TracedComm(new, cid, members)

    def Split(self, color: int = 0, key: int = 0):
        return self._derive("Comm_split", _C.Split, (color, key))

    def Split_type(self, split_type: int, key: int = 0, info=MPI.INFO_NULL):
        return self._derive("Comm_split", _C.Split_type, (split_type, key, info))

    def Dup(self, info=None):
        return self._derive("Comm_dup", _C.Dup, (info,))

    def Clone(self):
        return self._derive("Comm_dup", _C.Clone, ())

    def Create(self, group):
        return self._derive("Comm_create", _C.Create, (group,))

    def Create_group(self, group, tag: int = 0):
        return self._derive("Comm_create", _C.Create_group, (group, tag))
