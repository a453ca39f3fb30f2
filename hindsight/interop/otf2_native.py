"""Compiled OTF2 event writing: the per-record work of ``otf2_export`` in numba, calling the OTF2
C library that the ``otf2`` package ships (its ``_otf2`` extension exports the whole C API).

Two kernels per rank: ``plan_rank`` puts a rank's rows in write order (properly nested
Enter/Leave, the MPI records inside their call: the mapping ``otf2_export`` documents) as flat
event arrays; ``write_rank`` writes those events through ``OTF2_EvtWriter_*``. Archive,
definitions and event writers stay with the ``otf2`` package (few objects); only the raw event
writer and attribute list pointers cross over.

The C functions are called through their addresses, passed in as an ``int64`` array (``_ccall``
casts one to a function pointer): a compiled function that captured a ctypes function would
embed this process's address, which address-space randomisation makes wrong in the next
process, and numba refuses to cache it.

The kernels are ``hindsight.jit`` kernels, compiled ahead of time by ``make`` like the replay's:
an export imports no numba where they are. So they hold no typed dict (a request's state is
kept in arrays indexed by the request's dense code, ``request_codes``), and ``_ccall``, an
intrinsic, is made when numba is imported (``on_bind``).
"""

from __future__ import annotations

import ctypes

import numpy as np

from hindsight.interop.otf2 import UNDEFINED_ROOT, UNDEFINED_UINT64
from hindsight.jit import njit, on_bind

# event kinds of a plan (``plan_rank``)
ENTER_REGION, LEAVE_REGION, ENTER, LEAVE = 0, 1, 2, 3
SEND, ISEND, IRECV_REQUEST, RECV, ISEND_COMPLETE, IRECV, PROBE = 4, 5, 6, 7, 8, 9, 10
NBC_REQUEST, NBC_COMPLETE, COLL_END = 11, 12, 13
# row classes (``otf2_export._op_tables``): which record can carry a row of the op
C_OTHER, C_SEND, C_NBSEND, C_IRECV, C_RECV, C_PROBE, C_NBC, C_COMPLETION, C_COLL, C_COMM = range(10)
# the C functions ``write_rank`` calls, by their index in ``function_addresses()``
FUNCTIONS = ("Enter", "Leave", "MpiSend", "MpiIsend", "MpiIrecvRequest", "MpiRecv",
             "MpiIsendComplete", "MpiIrecv", "MpiProbe", "NonBlockingCollectiveRequest",
             "NonBlockingCollectiveComplete", "MpiCollectiveBegin", "MpiCollectiveEnd",
             "AttributeList_AddInt32", "AttributeList_AddInt64", "AttributeList_AddStringRef",
             "AttributeList_RemoveAllAttributes")
(F_ENTER, F_LEAVE, F_SEND, F_ISEND, F_IRECV_REQUEST, F_RECV, F_ISEND_COMPLETE, F_IRECV, F_PROBE,
 F_NBC_REQUEST, F_NBC_COMPLETE, F_COLL_BEGIN, F_COLL_END, F_ADD32, F_ADD64, F_ADDSTR,
 F_CLEAR) = range(len(FUNCTIONS))
# attribute refs in the ``attrs`` array of ``write_rank``
A_SIZE, A_CPU, A_COMM, A_NEW, A_ROWS, A_SRC, A_TAG, A_RBYTES, A_NBYTES = range(9)
# ``write_rank``'s status: 0, or a failure (with two int64 details)
ERR_COMM, ERR_MEMBER, ERR_C = 1, 2, 3
UNDEF32 = np.uint32(UNDEFINED_ROOT)
UNDEF64 = np.uint64(UNDEFINED_UINT64)


def function_addresses() -> np.ndarray:
    """The addresses (this process's) of ``FUNCTIONS`` in the OTF2 library of ``_otf2``."""
    from _otf2.Config import conf

    out = []
    for name in FUNCTIONS:
        full = "OTF2_" + (name if name.startswith("AttributeList") else "EvtWriter_" + name)
        out.append(ctypes.cast(getattr(conf.lib, full), ctypes.c_void_p).value)
    return np.array(out, dtype=np.int64)


