"""The traced request: the non-blocking posts that make one (`send_post`, `recv_post`: the
Isend, Irecv... of ``instrument.comm``), the completions of non-blocking operations, one row per
completed request, and the free of an active one (Request_free); the traced persistent request
(`TracedPrequest`), recorded at each `Start`.

A post returns a ``TracedRequest`` carrying its request id; this module records its completion
(Wait, Test and their -all/-any/-some forms), with the peer, tag and size read from the
completion's status for receives. Posts and completions are the hot path of a
message-rate-bound program (windows of posts, each completed by a Waitall): each is one Python
call level around the MPI call, and a completion reuses its statuses.
"""

from __future__ import annotations

import struct
from time import perf_counter_ns as _now, thread_time_ns as _cpu

from mpi4py import MPI

from hindsight.trace import core as tf
from instrument import untraced as _untraced
from instrument.sizes import nbytes as _nbytes
from instrument.tracer import RECORD as _ROW, pack as _pack

_R = MPI.Request
_new_request = _R.__new__
_BYTE = MPI.BYTE
_ANY_SOURCE = MPI.ANY_SOURCE
_ANY_TAG = MPI.ANY_TAG

OP = tf.OP_CODE
(_WAIT, _WAITALL, _WAITANY, _WAITSOME, _TEST, _TESTALL, _TESTANY, _TESTSOME) = (
    OP[n] for n in ("Wait", "Waitall", "Waitany", "Waitsome", "Test", "Testall", "Testany",
                    "Testsome"))
_FREE = OP["Request_free"]
_POLL = OP["Poll"]
#: What a further failed poll rewrites in its run's Poll record: its tail from ``nbytes`` (the
#: count) to ``t_end``, request and root (-1) between them; packs at ``off - POLL_TAIL``
poll_tail = struct.Struct("<qqqq").pack_into
POLL_TAIL = 32
assert tf.RAW_COLUMNS.index("nbytes") * 8 == tf.RAW_RECORD.size - POLL_TAIL

# The tracer of this process, set with ``instrument.comm.set_tracer``. Module global: the
# cheapest lookup from a wrapper.
_T = None


def set_tracer(tracer) -> None:
    global _T
    _T = tracer


#: Statuses for completion calls whose caller passed none: reused (MPI use is one thread at a
#: time here), so a Waitall of 64 requests makes no 64 Status objects. mpi4py fills the first
#: entries and appends more when a call has more requests than the list holds.
_STATUSES: list = []
_STATUS = MPI.Status()


def failed_poll(t0: int, t1: int) -> None:
    """An unsuccessful poll [t0, t1] (an Iprobe that found nothing, a Test* on traced requests
    that completed none): it extends the rank's open run of polls, the Poll record that is
    still the last one written (its count and t_end rewritten in place), or starts one (format
    1.3, docs/trace-format.md). No row per poll: a polling loop writes one record per run, and
    any other record of the rank ends the run."""
    T = _T
    o = T.off
    if o == T.poll_at:
        n = T.polls + 1
        T.polls = n
        poll_tail(T.buf, o - POLL_TAIL, n, -1, -1, t1)      # t_end last, as a record's
        return
    _pack(T.buf, o, _POLL, T.region, t0, -1, -1, -1, -1, 1, -1, -1, t1)
    o += _ROW
    T.off = o
    T.poll_at = o
    T.polls = 1
    if o >= T.end:
        T.roll()


def _any_traced(requests) -> bool:
    for r in requests:
        if getattr(r, "_hid", -1) >= 0:
            return True
    return False


