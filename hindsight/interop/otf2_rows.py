"""Compiled conversion of an OTF2 archive's event records (``otf2_events``) into trace rows, for
``otf2_import``: kernels (``hindsight.jit``) over the records' int64 columns and integer tables
that ``otf2_import`` prepares from the definitions; no Python object per event.

Rule *events to rows* (``convert``) walks one chunk of records in the archive's order: a rank's
call stack (Enter/Leave pairing), its open MPI call and the records inside it (*call rows*,
``otf2_calls``, at the call's Leave), the rows of non-MPI regions, the skipped counts of the
events it has no row for. Its state (``Conversion``) lives in arrays across chunks, its request
tables too (``pairtable``). It runs without the GIL: the next chunk is being read meanwhile
(``otf2_events``), and the reader's Python callbacks of rare events take the GIL; and without
reference counting (``_nrt=False``): counting, atomically, the references of the two dozen
arrays it hands its inlined helpers at every MPI call doubles its time. When it meets an event
it cannot take it stops there and says why (``BAIL_*``): a full buffer or table (the caller
grows it and calls again from that event) or an error, which the caller words (the kernel
keeps no strings). Rules *ticks to ns* and *ref lookup* (``chunk_fields``) give the records
of a chunk their times in ns, ranks, regions and communicators before ``convert`` walks them.
Rule *completions* (``fill_nbc``) gives a non-blocking collective's post row the
communicator, size and root of its completion; rule *by rank* (``by_rank``) orders the rows
by rank, stably.
"""

from __future__ import annotations

import numpy as np

from hindsight.jit import njit
from hindsight import trace as tf
from hindsight.system import fresh_array
from hindsight.interop import otf2_events as EV
from hindsight.interop import pairtable as PT
from hindsight.interop.otf2_calls import (
    NBC_PENDING, NCOL, NREC, O_BLOCKING, O_ROOTED, R_COLL, R_COMM_NEW, R_IRECV_REQ,
    R_ISEND_DONE, R_NBC_DONE, R_NBC_REQ, R_PROBE, R_RECV, R_SEND, RA, RB, RC, RD, RE, RF, RG,
    RK, SK_NBC_EVENT, T_DONE, T_NBC, T_POST, T_REQ, W_COMM, W_CPU, W_NBYTES, W_OP, W_RANK,
    W_REGION, W_REQ, W_ROOT, W_T0, W_T1, WIDTHS,
    block, call_rows)
from hindsight.interop.otf2 import UNDEFINED_ROOT

# a rank's state (a row of Conversion.ranks)
S_DEPTH, S_RDEPTH, S_MPI, S_CALL, S_CALL_T, S_CALL_REG, S_CALL_EXT, S_NREC, S_NEXT_REQ = \
    range(9)
# a stack frame: region name id, enter time, MPI or not, work size
F_NAME, F_T, F_MPI, F_WORK = range(4)
# a region table's columns: name id (-1: no such region), MPI, call branch, op code
G_NAME, G_MPI, G_BRANCH, G_OP = range(4)
# a communicator table's columns: hindsight id, slot (its members), usable (1) or not
K_CID, K_SLOT, K_OK = range(3)
# counters: rows written, events seen (the order skipped kinds first occurred in)
C_NROWS, C_STAMP = range(2)
SK_NO_OP = 1                    # skipped kind "MPI call without a trace op"
# why convert stopped
(DONE, BAIL_EVENT, BAIL_LEAVE_EMPTY, BAIL_MISMATCH, BAIL_CALL, NEED_STACK, NEED_RECS,
 NEED_ROWS, NEED_TABLE) = range(9)
# the attributes' places in a record (EV.ATTRS)
(A_SIZE, A_CPU, A_NEW, A_COMM, A_ROWS, A_SRC, A_TAG, A_RBYTES, A_NBYTES) = range(len(EV.ATTRS))


def _doubled(a: np.ndarray, axis: int) -> np.ndarray:
    shape = list(a.shape)
    shape[axis] *= 2
    out = np.empty(shape, a.dtype)
    out[(slice(None),) * axis + (slice(0, a.shape[axis]),)] = a
    return out


