"""LogGOPSim-compatible replay: an event-driven simulation of a GOAL schedule (LogGOPS model).

hindsight's own kernel (``replay.kernel``) replays a trace as one sequential program per rank. The
LogGOPSim simulator (Hoefler, Schneider, Lumsdaine 2010) runs a *schedule*: per rank a graph of
``send``/``recv``/``calc`` operations with ``requires`` (after completion) and ``irequires`` (after
start) dependencies, and charges the LogGOPS costs with its own rules. ``--set
semantics=loggopsim`` of the ``loggps`` model runs this module instead of the default kernel, so
that a schedule gives the same end times as that simulator. The rules (all times in ns):

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
arithmetic; fractional parameters (hindsight's default G is 0.1 ns/byte) are used as given.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numba as nb
import numpy as np
from hindsight.errors import DataError

# Operation types. The values are LogGOPSim's, and their order is its tie-break order.
SEND, RECV, CALC = 1, 2, 3
KIND_NAMES = {SEND: "send", RECV: "recv", CALC: "calc"}
ANY = -1   # wildcard source / tag

# Parameter vector layout (ns, ns/byte, bytes).
Q_L, Q_OS, Q_OR, Q_OSB, Q_ORB, Q_GAP, Q_G, Q_S = range(8)


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
    labels: list[str] | None = None
    # Which trace row (of a hindsight trace) each op stands for, -1 for none. Set when the
    # schedule was derived from a trace; used to map replayed times back to rows.
    row: np.ndarray | None = None
    info: dict = field(default_factory=dict)

    @property
    def nops(self) -> int:
        return len(self.kind)

    @property
    def rank_off(self) -> np.ndarray:
        return np.searchsorted(self.rank, np.arange(self.nranks + 1)).astype(np.int64)


@dataclass
class SimResult:
    op_start: np.ndarray      # when each operation started (ns)
    op_end: np.ndarray        # calc: start+size; send: CPU free after it (rendezvous: >= match);
                              # recv: when its data was handled (or its start, if already there)
    match: np.ndarray         # partner operation of each send/recv (-1 for calc)
    rank_end: np.ndarray      # per rank: last time its CPU was busy
    rank_cpu_busy: np.ndarray  # per rank: CPU time charged for calcs
    rank_overhead: np.ndarray  # per rank: CPU time charged for o and O
    not_done: int             # operations that never completed (0 = success)


class ScheduleError(DataError, ValueError):
    """A schedule that cannot run (deadlock, unmatched messages); readable message."""


def params_vector(L: float, o_send: float, o_recv: float, O_send: float, O_recv: float,
                  g: float, G: float, S: float) -> np.ndarray:
    p = np.zeros(8)
    p[Q_L], p[Q_OS], p[Q_OR], p[Q_OSB], p[Q_ORB] = L, o_send, o_recv, O_send, O_recv
    p[Q_GAP], p[Q_G], p[Q_S] = g, G, S
    return p


def _successors(nops: int, dep_op: np.ndarray, dep_on: np.ndarray, dep_start: np.ndarray):
    """CSR of dependents by the operation they wait for, and each op's count of open deps."""
    order = np.argsort(dep_on, kind="stable")
    off = np.zeros(nops + 1, np.int64)
    np.add.at(off, dep_on + 1, 1)
    off = np.cumsum(off)
    cnt = np.zeros(nops, np.int64)
    np.add.at(cnt, dep_op, 1)
    return off, dep_op[order].astype(np.int64), dep_start[order].astype(np.bool_), cnt


