"""Collective instances whose pattern is not a fixed algorithm's (``replay.collectives``): a
window fence carries its epoch's one-sided transfers (rule ``fence_epoch``, ``replay.rma``), a
neighbourhood collective sends along its communicator's topology, and a non-blocking collective
splits its blocking collective's pattern between its post and its completion (rule
``nonblocking_split``: without asynchronous progress the library advances a collective's
schedule inside MPI calls, and the calls this model knows of are the completions: its own, or
one of a collective posted after it on its communicator, rule ``nonblocking_in_order``)."""

from __future__ import annotations

import numpy as np

from hindsight.jit import njit
from replay import collectives as C
from replay import kernel as K
from replay.errors import ReplayError
from replay.instances import Instances


def epoch_signatures(coll: Instances) -> tuple[np.ndarray, list[tuple]]:
    """Per collective instance, 0, or 1 + the index in the returned list of the one-sided
    transfers its window fence carries (``replay.rma``; (src, dst, bytes) world-rank triples):
    fences with the same transfers share a pattern."""
    sig = np.zeros(len(coll.comm), np.int64)
    epochs: list[tuple] = []
    if not len(coll.xfer_inst):
        return sig, epochs
    index: dict[tuple, int] = {}
    bounds = np.flatnonzero(np.r_[True, coll.xfer_inst[1:] != coll.xfer_inst[:-1], True])
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        key = tuple(zip(coll.xfer_src[a:b].tolist(), coll.xfer_dst[a:b].tolist(),
                        coll.xfer_bytes[a:b].tolist()))
        if key not in index:
            epochs.append(key)
            index[key] = len(epochs)
        sig[int(coll.xfer_inst[a])] = index[key]
    return sig, epochs


def fence_pattern(transfers: tuple, members: list[int], algo: str) -> C.Pattern:
    """Rule ``fence_epoch`` (``replay.rma``): a window fence's pattern, its epoch's transfers
    (one message per pair of members, its bytes) in a first step, then its barrier."""
    local = {w: q for q, w in enumerate(members)}
    msgs = [(0, local[s], local[d], -1, float(b)) for s, d, b in transfers]
    msgs += [(s + 1, a, b, o, m)
             for s, a, b, o, m in C._messages("Win_fence", algo, len(members), 0)]
    return C.pattern_of(msgs, len(members))


#: The algorithm name of every neighbourhood collective: one message per topology edge.
NEIGHBOURS = "neighbours"


def neighbour_pattern(op: str, cid: int, members: list[int],
                       neighbours: dict | None) -> C.Pattern:
    """A neighbourhood collective as one step: each member sends to each of its out-neighbours
    (the manifest's ``neighbours``; MPI_PROC_NULL ones skipped) its recorded block
    (``Neighbor_allgather(v)``, ``Neighbor_alltoall``) or its recorded total split evenly over
    its out-degree (``Neighbor_alltoallv``)."""
    per_rank = (neighbours or {}).get(str(cid))
    if per_rank is None:
        raise ReplayError(f"cannot replay {op} on communicator {cid}: the trace does not record "
                          "its topology (the manifest's 'neighbours')")
    local = {w: q for q, w in enumerate(members)}
    msgs = []
    for q, w in enumerate(members):
        outs = [d for d in per_rank.get(str(w), []) if d >= 0]
        mult = 1.0 / len(outs) if op == "Neighbor_alltoallv" and outs else 1.0
        msgs += [(0, q, local[d], q, mult) for d in outs if d in local]
    return C.pattern_of(msgs, len(members))


def nonblocking_split(pat: C.Pattern) -> np.ndarray:
    """Rule ``nonblocking_split``: per member of a non-blocking collective's pattern, how many
    of its operations its post row carries: the sends and receives of its first step (the
    leading ISEND/IRECV operations; a pattern lists each step's posts before its waits). The
    rest run at the row that completes the request. At least one for a member with operations,
    0 for one without."""
    p = len(pat.op_off) - 1
    out = np.zeros(p, np.int64)
    is_post = (pat.op_kind == K.ISEND) | (pat.op_kind == K.IRECV)
    for q in range(p):
        a, b = int(pat.op_off[q]), int(pat.op_off[q + 1])
        k = a
        while k < b and is_post[k]:
            k += 1
        out[q] = k - a
    return out


