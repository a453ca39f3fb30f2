"""Preparation: trace directory -> flat arrays for the kernel (plain Python, NumPy, pyarrow).

``prepare(trace_dir)`` reads the trace, matches messages (``replay.matching``), computes the
compute bursts and the collective instances, and keeps everything as row-level arrays. The
kernel's operation stream is derived from them per form (``Prepared.stream``):

* ``expand=False`` (measured model): a collective is one COLL operation (all members meet);
* ``expand=True`` (network models): a collective becomes the point-to-point pattern of its
  algorithm (``replay.collectives``).

The row-level form is cached next to the trace (``TRACE/.replay-cache/prepared-<fingerprint>/``,
one ``.npy`` per array, memory-mapped when read back; ignored by pyarrow because of the leading
dot) and reused while the rank files are unchanged.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numba as nb
import numpy as np
import pandas as pd
import pyarrow as pa

from hindsight import trace as tf
from hindsight.system import gc_paused
from replay import collectives as C
from replay import kernel as K
from replay.matching import index_proto, match_messages, op_codes, small_codes
from hindsight.errors import DataError

CACHE_DIR = ".replay-cache"
CACHE_VERSION = 11


SYNC_SEND_OPS = ("Ssend", "Issend")
_SYNC_OF = tf.op_lut(SYNC_SEND_OPS)  # per op code: a synchronous-mode send


class ReplayError(DataError):
    """A trace that cannot be replayed (unmatched messages, deadlock, ...); readable message."""


def _tables() -> tuple[np.ndarray, ...]:
    """Per op code (index len(OPS) stands for -1, an unknown op): the kernel kind of a row that
    carries a matched message; whether it is a collective (or communicator creation); whether
    it completes requests; and the codes of the two Sendrecv halves and of Probe."""
    size = len(tf.OPS) + 1
    kind = np.zeros(size, np.int8)
    for names, k in ((("Send", "Ssend", "Bsend", "Rsend"), K.SEND),
                     (tuple(tf.NONBLOCKING_SEND_OPS) + ("Sendrecv_send",), K.ISEND),
                     (tuple(tf.BLOCKING_RECV_OPS), K.RECV), (("Irecv",), K.IRECV)):
        kind[[tf.OP_CODE[x] for x in names]] = k
    coll = np.zeros(size, bool)
    coll[[tf.OP_CODE[x] for x in tf.COLLECTIVE_OPS | tf.COMM_OPS]] = True
    compl = np.zeros(size, bool)
    compl[[tf.OP_CODE[x] for x in tf.COMPLETION_OPS]] = True
    return (kind, coll, compl, np.int64(tf.OP_CODE["Sendrecv_send"]),
            np.int64(tf.OP_CODE["Sendrecv_recv"]), np.int64(tf.OP_CODE["Probe"]))


_KIND_TABLES = _tables()


@nb.njit(cache=True)
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


@nb.njit(cache=True)
def _row_pass(op, row_msg, rank, peer, tag, comm, t_start, t_end, t0, nranks, kind_of, coll_of,
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
      Testall..., or a Sendrecv's receive half; same rank and times);
    * ``burst``: the gap before each MPI row since the end of the rank's previous MPI rows (or
      ``t0``), 0 for a row that continues its call; ``trail``: per rank, the time from its last
      MPI row to its last event."""
    n = len(op)
    last = len(kind_of) - 1
    kind = np.empty(n, np.int8)
    cont = np.empty(n, np.bool_)
    burst = np.empty(n)
    trail = np.zeros(nranks)
    # The running rank's state in locals (rows come rank by rank): state kept in per-rank
    # arrays made every row wait for the store of the row before.
    r = -1
    prev_end = t0   # end of the rank's latest MPI row so far
    last_any = t0   # end of the rank's latest row so far
    p = -2          # op of the row before, in the same rank (-2: none)
    ts_p = np.int64(0)
    te_p = np.int64(0)
    for i in range(n):
        if rank[i] != r:
            if r >= 0:
                g = last_any - prev_end
                trail[r] = g if g > 0 else 0.0
            r = rank[i]
            prev_end = t0
            last_any = t0
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


@nb.njit(cache=True)
def _cpu_ratio(rank, op, region, t_start, t_end, cpu_ns, nregions):
    """Per MPI row: CPU/wall ratio of the enclosing region instance (1 if unknown).

    A region row is written when the region exits, after the rows it encloses, so scanning each
    rank backwards, the most recent region row of a name is the instance enclosing a row with
    that innermost region."""
    n = len(rank)
    ratio = np.ones(n)
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


@nb.njit(cache=True)
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


