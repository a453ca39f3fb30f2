"""The rows of one MPI call of an imported OTF2 archive (``otf2_import``), from the records
inside it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from hindsight import trace as tf
from hindsight.interop.otf2 import COLLECTIVE_OPS_OTF2, OtfError


def call_rows(r: int, s: dict, name: str, recs: list[tuple], extras: list[tuple],
               anchor: Path, own_ids: bool, skipped: Counter) -> list[tuple]:
    """The rows of one MPI call, (op, peer, tag, comm, nbytes, request, root) each, from its
    records (see the module docstring) and the rows its ATTR_ROWS carries in their places. A
    non-blocking collective's post row has comm ``None``: its NonBlockingCollectiveComplete,
    in a later call, gives comm, nbytes and root (``s["nbc_done"]``)."""
    req = s["req"]           # OTF2 request id -> (hindsight request, communicator of the post)
    nbc = s["nbc"]           # OTF2 request id -> (hindsight request, op) of a collective's post

    def new_request(otf_id: int) -> int:
        # an archive hindsight wrote keeps its request ids; others get 0, 1, ... per rank
        q = otf_id if own_ids else s["next_req"]
        s["next_req"] += 1
        return q

    def post(otf_id: int, comm: int) -> int:
        q = new_request(otf_id)
        req[otf_id] = (q, comm)
        return q

    def complete(rid: int) -> tuple[int, int]:
        if rid not in req:
            raise OtfError(f"{anchor}: rank {r}: MPI_{name} completes request {rid}, "
                           "which was never posted")
        return req.pop(rid)

    # a non-blocking collective's records in a call that cannot hold them: the post of a
    # collective hindsight has no op for (MPI_Comm_idup, MPI_Ialltoallw, MPI_Ineighbor_*, ...),
    # a completion outside MPI_Wait*/MPI_Test*
    for kind, *_ in recs:
        if (kind == "nbc_request" and name not in tf.NONBLOCKING_COLLECTIVE_OPS) or (
                kind == "nbc_complete" and name not in tf.COMPLETION_OPS):
            skipped["non-blocking collective event"] += 1
    rows: list[tuple] = []
    if name in ("Send", "Ssend", "Bsend", "Rsend"):
        rows = [(name, peer, tag, comm, nb, -1, -1)
                for kind, peer, tag, comm, nb, _ in recs if kind == "send"][:1]
    elif name in tf.NONBLOCKING_SEND_OPS:
        rows = [(name, peer, tag, comm, nb, post(rid, comm), -1)
                for kind, peer, tag, comm, nb, rid in recs if kind == "send"][:1]
    elif name == "Irecv":
        # OTF2 does not record what the Irecv named (unless hindsight wrote the archive:
        # attributes); otherwise it is ANY, and the completion row has the truth
        rows = [("Irecv", src, tag, comm, nb, post(rid, comm), -1)
                for kind, src, tag, comm, nb, rid in recs if kind == "irecv_request"][:1]
    elif name == "Recv":
        rows = [("Recv", peer, tag, comm, nb, -1, -1)
                for kind, peer, tag, comm, nb, _ in recs if kind == "recv"][:1]
    elif name in ("Probe", "Iprobe"):
        rows = [(name, peer, tag, comm, nb, -1, -1)
                for kind, peer, tag, comm, nb, _ in recs if kind == "probe"][:1]
    elif name == "Sendrecv" or name == "Sendrecv_replace":
        rows = [("Sendrecv_send" if kind == "send" else "Sendrecv_recv", peer, tag, comm, nb, -1,
                 -1) for kind, peer, tag, comm, nb, _ in recs if kind in ("send", "recv")]
        if len(rows) + len(extras) != 2:
            rows = []       # both halves or none
    elif name in tf.NONBLOCKING_COLLECTIVE_OPS:
        for kind, *_, rid in recs:
            if kind == "nbc_request" and not rows:
                nbc[rid] = new_request(rid), name
                rows = [(name, -1, -1, None, -1, nbc[rid][0], -1)]
    elif name in tf.COMPLETION_OPS:
        for kind, peer, tag, comm, nb, rid in recs:
            if kind == "recv":
                rows.append((name, peer, tag, comm, nb, complete(rid)[0], -1))
            elif kind == "isend_complete":
                q, comm = complete(rid)
                rows.append((name, -1, -1, comm, -1, q, -1))
            elif kind == "nbc_complete" and rid not in nbc:
                # the completion of a post skipped above
                skipped["non-blocking collective event"] += 1
            elif kind == "nbc_complete":
                q, posted = nbc.pop(rid)
                if tag != COLLECTIVE_OPS_OTF2[tf.BLOCKING_OF[posted]]:
                    raise OtfError(f"{anchor}: rank {r}: MPI_{name} completes request {rid} of "
                                   f"an MPI_{posted} with a {tag} NonBlockingCollectiveComplete")
                s["nbc_done"][q] = (comm, nb, peer)
                rows.append((name, -1, -1, comm, -1, q, -1))
    elif name in tf.COMM_OPS:
        rows = [(name, new, -1, comm, -1, -1, -1)
                for kind, new, _, comm, _, _ in recs if kind == "comm_create"][:1]
    elif name in tf.COLLECTIVE_OPS:
        rows = [(name, -1, -1, comm, nb, -1, root if name in tf.ROOTED_OPS else -1)
                for kind, root, _, comm, nb, _ in recs if kind == "coll"][:1]
    for pos, op, peer, tag, comm, nb, rq, root in sorted(extras):
        # rows without a record (MPI_PROC_NULL peers, ...) in their places among the call's
        if rq >= 0 and (op in tf.COMPLETION_OPS or op in tf.FREE_OPS):
            req.pop(rq, None)
        elif rq >= 0:
            req[rq] = (rq, comm)
        rows.insert(pos, (op, peer, tag, comm, nb, rq, root))
    return rows