def simulate(s: Schedule, prm: np.ndarray) -> SimResult:
    """Run the schedule; raise ScheduleError if it cannot finish."""
    n = s.nops
    off, succ, succ_start, cnt = _successors(n, np.asarray(s.dep_op, np.int64),
                                             np.asarray(s.dep_on, np.int64),
                                             np.asarray(s.dep_start, bool))
    ncpu = int(s.cpu.max()) + 1 if n else 1
    nnic = int(s.nic.max()) + 1 if n else 1
    op_start = np.full(n, -1.0)
    op_end = np.full(n, -1.0)
    match = np.full(n, -1, np.int64)
    rank_end = np.zeros(s.nranks)
    busy = np.zeros(s.nranks)
    ovh = np.zeros(s.nranks)
    not_done, n_rq, n_uq = _simulate(
        np.asarray(s.rank, np.int64), np.asarray(s.kind, np.int64),
        np.asarray(s.size, np.float64), np.asarray(s.peer, np.int64),
        np.asarray(s.tag, np.int64), np.asarray(s.cpu, np.int64), np.asarray(s.nic, np.int64),
        off, succ, succ_start, cnt, s.nranks, ncpu, nnic, prm,
        op_start, op_end, match, rank_end, busy, ovh)
    if n_rq or n_uq or not_done:
        what = []
        if n_uq:
            what.append(f"{n_uq} message(s) arrived that no receive matches")
        if n_rq:
            what.append(f"{n_rq} receive(s) got no message")
        if not_done and not what:
            what.append("the dependencies are cyclic")
        bad = np.flatnonzero(op_end < 0)[:3]
        where = ", ".join(f"rank {s.rank[i]} {KIND_NAMES[int(s.kind[i])]}"
                          + (f" {s.labels[i]}" if s.labels else "") for i in bad)
        raise ScheduleError(f"schedule cannot finish: {'; '.join(what)}; {not_done} operation(s) "
                            f"never complete (first: {where})")
    return SimResult(op_start, op_end, match, rank_end, busy, ovh, not_done)


# ------------------------------------------------------------------------------------------------
# The compiled simulation. Event queue: a binary heap of (time, insertion stamp, code); code >= 0
# is an operation, code < 0 the message of send operation -code-1. Re-queued events keep their
# stamp, as in LogGOPSim (its STRICT_ORDER).


@nb.njit(cache=True, nogil=True)
def _less(ht, hs, a, b):
    return ht[a] < ht[b] or (ht[a] == ht[b] and hs[a] < hs[b])


@nb.njit(cache=True, nogil=True)
def _push(ht, hs, hc, nh, t, stamp, code):
    i = nh
    ht[i] = t
    hs[i] = stamp
    hc[i] = code
    while i > 0:
        p = (i - 1) // 2
        if _less(ht, hs, i, p):
            ht[i], ht[p] = ht[p], ht[i]
            hs[i], hs[p] = hs[p], hs[i]
            hc[i], hc[p] = hc[p], hc[i]
            i = p
        else:
            break
    return nh + 1


@nb.njit(cache=True, nogil=True)
def _pop(ht, hs, hc, nh):
    """Remove the top (returned by the caller reading index 0 first); returns the new size."""
    nh -= 1
    ht[0], hs[0], hc[0] = ht[nh], hs[nh], hc[nh]
    i = 0
    while True:
        lft = 2 * i + 1
        if lft >= nh:
            break
        c = lft
        if lft + 1 < nh and _less(ht, hs, lft + 1, lft):
            c = lft + 1
        if _less(ht, hs, c, i):
            ht[i], ht[c] = ht[c], ht[i]
            hs[i], hs[c] = hs[c], hs[i]
            hc[i], hc[c] = hc[c], hc[i]
            i = c
        else:
            break
    return nh


@nb.njit(cache=True, nogil=True)
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


