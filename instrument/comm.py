"""A traced stand-in for mpi4py's communicator and request classes.

`TracedComm` subclasses `MPI.Intracomm`, so `isinstance` checks and every untraced method keep
working; the methods below call the real one and append one row to the rank's buffer. Peers and
roots are recorded as world ranks, so replay never needs to translate communicator-local ranks.

A pickle-API ``recv`` is recorded as the MPI calls mpi4py makes for it: a ``Probe`` row (the
matched probe) and a ``Recv`` row (the receive); allocation and unpickling lie between and after.

Persistent point-to-point requests (`Send_init`, `Recv_init`, ...) are recorded at each `Start`
as the matching non-blocking post (instrument.completion.TracedPrequest). Every communicator
constructor returns a traced communicator with a derived id; non-blocking collectives are
instrument.nonblocking's. Calls with no row model are counted per name (instrument.untraced),
and the manifest says so (`untraced_calls`).
"""

from __future__ import annotations

from time import perf_counter_ns as _now, thread_time_ns as _cpu
from typing import Any, Sequence

from mpi4py import MPI

from hindsight.trace import core as tf
from instrument import completion as _completion
from instrument.completion import (POLL_TAIL, TracedPrequest, TracedRequest, failed_poll,
                                   poll_tail, recv_post, send_post)
from instrument.sizes import nbytes as _nbytes, pickled_size as _pickled_size
from instrument import matched as _matched, nonblocking as _nonblocking, topology as _topology
from instrument import untraced as _untraced
from instrument.tracer import RECORD as _ROW, pack as _pack

_C = MPI.Intracomm
_dumps = MPI.pickle.dumps
_loads = MPI.pickle.loads
_BYTE = MPI.BYTE
_ANY_SOURCE = MPI.ANY_SOURCE
_ANY_TAG = MPI.ANY_TAG
_IN_PLACE = MPI.IN_PLACE

OP = tf.OP_CODE
(_SEND, _SSEND, _BSEND, _RSEND, _RECV, _ISEND, _ISSEND, _IBSEND, _IRSEND, _IRECV, _SR_SEND,
 _SR_RECV, _PROBE, _IPROBE) = (
    OP[n] for n in ("Send", "Ssend", "Bsend", "Rsend", "Recv", "Isend", "Issend", "Ibsend",
                    "Irsend", "Irecv", "Sendrecv_send", "Sendrecv_recv", "Probe", "Iprobe"))

#: the traced post of a pickle-API irecv (its buffer optional, its size -1 without one)
_irecv = recv_post(_IRECV, _C.irecv)

# The tracer of this process; set by instrument.session.start(). Module global: the cheapest
# lookup from a wrapper.
_T = None


def set_tracer(tracer) -> None:
    """Record into ``tracer`` from now on (None: stop), here and in ``instrument.completion``."""
    global _T
    _T = tracer
    _completion.set_tracer(tracer)


