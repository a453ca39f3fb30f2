"""The rules of the replay kernel (``replay.kernel``): each a small function with its formula,
inlined into the compiled loop. The network rules are LogGOPS's (paper 004 §2-3); the progress
rules say when a rendezvous handshake can happen (``handshake_time``) and keep the senders that
wait for one (``known_handshake``, ``wake_waiters``, ``resolve_stalled_handshake``).

Sums are written left to right exactly as the loop needs them: ``t + o + O·k`` and
``t + (o + O·k)`` round differently, and replayed times are compared bit for bit across versions.
"""

from __future__ import annotations

import math

import numpy as np

from hindsight.jit import njit

# pred codes: what bound an operation's end
PRED_LOCAL, PRED_SEND, PRED_RECV, PRED_COLL = 0, 1, 2, 3


@njit(inline="always")
def send_overhead(o_s, O_s, k):
    """o_s(k) = o_s + O_s·k: the sender's CPU time for a k-byte message (LogGOPS; the
    per-message part o_s = o_s0 + o_sP·P is computed once from the parameters)."""
    return o_s + O_s * k


@njit(inline="always")
def after_overhead(t, o, O, k):
    """t + o + O·k: the end of a k-byte message's overhead (o + O·k) that starts at t, the
    sender's (o_s, O_s) or the receiver's (o_r, O_r)."""
    return t + o + O * k


@njit(inline="always")
def wire_time(k, kshift, G):
    """(k − kshift)⁺·G: the time a k-byte message's bytes take on the wire beyond the first
    ``kshift`` (LogGP's (k − 1)G; the latency L is added per hop where the protocol is known)."""
    return max(k - kshift, 0.0) * G


@njit(inline="always")
def is_rendezvous(k, S, sync):
    """A message goes by rendezvous above S bytes, or when the send is synchronous-mode
    (Ssend/Issend: MPI completes it only once the receive matched); else eagerly."""
    return k > S or sync


@njit(inline="always")
def next_send_slot(ts, gap, wire):
    """ts + g + wire: when the sender's NIC can start the next message after one that started
    at ts (LogGP's gap g, plus that message's bytes on the wire)."""
    return ts + gap + wire


@njit(inline="always")
def eager_arrival(sent, L, wire, delay):
    """sent + L + wire + delay: an eager message's data is at the receiver (``sent``: the
    sender's overhead ended). L may be negative, down to −o_s: the data is there before the
    send call returns, when the calls' own overheads overlap the transfer (calibrate measures
    a one-way time below o_s + o_r on every MPI path of this machine)."""
    return sent + L + wire + delay


@njit(inline="always")
def unexpected_copy(t, arrived, posted, seen, o_u, O_u, k):
    """Rule ``unexpected_copy``: an eager message whose data arrived (``eager_arrival``) before
    its receive was posted, both in the replayed timeline, and that the receiver's library took
    in before that post, waited in the library's unexpected queue; the call that completes the
    receive ends u(k) = o_u + O_u·k later (both 0: off):

        arrived <= posted and seen >= 0:  t + o_u + O_u·k   (unexpected)
        otherwise:                        t                 (expected: the data goes straight
                                                             to the posted buffer)

    ``t``: the end of the receive without the rule (after o_r(k)). ``seen``: when the library
    took the data in: with progress ``async`` on arrival (``seen = arrived``); with ``in-call``
    the first time >= arrived the receiver was inside one of its calls before the posting one
    (``first_in_mpi``; -1: none, the posting call finds the data still in the transport and
    matches it to the receive it has just posted). A Recv after the Probe that found its
    message is unexpected; so is a receive posted after another call of the receiver that ran
    once the data was there.

    MPICH 4-5 (ch4, active messages; src/mpid/ch4/src/mpidig_recv.h, mpidig_pt2pt_callbacks.c):
    the progress engine, which runs only inside the receiver's calls unless asynchronous
    progress is on, hands an eager message that finds no posted receive to the unexpected list,
    copying it into a buffer of the library's pool; the receive that matches it later
    (``MPIDIG_do_irecv``, ``MPIDIG_mpi_imrecv``) takes it off that list and copies it into the
    user's buffer in the posting call (``MPIDIG_handle_unexpected`` ->
    ``MPIDIG_copy_from_unexp_req``). An expected message is copied once, into the posted
    buffer. u(k) is the difference (``hindsight calibrate``'s unexpected probe), charged where
    the receive completes (a Recv; the Wait of an Irecv: at the post the replay cannot know yet
    whether the data is there without holding the Irecv until the sender is replayed).
    Rendezvous messages are never queued so: their data moves after the receive is posted. Nor
    are the messages of the pattern that stands in for a collective MPICH runs on shared flags
    among the ranks of one node (``replay.selection.SHARED_FLAG_COLLECTIVES``; the kernel skips
    the rule where ``Messages.no_queue`` says so): there are no point-to-point messages there."""
    if arrived <= posted and seen >= 0.0:
        return t + o_u + O_u * k
    return t


