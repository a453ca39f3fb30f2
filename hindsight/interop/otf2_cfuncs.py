"""The OTF2 event callbacks of ``otf2_events`` as numba ``@cfunc``s: what the import reads
with where ``otf2_records.c`` cannot be built (no C compiler). Each appends the record
``otf2_records.c`` appends, through ``_append``; importing this module imports numba.

The callbacks reach their buffer through the ``userData`` pointer, the state array of
``otf2_events``. Addresses are passed in, never captured, so that numba's on-disk cache stays
valid across processes (as in ``otf2_native``).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import cfunc, njit, types
from numba.extending import intrinsic

from hindsight.interop.otf2_layout import (
    A0, ATTRS, COLL_BEGIN, COLL_END, ENTER, F0, F1, F2, F3, F4, F5, IRECV, IRECV_REQUEST, ISEND,
    ISEND_COMPLETE, KIND, LEAVE, LOC, MASK, NBC_COMPLETE, NBC_REQUEST, PROBE, RECV, REQUEST_TEST,
    SEND, TIME, WIDTH, _S_BUF, _S_CAP, _S_GETATTR, _S_N, _S_NATTR, _S_REFS, _S_SCRATCH,
    _TYPE_STRING)
from hindsight.interop.otf2_native import _ccall


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


#: the callbacks, in ``otf2_events.KIND_NAMES``' order
CFUNCS = (_enter, _leave, _send, _isend, _isend_complete, _irecv_request, _recv, _irecv,
          _request_test, _coll_begin, _coll_end, _nbc_request, _nbc_complete, _probe)
