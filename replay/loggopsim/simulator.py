"""LogGOPSim's schedule simulator (Hoefler, Schneider, Lumsdaine, HPDC 2010), on flat arrays.

A *schedule* (the GOAL language LogGOPSim reads, ``replay.loggopsim.goal``) is per rank a graph
of ``send``/``recv``/``calc`` operations with ``requires`` (after completion) and ``irequires``
(after start) dependencies. This module runs one with LogGOPSim's event-driven rules and its
LogGOPS costs, so that a schedule gets that simulator's end times. It is the peer's algorithm
alone: it imports nothing of hindsight. The rules (all times in ns):

* a send issued at t (when the rank's CPU and its NIC send gap are free) occupies the CPU until
  t + o + (s-1)·O and the send NIC until t + g + (s-1)·G; its first byte arrives at t + o + L;
* an arriving message is handled at max(arrival, receiver CPU free, receiver NIC free) and charges
  the receiver's CPU o + (s-1)·max(O, G) and its receive NIC g + (s-1)·G, posted receive or not;
* a receive that finds an already-arrived message completes at once at no extra cost; posting a
  receive is free;
* messages of at most S bytes are eager (the send completes when issued); larger ones complete the
  send when matched (no extra handshake latency);
* matching is first-match on (source, tag) with wildcards (-1), in posted / arrival order;
* simultaneous events run in time order, then insertion order; operations that become ready
  together are inserted sends first, then receives, then calcs;
* an operation that becomes ready starts no earlier than its CPU (sends: and NIC) is free;
* a rank's end time is its CPU's last busy time.

With whole-ns parameters the arithmetic is exact in float64 and equals LogGOPSim's integer
arithmetic; fractional parameters are used as given.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from hindsight.jit import njit, readonly
from .buckets import match_buckets
from .codes import ANY, CALC, KIND_NAMES, RECV, SEND, ScheduleError  # noqa: F401 (re-exported)
from .queues import (CODE_BITS, heap_grow, heap_key, heap_pop, heap_push, list_append,
                     list_unlink, park, park_token, scan_unexpected, sort_head)

# CPUs and NICs a schedule may index per rank (GOAL's ``cpu``/``nic`` fields).
MAX_UNITS = 1024

# The integer types a parsed schedule's columns have where every value fits them (the parsers
# keep int64 where one does not; dependencies, the fields not named, are int32 when they fit):
# the compiled functions take any width, and narrow columns are fewer bytes to write and read.
SCHEDULE_TYPES = {"rank": np.int32, "kind": np.int8, "size": np.float64, "peer": np.int32,
                  "tag": np.int32, "cpu": np.int32, "nic": np.int32, "dep_start": np.bool_}

# Parameter vector layout (ns, ns/byte, bytes).
Q_L, Q_OS, Q_OR, Q_OSB, Q_ORB, Q_GAP, Q_G, Q_S = range(8)

# The event loop's scalars between its calls (``_events``): heap size, next stamp, operations
# freed, first round, receives posted, posted and arrived messages unmatched.
_NH, _STAMP, _NF, _FIRST, _NPOST, _NRQ, _NUQ = range(7)
_NSTATE = 7


@dataclass
class Schedule:
    """A GOAL schedule as flat arrays; operations grouped by rank, in schedule order.

    ``size`` is bytes for send/recv and ns for calc. Dependency ``k``: operation ``dep_op[k]``
    needs ``dep_on[k]`` (same rank) to be complete, or only started if ``dep_start[k]``
    (``irequires``)."""

    nranks: int
    rank: np.ndarray
    kind: np.ndarray
    size: np.ndarray
    peer: np.ndarray
    tag: np.ndarray
    cpu: np.ndarray
    nic: np.ndarray
    dep_op: np.ndarray
    dep_on: np.ndarray
    dep_start: np.ndarray
    #: per operation its GOAL label or None; None for a schedule without labels (a trace's)
    labels: Sequence[str | None] | None = None
    #: the matching buckets of exactly these ranks, kinds, peers and tags (``schedule_buckets``),
    #: when kept with the schedule; None: ``simulate`` numbers them
    buckets: tuple | None = None

    def label(self, i: int) -> str:
        """Operation i's GOAL label, else ``r<rank>op<index in its rank>``."""
        r = int(self.rank[i])
        return ((self.labels[i] if self.labels is not None else None)
                or f"r{r}op{i - int(np.searchsorted(self.rank, r))}")

    @property
    def nops(self) -> int:
        return len(self.kind)

    @property
    def rank_off(self) -> np.ndarray:
        rank = np.asarray(self.rank)    # (searched in its own type: no int64 copy of it)
        return np.searchsorted(rank, np.arange(self.nranks + 1, dtype=rank.dtype)).astype(np.int64)


