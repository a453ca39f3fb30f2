"""The rows of one MPI call of an imported OTF2 archive (``otf2_import``), from the records
inside it: compiled rules over integer tables, called by the event kernel of ``otf2_rows``.

A call's records (``recs``, one int64 row of ``NREC`` fields each: kind ``R_*``, peer or root
or new communicator, tag or collective op, communicator, bytes or sizeSent, sizeReceived, OTF2
request id, communicator slot) give its rows by the *branch* of its name (``B_*``, the order of
the tests in ``branch_of``). Rows are written as columns ``W_*`` of a rows buffer. A
non-blocking collective's post row has comm ``NBC_PENDING``: its NonBlockingCollectiveComplete,
in a later call, gives comm, nbytes and root (``nbc_done``).

Requests per rank live in tables keyed by (rank, id) (``pairtable``: the kernel runs without
reference counting, where typed dicts cannot be used), their entry counts at ``T_*`` in
``tc``: ``req`` OTF2 request id -> (hindsight request, communicator of the post); ``nbc`` OTF2
request id -> (hindsight request, op code) of a collective's post; ``nbc_done`` hindsight
request -> (comm, comm slot, sizeSent, sizeReceived, world root) from its completion.
"""

from __future__ import annotations

import numpy as np

from hindsight.jit import njit
from hindsight import trace as tf
from hindsight.interop import pairtable as PT
from hindsight.interop.otf2 import COLLECTIVE_OPS_OTF2, TOTAL_OVER_PEERS

# a record's fields
RK, RA, RB, RC, RD, RE, RF, RG = range(8)
NREC = 8
# record kinds
(R_SEND, R_RECV, R_IRECV_REQ, R_PROBE, R_ISEND_DONE, R_COLL, R_NBC_REQ, R_NBC_DONE,
 R_COMM_NEW) = range(1, 10)
# call branches
(B_NONE, B_SEND, B_NBSEND, B_IRECV, B_RECV, B_PROBE, B_SENDRECV, B_NBC, B_COMPLETION, B_COMM,
 B_COLL, B_START) = range(12)
# the op codes ``call_rows`` writes besides the call's own (``named``): a Sendrecv's halves, and
# the posts of an MPI_Start/Startall (hindsight records a started request as its Isend or Irecv)
N_SR_SEND, N_SR_RECV, N_ISEND, N_IRECV = range(4)
# the rows buffer's columns
(W_RANK, W_OP, W_REGION, W_T0, W_T1, W_CPU, W_PEER, W_TAG, W_COMM, W_NBYTES, W_REQ,
 W_ROOT) = range(12)
NCOL = 12
# the columns of an ATTR_ROWS row (otf2.parse_rows's order, the op as its code)
X_POS, X_OP, X_PEER, X_TAG, X_COMM, X_NBYTES, X_REQ, X_ROOT = range(8)
# an op table's columns (one row per op code): scorep category, TOTAL_OVER_PEERS, code of the
# blocking op (non-blocking collectives), completes or frees a request, rooted, id of the OTF2
# CollectiveOp name its post's completion must carry (-2: none, a KeyError)
O_CAT, O_TOP, O_BLOCKING, O_ENDS_REQ, O_ROOTED, O_COLL_NAME = range(6)
# scorep_sizes.readings' cases
(C_DEFAULT, C_BARRIER, C_GATHER, C_SCATTER, C_BCAST, C_ALL, C_SCAN, C_EXSCAN, C_ALLGATHERV,
 C_SCATTERV) = range(10)
_CATEGORY = {"Barrier": C_BARRIER, "Gather": C_GATHER, "Reduce": C_GATHER,
             "Scatter": C_SCATTER, "Bcast": C_BCAST, "Allreduce": C_ALL, "Allgather": C_ALL,
             "Alltoall": C_ALL, "Reduce_scatter_block": C_ALL, "Scan": C_SCAN,
             "Exscan": C_EXSCAN, "Allgatherv": C_ALLGATHERV, "Scatterv": C_SCATTERV}
NBC_PENDING = -(1 << 62)       # comm of a non-blocking collective's post until its completion
NONE = -(1 << 62)              # a reading's size that says nothing (None in scorep_sizes)
# errors of a call (with the request id and op codes the message names)
E_NEVER_POSTED, E_NBC_OP, E_NBC_KEY = 1, 2, 3
SK_NBC_EVENT = 0              # skipped kind: "non-blocking collective event"
# the request tables (their entry counts at these places in ``tc``) and their value widths
T_REQ, T_NBC, T_DONE, T_POST = range(4)
WIDTHS = (2, 2, 5, 1)