@njit(inline="always")
def envelope_arrival(sent, L, delay):
    """sent + L + delay: a message's envelope (for a rendezvous, its request to send) is at the
    receiver; what a probe waits for."""
    return sent + L + delay


@njit(inline="always")
def poll_exit(start, avail, period):
    """Rule ``poll_wait``: a run of unsuccessful polls (a ``Poll`` row, format 1.3) that the
    call after it ends by finding its message (an ``Iprobe``) or completing its receive (a
    ``Test*``) is the rank waiting for that message, not computing. The loop polls at
    start, start + p, start + 2p, ... (``start``: the run's first poll in the replay; p the
    measured loop period, ``replay.polling``) and leaves at the first poll at or after the
    message is available (``avail``: its envelope's arrival, ``envelope_arrival``; for eager
    data the data's):

        avail <= start:  start                                    (the first poll finds it)
        otherwise:       start + ceil((avail − start) / p)·p      (p > 0; avail when p = 0)

    The successful call starts there; the loop's own work (the run's time and the burst after
    its last failed poll) does not add on top. The call itself then follows its own rule (an
    ``Iprobe`` takes no time of the network; a ``Test``'s receive completes as a ``Wait``'s)."""
    if avail <= start:
        return start
    if period > 0.0:
        return start + math.ceil((avail - start) / period) * period
    return avail


def protocol_hop(L, o_hop):
    """H = L⁺ + o_hop, L⁺ = max(L, 0): the time of a hop the library makes on its own (a
    rendezvous's clear to send, its data after the handshake, a passive target's reply): its
    latency, which no call's overhead overlaps, and the library's own work on the control
    message at both ends, o_hop (``loggps``'s parameter, measured by calibrate as half the step
    of the one-way time at S; 0: the latency alone). Computed once per replay
    (``kernel.make_params``); the rules below take H."""
    return max(L, 0.0) + o_hop


@njit(inline="always")
def rendezvous_arrival(sent, L, H, wire, delay):
    """sent + L + 2H + wire + delay: a rendezvous message's data is at a receiver that was
    ready in time (request to send, clear to send, data: the request's latency as an eager
    message's, then two ``protocol_hop``s)."""
    return sent + L + 2.0 * H + wire + delay


@njit(inline="always")
def late_receiver_arrival(rp, H, wire, delay):
    """rp + 2H + wire + delay: a rendezvous message's data is at a receiver that posted at rp,
    after the request to send arrived (clear to send, data)."""
    return rp + 2.0 * H + wire + delay


@njit(inline="always")
def passive_reply(arrived, H, wire, delay):
    """arrived + H + wire + delay: the reply of a passive target's library to a one-sided
    transfer whose bytes arrived at ``arrived`` (rule ``lock_epoch``, ``replay.rma_epochs``:
    its data, or an empty acknowledgement) is at the origin. The library answers at once and
    without the target's rank, so no overhead of the target's call is charged (a
    ``protocol_hop`` with the reply's bytes)."""
    return arrived + H + wire + delay