@dataclass
class SimResult:
    op_start: np.ndarray      # when each operation started (ns; empty: not kept, ``simulate``)
    op_end: np.ndarray        # calc: start+size; send: CPU free after it (rendezvous: >= match);
                              # recv: when its data was handled (or its start, if already there);
                              # empty: not kept
    match: np.ndarray         # partner operation of each send/recv (-1 for calc; empty: not kept)
    rank_end: np.ndarray      # per rank: last time its CPU was busy
    rank_cpu_busy: np.ndarray  # per rank: CPU time charged for calcs
    rank_overhead: np.ndarray  # per rank: CPU time charged for o and O
    not_done: int             # operations that never completed (0 = success)


def params_vector(L: float, o_send: float, o_recv: float, O_send: float, O_recv: float,
                  g: float, G: float, S: float) -> np.ndarray:
    """The parameter vector of ``simulate``: LogGOPS with o and O per side (ns, ns/byte, bytes);
    LogGOPSim's own model is o_send == o_recv and O_send == O_recv."""
    p = np.zeros(8)
    p[Q_L], p[Q_OS], p[Q_OR], p[Q_OSB], p[Q_ORB] = L, o_send, o_recv, O_send, O_recv
    p[Q_GAP], p[Q_G], p[Q_S] = g, G, S
    return p


@njit(cache=True, nogil=True)
def _dep_counts(nops, dep_op, dep_on, index_proto, off_proto):
    """The offsets of each operation's dependents in the CSR by the operation they wait for,
    each op's count of open deps (operation numbers of ``index_proto``'s type, offsets of
    ``off_proto``'s), and whether the dependencies are in that order already."""
    off = np.zeros(nops + 1, off_proto.dtype)
    cnt = np.zeros(nops, index_proto.dtype)
    ordered = True
    for k in range(len(dep_on)):
        off[dep_on[k] + 1] += 1
        cnt[dep_op[k]] += 1
        if k > 0 and dep_on[k] < dep_on[k - 1]:
            ordered = False
    for i in range(nops):
        off[i + 1] += off[i]
    return off, cnt, ordered


@njit(cache=True, nogil=True)
def _successors(dep_op, dep_on, dep_start, off, index_proto):
    """The CSR's lists (each operation's in dependency order): a counting sort by ``dep_on``."""
    succ = np.empty(len(dep_on), index_proto.dtype)
    succ_start = np.empty(len(dep_on), np.bool_)
    # off[i] is operation i's next free place while filling, i + 1's start after: shifted back
    for k in range(len(dep_on)):
        j = off[dep_on[k]]
        succ[j] = dep_op[k]
        succ_start[j] = dep_start[k]
        off[dep_on[k]] = j + 1
    for i in range(len(off) - 1, 0, -1):
        off[i] = off[i - 1]
    off[0] = 0
    return succ, succ_start