def _complete_rows(op: int, t0: int, t1: int, cpu: int, requests, indices,
                   statuses) -> int:
    """Append one completion row per traced request that just completed: ``requests[i]`` for i
    in ``indices``, its status ``statuses[k]`` (k counting those rows) for a receive. ``cpu``
    goes on the call's first row only. The record fields are kept in locals over the loop.
    Returns the rows written."""
    T = _T
    buf, o, end, region = T.buf, T.off, T.end, T.region
    k = -1
    rows = 0
    for i in indices:
        k += 1
        r = requests[i]
        hid = getattr(r, "_hid", -1)
        if hid < 0:
            continue
        comm = r._comm
        if comm is not None:
            st = statuses[k]
            peer, w = st.Get_source(), comm._w
            if w is not None and peer >= 0:
                peer = w[peer]
            _pack(buf, o, op, region, t0, cpu, peer, st.Get_tag(), comm._id, st.Get_count(_BYTE),
                  hid, -1, t1)
        else:
            _pack(buf, o, op, region, t0, cpu, -1, -1, r._cid, -1, hid, -1, t1)
        r._hid = -1
        cpu = -1    # the call's CPU time goes on its first row only
        rows += 1
        o += _ROW
        if o >= end:
            T.off = o
            T.roll()
            buf, o, end = T.buf, T.off, T.end
    T.off = o
    return rows


def _named(method, fn) -> None:
    """Give the traced ``method`` the name and doc of mpi4py's ``fn``, in its code object too:
    a stack dump (instrument.stopped) and a traceback then name the MPI call, not the factory's
    inner function."""
    method.__code__ = method.__code__.replace(co_name=fn.__name__, co_qualname=fn.__name__)
    method.__name__ = method.__qualname__ = fn.__name__
    method.__doc__ = fn.__doc__


# The completion calls come in four families that differ only in how they report what completed.
# Each factory below builds the traced method from mpi4py's own one; each is one Python call
# level around the MPI call (a Waitall of a window of requests is a message-rate program's hot
# path).

def _single(op: int, fn, done):
    """Wait/wait/Test/test on one request; `done(result)` tells whether it completed (a Test
    that did not is a failed poll)."""
    poll = op == _TEST
    def method(self, status: MPI.Status | None = None):
        if self._hid < 0:                 # untraced or already completed: nothing to record
            return fn(self, status)
        st = status if status is not None else _STATUS
        cpu = _T.cpu_all
        c0 = _cpu() if cpu else 0
        t0 = _now()
        out = fn(self, st)
        t1 = _now()
        if done(out):
            _complete_rows(op, t0, t1, _cpu() - c0 if cpu else -1, (self,), (0,), (st,))
        elif poll:
            T = _T      # failed_poll's extension of the open run, inline: the polling hot path
            o = T.off
            if o == T.poll_at:
                n = T.polls + 1
                T.polls = n
                poll_tail(T.buf, o - POLL_TAIL, n, -1, -1, t1)
            else:
                failed_poll(t0, t1)
        return out
    _named(method, fn)
    return method


def _all(op: int, fn, done):
    """Waitall/waitall/Testall/testall: every request completes together, or none. A call
    that wrote no row on traced requests is a failed poll (as the other families)."""
    def method(cls, requests, statuses=None):
        sts = statuses if statuses is not None else _STATUSES
        cpu = _T.cpu_all
        c0 = _cpu() if cpu else 0
        t0 = _now()
        out = fn(requests, sts)
        t1 = _now()
        if not (done(out) and _complete_rows(op, t0, t1, _cpu() - c0 if cpu else -1, requests,
                                             range(len(requests)), sts)) \
                and op != _WAITALL and _any_traced(requests):
            failed_poll(t0, t1)
        return out
    _named(method, fn)
    return classmethod(method)


def _any(op: int, fn, index):
    """Waitany/waitany/Testany/testany: `index(result)` is the completed request or None."""
    def method(cls, requests, status=None):
        st = status if status is not None else _STATUS
        cpu = _T.cpu_all
        c0 = _cpu() if cpu else 0
        t0 = _now()
        out = fn(requests, st)
        t1 = _now()
        i = index(out)
        if not (i is not None and i != MPI.UNDEFINED and
                _complete_rows(op, t0, t1, _cpu() - c0 if cpu else -1, requests, (i,), (st,))) \
                and op != _WAITANY and _any_traced(requests):
            failed_poll(t0, t1)
        return out
    _named(method, fn)
    return classmethod(method)


