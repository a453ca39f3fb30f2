"""The OTF2 exporter as it was before its event loop was compiled (``otf2_native``): one ``otf2``
package call per record. Kept here, not in the product, as the reference the compiled exporter
must match byte for byte (tests/test_otf2_native.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from hindsight import trace as tf
from hindsight.interop.otf2 import (
    ARCHIVE_NAME,
    ATTR_COMM,
    ATTR_CPU,
    ATTR_IRECV_BYTES,
    ATTR_NBYTES,
    ATTR_NEW_COMM,
    ATTR_ROWS,
    ATTR_SIZE,
    ATTR_SOURCE,
    ATTR_TAG,
    COLLECTIVE_OPS_OTF2,
    ROW_FIELDS,
    TESTBED_NODE,
    TOTAL_OVER_PEERS,
    UNDEFINED_ROOT,
    UNDEFINED_UINT64,
    OtfError,
    format_rows,
)
from hindsight.interop.timeline import Timeline, read_timeline


def _role(op: str):
    import otf2
    R = otf2.RegionRole
    if op in tf.COLLECTIVE_OPS:
        op = tf.BLOCKING_OF.get(op, op)
        if op == "Barrier":
            return R.BARRIER
        if op in ("Bcast", "Scatter", "Scatterv"):
            return R.COLL_ONE2ALL
        if op in ("Reduce", "Gather", "Gatherv"):
            return R.COLL_ALL2ONE
        return R.COLL_ALL2ALL
    if op == "region":
        return R.FUNCTION
    return R.POINT2POINT


def reference_export_otf2(trace_dir: Path | str, out_dir: Path | str, table: pa.Table | None = None,
                manifest: dict | None = None) -> Path:
    """Write ``out_dir/traces.otf2`` (+ ``traces.def``, ``traces/``). ``table``/``manifest`` may
    be given (e.g. a replayed timeline); otherwise the trace is read. Returns the anchor path."""
    import otf2

    if table is None:
        tr = tf.read_trace(trace_dir)
        table, manifest = tr.table, tr.manifest
    out_dir = Path(out_dir)
    anchor = out_dir / f"{ARCHIVE_NAME}.otf2"
    if anchor.exists():
        raise OtfError(f"{anchor}: exists already (choose a new --out)")
    out_dir.mkdir(parents=True, exist_ok=True)
    tl = read_timeline(table)
    rank, op, region, ts = tl.rank, tl.op, tl.region, tl.t_start
    nranks = int(manifest.get("ranks") or (rank.max() + 1 if len(rank) else 0))
    t0 = min(int(ts.min()) if len(ts) else 0, 0)

    comms = {int(k): list(v) for k, v in (manifest.get("communicators") or {}).items()
             if v is not None}
    comms.setdefault(0, list(range(nranks)))
    hosts = manifest.get("hosts") or {"localhost": list(range(nranks))}

    with otf2.writer.open(str(out_dir), archive_name=ARCHIVE_NAME, timer_resolution=10**9) as w:
        d = w.definitions
        root = d.system_tree_node("machine")
        host_node = {}
        # a testbed run's ranks share a host but each node has its own link (replay places
        # ranks by node): the node is a level of the system tree below its host
        node_of = (manifest.get("network") or {}).get("node_of_rank")
        for h, rs in sorted(hosts.items()):
            node = d.system_tree_node(str(h), parent=root)
            for r in rs:
                host_node[int(r)] = node
            if node_of is not None:
                sub = {k: d.system_tree_node(f"{TESTBED_NODE} {k}", parent=node)
                       for k in sorted({int(node_of[int(r)]) for r in rs})}
                for r in rs:
                    host_node[int(r)] = sub[int(node_of[int(r)])]
        locs = []
        for r in range(nranks):
            grp = d.location_group(f"rank {r}", system_tree_parent=host_node.get(r, root))
            locs.append(d.location("Master thread", group=grp))
        world_locs = d.group("COMM_LOCATIONS", group_type=otf2.GroupType.COMM_LOCATIONS,
                             paradigm=otf2.Paradigm.MPI, members=locs)
        assert world_locs is not None
        comm_def = {}
        rank_in = {}
        for cid, members in sorted(comms.items()):
            name = "MPI_COMM_WORLD" if cid == 0 else f"MPI_COMM_{cid}"
            g = d.group(f"{name} group", group_type=otf2.GroupType.COMM_GROUP,
                        paradigm=otf2.Paradigm.MPI, members=[int(m) for m in members])
            comm_def[cid] = d.comm(name, group=g, parent=comm_def.get(0) if cid else None)
            rank_in[cid] = {int(m): i for i, m in enumerate(members)}
        self_group = d.group("MPI_COMM_SELF group", group_type=otf2.GroupType.COMM_SELF,
                             paradigm=otf2.Paradigm.MPI, members=[])
        comm_def[tf.COMM_SELF_ID] = d.comm("MPI_COMM_SELF", group=self_group)
        rank_in[tf.COMM_SELF_ID] = None
        regions: dict[str, Any] = {}
        # What an Irecv named when posted (OTF2's MpiIrecvRequest has no source/tag); the
        # importer reads these back, other readers show them as attributes.
        a_src = d.attribute(ATTR_SOURCE, "source named by the Irecv (-2 = MPI_ANY_SOURCE)",
                            type=otf2.Type.INT32)
        a_tag = d.attribute(ATTR_TAG, "tag named by the Irecv (-2 = MPI_ANY_TAG)",
                            type=otf2.Type.INT32)
        # Communicator creation has no OTF2 record in this API version: parent and new ids
        # travel as attributes of the call's Enter.
        a_comm = d.attribute(ATTR_COMM, "communicator id of an Irecv, parent communicator id of "
                             "MPI_Comm_* calls",
                             type=otf2.Type.INT64)
        a_new = d.attribute(ATTR_NEW_COMM, "id of the communicator an MPI_Comm_* call created",
                            type=otf2.Type.INT64)
        a_size = d.attribute(ATTR_SIZE, "work size of an application region (hindsight nbytes)",
                             type=otf2.Type.INT64)
        a_cpu = d.attribute(ATTR_CPU, "CPU time of the recording thread in the region/call (ns)",
                            type=otf2.Type.INT64)
        a_rbytes = d.attribute(ATTR_IRECV_BYTES, "buffer size named by the Irecv (bytes)",
                               type=otf2.Type.INT64)
        a_nbytes = d.attribute(ATTR_NBYTES, "bytes of the message a probe found",
                               type=otf2.Type.INT64)
        # Rows no OTF2 record carries (MPI_PROC_NULL peers, ...): the importer reads them back
        a_rows = d.attribute(ATTR_ROWS, "rows of the call without an OTF2 record "
                             "(position:op:peer:tag:comm:nbytes:request:root;...)",
                             type=otf2.Type.STRING)

        def region_def(name: str, mpi: bool, role):
            key = ("MPI_" + name) if mpi else name
            if key not in regions:
                regions[key] = d.region(key, paradigm=otf2.Paradigm.MPI if mpi
                                        else otf2.Paradigm.USER, region_role=role)
            return regions[key]

        def local(cid: int, world: int, r: int) -> int:
            if cid not in comm_def:
                raise OtfError(f"{trace_dir}: rank {r} uses communicator {cid}, which the manifest "
                               "does not define")
            if rank_in[cid] is None:
                return 0
            if world not in rank_in[cid]:
                raise OtfError(f"{trace_dir}: rank {world} is not a member of communicator {cid}")
            return rank_in[cid][world]

        bounds = np.searchsorted(rank, np.arange(nranks + 1))
        for r in range(nranks):
            evw = w.event_writer_from_location(locs[r])
            lo, hi = int(bounds[r]), int(bounds[r + 1])
            last_t = 0
            for t, _, kind, payload in _rank_events(range(lo, hi), tl):
                # OTF2 needs non-decreasing times per location (replayed rows may overlap)
                t = max(int(t - t0), last_t)
                last_t = t
                if kind == "enter_region":
                    nb = int(tl.nbytes[payload])
                    evw.enter(t, region_def(region[payload] or "region", False, _role("region")),
                              attributes={a_size: nb} if nb >= 0 else None)
                elif kind == "leave_region":
                    cpu = int(tl.cpu_ns[payload])
                    evw.leave(t, region_def(region[payload] or "region", False, _role("region")),
                              attributes={a_cpu: cpu} if cpu >= 0 else None)
                elif kind == "enter":
                    payload, extras = payload
                    name = tf.OPS[op[payload]]
                    name = "Sendrecv" if name.startswith("Sendrecv") else name
                    attrs = {a_comm: int(tl.comm[payload]), a_new: int(tl.peer[payload])} \
                        if name in tf.COMM_OPS else {}
                    if extras:
                        attrs[a_rows] = format_rows([(pos, tf.OPS[op[i]], *(
                            int(getattr(tl, c)[i]) for c in ROW_FIELDS[1:]))
                            for pos, i in extras])
                    evw.enter(t, region_def(name, True, _role(name)), attributes=attrs or None)
                    if name in COLLECTIVE_OPS_OTF2:    # (a blocking collective OTF2 names)
                        evw.mpi_collective_begin(t)
                elif kind == "leave":
                    name = tf.OPS[op[payload]]
                    name = "Sendrecv" if name.startswith("Sendrecv") else name
                    cpu = int(tl.cpu_ns[payload])
                    evw.leave(t, region_def(name, True, _role(name)),
                              attributes={a_cpu: cpu} if cpu >= 0 else None)
                elif kind == "in_enter":
                    continue
                else:  # an MPI record inside a call
                    # (a non-blocking collective's completion also names its post row p)
                    i, p = payload if kind == "nbc_complete" else (payload, -1)
                    name = tf.OPS[op[i]]
                    cid = int(tl.comm[i])
                    nb = max(int(tl.nbytes[i]), 0)
                    tag = max(int(tl.tag[i]), 0)
                    if kind == "send":
                        evw.mpi_send(t, local(cid, int(tl.peer[i]), r), comm_def[cid], tag, nb)
                    elif kind == "isend":
                        evw.mpi_isend(t, local(cid, int(tl.peer[i]), r), comm_def[cid], tag, nb,
                                      int(tl.request[i]))
                    elif kind == "irecv_request":
                        evw.mpi_irecv_request(t, int(tl.request[i]), attributes={
                            a_src: int(tl.peer[i]), a_tag: int(tl.tag[i]),
                            a_rbytes: int(tl.nbytes[i]), a_comm: int(tl.comm[i])})
                    elif kind == "recv":
                        evw.mpi_recv(t, local(cid, int(tl.peer[i]), r), comm_def[cid], tag, nb)
                    elif kind == "isend_complete":
                        evw.mpi_isend_complete(t, int(tl.request[i]))
                    elif kind == "irecv":
                        evw.mpi_irecv(t, local(cid, int(tl.peer[i]), r), comm_def[cid], tag, nb,
                                      int(tl.request[i]))
                    elif kind == "probe":
                        peer, tag = int(tl.peer[i]), int(tl.tag[i])
                        evw.mpi_probe(t, local(cid, peer, r) if peer >= 0 else UNDEFINED_ROOT,
                                      comm_def[cid], tag if tag >= 0 else UNDEFINED_ROOT,
                                      UNDEFINED_UINT64,
                                      attributes={a_nbytes: int(tl.nbytes[i])})
                    elif kind == "nbc_request":
                        evw.non_blocking_collective_request(t, int(tl.request[i]))
                    elif kind == "nbc_complete":
                        name = tf.BLOCKING_OF[tf.OPS[op[p]]]
                        nbp = max(int(tl.nbytes[p]), 0)
                        size = len(comms.get(cid) or [0]) if cid != tf.COMM_SELF_ID else 1
                        total = nbp * (size if name in TOTAL_OVER_PEERS else 1)
                        root = int(tl.root[p])
                        evw.non_blocking_collective_complete(
                            t, getattr(otf2.CollectiveOp, COLLECTIVE_OPS_OTF2[name]), comm_def[cid],
                            local(cid, root, r) if root >= 0 else UNDEFINED_ROOT, total, total,
                            int(tl.request[i]))
                    elif kind == "coll_end":
                        size = len(comms.get(cid) or [0]) if cid != tf.COMM_SELF_ID else 1
                        total = nb * (size if name in TOTAL_OVER_PEERS else 1)
                        root = int(tl.root[i])
                        evw.mpi_collective_end(
                            t, getattr(otf2.CollectiveOp, COLLECTIVE_OPS_OTF2[name]), comm_def[cid],
                            local(cid, root, r) if root >= 0 else UNDEFINED_ROOT, total, total)
    return anchor


def _completed_collectives(rows: list[int], tl: Timeline) -> set[int]:
    """The requests of one rank's non-blocking collectives whose completion row a
    NonBlockingCollectiveComplete carries: only those posts are a NonBlockingCollectiveRequest,
    since the Complete gives the post's comm, root and size; another post (never completed, as
    on a rank that ended early) travels whole in its call's ATTR_ROWS."""
    posted: dict[int, int] = {}    # request -> comm of its post
    done = set()
    for i in rows:
        name, req = tf.OPS[tl.op[i]], int(tl.request[i])
        fields = (int(tl.peer[i]), int(tl.tag[i]), int(tl.nbytes[i]))
        if name in tf.NONBLOCKING_COLLECTIVE_OPS and req >= 0 and fields[:2] == (-1, -1) \
                and fields[2] >= 0:
            posted[req] = int(tl.comm[i])
        elif name in tf.COMPLETION_OPS and fields == (-1, -1, -1) and \
                posted.get(req) == int(tl.comm[i]):
            done.add(req)
    return done