class Conversion:
    """The state of rule *events to rows* across chunks (see the module docstring)."""

    def __init__(self, nranks: int, rows: int = 1 << 16):
        self.ranks = np.zeros((nranks, 9), np.int64)
        self.stack = np.zeros((nranks, 16, 4), np.int64)
        self.rstack = np.zeros((nranks, 16), np.int64)
        self.recs = np.zeros((nranks, 8, NREC), np.int64)
        # Room for ``rows`` rows, in a mapping of its own whose pages are mapped as rows are
        # written: a bound of the rows costs only the rows there are, where doubling a full
        # buffer copied it and held both copies (0.5 s and 800 MB at 8 M rows).
        try:
            self.rows = fresh_array((NCOL, max(rows, 1)), np.int64)
        except (OSError, OverflowError, ValueError):
            # (a bound past what the system maps, a damaged event count: grown as it fills)
            self.rows = np.empty((NCOL, min(max(rows, 1), 1 << 22)), np.int64)
        self.counters = np.zeros(2, np.int64)
        self.skipped = np.zeros(2, np.int64)
        self.skipped_first = np.full(2, -1, np.int64)
        self.off = np.zeros((0, 2), np.int64)           # per other location: events, MPI ones
        self.off_first = np.zeros((0, 2), np.int64)
        self.aux = np.zeros(4, np.int64)
        # the request tables (otf2_calls.T_*) and their counts
        self.tables = [PT.new_table(w) for w in WIDTHS]
        self.tc = np.zeros(len(WIDTHS), np.int64)

    def grow(self, need: int) -> None:
        """Make room after ``convert`` stopped with ``need`` (a ``NEED_*``): twice the
        buffer, its first half copied; for ``NEED_TABLE``, each table without room for the
        ``aux[0]`` entries the call needs made larger."""
        if need == NEED_TABLE:
            n = int(self.aux[0])
            for j, t in enumerate(self.tables):
                if not PT.room(t, self.tc, j, n):
                    self.tables[j] = PT.grown(t, self.tc, j, n)
        elif need == NEED_STACK:
            self.stack, self.rstack = _doubled(self.stack, 1), _doubled(self.rstack, 1)
        elif need == NEED_RECS:
            self.recs = _doubled(self.recs, 1)
        else:
            self.rows = _doubled(self.rows, 1)

    def other_locations(self, count: int) -> None:
        """Room for the counts of ``count`` locations outside the MPI group."""
        if count > len(self.off):
            more = count - len(self.off)
            self.off = np.concatenate([self.off, np.zeros((more, 2), np.int64)])
            self.off_first = np.concatenate([self.off_first, np.full((more, 2), -1, np.int64)])


@njit(cache=True, inline="always")
def _world(rank, cref, local, comms, slots, members):
    """``world_rank``: the world rank of ``local`` in communicator ``cref``; -1: out of it."""
    cid = comms[cref, K_CID]
    if cid == tf.COMM_SELF_ID:
        return rank
    slot = comms[cref, K_SLOT]
    if local < 0 or local >= slots[slot, 1]:
        return -1
    return members[slots[slot, 0] + local]


@njit(cache=True, inline="always")
def _root(rank, cref, root, comms, slots, members):
    """``root_rank``: the world rank of a collective's root, -1 for none."""
    cid = comms[cref, K_CID]
    if root == UNDEFINED_ROOT or cid == tf.COMM_SELF_ID or root >= slots[comms[cref, K_SLOT], 1]:
        return -1
    return _world(rank, cref, root, comms, slots, members)


