"""Synthetic traces for tests and benchmarks, written as real trace directories (a test helper).

Two ways to make one:

* ``simulate(programs, ...)`` runs small per-rank programs (lists of operations, see ``Program``)
  through a deliberately simple stand-in network, independent of the replay engine, and records
  what a real run would have recorded: same rows, same sentinels, same request/completion pairing.
  Good for hand-checked tests and hypothesis properties.
* ``ring_columns`` / ``pairwise_columns`` / ... build the columns of large regular traces directly
  as NumPy arrays (no per-event Python), for the throughput benchmark.

Either result is written with ``hindsight.trace.write_trace(dir, per_rank_columns, ...)``, the
writer every trace made in memory goes through (re-exported here for the tests).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from hindsight import trace as tf
from hindsight.trace.write import EventRows, write_trace  # noqa: F401  (re-exported)

ANY = tf.ANY_SOURCE
NULL = -1   # MPI_PROC_NULL as a peer (the trace's "none")

# ------------------------------------------------------------------------------------------------
# A tiny independent simulator for small hand-written programs


@dataclass
class StandIn:
    """The stand-in 'real' network the simulator records: eager messages, fixed costs (ns)."""

    latency: float = 2000.0
    ns_per_byte: float = 0.1
    overhead: float = 300.0
    coll_step: float = 2500.0


@dataclass
class _RankState:
    pc: int = 0
    t: float = 0.0
    next_req: int = 0
    reqs: dict = field(default_factory=dict)
    cols: EventRows = field(default_factory=EventRows)
    stall: tuple | None = None   # (pc of the stalled call, time the rank entered it)


def _row(st: _RankState, op: str, t0: float, t1: float, peer=-1, tag=-1, comm=0, nbytes=-1,
         request=-1, root=-1, region=None, cpu=-1) -> None:
    if st.stall is not None and st.stall[0] == st.pc:
        t0 = st.stall[1]  # the call was entered before the stall
    st.cols.append(op, t0, t1, peer, tag, comm, nbytes, request, root, region, cpu)


def simulate(programs: Sequence[Sequence[tuple]], net: StandIn | None = None,
             communicators: dict[int, list[int]] | None = None) -> list[dict[str, list]]:
    """Run per-rank programs through the stand-in network; return per-rank columns.

    Operations (tuples):
      ("compute", ns[, region_name[, cpu_ns]])   a burst; with a region name also a region row
      ("send", dst, nbytes[, tag[, comm]])        blocking Send (eager in the stand-in)
      ("recv", src, [tag[, comm]])                blocking Recv; src may be ANY
      ("isend", dst, nbytes[, tag[, comm]])       posts request id = count of requests so far
      ("irecv", src[, tag[, comm]])               src may be ANY; completion row carries the truth
      ("probe", src[, tag[, comm]])               blocking Probe: waits for the message, leaves it
      ("wait", [req, ...])                        Wait (one) or Waitall (several) rows
      ("free", req)                               Request_free of a pending request: nothing
                                                  waits for it (a freed irecv takes its message,
                                                  in the stand-in once its sender posted it)
      ("sendrecv", dst, nbytes, src[, tag])       Sendrecv_send + Sendrecv_recv rows; dst or
                                                  src may be NULL (MPI_PROC_NULL)
      ("coll", name, nbytes[, root[, comm]])      any blocking collective
      ("icoll", name, nbytes[, root[, comm]])     a non-blocking collective's post (Iallreduce...):
                                                  a request completed by "wait" once every
                                                  member posted, as the blocking one would end
      ("stall", ns)                               the next operation (an MPI call) is entered,
                                                  then the rank is held ns (preemption) before
                                                  it acts: its rows start ns earlier
    """
    net = net or StandIn()
    P = len(programs)
    comms = {0: list(range(P)), 1: None}
    comms.update(communicators or {})
    st = [_RankState() for _ in range(P)]
    # In-flight sends per (src, dst, comm, tag): FIFO of (available_time, nbytes).
    inflight: dict[tuple, deque] = {}
    coll_arrivals: dict[tuple, dict[int, float]] = {}
    coll_count: dict[tuple[int, int], int] = {}

    def post_send(r, dst, nbytes, tag, comm, t):
        inflight.setdefault((r, dst, comm, tag), deque()).append(
            (t + net.overhead + net.latency + net.ns_per_byte * nbytes, nbytes))

    def find(r, src, tag, comm):
        """The message a receive would take now: earliest-available for wildcards."""
        best = None
        for (s, d, c, tg), q in inflight.items():
            if d != r or c != comm or not q or (src != ANY and s != src) or tg != tag:
                continue
            if best is None or q[0][0] < inflight[best][0][0]:
                best = (s, d, c, tg)
        return best

    progress = True
    while progress:
        progress = False
        for r in range(P):
            s = st[r]
            while s.pc < len(programs[r]):
                op = programs[r][s.pc]
                kind = op[0]
                if kind == "compute":
                    dt = float(op[1])
                    if len(op) > 2 and op[2]:
                        cpu = op[3] if len(op) > 3 else dt
                        _row(s, "region", s.t, s.t + dt, region=op[2], cpu=cpu)
                    s.t += dt
                elif kind == "stall":
                    s.stall = (s.pc + 1, s.t)
                    s.t += float(op[1])
                elif kind == "send":
                    dst, nb = op[1], op[2]
                    tag = op[3] if len(op) > 3 else 0
                    comm = op[4] if len(op) > 4 else 0
                    post_send(r, dst, nb, tag, comm, s.t)
                    _row(s, "Send", s.t, s.t + net.overhead, dst, tag, comm, nb)
                    s.t += net.overhead
                elif kind == "isend":
                    dst, nb = op[1], op[2]
                    tag = op[3] if len(op) > 3 else 0
                    comm = op[4] if len(op) > 4 else 0
                    post_send(r, dst, nb, tag, comm, s.t)
                    req = s.next_req
                    s.next_req += 1
                    s.reqs[req] = ("send",)
                    _row(s, "Isend", s.t, s.t + net.overhead, dst, tag, comm, nb, req)
                    s.t += net.overhead
                elif kind in ("recv", "irecv", "probe"):
                    src = op[1]
                    tag = op[2] if len(op) > 2 else 0
                    comm = op[3] if len(op) > 3 else 0
                    if kind == "irecv":
                        req = s.next_req
                        s.next_req += 1
                        s.reqs[req] = ("recv", src, tag, comm)
                        _row(s, "Irecv", s.t, s.t + 100, src, tag, comm, -1, req)
                        s.t += 100
                    else:
                        key = find(r, src, tag, comm)
                        if key is None:
                            break
                        # a probe waits for the message like a receive but leaves it queued
                        q = inflight[key]
                        avail, nb = q[0] if kind == "probe" else q.popleft()
                        t1 = max(s.t + net.overhead, avail)
                        _row(s, "Probe" if kind == "probe" else "Recv", s.t, t1, key[0], tag,
                             comm, nb)
                        s.t = t1
                elif kind == "wait":
                    reqs = list(op[1])
                    taken = []  # (key, (avail, nbytes)) popped so far; put back if we block
                    for q in reqs:
                        info = s.reqs[q]
                        if info[0] == "coll":
                            arr = coll_arrivals[info[1]]
                            if len(arr) < info[2]:
                                break
                            taken.append((None, None))
                        elif info[0] == "recv":
                            key = find(r, info[1], info[2], info[3])
                            if key is None:
                                break
                            taken.append((key, inflight[key].popleft()))
                        else:
                            taken.append((None, None))
                    else:
                        t1 = s.t + net.overhead
                        name = "Wait" if len(reqs) == 1 else "Waitall"
                        for q in reqs:
                            if s.reqs[q][0] == "coll":
                                t1 = max(t1, s.reqs[q][3](coll_arrivals[s.reqs[q][1]]))
                        for q, (key, got) in zip(reqs, taken):
                            info = s.reqs.pop(q)
                            if key is None:
                                _row(s, name, s.t, -1, request=q,
                                     comm=info[1][0] if info[0] == "coll" else 0)
                            else:
                                t1 = max(t1, got[0])
                                _row(s, name, s.t, -1, key[0], key[3], info[3], got[1], q)
                        for i in range(len(reqs)):
                            s.cols.cols["t_end"][-1 - i] = int(round(t1))
                        s.t = t1
                        s.pc += 1
                        progress = True
                        continue
                    for key, got in reversed(taken):
                        if key is not None:
                            inflight[key].appendleft(got)
                    break
                elif kind == "free":
                    q = op[1]
                    info = s.reqs[q]
                    comm = info[1][0] if info[0] == "coll" else info[3] if info[0] == "recv" \
                        else 0
                    if info[0] == "recv":
                        # the receive goes on after the free; the stand-in hands it its message
                        # here, so that later receives of the channel take the later ones
                        key = find(r, info[1], info[2], info[3])
                        if key is None:
                            break
                        inflight[key].popleft()
                    s.reqs.pop(q)
                    _row(s, "Request_free", s.t, s.t + net.overhead, request=q, comm=comm)
                    s.t += net.overhead
                elif kind == "sendrecv" and NULL in (op[1], op[3]):
                    # a half to or from MPI_PROC_NULL: returns at once, as the PMPI library
                    # records it (peer -1; a null receive's status: tag -1, 0 bytes)
                    dst, nb, src = op[1], op[2], op[3]
                    tag = op[4] if len(op) > 4 else 0
                    key = find(r, src, tag, 0) if src != NULL else None
                    if src != NULL and key is None:
                        break
                    if dst != NULL:
                        post_send(r, dst, nb, tag, 0, s.t)
                    t1 = s.t + net.overhead
                    if key is not None:
                        avail, rb = inflight[key].popleft()
                        t1 = max(t1, avail)
                    _row(s, "Sendrecv_send", s.t, t1, dst, tag, 0, nb)
                    _row(s, "Sendrecv_recv", s.t, t1, *((key[0], tag, 0, rb) if key else
                                                          (NULL, -1, 0, 0)))
                    s.t = t1
                elif kind == "sendrecv":
                    dst, nb, src = op[1], op[2], op[3]
                    tag = op[4] if len(op) > 4 else 0
                    key = find(r, src, tag, 0)
                    if key is None:
                        # Post our half once so the partner can make progress, then retry.
                        if not getattr(s, "_sr_posted", False):
                            post_send(r, dst, nb, tag, 0, s.t)
                            s._sr_posted = True
                            progress = True
                        break
                    if not getattr(s, "_sr_posted", False):
                        post_send(r, dst, nb, tag, 0, s.t)
                    s._sr_posted = False
                    avail, rb = inflight[key].popleft()
                    t1 = max(s.t + net.overhead, avail)
                    _row(s, "Sendrecv_send", s.t, t1, dst, tag, 0, nb)
                    _row(s, "Sendrecv_recv", s.t, t1, key[0], tag, 0, rb)
                    s.t = t1
                elif kind in ("coll", "icoll"):
                    name, nb = op[1], op[2]
                    root = op[3] if len(op) > 3 else -1
                    comm = op[4] if len(op) > 4 else 0
                    members = comms.get(comm) or [r]
                    k = coll_count.get((r, comm), 0)
                    arr = coll_arrivals.setdefault((comm, k), {})
                    steps = max(1, int(np.ceil(np.log2(max(len(members), 2)))))

                    def coll_end(arr, steps=steps, nb=nb):
                        return max(arr.values()) + steps * (net.coll_step
                                                            + net.ns_per_byte * max(nb, 0))
                    if kind == "icoll":
                        arr[r] = s.t
                        req = s.next_req
                        s.next_req += 1
                        s.reqs[req] = ("coll", (comm, k), len(members), coll_end)
                        _row(s, name, s.t, s.t + 100, -1, -1, comm, nb, req, root)
                        coll_count[(r, comm)] = k + 1
                        s.t += 100
                        s.pc += 1
                        progress = True
                        continue
                    if r not in arr:
                        arr[r] = s.t
                        progress = True
                    if len(arr) < len(members):
                        break
                    t1 = coll_end(arr)
                    _row(s, name, s.t, t1, -1, -1, comm, nb, -1, root)
                    coll_count[(r, comm)] = k + 1
                    s.t = t1
                else:
                    raise ValueError(f"unknown synthetic op {kind!r}")
                s.pc += 1
                progress = True
    stuck = [r for r in range(P) if st[r].pc < len(programs[r])]
    if stuck:
        raise ValueError(f"synthetic programs deadlock (ranks {stuck} cannot finish)")
    return [{"op": s.cols.op, "region": s.cols.region, **s.cols.cols} for s in st]


def simulate_to_dir(trace_dir: Path | str, programs: Sequence[Sequence[tuple]],
                    net: StandIn | None = None, communicators: dict[int, list[int]] | None = None,
                    **kw: Any) -> Path:
    """``simulate`` then ``write_trace``: a small synthetic trace directory."""
    cols = simulate(programs, net, communicators)
    return write_trace(trace_dir, cols, communicators=communicators, **kw)


# ------------------------------------------------------------------------------------------------
# Large regular traces as arrays (benchmark)


def _blank(n: int) -> dict[str, np.ndarray]:
    return {"op": np.zeros(n, np.int8), "t_start": np.zeros(n, np.int64),
            "t_end": np.zeros(n, np.int64), "cpu_ns": np.full(n, -1, np.int64),
            "peer": np.full(n, -1, np.int64), "tag": np.zeros(n, np.int64),
            "comm": np.zeros(n, np.int64), "nbytes": np.full(n, -1, np.int64),
            "request": np.full(n, -1, np.int64), "root": np.full(n, -1, np.int64)}


def ring_columns(nranks: int, iters: int, nbytes: int = 1024, compute_ns: int = 5000,
                 step_ns: int = 3000, allreduce: bool = False) -> list[dict[str, np.ndarray]]:
    """Each iteration: compute, Sendrecv to the right neighbour (from the left one), and with
    ``allreduce`` an Allreduce of 8 bytes on COMM_WORLD (as ``hindsight/examples/ring.py``).

    Times follow a lock-step schedule (every iteration takes compute + step on every rank), which
    is self-consistent: each receive ends after its message was sent.
    """
    return [ring_rank_columns(r, nranks, iters, nbytes, compute_ns, step_ns, allreduce)
            for r in range(nranks)]


def ring_rank_columns(r: int, nranks: int, iters: int, nbytes: int = 1024,
                      compute_ns: int = 5000, step_ns: int = 3000,
                      allreduce: bool = False) -> dict[str, np.ndarray]:
    """Rank ``r``'s columns of ``ring_columns`` (to write huge traces one rank at a time)."""
    k = 3 if allreduce else 2  # rows per iteration
    it = np.arange(iters, dtype=np.int64)
    t0 = it * (compute_ns + (3 if allreduce else 1) * step_ns) + compute_ns
    c = _blank(k * iters)
    c["op"][0::k] = tf.OP_CODE["Sendrecv_send"]
    c["op"][1::k] = tf.OP_CODE["Sendrecv_recv"]
    for j in (0, 1):
        c["t_start"][j::k] = t0
        c["t_end"][j::k] = t0 + step_ns
    c["peer"][0::k] = (r + 1) % nranks
    c["peer"][1::k] = (r - 1) % nranks
    c["nbytes"][:] = nbytes
    if allreduce:
        c["op"][2::k] = tf.OP_CODE["Allreduce"]
        c["t_start"][2::k] = t0 + step_ns
        c["t_end"][2::k] = t0 + 3 * step_ns
        c["tag"][2::k] = -1
        c["nbytes"][2::k] = 8
    return c