def nonblocking_tails(coll: Instances, rank: np.ndarray,
                      tail: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rule ``nonblocking_in_order``: where each member's steps after its post (``tail``
    operations, one count per row of ``coll.rows``) run, as (the row, -1 for none; the offset
    of the first of them among that row's operations).

    MPI requires the collectives on a communicator to be posted in the same order on every
    rank (MPI 4.0 §6.12), and the library advances every pending one inside any call. So the
    completion of a non-blocking collective X (its Wait*/Test* row) first runs the steps after
    the post of each collective the rank posted before X on X's communicator and has not
    completed yet, in post order, then X's own: a member's tail runs at the first completion
    among its own and those of the collectives its rank posted after it on the same
    communicator (the suffix minimum, in post order, of the completion rows). Every rank so
    runs the tails of one communicator in its post order, the same on all, whatever order
    the program completes them in (a ``Waitany``). A collective never completed (``done``
    -1, a partial trace) runs its tail at such a later completion or nowhere. A blocking
    collective has no tail (its row runs its pattern)."""
    n = len(coll.rows)
    tail_row = np.full(n, -1, np.int64)
    tail_off = np.zeros(n, np.int64)
    nb = np.flatnonzero(coll.done != coll.rows)
    if not len(nb):
        return tail_row, tail_off
    post = coll.rows[nb]
    comm = np.repeat(coll.comm, np.diff(coll.off))[nb]
    order = np.lexsort((post, comm, rank[post]))        # rows are in program order per rank
    group = np.r_[True, (np.diff(rank[post][order]) != 0) | (np.diff(comm[order]) != 0)]
    at, off = _in_order_tails(coll.done[nb][order], group, tail[nb][order])
    tail_row[nb[order]] = at
    tail_off[nb[order]] = off
    return tail_row, tail_off


@njit(cache=True)
def _in_order_tails(done, group_start, tail):
    """For entries in groups of consecutive entries (one rank and communicator), each group in
    post order: the row where each entry's tail runs, the smallest completion row among it and
    the entries after it in its group (-1, never completed, counts as none; -1 if none), and
    its offset there, the tails of the group's earlier entries placed at the same row before
    it. (Such rows are non-decreasing in post order, so the entries sharing one are
    consecutive; a completion row completes one request, so no two groups share one.)"""
    n = len(done)
    at = np.empty(n, np.int64)
    off = np.zeros(n, np.int64)
    best = -1
    for k in range(n - 1, -1, -1):
        d = done[k]
        if d >= 0 and (best < 0 or d < best):
            best = d
        at[k] = best
        if group_start[k]:
            best = -1
    run = 0
    for k in range(n):
        if k > 0 and not group_start[k] and at[k] == at[k - 1]:
            run += tail[k - 1]
        else:
            run = 0
        off[k] = run
    return at, off


def combine_steps(pat: C.Pattern) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rule ``reduction_combine``: where a reduction's pattern combines. A member combines the
    data of a message it receives (``pat.combine``) once the waits of that step are done, so
    the cost belongs to the step's last wait (a pattern lists each step's posts, then its waits:
    the run of WRECV/WSEND operations that holds the message's WRECV). Returns, one entry per
    (member, operation) that combines, sorted: the member, the operation's index among the
    member's operations, and the messages it combines as ``msgs[start[e]:start[e + 1]]``
    (``start`` has one more entry)."""
    kind = np.asarray(pat.op_kind)
    if not np.any(pat.combine):
        e = np.zeros(0, np.int64)
        return e, e, e, np.zeros(1, np.int64)
    member = np.repeat(np.arange(len(pat.op_off) - 1), np.diff(pat.op_off))
    waits = (kind == K.WRECV) | (kind == K.WSEND)
    # a run of waits ends where the next operation is not a wait or is another member's
    ends = np.flatnonzero(waits & np.r_[~waits[1:] | (member[1:] != member[:-1]), True])
    msg = np.asarray(pat.op_msg)
    sel = np.flatnonzero((kind == K.WRECV) & np.asarray(pat.combine, bool)[msg])
    at = ends[np.searchsorted(ends, sel)]
    order = np.argsort(at, kind="stable")
    at, msgs = at[order], msg[sel][order]
    first = np.flatnonzero(np.r_[True, at[1:] != at[:-1]])
    ops = at[first]
    local = ops - np.asarray(pat.op_off)[member[ops]]
    return member[ops], local, msgs, np.r_[first, len(at)].astype(np.int64)


def combine_ops(pat: C.Pattern, first: np.ndarray, by_local: np.ndarray,
                tail_local: np.ndarray, head: np.ndarray, inst_bytes: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """Rule ``reduction_combine`` for each instance of a pattern: the stream operations that
    combine (placed as ``stream._step_position`` places a member's operations: the ``head``
    first ones at its post row, the rest from ``tail_local`` on) and the bytes each combines
    (``inst_bytes``: instances x messages). Members a partial trace lacks combine nothing."""
    member, local, msgs, start = combine_steps(pat)
    if not len(member):
        return np.zeros(0, np.int64), np.zeros(0)
    nbytes = np.add.reduceat(inst_bytes[:, msgs], start[:-1], axis=1)
    post = by_local[:, member]
    tail = tail_local[:, member]
    h = head[member]
    at = np.where(local < h, np.where(post >= 0, first[np.maximum(post, 0)] + local, -1),
                  np.where(tail >= 0, tail + local - h, -1))
    keep = at >= 0
    return at[keep].astype(np.int64), nbytes[keep]