@dataclass
class Stream:
    """One kernel input form. Operation arrays are ordered by rank, then program order."""

    rank_off: np.ndarray
    kind: np.ndarray
    msg: np.ndarray
    burst: np.ndarray          # raw (wall) burst before the operation, ns
    burst_cpu: np.ndarray      # the same scaled by the enclosing region's CPU/wall ratio
    reg: np.ndarray            # region code of the burst (-1 = none)
    op_row: np.ndarray         # trace row of each operation
    m_bytes: np.ndarray
    m_src: np.ndarray
    m_dst: np.ndarray
    m_send_op: np.ndarray
    m_recv_op: np.ndarray
    loc: np.ndarray            # measured form only (else empty)
    dep_lat: np.ndarray
    coll_n: np.ndarray
    algorithms: dict[str, str] = field(default_factory=dict)
    m_sync: np.ndarray | None = None   # per message: synchronous send (Ssend/Issend); None = none

    @property
    def nops(self) -> int:
        return len(self.kind)

    @property
    def nmsg(self) -> int:
        return len(self.m_bytes)


@dataclass
class Prepared:
    """A trace ready to replay: row-level arrays plus lazily built kernel streams."""

    path: Path | None
    manifest: dict[str, Any]
    nranks: int
    rows: dict[str, np.ndarray]          # rank seq op t_start t_end region cont kind msg burst ratio coll
    region_names: list[str]
    trail: np.ndarray
    t0: int
    msgs: dict[str, np.ndarray]          # p2p messages: bytes src dst send_row recv_row sp_row
    coll: dict[str, np.ndarray]          # instances: comm op root (per instance), rows (flat), off
    comm_members: dict[int, list[int]]
    host_of_rank: np.ndarray
    problems: list[str] = field(default_factory=list)
    _streams: dict = field(default_factory=dict, repr=False)
    table: pa.Table | None = field(default=None, repr=False)

    @property
    def nrows(self) -> int:
        return len(self.rows["rank"])

    @property
    def measured_makespan_ns(self) -> float:
        mk = self.manifest.get("makespan_ns")
        if self.nrows:
            return float(self.rows["t_end"].max() - self.t0)
        return float(mk or 0)

    @property
    def measured_rank_end_ns(self) -> np.ndarray:
        out = np.zeros(self.nranks)
        if self.nrows:
            np.maximum.at(out, self.rows["rank"], (self.rows["t_end"] - self.t0).astype(float))
        return out

    # -------------------------------------------------------------------------------------------
    def stream(self, expand: bool, algorithms: dict[str, str] | None = None) -> Stream:
        algos = dict(C.DEFAULT_ALGORITHMS)
        algos.update(self.manifest.get("collective_algorithms") or {})
        algos.update(algorithms or {})
        for op, a in algos.items():
            if op in C.ALGORITHMS and a not in C.ALGORITHMS[op]:
                raise ReplayError(f"collective algorithm {op}={a} is not known (choose from "
                                  f"{', '.join(C.ALGORITHMS[op])})")
        key = (expand, tuple(sorted(algos.items())) if expand else ())
        if key not in self._streams:
            self._streams[key] = _build_stream(self, expand, algos)
        return self._streams[key]

    def default_tcomp(self) -> float:
        """Mean compute time per message: total burst time / number of messages."""
        s = self.stream(True)
        return float((s.burst.sum() + self.trail.sum()) / max(s.nmsg, 1))


# ------------------------------------------------------------------------------------------------


