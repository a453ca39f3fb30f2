"""Collective instances: the k-th collective each member makes on a communicator is one
meeting (instance) of that communicator's members; every COMM_SELF call is one of its own."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hindsight import trace as tf
from hindsight.jit import njit
from replay.errors import ReplayError
from replay.matching import small_codes


@dataclass
class Instances:
    """The collective instances of a trace. Per instance: ``comm``, ``op``, ``root``, ``size``
    (members of the communicator); its rows are ``rows[off[x]:off[x+1]]`` (sorted by rank),
    and ``local`` is each of those rows' rank within the communicator (0 on COMM_SELF).
    ``done`` is, per row of ``rows``, the row that completes that member's part: the row
    itself for a blocking collective, the Wait*/Test* row of a non-blocking collective's
    request (-1: never completed, in a partial trace). ``xfer_*``: the one-sided transfers of
    window fences (``replay.rma``), per transfer its fence instance, world ranks and bytes.
    ``coll["rows"]`` reads a field by name as well."""

    comm: np.ndarray
    op: np.ndarray
    root: np.ndarray
    size: np.ndarray
    rows: np.ndarray
    off: np.ndarray
    local: np.ndarray
    done: np.ndarray
    xfer_inst: np.ndarray
    xfer_src: np.ndarray
    xfer_dst: np.ndarray
    xfer_bytes: np.ndarray

    def __getitem__(self, name: str) -> np.ndarray:
        return getattr(self, name)

    def of_rows(self) -> np.ndarray:
        """The instance of each of ``rows``."""
        return np.repeat(np.arange(len(self.comm)), np.diff(self.off))


def group_ids(*cols: np.ndarray) -> np.ndarray:
    """Dense ids of the distinct rows of the non-negative integer columns ``cols``, numbered in
    order of first appearance. One mixed-radix integer key per row is sorted (a tuple per row
    cost 0.5 s for 170k collective instances); rows of the columns only when the key would not
    fit in 63 bits. NumPy rather than pandas' factorize: importing pandas was 0.3-1 s of every
    replay of a trace with collectives."""
    if not len(cols[0]):
        return np.zeros(0, np.int64)
    radix = [int(col.max()) + 1 for col in cols]
    if math.prod(float(x) for x in radix) < 2.0 ** 62:
        key = np.zeros(len(cols[0]), np.int64)
        for col, x in zip(cols, radix):
            key = key * x + col.astype(np.int64)
        _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    else:
        _, first, inv = np.unique(np.stack([np.asarray(c, np.int64) for c in cols], axis=1),
                                  axis=0, return_index=True, return_inverse=True)
    # np.unique numbers in sorted order; renumber in order of first appearance
    renumber = np.empty(len(first), np.int64)
    renumber[np.argsort(first, kind="stable")] = np.arange(len(first))
    return renumber[inv.reshape(-1)]


def collective_instances(crows: np.ndarray, rank: np.ndarray, op: np.ndarray,
                         comm: np.ndarray, root: np.ndarray, members: dict[int, list[int]],
                         problems: list[str], partial: bool) -> Instances:
    """The instances of the collective rows ``crows`` (rows in (rank, seq) order). Members of a
    communicator the manifest does not describe (``members``) are the ranks that used it; they
    are added to ``members``. Raises ReplayError when the members of an instance disagree on
    its op or root (also added to ``problems``), or, unless ``partial``, when some member of an
    instance is not in the trace."""
    if len(crows) == 0:
        e = np.zeros(0, np.int64)
        return Instances(comm=e, op=e, root=e, size=e, rows=e, off=np.zeros(1, np.int64),
                         local=e, done=e, xfer_inst=e, xfer_src=e, xfer_dst=e, xfer_bytes=e)
    c = comm[crows]
    r = rank[crows]
    # (by offset when the ids span little, WORLD and SELF; hashed with a derived communicator)
    ccode, nc = small_codes(c)
    if float(int(r.max()) + 1) * nc <= max(len(crows), 1 << 16):
        rank_comm = r.astype(np.int64) * nc + ccode  # direct: no hashing
        nrc = (int(r.max()) + 1) * nc
    else:
        rank_comm = group_ids(r, ccode)
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
    e = np.zeros(0, np.int64)
    return Instances(comm=i_comm, op=i_op, root=i_root, size=size, rows=rows, off=off,
                     local=local, done=rows.copy(), xfer_inst=e, xfer_src=e, xfer_dst=e,
                     xfer_bytes=e)


def complete_nonblocking(coll: Instances, op: np.ndarray, completion_row: np.ndarray,
                         completion_post_row: np.ndarray) -> None:
    """Set ``coll.done`` of the non-blocking collectives' post rows to the rows that complete
    their requests (``completion_row[k]`` completes the request posted by
    ``completion_post_row[k]``, as matching paired them); -1 where none does."""
    nb_rows = tf.op_mask(op[coll.rows], tf.NONBLOCKING_COLLECTIVE_OPS)
    if not nb_rows.any():
        return
    posts = coll.rows[nb_rows]
    order = np.argsort(completion_post_row, kind="stable")
    cpost, crow = completion_post_row[order], completion_row[order]
    at = np.minimum(np.searchsorted(cpost, posts), max(len(cpost) - 1, 0))
    found = (cpost[at] == posts) if len(cpost) else np.zeros(len(posts), bool)
    done = np.asarray(coll.done).copy()
    done[nb_rows] = np.where(found, crow[at] if len(crow) else -1, -1)
    coll.done = done


@njit(cache=True)
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


@njit(cache=True)
def _first_disagreeing(crows, inst, op, root, i_op, i_root):
    """The first of the collective rows ``crows`` whose op or root is not its instance's
    (``inst``; ``i_op``, ``i_root`` per instance), or -1. In row order: the rows of one instance
    lie a rank's rows apart, and visiting them instance by instance missed the cache."""
    for k in range(len(crows)):
        x = inst[k]
        if op[crows[k]] != i_op[x] or root[crows[k]] != i_root[x]:
            return k
    return -1