def branch_of(name: str) -> int:
    """The branch of an MPI call named ``name`` (without ``MPI_``)."""
    if name in ("Send", "Ssend", "Bsend", "Rsend"):
        return B_SEND
    if name in tf.NONBLOCKING_SEND_OPS:
        return B_NBSEND
    if name == "Irecv":
        return B_IRECV
    if name == "Recv":
        return B_RECV
    if name in ("Probe", "Iprobe"):
        return B_PROBE
    if name == "Sendrecv" or name == "Sendrecv_replace":
        return B_SENDRECV
    if name == "Start" or name == "Startall":
        return B_START
    if name in tf.NONBLOCKING_COLLECTIVE_OPS:
        return B_NBC
    if name in tf.COMPLETION_OPS:
        return B_COMPLETION
    if name in tf.COMM_OPS:
        return B_COMM
    if name in tf.COLLECTIVE_OPS:
        return B_COLL
    return B_NONE


def op_table(names: list[str], coll_names: list[str]) -> np.ndarray:
    """The op table (``O_*`` columns) of op ``names`` (code = position); ``coll_names``: the
    OTF2 CollectiveOp names, whose positions ``O_COLL_NAME`` gives."""
    code = {n: i for i, n in enumerate(names)}
    out = np.full((len(names), 6), -1, np.int64)
    for i, n in enumerate(names):
        blocking = tf.BLOCKING_OF.get(n)
        out[i, O_CAT] = _CATEGORY.get(n, C_DEFAULT)
        out[i, O_TOP] = n in TOTAL_OVER_PEERS
        out[i, O_BLOCKING] = code.get(blocking, -1) if blocking else -1
        out[i, O_ENDS_REQ] = n in tf.COMPLETION_OPS or n in tf.FREE_OPS
        out[i, O_ROOTED] = n in tf.ROOTED_OPS
        if blocking:
            want = COLLECTIVE_OPS_OTF2.get(blocking)
            out[i, O_COLL_NAME] = -2 if want is None else (
                coll_names.index(want) if want in coll_names else -1)
    return out


# Compiled without reference counting itself: ``convert`` (which has none) and ``fill_nbc``
# both call it, and numba's cache keeps one build of a callee whichever caller compiled it.
@njit(cache=True, _nrt=False)
def scorep_block(cat, sent, received, n, me, is_root):
    """Rule *Score-P block*: ``scorep_sizes.scorep_block`` of an op of category ``cat``."""
    # the readings' coefficients of sizeSent and sizeReceived: (k00, k01), then (k10, k11)
    # (scalars, not an array: convert, which calls this, allocates nothing)
    k00 = k01 = k10 = k11 = NONE
    m = 1
    if cat == C_BARRIER:
        k00, k01 = 0, 0
    elif cat == C_GATHER:
        if is_root:
            k00, k01, k10, k11, m = 1, n, 0, n - 1, 2
        else:
            k00, k01 = 1, 0
    elif cat == C_SCATTER:
        if is_root:
            k00, k01, k10, k11, m = n, 1, n - 1, 0, 2
        else:
            k00, k01 = 0, 1
    elif cat == C_BCAST:
        k00, k01 = (n, 1) if is_root else (0, 1)
    elif cat == C_ALL:
        k00, k01, k10, k11, m = n, n, n - 1, n - 1, 2
    elif cat == C_SCAN:
        k00, k01, k10, k11, m = n - me, me + 1, n - me - 1, me, 2
    elif cat == C_EXSCAN:
        k00, k01 = n - me - 1, me
    elif cat == C_ALLGATHERV:
        k00, k10, m = n, n - 1, 2
    elif cat == C_SCATTERV and not is_root:
        k00, k01 = 0, 1
    else:
        k00 = 1
    have_first = False
    first = 0
    for i in range(m):
        ks, kr = (k00, k01) if i == 0 else (k10, k11)
        coef = 0
        total = 0
        if ks != NONE:
            coef += ks
            total += sent
        if kr != NONE:
            coef += kr
            total += received
        if coef == 0:
            continue
        b = total // coef
        fits = total % coef == 0
        if fits and ks != NONE and ks * b != sent:
            fits = False
        if fits and kr != NONE and kr * b != received:
            fits = False
        if fits:
            return b
        if not have_first:
            first, have_first = b, True
    return first