@nb.njit(cache=True, nogil=True)
def _simulate(rank, kind, size, peer, tag, cpu, nic, off, succ, succ_start, cnt, P, ncpu, nnic,
              prm, op_start, op_end, match, rank_end, busy, ovh):
    n = len(kind)
    L = prm[Q_L]
    o_s = prm[Q_OS]
    o_r = prm[Q_OR]
    O_s = prm[Q_OSB]
    O_r = prm[Q_ORB]
    g = prm[Q_GAP]
    G = prm[Q_G]
    S = prm[Q_S]
    nexto = np.zeros(P * ncpu)
    nextgs = np.zeros(P * nnic)
    nextgr = np.zeros(P * nnic)
    cap = 2 * n + 2
    ht = np.empty(cap)
    hs = np.empty(cap, np.int64)
    hc = np.empty(cap, np.int64)
    nh = 0
    stamp = 0
    # receive queue (posted receives) and unexpected queue (arrived messages) per rank:
    # doubly linked lists threaded through the operation index (recv ops / send ops).
    qn = np.full(n, -1, np.int64)
    qp = np.full(n, -1, np.int64)
    rq_h = np.full(P, -1, np.int64)
    rq_t = np.full(P, -1, np.int64)
    uq_h = np.full(P, -1, np.int64)
    uq_t = np.full(P, -1, np.int64)
    done = np.zeros(n, np.bool_)
    freed = np.empty(n + 1, np.int64)
    nf = 0

    # Operations without dependencies start at time 0, per rank in type order.
    for i in range(n):
        if cnt[i] == 0:
            freed[nf] = i
            nf += 1
    first = True
    while True:
        if nf > 0:
            # Queue the newly ready operations: by rank, then type, then schedule order.
            key = np.empty(nf, np.int64)
            for j in range(nf):
                x = freed[j]
                key[j] = (rank[x] * 4 + kind[x]) * (n + 1) + x
            key.sort()
            for j in range(nf):
                x = key[j] % (n + 1)
                h = rank[x]
                if first:
                    t = 0.0
                elif kind[x] == SEND:
                    t = max(nexto[h * ncpu + cpu[x]], nextgs[h * nnic + nic[x]])
                else:
                    t = nexto[h * ncpu + cpu[x]]
                nh = _push(ht, hs, hc, nh, t, stamp, x)
                stamp += 1
            nf = 0
        first = False
        if nh == 0:
            break
        t = ht[0]
        st = hs[0]
        code = hc[0]
        nh = _pop(ht, hs, hc, nh)

        if code >= 0:
            x = code
            h = rank[x]
            ci = h * ncpu + cpu[x]
            ni = h * nnic + nic[x]
            k = kind[x]
            if k == CALC:
                if nexto[ci] <= t:
                    nexto[ci] = t + size[x]
                    busy[h] += size[x]
                    op_start[x] = t
                    op_end[x] = t + size[x]
                    done[x] = True
                    nf = _release(x, True, off, succ, succ_start, cnt, freed, nf)
                    nf = _release(x, False, off, succ, succ_start, cnt, freed, nf)
                else:
                    nh = _push(ht, hs, hc, nh, nexto[ci], st, x)
            elif k == SEND:
                free_at = max(nexto[ci], nextgs[ni])
                if free_at <= t:
                    op_start[x] = t
                    nf = _release(x, True, off, succ, succ_start, cnt, freed, nf)
                    s1 = size[x] - 1.0
                    nexto[ci] = t + o_s + s1 * O_s
                    ovh[h] += o_s + s1 * O_s
                    nextgs[ni] = t + g + s1 * G
                    op_end[x] = nexto[ci]
                    nh = _push(ht, hs, hc, nh, t + o_s + L, stamp, -x - 1)
                    stamp += 1
                    if size[x] <= S:
                        done[x] = True
                        nf = _release(x, False, off, succ, succ_start, cnt, freed, nf)
                else:
                    nh = _push(ht, hs, hc, nh, free_at, st, x)
            else:  # RECV: posting is free; an arrived message completes it at once
                op_start[x] = t
                nf = _release(x, True, off, succ, succ_start, cnt, freed, nf)
                m = uq_h[h]
                while m >= 0:
                    if (peer[x] == ANY or rank[m] == peer[x]) and (tag[x] == ANY or
                                                                  tag[m] == tag[x]):
                        break
                    m = qn[m]
                if m >= 0:
                    # unlink m from the unexpected queue
                    if qp[m] >= 0:
                        qn[qp[m]] = qn[m]
                    else:
                        uq_h[h] = qn[m]
                    if qn[m] >= 0:
                        qp[qn[m]] = qp[m]
                    else:
                        uq_t[h] = qp[m]
                    match[x] = m
                    match[m] = x
                    if size[x] > S:
                        # rendezvous: the sender's request completes now (LogGOPSim moves the
                        # sender's clocks up to now, using this operation's cpu/nic index)
                        sr = rank[m]
                        done[m] = True
                        op_end[m] = max(op_end[m], t)
                        nf = _release(m, False, off, succ, succ_start, cnt, freed, nf)
                        if nexto[sr * ncpu + cpu[x]] < t:
                            nexto[sr * ncpu + cpu[x]] = t
                        if nextgs[sr * nnic + nic[x]] < t:
                            nextgs[sr * nnic + nic[x]] = t
                    op_end[x] = t
                    done[x] = True
                    nf = _release(x, False, off, succ, succ_start, cnt, freed, nf)
                else:
                    if rq_t[h] >= 0:
                        qn[rq_t[h]] = x
                        qp[x] = rq_t[h]
                    else:
                        rq_h[h] = x
                    rq_t[h] = x
        else:  # a message arrives: code encodes its send operation
            m = -code - 1
            h = peer[m]
            ci = h * ncpu + cpu[m]
            ni = h * nnic + nic[m]
            free_at = max(nexto[ci], nextgr[ni])
            if free_at <= t:
                s1 = size[m] - 1.0
                charge = o_r + max(s1 * O_r, s1 * G)
                nexto[ci] = t + charge
                ovh[h] += charge
                nextgr[ni] = t + g + s1 * G
                x = rq_h[h]
                while x >= 0:
                    if (peer[x] == ANY or peer[x] == rank[m]) and (tag[x] == ANY or
                                                                  tag[x] == tag[m]):
                        break
                    x = qn[x]
                if x >= 0:
                    if qp[x] >= 0:
                        qn[qp[x]] = qn[x]
                    else:
                        rq_h[h] = qn[x]
                    if qn[x] >= 0:
                        qp[qn[x]] = qp[x]
                    else:
                        rq_t[h] = qp[x]
                    match[x] = m
                    match[m] = x
                    if size[m] > S:
                        sr = rank[m]
                        done[m] = True
                        op_end[m] = max(op_end[m], t)
                        nf = _release(m, False, off, succ, succ_start, cnt, freed, nf)
                        if nexto[sr * ncpu + cpu[m]] < t:
                            nexto[sr * ncpu + cpu[m]] = t
                        if nextgs[sr * nnic + nic[m]] < t:
                            nextgs[sr * nnic + nic[m]] = t
                    op_end[x] = nexto[ci]
                    done[x] = True
                    nf = _release(x, False, off, succ, succ_start, cnt, freed, nf)
                else:
                    if uq_t[h] >= 0:
                        qn[uq_t[h]] = m
                        qp[m] = uq_t[h]
                    else:
                        uq_h[h] = m
                    uq_t[h] = m
            else:
                nh = _push(ht, hs, hc, nh, free_at, st, code)

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
    n_rq = 0
    n_uq = 0
    for h in range(P):
        x = rq_h[h]
        while x >= 0:
            n_rq += 1
            x = qn[x]
        x = uq_h[h]
        while x >= 0:
            n_uq += 1
            x = qn[x]
    return not_done, n_rq, n_uq