def simulate(s: Schedule, prm: np.ndarray, read: Callable[..., None] | None = None,
             times: bool = True) -> SimResult:
    """Run the schedule; raise ScheduleError if it cannot finish. ``read`` gets the arrays only
    the set-up reads (dependencies, CPU and NIC indices) once read (to hand mapped pages back).
    ``times=False`` keeps no operation's start, end and partner (``op_start``, ``op_end`` and
    ``match`` come back empty): a replay that maps no times to rows reads none of them (each
    rank's end is its CPU's clock), and they are 24 bytes an operation of new memory, which on
    this project's virtual machines costs up to a few ns a byte to touch."""
    n = s.nops
    # Operation numbers (and the matching buckets, at most one per operation) as int32 when they
    # fit, ranks, peers and tags as int32, kinds and CPU/NIC indices as int8/int16: the loop
    # touches some twenty per-operation arrays, and their width is its memory traffic.
    proto = np.zeros(0, _index_type(n))
    # the dependencies as they come (int32 from a trace's schedule cache, memory-mapped)
    nd = len(s.dep_on)
    dep_op, dep_on = _integers(s.dep_op), _integers(s.dep_on)
    dep_start = np.asarray(s.dep_start, bool)
    off, cnt, ordered = _dep_counts(n, dep_op, dep_on, proto,
                                    np.zeros(0, np.int32 if nd < 2**31 else np.int64))
    if ordered and dep_op.dtype == proto.dtype:
        # listed by the operation they wait for (as a GOAL file's order keeps them): the
        # dependencies are the CSR's lists as they are, 5 bytes a dependency not rewritten
        succ, succ_start = dep_op, dep_start
        setup_only = (s.dep_on, s.cpu, s.nic)
    else:
        succ, succ_start = _successors(dep_op, dep_on, dep_start, off, proto)
        setup_only = (s.dep_op, s.dep_on, s.dep_start, s.cpu, s.nic)
    ncpu = int(s.cpu.max()) + 1 if n else 1
    nnic = int(s.nic.max()) + 1 if n else 1
    for unit, count in (("cpu", ncpu), ("nic", nnic)):
        if count > MAX_UNITS:
            raise ScheduleError(f"{unit} index {count - 1}: at most {MAX_UNITS - 1} (the simulator "
                                f"keeps a clock per {unit} of every rank)")
    if 2 * n + 2 >= 2**31 or 2 * n + s.nranks * ncpu * 3 * nnic >= 2**CODE_BITS:
        raise ScheduleError(f"{n} operations: at most about 1e9 (the event heap keys an event by "
                            f"its stamp and code in 63 bits)")
    cpu, nic = np.asarray(s.cpu, np.int16), np.asarray(s.nic, np.int16)
    # An operation's CPU (NIC) is ``cpu[x & umask[0]]``: with every operation on unit 0 (most
    # schedules) the loop reads a one-entry column (mask 0), and the column's pages (mapped from
    # a trace's cache) are never touched again: 18 MB less at the peak of 5 M operations.
    umask = np.array([-1 if ncpu > 1 else 0, -1 if nnic > 1 else 0], np.int64)
    if ncpu == 1:
        cpu = np.zeros(1, np.int16)
    if nnic == 1:
        nic = np.zeros(1, np.int16)
    if read is not None:
        read(*setup_only)
    op_start = np.full(n if times else 0, -1.0)
    op_end = np.full(n if times else 0, -1.0)
    match = np.full(n if times else 0, -1, np.int64)
    done = np.zeros(n, np.bool_)
    rank_end = np.zeros(s.nranks)
    busy = np.zeros(s.nranks)
    ovh = np.zeros(s.nranks)
    rank = narrow(s.rank, np.int32)
    kind = np.asarray(s.kind, np.int8)     # SEND, RECV, CALC (the parsers give no other)
    peer = narrow(s.peer, np.int32)
    tag = narrow(s.tag, np.int32)
    if s.buckets is not None and s.buckets[0].dtype == proto.dtype:
        bucket, cand, ubucket, nbuckets = s.buckets
    else:
        bucket, cand, ubucket, nbuckets = match_buckets(s.nranks, rank, kind, peer, tag,
                                                        proto.dtype)
    # (what the loop only reads as read-only views: mapped or computed, of one type for it)
    not_done, n_rq, n_uq = _simulate(
        *readonly(rank, kind, _sizes(s.size), peer, tag, cpu, nic, umask, off, succ, succ_start),
        cnt, s.nranks, ncpu, nnic, prm, *readonly(bucket, cand, ubucket), nbuckets,
        op_start, op_end, match, rank_end, busy, ovh, done)
    if n_rq or n_uq or not_done:
        what = []
        if n_uq:
            what.append(f"{n_uq} message(s) arrived that no receive matches")
        if n_rq:
            what.append(f"{n_rq} receive(s) got no message")
        if not_done and not what:
            what.append("the dependencies are cyclic")
        if not_done:        # (unmatched eager messages alone leave every operation done)
            bad = np.flatnonzero(~done)[:3]
            where = ", ".join(f"rank {s.rank[i]} {KIND_NAMES[int(s.kind[i])]}"
                              + (f" {s.label(i)}" if s.labels is not None else "") for i in bad)
            what.append(f"{not_done} operation(s) never complete (first: {where})")
        raise ScheduleError(f"schedule cannot finish: {'; '.join(what)}")
    return SimResult(op_start, op_end, match, rank_end, busy, ovh, not_done)


