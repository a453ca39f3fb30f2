"""The kernel's operation stream of a prepared trace, in one of two forms:

* ``expand=False`` (measured model): a collective is one COLL operation (all members meet);
* ``expand=True`` (network models): a collective becomes the point-to-point pattern of its
  algorithm (``replay.collectives``).

A non-blocking collective (``Iallreduce``...) is its blocking collective split over two rows:
its post row and the Wait*/Test* row that completes its request. Unexpanded, a member enters
at its post (CPOST) and meets the others at its completion (CWAIT). Expanded, the post row
carries the member's first step's posts (the sends and receives the library starts inside the
call) and a completion row the rest of its pattern (rule ``nonblocking_split``,
``replay.patterns``): its own, or the completion of a collective the rank posted after it on
the same communicator, if that comes first (rule ``nonblocking_in_order``,
``nonblocking_tails``).
Window fences and neighbourhood collectives have patterns of their own (``replay.patterns``).

Per row its operations (one per MPI row; two for a Sendrecv's halves, ``replay.layout``; a
collective's pattern steps when expanded), each carrying the row's region, the first one its
burst; then per message its size, endpoints and the operations that post it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hindsight import sortedsets
from hindsight import trace as tf
from hindsight.jit import njit
from hindsight.system import page_out
from replay import collectives as C
from replay import flags as F
from replay import patterns as P
from replay import kernel as K
from replay.instances import Instances, group_ids
from replay.layout import lay_out
from replay.matching import index_proto
from replay.patterns import nonblocking_tails
from replay.polling import POLL_CODE, apply_to_stream as apply_polls
from replay.rma_epochs import EpochOps, place_epoch_ops
from replay.rows import Messages, Rows
from replay.selection import SELECTION, SHARED_FLAG_COLLECTIVES, choose, total_bytes

SYNC_SEND_OPS = ("Ssend", "Issend")
_SYNC_OF = tf.op_lut(SYNC_SEND_OPS)  # per op code: a synchronous-mode send

#: Classes of the program's own calls that a model may charge a software overhead of their own
#: (``NetworkModel.call_costs``; a collective's steps and the sends and receives, which pay
#: o_s(k) and o_r(k), are CALL_NONE): posting an ``Irecv``; a ``Wait``/``Test`` row completing a
#: send; a ``Probe``; any other traced call that moves no message (``Iprobe``, a ``Test`` or
#: ``Wait`` that completed nothing, the unmatched rows of a partial trace).
CALL_NONE, CALL_IRECV, CALL_WAIT, CALL_PROBE, CALL_OTHER = range(5)
_COMPLETION_ROW = tf.op_lut(tuple(tf.COMPLETION_OPS))
_COLLECTIVE_ROW = tf.op_lut(tuple(tf.COLLECTIVE_OPS | tf.COMM_OPS))
_SENDRECV_SEND = tf.OP_CODE["Sendrecv_send"]
_SENDRECV_RECV = tf.OP_CODE["Sendrecv_recv"]


def call_classes(st: Stream, row_op: np.ndarray) -> np.ndarray:
    """Per operation of ``st`` its CALL_* class (int8); ``row_op`` is the op code of each
    trace row (``Rows.op``)."""
    cls = np.zeros(st.nops, np.int8)
    has_row = st.op_row >= 0
    op = np.where(has_row, row_op[np.where(has_row, st.op_row, 0)], 0)
    own = has_row & ~_COLLECTIVE_ROW[op]
    if len(st.coll_done_rows):  # a non-blocking collective's steps, not the program's calls
        own &= ~np.isin(st.op_row, st.coll_done_rows)
    cls[own & (st.kind == K.IRECV) & (op != _SENDRECV_SEND)] = CALL_IRECV   # (not a Sendrecv's)
    cls[own & (st.kind == K.WSEND) & _COMPLETION_ROW[op]] = CALL_WAIT
    cls[own & (st.kind == K.PROBE)] = CALL_PROBE
    cls[own & (st.kind == K.NOP) & (op != POLL_CODE)] = CALL_OTHER   # a poll run: many calls
    _sendrecv_one_call(cls, st, op, has_row, row_op)
    return cls


def _sendrecv_one_call(cls: np.ndarray, st: Stream, op: np.ndarray, has_row: np.ndarray,
                       row_op: np.ndarray) -> None:
    """Rule sendrecv_one_call: a ``Sendrecv`` is one call, its halves two rows (send half, then
    receive half). A half with no message (``MPI_PROC_NULL``) costs nothing of its own where the
    other half has one, whose o_s or o_r is the call's; where neither has, the call costs o_call
    once (the send half's NOP), not once per half."""
    nop = (cls == CALL_OTHER) & ((op == _SENDRECV_SEND) | (op == _SENDRECV_RECV))
    if not nop.any():
        return
    moves = np.zeros(len(row_op) + 1, np.bool_)  # per row: one of its operations moves a message
    moves[st.op_row[has_row & (st.kind != K.NOP)]] = True
    row = st.op_row[nop]
    send_half = op[nop] == _SENDRECV_SEND
    other = np.where(send_half, row + 1, np.maximum(row - 1, 0))
    # (a half whose other half is not beside it, in a trace cut between them, is its own call)
    paired = np.append(row_op, -1)[other] == np.where(send_half, _SENDRECV_RECV, _SENDRECV_SEND)
    keep = ~paired | (send_half & ~moves[other])    # the call's one o_call
    cls[np.flatnonzero(nop)[~keep]] = CALL_NONE


@dataclass
class Stream:
    """One kernel input form. Operation arrays are ordered by rank, then program order."""

    rank_off: np.ndarray       # rank r's operations are rank_off[r]:rank_off[r+1]
    kind: np.ndarray           # kernel kind of each operation
    msg: np.ndarray            # its message (unexpanded COLL: its collective instance; -1 none)
    burst: np.ndarray          # raw (wall) burst before the operation, ns
    burst_cpu: np.ndarray      # the same scaled by the enclosing region's CPU/wall ratio
    reg: np.ndarray            # region code of the burst (-1 = none)
    op_row: np.ndarray         # trace row of each operation
    m_bytes: np.ndarray        # per message: bytes (float)
    m_src: np.ndarray          # sending rank
    m_dst: np.ndarray          # receiving rank
    m_send_op: np.ndarray      # the operation that posts the send (-1: not recorded)
    m_recv_op: np.ndarray      # the operation that posts the receive (-1: not recorded)
    loc: np.ndarray            # measured form only (else empty): local cost per operation
    dep_lat: np.ndarray        # measured form only: lag after the other side's post
    coll_n: np.ndarray         # measured form only: members per collective instance
    algorithms: dict[str, str] = field(default_factory=dict)
    #: expanded form: per collective, the instances each algorithm ran (what MPICH's selection
    #: picked, where ``algorithms`` names it)
    selected: dict[str, dict[str, int]] = field(default_factory=dict)
    m_sync: np.ndarray | None = None   # per message: synchronous send (Ssend/Issend); None = none
    #: the rows that complete non-blocking collectives (expanded: they carry pattern steps)
    coll_done_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    #: per message: of the pattern of a collective MPICH runs on shared flags within a node
    #: (``selection.SHARED_FLAG_COLLECTIVES`` under its own selection); None = none
    m_shared_flag: np.ndarray | None = None
    #: expanded form: the operations rule shared_flag_meeting put in place of patterns
    meetings: F.Meetings | None = None
    #: expanded form: the operations after which a reduction's member combines what it
    #: received (rule reduction_combine, ``patterns.combine_steps``) and the bytes each
    #: combines; None = none
    combine_op: np.ndarray | None = None
    combine_bytes: np.ndarray | None = None
    #: per trace message (``Prepared.msgs``' numbering), its number in this stream, which
    #: numbers messages by send time (``replay.numbering``); None: the same numbers
    m_trace: np.ndarray | None = None

    @property
    def nops(self) -> int:
        return len(self.kind)

    def trace_ids(self, m: np.ndarray) -> np.ndarray:
        """This stream's numbers of the trace messages ``m`` (``Prepared.msgs``' numbers)."""
        return m if self.m_trace is None else self.m_trace[m]

    @property
    def nmsg(self) -> int:
        return len(self.m_bytes)


def build_stream(rows: Rows, msgs: Messages, coll: Instances, comm_members: dict[int, list[int]],
                 nranks: int, expand: bool, algos: dict[str, str],
                 neighbours: dict | None = None, rma: EpochOps | None = None,
                 flag_inst: np.ndarray | None = None) -> Stream:
    """The stream of a prepared trace's rows, messages and collective instances; ``algos``
    names each collective's algorithm (used when ``expand``); ``neighbours`` is the manifest's
    (each topology communicator's out-neighbours per rank); ``rma`` the operations of the
    one-sided lock and PSCW epochs (``replay.rma_epochs``; used when ``expand``: the measured
    model keeps those calls' measured times); ``flag_inst`` (expanded form: per instance, or
    None) the instances rule shared_flag_meeting prices (``replay.flags``): one meeting
    operation per member instead of a pattern."""
    n = len(rows.rank)
    ninst = len(coll.comm)
    M0 = len(msgs.bytes)
    # operations per row: one per MPI row, two for a Sendrecv_recv (its send half completes
    # there), a collective's pattern steps when expanded (``per_row``, empty when none)
    per_row = np.zeros(0, np.int64)
    pats: dict[int, tuple[C.Pattern, list[int]] | None] = {}
    heads: dict[int, np.ndarray] = {}   # per pattern: each member's operations at the post
    # per collective row: a non-blocking collective's post whose request some row completes
    completed_apart = (coll.done != coll.rows) & (coll.done >= 0)
    inst_pat = np.full(ninst, -1, np.int64)
    selected: dict[str, dict[str, int]] = {}
    flagged: set[int] = set()   # patterns of SHARED_FLAG_COLLECTIVES
    if expand and ninst:
        # one pattern per (op, size, root, communicator, algorithm); None: no messages
        # (COMM_SELF, size 1)
        root = np.where(coll.root >= 0, coll.root, -1)
        algo_names, inst_algo = _instance_algorithms(coll, rows.nbytes, algos)
        if flag_inst is not None and flag_inst.any():
            inst_algo = np.where(flag_inst, len(algo_names), inst_algo)
            algo_names = algo_names + [F.ALGORITHM]
        key, cnt = np.unique(coll.op.astype(np.int64) * len(algo_names) + inst_algo,
                             return_counts=True)
        for k, c in zip(key.tolist(), cnt.tolist()):
            op = tf.OPS[k // len(algo_names)]
            selected.setdefault(op, {})[algo_names[k % len(algo_names)]] = c
        sig, epochs = P.epoch_signatures(coll)
        gid = group_ids(coll.op, coll.size, root + 1, group_ids(coll.comm), inst_algo,
                        sig)
        _, first_inst = np.unique(gid, return_index=True)
        guniq = zip(coll.op[first_inst].tolist(), coll.size[first_inst].tolist(),
                    root[first_inst].tolist(), coll.comm[first_inst].tolist(),
                    inst_algo[first_inst].tolist(), sig[first_inst].tolist())
        for g, (opc, size, rootw, cid, ac, sg) in enumerate(guniq):
            if cid == tf.COMM_SELF_ID or size <= 1 or algo_names[ac] == F.ALGORITHM:
                pats[g] = None
                continue
            mem = comm_members[cid]
            root_local = mem.index(rootw) if rootw in mem else 0
            op = tf.OPS[opc]
            if sg:      # a window fence that carries its epoch's transfers
                pat = P.fence_pattern(epochs[sg - 1], mem, algo_names[ac])
            elif op in tf.NEIGHBOR_OPS:
                pat = P.neighbour_pattern(tf.BLOCKING_OF.get(op, op), cid, mem, neighbours)
            else:
                pat = C.pattern(tf.BLOCKING_OF.get(op, op), algo_names[ac], int(size),
                                root_local)
            heads[g] = P.nonblocking_split(pat) if op in tf.BLOCKING_OF else \
                np.zeros(int(size), np.int64)
            pats[g] = (pat, mem)
            if op in SHARED_FLAG_COLLECTIVES and algos.get(op) == SELECTION and not sg:
                flagged.add(g)
        inst_pat = gid
        # per collective row: ops of its member in the pattern (at least one, to carry the
        # burst); a non-blocking one's split over its post and completion rows
        inst_of = coll.of_rows()
        per = np.ones(len(coll.rows), np.int64)
        tail = np.zeros(len(coll.rows), np.int64)   # a non-blocking member's steps after its post
        for g, pm in pats.items():
            if pm is None:
                continue
            sel = inst_pat[inst_of] == g
            nops = np.diff(pm[0].op_off)[coll.local[sel]]
            head = heads[g][coll.local[sel]]
            split = head > 0
            per[sel] = np.maximum(np.where(split, head, nops), 1)
            tail[sel] = np.where(split, nops - head, 0)
        per_row = np.zeros(n, np.int64)
        per_row[coll.rows] = per
        tail_row, tail_off = nonblocking_tails(coll, rows.rank, tail)
        # a completion row carries the tails placed there (at least one operation: its burst)
        per_row[coll.done[completed_apart]] = 1
        placed = tail_row >= 0
        per_row[tail_row[placed]] = np.maximum(
            np.bincount(tail_row[placed], tail[placed], minlength=n)[tail_row[placed]], 1
        ).astype(np.int64)
    with_epochs = epoch_messages(expand, rma) > 0
    if with_epochs:    # the closing calls' operations (rows apart from the collectives')
        if not len(per_row):
            per_row = np.zeros(n, np.int64)
        carried = sortedsets.unique(rma.row)
        per_row[carried] = np.bincount(rma.row)[carried]
    cpu_shared = bool(np.all(rows.ratio == 1.0))  # no CPU samples below 100 %: one array
    if cpu_shared:      # (the pass below never reads the ratios then: their pages go back now)
        page_out(rows.ratio)
    # Message and row numbers as int32 when they fit: the operation arrays are most of a
    # stream's memory, and writing them most of its build time.
    nmsg = M0
    if expand and ninst:
        per_pat = np.bincount(inst_pat, minlength=len(pats))
        nmsg += sum(int(per_pat[g]) * len(pm[0].src) for g, pm in pats.items() if pm is not None)
    E0 = nmsg        # the epochs' messages come last
    if with_epochs:
        nmsg += len(rma.m_bytes)
    off, kind, msg, op_row, burst, burst_cpu, reg, rank_off = lay_out(
        rows, per_row, nranks, cpu_shared,
        index_proto(max(nmsg, ninst)),  # unexpanded, a COLL operation's msg is its instance
        index_proto(n))
    first = off[:-1]
    # per message: the trace's messages, then each pattern's instances x steps
    m_bytes = np.empty(nmsg)
    m_src = np.empty(nmsg, np.int32)  # ranks (at most tf.MAX_RANKS)
    m_dst = np.empty(nmsg, np.int32)
    m_bytes[:M0] = msgs.bytes
    m_src[:M0] = msgs.src
    m_dst[:M0] = msgs.dst
    # per message, the operations that post its send and its receive, and whether the send
    # is synchronous-mode: a trace message's are its rows' (``_trace_message_ops``: the SEND or
    # ISEND, the RECV or IRECV, a Sendrecv's by rule sendrecv_posts_receive_first); a
    # collective's are filled with its pattern (never synchronous); -1 for a member a partial
    # trace lacks
    op_proto = index_proto(len(kind))
    m_send_op = np.full(nmsg, -1, op_proto.dtype)
    m_recv_op = np.full(nmsg, -1, op_proto.dtype)
    m_sync = np.zeros(nmsg, bool)
    _trace_message_ops(m_send_op, m_recv_op, m_sync, off, msgs.send_row, msgs.recv_row,
                       rows.op, _SYNC_OF, kind)
    coll_n = np.zeros(0, np.int64)
    m_shared_flag = None
    combine_op: list[np.ndarray] = []
    combine_bytes: list[np.ndarray] = []
    if ninst and not expand:
        # a blocking collective is one COLL; a non-blocking one enters at its post (CPOST) and
        # meets the others where its request completes (CWAIT)
        inst = coll.of_rows()
        kind[first[coll.rows]] = np.where(coll.done != coll.rows, K.CPOST, K.COLL)
        msg[first[coll.rows]] = inst
        kind[first[coll.done[completed_apart]]] = K.CWAIT
        msg[first[coll.done[completed_apart]]] = inst[completed_apart]
        coll_n = np.diff(coll.off).astype(np.int64)
    elif ninst:
        # per member, its first operation after the post's: a blocking collective's row's first,
        # a non-blocking one's tail where rule nonblocking_in_order placed it (-1: nowhere)
        tail_at = np.where(coll.done == coll.rows, first[coll.rows],
                           np.where(tail_row >= 0, first[np.maximum(tail_row, 0)] + tail_off, -1))
        base = M0
        for g, pm in pats.items():
            if pm is None:
                continue
            pat, mem = pm
            insts = np.flatnonzero(inst_pat == g)
            Mp = len(pat.src)
            ni = len(insts)
            mem_arr = np.asarray(mem, np.int32)
            by_local = _rows_by_local(coll, coll.rows, insts, len(mem))
            tail_local = _rows_by_local(coll, tail_at, insts, len(mem))
            block = slice(base, base + ni * Mp)
            if g in flagged:
                if m_shared_flag is None:
                    m_shared_flag = np.zeros(nmsg, bool)
                m_shared_flag[block] = True
            # (contiguous whatever the pattern holds: one argument type for the kernel)
            _pattern_bytes(m_bytes, base, by_local, np.ascontiguousarray(pat.owner, np.int64),
                           np.ascontiguousarray(pat.mult, np.float64), rows.nbytes)
            if np.any(pat.combine):
                at, nb = P.combine_ops(pat, first, by_local, tail_local, heads[g],
                                       m_bytes[block].reshape(ni, Mp))
                combine_op.append(at)
                combine_bytes.append(nb)
            m_src[block].reshape(ni, Mp)[:] = mem_arr[pat.src][None, :]
            m_dst[block].reshape(ni, Mp)[:] = mem_arr[pat.dst][None, :]
            poff = np.asarray(pat.op_off, np.int64)
            pkind = np.asarray(pat.op_kind, np.int8)
            pmsg = np.asarray(pat.op_msg, np.int64)
            head = heads[g]
            _fill_pattern(kind, msg, first, by_local, tail_local, head, poff, pkind, pmsg,
                          base, Mp)
            _pattern_ops(m_send_op, m_recv_op, first, by_local, tail_local, head, base,
                         *_message_steps(poff, pkind, pmsg, Mp))
            base += ni * Mp
        assert base == E0  # the messages counted before the layout are all written
    if with_epochs:
        place_epoch_ops(rma, first, E0, kind, msg, m_bytes, m_src, m_dst, m_send_op,
                        m_recv_op)

    meetings = None
    if expand and flag_inst is not None and flag_inst.any():
        coll_n = np.zeros(ninst, np.int64)
        meetings = F.lay_meetings(coll, flag_inst, comm_members, rows.nbytes, first, kind, msg,
                                  coll_n)
    loc = np.zeros(0)
    dep_lat = np.zeros(0)
    if not expand:
        loc, dep_lat = _measured_costs(rows, msgs, kind, msg, op_row, first, coll_n)
    elif len(rows.poll_row):
        # rule poll_wait: a run of polls waits for its message (network form's loc: periods)
        loc = apply_polls(kind, msg, burst, burst_cpu, first, rows)
    return Stream(rank_off, kind, msg, burst, burst_cpu, reg, op_row, m_bytes, m_src, m_dst,
                  m_send_op, m_recv_op, loc, dep_lat, coll_n, dict(algos) if expand else {},
                  selected, m_sync, sortedsets.unique(coll.done[completed_apart]).astype(np.int64),
                  m_shared_flag, meetings,
                  np.concatenate(combine_op) if combine_op else None,
                  np.concatenate(combine_bytes) if combine_bytes else None)


def epoch_messages(expand: bool, rma: EpochOps | None) -> int:
    """How many messages of the one-sided epochs a stream has (its last ones)."""
    return len(rma.m_bytes) if expand and rma is not None and len(rma.row) > 0 else 0


def _instance_algorithms(coll: Instances, nbytes: np.ndarray,
                         algos: dict[str, str]) -> tuple[list[str], np.ndarray]:
    """The algorithm of each collective instance, as (names, index into names per instance):
    ``algos[op]`` (else the default), and where that is MPICH's selection, what it picks for
    the instance's communicator size and the largest block a member recorded (and their sum,
    ``replay.selection.total_bytes``)."""
    ninst = len(coll.comm)
    # a non-blocking collective runs its blocking collective's algorithms (replay.collectives)
    blocking = {opc: tf.BLOCKING_OF.get(tf.OPS[opc], tf.OPS[opc])
                for opc in sortedsets.unique(coll.op).tolist()}
    # a neighbourhood collective has one pattern, its topology's (_neighbour_pattern)
    per_op = {opc: P.NEIGHBOURS if op in tf.NEIGHBOR_OPS
              else algos.get(op, C.DEFAULT_ALGORITHMS[op]) for opc, op in blocking.items()}
    chosen = np.empty(ninst, object)
    for opc, a in per_op.items():
        chosen[coll.op == opc] = a
    selected = np.flatnonzero(chosen == SELECTION)
    if len(selected):
        blocks = np.maximum(nbytes[coll.rows], 0).astype(np.float64)
        starts = coll.off[:-1]
        big = np.maximum.reduceat(blocks, starts)[selected]
        tot = np.add.reduceat(blocks, starts)[selected]
        keys = np.stack([coll.op[selected].astype(np.float64),
                         coll.size[selected].astype(np.float64), big, tot], axis=1)
        uniq, inv = np.unique(keys, axis=0, return_inverse=True)
        picks = []
        for opc, size, b, t in uniq.tolist():
            op = blocking[int(opc)]
            picks.append(choose(op, int(size), b, total_bytes(op, int(size), b, t)))
        chosen[selected] = np.asarray(picks, object)[inv.reshape(-1)]
    names, codes = np.unique(chosen.astype(str), return_inverse=True)
    return names.tolist(), codes.reshape(-1).astype(np.int64)


def _rows_by_local(coll: Instances, rows: np.ndarray, insts: np.ndarray,
                   nmem: int) -> np.ndarray:
    """``rows`` (one value per row of ``coll.rows``: those rows, or their tails' first
    operations) of the instances ``insts`` by local rank, ``[x, q]`` (-1: a member a partial
    trace did not record)."""
    ni = len(insts)
    by_local = np.full((ni, nmem), -1, np.int64)
    offs = coll.off
    if np.all(offs[insts + 1] - offs[insts] == nmem):  # every member recorded
        pos = offs[insts][:, None] + np.arange(nmem)[None, :]
        by_local[np.arange(ni)[:, None], coll.local[pos]] = rows[pos]
    else:  # a partial trace: some instances lack members
        for q_i, i in enumerate(insts.tolist()):
            rs = rows[offs[i]:offs[i + 1]]
            by_local[q_i, coll.local[offs[i]:offs[i + 1]]] = rs
    return by_local


def _measured_costs(rows: Rows, msgs: Messages, kind: np.ndarray, msg: np.ndarray,
                    op_row: np.ndarray, first: np.ndarray,
                    coll_n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Local cost and dependency lag per operation for the measured model (see its docstring)."""
    ts, te = rows.t_start.astype(float), rows.t_end.astype(float)
    d = te[op_row] - ts[op_row]
    E = te[op_row]
    is_first = np.zeros(len(kind), bool)
    is_first[first[first < len(kind)]] = True
    cont = rows.cont[op_row] | ~is_first
    d = np.where(cont, 0.0, d)
    # A Sendrecv is one call over two rows: its duration belongs to the receive half (which can
    # wait), the send half only posts.
    opr = rows.op[op_row]
    d[opr == tf.OP_CODE["Sendrecv_send"]] = 0.0
    srr = (opr == tf.OP_CODE["Sendrecv_recv"]) & is_first
    d[srr] = (te - ts)[op_row[srr]]
    dep_lat = np.full(len(kind), -np.inf)
    sp_meas = ts[msgs.send_row]
    rp_meas = ts[msgs.recv_row]
    rc = (kind == K.RECV) | (kind == K.WRECV) | (kind == K.PROBE)
    dep_lat[rc] = E[rc] - sp_meas[msg[rc]]
    sc = (kind == K.SEND) | (kind == K.WSEND)
    dep_lat[sc] = E[sc] - rp_meas[msg[sc]]
    enters = (kind == K.COLL) | (kind == K.CPOST)
    cc = (kind == K.COLL) | (kind == K.CWAIT)   # the operations that wait for the others
    if cc.any():
        ninst = len(coll_n)
        mx = np.full(ninst, -np.inf)
        np.maximum.at(mx, msg[enters], ts[op_row[enters]])
        dep_lat[cc] = E[cc] - mx[msg[cc]]
    loc = d.copy()
    dep = rc | cc
    loc[dep] = np.minimum(d[dep], np.maximum(dep_lat[dep], 0.0))
    # Sends keep their duration unless rendezvous-coupled (decided in the kernel by S); then
    # the local part is what remains after the receiver was ready.
    return loc, dep_lat


@njit(cache=True)
def _trace_message_ops(send_op, recv_op, sync, off, send_row, recv_row, op, sync_of, kind):
    """For the trace's messages (the first ``len(send_row)``): the operations that post the
    send and the receive, their rows' first operations (``off``: each row's, and the total;
    -1 for a row without operations, a streamed segment's stand-in; a Sendrecv laid out by
    rule sendrecv_posts_receive_first posts its send with its send row's second operation and
    its receive with that row's first), and whether the send is synchronous-mode (``sync_of``
    by op code; one pass, where NumPy's gathers first widened the int32 row numbers)."""
    for m in range(len(send_row)):
        s = send_row[m]
        so = off[s] if off[s + 1] > off[s] else -1
        send_op[m] = so + 1 if so >= 0 and kind[so] == K.IRECV else so
        r = recv_row[m]
        ro = off[r] if off[r + 1] > off[r] else -1
        recv_op[m] = off[r - 1] if ro >= 0 and kind[ro] == K.WRECV else ro
        o = op[s]
        sync[m] = sync_of[o if o >= 0 else len(sync_of) - 1]


@njit(cache=True, inline="always")
def _step_position(first, post_row, tail_at, head, j):
    """Rule ``nonblocking_split``: where a member's ``j``-th pattern operation lies: the
    ``head`` first ones from its post row's first operation on, the others from operation
    ``tail_at`` on (in a completion row, ``nonblocking_tails``; -1: nowhere, the row was not
    recorded). A blocking collective has head 0 and its own row's first operation as
    ``tail_at``."""
    if j < head:
        return first[post_row] + j if post_row >= 0 else -1
    return tail_at + j - head if tail_at >= 0 else -1


@njit(cache=True)
def _fill_pattern(kind, msg, first, by_local, tail_local, head, poff, pkind, pmsg, base, Mp):
    """The operations of a collective's pattern for each of its instances: member q of instance
    x (its row ``by_local[x, q]``, its tail from operation ``tail_local[x, q]`` on) gets the
    pattern's steps
    ``poff[q]..poff[q+1]`` (placed by ``_step_position``), their messages numbered
    ``base + x·Mp + pmsg``. A member without steps keeps its single NOP; one a partial trace
    did not record (row -1) has no operations to fill.

    Member by member: a member's instances are its rank's rows in order, so the writes walk
    each rank's operations forward (instance by instance, they jumped between ranks: 20 ms
    against 12 on an 8-rank trace with 336 k Allreduce rows)."""
    ni, nmem = by_local.shape
    for q in range(nmem):
        for x in range(ni):
            post_row = by_local[x, q]
            if post_row < 0:
                continue
            tail_at = tail_local[x, q]
            for j in range(poff[q], poff[q + 1]):
                at = _step_position(first, post_row, tail_at, head[q], j - poff[q])
                if at >= 0:
                    kind[at] = pkind[j]
                    msg[at] = base + x * Mp + pmsg[j]


@njit(cache=True)
def _pattern_ops(send_op, recv_op, first, by_local, tail_local, head, base, s_member, s_step,
                 r_member, r_step):
    """For each instance's messages of a pattern, the operations that post the send and the
    receive: message j is sent by member ``s_member[j]`` at its step ``s_step[j]`` and
    received by ``r_member[j]`` at ``r_step[j]`` (placed by ``_step_position``; -1 for a
    member a partial trace lacks).

    Instance by instance, so the writes walk the message arrays forward (member by member
    they jumped by a pattern's length at each write)."""
    ni = by_local.shape[0]
    Mp = len(s_member)
    for x in range(ni):
        for j in range(Mp):
            m = base + x * Mp + j
            s, r = s_member[j], r_member[j]
            rs = by_local[x, s]
            rr = by_local[x, r]
            send_op[m] = _step_position(first, rs, tail_local[x, s], head[s], s_step[j]) \
                if rs >= 0 else -1
            recv_op[m] = _step_position(first, rr, tail_local[x, r], head[r], r_step[j]) \
                if rr >= 0 else -1


@njit(cache=True)
def _pattern_bytes(m_bytes, base, by_local, owner, mult, nbytes):
    """Bytes of a pattern's messages for each of its instances: message j of instance x
    carries ``mult[j]`` times the bytes of its owner's row (``by_local[x, owner[j]]``; 0 for
    a member a partial trace did not record), or ``mult[j]`` bytes where its owner is -1."""
    ni = by_local.shape[0]
    Mp = len(owner)
    for x in range(ni):
        for j in range(Mp):
            if owner[j] < 0:
                m_bytes[base + x * Mp + j] = mult[j]
                continue
            r = by_local[x, owner[j]]
            nb = float(max(nbytes[r], 0)) if r >= 0 else 0.0
            m_bytes[base + x * Mp + j] = mult[j] * nb


def _message_steps(poff: np.ndarray, pkind: np.ndarray, pmsg: np.ndarray,
                   Mp: int) -> tuple[np.ndarray, ...]:
    """Per message of a pattern: the member that sends it and the step (counted within that
    member's steps) that does, then the same for the receive."""
    member = np.repeat(np.arange(len(poff) - 1), np.diff(poff))
    step = np.arange(len(pkind)) - poff[member]
    out = []
    for kinds in ((K.SEND, K.ISEND), (K.RECV, K.IRECV)):
        sel = np.isin(pkind, kinds)
        who = np.zeros(Mp, np.int64)
        at = np.zeros(Mp, np.int64)
        who[pmsg[sel]] = member[sel]
        at[pmsg[sel]] = step[sel]
        out += [who, at]
    return tuple(out)