# The helpers convert calls per call or record are inlined and take no typed dict: convert is
# compiled without reference counting (otf2_rows), so they are too, and cannot allocate.
@njit(cache=True, inline="always")
def block(op, ops, own_ids, cid, slot, slots, members, rank, root, sent, received):
    """Rule *block*: hindsight's ``nbytes`` of a collective (``op`` the blocking op's code) on
    ``rank`` from its record's sizes: an archive hindsight wrote has sent = received = nbytes,
    times the communicator's size for ``TOTAL_OVER_PEERS``; others as Score-P writes them.
    ``slots[slot]``: (start, length) of the communicator's world ranks in ``members``."""
    self_comm = cid == tf.COMM_SELF_ID
    n = 1
    me = 0
    if not self_comm and slot >= 0 and slots[slot, 1] > 0:
        n = slots[slot, 1]
        for i in range(n):
            if members[slots[slot, 0] + i] == rank:
                me = i
                break
    if own_ids:
        return sent // n if ops[op, O_TOP] else sent
    return scorep_block(ops[op, O_CAT], sent, received, n, me, root == rank or self_comm)


@njit(cache=True, inline="always")
def _post(r, rid, comm, own_ids, state, next_req, req, tc):
    q = rid if own_ids else state[r, next_req]
    state[r, next_req] += 1
    _keep(req, tc, T_REQ, r, rid, q, comm)
    return q


@njit(cache=True, inline="always")
def _keep(t, counts, j, k0, k1, v0, v1):
    """Table ``t``'s entry (k0, k1) set to (v0, v1) (``counts[j]`` counts its entries)."""
    s = PT.put(t, counts, j, k0, k1)
    t[s, PT.VAL], t[s, PT.VAL + 1] = v0, v1


@njit(cache=True, inline="always")
def _put(rows, j, op, peer, tag, comm, nbytes, request, root):
    rows[W_OP, j], rows[W_PEER, j], rows[W_TAG, j], rows[W_COMM, j] = op, peer, tag, comm
    rows[W_NBYTES, j], rows[W_REQ, j], rows[W_ROOT, j] = nbytes, request, root


