"""The compiled replay loop: flat arrays in, replayed times out. No Python objects inside.

Each rank is a program counter over its operations (``rank_off[r]:rank_off[r+1]`` of the op
arrays). Ranks run until an operation needs something another rank has not produced yet (the
posting time of a message's other side, or the last entry into a collective); the rank then
records what it waits for and leaves the work stack. The rank that produces that time pushes it
back. Each operation is therefore processed once and each wait costs O(1): the cost is linear in
the number of operations, incast backlogs included (nothing is re-queued or polled).

Operation kinds (``kind``):
  SEND   blocking send: post the send side of message ``msg``, then complete it
  RECV   blocking receive: post the receive side, then complete it
  ISEND  post the send side;  IRECV  post the receive side
  WSEND  complete the send side (Wait on an Isend);  WRECV  complete the receive side
  COLL   enter collective instance ``msg`` and leave when all members entered (measured mode)
  CPOST  enter collective instance ``msg`` without waiting (a non-blocking collective's post;
         measured mode)
  CWAIT  leave collective instance ``msg`` once all members entered (its completion: rule
         ``nonblocking_meeting``; measured mode)
  PSEND  send message ``msg`` to a passive target (rule ``lock_epoch``, ``replay.rma_epochs``):
         posted as an eager send; its receiver is the target's library, which takes it on
         arrival and sends its reply, message ``msg + 1``, at once, without the target's rank
  PRECV  receive the reply ``msg`` of a passive target (``passive_reply``)
  PROBE  a blocking probe that returned message ``msg`` (the receive that follows takes it): wait
         until its envelope is there (eager: the data; rendezvous: the request to send), do not
         consume it; the receive is posted by the RECV that follows
  POLL   a run of polls waiting for message ``msg`` (network mode; rule ``poll_wait``): as a
         PROBE, but left at the first poll of period ``loc[i]`` after the envelope is there
  NOP    nothing but its burst (and, in measured mode, its measured duration)

Every operation is preceded by a compute burst ``burst[i] * scale[reg[i] + 1]``.

The network rules (LogGOPS), the progress rules and rule ``unexpected_copy`` (an eager message
queued before its receive was posted costs the call completing the receive o_u + O_u·k more)
are the small functions of ``replay.rules``, inlined into the loop.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from hindsight.jit import njit
from replay.rules import (  # noqa: F401  (PRED_* are outputs of the kernel too)
    PRED_COLL, PRED_LOCAL, PRED_RECV, PRED_SEND, ack_cells, ack_floor, after_overhead, bound,
    clear_to_send_done, eager_arrival, envelope_arrival, first_in_mpi, is_rendezvous,
    known_handshake, late_receiver_arrival, next_send_slot, passive_reply, poll_exit,
    protocol_hop,
    rendezvous_arrival,
    rendezvous_sender_done, request_arrival,
    resolve_stalled_handshake, resume_extra, send_overhead, unexpected_copy, unlink_waiter,
    wake_waiters, wire_time)

#: The first 12 hex digits of replay/rules.py's sha1. numba's cache (cache=True) recompiles when
#: this file changes, not when the rules it inlines do: a change of the rules must change this
#: line too (tests/test_progress.py checks it), or replays would run the old machine code.
RULES_SHA1 = "b5e00491b83f"

NOP, SEND, RECV, ISEND, IRECV, WSEND, WRECV, COLL, PROBE, CPOST, CWAIT, PSEND, PRECV, POLL = \
    range(14)

# Parameter vector layout (ns, bytes).
P_OS0, P_OSP, P_OS, P_OR0, P_ORP, P_OR, P_L, P_G, P_GAP, P_S, P_KSHIFT, P_NPROC, P_PROGRESS, \
    P_OU, P_OUK, P_HOP, P_GAMMA = range(17)
NPARAMS = 17
# P_PROGRESS: how a rendezvous handshake progresses (``handshake_time``)
PROGRESS_ASYNC, PROGRESS_IN_CALL = 0.0, 1.0
MODE_NETWORK, MODE_MEASURED = 0, 1
#: rows of a replay's carry (``Carry.ranks``, ``Outputs.carry``)
CARRY_ROWS = 4


def start_carry(P: int) -> np.ndarray:
    """The carry of a replay from the trace's start: every rank at 0, free, no burst yet."""
    c = np.zeros((CARRY_ROWS, P))
    c[3] = -1.0
    return c


