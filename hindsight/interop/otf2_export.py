"""OTF2 export: a trace (or a replayed timeline) as an archive Vampir and ``otf2-print`` read.

Archive and definitions are written with the PyPI ``otf2`` package, the events by compiled code
calling the OTF2 C library inside it (``otf2_native``): one location per rank (a process location group under its
host's system-tree node), ``Enter``/``Leave`` for every MPI call (regions ``MPI_<op>``, paradigm
MPI) and every application region, and the MPI records Score-P writes: ``MpiSend``/``MpiRecv``
inside blocking calls, ``MpiIsend``/``MpiIrecvRequest`` at a post and
``MpiIsendComplete``/``MpiIrecv`` inside the call that completes the request,
``MpiCollectiveBegin``/``MpiCollectiveEnd`` around collectives,
``NonBlockingCollectiveRequest`` in a non-blocking collective's post and
``NonBlockingCollectiveComplete`` (op, communicator, root, sizes) inside the call that completes
it, and ``MpiProbe`` in probes.
Every communicator is defined as a ``COMM_GROUP`` over the one ``COMM_LOCATIONS`` group of all
ranks (without that, readers such as ``otf2-print`` and Vampir report invalid references);
``COMM_SELF`` is a ``COMM_SELF`` group.
Peers in MPI records are ranks *within the communicator*, as OTF2 specifies. Timer: 1 tick = 1 ns.
What hindsight records and OTF2 has no field for travels as ``hindsight::`` attributes
(``hindsight.interop.otf2``), which the importer reads back; a row no record can carry (a peer
``MPI_PROC_NULL``, ...) travels whole in its call's ``hindsight::rows``, so every row of every
op comes back.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path
from typing import Any, Iterator

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
    PROP_APP,
    PROP_INCOMPLETE,
    PROP_TIMELINE,
    PROP_UNTRACED,
    ROW_FIELDS,
    TESTBED_NODE,
    TOTAL_OVER_PEERS,
    OtfError,
    format_rows,
)
from hindsight.interop import otf2_native as native
from hindsight.interop.timeline import RankTimelines, Timeline, rank_timelines


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


def export_otf2(trace_dir: Path | str, out_dir: Path | str, table: pa.Table | None = None,
                manifest: dict | None = None) -> Path:
    """Write ``out_dir/traces.otf2`` (+ ``traces.def``, ``traces/``). ``table``/``manifest`` may
    be given (e.g. a replayed timeline); otherwise the trace is read, one rank at a time (its
    memory is the largest rank's rows, not the trace's). Returns the anchor path."""
    return write_otf2(trace_dir, out_dir, table, manifest)[0]


def write_otf2(trace_dir: Path | str, out_dir: Path | str, table: pa.Table | None = None,
               manifest: dict | None = None, timeline: str | None = None,
               incomplete: dict[int, str] | None = None) -> tuple[Path, int]:
    """``export_otf2``, and the number of rows written. ``timeline``: how the timeline was
    made when no run measured it (``replayed under loggps``), kept in the archive's property
    ``PROP_TIMELINE``; by default the manifest's (``hindsight.trace.timeline_made``).
    ``incomplete``: a partial trace's ranks that did not finish cleanly, with their status,
    kept in ``PROP_INCOMPLETE``."""
    from hindsight.interop.otf2 import quiet_library
    quiet_library()

    if table is None:
        manifest = tf.read_manifest(trace_dir)
        nranks = int(manifest["ranks"])
        source: Path | pa.Table = Path(trace_dir)
    else:
        manifest = manifest or {}
        nranks = int(manifest.get("ranks") or 0) or max(
            (int(tf.numpy_of(ch).max()) + 1 for ch in table.column("rank").chunks if len(ch)),
            default=0)
        source = table
    out_dir = Path(out_dir)
    anchor = out_dir / f"{ARCHIVE_NAME}.otf2"
    for part in _archive_parts(out_dir):
        if part.exists() or part.is_symlink():      # (a dangling link would be written through)
            raise OtfError(f"{part}: exists already (choose a new --out)")
    timelines = rank_timelines(source, nranks)
    created = next((d for d in reversed([out_dir, *out_dir.parents]) if not d.exists()), None)
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = min(timelines.t_min, 0)
    from _otf2.ErrorCodes import Error as LibraryError

    timeline = timeline or tf.timeline_made(manifest)
    try:
        _write_archive(out_dir, manifest, timelines, nranks, t0, trace_dir, timeline,
                       incomplete or {})
    except BaseException as exc:
        # (a rank file found damaged while the archive is written, a bad communicator, ...):
        # no half-written archive is left, as none would be by an export that read first
        _discard(out_dir, created)
        if isinstance(exc, LibraryError):   # (a definition larger than the library's chunk)
            raise OtfError(f"{out_dir}: the OTF2 library could not write the archive "
                           f"({exc})") from None
        raise
    return anchor, timelines.rows


def _write_archive(out_dir: Path, manifest: dict, timelines: RankTimelines, nranks: int,
                   t0: int, trace_dir, timeline: str | None, incomplete: dict[int, str]) -> None:
    """The archive's definitions and events (``write_otf2``)."""
    import _otf2
    import otf2

    comms = {int(k): list(v) for k, v in (manifest.get("communicators") or {}).items()
             if v is not None}
    comms.setdefault(0, list(range(nranks)))
    hosts = manifest.get("hosts") or {"localhost": list(range(nranks))}

    with _closed_once(otf2.writer.Writer(str(out_dir), archive_name=ARCHIVE_NAME,
                                         timer_resolution=10**9)) as w:
        if timeline:
            _otf2.Archive_SetProperty(w._handle, PROP_TIMELINE, timeline, False)
        if manifest.get("app"):
            _otf2.Archive_SetProperty(w._handle, PROP_APP, str(manifest["app"]), False)
        if incomplete:
            _otf2.Archive_SetProperty(w._handle, PROP_INCOMPLETE, json.dumps(
                {str(r): st for r, st in sorted(incomplete.items())}), False)
        if any((manifest.get("untraced_calls") or {}).values()):
            _otf2.Archive_SetProperty(w._handle, PROP_UNTRACED,
                                      json.dumps(manifest["untraced_calls"], sort_keys=True),
                                      False)
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

        _write_events(w, locs, _Regions(timelines.region_names, d, region_def), timelines, t0,
                      comms, comm_def, rank_in,
                      [a_size, a_cpu, a_comm, a_new, a_rows, a_src, a_tag, a_rbytes, a_nbytes],
                      trace_dir)