class TracedComm(_C):
    """An MPI intracommunicator whose calls are recorded. Use it exactly like mpi4py's."""

    # _st: a scratch Status for calls whose caller passed none (shared: the rows of two threads
    # in MPI at once are dropped when the rank is sealed, hindsight.trace.write_staged).
    __slots__ = ("_id", "_w", "_ncreated", "_st")
    _BASE = _C      # the mpi4py class (the topology classes below have their own)

    # `comm` may be missing: mpi4py's own constructors (Dup, Idup, ...) make an empty instance of
    # the caller's class, and _adopt gives it its id.
    def __new__(cls, comm: MPI.Intracomm | None = None, comm_id: int = tf.COMM_WORLD_ID,
                world_ranks: Sequence[int] | None = None):
        self = cls._BASE.__new__(cls, comm)
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

    def bsend(self, obj: Any, dest: int, tag: int = 0) -> None:
        self._traced_send(_BSEND, _C.Bsend, [_dumps(obj), _BYTE], dest, tag)

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
        # a buffer of the probed size, the receive (the transfer); then unpickling (None for
        # MPI_PROC_NULL's empty message). The probe and the receive are rows; allocating the
        # buffer (page faults on fresh memory) and unpickling are the receiver's own work, in
        # its bursts as pickling is in the sender's. Replay models the rows, keeps the work.
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
        return None if src == MPI.PROC_NULL else _loads(data)

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

    def Sendrecv_replace(self, buf, dest: int, sendtag: int = 0, source: int = _ANY_SOURCE,
                         recvtag: int = _ANY_TAG, status: MPI.Status | None = None) -> None:
        st = status if status is not None else MPI.Status()
        n = _nbytes(buf)
        cpu = _T.cpu_all
        c0 = _cpu() if cpu else 0
        t0 = _now()
        _C.Sendrecv_replace(self, buf, dest, sendtag, source, recvtag, st)
        t1 = _now()
        self._rec(_SR_SEND, t0, t1, _cpu() - c0 if cpu else -1, dest, sendtag, n)
        self._rec(_SR_RECV, t0, t1, -1, st.Get_source(), st.Get_tag(), st.Get_count(_BYTE))

    def sendrecv(self, sendobj: Any, dest: int, sendtag: int = 0, recvbuf=None,
                 source: int = _ANY_SOURCE, recvtag: int = _ANY_TAG,
                 status: MPI.Status | None = None) -> Any:
        # mpi4py's own calls as rows: an Isend of the pickle (posted first), its receive (see
        # recv: with no ``recvbuf``, allocation and unpickling are the rank's compute; into
        # ``recvbuf`` mpi4py unpickles inside it, one row) and the Wait
        req = TracedComm.Isend(self, [_dumps(sendobj), _BYTE], dest, sendtag)
        obj = TracedComm.recv(self, recvbuf, source, recvtag, status)
        req.Wait()
        return obj

    def _traced_probe(self, fn, op, source, tag, status):
        st = status if status is not None else MPI.Status()
        t0 = _now()
        found = fn(self, source, tag, st)
        t1 = _now()
        if found:
            self._rec(op, t0, t1, -1, st.Get_source(), st.Get_tag(), st.Get_count(_BYTE))
        elif op == _IPROBE:     # an Iprobe that found nothing: one more poll of the run
            T = _T              # (failed_poll's extension of the open run, inline: hot path)
            o = T.off
            if o == T.poll_at:
                n = T.polls + 1
                T.polls = n
                poll_tail(T.buf, o - POLL_TAIL, n, -1, -1, t1)
            else:
                failed_poll(t0, t1)
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

    Isend = send_post(_ISEND, _C.Isend)
    Issend = send_post(_ISSEND, _C.Issend)
    Ibsend = send_post(_IBSEND, _C.Ibsend)
    Irsend = send_post(_IRSEND, _C.Irsend)
    Irecv = recv_post(_IRECV, _C.Irecv)

    # Pickle API: pickled here and posted as one message of MPI.BYTE, as mpi4py's own isend does
    # (so `nbytes` is the pickle's size).
    def isend(self, obj: Any, dest: int, tag: int = 0) -> TracedRequest:
        return TracedComm.Isend(self, [_dumps(obj), _BYTE], dest, tag)

    def issend(self, obj: Any, dest: int, tag: int = 0) -> TracedRequest:
        return TracedComm.Issend(self, [_dumps(obj), _BYTE], dest, tag)

    def ibsend(self, obj: Any, dest: int, tag: int = 0) -> TracedRequest:
        return TracedComm.Ibsend(self, [_dumps(obj), _BYTE], dest, tag)

    def irecv(self, buf=None, source: int = _ANY_SOURCE, tag: int = _ANY_TAG) -> TracedRequest:
        return _irecv(self, buf, source, tag)

    # -- persistent point-to-point: each Start is recorded as the matching post ----------------------

    def _persistent(self, op, fn, buf, peer, tag, is_recv) -> TracedPrequest:
        r = TracedPrequest(fn(self, buf, peer, tag))
        if is_recv:
            peer = tf.ANY_SOURCE if peer == _ANY_SOURCE else peer
            tag = tf.ANY_TAG if tag == _ANY_TAG else tag
        w = self._w
        r._post = (op, peer if w is None or peer < 0 else w[peer], tag, self._id, _nbytes(buf))
        r._comm = self if is_recv else None
        r._cid = self._id
        return r

    def Send_init(self, buf, dest: int, tag: int = 0) -> TracedPrequest:
        return self._persistent(_ISEND, _C.Send_init, buf, dest, tag, False)

    def Ssend_init(self, buf, dest: int, tag: int = 0) -> TracedPrequest:
        return self._persistent(_ISSEND, _C.Ssend_init, buf, dest, tag, False)

    def Bsend_init(self, buf, dest: int, tag: int = 0) -> TracedPrequest:
        return self._persistent(_IBSEND, _C.Bsend_init, buf, dest, tag, False)

    def Rsend_init(self, buf, dest: int, tag: int = 0) -> TracedPrequest:
        return self._persistent(_IRSEND, _C.Rsend_init, buf, dest, tag, False)

    def Recv_init(self, buf, source: int = _ANY_SOURCE, tag: int = _ANY_TAG) -> TracedPrequest:
        return self._persistent(_IRECV, _C.Recv_init, buf, source, tag, True)

    # -- collectives ---------------------------------------------------------------------------------

    def _coll(self, op_name: str, fn, args: tuple, nbytes: int, root: int = -1,
              size_of_result: bool = False):
        # A hot path like _traced_send: packed here, no helper calls (~0.3 us a call level).
        T = _T
        cpu = T.cpu_all
        c0 = _cpu() if cpu else 0
        t0 = _now()
        out = fn(self, *args)
        t1 = _now()
        if size_of_result:
            nbytes = _pickled_size(out)
        w = self._w
        o = T.off
        _pack(T.buf, o, OP[op_name], T.region, t0, _cpu() - c0 if cpu else -1, -1, -1, self._id,
              nbytes, -1, root if w is None or root < 0 else w[root], t1)
        o += _ROW
        T.off = o
        if o >= T.end:
            T.roll()
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

    def _derive(self, op_name: str, fn, args: tuple, same_group: bool = False):
        """Call a collective constructor over this communicator and adopt what it returns."""
        t0 = _now()
        new = fn(self, *args)
        t1 = _now()
        index = self._ncreated
        self._ncreated += 1
        if new == MPI.COMM_NULL:
            self._rec(OP[op_name], t0, t1, -1)
            return new
        members = self._members() if same_group else _members_of(new)
        cid = tf.derived_comm_id(self._id, index, min(members))
        return _adopt(new, op_name, t0, t1, cid, members, self._id)

    def _members(self) -> list[int]:
        return list(self._w) if self._w is not None else list(range(self.Get_size()))

    def Split(self, color: int = 0, key: int = 0):
        return self._derive("Comm_split", _C.Split, (color, key))

    def Split_type(self, split_type: int, key: int = 0, info=MPI.INFO_NULL):
        return self._derive("Comm_split", _C.Split_type, (split_type, key, info))

    def Dup(self, info=None):
        return self._derive("Comm_dup", _C.Dup, (info,), same_group=True)

    def Dup_with_info(self, info):
        return self._derive("Comm_dup", _C.Dup_with_info, (info,), same_group=True)

    def Clone(self):
        return self._derive("Comm_dup", _C.Clone, (), same_group=True)

    def Idup(self, info=None):
        """Recorded as a `Comm_dup` at the post (replay has no non-blocking creation)."""
        box = []

        def post(comm, info):
            new, req = _C.Idup(comm, info)
            box.append(req)
            return new
        return self._derive("Comm_dup", post, (info,), same_group=True), box[0]

    def Idup_with_info(self, info):
        return self.Idup(info)

    def Create(self, group):
        return self._derive("Comm_create", _C.Create, (group,))

    def Create_group(self, group, tag: int = 0):
        t0 = _now()
        new = _C.Create_group(self, group, tag)
        t1 = _now()
        return new if new == MPI.COMM_NULL else _adopt_by_members(new, self._id, -1, t0, t1)

    def Create_cart(self, dims, periods=None, reorder: bool = False):
        return self._derive("Comm_create", _C.Create_cart, (dims, periods, reorder))

    def Create_graph(self, index, edges, reorder: bool = False):
        return self._derive("Comm_create", _C.Create_graph, (index, edges, reorder))

    def Create_dist_graph(self, sources, degrees, destinations, weights=None, info=MPI.INFO_NULL,
                          reorder: bool = False):
        return self._derive("Comm_create", _C.Create_dist_graph,
                            (sources, degrees, destinations, weights, info, reorder))

    def Create_dist_graph_adjacent(self, sources, destinations, sourceweights=None,
                                   destweights=None, info=MPI.INFO_NULL, reorder: bool = False):
        return self._derive("Comm_create", _C.Create_dist_graph_adjacent,
                            (sources, destinations, sourceweights, destweights, info, reorder))

    def Create_intercomm(self, local_leader: int, peer_comm, remote_leader: int, tag: int = 0):
        # Counted, not traced: its traffic has no row model (instrument.untraced).
        _untraced.count("Create_intercomm")
        return _untraced.TracedIntercomm(
            _C.Create_intercomm(self, local_leader, peer_comm, remote_leader, tag))