@njit(inline="always")
def rendezvous_sender_done(sent, L, H, wire):
    """sent + L + H + wire: a rendezvous send completes, the receiver having been ready
    (request to send and clear to send, then the bytes leave)."""
    return sent + L + H + wire


@njit(inline="always")
def clear_to_send_done(rp, H, wire):
    """rp + H + wire: a rendezvous send whose receive was posted at rp completes (the clear
    to send arrives, then the bytes leave)."""
    return rp + H + wire


@njit(inline="always")
def bound(local_end, dep_end, pred_if_dep):
    """An operation ends at the later of its own end and its dependency's: (end, time the rank
    waited = dep_end − local_end when the dependency is later, what bound the end)."""
    if dep_end > local_end:
        return dep_end, dep_end - local_end, pred_if_dep
    return local_end, 0.0, PRED_LOCAL


@njit(inline="always")
def request_arrival(sp, os0, Os, k, L, delay):
    """sp + o_s(k) + L + delay: a rendezvous message's request to send (or a synchronous
    send's envelope) is at the receiver, its send having been posted at sp."""
    return envelope_arrival(after_overhead(sp, os0, Os, k), L, delay)


@njit(inline="always")
def first_in_mpi(hs, he, lo, hi, x):
    """The first time >= x at which a rank is inside one of its operations lo..hi-1, whose
    replayed [start hs, end he] intervals are in program order (ends non-decreasing):
    max(start, x) of the first one ending at or after x; -1 if all ended before x."""
    a, b = lo, hi
    while a < b:
        mid = (a + b) // 2
        if he[mid] < x:
            a = mid + 1
        else:
            b = mid
    if a < hi:
        return max(hs[a], x)
    return -1.0


@njit(inline="always")
def handshake_time(rts, rp, seen, current, covers):
    """When the receiver answers a rendezvous request that arrived at ``rts``, its receive
    having been posted at ``rp`` (progress ``in-call``: the library moves a transfer only
    inside an MPI call of the receiver; MPICH without asynchronous progress):

        rts <= rp:  rp                 the posting call finds the request waiting
        otherwise:  the first time >= rts the receiver is inside an MPI call: ``seen``, found
                    in the calls it made since posting (``first_in_mpi``), else its current
                    call, which started at ``current``: max(current, rts) if that call lasts
                    past rts (``covers``), else current if it started after rts

    -1: not known yet (the receiver's current call started before rts and may end before it).
    With progress ``async`` the answer is rp whenever the request has arrived (LogGPS)."""
    if rts <= rp:
        return rp
    if seen >= 0.0:
        return seen
    if covers:
        return max(current, rts)
    if current >= rts:
        return current
    return -1.0


@njit(inline="always")
def known_handshake(m, r, i, st_r, rts, m_rp, m_h, m_rpop, m_dst, hs, he, pc, phase, start_of,
                    rank_off):
    """``handshake_time`` of rendezvous message m as far as its receiver has been replayed
    (-1: not yet), asked by rank r at its operation i, which started at st_r. The receiver is
    r itself, inside this call; or another rank, blocked at (or not yet resumed from) its
    operation pc[d], which started at start_of[d]."""
    if m_h[m] >= 0.0:
        return m_h[m]
    d = m_dst[m]
    if d == r:
        return handshake_time(rts, m_rp[m], first_in_mpi(hs, he, m_rpop[m], i, rts), st_r,
                              True)
    current = -1.0
    if phase[d] >= 1 and pc[d] < rank_off[d + 1]:
        current = start_of[d]
    return handshake_time(rts, m_rp[m], first_in_mpi(hs, he, m_rpop[m], pc[d], rts), current,
                          False)


@njit(inline="always")
def unlink_waiter(pw_head, pw_next, d, s):
    """Take sender s out of receiver d's list of senders waiting for a handshake."""
    if pw_head[d] == s:
        pw_head[d] = pw_next[s]
    else:
        w = pw_head[d]
        while pw_next[w] != s:
            w = pw_next[w]
        pw_next[w] = pw_next[s]
    pw_next[s] = -1