def pointer(handle) -> int:
    """The address behind a ctypes pointer the ``_otf2`` bindings hand out (0 for NULL)."""
    return ctypes.cast(handle, ctypes.c_void_p).value or 0


def request_codes(request: np.ndarray) -> tuple[np.ndarray, int]:
    """Each row's request id as a dense code (equal ids, equal codes; -1, no request, has one
    too) and how many codes there are: the id less the lowest when the ids span little more
    than the rows (a tracer numbers a rank's requests, an import its operations), else the
    ids numbered in sorted order."""
    n = len(request)
    if n == 0:
        return np.zeros(0, np.int64), 0
    lo, hi = int(request.min()), int(request.max())
    if hi - lo < max(2 * n, 1 << 16):
        return request.astype(np.int64) - lo, hi - lo + 1
    ids, codes = np.unique(request, return_inverse=True)
    return codes.astype(np.int64), len(ids)


#: a C function called through its address, for ``write_rank`` (an intrinsic: ``_define_ccall``)
_ccall = None


def _define_ccall() -> None:
    """Define ``_ccall``: call the C function at address ``addr`` with the arguments in the
    tuple ``args`` (their numba types give the C types: uint32, uint64, uint8, int32, int64;
    pointers as int64); returns its int32 result (an OTF2_ErrorCode). (Made when numba is
    imported: only numba can make an intrinsic, and an export whose kernels were compiled
    ahead of time never imports it.)"""
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def _ccall(typingctx, addr, args):
        if not isinstance(args, types.BaseTuple):
            return None
        sig = types.int32(addr, args)

        def codegen(context, builder, signature, llargs):
            fnty = ir.FunctionType(ir.IntType(32), [context.get_value_type(t) for t in args])
            fn = builder.inttoptr(llargs[0], fnty.as_pointer())
            return builder.call(fn, cgutils.unpack_tuple(builder, llargs[1], len(args)))
        return sig, codegen
    globals()["_ccall"] = _ccall


on_bind(_define_ccall)


@njit(cache=True)
def _completed(op, peer, tag, comm, nbytes, request, rcode, ncodes, nbc_any, completion):
    """Per request code (``request_codes``), whether one of the rank's non-blocking
    collectives with that request has its completion row carried by a
    NonBlockingCollectiveComplete: a post (peer and tag -1, a size) completed by a row with
    peer, tag and nbytes -1 on the same communicator. Only those posts are a
    NonBlockingCollectiveRequest, since the Complete gives the post's comm, root and size;
    another post (never completed, as on a rank that ended early) travels whole in its call's
    ATTR_ROWS."""
    posted = np.zeros(ncodes, np.bool_)
    posted_comm = np.zeros(ncodes, np.int64)
    done = np.zeros(ncodes, np.bool_)
    for i in range(len(op)):
        c = rcode[i]
        if nbc_any[op[i]] and request[i] >= 0 and peer[i] == -1 and tag[i] == -1 and \
                nbytes[i] >= 0:
            posted[c] = True
            posted_comm[c] = comm[i]
        elif completion[op[i]] and peer[i] == -1 and tag[i] == -1 and nbytes[i] == -1 and \
                posted[c] and posted_comm[c] == comm[i]:
            done[c] = True
    return done