def _record_kind(tl: Timeline, i: int, post: dict[int, tuple], start: int, end: int,
                 completed: set[int]) -> tuple[str | None, int]:
    """The OTF2 record that carries row ``i`` of a call [start, end] and its time, or (None, 0)
    for a row no record can carry exactly (the row then travels in the call's ATTR_ROWS).
    ``completed``: the requests of the collectives whose completion is a record
    (``_completed_collectives``)."""
    name = tf.OPS[tl.op[i]]
    peer, tag, nb = int(tl.peer[i]), int(tl.tag[i]), int(tl.nbytes[i])
    req = int(tl.request[i])
    # a message record names a real peer (not MPI_PROC_NULL), a tag and a size
    message = peer >= 0 and tag >= 0 and nb >= 0
    if name in ("Send", "Ssend", "Bsend", "Rsend", "Sendrecv_send"):
        return ("send", start) if message else (None, 0)
    if name in tf.NONBLOCKING_SEND_OPS:
        post[req] = (True, int(tl.comm[i]))
        return ("isend", start) if message else (None, 0)
    if name == "Irecv":
        post[req] = (False, int(tl.comm[i]))
        return "irecv_request", start
    if name in ("Recv", "Sendrecv_recv"):
        return ("recv", end) if message else (None, 0)
    if name in ("Probe", "Iprobe"):
        return ("probe", end) if peer != -1 and tag != -1 else (None, 0)
    if name in tf.NONBLOCKING_COLLECTIVE_OPS and tf.BLOCKING_OF[name] in COLLECTIVE_OPS_OTF2:
        # the completion carries op, root and sizes (OTF2 NonBlockingCollectiveComplete; a
        # neighbourhood collective has no OTF2 op: its rows travel as attributes)
        if req not in completed:
            return None, 0
        post[req] = ("coll", int(tl.comm[i]), i)
        return "nbc_request", start
    if name in tf.COMPLETION_OPS:
        posted = post.get(req, (None, None))
        if posted[0] == "coll":
            exact = (peer, tag, nb) == (-1, -1, -1) and int(tl.comm[i]) == posted[1]
            return ("nbc_complete", end) if exact else (None, 0)
        is_send, comm = posted
        if is_send and (peer, tag, nb) == (-1, -1, -1) and int(tl.comm[i]) == comm:
            return "isend_complete", end
        if is_send is False and message:
            return "irecv", end
        return None, 0
    if name in COLLECTIVE_OPS_OTF2:
        return ("coll_end", end) if nb >= 0 and peer == -1 and tag == -1 else (None, 0)
    if name in tf.COMM_OPS:
        return "in_enter", start    # its Enter's attributes carry the row
    return None, 0