# ------------------------------------------------------------------------------------------------
# A trace as a schedule


def schedule_from_trace(prep, scale: np.ndarray, cpu_time: bool = False,
                        algorithms: dict | None = None) -> Schedule:
    """The GOAL schedule of a prepared trace: what ``semantics=loggopsim`` replays.

    Each rank's program order becomes a dependency chain: a compute burst is a ``calc``; a
    blocking send/receive is an operation the next one ``requires``; a non-blocking post is one
    the next ``irequires`` (it only has to have started) and its Wait adds a ``requires`` on it.
    Collectives are the point-to-point messages of their algorithms (as in every network model).
    Tags: a point-to-point message on COMM_WORLD keeps its tag; the others (collectives, other
    communicators) get tags above every user tag, unique per sender/receiver pair, so
    LogGOPSim's (source, tag) matching pairs exactly the messages the trace paired.
    ``row`` maps each operation to the trace row it stands for (-1 for calcs).
    """
    from replay import kernel as K

    st = prep.stream(expand=True, algorithms=dict(algorithms or {}))
    tags = _message_tags(prep, st)
    burst = (st.burst_cpu if cpu_time else st.burst) * scale[st.reg.astype(np.int64) + 1]
    trail = prep.trail * scale[0]
    out = _chain(st.rank_off, st.kind.astype(np.int64), st.msg, burst, trail, st.m_bytes,
                 st.m_src, st.m_dst, tags, st.op_row, K.SEND, K.RECV, K.ISEND, K.IRECV, K.WSEND,
                 K.WRECV)
    (rank, kind, size, peer, tag, row, stream_op, dep_op, dep_on, dep_start) = out
    z = np.zeros(len(kind), np.int64)
    sched = Schedule(prep.nranks, rank, kind, size, peer, tag, z, z.copy(), dep_op, dep_on,
                     dep_start, None, row)
    sched.info["stream_op"] = stream_op
    sched.info["stream"] = st
    return sched


