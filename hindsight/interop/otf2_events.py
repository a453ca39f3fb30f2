"""Compiled OTF2 event reading for ``otf2_import``: the records the importer turns into rows
arrive through numba ``@cfunc`` callbacks of the OTF2 C library that the ``otf2`` package ships
(``OTF2_GlobalEvtReader``), each appending one fixed-size record to a NumPy buffer, read
``CHUNK`` events at a time; the importer gets the buffer's columns, not an object per event.

Record layout (int64 columns): ``KIND``, ``LOC`` (the location ref), ``TIME`` (OTF2 ticks),
the event's fields ``F0``..``F5`` (per kind, at ``KIND``), ``MASK`` (bit j: attribute ``ATTRS[j]`` is
present) and the attributes' values ``A0``.. (in ``ATTRS``' order). The other event types (RMA,
I/O, threading, metrics, ...) have no row: ctypes callbacks count them by (type name, location,
metric ref), which is all the importer needs of them.

The callbacks reach their buffer through the ``userData`` pointer: an int64 state array
(``_S_*``) holding the buffer's address, its length and the addresses of the two
``OTF2_AttributeList`` functions they call. Addresses are passed in, never captured, so that
numba's on-disk cache stays valid across processes (as in ``otf2_native``).
"""

from __future__ import annotations

import ctypes
import itertools
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Iterator

import numpy as np
from llvmlite import ir
from numba import cfunc, njit, types
from numba.extending import intrinsic

from hindsight.interop.otf2 import (
    ATTR_COMM,
    ATTR_CPU,
    ATTR_IRECV_BYTES,
    ATTR_NBYTES,
    ATTR_NEW_COMM,
    ATTR_ROWS,
    ATTR_SIZE,
    ATTR_SOURCE,
    ATTR_TAG,
)
from hindsight.interop.otf2_native import _ccall, pointer
from hindsight.system import wait_through_interrupts

CHUNK = 1 << 16         # events per OTF2_GlobalEvtReader_ReadEvents call
# record kinds
(ENTER, LEAVE, SEND, ISEND, ISEND_COMPLETE, IRECV_REQUEST, RECV, IRECV, REQUEST_TEST,
 COLL_BEGIN, COLL_END, NBC_REQUEST, NBC_COMPLETE, PROBE) = range(14)
# the OTF2 record type names of the kinds, as the ``otf2`` package names its event classes
KIND_NAMES = ("Enter", "Leave", "MpiSend", "MpiIsend", "MpiIsendComplete", "MpiIrecvRequest",
              "MpiRecv", "MpiIrecv", "MpiRequestTest", "MpiCollectiveBegin",
              "MpiCollectiveEnd", "NonBlockingCollectiveRequest",
              "NonBlockingCollectiveComplete", "MpiProbe")
# fields per kind: Enter/Leave F0 region; messages F0 peer, F1 comm, F2 tag, F3 length
# (unsigned), F4 request (unsigned); request records F4; collective ends F0 op, F1 comm, F2
# root, F3 sizeSent, F5 sizeReceived, F4 request; MpiProbe F0 sender, F1 comm, F2 tag
KIND, LOC, TIME, F0, F1, F2, F3, F4, F5, MASK, A0 = range(11)
# the attributes the importer reads, by name (their refs come from the definitions)
ATTRS = (ATTR_SIZE, ATTR_CPU, ATTR_NEW_COMM, ATTR_COMM, ATTR_ROWS, ATTR_SOURCE, ATTR_TAG,
         ATTR_IRECV_BYTES, ATTR_NBYTES)
WIDTH = A0 + len(ATTRS)
# the state array
_S_BUF, _S_CAP, _S_N, _S_NATTR, _S_GETATTR, _S_REFS = 0, 1, 2, 3, 4, 5
_S_SCRATCH = _S_REFS + len(ATTRS)       # ref, type, value of the attribute being read
_S_LEN = _S_SCRATCH + 3
_TYPE_STRING = 11