def _rank_events(rows: range, tl: Timeline) -> list[tuple[int, int, str, int]]:
    """(time, order, kind, payload row) for one rank's ``rows``, in write order: properly nested
    Enter/Leave (a region's children are clamped to it) with the MPI records inside their
    call."""
    op, ts, te = tl.op, tl.t_start, tl.t_end
    # request -> (a send?, communicator) of its post, or ("coll", communicator, post row)
    post: dict[int, tuple] = {}
    calls = []           # (start, end, is_region, payload rows)
    rows = list(rows)
    completed = _completed_collectives(rows, tl)
    k = 0
    while k < len(rows):
        i = rows[k]
        if op[i] == 0:
            calls.append((int(ts[i]), int(te[i]), True, [i]))
            k += 1
            continue
        grp = [i]
        while k + 1 < len(rows):
            j = rows[k + 1]
            same = ts[j] == ts[i] and te[j] == te[i] and op[j] != 0 and (
                op[j] == op[i] or (tf.OPS[op[i]] == "Sendrecv_send"
                                   and tf.OPS[op[j]] == "Sendrecv_recv"))
            if not same:
                break
            grp.append(j)
            k += 1
        calls.append((int(ts[i]), int(te[i]), False, grp))
        k += 1
    # MPI calls of a rank must not overlap (a replayed timeline may have them overlap by
    # rounding): a call ends at the latest when the next one starts
    mpi = [k for k, cl in enumerate(calls) if not cl[2]]
    for a, b in zip(mpi, mpi[1:]):
        s0, e0, reg, grp = calls[a]
        calls[a] = (s0, max(s0, min(e0, calls[b][0])), reg, grp)
    # by start; at a tie regions first (longer = outer first) and MPI calls in record order
    # (a zero-length Irecv before an Isend at the same time must stay before it, not inside)
    calls = [(*cl, k) for k, cl in enumerate(calls)]
    calls.sort(key=lambda x: (x[0], 0 if x[2] else 1, -x[1] if x[2] else 0, x[4]))
    out = []
    stack: list[int] = []  # end times of open intervals
    names: list[tuple] = []
    n = 0

    def close_until(t):
        nonlocal n
        while stack and stack[-1] <= t:
            end = stack.pop()
            kind, payload = names.pop()
            out.append((end, n, kind, payload))
            n += 1

    for start, end, is_region, grp, _ in calls:
        close_until(start)
        # a child that outlasts its parent (clock granularity, interpolated replay times) is
        # clamped into it: OTF2 needs proper nesting
        if stack and end > stack[-1]:
            end = stack[-1]
        if is_region:
            out.append((start, n, "enter_region", grp[0]))
            n += 1
            stack.append(end)
            names.append(("leave_region", grp[0]))
            continue
        first = grp[0]
        enter_at = len(out)
        out.append((start, n, "enter", (first, [])))
        n += 1
        extras = []     # (position in the call, row) of rows no OTF2 record carries
        for pos, i in enumerate(grp):
            kind, t = _record_kind(tl, i, post, start, end, completed)
            if kind is None:
                extras.append((pos, i))
            elif kind == "nbc_complete":
                out.append((t, n, kind, (i, post[int(tl.request[i])][2])))
            else:
                out.append((t, n, kind, i))
            n += 1
        out[enter_at] = (start, out[enter_at][1], "enter", (first, extras))
        stack.append(end)
        names.append(("leave", first))
    close_until(float("inf"))
    return out