# The helpers called per row or event are inlined: every array or dict passed to a compiled call
# is reference-counted atomically (plan_rank and write_rank 0.42 -> 0.38 s CPU at 4 M rows).
@njit(cache=True, inline="always")
def _record_kind(i, cls, peer, tag, comm, nb, c, post_kind, post_comm, post_row, done):
    """The record that carries row ``i`` (op class ``cls``, request code ``c``) of an MPI call:
    its event kind (-1: none can carry the row exactly, it travels in the call's ATTR_ROWS;
    -2: the call's Enter carries it in attributes) and whether it sits at the call's end (else
    at its start). A message record names a real peer (not MPI_PROC_NULL), a tag and a size; a
    completion is the record of the post it completes (per request code, the last post's kind,
    1 send / 0 receive / 2 collective, -1 none, its comm and row, filled here); ``done``:
    ``_completed``."""
    message = peer >= 0 and tag >= 0 and nb >= 0
    if cls == C_SEND:
        return (SEND if message else -1), False
    if cls == C_NBSEND:
        post_kind[c], post_comm[c], post_row[c] = 1, comm, i
        return (ISEND if message else -1), False
    if cls == C_IRECV:
        post_kind[c], post_comm[c], post_row[c] = 0, comm, i
        return IRECV_REQUEST, False
    if cls == C_RECV:
        return (RECV if message else -1), True
    if cls == C_PROBE:
        return (PROBE if peer != -1 and tag != -1 else -1), True
    if cls == C_NBC:
        if not done[c]:
            return -1, False
        post_kind[c], post_comm[c], post_row[c] = 2, comm, i
        return NBC_REQUEST, False
    if cls == C_COMPLETION:
        kind, pcomm = post_kind[c], post_comm[c]
        empty = peer == -1 and tag == -1 and nb == -1
        if kind == 2:
            return (NBC_COMPLETE if empty and comm == pcomm else -1), True
        if kind == 1 and empty and comm == pcomm:
            return ISEND_COMPLETE, True
        if kind == 0 and message:
            return IRECV, True
        return -1, False
    if cls == C_COLL:
        return (COLL_END if nb >= 0 and peer == -1 and tag == -1 else -1), True
    if cls == C_COMM:
        return -2, False
    return -1, False