def _some(op: int, fn, indices):
    """Waitsome/Testsome (and lower case): `indices(result)` lists the completed requests; their
    statuses are the first entries of the status list, in the same order."""
    def method(cls, requests, statuses=None):
        sts = statuses if statuses is not None else _STATUSES
        cpu = _T.cpu_all
        c0 = _cpu() if cpu else 0
        t0 = _now()
        out = fn(requests, sts)
        t1 = _now()
        idx = indices(out)
        if not (idx and _complete_rows(op, t0, t1, _cpu() - c0 if cpu else -1, requests, idx,
                                       sts)) and op != _WAITSOME and _any_traced(requests):
            failed_poll(t0, t1)
        return out
    _named(method, fn)
    return classmethod(method)


def _free(fn):
    """Free (``free`` calls it): the Request_free row of an active traced request (format
    1.2; peer, tag and nbytes -1, as a send's completion row: a freed receive has no status).
    A request without a pending traced operation (untraced, an inactive persistent one, whose
    free is how a program releases it) gives no row, as the PMPI library's MPI_Request_free."""
    def method(self):
        # getattr: mpi4py.futures calls MPI.Request.Free(request), the traced class's, on the
        # untraced requests of its intercommunicator
        hid = getattr(self, "_hid", -1)
        if hid < 0:
            return fn(self)
        T = _T
        cpu = T.cpu_all
        c0 = _cpu() if cpu else 0
        t0 = _now()
        out = fn(self)
        t1 = _now()
        o = T.off
        _pack(T.buf, o, _FREE, T.region, t0, _cpu() - c0 if cpu else -1, -1, -1, self._cid, -1,
              hid, -1, t1)
        self._hid = -1
        o += _ROW
        T.off = o
        if o >= T.end:
            T.roll()
        return out
    _named(method, fn)
    return method


# -- posts -------------------------------------------------------------------------------------

def send_post(op: int, fn):
    """The traced send post `fn` (Isend, Issend, Ibsend, Irsend; the pickle API's isend family
    posts its pickle through them): its row, and a TracedRequest for its completion. One
    Python call level: the record packed here, the request made without TracedRequest.__new__
    (every slot is set here)."""
    def post(self, buf, dest: int, tag: int = 0) -> TracedRequest:
        T = _T
        n = getattr(buf, "nbytes", None)
        if n is None:
            n = _nbytes(buf)
        t0 = _now()
        req = fn(self, buf, dest, tag)
        t1 = _now()
        rid = T.next_request
        T.next_request = rid + 1
        w = self._w
        cid = self._id
        o = T.off
        _pack(T.buf, o, op, T.region, t0, -1, dest if w is None or dest < 0 else w[dest], tag,
              cid, n, rid, -1, t1)
        o += _ROW
        T.off = o
        if o >= T.end:
            T.roll()
        r = _new_request(TracedRequest, req)
        r._hid = rid
        r._comm = None
        r._cid = cid
        return r
    post.__name__ = fn.__name__
    post.__doc__ = fn.__doc__
    return post


def recv_post(op: int, fn):
    """The traced receive post `fn` (Irecv, the pickle API's irecv), as send_post;
    ANY_SOURCE/ANY_TAG are recorded as the format's sentinels, and the request keeps its
    communicator so that its completion row can name the source in world ranks."""
    def post(self, buf, source: int = _ANY_SOURCE, tag: int = _ANY_TAG) -> TracedRequest:
        T = _T
        n = getattr(buf, "nbytes", None)
        if n is None:
            n = _nbytes(buf)
        t0 = _now()
        req = fn(self, buf, source, tag)
        t1 = _now()
        rid = T.next_request
        T.next_request = rid + 1
        w = self._w
        o = T.off
        _pack(T.buf, o, op, T.region, t0, -1,
              tf.ANY_SOURCE if source == _ANY_SOURCE else
              source if w is None or source < 0 else w[source],
              tf.ANY_TAG if tag == _ANY_TAG else tag, self._id, n, rid, -1, t1)
        o += _ROW
        T.off = o
        if o >= T.end:
            T.roll()
        r = _new_request(TracedRequest, req)
        r._hid = rid
        r._comm = self
        r._cid = self._id
        return r
    post.__name__ = fn.__name__
    post.__doc__ = fn.__doc__
    return post


def _always(_out) -> bool:
    return True