def schedule_buckets(s: Schedule) -> tuple:
    """The matching buckets ``simulate`` uses for ``s`` (``buckets.match_buckets``, operation
    numbers of the width it runs at), to keep with a schedule that is replayed more than once."""
    return match_buckets(s.nranks, narrow(s.rank, np.int32), np.asarray(s.kind, np.int8),
                         narrow(s.peer, np.int32), narrow(s.tag, np.int32), _index_type(s.nops))


def _sizes(size) -> np.ndarray:
    """The sizes as the loop reads them: float64, or int32 as a trace's schedule cache keeps
    whole ones (mapped as they are: a float64 copy would be 8 bytes an operation of new
    memory)."""
    size = np.asarray(size)
    return size if size.dtype in (np.float64, np.int32) else size.astype(np.float64)


def _index_type(n: int):
    """The simulator's type for operation numbers, stamps and buckets of ``n`` operations."""
    return np.int32 if 2 * n + 2 < 2**31 else np.int64


def _integers(a) -> np.ndarray:
    """``a`` as an integer array, not copied when it is one."""
    a = np.asarray(a)
    return a if a.dtype.kind in "iu" else a.astype(np.int64)


def narrow(a, dtype) -> np.ndarray:
    """``a`` as ``dtype`` when every value fits (not copied when it is that already), else as
    int64: a narrower copy never wraps a value."""
    a = np.asarray(a)
    if a.dtype == dtype:
        return a
    info = np.iinfo(dtype)
    if len(a) == 0 or (info.min <= a.min() and a.max() <= info.max):
        return a.astype(dtype)
    return a.astype(np.int64, copy=False)


# ------------------------------------------------------------------------------------------------
# The compiled simulation. Event queue: a binary heap of (time, key), the key holding the
# insertion stamp above the code (``queues.heap_key``); code >= 0 is an operation (>= n: a
# parked group's token), code < 0 the message of send operation -code-1. Re-queued events keep
# their stamp, as in LogGOPSim (its STRICT_ORDER).


@njit(cache=True, nogil=True, inline="always")
def _release(x, start_only, off, succ, succ_start, cnt, freed, nf):
    """Operation x started (start_only) or completed: count down its dependents."""
    for k in range(off[x], off[x + 1]):
        if succ_start[k] == start_only:
            d = succ[k]
            cnt[d] -= 1
            if cnt[d] == 0:
                freed[nf] = d
                nf += 1
    return nf


@njit(cache=True, nogil=True, inline="always")
def _release_all(x, off, succ, cnt, freed, nf):
    """Operation x started and completed at once (a calc, an eager send): count down all its
    dependents in one pass (the order they are freed in is not kept: ``_events`` sorts them)."""
    for k in range(off[x], off[x + 1]):
        d = succ[k]
        cnt[d] -= 1
        if cnt[d] == 0:
            freed[nf] = d
            nf += 1
    return nf