def _message_tags(prep, st) -> np.ndarray:
    """A tag per message of the stream (see ``schedule_from_trace``)."""
    from hindsight import trace as tf

    M0 = len(prep.msgs["send_row"])
    tags = np.full(st.nmsg, -1, np.int64)
    if M0 and prep.path is not None:
        t = tf.read_trace(prep.path, columns=["rank", "seq", "tag", "comm"]).table
        order = np.lexsort((t.column("seq").to_numpy(), t.column("rank").to_numpy()))
        tag_col = t.column("tag").to_numpy()[order]
        comm_col = t.column("comm").to_numpy()[order]
        if len(tag_col) != prep.nrows:
            raise ValueError("trace rows changed since it was prepared")
        sr = prep.msgs["send_row"]
        user = (comm_col[sr] == 0) & (tag_col[sr] >= 0)
        tags[:M0] = np.where(user, tag_col[sr], -1)
    base = int(tags.max()) + 1 if len(tags) else 0
    synth = np.flatnonzero(tags < 0)
    if len(synth):
        pair = st.m_src[synth] * (prep.nranks + 1) + st.m_dst[synth]
        order = np.argsort(pair, kind="stable")
        ps = pair[order]
        start = np.r_[0, np.flatnonzero(ps[1:] != ps[:-1]) + 1]
        rank_in = np.arange(len(ps)) - np.repeat(start, np.diff(np.r_[start, len(ps)]))
        tags[synth[order]] = base + rank_in
    return tags


