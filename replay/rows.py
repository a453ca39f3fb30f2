"""The trace's rows and messages as replay needs them: one compiled pass over the rows gives
each row's kernel kind, the message it carries, whether it continues the call before it, and
the compute burst before it; the enclosing regions give each burst a region and a CPU/wall
ratio."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from hindsight import trace as tf
from hindsight.jit import njit
from replay import kernel as K
from replay.matching import MessageMatch, index_proto
from replay.polling import IPROBE_CODE, POLL_CODE, poll_runs


@dataclass
class Rows:
    """Per trace row, in (rank, seq) order. ``rows["kind"]`` reads a field by name as well."""

    rank: np.ndarray
    seq: np.ndarray
    op: np.ndarray       # code into hindsight.trace.OPS (0: a region row, -1: unknown op)
    t_start: np.ndarray  # ns, the trace's clock
    t_end: np.ndarray
    region: np.ndarray   # region code of the burst before the row (-1: none)
    cont: np.ndarray     # the row continues the call of the row before (same rank and times)
    kind: np.ndarray     # kernel kind (replay.kernel NOP, SEND, ...)
    msg: np.ndarray      # the message the row sends, receives or completes (-1: none)
    burst: np.ndarray    # ns of computation before the row, since the rank's previous MPI rows
    ratio: np.ndarray    # CPU/wall ratio of that burst's region (float32; 1: unknown)
    coll: np.ndarray     # collective instance of the row (-1: none)
    nbytes: np.ndarray   # the bytes the row recorded (a collective's block size)
    # the runs of unsuccessful polls (``replay.polling.poll_runs``), per Poll row: its row,
    # the row of the call that ended it, the message it waited for (-1: none), its period (ns)
    poll_row: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    poll_end: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    poll_msg: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    poll_period: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def __getitem__(self, name: str) -> np.ndarray:
        return getattr(self, name)


@dataclass
class Messages:
    """Per matched point-to-point message, in send order (``MessageMatch``, rows as above)."""

    bytes: np.ndarray      # size sent
    src: np.ndarray        # sending rank
    dst: np.ndarray        # receiving rank
    send_row: np.ndarray   # the send (or Isend post) row
    recv_row: np.ndarray   # the receive (or Irecv post) row
    send_done: np.ndarray  # the row that completes the send (-1: never)
    recv_done: np.ndarray  # the row that completes the receive (-1: never)

    def __getitem__(self, name: str) -> np.ndarray:
        return getattr(self, name)

    @classmethod
    def of(cls, match: MessageMatch) -> Messages:
        """As matching made them (no conversion copies): the stream converts bytes to float and
        keeps ranks int32 as it copies them."""
        return cls(bytes=match.nbytes, src=match.src, dst=match.dst, send_row=match.send_row,
                   recv_row=match.recv_row, send_done=match.send_done_row,
                   recv_done=match.recv_done_row)


class KindTables(NamedTuple):
    """Per op code (index len(OPS) stands for -1, an unknown op), what the row pass needs."""

    kind: np.ndarray          # kernel kind of a row that carries a matched message
    coll: np.ndarray          # a collective (or communicator creation)
    one_call: np.ndarray      # consecutive rows with the same times are one call: Wait*, Test*
                              # (a row per request) and Win_post, Win_start (per group member)
    sendrecv_send: np.int64   # the op codes of a Sendrecv's two halves, and of Probe
    sendrecv_recv: np.int64
    probe: np.int64


def _kind_tables() -> KindTables:
    size = len(tf.OPS) + 1
    kind = np.zeros(size, np.int8)
    for names, k in ((("Send", "Ssend", "Bsend", "Rsend"), K.SEND),
                     (tuple(tf.NONBLOCKING_SEND_OPS) + ("Sendrecv_send",), K.ISEND),
                     (tuple(tf.BLOCKING_RECV_OPS), K.RECV), (("Irecv",), K.IRECV)):
        kind[[tf.OP_CODE[x] for x in names]] = k
    coll = np.zeros(size, bool)
    coll[[tf.OP_CODE[x] for x in tf.COLLECTIVE_OPS | tf.COMM_OPS]] = True
    compl = np.zeros(size, bool)
    compl[[tf.OP_CODE[x] for x in tf.COMPLETION_OPS | {"Win_post", "Win_start"}]] = True
    return KindTables(kind, coll, compl, np.int64(tf.OP_CODE["Sendrecv_send"]),
                      np.int64(tf.OP_CODE["Sendrecv_recv"]), np.int64(tf.OP_CODE["Probe"]))


KIND_TABLES = _kind_tables()


def trace_rows(cols: dict[str, np.ndarray], peer: np.ndarray, tag: np.ndarray,
               region_names: list[str], match: MessageMatch, nranks: int,
               t0: int, since: np.ndarray | None = None) -> tuple[Rows, np.ndarray]:
    """The ``Rows`` of the trace columns ``cols`` (in (rank, seq) order; ``peer`` and ``tag``
    taken out of them, only the probes need them) and each rank's trail: the time from its
    last MPI row to its last event (``t0``: the trace's first event). ``since`` (per rank, ns)
    is where each rank's first burst begins instead of ``t0``: the end of its rows before these
    (a segment of a streamed replay, ``replay.segments``). ``coll`` is left -1 for the
    collective instances to fill."""
    rank, op, t_start, t_end = cols["rank"], cols["op"], cols["t_start"], cols["t_end"]
    n = len(rank)
    cpost = match.completion_post_row
    crow = match.completion_row
    row_msg = _row_messages(n, match.send_row, match.recv_row, crow, cpost,
                            index_proto(len(match)))  # int32 when it fits: a per-row array
    if since is None:
        since = np.full(nranks, t0, np.int64)
    kind, cont, burst, trail = _row_pass(op, row_msg, rank, peer, tag, cols["comm"], t_start,
                                         t_end, since, nranks, *KIND_TABLES)
    _completion_kinds(kind, crow, cpost, op, row_msg, _POST_IS_SEND)
    region, cpu = cols["region"], cols["cpu_ns"]
    if region_names:
        ratio = _cpu_ratio(rank, op, region, t_start, t_end, cpu, len(region_names))
        burst_region = _burst_regions(rank, op, region, t_start, t_end, cpu, ratio)
    else:  # no regions recorded: bursts have no region and no CPU samples
        ratio = np.ones(n, np.float32)
        burst_region = region
    p_row, p_end, p_msg, p_period = poll_runs(op, rank, kind, row_msg, peer, tag, cols["comm"],
                                              t_start, cols["nbytes"], match.src, POLL_CODE,
                                              IPROBE_CODE)
    rows = Rows(rank=rank, seq=cols["seq"], op=op, t_start=t_start, t_end=t_end,
                region=burst_region, cont=cont, kind=kind, msg=row_msg, burst=burst,
                ratio=ratio.astype(np.float32, copy=False),  # a CPU/wall fraction: 7 digits do
                coll=np.full(n, -1, np.int32), nbytes=cols["nbytes"], poll_row=p_row,
                poll_end=p_end, poll_msg=p_msg, poll_period=p_period)
    return rows, trail


_POST_IS_SEND = tf.op_lut(tuple(tf.NONBLOCKING_SEND_OPS))


@njit(cache=True, nogil=True)
def _completion_kinds(kind, crow, cpost, op, row_msg, post_is_send):
    """A completion row that carries a message (``row_msg``) waits for a send (``WSEND``) when
    its request's post row is a non-blocking send (``post_is_send``: per op code, the last
    slot for an unknown op), else for a receive (``WRECV``)."""
    for k in range(len(crow)):
        if row_msg[crow[k]] >= 0:
            kind[crow[k]] = K.WSEND if post_is_send[op[cpost[k]]] else K.WRECV


@njit(cache=True)
def _row_messages(n, send_row, recv_row, crow, cpost, msg_proto):
    """Per row the message it sends or receives (-1: none), a completion row taking its
    request's post row's (of the type of the empty ``msg_proto``)."""
    row_msg = np.full(n, -1, msg_proto.dtype)
    for m in range(len(send_row)):
        row_msg[send_row[m]] = m
        row_msg[recv_row[m]] = m
    for k in range(len(crow)):
        row_msg[crow[k]] = row_msg[cpost[k]]
    return row_msg


@njit(cache=True)
def _row_pass(op, row_msg, rank, peer, tag, comm, t_start, t_end, since, nranks, kind_of, coll_of,
              compl_of, sr_send, sr_recv, probe):
    """One forward pass over the rows, each column read once:

    * ``kind``: the kernel kind of each row (by op, for rows with a matched message; COLL for
      collectives; completions are set by the caller). A blocking ``Probe`` whose rank's next
      row is a blocking receive of the same peer, tag and communicator (the rule of
      ``hindsight.trace.probes_before_receives``, which predict uses) is that message's
      PROBE (``row_msg`` of the probe is set to the message): the matched-probe half of a
      traced pickle-API recv, or a program's own Probe / allocate / Recv. It waits for that
      message's envelope; what the rank does between the two rows (allocating the buffer) is
      its own work, a burst;
    * ``cont``: the row continues the call of the row before it (the rows of one Waitall /
      Testall..., of one Win_post / Win_start, or a Sendrecv's receive half; same rank and
      times);
    * ``burst``: the gap before each MPI row since the end of the rank's previous MPI rows (or
      ``since`` of its rank), 0 for a row that continues its call; ``trail``: per rank, the time
      from its last MPI row to its last event."""
    n = len(op)
    last = len(kind_of) - 1
    kind = np.empty(n, np.int8)
    cont = np.empty(n, np.bool_)
    burst = np.empty(n)
    trail = np.zeros(nranks)
    # The running rank's state in locals (rows come rank by rank): state kept in per-rank
    # arrays made every row wait for the store of the row before.
    r = -1
    prev_end = np.int64(0)   # end of the rank's latest MPI row so far
    last_any = np.int64(0)   # end of the rank's latest row so far
    p = -2          # op of the row before, in the same rank (-2: none)
    ts_p = np.int64(0)
    te_p = np.int64(0)
    for i in range(n):
        if rank[i] != r:
            if r >= 0:
                g = last_any - prev_end
                trail[r] = g if g > 0 else 0.0
            r = rank[i]
            prev_end = since[r]
            last_any = since[r]
            p = -2
        oi = op[i]
        o = oi if oi >= 0 else last
        k = 0
        if coll_of[o]:
            k = K.COLL
        elif row_msg[i] >= 0:
            k = kind_of[o]
        kind[i] = k
        ts = t_start[i]
        te = t_end[i]
        c = False
        if p != -2:
            sendrecv = o == sr_recv and p == sr_send
            if ts == ts_p and te == te_p and ((compl_of[o] and p == oi) or sendrecv):
                c = True
            if k == K.RECV and p == probe and peer[i - 1] == peer[i] and \
                    tag[i - 1] == tag[i] and comm[i - 1] == comm[i]:
                kind[i - 1] = K.PROBE
                row_msg[i - 1] = row_msg[i]
        cont[i] = c
        if te > last_any:
            last_any = te
        b = 0.0
        if oi > 0:  # an MPI row (0 = region row, -1 = unknown op)
            g = ts - prev_end
            if g > 0 and not c:
                b = g
            if te > prev_end:
                prev_end = te
        burst[i] = b
        p = oi
        ts_p = ts
        te_p = te
    if r >= 0:
        g = last_any - prev_end
        trail[r] = g if g > 0 else 0.0
    return kind, cont, burst, trail


@njit(cache=True)
def _cpu_ratio(rank, op, region, t_start, t_end, cpu_ns, nregions):
    """Per MPI row: CPU/wall ratio of the enclosing region instance (1 if unknown).

    A region row is written when the region exits, after the rows it encloses, so scanning each
    rank backwards, the most recent region row of a name is the instance enclosing a row with
    that innermost region."""
    n = len(rank)
    # float32, as the rows keep it: each value is rounded once, as from a float64 array cast
    # afterwards, without that array (8 bytes a row at the preparing's peak)
    ratio = np.ones(n, np.float32)
    last = np.full(max(nregions, 1), -1, np.int64)
    cur = -1
    for i in range(n - 1, -1, -1):
        if rank[i] != cur:
            cur = rank[i]
            last[:] = -1
        if op[i] == 0:
            if region[i] >= 0:
                last[region[i]] = i
            continue
        g = region[i]
        if g >= 0 and last[g] >= 0:
            j = last[g]
            wall = t_end[j] - t_start[j]
            if cpu_ns[j] >= 0 and wall > 0:
                q = cpu_ns[j] / wall
                ratio[i] = q if q < 1.0 else 1.0
    return ratio


@njit(cache=True)
def _burst_regions(rank, op, region, t_start, t_end, cpu_ns, ratio):
    """Region and CPU ratio of each MPI row's preceding burst.

    A region that opened and closed between two MPI calls (its row sits between them in seq)
    lies inside the burst: the longest such region names the burst and gives its CPU/wall ratio.
    Otherwise the burst belongs to the call's innermost region (``region`` of the row)."""
    n = len(rank)
    breg = region.copy()
    best = -1
    cur = -1
    for i in range(n):
        if rank[i] != cur:
            cur = rank[i]
            best = -1
        if op[i] == 0:
            if best < 0 or t_end[i] - t_start[i] > t_end[best] - t_start[best]:
                best = i
            continue
        if best >= 0 and region[best] >= 0:
            breg[i] = region[best]
            wall = t_end[best] - t_start[best]
            if cpu_ns[best] >= 0 and wall > 0:
                q = cpu_ns[best] / wall
                ratio[i] = q if q < 1.0 else 1.0
        best = -1
    return breg