@contextlib.contextmanager
def _closed_once(w: Any) -> Iterator[Any]:
    """The ``otf2`` writer ``w``, closed on leaving if all went well, and never again: its
    ``__del__`` closes it again where a close failed or was not reached, and the library's
    error would then be printed as a traceback when the writer is collected (the archive of a
    failed export is removed: ``_discard``)."""
    try:
        yield w
        w.close()
    finally:
        w._handle = None


def _archive_parts(out_dir: Path) -> tuple[Path, Path, Path]:
    """The anchor, the global definitions and the event folder of an archive in ``out_dir``."""
    return (out_dir / f"{ARCHIVE_NAME}.otf2", out_dir / f"{ARCHIVE_NAME}.def",
            out_dir / ARCHIVE_NAME)


def _discard(out_dir: Path, created: Path | None) -> None:
    """Remove what an export that failed wrote: the archive's parts, none of which was there
    before it (``write_otf2`` refuses a folder that holds one), and the folder it ``created``
    (the highest of ``out_dir`` and its parents that it made; ``out_dir`` may lie elsewhere,
    through a ``..``)."""
    anchor, definitions, events = _archive_parts(out_dir)
    anchor.unlink(missing_ok=True)
    definitions.unlink(missing_ok=True)
    shutil.rmtree(events, ignore_errors=True)
    if created is not None:
        shutil.rmtree(created, ignore_errors=True)


class _DefinitionsAtClose:
    """A location's writers, as the ``otf2`` writer closes them at the archive's close (it calls
    ``close`` on each): its event writer is closed as soon as its events are written, its
    definition writer is opened and closed here.

    Why: the OTF2 library holds a location's events in memory until its event writer is
    closed, and each definition writer takes a chunk (4 MiB) when it is closed; with every
    location's writers open until the archive closes (what ``event_writer_from_location``
    gives) an export held every rank's events and a chunk per rank at once: 5 MB a rank more
    (64 locations: 317 MB). A definition writer closed before the archive's close makes the
    library truncate the location's event file when the archive closes, so it is closed
    here, one location at a time."""

    def __init__(self, archive, ref: int) -> None:
        self.archive, self.ref = archive, ref

    def close(self) -> None:
        import _otf2

        _otf2.Archive_CloseDefWriter(self.archive,
                                     _otf2.Archive_GetDefWriter(self.archive, self.ref))