@njit(cache=True, nogil=True, _nrt=False)
def convert(ev, times, lrank, gidx, cidx, extslot, start, regs, comms, slots, members, ops,
            named_ops, coll_ids, kind_mpi, bad_loc, ext_span, ext_rows, own_ids, ranks,
            stack, rstack, recs, rows, counters, skipped, skipped_first, off, off_first, aux,
            req, nbc, nbc_done, nbc_post, tc):
    """Rule *events to rows* on records ``ev[start:]`` (``times`` their ns, ``lrank`` the rank
    of their location or -1 - the slot of a location outside the MPI group, ``gidx`` and
    ``cidx`` the rows of their region (F0) and communicator (F1) in ``regs`` and ``comms``, -1
    for none, ``extslot`` the ATTR_ROWS entry of an Enter's). Returns (why it stopped, the
    event's index)."""
    scap = stack.shape[1]
    rcap = recs.shape[1]
    cap = rows.shape[1]
    for i in range(start, len(ev)):
        counters[C_STAMP] += 1
        k = ev[i, EV.KIND]
        lr = lrank[i]
        t = times[i]
        f0 = ev[i, EV.F0]
        g = gidx[i]
        if lr < 0:
            slot = -1 - lr
            if bad_loc[slot]:
                return BAIL_EVENT, i
            mpi = kind_mpi[k]
            if k == EV.ENTER or k == EV.LEAVE:
                if g < 0:
                    return BAIL_EVENT, i
                if regs[g, G_MPI]:
                    mpi = 1
            off[slot, mpi] += 1
            if off_first[slot, mpi] < 0:
                off_first[slot, mpi] = counters[C_STAMP]
            continue
        r = lr
        mask = ev[i, EV.MASK]
        if k == EV.ENTER:
            if g < 0:
                return BAIL_EVENT, i
            d = ranks[r, S_DEPTH]
            if d >= scap:
                return NEED_STACK, i
            mpi = regs[g, G_MPI]
            if mpi and ranks[r, S_CALL] == 0:
                has_new = mask >> A_NEW & 1
                if has_new and not mask >> A_COMM & 1:
                    return BAIL_EVENT, i        # a new communicator without its parent
                es = -1
                if mask >> A_ROWS & 1:
                    es = extslot[i]
                    if ext_span[es, 1] < 0:
                        return BAIL_EVENT, i    # a malformed ATTR_ROWS
                ranks[r, S_CALL], ranks[r, S_CALL_T] = 1, t
                ranks[r, S_CALL_REG], ranks[r, S_CALL_EXT] = g, es
                ranks[r, S_NREC] = 0
                if has_new:
                    recs[r, 0, RK], recs[r, 0, RA], recs[r, 0, RB] = R_COMM_NEW, \
                        ev[i, EV.A0 + A_NEW], -1
                    recs[r, 0, RC] = ev[i, EV.A0 + A_COMM]
                    recs[r, 0, RD], recs[r, 0, RE], recs[r, 0, RF], recs[r, 0, RG] = -1, -1, -1, -1
                    ranks[r, S_NREC] = 1
            elif not mpi:
                rstack[r, ranks[r, S_RDEPTH]] = regs[g, G_NAME]
                ranks[r, S_RDEPTH] += 1
            stack[r, d, F_NAME], stack[r, d, F_T], stack[r, d, F_MPI] = regs[g, G_NAME], t, mpi
            stack[r, d, F_WORK] = ev[i, EV.A0 + A_SIZE] if mask >> A_SIZE & 1 else -1
            ranks[r, S_DEPTH] = d + 1
            ranks[r, S_MPI] += mpi
        elif k == EV.LEAVE:
            d = ranks[r, S_DEPTH]
            if d == 0:
                return BAIL_LEAVE_EMPTY, i
            if g < 0:
                return BAIL_EVENT, i
            top = d - 1
            if regs[g, G_NAME] != stack[r, top, F_NAME]:
                aux[0] = stack[r, top, F_NAME]
                return BAIL_MISMATCH, i
            es = ranks[r, S_CALL_EXT] if ranks[r, S_CALL] else -1
            more = ranks[r, S_NREC] + 1 + (ext_span[es, 1] if es >= 0 else 0)
            n0 = counters[C_NROWS]
            if n0 + more > cap:
                return NEED_ROWS, i
            if not (PT.room(req, tc, T_REQ, more) and PT.room(nbc, tc, T_NBC, more)
                    and PT.room(nbc_done, tc, T_DONE, more)
                    and PT.room(nbc_post, tc, T_POST, more)):
                aux[0] = more
                return NEED_TABLE, i
            ranks[r, S_DEPTH] = d - 1
            cpu = ev[i, EV.A0 + A_CPU] if mask >> A_CPU & 1 else -1
            inner = rstack[r, ranks[r, S_RDEPTH] - 1] if ranks[r, S_RDEPTH] > 0 else -1
            if not stack[r, top, F_MPI]:
                ranks[r, S_RDEPTH] -= 1
                rows[W_RANK, n0], rows[W_OP, n0], rows[W_REGION, n0] = r, 0, stack[r, top, F_NAME]
                rows[W_T0, n0], rows[W_T1, n0], rows[W_CPU, n0] = stack[r, top, F_T], t, cpu
                for c in range(W_CPU + 1, NCOL):
                    rows[c, n0] = -1
                rows[W_NBYTES, n0] = stack[r, top, F_WORK]
                counters[C_NROWS] = n0 + 1
                continue
            ranks[r, S_MPI] -= 1
            if ranks[r, S_CALL] and ranks[r, S_CALL_T] == stack[r, top, F_T] and \
                    ranks[r, S_MPI] == 0:
                reg = ranks[r, S_CALL_REG]
                e0, ne = (ext_span[es, 0], ext_span[es, 1]) if es >= 0 else (0, 0)
                m = call_rows(r, regs[reg, G_BRANCH], regs[reg, G_OP], recs, ranks[r, S_NREC],
                              ext_rows, e0, ne, own_ids, ranks, S_NEXT_REQ, req, nbc, nbc_done, tc,
                              rows, n0, ops, named_ops, slots, members, skipped, aux)
                if m < 0:
                    aux[3] = -m
                    return BAIL_CALL, i
                if skipped[SK_NBC_EVENT] and skipped_first[SK_NBC_EVENT] < 0:
                    skipped_first[SK_NBC_EVENT] = counters[C_STAMP]
                if m == 0:
                    # a call hindsight has no op for, or one whose records are missing (e.g. a
                    # Test that completed nothing): its time is computation
                    skipped[SK_NO_OP] += 1
                    if skipped_first[SK_NO_OP] < 0:
                        skipped_first[SK_NO_OP] = counters[C_STAMP]
                for j in range(n0, n0 + m):
                    rows[W_RANK, j], rows[W_REGION, j] = r, inner
                    rows[W_T0, j], rows[W_T1, j] = stack[r, top, F_T], t
                    rows[W_CPU, j] = cpu if j == n0 else -1  # the call's CPU time, first row
                    if rows[W_COMM, j] == NBC_PENDING:
                        # a non-blocking collective's post: its Complete gives comm, bytes,
                        # root (fill_nbc)
                        p = PT.put(nbc_post, tc, T_POST, r, rows[W_REQ, j])
                        nbc_post[p, PT.VAL] = j
                        rows[W_COMM, j] = 0
                counters[C_NROWS] = n0 + m
                ranks[r, S_CALL] = 0
        elif (k == EV.NBC_REQUEST or k == EV.NBC_COMPLETE) and ranks[r, S_CALL] == 0:
            skipped[SK_NBC_EVENT] += 1      # outside any MPI call
            if skipped_first[SK_NBC_EVENT] < 0:
                skipped_first[SK_NBC_EVENT] = counters[C_STAMP]
        elif k != EV.REQUEST_TEST and k != EV.COLL_BEGIN:
            n = ranks[r, S_NREC]
            if n >= rcap:
                return NEED_RECS, i
            c, f2, f4 = cidx[i], ev[i, EV.F2], ev[i, EV.F4]
            recs[r, n, RD], recs[r, n, RE], recs[r, n, RF], recs[r, n, RG] = -1, -1, -1, -1
            if k == EV.SEND or k == EV.ISEND or k == EV.RECV or k == EV.IRECV:
                if c < 0 or not comms[c, K_OK]:
                    return BAIL_EVENT, i
                w = _world(r, c, f0, comms, slots, members)
                if w < 0:
                    return BAIL_EVENT, i
                recs[r, n, RK] = R_SEND if k == EV.SEND or k == EV.ISEND else R_RECV
                recs[r, n, RA], recs[r, n, RB], recs[r, n, RC] = w, f2, comms[c, K_CID]
                recs[r, n, RD] = ev[i, EV.F3]
                recs[r, n, RF] = f4 if k == EV.ISEND or k == EV.IRECV else -1
            elif k == EV.IRECV_REQUEST:
                a = EV.A0
                recs[r, n, RK] = R_IRECV_REQ
                recs[r, n, RA] = ev[i, a + A_SRC] if mask >> A_SRC & 1 else tf.ANY_SOURCE
                recs[r, n, RB] = ev[i, a + A_TAG] if mask >> A_TAG & 1 else tf.ANY_TAG
                recs[r, n, RC] = ev[i, a + A_COMM] if mask >> A_COMM & 1 else 0
                recs[r, n, RD] = ev[i, a + A_RBYTES] if mask >> A_RBYTES & 1 else -1
                recs[r, n, RF] = f4
            elif k == EV.PROBE:
                if c < 0 or not comms[c, K_OK]:
                    return BAIL_EVENT, i
                w = tf.ANY_SOURCE
                if f0 != UNDEFINED_ROOT:
                    w = _world(r, c, f0, comms, slots, members)
                    if w < 0:
                        return BAIL_EVENT, i
                recs[r, n, RK], recs[r, n, RA] = R_PROBE, w
                recs[r, n, RB] = f2 if f2 != UNDEFINED_ROOT else tf.ANY_TAG
                recs[r, n, RC] = comms[c, K_CID]
                recs[r, n, RD] = ev[i, EV.A0 + A_NBYTES] if mask >> A_NBYTES & 1 else -1
            elif k == EV.ISEND_COMPLETE:
                recs[r, n, RK], recs[r, n, RA], recs[r, n, RB] = R_ISEND_DONE, -1, -1
                recs[r, n, RC], recs[r, n, RF] = 0, f4
            elif k == EV.NBC_REQUEST:
                recs[r, n, RK], recs[r, n, RA], recs[r, n, RB] = R_NBC_REQ, -1, -1
                recs[r, n, RC], recs[r, n, RF] = -1, f4
            else:               # COLL_END, NBC_COMPLETE
                if c < 0 or not comms[c, K_OK]:
                    return BAIL_EVENT, i
                if k == EV.NBC_COMPLETE and coll_ids[f0 & 0xFF] < 0:
                    return BAIL_EVENT, i        # an unknown CollectiveOp
                recs[r, n, RK] = R_COLL if k == EV.COLL_END else R_NBC_DONE
                recs[r, n, RA] = _root(r, c, f2, comms, slots, members)
                recs[r, n, RB] = -1 if k == EV.COLL_END else coll_ids[f0 & 0xFF]
                recs[r, n, RC], recs[r, n, RD] = comms[c, K_CID], ev[i, EV.F3]
                recs[r, n, RE] = ev[i, EV.F5]
                recs[r, n, RF] = f4 if k == EV.NBC_COMPLETE else -1
                recs[r, n, RG] = comms[c, K_SLOT]
            ranks[r, S_NREC] = n + 1
    return DONE, len(ev)