@intrinsic
def _ccall_ptr(typingctx, addr):
    """``addr`` (int64) as an int64 pointer."""
    sig = types.CPointer(types.int64)(addr)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], ir.IntType(64).as_pointer())
    return sig, codegen


@njit(cache=True)
def _decode(typ, raw):
    """An OTF2_AttributeValue's integer as the ``otf2`` package gives it (a string's ref)."""
    if typ == 1:
        return raw & 0xFF
    if typ == 2:
        return raw & 0xFFFF
    if typ == 3 or typ == _TYPE_STRING:
        return raw & 0xFFFFFFFF
    if typ == 5:
        return ((raw & 0xFF) ^ 0x80) - 0x80
    if typ == 6:
        return ((raw & 0xFFFF) ^ 0x8000) - 0x8000
    if typ == 7:
        return ((raw & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000
    return raw


@njit(cache=True)
def _append(user, kind, loc, time, f0, f1, f2, f3, f4, f5, attrs):
    """Append one record (with the attributes of ``ATTRS`` in ``attrs``) to the buffer."""
    s = _ccall_ptr(user)
    n = s[_S_N]
    if n >= s[_S_CAP]:
        return 1            # OTF2_CALLBACK_INTERRUPT: never, ReadEvents reads at most CAP
    b = _ccall_ptr(s[_S_BUF] + n * WIDTH * 8)
    b[KIND], b[LOC], b[TIME] = kind, loc, time
    b[F0], b[F1], b[F2], b[F3], b[F4], b[F5] = f0, f1, f2, f3, f4, f5
    mask = 0
    if attrs != 0:
        count = _ccall(s[_S_NATTR], (attrs,)) & 0xFFFFFFFF
        scratch = user + _S_SCRATCH * 8
        for i in range(count):
            s[_S_SCRATCH] = 0
            s[_S_SCRATCH + 1] = 0
            s[_S_SCRATCH + 2] = 0
            _ccall(s[_S_GETATTR], (attrs, np.uint32(i), scratch, scratch + 8, scratch + 16))
            ref = s[_S_SCRATCH] & 0xFFFFFFFF
            for j in range(len(ATTRS)):
                if s[_S_REFS + j] == ref:
                    b[A0 + j] = _decode(s[_S_SCRATCH + 1] & 0xFF, s[_S_SCRATCH + 2])
                    mask |= 1 << j
    b[MASK] = mask
    s[_S_N] = n + 1
    return 0


_u64, _u32, _i64 = types.uint64, types.uint32, types.int64
_HEAD = (_u64, _u64, _i64, _i64)        # location, time, userData, attribute list


def _sig(*rest):
    return types.int32(*_HEAD, *rest)


@cfunc(_sig(_u32), cache=True)
def _enter(loc, t, user, attrs, region):
    return _append(user, ENTER, loc, t, region, 0, 0, 0, 0, 0, attrs)


@cfunc(_sig(_u32), cache=True)
def _leave(loc, t, user, attrs, region):
    return _append(user, LEAVE, loc, t, region, 0, 0, 0, 0, 0, attrs)


@cfunc(_sig(_u32, _u32, _u32, _u64), cache=True)
def _send(loc, t, user, attrs, peer, comm, tag, length):
    return _append(user, SEND, loc, t, peer, comm, tag, length, 0, 0, attrs)


@cfunc(_sig(_u32, _u32, _u32, _u64, _u64), cache=True)
def _isend(loc, t, user, attrs, peer, comm, tag, length, req):
    return _append(user, ISEND, loc, t, peer, comm, tag, length, req, 0, attrs)


@cfunc(_sig(_u32, _u32, _u32, _u64), cache=True)
def _recv(loc, t, user, attrs, peer, comm, tag, length):
    return _append(user, RECV, loc, t, peer, comm, tag, length, 0, 0, attrs)


@cfunc(_sig(_u32, _u32, _u32, _u64, _u64), cache=True)
def _irecv(loc, t, user, attrs, peer, comm, tag, length, req):
    return _append(user, IRECV, loc, t, peer, comm, tag, length, req, 0, attrs)


@cfunc(_sig(_u64), cache=True)
def _isend_complete(loc, t, user, attrs, req):
    return _append(user, ISEND_COMPLETE, loc, t, 0, 0, 0, 0, req, 0, attrs)


@cfunc(_sig(_u64), cache=True)
def _irecv_request(loc, t, user, attrs, req):
    return _append(user, IRECV_REQUEST, loc, t, 0, 0, 0, 0, req, 0, attrs)


@cfunc(_sig(_u64), cache=True)
def _request_test(loc, t, user, attrs, req):
    return _append(user, REQUEST_TEST, loc, t, 0, 0, 0, 0, req, 0, attrs)


@cfunc(_sig(_u64), cache=True)
def _nbc_request(loc, t, user, attrs, req):
    return _append(user, NBC_REQUEST, loc, t, 0, 0, 0, 0, req, 0, attrs)


@cfunc(_sig(), cache=True)
def _coll_begin(loc, t, user, attrs):
    return _append(user, COLL_BEGIN, loc, t, 0, 0, 0, 0, 0, 0, attrs)


@cfunc(_sig(types.uint8, _u32, _u32, _u64, _u64), cache=True)
def _coll_end(loc, t, user, attrs, op, comm, root, sent, received):
    return _append(user, COLL_END, loc, t, op, comm, root, sent, 0, received, attrs)


@cfunc(_sig(types.uint8, _u32, _u32, _u64, _u64, _u64), cache=True)
def _nbc_complete(loc, t, user, attrs, op, comm, root, sent, received, req):
    return _append(user, NBC_COMPLETE, loc, t, op, comm, root, sent, req, received, attrs)


@cfunc(_sig(_u32, _u32, _u32, _u64), cache=True)
def _probe(loc, t, user, attrs, sender, comm, tag, msg):
    return _append(user, PROBE, loc, t, sender, comm, tag, msg, 0, 0, attrs)


_CFUNCS = (_enter, _leave, _send, _isend, _isend_complete, _irecv_request, _recv, _irecv,
           _request_test, _coll_begin, _coll_end, _nbc_request, _nbc_complete, _probe)
_RARE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_void_p,
                         ctypes.c_void_p)
_METRIC = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_void_p,
                           ctypes.c_void_p, ctypes.c_uint32)