class TracedRequest(_R):
    """A request whose completion is recorded (one row per request, see docs/trace-format.md)."""

    __slots__ = ("_hid", "_comm", "_cid")
    _BASE = _R      # the mpi4py class (TracedPrequest has its own)

    def __new__(cls, request=None):
        self = cls._BASE.__new__(cls, request)
        self._hid = -1
        self._comm = None
        self._cid = -1
        return self

    Wait = _single(_WAIT, _R.Wait, _always)
    wait = _single(_WAIT, _R.wait, _always)
    Test = _single(_TEST, _R.Test, bool)
    test = _single(_TEST, _R.test, lambda out: out[0])

    Waitall = _all(_WAITALL, _R.Waitall, _always)
    waitall = _all(_WAITALL, _R.waitall, _always)
    Testall = _all(_TESTALL, _R.Testall, bool)
    testall = _all(_TESTALL, _R.testall, lambda out: out[0])

    Waitany = _any(_WAITANY, _R.Waitany, lambda i: i)
    waitany = _any(_WAITANY, _R.waitany, lambda out: out[0])
    Testany = _any(_TESTANY, _R.Testany, lambda out: out[0] if out[1] else None)
    testany = _any(_TESTANY, _R.testany, lambda out: out[0] if out[1] else None)

    Waitsome = _some(_WAITSOME, _R.Waitsome, lambda idx: idx)
    waitsome = _some(_WAITSOME, _R.waitsome, lambda out: out[0])
    Testsome = _some(_TESTSOME, _R.Testsome, lambda idx: idx)
    testsome = _some(_TESTSOME, _R.testsome, lambda out: out[0])

    # (mpi4py's free() calls self.Free(): wrapped once, here)
    Free = _free(_R.Free)


# a cancelled request's message may never be delivered: counted, as the PMPI library does
# (mpi4py's cancel() calls MPI_Cancel itself, not Cancel(): both are counted, under one name)
TracedRequest.Cancel = _untraced.counting("Request.Cancel", _R.Cancel)
TracedRequest.cancel = _untraced.counting("Request.Cancel", _R.cancel)

_P = MPI.Prequest


class _PersistentStart:
    """What a persistent point-to-point request (`Send_init`, `Recv_init`, ...): each `Start` is
    recorded as the non-blocking post it starts (Isend, Issend, Ibsend, Irsend or Irecv, with a
    fresh request id) and its completion as any other, so replay sees ordinary messages."""

    def _started(self, t0: int, t1: int) -> None:
        T = _T
        rid = T.next_request
        T.next_request = rid + 1
        op, peer, tag, cid, nbytes = self._post
        o = T.off
        _pack(T.buf, o, op, T.region, t0, -1, peer, tag, cid, nbytes, rid, -1, t1)
        o += _ROW
        T.off = o
        if o >= T.end:
            T.roll()
        self._hid = rid

    def Start(self) -> None:
        t0 = _now()
        _P.Start(self)
        t1 = _now()
        if self._post is not None:
            self._started(t0, t1)

    @classmethod
    def Startall(cls, requests) -> None:
        t0 = _now()
        _P.Startall(requests)
        t1 = _now()
        for r in requests:
            if getattr(r, "_post", None) is not None:
                r._started(t0, t1)


def _persistent_class() -> type:
    """TracedRequest's completions and _PersistentStart's starts on mpi4py's Prequest (mpi4py
    refuses a class deriving from both TracedRequest and Prequest)."""
    body = {k: v for k, v in vars(TracedRequest).items()
            if k not in ("__dict__", "__weakref__", "_hid", "_comm", "_cid", "__slots__")}
    body.update({k: v for k, v in vars(_PersistentStart).items()
                 if k not in ("__dict__", "__weakref__", "__module__")})
    body.update(__slots__=("_hid", "_comm", "_cid", "_post"), _BASE=_P)
    cls = type("TracedPrequest", (_P,), body)

    def __new__(cls, request=None):
        self = _P.__new__(cls, request)
        self._hid = -1
        self._comm = None
        self._cid = -1
        self._post = None
        return self
    cls.__new__ = __new__
    return cls


TracedPrequest = _persistent_class()