def make_params(os0=0.0, osP=0.0, Os=0.0, or0=0.0, orP=0.0, Or=0.0, L=0.0, G=0.0, gap=0.0,
                S=math.inf, kshift=1.0, P=1.0, progress=PROGRESS_ASYNC, ou=0.0,
                Ou=0.0, o_hop=0.0, gamma=0.0) -> np.ndarray:
    """ou, Ou: rule ``unexpected_copy``'s o_u (ns) and O_u (ns/byte); both 0: off. o_hop: the
    library's own work per protocol hop (ns); the vector holds the hop's time
    ``protocol_hop(L, o_hop)``. gamma: rule ``reduction_combine``'s γ (ns/byte; 0: off), which
    the engine turns into ``Ops.after`` (the kernel does not read it)."""
    p = np.zeros(NPARAMS)
    p[:] = (os0, osP, Os, or0, orP, Or, L, G, gap, S, kshift, P, progress, ou, Ou,
            protocol_hop(L, o_hop), gamma)
    return p


class Ops(NamedTuple):
    """The operations, ordered by rank then program order (``Stream`` of ``replay.stream``)."""

    rank_off: np.ndarray   # rank r's operations are rank_off[r]:rank_off[r+1]
    kind: np.ndarray       # NOP, SEND, ... (int8)
    msg: np.ndarray        # its message (a collective instance for COLL; -1: none)
    burst: np.ndarray      # compute before the operation, ns (scaled by scale[reg + 1])
    reg: np.ndarray        # region code of the burst (-1: none)
    loc: np.ndarray        # measured mode: the operation's own (local) duration, ns;
                           # network mode: a POLL's period, ns (empty: no POLL)
    dep_lat: np.ndarray    # measured mode: its lag after the other side's post, ns
    coll_n: np.ndarray     # measured mode: members of each collective instance
    cost: np.ndarray       # network mode: the call's own software overhead, ns, paid before
                           # its rules apply (empty: none; ``NetworkModel.call_costs``)
    resume: np.ndarray     # network mode: rule resume_after_wait's table (``rules.resume_extra``;
                           # empty: off)
    after: np.ndarray      # network mode: time the rank computes once the operation is done,
                           # ns (rule reduction_combine; empty: none)


class Messages(NamedTuple):
    """Per message: its size and endpoints, the model's extra delay, synchronous mode, the
    earliest end of its send (rule ``ack_cells``), whether its receive was unexpected (rule
    ``unexpected_copy``, an output)."""

    nbytes: np.ndarray     # k, bytes (float)
    src: np.ndarray        # sending rank
    dst: np.ndarray        # receiving rank
    delay: np.ndarray      # extra time on the wire (contention models), ns
    sync: np.ndarray       # Ssend/Issend: completes only once the receive matched
    floor: np.ndarray      # rule ack_cells: a rendezvous send ends no earlier, ns (< 0: no
                           # floor; empty: the rule is off)
    unexp: np.ndarray      # rule unexpected_copy, written: True where the receive paid u(k)
                           # (empty: not recorded)
    no_queue: np.ndarray   # rule unexpected_copy: True where the message is never queued
                           # (a shared-flag collective's stand-in; empty: none)


class Outputs(NamedTuple):
    """What a replay writes. Per rank: end, compute, communication and waiting time; per
    message: send and receive post times; with ``record``, per operation its start (unless
    ``op_start`` is empty), end and what bound its end (``PRED_*``) and per collective its last
    entering operation; ``carry`` is read and written (``replay_kernel``)."""

    rank_end: np.ndarray
    rank_comp: np.ndarray
    rank_comm: np.ndarray
    rank_wait: np.ndarray
    m_sp: np.ndarray
    m_rp: np.ndarray
    op_start: np.ndarray
    op_end: np.ndarray
    pred: np.ndarray
    coll_last: np.ndarray
    carry: np.ndarray      # per rank (rows): start time, send and receive free, the end of its
                           # last burst (-1: none yet); in, and the same at its end
    #: rule unexpected_copy: receives that paid u(k) (-1: not counted); set by the engine
    unexpected: int = -1


class Carry(NamedTuple):
    """Where a replay starts: a segment of a streamed replay starts where the segment before
    ended (``replay.streamed``)."""

    ranks: np.ndarray     # CARRY_ROWS x P: each rank's time, when its sending and receiving
                          # are free, and when its last burst ended (-1: none yet)
    #: (messages, their send's post time, ns) of the messages sent before this replay (rule
    #: ``carried_message``), or None
    sent: tuple[np.ndarray, np.ndarray] | None = None