@njit(cache=True)
def plan_rank(op, ts, te, peer, tag, comm, nbytes, request, rcode, ncodes, classes, nbc_any,
              completion, sr_send, sr_recv):
    """One rank's events in write order: properly nested Enter/Leave (an application region's
    children are clamped to it; an MPI call ends at the latest where the rank's next call
    starts) with the MPI records inside their call. Calls are consecutive rows with the same
    times and op (or a Sendrecv's halves), taken by start time; at a tie regions first (the
    longer outer) and MPI calls in record order. Returns (kind, time, row, aux) arrays (aux:
    the post row of an NBC_COMPLETE; for an ENTER the first index into the extras, or -1) and
    the extras (position in the call, row; ``ex_end[x]``: the end of the run starting at x)
    of the rows no record carries. Rows are the rank's, in seq order; ``rcode``: each row's
    request code (``request_codes``: ``ncodes`` of them); ``classes`` maps op codes to C_*."""
    n = len(op)
    done = _completed(op, peer, tag, comm, nbytes, request, rcode, ncodes, nbc_any, completion)
    # calls: consecutive rows with the same times and op (or a Sendrecv's two halves)
    cs = np.empty(n, np.int64)
    ce = np.empty(n, np.int64)
    creg = np.zeros(n, np.bool_)
    cfirst = np.empty(n, np.int64)
    ccount = np.empty(n, np.int64)
    nc = 0
    k = 0
    while k < n:
        i = k
        m = 1
        if op[i] != 0:
            while k + 1 < n:
                j = k + 1
                if not (ts[j] == ts[i] and te[j] == te[i] and op[j] != 0 and (
                        op[j] == op[i] or (op[i] == sr_send and op[j] == sr_recv))):
                    break
                m += 1
                k += 1
        cs[nc], ce[nc], creg[nc], cfirst[nc], ccount[nc] = ts[i], te[i], op[i] == 0, i, m
        nc += 1
        k += 1
    # an MPI call ends at the latest when the rank's next one starts
    prev = -1
    for c in range(nc):
        if not creg[c]:
            if prev >= 0:
                ce[prev] = max(cs[prev], min(ce[prev], cs[c]))
            prev = c
    # by start; at a tie regions first (longer first), MPI calls in record order
    k3 = np.zeros(nc, np.int64)
    k2 = np.ones(nc, np.int64)
    for c in range(nc):
        if creg[c]:
            k3[c] = -ce[c]
            k2[c] = 0
    in_order = True     # (the common case: no sort)
    for c in range(1, nc):
        if (cs[c - 1], k2[c - 1], k3[c - 1]) > (cs[c], k2[c], k3[c]):
            in_order = False
            break
    if in_order:
        order = np.arange(nc)
    else:
        order = np.argsort(k3, kind="mergesort")
        order = order[np.argsort(k2[order], kind="mergesort")]
        order = order[np.argsort(cs[:nc][order], kind="mergesort")]

    cap = 2 * nc + n
    ev_kind = np.empty(cap, np.int8)
    ev_t = np.empty(cap, np.int64)
    ev_row = np.empty(cap, np.int64)
    ev_aux = np.full(cap, -1, np.int64)
    ex_pos = np.empty(n, np.int64)
    ex_row = np.empty(n, np.int64)
    ex_end = np.empty(n, np.int64)      # for an extras run starting at x: its end
    st_end = np.empty(nc, np.int64)
    st_kind = np.empty(nc, np.int8)
    st_row = np.empty(nc, np.int64)
    post_kind = np.full(ncodes, -1, np.int8)
    post_comm = np.zeros(ncodes, np.int64)
    post_row = np.zeros(ncodes, np.int64)
    ne = nx = sp = 0
    for c in order:
        start, end = cs[c], ce[c]
        while sp > 0 and st_end[sp - 1] <= start:
            sp -= 1
            ev_kind[ne], ev_t[ne], ev_row[ne] = st_kind[sp], st_end[sp], st_row[sp]
            ne += 1
        if sp > 0 and end > st_end[sp - 1]:
            end = st_end[sp - 1]        # a child is clamped into its parent
        first = cfirst[c]
        ev_kind[ne], ev_t[ne], ev_row[ne] = ENTER_REGION if creg[c] else ENTER, start, first
        enter_at = ne
        ne += 1
        if not creg[c]:
            x0 = nx
            for pos in range(ccount[c]):
                i = first + pos
                kind, at_end = _record_kind(i, classes[op[i]], peer[i], tag[i], comm[i],
                                            nbytes[i], rcode[i], post_kind, post_comm,
                                            post_row, done)
                if kind == -1:
                    ex_pos[nx], ex_row[nx] = pos, i
                    nx += 1
                elif kind >= 0:
                    ev_kind[ne], ev_t[ne], ev_row[ne] = kind, end if at_end else start, i
                    if kind == NBC_COMPLETE:
                        ev_aux[ne] = post_row[rcode[i]]
                    ne += 1
            if nx > x0:
                ev_aux[enter_at] = x0
                ex_end[x0] = nx
        st_end[sp], st_kind[sp], st_row[sp] = end, LEAVE_REGION if creg[c] else LEAVE, first
        sp += 1
    while sp > 0:
        sp -= 1
        ev_kind[ne], ev_t[ne], ev_row[ne] = st_kind[sp], st_end[sp], st_row[sp]
        ne += 1
    return (ev_kind[:ne], ev_t[:ne], ev_row[:ne], ev_aux[:ne], ex_pos[:nx], ex_row[:nx],
            ex_end[:nx])


@njit(cache=True, inline="always")
def _local(cid, world, comm_ids, rank_in, self_at, info):
    """The rank of world rank ``world`` in communicator ``cid`` (OTF2's peers are ranks within
    the communicator; 0 in COMM_SELF), or -1 with ``info`` = (ERR_COMM or ERR_MEMBER, cid,
    world)."""
    k = np.searchsorted(comm_ids, cid)
    if k >= len(comm_ids) or comm_ids[k] != cid:
        info[0], info[1], info[2] = ERR_COMM, cid, world
        return -1
    if k == self_at:
        return 0
    if world < 0 or world >= rank_in.shape[1] or rank_in[k, world] < 0:
        info[0], info[1], info[2] = ERR_MEMBER, cid, world
        return -1
    return rank_in[k, world]


@njit(cache=True, inline="always")
def _comm_ref(cid, comm_ids, comm_refs, info):
    """The OTF2 ref of communicator ``cid``, or 0 with ``info`` = (ERR_COMM, cid, -1)."""
    k = np.searchsorted(comm_ids, cid)
    if k >= len(comm_ids) or comm_ids[k] != cid:
        info[0], info[1], info[2] = ERR_COMM, cid, -1
        return np.uint32(0)
    return np.uint32(comm_refs[k])