@njit(cache=True, nogil=True)
def _simulate(rank, kind, size, peer, tag, cpu, nic, umask, off, succ, succ_start, cnt, P, ncpu,
              nnic, prm, bucket, cand, ubucket, nbuckets, op_start, op_end, match, rank_end, busy,
              ovh, done):
    n = len(kind)
    nexto = np.zeros(P * ncpu)
    nextgs = np.zeros(P * nnic)
    nextgr = np.zeros(P * nnic)
    cap = 2 * n + 2
    ht = np.empty(cap)
    hk = np.empty(cap, np.int64)
    # Posted receives: FIFO lists per bucket (``replay.loggopsim.buckets``), threaded through the
    # recv operation's index, with a post stamp to find the earliest of several heads. Arrived
    # messages: FIFO lists per bucket and one per rank in arrival order (for wildcard receives),
    # threaded through the send operation's index. An element's links and stamp are written when
    # it joins a list, before anything reads them: those arrays start unset (most operations
    # never join one, and filling them was a tenth of a replay's memory traffic).
    ix = succ.dtype   # operation numbers (int32 when they fit, ``simulate``)
    qn = np.empty(n, ix)
    qp = np.empty(n, ix)
    bn = np.empty(n, ix)
    bp = np.empty(n, ix)
    post = np.empty(n, ix)      # post order: fewer than n
    rq_h = np.full(nbuckets, -1, ix)
    rq_t = np.full(nbuckets, -1, ix)
    ub_h = np.full(nbuckets, -1, ix)
    ub_t = np.full(nbuckets, -1, ix)
    uq_h = np.full(P, -1, np.int64)
    uq_t = np.full(P, -1, np.int64)
    freed = np.empty(n + 1, ix)
    key = np.empty(n + 1, np.int64)
    # Events that found their CPU (and NIC) busy wait parked per resource group, in stamp order;
    # the group has one token in the heap (``park``) instead of one entry per waiting event.
    ngroups = P * ncpu * 3 * nnic
    pk_n = np.empty(2 * n, ix)
    pk_p = np.empty(2 * n, ix)
    pk_s = np.empty(2 * n, ix)  # stamps: one per operation freed, one per message, < 2n + 2
    pk_h = np.full(ngroups, -1, np.int64)
    pk_t = np.full(ngroups, -1, np.int64)
    floor = np.zeros(ngroups)
    tok_t = np.full(ngroups, -1.0)
    tok_s = np.full(ngroups, -1, np.int64)

    # Operations without dependencies start at time 0, per rank in type order.
    nf = 0
    for i in range(n):
        if cnt[i] == 0:
            freed[nf] = i
            nf += 1
    state = np.zeros(_NSTATE, np.int64)
    state[_NF] = nf
    state[_FIRST] = 1
    while True:
        need = _events(rank, kind, size, peer, tag, cpu, nic, umask, off, succ, succ_start, cnt,
                       ncpu, nnic, prm, bucket, cand, ubucket, op_start, op_end, match, busy, ovh,
                       nexto, nextgs, nextgr, ht, hk, qn, qp, bn, bp, post, rq_h, rq_t,
                       ub_h, ub_t, uq_h, uq_t, done, freed, key, pk_n, pk_p, pk_s, pk_h, pk_t,
                       floor, tok_t, tok_s, state)
        if need == 0:
            break
        ht, hk = heap_grow(ht, hk, need)

    for h in range(P):
        e = 0.0
        for c in range(ncpu):
            if nexto[h * ncpu + c] > e:
                e = nexto[h * ncpu + c]
        rank_end[h] = e
    not_done = 0
    for i in range(n):
        if not done[i]:
            not_done += 1
    return not_done, state[_NRQ], state[_NUQ]