@njit(cache=True, nogil=True)
def chunk_fields(recs, offset, res, loc_lut, loc_missing, reg_lut, comm_lut):
    """Rules *ticks to ns* and *ref lookup* of a chunk's records in one pass, each record read
    once (column by column, each pass would read the records strided): each record's time in
    ns since ``offset``, ``(t - offset) * 1e9 // res`` for ``res`` ticks a second (exact: the
    remainder's product cannot overflow while ``res * 1e9`` fits 64 bits; a time beyond int64
    ns wraps), its location's rank (``loc_lut``, ``loc_missing`` outside it), region and
    communicator index (-1 outside ``reg_lut``, ``comm_lut``). Returns (times, ranks, regions,
    comms, how many locations were ``loc_missing``)."""
    n = recs.shape[0]
    times = np.empty(n, np.int64)
    lrank = np.empty(n, np.int64)
    gidx = np.empty(n, np.int64)
    cidx = np.empty(n, np.int64)
    unknown = 0
    exact = res == 1000000000
    for i in range(n):
        d = recs[i, EV.TIME] - offset
        times[i] = d if exact else d // res * 1000000000 + d % res * 1000000000 // res
        ref = recs[i, EV.LOC]
        v = loc_lut[ref] if 0 <= ref < len(loc_lut) else loc_missing
        unknown += v == loc_missing
        lrank[i] = v
        ref = recs[i, EV.F0]
        gidx[i] = reg_lut[ref] if 0 <= ref < len(reg_lut) else -1
        ref = recs[i, EV.F1]
        cidx[i] = comm_lut[ref] if 0 <= ref < len(comm_lut) else -1
    return times, lrank, gidx, cidx, unknown