@njit(inline="always")
def wake_waiters(d, x, pw_msg, pw_rts, pw_next, pw_head, pw_min, stack, top):
    """Receiver d has been replayed up to time x inside an MPI call (a call that ended at x or
    began at x): the senders whose request arrived by x can learn their handshake. They go back
    on the stack; returns the new stack top."""
    w = pw_head[d]
    low = np.inf
    while w >= 0:
        nxt = pw_next[w]
        if pw_rts[w] <= x:
            unlink_waiter(pw_head, pw_next, d, w)
            pw_msg[w] = -1
            stack[top] = w
            top += 1
        elif pw_rts[w] < low:
            low = pw_rts[w]
        w = nxt
    pw_min[d] = low
    return top


@njit(inline="always")
def resolve_stalled_handshake(pw_msg, pw_rts, pw_next, pw_head, pw_min, m_dst, m_h, stack,
                              top):
    """No rank can run: give the waiting sender with the earliest request its handshake at
    that request's arrival, and put it back on the stack (returns the new top; unchanged if no
    sender waits for a handshake)."""
    best = -1
    for s in range(len(pw_msg)):
        if pw_msg[s] >= 0 and (best < 0 or pw_rts[s] < pw_rts[best]):
            best = s
    if best < 0:
        return top
    m = pw_msg[best]
    d = m_dst[m]
    m_h[m] = pw_rts[best]
    unlink_waiter(pw_head, pw_next, d, best)
    pw_msg[best] = -1
    low = np.inf
    w = pw_head[d]
    while w >= 0:
        low = min(low, pw_rts[w])
        w = pw_next[w]
    pw_min[d] = low
    stack[top] = best
    return top + 1


@njit(inline="always")
def ack_floor(t, waited, pk, floor):
    """A rendezvous send whose completion acknowledgement was held (``ack_cells``) ends no
    earlier than ``floor``, the time its sender takes the acknowledgement in; the time up to
    it is waiting for the receiver (pred RECV). ``floor`` < 0: nothing held."""
    if floor > t:
        return floor, waited + (floor - t), PRED_RECV
    return t, waited, pk


@njit(inline="always")
def _resume_segment(tab, start, n, x):
    """(lo, hi, f): x lies between grid point lo and hi of tab[start:start + n] (lo = -1: the
    origin 0), at fraction f from lo; beyond the last point (n - 1, n - 1, 0)."""
    lo, x_lo = -1, 0.0
    for i in range(n):
        xi = tab[start + i]
        if x < xi:
            return lo, i, (x - x_lo) / (xi - x_lo)
        lo, x_lo = i, xi
    return n - 1, n - 1, 0.0


@njit(inline="always")
def _resume_point(tab, nb_, nd, j, i):
    """w at away point j and burst point i of the table (0 on the origin's row or column)."""
    if i < 0 or j < 0:
        return 0.0
    return tab[2 + nb_ + nd + j * nb_ + i]


@njit(inline="always")
def resume_extra(tab, b, d):
    """Rule ``resume_after_wait``: w(b, d), the extra time of a burst of b (ns) that starts d
    (ns) after the rank's previous burst ended (``replay.resume``). ``tab`` = [n_b, n_d,
    b_1..b_nb, d_1..d_nd, w(d_1, b_1..b_nb), .., w(d_nd, ..)]: bilinear between the measured
    points and the origin (w(0, d) = w(b, 0) = 0), the last point's value beyond the last b or
    d; an empty table, b <= 0 or d <= 0: 0."""
    if len(tab) == 0 or b <= 0.0 or d <= 0.0:
        return 0.0
    nb_ = int(tab[0])
    nd = int(tab[1])
    i0, i1, fb = _resume_segment(tab, 2, nb_, b)
    j0, j1, fd = _resume_segment(tab, 2 + nb_, nd, d)
    lo = (1.0 - fb) * _resume_point(tab, nb_, nd, j0, i0) + fb * _resume_point(tab, nb_, nd, j0, i1)
    hi = (1.0 - fb) * _resume_point(tab, nb_, nd, j1, i0) + fb * _resume_point(tab, nb_, nd, j1, i1)
    return (1.0 - fd) * lo + fd * hi