@njit(cache=True, nogil=True, _nrt=False)
def _events(rank, kind, size, peer, tag, cpu, nic, umask, off, succ, succ_start, cnt, ncpu, nnic,
            prm, bucket, cand, ubucket, op_start, op_end, match, busy, ovh, nexto, nextgs, nextgr,
            ht, hk, qn, qp, bn, bp, post, rq_h, rq_t, ub_h, ub_t, uq_h, uq_t, done, freed,
            key, pk_n, pk_p, pk_s, pk_h, pk_t, floor, tok_t, tok_s, state):
    """The event loop of ``_simulate``, on its arrays: runs until no event is left (returns 0)
    or the heap is full (returns the size it needs; ``state`` keeps where the loop stopped).

    Compiled without numba's reference counting (``_nrt=False``: it allocates nothing; the
    caller owns every array and grows the heap): counting the references of the arrays its
    inlined helpers take was a third of its time, an atomic add on every push, pop and match."""
    n = len(kind)
    L = prm[Q_L]
    o_s = prm[Q_OS]
    o_r = prm[Q_OR]
    O_s = prm[Q_OSB]
    O_r = prm[Q_ORB]
    g = prm[Q_GAP]
    G = prm[Q_G]
    S = prm[Q_S]
    nh, stamp, nf, first = state[_NH], state[_STAMP], state[_NF], state[_FIRST] != 0
    n_post, n_rq, n_uq = state[_NPOST], state[_NRQ], state[_NUQ]
    times = len(op_end) > 0       # starts, ends and partners kept (``simulate``)
    sh = np.int64(1)
    while (np.int64(1) << sh) <= n:
        sh += 1
    mask = (np.int64(1) << sh) - 1
    code_mask = (np.int64(1) << CODE_BITS) - 1
    while True:
        if nh + nf + 4 > len(ht):
            break       # the caller grows the heap and calls again
        if nf > 0:
            if nf > 1:
                # Queue the newly ready operations: by rank, then type, then schedule order
                # (the operation in the key's low ``sh`` bits: a mask, not a division, gets
                # it back)
                for j in range(nf):
                    x = freed[j]
                    key[j] = ((np.int64(rank[x]) * 4 + kind[x]) << sh) | x
                if nf > 16:
                    sort_head(key, nf)
                else:
                    for j in range(1, nf):      # insertion sort: usually two or three
                        v = key[j]
                        q = j - 1
                        while q >= 0 and key[q] > v:
                            key[q + 1] = key[q]
                            q -= 1
                        key[q + 1] = v
                for j in range(nf):
                    freed[j] = key[j] & mask
            for j in range(nf):
                x = freed[j]
                h = rank[x]
                if first:
                    t = 0.0
                elif kind[x] == SEND:
                    t = max(nexto[h * ncpu + cpu[x & umask[0]]],
                            nextgs[h * nnic + nic[x & umask[1]]])
                else:
                    t = nexto[h * ncpu + cpu[x & umask[0]]]
                nh = heap_push(ht, hk, nh, t, heap_key(stamp, x, n))
                stamp += 1
            nf = 0
        first = False
        if nh == 0:
            break
        t = ht[0]
        st = hk[0] >> CODE_BITS
        code = (hk[0] & code_mask) - n
        nh = heap_pop(ht, hk, nh)
        grp = -1
        if code >= n:
            # a group's token: its earliest-stamped parked event runs now (or parks again)
            grp = code - n
            if t != tok_t[grp] or st != tok_s[grp]:
                continue    # stale: the group's token was replaced
            tok_t[grp] = -1.0
            tok_s[grp] = -1
            e = pk_h[grp]
            list_unlink(e, grp, pk_h, pk_t, pk_n, pk_p)
            code = e if e < n else -(e - n) - 1

        if code >= 0:
            x = code
            h = rank[x]
            ci = h * ncpu + cpu[x & umask[0]]
            ni = h * nnic + nic[x & umask[1]]
            k = kind[x]
            if k == CALC:
                if nexto[ci] <= t:
                    nexto[ci] = t + size[x]
                    busy[h] += size[x]
                    if times:
                        op_start[x] = t
                        op_end[x] = t + size[x]
                    done[x] = True
                    nf = _release_all(x, off, succ, cnt, freed, nf)
                else:
                    nh = park(x, st, (ci * 3 + 0) * nnic, nexto[ci], n, pk_n, pk_p, pk_s,
                               pk_h, pk_t, floor, tok_t, tok_s, ht, hk, nh)
            elif k == SEND:
                free_at = max(nexto[ci], nextgs[ni])
                if free_at <= t:
                    s1 = size[x] - 1.0
                    nexto[ci] = t + o_s + s1 * O_s
                    ovh[h] += o_s + s1 * O_s
                    nextgs[ni] = t + g + s1 * G
                    if times:
                        op_start[x] = t
                        op_end[x] = nexto[ci]
                    nh = heap_push(ht, hk, nh, t + o_s + L, heap_key(stamp, -x - 1, n))
                    stamp += 1
                    if size[x] <= S:
                        done[x] = True
                        nf = _release_all(x, off, succ, cnt, freed, nf)
                    else:
                        nf = _release(x, True, off, succ, succ_start, cnt, freed, nf)
                else:
                    nh = park(x, st, (ci * 3 + 1) * nnic + nic[x & umask[1]], free_at, n, pk_n,
                               pk_p, pk_s, pk_h, pk_t, floor, tok_t, tok_s, ht, hk, nh)
            else:  # RECV: posting is free; an arrived message completes it at once
                if times:
                    op_start[x] = t
                nf = _release(x, True, off, succ, succ_start, cnt, freed, nf)
                b = ubucket[x]
                m = ub_h[b] if b >= 0 else scan_unexpected(x, h, rank, peer, tag, uq_h, qn)
                if m >= 0:
                    list_unlink(m, h, uq_h, uq_t, qn, qp)
                    list_unlink(m, ubucket[m], ub_h, ub_t, bn, bp)
                    n_uq -= 1
                    if times:
                        match[x] = m
                        match[m] = x
                        op_end[x] = t
                    if size[x] > S:
                        # rendezvous: the sender's request completes now (LogGOPSim moves the
                        # sender's clocks up to now, using this operation's cpu/nic index)
                        sr = rank[m]
                        done[m] = True
                        if times:
                            op_end[m] = max(op_end[m], t)
                        nf = _release(m, False, off, succ, succ_start, cnt, freed, nf)
                        if nexto[sr * ncpu + cpu[x & umask[0]]] < t:
                            nexto[sr * ncpu + cpu[x & umask[0]]] = t
                        if nextgs[sr * nnic + nic[x & umask[1]]] < t:
                            nextgs[sr * nnic + nic[x & umask[1]]] = t
                    done[x] = True
                    nf = _release(x, False, off, succ, succ_start, cnt, freed, nf)
                else:
                    post[x] = n_post
                    n_post += 1
                    list_append(x, bucket[x], rq_h, rq_t, qn, qp)
                    n_rq += 1
        else:  # a message arrives: code encodes its send operation
            m = -code - 1
            h = peer[m]
            ci = h * ncpu + cpu[m & umask[0]]
            ni = h * nnic + nic[m & umask[1]]
            free_at = max(nexto[ci], nextgr[ni])
            if free_at <= t:
                s1 = size[m] - 1.0
                charge = o_r + max(s1 * O_r, s1 * G)
                nexto[ci] = t + charge
                ovh[h] += charge
                nextgr[ni] = t + g + s1 * G
                x = -1
                for j in range(cand.shape[1]):
                    b = cand[m, j]
                    if b >= 0 and rq_h[b] >= 0 and (x < 0 or post[rq_h[b]] < post[x]):
                        x = rq_h[b]
                if x >= 0:
                    list_unlink(x, bucket[x], rq_h, rq_t, qn, qp)
                    n_rq -= 1
                    if times:
                        match[x] = m
                        match[m] = x
                    if size[m] > S:
                        sr = rank[m]
                        done[m] = True
                        if times:
                            op_end[m] = max(op_end[m], t)
                        nf = _release(m, False, off, succ, succ_start, cnt, freed, nf)
                        if nexto[sr * ncpu + cpu[m & umask[0]]] < t:
                            nexto[sr * ncpu + cpu[m & umask[0]]] = t
                        if nextgs[sr * nnic + nic[m & umask[1]]] < t:
                            nextgs[sr * nnic + nic[m & umask[1]]] = t
                    if times:
                        op_end[x] = nexto[ci]
                    done[x] = True
                    nf = _release(x, False, off, succ, succ_start, cnt, freed, nf)
                else:
                    list_append(m, h, uq_h, uq_t, qn, qp)
                    list_append(m, ubucket[m], ub_h, ub_t, bn, bp)
                    n_uq += 1
            else:
                nh = park(n + m, st, (ci * 3 + 2) * nnic + nic[m & umask[1]], free_at, n, pk_n,
                           pk_p, pk_s, pk_h, pk_t, floor, tok_t, tok_s, ht, hk, nh)
        if grp >= 0 and pk_h[grp] >= 0 and tok_s[grp] < 0:
            # the group's next event is considered at this same time, in stamp order
            floor[grp] = max(floor[grp], t)
            nh = park_token(grp, n, pk_h, pk_s, floor, tok_t, tok_s, ht, hk, nh)

    state[_NH], state[_STAMP], state[_NF], state[_FIRST] = nh, stamp, nf, first
    state[_NPOST], state[_NRQ], state[_NUQ] = n_post, n_rq, n_uq
    return 0 if nh == 0 and nf == 0 else nh + nf + 4