_nonblocking.install(TracedComm)
_untraced.add_counters(TracedComm, _C, _untraced.COMM_UNTRACED)
_matched.attach(TracedComm, _C)

#: Communicators made over their own members only, per (parent id, index base, members): how
#: many of them were made before.
_group_created: dict[tuple, int] = {}
#: The index base of an intercommunicator's Merge (apart from Create_group's, -1, -2, ...).
_MERGE_BASE = -(1 << 20)


def _adopt_by_members(new: MPI.Intracomm, parent: int, base: int, t0: int,
                      t1: int) -> "TracedComm":
    """A communicator made collectively over its own members only (`Create_group`, an
    intercommunicator's `Merge`): its row goes on itself, and its id counts the creations of
    the same members from ``parent`` (non-members never see them), ``base - k`` for the k-th."""
    members = _members_of(new)
    key = (parent, base, tuple(members))
    index = _group_created.get(key, 0)
    _group_created[key] = index + 1
    cid = tf.derived_comm_id(parent, base - index, min(members))
    return _adopt(new, "Comm_create", t0, t1, cid, members, cid)


def _merge(self, high: bool = False) -> "TracedComm":
    """`Intercomm.Merge`: the intracommunicator of both groups, traced (its id derived from
    COMM_WORLD's and its members, as a Create_group's)."""
    t0 = _now()
    new = MPI.Intercomm.Merge(self, high)
    t1 = _now()
    return _adopt_by_members(new, tf.COMM_WORLD_ID, _MERGE_BASE, t0, t1)