# ---- the loop -------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def replay_kernel(ops, msgs, out, scale, trail, prm, mode, record):
    """Replay once. Returns the number of ranks that could not finish (0 = success).

    ``ops`` (``Ops``) and ``msgs`` (``Messages``) are the inputs, ``out`` (``Outputs``) is
    written: rank_end/comp/comm/wait and m_sp/m_rp always; with ``record`` also
    op_start (unless empty)/op_end/pred per operation and coll_last per collective. ``scale``
    multiplies the
    bursts (index reg + 1; index 0 also scales ``trail``, each rank's time after its last
    operation); ``prm`` is ``make_params``'s vector; ``mode`` MODE_NETWORK or MODE_MEASURED.
    ``out.m_sp`` and ``out.m_rp`` come in at -1 (not posted yet), or a send's post time where a
    message was sent before this replay (rule ``carried_message``, ``replay.segments``).
    ``out.carry`` (CARRY_ROWS x P) is read first: per rank the time it starts at, when its
    sending and receiving are free and when its last burst ended (``start_carry`` for a whole
    trace; a segment of a streamed replay starts where the segment before ended,
    ``replay.streamed``); it is written at each rank's end (before its trail) with the same.
    ``ops.resume`` (network mode): each burst after the rank's first takes rule
    ``resume_after_wait``'s w(b, d) more, d the time since the rank's previous burst ended.
    ``ops.after`` (network mode): an operation, once done, takes that much longer (rule
    ``reduction_combine``: a reduction's member combining what the step received).
    """
    rank_off, kind, msg, burst, reg = ops.rank_off, ops.kind, ops.msg, ops.burst, ops.reg
    loc, dep_lat, coll_n, cost, resume = ops.loc, ops.dep_lat, ops.coll_n, ops.cost, ops.resume
    after = ops.after
    m_bytes, m_src, m_dst, m_delay, m_sync = msgs.nbytes, msgs.src, msgs.dst, msgs.delay, \
        msgs.sync
    m_floor, m_unexp, m_noq = msgs.floor, msgs.unexp, msgs.no_queue
    rank_end, rank_comp, rank_comm, rank_wait = out.rank_end, out.rank_comp, out.rank_comm, \
        out.rank_wait
    m_sp, m_rp = out.m_sp, out.m_rp
    op_start, op_end, pred, coll_last = out.op_start, out.op_end, out.pred, out.coll_last
    carry = out.carry
    P = len(rank_off) - 1
    os0 = prm[P_OS0] + prm[P_OSP] * prm[P_NPROC]
    Os = prm[P_OS]
    or0 = prm[P_OR0] + prm[P_ORP] * prm[P_NPROC]
    Or = prm[P_OR]
    L = prm[P_L]
    H = prm[P_HOP]
    G = prm[P_G]
    gap = prm[P_GAP]
    S = prm[P_S]
    kshift = prm[P_KSHIFT]
    measured = mode == MODE_MEASURED
    ou = prm[P_OU]
    Ouk = prm[P_OUK]
    has_u = (ou > 0.0 or Ouk > 0.0) and not measured
    has_floor = len(m_floor) > 0 and not measured
    has_cost = len(cost) > 0 and not measured
    has_resume = len(resume) > 0 and not measured
    has_after = len(after) > 0 and not measured
    last_burst = np.empty(P)                 # per rank: when its last burst ended (-1: none)
    # Progress in-call: a rendezvous handshake needs the receiver inside an MPI call, so the
    # replayed interval of every operation is kept (``first_in_mpi`` searches them), and a
    # sender whose receiver has not been replayed far enough waits in that receiver's list.
    in_call = prm[P_PROGRESS] == PROGRESS_IN_CALL and not measured
    # rule unexpected_copy with in-call progress looks for the receiver's calls too
    keep = in_call or has_u
    hs, he = op_start, op_end
    if not record:
        hs = np.empty(len(kind) if keep else 0)
        he = np.empty(len(kind) if keep else 0)
    elif keep and len(hs) < len(kind):
        hs = np.empty(len(kind))
    # the critical path reads the ends alone: without the starts, 8 bytes an operation of new
    # memory are never touched (1-2 ns a byte on a VM)
    put_start = len(hs) == len(kind)
    nm_h = len(m_sp) if in_call else 0
    m_h = np.full(nm_h, -1.0)                # handshake time per rendezvous message
    m_rpop = np.full(len(m_sp) if keep else 0, -1, np.int64)  # the op that posted its receive
    pw_msg = np.full(P, -1, np.int64)        # per sender: the handshake it waits for
    pw_rts = np.zeros(P)                     # ... that message's request arrival
    pw_next = np.full(P, -1, np.int64)
    pw_head = np.full(P, -1, np.int64)       # per receiver: the senders waiting for it
    pw_min = np.full(P, np.inf)              # ... the earliest request among them
    pw_t = 0.0

    ncoll = len(coll_n)
    coll_cnt = np.zeros(ncoll, np.int64)
    coll_max = np.zeros(ncoll)
    coll_head = np.full(ncoll, -1, np.int64)
    pc = np.empty(P, np.int64)
    t_of = np.zeros(P)
    start_of = np.zeros(P)
    phase = np.zeros(P, np.int8)
    txfree = np.zeros(P)
    rxfree = np.zeros(P)
    wait_on = np.full(P, -1, np.int64)
    next_waiter = np.full(P, -1, np.int64)
    stack = np.empty(P, np.int64)
    for r in range(P):
        pc[r] = rank_off[r]
        t_of[r] = carry[0, r]
        txfree[r] = carry[1, r]
        rxfree[r] = carry[2, r]
        last_burst[r] = carry[3, r]
        stack[r] = P - 1 - r
        rank_comp[r] = 0.0
        rank_comm[r] = 0.0
        rank_wait[r] = 0.0
    top = P

    while True:
        if top == 0:
            # Every unfinished rank waits. Senders waiting for a handshake: the one whose
            # request came first gets it at its arrival (its receiver is blocked inside a call
            # that cannot end before any waiting sender resumes, hence after that request).
            if in_call:
                top = resolve_stalled_handshake(pw_msg, pw_rts, pw_next, pw_head, pw_min,
                                                m_dst, m_h, stack, top)
            if top == 0:
                break
        top -= 1
        r = stack[top]
        i = pc[r]
        end = rank_off[r + 1]
        t = t_of[r]
        # The running rank's own state in locals (written back when it blocks or finishes):
        # numba cannot keep array elements in registers across the stores of the loop body.
        ph = phase[r]
        st_r = start_of[r]
        comp_r = rank_comp[r]
        comm_r = rank_comm[r]
        wait_r = rank_wait[r]
        tx_r = txfree[r]
        rx_r = rxfree[r]
        while i < end:
            k = kind[i]
            if ph == 0:
                b = burst[i] * scale[reg[i] + 1]
                if b > 0.0 or last_burst[r] < 0.0:
                    # a rank's first operation starts its clock of rule resume_after_wait
                    if has_resume and b > 0.0 and last_burst[r] >= 0.0:
                        b += resume_extra(resume, b, t - last_burst[r])
                    last_burst[r] = t + b
                t += b
                comp_r += b
                st_r = t
                if has_cost:
                    t += cost[i]
                ph = 1
            start = t
            blocked = -1
            pk = PRED_LOCAL
            waited = 0.0
            if k == SEND or k == ISEND:
                m = msg[i]
                kb = m_bytes[m]
                kg = wire_time(kb, kshift, G)
                osk = send_overhead(os0, Os, kb)
                if m_sp[m] < 0.0:
                    ts = t
                    if not measured:
                        ts = max(t, tx_r)
                        tx_r = next_send_slot(ts, gap, kg)
                    m_sp[m] = ts
                    d = m_dst[m]
                    if wait_on[d] == m:
                        wait_on[d] = -1
                        stack[top] = d
                        top += 1
                ts = m_sp[m]
                if measured:
                    if k == SEND and is_rendezvous(kb, S, m_sync[m]):
                        if m_rp[m] < 0.0:
                            blocked = m
                        else:
                            t, waited, pk = bound(start + loc[i], m_rp[m] + dep_lat[i],
                                                  PRED_RECV)
                    else:
                        t = start + loc[i]
                elif k == ISEND or not is_rendezvous(kb, S, m_sync[m]):
                    t = ts + osk
                elif m_rp[m] < 0.0:
                    blocked = m
                else:
                    rdy = m_rp[m]
                    if in_call:
                        pw_t = request_arrival(ts, os0, Os, kb, L, m_delay[m])
                        rdy = known_handshake(m, r, i, st_r, pw_t, m_rp, m_h, m_rpop, m_dst,
                                              hs, he, pc, phase, start_of, rank_off)
                        if rdy < 0.0:
                            blocked = -3
                    if blocked == -1:
                        t, waited, pk = bound(rendezvous_sender_done(ts + osk, L, H, kg),
                                              clear_to_send_done(rdy, H, kg), PRED_RECV)
                        if has_floor:
                            t, waited, pk = ack_floor(t, waited, pk, m_floor[m])
            elif k == IRECV or k == RECV:
                m = msg[i]
                if m_rp[m] < 0.0:
                    m_rp[m] = t
                    if keep:
                        m_rpop[m] = i
                    s = m_src[m]
                    if wait_on[s] == m:
                        wait_on[s] = -1
                        stack[top] = s
                        top += 1
                if k == IRECV:
                    if measured:
                        t = start + loc[i]
                elif m_sp[m] < 0.0:
                    blocked = m
            elif k == WSEND:
                m = msg[i]
                kb = m_bytes[m]
                if not is_rendezvous(kb, S, m_sync[m]):
                    if measured:
                        t = start + loc[i]
                elif m_rp[m] < 0.0:
                    blocked = m
                elif measured:
                    t, waited, pk = bound(start + loc[i], m_rp[m] + dep_lat[i], PRED_RECV)
                else:
                    kg = wire_time(kb, kshift, G)
                    sent = after_overhead(m_sp[m], os0, Os, kb)
                    rdy = m_rp[m]
                    if in_call:
                        pw_t = request_arrival(m_sp[m], os0, Os, kb, L, m_delay[m])
                        rdy = known_handshake(m, r, i, st_r, pw_t, m_rp, m_h, m_rpop, m_dst,
                                              hs, he, pc, phase, start_of, rank_off)
                        if rdy < 0.0:
                            blocked = -3
                    if blocked == -1:
                        t, waited, pk = bound(max(t, rendezvous_sender_done(sent, L, H, kg)),
                                              clear_to_send_done(rdy, H, kg), PRED_RECV)
                        if has_floor:
                            t, waited, pk = ack_floor(t, waited, pk, m_floor[m])
            elif k == WRECV:
                m = msg[i]
                if m_sp[m] < 0.0:
                    blocked = m
            elif k == PROBE or k == POLL:
                m = msg[i]
                if m_sp[m] < 0.0:
                    blocked = m
                elif measured:
                    t, waited, pk = bound(start + loc[i], m_sp[m] + dep_lat[i], PRED_SEND)
                else:
                    kb = m_bytes[m]
                    # the envelope: a rendezvous request right after the send's overhead,
                    # eager data after the transfer as well
                    de = envelope_arrival(after_overhead(m_sp[m], os0, Os, kb), L, m_delay[m])
                    if not is_rendezvous(kb, S, m_sync[m]):
                        de += wire_time(kb, kshift, G)
                    if k == POLL:   # (network mode only: loc holds its period)
                        de = poll_exit(start, de, loc[i])
                    t, waited, pk = bound(start, de, PRED_SEND)
            elif k == PSEND:
                # Rule lock_epoch: the bytes leave as an eager message's; the target's library
                # takes them on arrival and sends its reply (message m + 1) then
                m = msg[i]
                kb = m_bytes[m]
                kg = wire_time(kb, kshift, G)
                ts = t
                if not measured:
                    ts = max(t, tx_r)
                    tx_r = next_send_slot(ts, gap, kg)
                m_sp[m] = ts
                t = ts + send_overhead(os0, Os, kb)
                m_rp[m] = eager_arrival(t, L, kg, m_delay[m])
                m_sp[m + 1] = m_rp[m]
            elif k == PRECV:
                m = msg[i]
                kb = m_bytes[m]
                m_rp[m] = t
                de = passive_reply(m_sp[m], H, wire_time(kb, kshift, G), m_delay[m])
                tr, waited, pk = bound(max(t, rx_r), de, PRED_SEND)
                rx_r = tr + gap
                t = after_overhead(tr, or0, Or, kb)
            elif k == COLL or k == CPOST or k == CWAIT:
                # Rule nonblocking_meeting: a non-blocking collective enters at its post
                # (CPOST, which never waits) and meets the others at its completion (CWAIT),
                # as a blocking one (COLL) enters and meets in one call.
                c = msg[i]
                # Entry is counted once: phase 2 marks "entered, waiting for the others".
                if ph == 1 and k != CWAIT:
                    ph = 2
                    coll_cnt[c] += 1
                    if t > coll_max[c] or coll_cnt[c] == 1:
                        coll_max[c] = t
                        if record:
                            coll_last[c] = i
                    if coll_cnt[c] == coll_n[c]:
                        w = coll_head[c]
                        while w >= 0:
                            stack[top] = w
                            top += 1
                            w = next_waiter[w]
                        coll_head[c] = -1
                if k == CPOST:
                    t = start + loc[i]
                elif coll_cnt[c] < coll_n[c]:
                    next_waiter[r] = coll_head[c]
                    coll_head[c] = r
                    blocked = -2
                else:
                    t, waited, pk = bound(start + loc[i], coll_max[c] + dep_lat[i], PRED_COLL)
            else:  # NOP
                if measured:
                    t = start + loc[i]

            # Receive completion shared by RECV and WRECV.
            if blocked == -1 and (k == RECV or k == WRECV):
                m = msg[i]
                kb = m_bytes[m]
                if measured:
                    t, waited, pk = bound(start + loc[i], m_sp[m] + dep_lat[i], PRED_SEND)
                else:
                    kg = wire_time(kb, kshift, G)
                    sent = after_overhead(m_sp[m], os0, Os, kb)
                    le = max(t, rx_r)
                    if is_rendezvous(kb, S, m_sync[m]):
                        # Rendezvous: the data leaves once both sides are ready.
                        rdy = m_rp[m]
                        if in_call:
                            if m_h[m] < 0.0:
                                rts = request_arrival(m_sp[m], os0, Os, kb, L, m_delay[m])
                                # the receiver is this rank, inside this call
                                m_h[m] = known_handshake(m, r, i, st_r, rts, m_rp, m_h, m_rpop,
                                                         m_dst, hs, he, pc, phase, start_of,
                                                         rank_off)
                                s = m_src[m]
                                if pw_msg[s] == m:
                                    unlink_waiter(pw_head, pw_next, r, s)
                                    pw_msg[s] = -1
                                    stack[top] = s
                                    top += 1
                            rdy = m_h[m]
                        le = max(le, late_receiver_arrival(rdy, H, kg, m_delay[m]))
                        de = rendezvous_arrival(sent, L, H, kg, m_delay[m])
                    else:
                        de = eager_arrival(sent, L, kg, m_delay[m])
                    tr, waited, pk = bound(le, de, PRED_SEND)
                    rx_r = tr + gap
                    t = after_overhead(tr, or0, Or, kb)
                    if has_u and not is_rendezvous(kb, S, m_sync[m]) and not (
                            len(m_noq) > 0 and m_noq[m]):
                        seen = de
                        if in_call:
                            seen = -1.0
                            if m_rpop[m] >= 0:
                                seen = first_in_mpi(hs, he, rank_off[r], m_rpop[m], de)
                        tu = unexpected_copy(t, de, m_rp[m], seen, ou, Ouk, kb)
                        if tu > t and len(m_unexp) > 0:
                            m_unexp[m] = True
                        t = tu

            if blocked != -1:
                if blocked >= 0:
                    wait_on[r] = blocked
                elif blocked == -3:             # waits for its receiver to enter MPI
                    d = m_dst[msg[i]]
                    pw_msg[r] = msg[i]
                    pw_rts[r] = pw_t
                    pw_next[r] = pw_head[d]
                    pw_head[d] = r
                    pw_min[d] = min(pw_min[d], pw_t)
                if in_call and start >= pw_min[r]:
                    top = wake_waiters(r, start, pw_msg, pw_rts, pw_next, pw_head, pw_min,
                                       stack, top)
                pc[r] = i
                t_of[r] = start
                break
            if has_after:
                t += after[i]       # rule reduction_combine: inside the call, after its waits
            if record:
                pred[i] = pk
            if record or keep:
                if put_start:
                    hs[i] = st_r
                he[i] = t
                if in_call and t >= pw_min[r]:
                    top = wake_waiters(r, t, pw_msg, pw_rts, pw_next, pw_head, pw_min,
                                       stack, top)
            wait_r += waited
            comm_r += t - st_r - waited
            ph = 0
            i += 1
        phase[r] = ph
        start_of[r] = st_r
        rank_wait[r] = wait_r
        rank_comm[r] = comm_r
        txfree[r] = tx_r
        rxfree[r] = rx_r
        if i >= end:
            pc[r] = end
            carry[0, r] = t
            carry[1, r] = tx_r
            carry[2, r] = rx_r
            carry[3, r] = last_burst[r]
            b = trail[r] * scale[0]
            comp_r += b
            rank_end[r] = t + b
        rank_comp[r] = comp_r

    stuck = 0
    for r in range(P):
        if pc[r] < rank_off[r + 1]:
            stuck += 1
    return stuck
