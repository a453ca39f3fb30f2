"""OTF2 (Score-P's Open Trace Format 2): export a trace as an archive, import an archive.

Export writes, with the PyPI ``otf2`` package, an archive of one location per rank (a process
location group under its host's system-tree node), ``Enter``/``Leave`` for every MPI call (regions
``MPI_<op>``, paradigm MPI) and every application region, and the MPI records Score-P writes:
``MpiSend``/``MpiRecv`` inside blocking calls, ``MpiIsend``/``MpiIrecvRequest`` at a post and
``MpiIsendComplete``/``MpiIrecv`` inside the call that completes the request, and
``MpiCollectiveBegin``/``MpiCollectiveEnd`` around collectives. Every communicator is defined as a
``COMM_GROUP`` over the one ``COMM_LOCATIONS`` group of all ranks (without that, readers such as
``otf2-print`` and Vampir report invalid references); ``COMM_SELF`` is a ``COMM_SELF`` group.
Peers in MPI records are ranks *within the communicator*, as OTF2 specifies. Timer: 1 tick = 1 ns.

Import reads any MPI archive (e.g. one Score-P recorded from a C or Fortran program) into hindsight
rows: ranks are the positions in the MPI ``COMM_LOCATIONS`` group; MPI calls hindsight has no op for
(``MPI_Init``, ``MPI_Comm_rank``, ...) are skipped (their time counts as computation); non-MPI
regions become ``region`` rows. It fails with ``OtfError`` on a file that is not an OTF2 anchor, on
missing definitions, on records it cannot place, and on messages that do not match.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from hindsight import trace as tf
from hindsight.errors import DataError

ARCHIVE_NAME = "traces"
# hindsight collective op -> OTF2 CollectiveOp name; the per-process "block" of hindsight's nbytes
# times the communicator size for the ops whose OTF2 sizes are totals over all peers.
_COLL = {"Barrier": "BARRIER", "Bcast": "BCAST", "Reduce": "REDUCE", "Allreduce": "ALLREDUCE",
         "Gather": "GATHER", "Gatherv": "GATHERV", "Scatter": "SCATTER", "Scatterv": "SCATTERV",
         "Allgather": "ALLGATHER", "Allgatherv": "ALLGATHERV", "Alltoall": "ALLTOALL",
         "Alltoallv": "ALLTOALLV", "Scan": "SCAN", "Exscan": "EXSCAN",
         "Reduce_scatter": "REDUCE_SCATTER", "Reduce_scatter_block": "REDUCE_SCATTER_BLOCK"}
ATTR_SOURCE = "hindsight::irecv_source"
ATTR_TAG = "hindsight::irecv_tag"
ATTR_COMM = "hindsight::comm"
ATTR_SIZE = "hindsight::size"
ATTR_CPU = "hindsight::cpu_ns"
ATTR_IRECV_BYTES = "hindsight::irecv_bytes"
ATTR_NEW_COMM = "hindsight::new_comm"
UNDEFINED_ROOT = 0xFFFFFFFF    # OTF2_UNDEFINED_UINT32: a collective without a root
_TIMES_P = {"Gather", "Scatter", "Allgather", "Alltoall", "Reduce_scatter_block"}


class OtfError(DataError, ValueError):
    """An OTF2 archive that cannot be imported; the message names the file and the problem."""


def _role(op: str):
    import otf2
    R = otf2.RegionRole
    if op in tf.COLLECTIVE_OPS:
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


# ------------------------------------------------------------------------------------------------
# Export


def export_otf2(trace_dir: Path | str, out_dir: Path | str, table=None,
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
    table = tf.sort_rows(table)
    rank = table.column("rank").to_numpy().astype(np.int64)
    nranks = int(manifest.get("ranks") or (rank.max() + 1 if len(rank) else 0))
    from replay.matching import op_codes
    op = op_codes(table).astype(np.int64)
    region = table.column("region").to_pylist()
    ts = table.column("t_start").to_numpy().astype(np.int64)
    te = table.column("t_end").to_numpy().astype(np.int64)
    c = {k: table.column(k).to_numpy().astype(np.int64)
         for k in ("peer", "tag", "comm", "nbytes", "request", "root", "cpu_ns")}
    t0 = min(int(ts.min()) if len(ts) else 0, 0)

    comms = {int(k): list(v) for k, v in (manifest.get("communicators") or {}).items()
             if v is not None}
    comms.setdefault(0, list(range(nranks)))
    hosts = manifest.get("hosts") or {"localhost": list(range(nranks))}

    with otf2.writer.open(str(out_dir), archive_name=ARCHIVE_NAME, timer_resolution=10**9) as w:
        d = w.definitions
        root = d.system_tree_node("machine")
        host_node = {}
        for h, rs in sorted(hosts.items()):
            node = d.system_tree_node(str(h), parent=root)
            for r in rs:
                host_node[int(r)] = node
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
        a_comm = d.attribute(ATTR_COMM, "parent communicator id of MPI_Comm_* calls",
                             type=otf2.Type.INT64)
        a_new = d.attribute(ATTR_NEW_COMM, "id of the communicator an MPI_Comm_* call created",
                            type=otf2.Type.INT64)
        a_size = d.attribute(ATTR_SIZE, "work size of an application region (hindsight nbytes)",
                             type=otf2.Type.INT64)
        a_cpu = d.attribute(ATTR_CPU, "CPU time of the recording thread in the region/call (ns)",
                            type=otf2.Type.INT64)
        a_rbytes = d.attribute(ATTR_IRECV_BYTES, "buffer size named by the Irecv (bytes)",
                               type=otf2.Type.INT64)

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
            for t, _, kind, payload in _rank_events(range(lo, hi), op, region, ts, te, c):
                # OTF2 needs non-decreasing times per location (replayed rows may overlap)
                t = max(int(t - t0), last_t)
                last_t = t
                if kind == "enter_region":
                    nb = int(c["nbytes"][payload])
                    evw.enter(t, region_def(region[payload] or "region", False, _role("region")),
                              attributes={a_size: nb} if nb >= 0 else None)
                elif kind == "leave_region":
                    cpu = int(c["cpu_ns"][payload])
                    evw.leave(t, region_def(region[payload] or "region", False, _role("region")),
                              attributes={a_cpu: cpu} if cpu >= 0 else None)
                elif kind == "enter":
                    name = tf.OPS[op[payload]]
                    name = "Sendrecv" if name.startswith("Sendrecv") else name
                    attrs = {a_comm: int(c["comm"][payload]), a_new: int(c["peer"][payload])} \
                        if name in tf.COMM_OPS else None
                    evw.enter(t, region_def(name, True, _role(name)), attributes=attrs)
                    if name in tf.COLLECTIVE_OPS:
                        evw.mpi_collective_begin(t)
                elif kind == "leave":
                    name = tf.OPS[op[payload]]
                    name = "Sendrecv" if name.startswith("Sendrecv") else name
                    cpu = int(c["cpu_ns"][payload])
                    evw.leave(t, region_def(name, True, _role(name)),
                              attributes={a_cpu: cpu} if cpu >= 0 else None)
                else:  # an MPI record inside a call
                    i = payload
                    name = tf.OPS[op[i]]
                    cid = int(c["comm"][i])
                    nb = max(int(c["nbytes"][i]), 0)
                    tag = max(int(c["tag"][i]), 0)
                    if kind == "send":
                        evw.mpi_send(t, local(cid, int(c["peer"][i]), r), comm_def[cid], tag, nb)
                    elif kind == "isend":
                        evw.mpi_isend(t, local(cid, int(c["peer"][i]), r), comm_def[cid], tag, nb,
                                      int(c["request"][i]))
                    elif kind == "irecv_request":
                        evw.mpi_irecv_request(t, int(c["request"][i]), attributes={
                            a_src: int(c["peer"][i]), a_tag: int(c["tag"][i]),
                            a_rbytes: int(c["nbytes"][i])})
                    elif kind == "recv":
                        evw.mpi_recv(t, local(cid, int(c["peer"][i]), r), comm_def[cid], tag, nb)
                    elif kind == "isend_complete":
                        evw.mpi_isend_complete(t, int(c["request"][i]))
                    elif kind == "irecv":
                        evw.mpi_irecv(t, local(cid, int(c["peer"][i]), r), comm_def[cid], tag, nb,
                                      int(c["request"][i]))
                    elif kind == "coll_end":
                        size = len(comms.get(cid) or [0]) if cid != tf.COMM_SELF_ID else 1
                        total = nb * (size if name in _TIMES_P else 1)
                        root = int(c["root"][i])
                        evw.mpi_collective_end(
                            t, getattr(otf2.CollectiveOp, _COLL[name]), comm_def[cid],
                            local(cid, root, r) if root >= 0 else UNDEFINED_ROOT, total, total)
    return anchor


def _rank_events(rows, op, region, ts, te, c):
    """(time, order, kind, payload) for one rank, in write order: properly nested Enter/Leave
    (a region's children are clamped to it) with the MPI records inside their call."""
    post_is_send: dict[int, bool] = {}
    calls = []           # (start, end, is_region, payload rows)
    rows = list(rows)
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
        out.append((start, n, "enter", first))
        n += 1
        for i in grp:
            name = tf.OPS[op[i]]
            if name in ("Send", "Ssend", "Bsend", "Rsend", "Sendrecv_send"):
                out.append((start, n, "send", i))
            elif name in tf.NONBLOCKING_SEND_OPS:
                post_is_send[int(c["request"][i])] = True
                out.append((start, n, "isend", i))
            elif name == "Irecv":
                post_is_send[int(c["request"][i])] = False
                out.append((start, n, "irecv_request", i))
            elif name in ("Recv", "Sendrecv_recv"):
                out.append((end, n, "recv", i))
            elif name in tf.COMPLETION_OPS:
                if post_is_send.get(int(c["request"][i]), False):
                    out.append((end, n, "isend_complete", i))
                elif int(c["peer"][i]) >= 0:
                    out.append((end, n, "irecv", i))
            elif name in tf.COLLECTIVE_OPS:
                out.append((end, n, "coll_end", i))
            n += 1
        stack.append(end)
        names.append(("leave", first))
    close_until(float("inf"))
    return out


# ------------------------------------------------------------------------------------------------
# Import


def _anchor(path: Path) -> Path:
    if path.is_dir():
        cands = sorted(path.glob("*.otf2"))
        if not cands:
            raise OtfError(f"{path}: no *.otf2 anchor file in this directory (not an OTF2 archive)")
        if len(cands) > 1:
            raise OtfError(f"{path}: several anchor files ({', '.join(p.name for p in cands)}); "
                           "give one")
        return cands[0]
    if not path.is_file():
        raise OtfError(f"{path}: no such file or directory")
    return path


def read_otf2(path: Path | str) -> tuple[list[dict[str, list]], dict[str, Any]]:
    """Per-rank columns (for ``replay.synthetic.write_trace``) and manifest extras."""
    import otf2
    from otf2 import events as E

    path = Path(path)
    anchor = _anchor(path)
    with open(anchor, "rb") as fh:
        head = fh.read(64)
    # OTF2 anchor files are written by OTF2's own (binary) buffer format; they start with a
    # chunk header, never with text. A text/JSON/Parquet file here is a wrong input.
    if head.startswith((b"PAR1", b"{", b"num_ranks", b"#", b"<")) or not head:
        raise OtfError(f"{anchor}: not an OTF2 anchor file (wrong magic)")
    try:
        reader_cm = otf2.reader.open(str(anchor))
        trace = reader_cm.__enter__()
    except Exception as exc:  # the C library reports a code, not an exception class
        raise OtfError(f"{anchor}: not a readable OTF2 archive ({_short(exc)})") from None
    try:
        return _convert(trace, anchor, otf2, E)
    except OtfError:
        raise
    except Exception as exc:
        # A damaged archive surfaces as whatever the bindings meet first (a C error code, a
        # dangling definition reference as KeyError, ...): all mean "cannot be read" (fuzzed).
        raise OtfError(f"{anchor}: damaged OTF2 archive ({type(exc).__name__}: "
                       f"{_short(exc)})") from None
    finally:
        try:
            reader_cm.__exit__(None, None, None)
        except Exception:
            pass


def _short(exc: Exception) -> str:
    s = str(exc).strip().splitlines()
    return s[0][:160] if s else type(exc).__name__


def _convert(trace, anchor: Path, otf2, E) -> tuple[list[dict[str, list]], dict[str, Any]]:
    from replay.synthetic import empty_columns

    defs = trace.definitions
    res = defs.clock_properties.timer_resolution if defs.clock_properties else 0
    if not res:
        raise OtfError(f"{anchor}: missing definitions: no clock properties / timer resolution")
    offset = defs.clock_properties.global_offset or 0
    if any(str(a.name).startswith("hindsight::") for a in defs.attributes):
        # written by hindsight: its timestamps are already ns since the run's epoch
        offset = 0
    comm_locs = [g for g in defs.groups if g.group_type == otf2.GroupType.COMM_LOCATIONS
                 and g.paradigm == otf2.Paradigm.MPI]
    if not comm_locs:
        raise OtfError(f"{anchor}: missing definitions: no MPI COMM_LOCATIONS group (not an MPI "
                       "trace, or written without communicator definitions)")
    world = list(comm_locs[0].members)
    rank_of_loc = {loc: r for r, loc in enumerate(world)}
    nranks = len(world)
    if nranks == 0:
        raise OtfError(f"{anchor}: missing definitions: the MPI COMM_LOCATIONS group is empty")

    # Communicators: world ranks of each comm, and hindsight ids.
    comm_id: dict[Any, int] = {}
    members_of: dict[int, list[int]] = {}
    creation: dict[int, int] = {}
    for cm in defs.comms:
        g = getattr(cm, "group", None)
        if g is None:
            continue
        if g.group_type == otf2.GroupType.COMM_SELF:
            comm_id[cm] = tf.COMM_SELF_ID
            continue
        try:
            mem = [rank_of_loc[loc] for loc in g.members]
        except KeyError:
            raise OtfError(f"{anchor}: communicator '{cm.name}' has a member outside the MPI "
                           "COMM_LOCATIONS group") from None
        if sorted(mem) == list(range(nranks)) and 0 not in members_of and (
                cm.parent is None or "WORLD" in str(cm.name).upper()):
            cid = tf.COMM_WORLD_ID
        else:
            parent = comm_id.get(cm.parent, 0) if cm.parent is not None else 0
            k = creation.get(parent, 0)
            creation[parent] = k + 1
            cid = tf.derived_comm_id(parent, k, min(mem) if mem else 0)
        comm_id[cm] = cid
        members_of[cid] = mem
    if tf.COMM_WORLD_ID not in members_of:
        members_of[tf.COMM_WORLD_ID] = list(range(nranks))

    def world_rank(cm, local: int, where: str) -> int:
        cid = comm_id.get(cm)
        if cid is None:
            raise OtfError(f"{anchor}: {where}: record names a communicator without definition")
        if cid == tf.COMM_SELF_ID:
            return rank_here
        mem = members_of[cid]
        if not 0 <= local < len(mem):
            raise OtfError(f"{anchor}: {where}: rank {local} outside communicator "
                           f"'{cm.name}' of size {len(mem)}")
        return mem[local]

    def ns(t: int) -> int:
        return int((int(t) - offset) * 10**9 // res) if res != 10**9 else int(t) - offset

    cols = [empty_columns() for _ in range(nranks)]
    state = [dict(stack=[], regions=[], call=None, recs=[], req={}, next_req=0, skipped=0)
             for _ in range(nranks)]
    other_locations = 0
    rank_here = 0

    def add(r, op_name, t0, t1, peer=-1, tag=-1, comm=0, nbytes=-1, request=-1, root=-1,
            region=None, cpu=-1):
        col = cols[r]
        col["op"].append(op_name), col["region"].append(region)
        col["t_start"].append(t0), col["t_end"].append(t1), col["cpu_ns"].append(cpu)
        col["peer"].append(peer), col["tag"].append(tag), col["comm"].append(comm)
        col["nbytes"].append(nbytes), col["request"].append(request), col["root"].append(root)

    for loc, ev in trace.events:
        r = rank_of_loc.get(loc)
        if r is None:
            other_locations += 1
            continue
        rank_here = r
        s = state[r]
        t = ns(ev.time)
        where = f"rank {r} at {t} ns"
        if isinstance(ev, E.Enter):
            name = str(ev.region.name)
            is_mpi = ev.region.paradigm == otf2.Paradigm.MPI or name.startswith("MPI_")
            named = {str(a.name): v for a, v in (ev.attributes or {}).items()}
            s["stack"].append((name, t, is_mpi, int(named.get(ATTR_SIZE, -1))))
            if is_mpi and s["call"] is None:
                s["call"] = (name[4:] if name.startswith("MPI_") else name, t)
                s["recs"] = [("comm_create", int(named[ATTR_NEW_COMM]), -1,
                              int(named[ATTR_COMM]), -1, -1)] if ATTR_NEW_COMM in named else []
            elif not is_mpi:
                s["regions"].append(name)
        elif isinstance(ev, E.Leave):
            if not s["stack"]:
                raise OtfError(f"{anchor}: {where}: Leave without Enter")
            name, t_enter, is_mpi, work = s["stack"].pop()
            named = {str(a.name): v for a, v in (ev.attributes or {}).items()}
            cpu = int(named.get(ATTR_CPU, -1))
            if str(ev.region.name) != name:
                raise OtfError(f"{anchor}: {where}: Leave of '{ev.region.name}' but "
                               f"'{name}' is open")
            inner = s["regions"][-1] if s["regions"] else None
            if not is_mpi:
                s["regions"].pop()
                add(r, "region", t_enter, t, comm=-1, nbytes=work, region=name, cpu=cpu)
            elif s["call"] is not None and s["call"][1] == t_enter and \
                    not any(x[2] for x in s["stack"]):
                n_before = len(cols[r]["op"])
                _call_rows(add, r, s, s["call"][0], t_enter, t, s["recs"], inner, anchor)
                if cpu >= 0 and len(cols[r]["op"]) > n_before:
                    cols[r]["cpu_ns"][n_before] = cpu     # on the first row of the call
                s["call"] = None
        elif isinstance(ev, (E.MpiSend, E.MpiIsend)):
            rec = ("send", world_rank(ev.communicator, int(ev.receiver), where),
                   int(ev.msg_tag), comm_id[ev.communicator], int(ev.msg_length),
                   int(getattr(ev, "request_id", -1)))
            s["recs"].append(rec)
        elif isinstance(ev, (E.MpiRecv, E.MpiIrecv)):
            rec = ("recv", world_rank(ev.communicator, int(ev.sender), where), int(ev.msg_tag),
                   comm_id[ev.communicator], int(ev.msg_length), int(getattr(ev, "request_id", -1)))
            s["recs"].append(rec)
        elif isinstance(ev, E.MpiIrecvRequest):
            named = {str(a.name): v for a, v in (ev.attributes or {}).items()}
            s["recs"].append(("irecv_request", int(named.get(ATTR_SOURCE, tf.ANY_SOURCE)),
                              int(named.get(ATTR_TAG, tf.ANY_TAG)), 0,
                              int(named.get(ATTR_IRECV_BYTES, -1)), int(ev.request_id)))
        elif isinstance(ev, E.MpiIsendComplete):
            s["recs"].append(("isend_complete", -1, -1, 0, -1, int(ev.request_id)))
        elif isinstance(ev, E.MpiCollectiveEnd):
            cm = ev.communicator
            if cm not in comm_id:
                raise OtfError(f"{anchor}: {where}: collective on a communicator without "
                               "definition")
            root = int(ev.root)
            cid = comm_id[cm]
            root_w = world_rank(cm, root, where) if root != UNDEFINED_ROOT and cid != 1 and \
                root < len(members_of.get(cid, [])) else -1
            s["recs"].append(("coll", root_w, -1, cid, max(int(ev.size_sent),
                                                            int(ev.size_received)), -1))
    open_ranks = [r for r in range(nranks) if state[r]["stack"]]
    if open_ranks:
        raise OtfError(f"{anchor}: rank {open_ranks[0]} ends with open regions (truncated trace?)")
    # collectives: back from OTF2 totals to hindsight's per-process block
    for r in range(nranks):
        col = cols[r]
        for k, opn in enumerate(col["op"]):
            if opn in _TIMES_P and col["comm"][k] != tf.COMM_SELF_ID:
                size = len(members_of.get(col["comm"][k], [0])) or 1
                col["nbytes"][k] //= size
    skipped = sum(st["skipped"] for st in state)
    extra = {"communicators": {k: v for k, v in members_of.items() if k != 0},
             "skipped_calls": skipped, "other_locations_events": other_locations}
    return cols, extra


def _call_rows(add, r, s, name, t0, t1, recs, region, anchor) -> None:
    """Rows for one MPI call from its records (see the module docstring)."""
    req = s["req"]

    def new_req(otf_id: int) -> int:
        q = s["next_req"]
        s["next_req"] += 1
        req[otf_id] = q
        return q

    if name in ("Send", "Ssend", "Bsend", "Rsend"):
        for kind, peer, tag, comm, nb, _ in recs:
            if kind == "send":
                add(r, name, t0, t1, peer, tag, comm, nb, region=region)
                return
    elif name in tf.NONBLOCKING_SEND_OPS:
        for kind, peer, tag, comm, nb, rid in recs:
            if kind == "send":
                add(r, name, t0, t1, peer, tag, comm, nb, new_req(rid), region=region)
                return
    elif name == "Irecv":
        for kind, src, tag, _, nb, rid in recs:
            if kind == "irecv_request":
                # OTF2 does not record what the Irecv named (unless hindsight wrote the archive:
                # attributes); otherwise it is ANY, and the completion row has the truth
                add(r, "Irecv", t0, t1, src, tag, 0, nb, new_req(rid), region=region)
                return
    elif name == "Recv":
        for kind, peer, tag, comm, nb, _ in recs:
            if kind == "recv":
                add(r, "Recv", t0, t1, peer, tag, comm, nb, region=region)
                return
    elif name == "Sendrecv" or name == "Sendrecv_replace":
        snd = [x for x in recs if x[0] == "send"]
        rcv = [x for x in recs if x[0] == "recv"]
        if snd and rcv:
            _, peer, tag, comm, nb, _ = snd[0]
            add(r, "Sendrecv_send", t0, t1, peer, tag, comm, nb, region=region)
            _, peer, tag, comm, nb, _ = rcv[0]
            add(r, "Sendrecv_recv", t0, t1, peer, tag, comm, nb, region=region)
            return
    elif name in tf.COMPLETION_OPS:
        done = False
        for kind, peer, tag, comm, nb, rid in recs:
            if kind in ("isend_complete", "recv"):
                if rid not in req:
                    raise OtfError(f"{anchor}: rank {r}: MPI_{name} completes request {rid}, "
                                   "which was never posted")
                q = req.pop(rid)
                if kind == "recv":
                    add(r, name, t0, t1, peer, tag, comm, nb, q, region=region)
                else:
                    add(r, name, t0, t1, request=q, region=region)
                done = True
        if done:
            return
    elif name in tf.COMM_OPS:
        for kind, new, _, comm, _, _ in recs:
            if kind == "comm_create":
                add(r, name, t0, t1, new, -1, comm, region=region)
                return
    elif name in tf.COLLECTIVE_OPS:
        for kind, root, _, comm, nb, _ in recs:
            if kind == "coll":
                add(r, name, t0, t1, comm=comm, nbytes=nb,
                    root=root if name in tf.ROOTED_OPS else -1, region=region)
                return
    # A call hindsight has no op for, or one whose records are missing (e.g. a Test that
    # completed nothing): its time is computation.
    s["skipped"] += 1


def import_otf2(path: Path | str, out: Path | str) -> Path:
    """Convert an OTF2 archive into a hindsight trace directory; checks that messages match."""
    from replay.matching import match_messages
    from replay.synthetic import write_trace

    cols, extra = read_otf2(path)
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise OtfError(f"{out}: exists and is not empty (choose a new --out)")
    # the epoch: the earliest event, or hindsight's own epoch for archives hindsight wrote
    t_min = min(0, min((min(c["t_start"]) for c in cols if c["t_start"]), default=0))
    for c in cols:
        c["t_start"] = [t - t_min for t in c["t_start"]]
        c["t_end"] = [t - t_min for t in c["t_end"]]
    comms = {int(k): v for k, v in extra["communicators"].items()}
    write_trace(out, cols, communicators=comms, extra_manifest={
        "app": Path(path).stem, "paradigm": None,
        "origin": {"format": "otf2", "source": str(path),
                   "skipped_calls": extra["skipped_calls"],
                   "events_on_other_locations": extra["other_locations_events"]}})
    tr = tf.read_trace(out)
    _, problems = match_messages(tr.table)
    fatal = [p for p in problems if "bytes but" not in p]
    if fatal:
        import shutil
        shutil.rmtree(out, ignore_errors=True)
        more = f" (and {len(fatal) - 3} more)" if len(fatal) > 3 else ""
        raise OtfError(f"{path}: messages do not match: {'; '.join(fatal[:3])}{more}")
    return out