@njit(cache=True)
def lookup(col, lut, missing):
    """Rule *ref lookup*: ``lut[ref]`` of each ref of ``col``, ``missing`` outside it."""
    out = np.empty(len(col), np.int64)
    for i in range(len(col)):
        ref = col[i]
        out[i] = lut[ref] if 0 <= ref < len(lut) else missing
    return out


@njit(cache=True)
def fill_nbc(rows, nbc_post, nbc_done, ops, own_ids, slots, members, keep):
    """Rule *completions*: a non-blocking collective's post row gets what its Complete says; a
    post no Complete names (the archive ends before the completion, or it was not recorded)
    has no communicator, root or size to give: ``keep`` False. Returns how many."""
    never = 0
    v = PT.VAL
    for p in range(nbc_post.shape[0]):
        if nbc_post[p, PT.STATE] != PT.LIVE:
            continue
        j = nbc_post[p, v]
        d = PT.find(nbc_done, nbc_post[p, PT.K0], nbc_post[p, PT.K1])
        if d < 0:
            keep[j] = False
            never += 1
            continue
        op = rows[W_OP, j]
        cid, slot, sent = nbc_done[d, v], nbc_done[d, v + 1], nbc_done[d, v + 2]
        received, root = nbc_done[d, v + 3], nbc_done[d, v + 4]
        rows[W_COMM, j] = cid
        rows[W_NBYTES, j] = block(ops[op, O_BLOCKING], ops, own_ids, cid, slot, slots, members,
                                  nbc_post[p, PT.K0], root, sent, received)
        rows[W_ROOT, j] = root if ops[op, O_ROOTED] else -1
    return never


@njit(cache=True)
def by_rank(rows, n, keep, nranks):
    """Rule *by rank*: the kept rows among the first ``n``, ordered by rank (stable), and
    where each rank's begin (``nranks + 1`` offsets). The rows are reordered in place, column
    by column through one column's buffer, and returned as a view of ``rows``' first columns: a
    reordered copy of every column would be 96 bytes per row of new memory, dearer on these VMs
    than the extra copy of each column."""
    start = np.zeros(nranks + 1, np.int64)
    for j in range(n):
        if keep[j]:
            start[rows[W_RANK, j] + 1] += 1
    for r in range(nranks):
        start[r + 1] += start[r]
    at = start[:-1].copy()
    dest = np.empty(n, np.int64)
    for j in range(n):
        if keep[j]:
            r = rows[W_RANK, j]
            dest[j] = at[r]
            at[r] += 1
        else:
            dest[j] = -1
    m = start[nranks]
    col = np.empty(m, np.int64)
    # each pass reads one column in order and writes one stream per rank (a row at a time
    # touched every column's memory for each row)
    for c in range(rows.shape[0]):
        for j in range(n):
            if dest[j] >= 0:
                col[dest[j]] = rows[c, j]
        rows[c, :m] = col
    return rows[:, :m], start