_untraced.TracedIntercomm.Merge = _merge


def _members_of(comm: MPI.Comm) -> list[int]:
    """The world ranks of `comm`'s members, in its rank order."""
    members = MPI.Group.Translate_ranks(comm.Get_group(), list(range(comm.Get_size())),
                                        MPI.COMM_WORLD.Get_group())
    return [int(m) for m in members]


def _adopt(new: MPI.Comm, op_name: str, t0: int, t1: int, cid: int, members: list[int],
           row_comm: int) -> TracedComm:
    """Record the creation row (`peer`: the child's id), the members (and neighbours): traced."""
    T = _T
    T.add_communicator(cid, members)
    _topology.adopted(new, cid, members)
    o = T.off
    _pack(T.buf, o, OP[op_name], T.region, t0, -1, cid, -1, row_comm, -1, -1, -1, t1)
    o += _ROW
    T.off = o
    if o >= T.end:
        T.roll()
    if type(new) in _TRACED:     # made by mpi4py as an instance of the caller's class
        new._id = cid
        new._w = tuple(members)
        new._ncreated = 0
        return new
    return _TRACED_CLASS.get(type(new), TracedComm)(new, cid, members)


def _traced_class(base: type, extra: dict) -> type:
    """TracedComm's methods on another communicator class (mpi4py refuses a class deriving from
    both TracedComm and a topology class: their instance layouts differ in its eyes)."""
    body = {k: v for k, v in vars(TracedComm).items()
            if k not in ("__dict__", "__weakref__", "_id", "_w", "_ncreated", "_st")}
    body.update(_topology.methods(), **extra, _BASE=base, __doc__=f"A traced {base.__name__}.")
    cls = type("Traced" + base.__name__, (base,), body)
    _untraced.add_counters(cls, base, _untraced.TOPO_UNTRACED)
    return cls


def _cart_sub(self, remain_dims):
    return self._derive("Comm_split", MPI.Cartcomm.Sub, (remain_dims,))


TracedCartcomm = _traced_class(MPI.Cartcomm, {"Sub": _cart_sub})
TracedGraphcomm = _traced_class(MPI.Graphcomm, {})
TracedDistgraphcomm = _traced_class(MPI.Distgraphcomm, {})
_TRACED_CLASS = {MPI.Intracomm: TracedComm, MPI.Cartcomm: TracedCartcomm,
                 MPI.Graphcomm: TracedGraphcomm, MPI.Distgraphcomm: TracedDistgraphcomm}
_TRACED = frozenset(_TRACED_CLASS.values())