def _c_function(name: str, *argtypes):
    """OTF2 C function ``name`` (returning an OTF2_ErrorCode) with its own prototype (the
    ``_otf2`` bindings set argtypes on the library's shared function objects; this leaves them
    alone); an error code is raised as the bindings raise it (``_otf2.Error``)."""
    import _otf2
    from _otf2.Config import conf

    fn = ctypes.CFUNCTYPE(_otf2.ErrorCode, *argtypes)(pointer(getattr(conf.lib, name)))
    fn.errcheck = _otf2.ErrorCodes.HandleErrorCode
    return fn


@contextmanager
def read_events(trace, attr_refs: dict[str, int]) -> Iterator[Iterator[tuple[np.ndarray,
                                                                            Counter]]]:
    """The events of the opened ``otf2.reader.Reader`` ``trace``, in the order its
    ``events`` gives them, as a context whose value yields per chunk: the records of
    ``KIND_NAMES`` (an (n, WIDTH) int64 array, valid until the next chunk is asked for) and the
    counts of the other events by (type name, location ref, metric ref or -1). ``attr_refs``:
    name -> ref of the attributes of ``ATTRS`` defined. A read error of the C library (damaged
    event file) is raised (``_otf2.Error``) after the chunk's records read before it.

    The next chunk is read on a thread while the caller converts this one, into the other of
    two buffers: the C library and its compiled callbacks run without the GIL (a ctypes call),
    and reading was a third of the import's conversion. Leaving the context waits for that
    read, so the reader is never closed under it."""
    import _otf2
    import otf2.events as E

    cap = CHUNK
    bufs = [np.zeros((cap, WIDTH), np.int64) for _ in range(2)]
    state = np.zeros(_S_LEN, np.int64)
    state[_S_CAP] = cap
    state[_S_NATTR] = pointer(_otf2_lib().OTF2_AttributeList_GetNumberOfElements)
    state[_S_GETATTR] = pointer(_otf2_lib().OTF2_AttributeList_GetAttributeByIndex)
    for j, name in enumerate(ATTRS):
        state[_S_REFS + j] = attr_refs.get(name, -1)
    # the package's own preparation (all locations selected, local definitions read); the
    # reader's close() closes this global event reader
    handle = trace._get_global_evt_reader_handle(None)
    rare = [Counter()]      # the counts of the chunk being read (the rare callbacks' target)
    keep = []           # the ctypes callbacks, alive while the reader may call them
    callbacks = _otf2.GlobalEvtReaderCallbacks_New()
    try:
        hot = dict(zip(KIND_NAMES, _CFUNCS))
        for name in (n for n, c in vars(E).items()
                     if isinstance(c, type) and issubclass(c, E._Event) and c is not E._Event):
            setter = _c_function(f"OTF2_GlobalEvtReaderCallbacks_Set{name}Callback",
                                 ctypes.c_void_p, ctypes.c_void_p)
            if name in hot:
                address = hot[name].address
            elif name == "Metric":
                keep.append(_METRIC(lambda loc, t, u, a, ref: _count(rare[0], "Metric", loc,
                                                                     ref)))
                address = pointer(keep[-1])
            else:
                keep.append(_RARE(lambda loc, t, u, a, name=name: _count(rare[0], name, loc,
                                                                         -1)))
                address = pointer(keep[-1])
            setter(pointer(callbacks), address)
        set_callbacks = _c_function("OTF2_GlobalEvtReader_SetCallbacks", ctypes.c_void_p,
                                    ctypes.c_void_p, ctypes.c_void_p)
        set_callbacks(pointer(handle), pointer(callbacks), state.ctypes.data)
    finally:
        _otf2.GlobalEvtReaderCallbacks_Delete(callbacks)

    def read(buf: np.ndarray) -> tuple[np.ndarray, Counter, bool, Exception | None]:
        """One chunk into ``buf``: its records, its rare counts, whether it was the last,
        the read's error."""
        state[_S_BUF], state[_S_N] = buf.ctypes.data, 0
        rare[0] = Counter()
        try:
            got, error = _otf2.GlobalEvtReader_ReadEvents(handle, cap), None
        except Exception as exc:
            got, error = 0, exc
        return buf[:state[_S_N]], rare[0], error is not None or got < cap, error

    def chunks(pool: ThreadPoolExecutor) -> Iterator[tuple[np.ndarray, Counter]]:
        ahead = pool.submit(read, bufs[0])
        for k in itertools.count(1):
            recs, counts, last, error = ahead.result()
            if not last:
                ahead = pool.submit(read, bufs[k % 2])
            yield recs, counts
            if error is not None:
                raise error
            if last:
                return

    pool = ThreadPoolExecutor(1)
    try:
        yield chunks(pool)
    finally:
        # the read in flight ends before the caller closes the reader, even through a second
        # Ctrl-C (the C library would read freed memory: a crash instead of an interrupt)
        interrupted = wait_through_interrupts(lambda: pool.shutdown(wait=True))
        if interrupted is not None:
            raise interrupted


def _count(rare: Counter, name: str, loc: int, ref: int) -> int:
    rare[name, loc, ref] += 1
    return 0


def _otf2_lib():
    from _otf2.Config import conf

    return conf.lib