@nb.njit(cache=True)
def _chain(rank_off, kind, msg, burst, trail, m_bytes, m_src, m_dst, tags, op_row,
           K_SEND, K_RECV, K_ISEND, K_IRECV, K_WSEND, K_WRECV):
    P = len(rank_off) - 1
    n = len(kind)
    cap = 2 * n + P
    rank = np.empty(cap, np.int64)
    gk = np.empty(cap, np.int64)
    size = np.empty(cap)
    peer = np.empty(cap, np.int64)
    tag = np.empty(cap, np.int64)
    row = np.empty(cap, np.int64)
    sop = np.empty(cap, np.int64)
    dcap = 3 * n + P + 1
    d_op = np.empty(dcap, np.int64)
    d_on = np.empty(dcap, np.int64)
    d_st = np.empty(dcap, np.bool_)
    nm = len(m_bytes)
    g_send = np.full(nm, -1, np.int64)
    g_recv = np.full(nm, -1, np.int64)
    cur = np.empty(n + 2, np.int64)      # ops the next operation depends on
    cur_st = np.empty(n + 2, np.bool_)
    ng = 0
    nd = 0
    for r in range(P):
        nc = 0
        for i in range(rank_off[r], rank_off[r + 1] + 1):
            last = i == rank_off[r + 1]
            b = trail[r] if last else burst[i]
            if b > 0:
                rank[ng], gk[ng], size[ng], peer[ng], tag[ng] = r, CALC, b, ANY, 0
                # a calc remembers the stream op it precedes as -2 - i (the trail: -2 - n)
                row[ng], sop[ng] = -1, -2 - i
                for j in range(nc):
                    d_op[nd], d_on[nd], d_st[nd] = ng, cur[j], cur_st[j]
                    nd += 1
                cur[0], cur_st[0], nc = ng, False, 1
                ng += 1
            if last:
                break
            k = kind[i]
            if k == K_SEND or k == K_ISEND or k == K_RECV or k == K_IRECV:
                m = msg[i]
                snd = k == K_SEND or k == K_ISEND
                rank[ng], gk[ng], size[ng], tag[ng] = r, SEND if snd else RECV, m_bytes[m], tags[m]
                peer[ng] = m_dst[m] if snd else m_src[m]
                row[ng], sop[ng] = op_row[i], i
                if snd:
                    g_send[m] = ng
                else:
                    g_recv[m] = ng
                for j in range(nc):
                    d_op[nd], d_on[nd], d_st[nd] = ng, cur[j], cur_st[j]
                    nd += 1
                cur[0], cur_st[0], nc = ng, (k == K_ISEND or k == K_IRECV), 1
                ng += 1
            elif k == K_WSEND or k == K_WRECV:
                g = g_send[msg[i]] if k == K_WSEND else g_recv[msg[i]]
                if g >= 0:
                    cur[nc], cur_st[nc] = g, False
                    nc += 1
    return (rank[:ng].copy(), gk[:ng].copy(), size[:ng].copy(), peer[:ng].copy(),
            tag[:ng].copy(), row[:ng].copy(), sop[:ng].copy(), d_op[:nd].copy(), d_on[:nd].copy(),
            d_st[:nd].copy())


# ------------------------------------------------------------------------------------------------
# Replay entry point (called by replay.engine.run for semantics=loggopsim)


def params_from_values(values: dict, nranks: int) -> np.ndarray:
    """The parameter vector from resolved ``loggps`` model values (internal units).

    LogGOPSim has one o and one O; hindsight's separate send/receive values (and the o_b·P term
    of paper 004) are kept: with o_send == o_recv and o_b = 0 this is LogGOPSim's model."""
    return params_vector(
        L=values["L"], o_send=values["o_send"] + values["o_b_send"] * nranks,
        o_recv=values["o_recv"] + values["o_b_recv"] * nranks, O_send=values["O_send"],
        O_recv=values["O_recv"], g=values["g"], G=values["G"], S=values["S"])