def _op_tables() -> dict[str, np.ndarray]:
    """Per op code (``tf.OPS``): the row class of ``otf2_native`` (``_record_kind`` tests them
    in this order), whether it is a non-blocking collective / a completion, its blocking op's
    OTF2 CollectiveOp (or -1), the code of its blocking op, whether that is a
    ``TOTAL_OVER_PEERS`` op and whether the op creates a communicator."""
    import otf2

    n = len(tf.OPS)
    t = {"classes": np.zeros(n, np.int64), "nbc_any": np.zeros(n, np.bool_),
         "completion": np.zeros(n, np.bool_), "coll_op": np.full(n, -1, np.int64),
         "blocking_of": np.arange(n, dtype=np.int64), "total_over_peers": np.zeros(n, np.bool_),
         "is_comm_op": np.zeros(n, np.bool_)}
    for code, name in enumerate(tf.OPS):
        blocking = tf.BLOCKING_OF.get(name, name)
        if name in ("Send", "Ssend", "Bsend", "Rsend", "Sendrecv_send"):
            cls = native.C_SEND
        elif name in tf.NONBLOCKING_SEND_OPS:
            cls = native.C_NBSEND
        elif name == "Irecv":
            cls = native.C_IRECV
        elif name in ("Recv", "Sendrecv_recv"):
            cls = native.C_RECV
        elif name in ("Probe", "Iprobe"):
            cls = native.C_PROBE
        elif name in tf.NONBLOCKING_COLLECTIVE_OPS and blocking in COLLECTIVE_OPS_OTF2:
            cls = native.C_NBC
        elif name in tf.COMPLETION_OPS:
            cls = native.C_COMPLETION
        elif name in COLLECTIVE_OPS_OTF2:
            cls = native.C_COLL
        elif name in tf.COMM_OPS:
            cls = native.C_COMM
        else:
            cls = native.C_OTHER
        t["classes"][code] = cls
        t["nbc_any"][code] = name in tf.NONBLOCKING_COLLECTIVE_OPS
        t["completion"][code] = name in tf.COMPLETION_OPS
        t["is_comm_op"][code] = name in tf.COMM_OPS
        t["blocking_of"][code] = tf.OP_CODE.get(blocking, code)
        t["total_over_peers"][code] = name in TOTAL_OVER_PEERS
        if name in COLLECTIVE_OPS_OTF2:
            t["coll_op"][code] = int(getattr(otf2.CollectiveOp, COLLECTIVE_OPS_OTF2[name]).value)
    return t


def _plan(tl: Timeline, tab: dict[str, np.ndarray]) -> tuple:
    """The events of the rank whose rows are ``tl``, in write order
    (``otf2_native.plan_rank``)."""
    cols = [tl.op, tl.t_start, tl.t_end, tl.peer, tl.tag, tl.comm, tl.nbytes, tl.request,
            *native.request_codes(tl.request)]
    return native.plan_rank(*cols, tab["classes"], tab["nbc_any"], tab["completion"],
                            tf.OP_CODE["Sendrecv_send"], tf.OP_CODE["Sendrecv_recv"])