def _fingerprint(trace_dir: Path) -> str:
    h = hashlib.sha1(str(CACHE_VERSION).encode())
    for p in sorted(trace_dir.glob("rank-*.parquet")) + [trace_dir / tf.MANIFEST_NAME]:
        st = p.stat()
        h.update(f"{p.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:16]


def prepare(trace: str | Path | tf.Trace, *, allow_partial: bool = False,
            use_cache: bool = True, keep_table: bool = False) -> Prepared:
    """Load and prepare a trace. Raises ``TraceError`` (unreadable) or ``ReplayError``.

    With ``allow_partial`` an incomplete trace is accepted: messages whose partner is missing
    become no-ops (their problems are kept in ``Prepared.problems``).
    """
    if isinstance(trace, tf.Trace):
        tr = trace
        trace_dir = Path(tr.path)
    else:
        trace_dir = Path(trace)
        tr = None
    cache_file = None
    if use_cache and tr is None and (trace_dir / tf.MANIFEST_NAME).is_file():
        try:
            cache_file = trace_dir / CACHE_DIR / f"prepared-{_fingerprint(trace_dir)}"
        except OSError:
            cache_file = None
        if cache_file is not None and cache_file.is_dir() and not keep_table:
            try:
                return _load_cache(cache_file, trace_dir, allow_partial)
            except ReplayError:
                raise
            except Exception:  # a stale or truncated cache is rebuilt, never trusted
                pass
    if tr is None and keep_table:
        tr = tf.read_trace(trace_dir)
    if tr is not None:
        arrays, region_names = tf.table_columns(tr.table)
        cols = tf.Columns(trace_dir, tr.manifest, arrays, region_names, tr.sources)
    else:
        cols = tf.read_columns(trace_dir)
    if not cols.complete and not allow_partial:
        raise ReplayError(f"{trace_dir}: incomplete trace (ranks "
                          f"{cols.incomplete_ranks or 'unknown'} did not finish cleanly); "
                          "use --allow-partial to replay what was recorded")
    prep = _prepare_columns(cols, allow_partial or not cols.complete)
    if keep_table:
        prep.table = tr.table
    if cache_file is not None:
        _save_cache(prep, cache_file)
    return prep


def host_placement(manifest: dict, nranks: int) -> np.ndarray:
    """The host of each rank in the network a run crossed (what M/M/1 places ranks by): a
    testbed run's nodes (the manifest's ``network.node_of_rank``: its ranks share one machine
    and one clock, but each node has its own link, docs/testbed.md), else the manifest's
    ``hosts`` (numbered in host-name order), else one host per rank."""
    nodes = (manifest.get("network") or {}).get("node_of_rank")
    if nodes is not None:
        return np.asarray(nodes, np.int64)
    host_of_rank = np.arange(nranks)
    hosts = manifest.get("hosts")
    if isinstance(hosts, dict) and hosts:
        for h, (name, rs) in enumerate(sorted(hosts.items())):
            for r in rs:
                if 0 <= int(r) < nranks:
                    host_of_rank[int(r)] = h
        _, host_of_rank = np.unique(host_of_rank, return_inverse=True)
    return host_of_rank.astype(np.int64)


@gc_paused()
def _prepare_columns(cols: tf.Columns, partial: bool) -> Prepared:
    a = dict(cols.arrays)  # columns that only matching needs are dropped from this copy
    manifest = cols.manifest
    trace_dir = cols.path
    rank = a["rank"]
    seq = a["seq"]
    n = len(rank)
    nranks = int(manifest.get("ranks", 0)) or (int(rank.max()) + 1 if n else 0)
    if not tf.in_rank_seq_order(rank, seq):
        order = np.lexsort((seq, rank))
        a = {k: v[order] for k, v in a.items()}
        rank, seq = a["rank"], a["seq"]
    op = a["op"]
    t_start, t_end, cpu = a["t_start"], a["t_end"], a["cpu_ns"]
    nbytes, comm, root = a["nbytes"], a["comm"], a["root"]
    region, region_names = a["region"], cols.region_names

    match, problems = match_messages(a, _in_order=True)
    peer, tag = a["peer"], a["tag"]       # for the probes below, then freed
    for k in ("peer", "tag", "request"):  # only matching needs them; free them early
        a.pop(k, None)
    fatal = [p for p in problems if "bytes but" not in p]
    if fatal and not partial:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise ReplayError("cannot replay, messages do not match: " + "; ".join(fatal[:5]) + more)

    # ---- row -> message and kernel kind
    M = len(match)
    cpost = match.completion_post_row
    crow = match.completion_row
    row_msg = _row_messages(n, match.send_row, match.recv_row, crow, cpost,
                            index_proto(M))  # int32 when it fits: a per-row array
    t0 = int(t_start.min()) if n else 0
    kind, cont, burst, trail = _row_pass(op, row_msg, rank, peer, tag, comm, t_start, t_end,
                                         t0, nranks, *_KIND_TABLES)
    del peer, tag
    post_is_send = tf.op_mask(op[cpost], tf.NONBLOCKING_SEND_OPS)
    ok = row_msg[crow] >= 0
    kind[crow[ok & post_is_send]] = K.WSEND
    kind[crow[ok & ~post_is_send]] = K.WRECV
    if region_names:
        ratio = _cpu_ratio(rank, op, region, t_start, t_end, cpu, len(region_names))
        burst_region = _burst_regions(rank, op, region, t_start, t_end, cpu, ratio)
    else:  # no regions recorded: bursts have no region and no CPU samples
        ratio = np.ones(n, np.float32)
        burst_region = region

    # ---- collective instances: the k-th collective a rank makes on a communicator
    comm_members = {int(k): list(v) for k, v in (manifest.get("communicators") or {}).items()
                    if v is not None}
    comm_members.setdefault(0, list(range(nranks)))
    crows = np.flatnonzero(kind == K.COLL)
    coll = _instances(crows, rank, op, comm, root, comm_members, problems, partial)
    row_coll = np.full(n, -1, np.int32)
    row_coll[coll["rows"]] = np.repeat(np.arange(len(coll["comm"])), np.diff(coll["off"]))

    host_of_rank = host_placement(manifest, nranks)
    rows = dict(rank=rank, seq=seq, op=op, t_start=t_start, t_end=t_end, region=burst_region,
                cont=cont, kind=kind, msg=row_msg, burst=burst,
                ratio=ratio.astype(np.float32, copy=False),  # a CPU/wall fraction: 7 digits do
                coll=row_coll, nbytes=nbytes)
    recv_post = match.recv_row
    # As matching made them (no conversion copies): the stream converts bytes to float and
    # keeps ranks int32 as it copies them.
    msgs = dict(bytes=match.nbytes, src=match.src, dst=match.dst, send_row=match.send_row,
                recv_row=recv_post, send_done=match.send_done_row,
                recv_done=match.recv_done_row)
    return Prepared(trace_dir, manifest, nranks, rows, region_names, trail, t0, msgs, coll,
                    comm_members, host_of_rank, problems)


def _group_ids(*cols: np.ndarray) -> np.ndarray:
    """Dense ids of the distinct rows of the non-negative integer columns ``cols``, numbered in
    order of first appearance. One mixed-radix integer key per row is hashed (hashing a tuple
    per row cost 0.5 s for 170k collective instances); tuples only when the key would not fit
    in 63 bits."""
    radix = [int(col.max()) + 1 if len(col) else 1 for col in cols]
    if math.prod(float(x) for x in radix) < 2.0 ** 62:
        key = np.zeros(len(cols[0]), np.int64)
        for col, x in zip(cols, radix):
            key = key * x + col.astype(np.int64)
        return pd.factorize(key)[0]
    return pd.factorize(pd.MultiIndex.from_arrays(list(cols)))[0]


@nb.njit(cache=True)
def _number_instances(rank_comm, nrc, ccode, nc, is_self):
    """Collective instances of the collective rows (in (rank, seq) order): an instance is the
    k-th collective of each member on a communicator, and every COMM_SELF call is one of its
    own. Returns (instance of each row, numbered in order of first appearance; the rows
    sorted by instance, stable, so by rank within one; where each instance's rows start in
    that order, and the total)."""
    n = len(ccode)
    occ = np.empty(n, np.int64)
    seen = np.zeros(nrc, np.int64)
    top = np.zeros(nc, np.int64)  # per communicator, 1 + the largest occurrence index
    for i in range(n):
        k = seen[rank_comm[i]]
        seen[rank_comm[i]] = k + 1
        occ[i] = k
        if k + 1 > top[ccode[i]]:
            top[ccode[i]] = k + 1
    base = np.zeros(nc + 1, np.int64)
    for j in range(nc):
        base[j + 1] = base[j] + top[j]
    first = np.full(base[nc], -1, np.int64)
    inst = np.empty(n, np.int64)
    ninst = 0
    for i in range(n):
        if is_self[i]:
            inst[i] = ninst
            ninst += 1
            continue
        slot = base[ccode[i]] + occ[i]
        if first[slot] < 0:
            first[slot] = ninst
            ninst += 1
        inst[i] = first[slot]
    cnt = np.zeros(ninst + 1, np.int64)
    for i in range(n):
        cnt[inst[i] + 1] += 1
    for x in range(ninst):
        cnt[x + 1] += cnt[x]
    off = cnt.copy()
    order = np.empty(n, np.int64)
    for i in range(n):
        order[cnt[inst[i]]] = i
        cnt[inst[i]] += 1
    return inst, order, off


@nb.njit(cache=True)
def _first_disagreeing(crows, inst, op, root, i_op, i_root):
    """The first of the collective rows ``crows`` whose op or root is not its instance's
    (``inst``; ``i_op``, ``i_root`` per instance), or -1. In row order: the rows of one instance
    lie a rank's rows apart, and visiting them instance by instance missed the cache."""
    for k in range(len(crows)):
        x = inst[k]
        if op[crows[k]] != i_op[x] or root[crows[k]] != i_root[x]:
            return k
    return -1


def _instances(crows, rank, op, comm, root, members, problems, partial):
    if len(crows) == 0:
        e = np.zeros(0, np.int64)
        return dict(comm=e, op=e, root=e, rows=e, off=np.zeros(1, np.int64), local=e)
    c = comm[crows]
    r = rank[crows]
    # (by offset when the ids span little, WORLD and SELF; hashed with a derived communicator)
    ccode, nc = small_codes(c)
    if float(int(r.max()) + 1) * nc <= max(len(crows), 1 << 16):
        rank_comm = r.astype(np.int64) * nc + ccode  # direct: no hashing
        nrc = (int(r.max()) + 1) * nc
    else:
        rank_comm = _group_ids(r, ccode)
        nrc = int(rank_comm.max()) + 1
    inst, order, off = _number_instances(rank_comm, nrc, ccode, nc, c == tf.COMM_SELF_ID)
    rows = crows[order]
    cnt = np.diff(off)
    first = rows[off[:-1]]
    i_comm, i_op, i_root = comm[first], op[first], root[first]
    k = _first_disagreeing(crows, inst, op, root, i_op, i_root)
    if k >= 0:
        rw = crows[k]
        i = inst[k]
        problems.append(f"rank {rank[rw]}: collective #{i} on comm {comm[rw]} is "
                        f"{tf.OPS[op[rw]]} (root {root[rw]}) but rank {rank[first[i]]} calls "
                        f"{tf.OPS[i_op[i]]} (root {i_root[i]})")
        raise ReplayError("cannot replay: " + problems[-1])
    ucomm, comm_of_inst = np.unique(i_comm, return_inverse=True)
    comms = ucomm.tolist()
    # members of a communicator the manifest does not describe: the ranks that used it
    for cid in comms:
        if cid == tf.COMM_SELF_ID or cid in members:
            continue
        members[cid] = sorted(set(r[c == cid].tolist()))
    size = np.array([1 if cc == tf.COMM_SELF_ID else len(members[cc]) for cc in ucomm.tolist()],
                    np.int64)[comm_of_inst]
    short = np.flatnonzero(cnt != size)
    if len(short) and not partial:
        i = short[0]
        raise ReplayError(f"cannot replay: collective {tf.OPS[i_op[i]]} on comm {i_comm[i]} has "
                          f"{cnt[i]} of its {size[i]} members in the trace")
    # local rank (within the communicator) of each row
    local = np.zeros(len(rows), np.int64)  # (0 on COMM_SELF)
    for cid in comms:
        if cid == tf.COMM_SELF_ID:
            continue
        lut = np.full(max(max(members[cid], default=0), int(r.max())) + 1, -1, np.int64)
        lut[members[cid]] = np.arange(len(members[cid]))
        if len(comms) == 1:  # (one communicator, often WORLD: no mask of the rows)
            local = lut[r[order]]  # (r[order] is rank[rows], from a smaller array)
        else:
            sel = np.repeat(i_comm == cid, cnt)
            local[sel] = lut[rank[rows[sel]]]
    return dict(comm=i_comm, op=i_op, root=i_root, rows=rows, off=off, local=local, size=size)


# ------------------------------------------------------------------------------------------------


@nb.njit(cache=True)
def _lay_out(op, kind_row, msg_row, per_row, burst_row, ratio, region, rank, nranks,
             cpu_shared, msg_proto, row_proto, sr_send, sr_recv):
    """The operation arrays of the rows, in one pass each way: per row its operations (one per
    MPI row; two for a Sendrecv_recv whose send half, the row before, has a message: that send
    completes there; ``per_row[i]`` for an expanded collective), each carrying the row's
    region, the first one its burst, and the row's kind and message unless it is a collective
    (filled in by the caller). Rows of
    unmatched messages stay NOP. Returns (off, kind, msg, op_row, burst, burst_cpu, reg,
    rank_off); ``burst_cpu`` is ``burst`` itself when ``cpu_shared``. ``msg`` and ``op_row``
    take the integer types of the empty ``msg_proto`` and ``row_proto``."""
    n = len(op)
    expanded = len(per_row) > 0
    off = np.empty(n + 1, np.int64)
    rank_off = np.zeros(nranks + 1, np.int64)
    # Running totals in locals: reading back the array entry written one row before made
    # every row wait for that store (rows come rank by rank, so a rank's count is one local).
    tot = 0
    r = -1
    start_r = 0
    for i in range(n):
        c = 0
        if op[i] > 0:  # an MPI row (0 = region row, -1 = an op this version does not know)
            c = 1
            # (inline: a jitted helper taking the arrays cost 15 ns a row in reference counts)
            if op[i] == sr_recv and i > 0 and op[i - 1] == sr_send and rank[i - 1] == rank[i] \
                    and msg_row[i - 1] >= 0:
                c = 2
            if expanded and per_row[i] > 0:
                c = per_row[i]
        if rank[i] != r:
            if r >= 0:
                rank_off[r + 1] += tot - start_r
            r = rank[i]
            start_r = tot
        off[i] = tot
        tot += c
    off[n] = tot
    if r >= 0:
        rank_off[r + 1] += tot - start_r
    for q in range(nranks):
        rank_off[q + 1] += rank_off[q]
    nops = tot
    # Every position belongs to one row and is written once below (no zero-filling first:
    # that was a third of the pass's memory traffic).
    kind = np.empty(nops, np.int8)
    msg = np.empty(nops, msg_proto.dtype)
    op_row = np.empty(nops, row_proto.dtype)
    reg = np.empty(nops, np.int16)
    burst = np.empty(nops)
    burst_cpu = burst if cpu_shared else np.empty(nops)
    for i in range(n):
        a = off[i]
        b = off[i + 1]
        if a == b:
            continue
        g = region[i]
        k = K.NOP
        m = -1
        if kind_row[i] != K.COLL and msg_row[i] >= 0:
            k = kind_row[i]
            m = msg_row[i]
        kind[a] = k
        msg[a] = m
        op_row[a] = i
        reg[a] = g
        burst[a] = burst_row[i]
        if not cpu_shared:
            burst_cpu[a] = burst_row[i] * ratio[i]
        for p in range(a + 1, b):  # the further operations of the row
            op_row[p] = i
            reg[p] = g
            kind[p] = K.NOP
            msg[p] = -1
            burst[p] = 0.0
            burst_cpu[p] = 0.0
        if b - a == 2 and kind_row[i] != K.COLL:  # a Sendrecv_recv: its send half completes
            kind[a + 1] = K.WSEND
            msg[a + 1] = msg_row[i - 1]
    return off, kind, msg, op_row, burst, burst_cpu, reg, rank_off


@nb.njit(cache=True)
def _trace_message_ops(send_op, recv_op, sync, first, send_row, recv_row, op, sync_of):
    """For the trace's messages (the first ``len(send_row)``): the operations that post the
    send and the receive, their rows' first operations, and whether the send is
    synchronous-mode (``sync_of`` by op code; one pass, where NumPy's gathers first widened
    the int32 row numbers)."""
    for m in range(len(send_row)):
        s = send_row[m]
        send_op[m] = first[s]
        recv_op[m] = first[recv_row[m]]
        o = op[s]
        sync[m] = sync_of[o if o >= 0 else len(sync_of) - 1]


@nb.njit(cache=True)
def _fill_pattern(kind, msg, first, by_local, poff, pkind, pmsg, base, Mp):
    """The operations of a collective's pattern for each of its instances: member q of instance
    x (its row ``by_local[x, q]``) gets the pattern's steps ``poff[q]..poff[q+1]``, their
    messages numbered ``base + x·Mp + pmsg``. A member without steps keeps its single NOP;
    one a partial trace did not record (row -1) has no operations to fill.

    Member by member: a member's instances are its rank's rows in order, so the writes walk
    each rank's operations forward (instance by instance, they jumped between ranks: 20 ms
    against 12 on an 8-rank trace with 336 k Allreduce rows)."""
    ni, nmem = by_local.shape
    for q in range(nmem):
        for x in range(ni):
            if by_local[x, q] < 0:
                continue
            f = first[by_local[x, q]] - poff[q]
            for j in range(poff[q], poff[q + 1]):
                kind[f + j] = pkind[j]
                msg[f + j] = base + x * Mp + pmsg[j]


@nb.njit(cache=True)
def _pattern_ops(send_op, recv_op, first, by_local, base, s_member, s_step, r_member, r_step):
    """For each instance's messages of a pattern, the operations that post the send and the
    receive: message j is sent by member ``s_member[j]`` at its step ``s_step[j]`` and
    received by ``r_member[j]`` at ``r_step[j]`` (-1 for a member a partial trace lacks).

    Instance by instance, so the writes walk the message arrays forward (member by member
    they jumped by a pattern's length at each write)."""
    ni = by_local.shape[0]
    Mp = len(s_member)
    for x in range(ni):
        for j in range(Mp):
            m = base + x * Mp + j
            rs = by_local[x, s_member[j]]
            rr = by_local[x, r_member[j]]
            send_op[m] = first[rs] + s_step[j] if rs >= 0 else -1
            recv_op[m] = first[rr] + r_step[j] if rr >= 0 else -1


@nb.njit(cache=True)
def _pattern_bytes(m_bytes, base, by_local, owner, mult, nbytes):
    """Bytes of a pattern's messages for each of its instances: message j of instance x
    carries ``mult[j]`` times the bytes of its owner's row (``by_local[x, owner[j]]``; 0 for
    a member a partial trace did not record)."""
    ni = by_local.shape[0]
    Mp = len(owner)
    for x in range(ni):
        for j in range(Mp):
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


def _build_stream(prep: Prepared, expand: bool, algos: dict[str, str]) -> Stream:
    rows = prep.rows
    n = prep.nrows
    kind_row = rows["kind"]
    coll = prep.coll
    ninst = len(coll["comm"])
    M0 = len(prep.msgs["bytes"])
    # operations per row: one per MPI row, two for a Sendrecv_recv (its send half completes
    # there), a collective's pattern steps when expanded (``per_row``, empty when none)
    per_row = np.zeros(0, np.int64)
    pats = {}
    inst_pat = np.full(ninst, -1, np.int64)
    if expand and ninst:
        # one pattern per (op, size, root, communicator)
        root = np.where(coll["root"] >= 0, coll["root"], -1)
        gid = _group_ids(coll["op"], coll["size"], root + 1, pd.factorize(coll["comm"])[0])
        _, first_inst = np.unique(gid, return_index=True)
        guniq = zip(coll["op"][first_inst].tolist(), coll["size"][first_inst].tolist(),
                    root[first_inst].tolist(), coll["comm"][first_inst].tolist())
        for g, (opc, size, rootw, cid) in enumerate(guniq):
            name = tf.OPS[opc]
            if cid == tf.COMM_SELF_ID or size <= 1:
                pats[g] = None
                continue
            mem = prep.comm_members[cid]
            root_local = mem.index(rootw) if rootw in mem else 0
            pats[g] = (C.pattern(name, algos.get(name, C.DEFAULT_ALGORITHMS[name]), int(size),
                                 root_local), mem)
        inst_pat = gid
        # per collective row: ops of its member in the pattern (at least one, to carry the burst)
        crow = coll["rows"]
        inst_of = np.repeat(np.arange(ninst), np.diff(coll["off"]))
        per = np.ones(len(crow), np.int64)
        for g, pt in pats.items():
            if pt is None:
                continue
            off = pt[0][4]
            sel = inst_pat[inst_of] == g
            per[sel] = np.maximum(np.diff(off)[coll["local"][sel]], 1)
        per_row = np.zeros(n, np.int64)
        per_row[crow] = per
    cpu_shared = bool(np.all(rows["ratio"] == 1.0))  # no CPU samples below 100 %: one array
    # Message and row numbers as int32 when they fit: the operation arrays are most of a
    # stream's memory, and writing them most of its build time.
    nmsg = M0
    if expand and ninst:
        per_pat = np.bincount(inst_pat, minlength=len(pats))
        nmsg += sum(int(per_pat[g]) * len(pt[0][0]) for g, pt in pats.items() if pt is not None)
    off, kind, msg, op_row, burst, burst_cpu, reg, rank_off = _lay_out(
        rows["op"], kind_row, rows["msg"], per_row, rows["burst"], rows["ratio"],
        rows["region"], rows["rank"], prep.nranks, cpu_shared,
        index_proto(max(nmsg, ninst)),  # unexpanded, a COLL operation's msg is its instance
        index_proto(n), *_KIND_TABLES[3:5])
    first = off[:-1]
    # per message: the trace's messages, then each pattern's instances x steps
    m_bytes = np.empty(nmsg)
    m_src = np.empty(nmsg, np.int32)  # ranks (at most tf.MAX_RANKS)
    m_dst = np.empty(nmsg, np.int32)
    m_bytes[:M0] = prep.msgs["bytes"]
    m_src[:M0] = prep.msgs["src"]
    m_dst[:M0] = prep.msgs["dst"]
    # per message, the operations that post its send and its receive, and whether the send
    # is synchronous-mode: a trace message's are its rows' first operations (its send row's
    # is the SEND or ISEND, its receive row's the RECV or IRECV); a collective's are filled
    # with its pattern (never synchronous); -1 for a member a partial trace lacks
    op_proto = index_proto(len(kind))
    m_send_op = np.full(nmsg, -1, op_proto.dtype)
    m_recv_op = np.full(nmsg, -1, op_proto.dtype)
    m_sync = np.zeros(nmsg, bool)
    _trace_message_ops(m_send_op, m_recv_op, m_sync, first, prep.msgs["send_row"],
                       prep.msgs["recv_row"], rows["op"], _SYNC_OF)
    coll_n = np.zeros(0, np.int64)
    if ninst and not expand:
        crow = coll["rows"]
        inst_of = np.repeat(np.arange(ninst), np.diff(coll["off"]))
        kind[first[crow]] = K.COLL
        msg[first[crow]] = inst_of
        coll_n = np.diff(coll["off"]).astype(np.int64)
    elif ninst:
        base = M0
        for g, pt in pats.items():
            if pt is None:
                continue
            insts = np.flatnonzero(inst_pat == g)
            (src, dst, owner, mult, poff, pkind, pmsg), mem = pt
            Mp = len(src)
            ni = len(insts)
            mem_arr = np.asarray(mem, np.int32)
            # rows of each instance by local rank
            by_local = np.full((ni, len(mem)), -1, np.int64)  # -1: a member not recorded
            offs = coll["off"]
            if np.all(offs[insts + 1] - offs[insts] == len(mem)):  # every member recorded
                pos = offs[insts][:, None] + np.arange(len(mem))[None, :]
                by_local[np.arange(ni)[:, None], coll["local"][pos]] = coll["rows"][pos]
            else:  # a partial trace: some instances lack members
                for q_i, i in enumerate(insts.tolist()):
                    rs = coll["rows"][offs[i]:offs[i + 1]]
                    by_local[q_i, coll["local"][offs[i]:offs[i + 1]]] = rs
            block = slice(base, base + ni * Mp)
            _pattern_bytes(m_bytes, base, by_local, np.asarray(owner, np.int64),
                           np.asarray(mult, np.float64), rows["nbytes"])
            m_src[block].reshape(ni, Mp)[:] = mem_arr[src][None, :]
            m_dst[block].reshape(ni, Mp)[:] = mem_arr[dst][None, :]
            poff = np.asarray(poff, np.int64)
            pkind = np.asarray(pkind, np.int8)
            pmsg = np.asarray(pmsg, np.int64)
            _fill_pattern(kind, msg, first, by_local, poff, pkind, pmsg, base, Mp)
            _pattern_ops(m_send_op, m_recv_op, first, by_local, base,
                         *_message_steps(poff, pkind, pmsg, Mp))
            base += ni * Mp
        assert base == nmsg  # the messages counted before the layout are all written

    loc = np.zeros(0)
    dep_lat = np.zeros(0)
    if not expand:
        loc, dep_lat = _measured_costs(prep, kind, msg, op_row, first, coll_n)
    return Stream(rank_off, kind, msg, burst, burst_cpu, reg, op_row, m_bytes, m_src, m_dst,
                  m_send_op, m_recv_op, loc, dep_lat, coll_n, dict(algos) if expand else {},
                  m_sync)


def _measured_costs(prep, kind, msg, op_row, first, coll_n):
    """Local cost and dependency lag per operation for the measured model (see its docstring)."""
    rows = prep.rows
    ts, te = rows["t_start"].astype(float), rows["t_end"].astype(float)
    d = te[op_row] - ts[op_row]
    E = te[op_row]
    is_first = np.zeros(len(kind), bool)
    is_first[first[first < len(kind)]] = True
    cont = rows["cont"][op_row] | ~is_first
    d = np.where(cont, 0.0, d)
    # A Sendrecv is one call over two rows: its duration belongs to the receive half (which can
    # wait), the send half only posts.
    opr = rows["op"][op_row]
    d[opr == tf.OP_CODE["Sendrecv_send"]] = 0.0
    srr = (opr == tf.OP_CODE["Sendrecv_recv"]) & is_first
    d[srr] = (te - ts)[op_row[srr]]
    dep_lat = np.full(len(kind), -np.inf)
    sp_meas = ts[prep.msgs["send_row"]]
    rp_meas = ts[prep.msgs["recv_row"]]
    rc = (kind == K.RECV) | (kind == K.WRECV) | (kind == K.PROBE)
    dep_lat[rc] = E[rc] - sp_meas[msg[rc]]
    sc = (kind == K.SEND) | (kind == K.WSEND)
    dep_lat[sc] = E[sc] - rp_meas[msg[sc]]
    cc = kind == K.COLL
    if cc.any():
        ninst = len(coll_n)
        mx = np.full(ninst, -np.inf)
        np.maximum.at(mx, msg[cc], ts[op_row[cc]])
        dep_lat[cc] = E[cc] - mx[msg[cc]]
    loc = d.copy()
    dep = rc | cc
    loc[dep] = np.minimum(d[dep], np.maximum(dep_lat[dep], 0.0))
    # Sends keep their duration unless rendezvous-coupled (decided in the kernel by S); then
    # the local part is what remains after the receiver was ready.
    return loc, dep_lat


# ------------------------------------------------------------------------------------------------
# Cache


def _save_cache(prep: Prepared, path: Path) -> None:
    """One ``.npy`` file per array and ``meta.json`` in the directory ``path``, written under a
    temporary name and renamed into place (a reader never sees half a cache; of two writers
    the second finds the directory there and drops its copy). Older caches are removed."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(exist_ok=True)
        for old in path.parent.glob("prepared-*"):
            if old.is_dir() and old != path:
                shutil.rmtree(old, ignore_errors=True)
            elif old.is_file():  # the single-file caches of earlier versions
                old.unlink()
        tmp.mkdir()
        arrays = {f"r_{k}": v for k, v in prep.rows.items()}
        arrays.update({f"m_{k}": v for k, v in prep.msgs.items()})
        arrays.update({f"c_{k}": v for k, v in prep.coll.items()})
        arrays["trail"] = prep.trail
        arrays["host_of_rank"] = prep.host_of_rank
        for name, arr in arrays.items():
            np.save(tmp / f"{name}.npy", np.ascontiguousarray(arr))
        meta = dict(nranks=prep.nranks, t0=prep.t0, region_names=prep.region_names,
                    comm_members={str(k): v for k, v in prep.comm_members.items()},
                    problems=prep.problems, version=CACHE_VERSION, arrays=sorted(arrays))
        (tmp / "meta.json").write_text(json.dumps(meta))
        os.rename(tmp, path)
    except OSError:
        pass  # a read-only trace directory (or a cache another process just wrote)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _load_cache(path: Path, trace_dir: Path, allow_partial: bool) -> Prepared:
    """The cache, its arrays memory-mapped copy-on-write: nothing is read until used (a warm
    load costs page-cache faults only), and writing to an array never changes the file."""
    manifest = tf.read_manifest(trace_dir)
    if not manifest.get("complete") and not allow_partial:
        raise ReplayError(f"{trace_dir}: incomplete trace; use --allow-partial to replay what "
                          "was recorded")
    meta = json.loads((path / "meta.json").read_text())
    if meta.get("version") != CACHE_VERSION:
        raise ValueError("old cache")
    z = {name: np.load(path / f"{name}.npy", mmap_mode="c") for name in meta["arrays"]}
    rows = {k[2:]: v for k, v in z.items() if k.startswith("r_")}
    msgs = {k[2:]: v for k, v in z.items() if k.startswith("m_")}
    coll = {k[2:]: v for k, v in z.items() if k.startswith("c_")}
    trail = z["trail"]
    host = z["host_of_rank"]
    return Prepared(trace_dir, manifest, int(meta["nranks"]), rows, meta["region_names"], trail,
                    int(meta["t0"]), msgs, coll,
                    {int(k): v for k, v in meta["comm_members"].items()}, host,
                    list(meta["problems"]))