@njit(cache=True, inline="always")
def _size_factor(cid, blocking, comm_ids, comm_size, total_over_peers, self_id):
    """The factor the exporter multiplies a collective's block by (``TOTAL_OVER_PEERS``)."""
    if not total_over_peers[blocking] or cid == self_id:
        return 1
    k = np.searchsorted(comm_ids, cid)
    if k >= len(comm_ids) or comm_ids[k] != cid:
        return 1
    return comm_size[k]


# Without reference counting (``_nrt=False``; it allocates nothing): counted, the arrays it
# hands its inlined helpers cost an atomic add each at every event (15 % of the export's CPU).
@njit(cache=True, _nrt=False)
def write_rank(fns, evw, al, t0, ev_kind, ev_t, ev_row, ev_aux, ev_region, ev_rows_ref,
               op, peer, tag, comm, nbytes, request, root, cpu, attrs, coll_op, is_comm_op,
               blocking_of, total_over_peers, comm_ids, comm_refs, comm_size, rank_in, self_at,
               self_id, info):
    """Write one rank's planned events with event writer ``evw`` (attribute list ``al``): times
    minus ``t0``, made non-decreasing. ``ev_region``: the region ref of Enter/Leave events;
    ``ev_rows_ref``: the string ref of an ENTER's ATTR_ROWS or -1; ``coll_op``: op code -> its
    OTF2 CollectiveOp or -1. Returns the number of records written and the last time; on a
    failure ``info`` says what (ERR_*), the records so far are written."""
    last = np.int64(0)
    written = 0
    for e in range(len(ev_kind)):
        kind = ev_kind[e]
        t = max(ev_t[e] - t0, last)
        last = t
        tt = np.uint64(t)
        i = ev_row[e]
        nattr = 0
        rc = np.int32(0)
        if kind == ENTER_REGION or kind == LEAVE_REGION or kind == LEAVE:
            v = nbytes[i] if kind == ENTER_REGION else cpu[i]
            if v >= 0:
                a = attrs[A_SIZE] if kind == ENTER_REGION else attrs[A_CPU]
                rc |= _ccall(fns[F_ADD64], (al, np.uint32(a), np.int64(v)))
                nattr = 1
            f = fns[F_ENTER] if kind == ENTER_REGION else fns[F_LEAVE]
            rc |= _ccall(f, (evw, al, tt, np.uint32(ev_region[e])))
        elif kind == ENTER:
            if is_comm_op[op[i]]:
                rc |= _ccall(fns[F_ADD64], (al, np.uint32(attrs[A_COMM]), np.int64(comm[i])))
                rc |= _ccall(fns[F_ADD64], (al, np.uint32(attrs[A_NEW]), np.int64(peer[i])))
                nattr = 1
            if ev_rows_ref[e] >= 0:
                rc |= _ccall(fns[F_ADDSTR], (al, np.uint32(attrs[A_ROWS]),
                                             np.uint32(ev_rows_ref[e])))
                nattr = 1
            rc |= _ccall(fns[F_ENTER], (evw, al, tt, np.uint32(ev_region[e])))
            if coll_op[op[i]] >= 0:
                if nattr:
                    rc |= _ccall(fns[F_CLEAR], (al,))
                    nattr = 0
                rc |= _ccall(fns[F_COLL_BEGIN], (evw, al, tt))
                written += 1
        elif kind == IRECV_REQUEST:
            rc |= _ccall(fns[F_ADD32], (al, np.uint32(attrs[A_SRC]), np.int32(peer[i])))
            rc |= _ccall(fns[F_ADD32], (al, np.uint32(attrs[A_TAG]), np.int32(tag[i])))
            rc |= _ccall(fns[F_ADD64], (al, np.uint32(attrs[A_RBYTES]), np.int64(nbytes[i])))
            rc |= _ccall(fns[F_ADD64], (al, np.uint32(attrs[A_COMM]), np.int64(comm[i])))
            nattr = 1
            rc |= _ccall(fns[F_IRECV_REQUEST], (evw, al, tt, np.uint64(request[i])))
        elif kind == ISEND_COMPLETE:
            rc |= _ccall(fns[F_ISEND_COMPLETE], (evw, al, tt, np.uint64(request[i])))
        elif kind == NBC_REQUEST:
            rc |= _ccall(fns[F_NBC_REQUEST], (evw, al, tt, np.uint64(request[i])))
        else:
            cid = comm[i]
            nb = np.uint64(max(nbytes[i], 0))
            tg = np.uint32(max(tag[i], 0))
            if kind == SEND or kind == ISEND or kind == RECV or kind == IRECV:
                loc = _local(cid, peer[i], comm_ids, rank_in, self_at, info)
                cref = _comm_ref(cid, comm_ids, comm_refs, info)
                if info[0]:
                    return written, last
                if kind == SEND:
                    rc |= _ccall(fns[F_SEND], (evw, al, tt, np.uint32(loc), cref, tg, nb))
                elif kind == RECV:
                    rc |= _ccall(fns[F_RECV], (evw, al, tt, np.uint32(loc), cref, tg, nb))
                else:
                    f = fns[F_ISEND] if kind == ISEND else fns[F_IRECV]
                    rc |= _ccall(f, (evw, al, tt, np.uint32(loc), cref, tg, nb,
                                     np.uint64(request[i])))
            elif kind == PROBE:
                cref = _comm_ref(cid, comm_ids, comm_refs, info)
                src = UNDEF32
                if peer[i] >= 0:
                    src = np.uint32(_local(cid, peer[i], comm_ids, rank_in, self_at, info))
                if info[0]:
                    return written, last
                ptag = np.uint32(tag[i]) if tag[i] >= 0 else UNDEF32
                rc |= _ccall(fns[F_ADD64], (al, np.uint32(attrs[A_NBYTES]), np.int64(nbytes[i])))
                nattr = 1
                rc |= _ccall(fns[F_PROBE], (evw, al, tt, src, cref, ptag, UNDEF64))
            else:   # NBC_COMPLETE (sizes, root, op of its post row) or COLL_END
                p = ev_aux[e] if kind == NBC_COMPLETE else i
                blocking = blocking_of[op[p]]
                total = np.uint64(max(nbytes[p], 0) * _size_factor(
                    cid, blocking, comm_ids, comm_size, total_over_peers, self_id))
                cref = _comm_ref(cid, comm_ids, comm_refs, info)
                rt = UNDEF32
                if root[p] >= 0:
                    rt = np.uint32(_local(cid, root[p], comm_ids, rank_in, self_at, info))
                if info[0]:
                    return written, last
                cop = np.uint8(coll_op[blocking])
                if kind == NBC_COMPLETE:
                    rc |= _ccall(fns[F_NBC_COMPLETE], (evw, al, tt, cop, cref, rt, total, total,
                                                       np.uint64(request[i])))
                else:
                    rc |= _ccall(fns[F_COLL_END], (evw, al, tt, cop, cref, rt, total, total))
        if nattr:
            rc |= _ccall(fns[F_CLEAR], (al,))
        written += 1
        if rc != 0:
            info[0], info[1], info[2] = ERR_C, rc, e
            return written, last
    return written, last


@njit(cache=True)
def region_keys(kind, row, region_code, op, nuser, first, offset):
    """Each event's region key: 1 + its row's region code for an application region's
    Enter/Leave (0: none), ``nuser`` + 1 + op code for an MPI call's, -1 for other events;
    ``first[key]`` gets the event's index + ``offset`` where a key is first used (-1: not
    yet)."""
    keys = np.full(len(kind), -1, np.int64)
    for e in range(len(kind)):
        k = kind[e]
        if k == ENTER_REGION or k == LEAVE_REGION:
            keys[e] = region_code[row[e]] + 1
        elif k == ENTER or k == LEAVE:
            keys[e] = nuser + 1 + op[row[e]]
        else:
            continue
        if first[keys[e]] < 0:
            first[keys[e]] = e + offset
    return keys