class _Regions:
    """The regions and ATTR_ROWS strings, defined in the order the events first use them (the
    order of their refs), rank after rank: ``define(plan, tl)`` defines those the events of a
    rank (whose rows are ``tl``) use first and returns each event's region ref and each
    Enter's ATTR_ROWS string ref (-1: none). ``region_names``: every rank's, as ``tl`` codes
    them."""

    def __init__(self, region_names: list[str], d, region_def) -> None:
        self.region_names, self.d, self.region_def = region_names, d, region_def
        self.nuser = len(region_names)
        self.first = np.full(self.nuser + 1 + len(tf.OPS), -1, np.int64)
        self.ref_of_key = np.zeros(len(self.first), np.int64)
        self.offset = 0                 # the events of the ranks before

    def define(self, plan: tuple, tl: Timeline) -> tuple[np.ndarray, np.ndarray]:
        nuser, first, start = self.nuser, self.first, self.offset
        kind, _, row, aux, ex_pos, ex_row, ex_end = plan
        keys = native.region_keys(kind, row, tl.region_code, tl.op, nuser, first, start)
        self.offset += len(kind)
        todo = [(int(at), 0, k) for k, at in enumerate(first) if at >= start]
        rows_at = np.flatnonzero((kind == native.ENTER) & (aux >= 0))
        todo += [(start + int(e), 1, 0) for e in rows_at]
        rows_ref = np.full(len(kind), -1, np.int64)
        for at, what, k in sorted(todo):
            if what == 0 and k > nuser:
                name = tf.OPS[k - nuser - 1]
                name = "Sendrecv" if name.startswith("Sendrecv") else name
                self.ref_of_key[k] = self.region_def(name, True, _role(name))._ref
            elif what == 0:
                name = (self.region_names[k - 1] if k else None) or "region"
                self.ref_of_key[k] = self.region_def(name, False, _role("region"))._ref
            else:
                e = at - start
                x = int(aux[e])
                text = format_rows([(int(ex_pos[j]), tf.OPS[tl.op[ex_row[j]]], *(
                    int(getattr(tl, c)[ex_row[j]]) for c in ROW_FIELDS[1:]))
                    for j in range(x, int(ex_end[x]))])
                rows_ref[e] = self.d.strings.get_ref(text)
        np.maximum(keys, 0, out=keys)
        return self.ref_of_key[keys], rows_ref


def _write_events(w, locs: list, regions: _Regions, timelines: RankTimelines, t0: int,
                  comms: dict, comm_def: dict, rank_in: dict, attributes: list,
                  trace_dir) -> None:
    """Read, plan and write the ranks' events one rank at a time (``otf2_native.write_rank``):
    the plans of every rank at once were ~100 bytes per row of new memory, which on these VMs
    costs more than planning. The ``otf2`` writer's bookkeeping (events per location,
    first/last time) is kept as its own event writers keep it."""
    import _otf2

    tab = _op_tables()
    ids = sorted(comm_def)
    nranks = len(locs)
    rank_of = np.full((len(ids), nranks), -1, np.int64)
    for k, cid in enumerate(ids):
        for world, i in (rank_in[cid] or {}).items():
            if 0 <= world < nranks:
                rank_of[k, world] = i
    comm_ids = np.array(ids, np.int64)
    comm_refs = np.array([comm_def[c]._ref for c in ids], np.int64)
    comm_size = np.array([len(comms.get(c) or [0]) for c in ids], np.int64)
    attrs = np.array([a._ref for a in attributes], np.int64)
    fns = native.function_addresses()
    info = np.zeros(3, np.int64)
    al = _otf2.AttributeList_New()
    try:
        for r in range(nranks):
            tl = timelines.rank(r)
            plan = _plan(tl, tab)
            ev_region, ev_rows_ref = regions.define(plan, tl)
            kind, t, row, aux, *_ = plan
            cols = [tl.op, tl.peer, tl.tag, tl.comm, tl.nbytes, tl.request, tl.root, tl.cpu_ns]
            ref = locs[r]._ref
            evw = _otf2.Archive_GetEvtWriter(w.handle, ref)
            w._event_writers[ref] = _DefinitionsAtClose(w.handle, ref)
            try:
                written, last = native.write_rank(
                    fns, native.pointer(evw), native.pointer(al), t0, kind, t, row, aux,
                    ev_region, ev_rows_ref, *cols, attrs, tab["coll_op"], tab["is_comm_op"],
                    tab["blocking_of"], tab["total_over_peers"], comm_ids, comm_refs,
                    comm_size, rank_of, ids.index(tf.COMM_SELF_ID), tf.COMM_SELF_ID, info)
            finally:
                # the rank's events go to their file now (``_DefinitionsAtClose``)
                _otf2.Archive_CloseEvtWriter(w.handle, evw)
            locs[r]._number_of_events_written = int(written)
            if written:
                w._update_timestamps(max(int(t[0]) - t0, 0))
                w._update_timestamps(int(last))
            if info[0] == native.ERR_COMM:
                raise OtfError(f"{trace_dir}: rank {r} uses communicator {info[1]}, which the "
                               "manifest does not define")
            if info[0] == native.ERR_MEMBER:
                raise OtfError(f"{trace_dir}: rank {info[2]} is not a member of communicator "
                               f"{info[1]}")
            if info[0] == native.ERR_C:
                raise OtfError(f"{trace_dir}: the OTF2 library failed writing rank {r}'s events "
                               f"(error code {info[1]})")
    finally:
        _otf2.AttributeList_Delete(al)