def run_replay(prep, mod, values: dict, shown: dict, *, compute_scale: float = 1.0,
               region_scale=None, cpu_time: bool = False, algorithms=None, record: bool = True):
    """Replay a prepared trace under LogGOPSim's rules; returns a ``replay.engine.Result``.

    A trace imported from GOAL replays the schedule it came from (its dependency graph), any
    other trace the schedule ``schedule_from_trace`` derives from it."""
    from hindsight.interop.goal import GoalError, sidecar_schedule
    from replay.engine import Result, _scale_array
    from replay.prepare import ReplayError

    scale = _scale_array(prep, compute_scale, region_scale)
    try:
        sched = sidecar_schedule(prep)
    except GoalError as exc:
        raise ReplayError(str(exc)) from None
    st = None
    if sched is not None:
        sched.size = np.where(sched.kind == CALC, sched.size * scale[0], sched.size)
        source = "the GOAL schedule the trace was imported from"
    else:
        sched = schedule_from_trace(prep, scale, cpu_time, algorithms)
        st = sched.info["stream"]
        source = "the trace's program order as a GOAL schedule"
    try:
        sim = simulate(sched, params_from_values(values, prep.nranks))
    except ScheduleError as exc:
        raise ReplayError(f"replay deadlock (semantics=loggopsim): {exc}") from None
    comp = sim.rank_cpu_busy
    comm = sim.rank_overhead
    res = Result(
        model=mod.NAME, params=shown, compute_scale=compute_scale,
        makespan_ns=float(sim.rank_end.max()) if len(sim.rank_end) else 0.0,
        measured_makespan_ns=prep.measured_makespan_ns, rank_end_ns=sim.rank_end,
        rank_compute_ns=comp, rank_comm_ns=comm,
        rank_wait_ns=np.maximum(sim.rank_end - comp - comm, 0.0),
        measured_rank_end_ns=prep.measured_rank_end_ns, events=prep.nrows,
        operations=sched.nops, messages=int((sched.kind == SEND).sum()),
        algorithms=dict(st.algorithms) if st is not None else {},
        info={"semantics": "loggopsim", "schedule": source}, prepared=prep)
    if record:
        if st is not None:
            rs, re = _row_times_from_trace(prep, sched, sim, st)
        else:
            rs, re = _row_times_from_sidecar(prep, sched, sim)
        rs, re = _fill_rows(prep, rs, re, sim.rank_end)
        # the rows of one call (a Waitall's requests, a Sendrecv's halves) share its times
        cont = np.asarray(prep.rows["cont"], bool)
        if cont.any():
            n = len(rs)
            grp = np.maximum.accumulate(np.where(cont, 0, np.arange(n)))
            gend = np.full(n, -np.inf)
            np.maximum.at(gend, grp, re)
            rs = rs[grp]
            re = gend[grp]
        res.row_start_ns, res.row_end_ns = rs, np.maximum(re, rs)
    return res


def _row_times_from_trace(prep, sched: Schedule, sim: SimResult, st):
    """Per trace row: replayed start/end from the schedule operations that stand for it.

    A Wait (no operation of its own) ends when the operation it completes ended, and starts when
    the rank's previous operation in program order ended."""
    from replay import kernel as K

    n = prep.nrows
    rs = np.full(n, -1.0)
    re = np.full(n, -1.0)
    g_of_op = np.full(st.nops, -1, np.int64)
    has = sched.info["stream_op"] >= 0
    g_of_op[sched.info["stream_op"][has]] = np.flatnonzero(has)
    g_send = np.full(st.nmsg, -1, np.int64)
    g_recv = np.full(st.nmsg, -1, np.int64)
    snd = (st.kind == K.SEND) | (st.kind == K.ISEND)
    rcv = (st.kind == K.RECV) | (st.kind == K.IRECV)
    g_send[st.msg[snd]] = g_of_op[snd]
    g_recv[st.msg[rcv]] = g_of_op[rcv]
    _rows_kernel(st.rank_off, st.kind.astype(np.int64), st.msg, st.op_row, g_of_op, g_send,
                 g_recv, sim.op_start, sim.op_end, np.asarray(sched.rank, np.int64),
                 np.asarray(sched.info["stream_op"], np.int64), rs, re, K.WSEND, K.WRECV)
    return rs, re


@nb.njit(cache=True)
def _rows_kernel(rank_off, kind, msg, op_row, g_of_op, g_send, g_recv, g_start, g_end, g_rank,
                 g_sop, rs, re, K_WSEND, K_WRECV):
    P = len(rank_off) - 1
    gi = 0
    ng = len(g_rank)
    for r in range(P):
        last_end = 0.0
        while gi < ng and g_rank[gi] < r:
            gi += 1
        for i in range(rank_off[r], rank_off[r + 1]):
            # the schedule ops standing for this stream op: its burst's calc, then its own op
            while gi < ng and (g_sop[gi] == -2 - i or g_sop[gi] == i):
                if g_end[gi] > last_end:
                    last_end = g_end[gi]
                gi += 1
            w = op_row[i]
            g = g_of_op[i]
            if g >= 0:
                s0, e0 = g_start[g], g_end[g]
            elif kind[i] == K_WSEND or kind[i] == K_WRECV:
                gg = g_send[msg[i]] if kind[i] == K_WSEND else g_recv[msg[i]]
                e0 = max(g_end[gg], last_end) if gg >= 0 else last_end
                s0 = last_end
                last_end = e0
            else:
                s0, e0 = last_end, last_end
            if rs[w] < 0.0 or s0 < rs[w]:
                rs[w] = s0
            if e0 > re[w]:
                re[w] = e0