@njit(cache=True, nogil=True)
def ack_cells(rank_off, op_start, op_end, rank_end, consume, drain, done_op, ms, m_src, m_dst,
              cells, floor):
    """Rule ``ack_cells`` (LogGPS with progress ``in-call``): the receiver of a rendezvous
    message acknowledges its completion to the sender through one of its ``cells`` cells
    (MPICH's shared-memory transport: each process's pool of eager cells for all its
    destinations, MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_NUM_CELLS; a cell is free again once its
    reader, here the sender, has read it, which it does only inside an MPI call). Per receiver
    d, its acknowledgements j = 0, 1, ... in the order its rendezvous receives completed
    (``ms``: the messages so ordered, by receiver, then the replayed end e_j of ``done_op``, the
    operation that completed the receive), to sender s_j:

        c_j = first time >= a_j that s_j is inside a call with ``consume`` (it reads
              acknowledgement j; a_j if it makes no such call)
        F_j = the c_i > e_j of the earlier ones (i < j: in cells, unread at e_j)
        a_j = e_j                          if |F_j| < cells and ack j-1 was not held past e_j
              first time >= max(e_j, f_j, a_(j-1)) that d is inside a call with ``drain``,
              else d's end             otherwise: held in d's postponed queue, which only its
                                       progress engine, a call that waits, drains, in order;
                                       f_j = the (|F_j| - cells + 1)-th smallest of F_j, when
                                       enough of them are read for a cell to be free

    With one sender this is f_j = c_(j-cells). For a held acknowledgement ``floor[m] = c_j``:
    the sender's completion (its ``Wait``) ends no earlier (``ack_floor``); -1 for the others.
    Intervals are the replayed [op_start, op_end] of each rank's operations (``first_in_mpi``),
    from the previous pass; ``engine.run`` repeats the replay until the floors no longer
    change."""
    P = len(rank_off) - 1
    floor[:] = -1.0
    # per rank, its consume / drain calls as interval lists in program order
    cs = np.empty(len(op_start))
    ce = np.empty(len(op_start))
    ds = np.empty(len(op_start))
    de = np.empty(len(op_start))
    c_off = np.zeros(P + 1, np.int64)
    d_off = np.zeros(P + 1, np.int64)
    nc = 0
    nd = 0
    for r in range(P):
        for i in range(rank_off[r], rank_off[r + 1]):
            if consume[i]:
                cs[nc] = op_start[i]
                ce[nc] = op_end[i]
                nc += 1
            if drain[i]:
                ds[nd] = op_start[i]
                de[nd] = op_end[i]
                nd += 1
        c_off[r + 1] = nc
        d_off[r + 1] = nd
    k = len(ms)
    a = np.empty(k)
    c = np.empty(k)
    held = np.zeros(k, np.bool_)
    fl = np.empty(k)                        # c of the receiver's acknowledgements in cells
    nf = 0
    for j in range(k):
        m = ms[j]
        d = m_dst[m]
        s = m_src[m]
        new_d = j == 0 or m_dst[ms[j - 1]] != d
        if new_d:
            nf = 0
        e = op_end[done_op[m]]
        w = 0                               # drop those read by e
        for i in range(nf):
            if fl[i] > e:
                fl[w] = fl[i]
                w += 1
        nf = w
        x = e
        if nf >= cells:
            # the cell frees when all but cells - 1 of them have been read
            x = max(x, np.sort(fl[:nf])[nf - cells])
        if not new_d and held[j - 1] and a[j - 1] > x:
            x = a[j - 1]
        if x > e:
            held[j] = True
            y = first_in_mpi(ds, de, d_off[d], d_off[d + 1], x)
            a[j] = y if y >= 0.0 else max(rank_end[d], x)
        else:
            a[j] = e
        y = first_in_mpi(cs, ce, c_off[s], c_off[s + 1], a[j])
        c[j] = y if y >= 0.0 else a[j]
        fl[nf] = c[j]
        nf += 1
        if held[j]:
            floor[m] = c[j]