@njit(cache=True, inline="always")
def call_rows(r, branch, op, recs, nrec, ext, e0, ne, own_ids, state, next_req, req, nbc,
              nbc_done, tc, rows, n0, ops, named, slots, members, skipped, aux):
    """Rule *call rows*: the rows of one MPI call (op code ``op``, of ``branch``) from its
    ``nrec`` records and the rows its ATTR_ROWS carries (``ext[e0:e0 + ne]``: sorted, position
    and the ``W_OP``.. columns each) in their places, written to ``rows`` from column ``n0``
    (``recs[r]``: the records, ``state[r, next_req]``: the rank's next request id). Returns
    the number of rows, or -E_* with ``aux`` the error's request id and op codes.
    ``named``: the op codes at ``N_*``. The tables (``tc`` their
    entry counts) need room for ``nrec + ne`` entries each (``convert`` checks first)."""
    n = 0
    # a non-blocking collective's records in a call that cannot hold them: the post of a
    # collective hindsight has no op for, a completion outside MPI_Wait*/MPI_Test*
    for i in range(nrec):
        kind = recs[r, i, RK]
        if (kind == R_NBC_REQ and branch != B_NBC) or (
                kind == R_NBC_DONE and branch != B_COMPLETION):
            skipped[SK_NBC_EVENT] += 1
    if branch == B_SEND or branch == B_RECV or branch == B_PROBE:
        want = R_SEND if branch == B_SEND else R_RECV if branch == B_RECV else R_PROBE
        for i in range(nrec):
            if recs[r, i, RK] == want:
                _put(rows, n0, op, recs[r, i, RA], recs[r, i, RB], recs[r, i, RC],
                     recs[r, i, RD], -1, -1)
                n = 1
                break
    elif branch == B_NBSEND or branch == B_IRECV or branch == B_START:
        # every record posts its request and gives its row (MPI_Startall posts several, and
        # an exporter may write two posts of one time as one call): a post without its row
        # would leave its completion unpaired
        for i in range(nrec):
            kind = recs[r, i, RK]
            if branch == B_START and (kind == R_SEND or kind == R_IRECV_REQ):
                code = named[N_ISEND] if kind == R_SEND else named[N_IRECV]
            elif (branch == B_NBSEND and kind == R_SEND) or (
                    branch == B_IRECV and kind == R_IRECV_REQ):
                code = op
            else:
                continue
            q = _post(r, recs[r, i, RF], recs[r, i, RC], own_ids, state, next_req, req, tc)
            _put(rows, n0 + n, code, recs[r, i, RA], recs[r, i, RB], recs[r, i, RC],
                 recs[r, i, RD], q, -1)
            n += 1
    elif branch == B_SENDRECV:
        for i in range(nrec):
            kind = recs[r, i, RK]
            if kind == R_SEND or kind == R_RECV:
                _put(rows, n0 + n, named[N_SR_SEND] if kind == R_SEND else named[N_SR_RECV],
                     recs[r, i, RA], recs[r, i, RB], recs[r, i, RC], recs[r, i, RD], -1, -1)
                n += 1
        if n + ne != 2:
            n = 0       # both halves or none
    elif branch == B_NBC:
        for i in range(nrec):
            if recs[r, i, RK] == R_NBC_REQ and n == 0:
                rid = recs[r, i, RF]
                q = rid if own_ids else state[r, next_req]
                state[r, next_req] += 1
                _keep(nbc, tc, T_NBC, r, rid, q, op)
                _put(rows, n0, op, -1, -1, NBC_PENDING, -1, q, -1)
                n = 1
    elif branch == B_COMPLETION:
        for i in range(nrec):
            kind = recs[r, i, RK]
            rid = recs[r, i, RF]
            if kind == R_RECV or kind == R_ISEND_DONE:
                s = PT.find(req, r, rid)
                if s < 0:
                    aux[0], aux[1] = rid, kind
                    return -E_NEVER_POSTED
                q, comm = req[s, PT.VAL], req[s, PT.VAL + 1]
                PT.remove(req, tc, T_REQ, s)
                if kind == R_RECV:
                    _put(rows, n0 + n, op, recs[r, i, RA], recs[r, i, RB], recs[r, i, RC],
                         recs[r, i, RD], q, -1)
                else:
                    _put(rows, n0 + n, op, -1, -1, comm, -1, q, -1)
                n += 1
            elif kind == R_NBC_DONE and PT.find(nbc, r, rid) < 0:
                skipped[SK_NBC_EVENT] += 1     # the completion of a post skipped above
            elif kind == R_NBC_DONE:
                s = PT.find(nbc, r, rid)
                q, posted = nbc[s, PT.VAL], nbc[s, PT.VAL + 1]
                PT.remove(nbc, tc, T_NBC, s)
                want = ops[posted, O_COLL_NAME]
                if want == -2:
                    aux[0], aux[1] = rid, posted
                    return -E_NBC_KEY
                if recs[r, i, RB] != want:
                    aux[0], aux[1], aux[2] = rid, posted, recs[r, i, RB]
                    return -E_NBC_OP
                d = PT.put(nbc_done, tc, T_DONE, r, q)
                v = PT.VAL
                nbc_done[d, v], nbc_done[d, v + 1], nbc_done[d, v + 2] = \
                    recs[r, i, RC], recs[r, i, RG], recs[r, i, RD]
                nbc_done[d, v + 3], nbc_done[d, v + 4] = recs[r, i, RE], recs[r, i, RA]
                _put(rows, n0 + n, op, -1, -1, recs[r, i, RC], -1, q, -1)
                n += 1
    elif branch == B_COMM:
        for i in range(nrec):
            if recs[r, i, RK] == R_COMM_NEW:
                _put(rows, n0, op, recs[r, i, RA], -1, recs[r, i, RC], -1, -1, -1)
                n = 1
                break
    elif branch == B_COLL:
        for i in range(nrec):
            if recs[r, i, RK] == R_COLL:
                root = recs[r, i, RA] if ops[op, O_ROOTED] else -1
                nb = block(op, ops, own_ids, recs[r, i, RC], recs[r, i, RG], slots, members, r,
                           root, recs[r, i, RD], recs[r, i, RE])
                _put(rows, n0, op, -1, -1, recs[r, i, RC], nb, -1, root)
                n = 1
                break
    for e in range(e0, e0 + ne):
        # rows without a record (MPI_PROC_NULL peers, ...) in their places among the call's
        pos, xop, comm, rq = ext[e, X_POS], ext[e, X_OP], ext[e, X_COMM], ext[e, X_REQ]
        if rq >= 0 and ops[xop, O_ENDS_REQ]:
            s = PT.find(req, r, rq)
            if s >= 0:
                PT.remove(req, tc, T_REQ, s)
        elif rq >= 0:
            _keep(req, tc, T_REQ, r, rq, rq, comm)
        # list.insert's place
        if pos < 0:
            pos = max(pos + n, 0)
        pos = min(pos, n)
        for j in range(n0 + n, n0 + pos, -1):
            for c in range(W_OP, NCOL):
                rows[c, j] = rows[c, j - 1]
        _put(rows, n0 + pos, xop, ext[e, X_PEER], ext[e, X_TAG], comm, ext[e, X_NBYTES], rq,
             ext[e, X_ROOT])
        n += 1
    return n