def _row_times_from_sidecar(prep, sched: Schedule, sim: SimResult):
    """Rows of a trace imported from GOAL: Isend/Irecv/Wait rows carry their operation's index
    (on its rank) as request id; ``calc`` region rows take the rank's calcs in replayed order."""
    from hindsight import trace as tf

    rows = prep.rows
    n = prep.nrows
    rs = np.full(n, -1.0)
    re = np.full(n, -1.0)
    t = tf.read_trace(prep.path, columns=["rank", "seq", "request"]).table
    order = np.lexsort((t.column("seq").to_numpy(), t.column("rank").to_numpy()))
    req = t.column("request").to_numpy()[order]
    off = sched.rank_off
    op = rows["op"]
    rank = rows["rank"]
    post = tf.op_mask(op, ("Isend", "Irecv")) & (req >= 0)
    g = off[rank[post]] + req[post]
    if (req[post] >= np.diff(off)[rank[post]]).any():
        raise ValueError("trace requests do not match its GOAL schedule")
    rs[post] = sim.op_start[g]
    re[post] = np.where(sched.kind[g] == RECV, sim.op_start[g], sim.op_end[g])
    wait = tf.op_mask(op, tf.COMPLETION_OPS) & (req >= 0)
    gw = off[rank[wait]] + req[wait]
    re[wait] = sim.op_end[gw]
    calc_rows = np.flatnonzero(op == 0)
    for r in range(prep.nranks):
        mine = calc_rows[rank[calc_rows] == r]
        ops = np.flatnonzero((sched.rank == r) & (sched.kind == CALC))
        ops = ops[np.lexsort((ops, sim.op_start[ops]))]
        k = min(len(mine), len(ops))
        rs[mine[:k]] = sim.op_start[ops[:k]]
        re[mine[:k]] = sim.op_end[ops[:k]]
    # a Wait starts where the rank's previous row ended
    for r in range(prep.nranks):
        idx = np.flatnonzero(rank == r)
        last = 0.0
        for w in idx:
            if wait[w]:
                rs[w] = min(last, re[w])
            if re[w] >= 0 and op[w] != 0:
                last = max(last, re[w])
    return rs, re


def _fill_rows(prep, rs: np.ndarray, re: np.ndarray, rank_end: np.ndarray):
    """Rows without replayed times (regions, unmatched ops) are mapped through the rank's time
    warp: piecewise linear between rows that have times (as the default engine does)."""
    rows = prep.rows
    rank = rows["rank"]
    ts = (rows["t_start"] - prep.t0).astype(float)
    te = (rows["t_end"] - prep.t0).astype(float)
    for r in range(prep.nranks):
        idx = np.flatnonzero(rank == r)
        have = idx[rs[idx] >= 0]
        miss = idx[rs[idx] < 0]
        if not len(miss):
            continue
        mx = np.concatenate([[0.0], ts[have], te[have], [prep.measured_rank_end_ns[r]]])
        my = np.concatenate([[0.0], rs[have], np.maximum(re[have], rs[have]), [rank_end[r]]])
        o = np.lexsort((my, mx))
        mx, my = mx[o], np.maximum.accumulate(my[o])
        rs[miss] = np.interp(ts[miss], mx, my)
        re[miss] = np.interp(te[miss], mx, my)
    return rs, np.maximum(re, rs)
