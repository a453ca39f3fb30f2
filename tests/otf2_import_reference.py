"""OTF2 import: any MPI archive (e.g. one Score-P recorded from a C or Fortran program, MPI only
or hybrid: MPI + OpenMP, pthreads, CUDA, ...) as a trace.

Ranks are the positions in the MPI ``COMM_LOCATIONS`` group (the processes' master threads);
communicators are those of paradigm MPI; non-MPI regions on the ranks' locations (functions,
OpenMP constructs on the master thread) become ``region`` rows; each call's rows come from the
MPI records inside it (the mapping ``hindsight.interop.otf2_export`` writes, read back, with the
rows it wrote as ``hindsight::rows`` in their places; a non-blocking collective's post row
takes its communicator, root and size from the ``NonBlockingCollectiveComplete`` of its request,
in the call that completes it; a collective's size is the per-process block, from the
sizeSent/sizeReceived Score-P writes per process (``scorep_sizes``), or from the totals of an
archive hindsight wrote). What a trace cannot hold is skipped and counted by kind
(``import.skipped`` in the manifest): MPI calls hindsight has no op for (``MPI_Init``,
``MPI_Comm_rank``, ...: their time counts as computation), records it has no row for (RMA, I/O,
threading, ...), non-blocking collectives no ``NonBlockingCollectiveComplete`` completes,
metric values (per metric), the locations outside the MPI group
(OpenMP threads, pthreads, accelerator streams, metric locations) with their events, and the
communicators of other paradigms (thread teams, ...). It fails with ``OtfError`` on a file that
is not an OTF2 anchor, on missing definitions, on records it cannot place, and on messages that
do not match.
"""

from __future__ import annotations

import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

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
    TESTBED_NODE,
    TOTAL_OVER_PEERS,
    UNDEFINED_ROOT,
    OtfError,
    parse_rows,
    quiet_library,
)
from hindsight.interop.scorep_sizes import scorep_block
from hindsight.trace.schema import short_error
from replay.matching import match_messages
from hindsight.trace.write import INT_FIELDS, write_trace

# Records that lose nothing: a collective's begin (its end carries the operation), a Test that
# completed nothing (hindsight records none either), the program's bounds, the tracer's own
# buffer flushes, and communicator records (the definitions give the communicators).
_NOT_A_LOSS = ("MpiCollectiveBegin", "MpiRequestTest", "ProgramBegin", "ProgramEnd",
               "BufferFlush", "CommCreate", "CommDestroy")
# OTF2 record name prefix -> the kind a skipped one is counted under (metric values are counted
# per metric, see _convert)
_EVENT_KINDS = (("Rma", "RMA event"), ("Omp", "OpenMP event"), ("Thread", "thread event"),
                ("Io", "I/O event"), ("Parameter", "parameter event"),
                ("CallingContext", "calling-context event"),
                ("MpiImrecv", "matched receive event"), ("MpiMrecv", "matched receive event"))


def _event_kind(record: str) -> str:
    return next((kind for prefix, kind in _EVENT_KINDS if record.startswith(prefix)),
                f"{record} event")


def _app_name(path: Path | str) -> str:
    """The imported trace's ``app``: the archive's directory name when ``path`` is that directory
    or an anchor named ``traces.otf2`` (the name Score-P and hindsight give every archive), else
    the anchor's name without ``.otf2``."""
    path = Path(path)
    if path.is_dir():
        return path.resolve().name or path.name
    if path.stem == ARCHIVE_NAME:
        return path.resolve().parent.name or path.stem
    return path.stem


def _paradigm_name(defs, paradigm) -> str:
    """The name the archive's Paradigm definitions give ``paradigm`` (Score-P writes "OpenMP",
    "CUDA", ...), else the enum's ("OPENMP")."""
    return next((str(p.name) for p in defs.paradigms if p.paradigm == paradigm),
                str(paradigm).rsplit(".", 1)[-1])


def _location_labels(defs, otf2) -> dict[Any, str]:
    """Location -> what it is, for the skipped counts of locations outside the MPI group: the
    paradigm of the non-MPI ``COMM_LOCATIONS`` group that lists it (Score-P defines one per
    paradigm: the OpenMP threads, the pthreads, CUDA's host threads and streams), else its type
    if that is not a CPU thread; locations neither describes are left out."""
    label: dict[Any, str] = {}
    for g in defs.groups:
        if g.group_type == otf2.GroupType.COMM_LOCATIONS and g.paradigm != otf2.Paradigm.MPI:
            name = _paradigm_name(defs, g.paradigm)
            for loc in g.members:
                label.setdefault(loc, name)
    by_type = {otf2.LocationType.ACCELERATOR_STREAM: "accelerator stream",
               otf2.LocationType.METRIC: "metric"}
    for loc in defs.locations:
        if loc not in label and loc.type in by_type:
            label[loc] = by_type[loc.type]
    return label


def _is_mpi(region, otf2) -> bool:
    """An MPI call's region: paradigm MPI, or named ``MPI_*`` (writers that leave the paradigm
    out)."""
    return region.paradigm == otf2.Paradigm.MPI or str(region.name).startswith("MPI_")


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
    """Per-rank columns (for ``hindsight.trace.write_trace``) and manifest extras."""
    import otf2
    from otf2 import events as E

    quiet_library()
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
        raise OtfError(f"{anchor}: not a readable OTF2 archive ({short_error(exc)})") from None
    try:
        cols, extra = _convert(trace, anchor, otf2, E)
        # hindsight's own archive properties, read as the importer reads them (metadata, not
        # the events this reference checks)
        from hindsight.interop.otf2 import PROP_APP, PROP_TIMELINE
        from hindsight.interop.otf2_archive import archive_property, untraced_calls
        for key, name in (("timeline", PROP_TIMELINE), ("app", PROP_APP)):
            value = archive_property(trace, name)
            if value:
                extra[key] = value
        extra["untraced_calls"] = untraced_calls(trace, anchor)
        return cols, extra
    except OtfError:
        raise
    except Exception as exc:
        # A damaged archive surfaces as whatever the bindings meet first (a C error code, a
        # dangling definition reference as KeyError, ...): all mean "cannot be read" (fuzzed).
        raise OtfError(f"{anchor}: damaged OTF2 archive ({type(exc).__name__}: "
                       f"{short_error(exc)})") from None
    finally:
        try:
            reader_cm.__exit__(None, None, None)
        except Exception:
            pass


def _convert(trace, anchor: Path, otf2, E) -> tuple[list[dict[str, list]], dict[str, Any]]:
    defs = trace.definitions
    res = defs.clock_properties.timer_resolution if defs.clock_properties else 0
    if not res:
        raise OtfError(f"{anchor}: missing definitions: no clock properties / timer resolution")
    offset = defs.clock_properties.global_offset or 0
    own_ids = any(str(a.name).startswith("hindsight::") for a in defs.attributes)
    if own_ids:
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

    skipped: Counter[str] = Counter()       # what the trace cannot hold, by kind

    # Communicators: world ranks of each MPI comm, and hindsight ids. Those of other paradigms
    # (OpenMP thread teams, pthread contingents, CUDA contexts, ...) group thread or stream
    # locations, not ranks: skipped.
    comm_id: dict[Any, int] = {}
    members_of: dict[int, list[int]] = {}
    creation: dict[int, int] = {}
    for cm in defs.comms:
        g = getattr(cm, "group", None)
        if g is None:
            continue
        if g.paradigm != otf2.Paradigm.MPI:
            skipped[f"non-MPI communicator ({_paradigm_name(defs, g.paradigm)})"] += 1
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
        elif own_ids and re.fullmatch(r"MPI_COMM_\d+", str(cm.name)):
            cid = int(str(cm.name)[len("MPI_COMM_"):])     # hindsight's own id, as exported
        else:
            parent = comm_id.get(cm.parent, 0) if cm.parent is not None else 0
            k = creation.get(parent, 0)
            creation[parent] = k + 1
            cid = tf.derived_comm_id(parent, k, min(mem) if mem else 0)
        comm_id[cm] = cid
        members_of[cid] = mem
    if tf.COMM_WORLD_ID not in members_of:
        members_of[tf.COMM_WORLD_ID] = list(range(nranks))

    def hindsight_comm(cm, where: str) -> int:
        if cm not in comm_id:
            raise OtfError(f"{anchor}: {where}: MPI record names a communicator that is not a "
                           "defined MPI communicator")
        return comm_id[cm]

    def world_rank(cm, local: int, where: str) -> int:
        cid = hindsight_comm(cm, where)
        if cid == tf.COMM_SELF_ID:
            return rank_here
        mem = members_of[cid]
        if not 0 <= local < len(mem):
            raise OtfError(f"{anchor}: {where}: rank {local} outside communicator "
                           f"'{cm.name}' of size {len(mem)}")
        return mem[local]

    def root_rank(cm, root: int, cid: int, where: str) -> int:
        """The world rank of a collective record's root, -1 for none (OTF2_UNDEFINED_UINT32,
        COMM_SELF, MPI_ROOT/MPI_PROC_NULL of an intercommunicator)."""
        if root == UNDEFINED_ROOT or cid == tf.COMM_SELF_ID or \
                root >= len(members_of.get(cid, [])):
            return -1
        return world_rank(cm, root, where)

    def block(op_name: str, cid: int, root: int, rank: int, sent: int, received: int) -> int:
        """hindsight's ``nbytes`` of a collective (``op_name`` blocking) on ``rank`` from its
        record's sizes: an archive hindsight wrote has sent = received = nbytes, times the
        communicator's size for ``TOTAL_OVER_PEERS``; others as Score-P writes them
        (``scorep_sizes.scorep_block``)."""
        mem = [rank] if cid == tf.COMM_SELF_ID else members_of.get(cid) or [rank]
        if own_ids:
            return sent // len(mem) if op_name in TOTAL_OVER_PEERS else sent
        return scorep_block(op_name, sent, received, len(mem),
                            mem.index(rank) if rank in mem else 0,
                            root == rank or cid == tf.COMM_SELF_ID)

    def ns(t: int) -> int:
        return int((int(t) - offset) * 10**9 // res) if res != 10**9 else int(t) - offset

    cols = [{c: [] for c in ("op", "region", *INT_FIELDS)} for _ in range(nranks)]
    # nbc: a non-blocking collective's OTF2 request id -> (hindsight request, post op);
    # nbc_post: hindsight request -> index of its post row, which the NonBlockingCollective-
    # Complete fills; nbc_done: hindsight request -> (comm, (sizeSent, sizeReceived), world
    # root) from it
    state = [dict(stack=[], regions=[], call=None, recs=[], extras=[], req={}, next_req=0,
                  nbc={}, nbc_post={}, nbc_done={})
             for _ in range(nranks)]
    labels = _location_labels(defs, otf2)
    other_locations: set = set()
    rank_here = 0

    def about(loc) -> str:
        """What a location outside the MPI group is, where the archive says, as the suffix of
        a skipped kind: " (OpenMP)"."""
        return f" ({labels[loc]})" if loc in labels else ""

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
            # a thread, stream or metric location: its events are not the rank's
            other_locations.add(loc)
            mpi = type(ev).__name__.startswith("Mpi") or (
                isinstance(ev, (E.Enter, E.Leave)) and _is_mpi(ev.region, otf2))
            skipped[f"{'MPI ' if mpi else ''}event on a non-MPI location{about(loc)}"] += 1
            continue
        rank_here = r
        s = state[r]
        t = ns(ev.time)
        where = f"rank {r} at {t} ns"
        if isinstance(ev, E.Enter):
            name = str(ev.region.name)
            is_mpi = _is_mpi(ev.region, otf2)
            named = {str(a.name): v for a, v in (ev.attributes or {}).items()}
            s["stack"].append((name, t, is_mpi, int(named.get(ATTR_SIZE, -1))))
            if is_mpi and s["call"] is None:
                s["call"] = (name[4:] if name.startswith("MPI_") else name, t)
                s["recs"] = [("comm_create", int(named[ATTR_NEW_COMM]), -1,
                              int(named[ATTR_COMM]), -1, -1)] if ATTR_NEW_COMM in named else []
                s["extras"] = parse_rows(named[ATTR_ROWS], f"{anchor}: {where}") \
                    if ATTR_ROWS in named else []
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
                rows = _call_rows(r, s, s["call"][0], s["recs"], s["extras"], anchor, own_ids,
                                  skipped)
                if not rows:
                    # A call hindsight has no op for, or one whose records are missing (e.g. a
                    # Test that completed nothing): its time is computation.
                    skipped["MPI call without a trace op"] += 1
                for k, (op_name, *fields) in enumerate(rows):
                    if isinstance(fields[3], tuple):
                        # a blocking collective's (sizeSent, sizeReceived): its block
                        fields[3] = block(op_name, fields[2], fields[5], r, *fields[3])
                    if fields[2] is None:
                        # a non-blocking collective's post: its Complete gives comm, bytes, root
                        s["nbc_post"][fields[4]] = len(cols[r]["op"])
                        fields[2] = 0
                    add(r, op_name, t_enter, t, *fields, region=inner,
                        cpu=cpu if k == 0 else -1)     # the call's CPU time on its first row
                s["call"] = None
        elif isinstance(ev, (E.MpiSend, E.MpiIsend)):
            rec = ("send", world_rank(ev.communicator, int(ev.receiver), where),
                   int(ev.msg_tag), hindsight_comm(ev.communicator, where), int(ev.msg_length),
                   int(getattr(ev, "request_id", -1)))
            s["recs"].append(rec)
        elif isinstance(ev, (E.MpiRecv, E.MpiIrecv)):
            rec = ("recv", world_rank(ev.communicator, int(ev.sender), where), int(ev.msg_tag),
                   hindsight_comm(ev.communicator, where), int(ev.msg_length),
                   int(getattr(ev, "request_id", -1)))
            s["recs"].append(rec)
        elif isinstance(ev, E.MpiIrecvRequest):
            named = {str(a.name): v for a, v in (ev.attributes or {}).items()}
            s["recs"].append(("irecv_request", int(named.get(ATTR_SOURCE, tf.ANY_SOURCE)),
                              int(named.get(ATTR_TAG, tf.ANY_TAG)), int(named.get(ATTR_COMM, 0)),
                              int(named.get(ATTR_IRECV_BYTES, -1)), int(ev.request_id)))
        elif isinstance(ev, E.MpiProbe):
            named = {str(a.name): v for a, v in (ev.attributes or {}).items()}
            sender, tag = int(ev.sender), int(ev.tag)
            s["recs"].append((
                "probe", world_rank(ev.communicator, sender, where) if sender != UNDEFINED_ROOT
                else tf.ANY_SOURCE, tag if tag != UNDEFINED_ROOT else tf.ANY_TAG,
                hindsight_comm(ev.communicator, where), int(named.get(ATTR_NBYTES, -1)), -1))
        elif isinstance(ev, E.MpiIsendComplete):
            s["recs"].append(("isend_complete", -1, -1, 0, -1, int(ev.request_id)))
        elif isinstance(ev, E.MpiCollectiveEnd):
            # nbytes is (sizeSent, sizeReceived) until the row is added (block())
            cid = hindsight_comm(ev.communicator, where)
            s["recs"].append(("coll", root_rank(ev.communicator, int(ev.root), cid, where), -1,
                              cid, (int(ev.size_sent), int(ev.size_received)), -1))
        elif isinstance(ev, (E.NonBlockingCollectiveRequest, E.NonBlockingCollectiveComplete)) \
                and s["call"] is None:
            skipped["non-blocking collective event"] += 1     # outside any MPI call
        elif isinstance(ev, E.NonBlockingCollectiveRequest):
            s["recs"].append(("nbc_request", -1, -1, -1, -1, int(ev.request_id)))
        elif isinstance(ev, E.NonBlockingCollectiveComplete):
            # (kind, root, collective op's OTF2 name, comm, (sizeSent, sizeReceived), request)
            cid = hindsight_comm(ev.communicator, where)
            s["recs"].append(("nbc_complete", root_rank(ev.communicator, int(ev.root), cid, where),
                              str(ev.collective_op).rsplit(".", 1)[-1], cid,
                              (int(ev.size_sent), int(ev.size_received)),
                              int(ev.request_id)))
        elif isinstance(ev, E.Metric):
            # hardware counters (PAPI), rusage, plugins: a trace has no column for them
            for member in ev.metric.members:
                skipped[f"value of metric {member.name}"] += 1
        elif type(ev).__name__ not in _NOT_A_LOSS:
            skipped[_event_kind(type(ev).__name__)] += 1
    open_ranks = [r for r in range(nranks) if state[r]["stack"]]
    if open_ranks:
        raise OtfError(f"{anchor}: rank {open_ranks[0]} ends with open regions (truncated trace?)")
    for r in range(nranks):
        col = cols[r]
        # non-blocking collectives: the post row gets what its Complete says; a post no
        # Complete names (the archive ends before the completion, or it was not recorded) has
        # no communicator, root or size to give: skipped, counted
        never = []
        for q, k in state[r]["nbc_post"].items():
            if q not in state[r]["nbc_done"]:
                never.append(k)
                continue
            opn = col["op"][k]
            cid, (sent, received), root = state[r]["nbc_done"][q]
            col["comm"][k] = cid
            col["nbytes"][k] = block(tf.BLOCKING_OF[opn], cid, root, r, sent, received)
            col["root"][k] = root if opn in tf.ROOTED_OPS else -1
        if never:
            skipped["non-blocking collective without completion"] += len(never)
            gone = set(never)
            for name, values in col.items():
                col[name] = [v for k, v in enumerate(values) if k not in gone]
    for loc in other_locations:
        skipped[f"non-MPI location{about(loc)}"] += 1
    extra = {"communicators": {k: v for k, v in members_of.items() if k != 0},
             "skipped": dict(skipped), **_placement(world)}
    return cols, extra


def _placement(world: list) -> dict[str, Any]:
    """``hosts`` (and a testbed run's ``network.node_of_rank``) from the system tree: a rank's
    host is its location group's parent node."""
    hosts: dict[str, list[int]] = {}
    nodes: list[int] = []
    for r, loc in enumerate(world):
        node = loc.group.system_tree_parent
        name = str(node.name) if node is not None else "localhost"
        if name.startswith(TESTBED_NODE + " ") and node.parent is not None:
            nodes.append(int(name[len(TESTBED_NODE) + 1:]))
            name = str(node.parent.name)
        hosts.setdefault(name, []).append(r)
    out: dict[str, Any] = {"hosts": hosts}
    if len(nodes) == len(world):
        out["network"] = {"node_of_rank": nodes}
    return out


def _call_rows(r: int, s: dict, name: str, recs: list[tuple], extras: list[tuple],
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
                for kind, peer, tag, comm, nb, rid in recs if kind == "send"]
    elif name == "Irecv":
        # OTF2 does not record what the Irecv named (unless hindsight wrote the archive:
        # attributes); otherwise it is ANY, and the completion row has the truth
        rows = [("Irecv", src, tag, comm, nb, post(rid, comm), -1)
                for kind, src, tag, comm, nb, rid in recs if kind == "irecv_request"]
    elif name in ("Start", "Startall"):
        # a started persistent request is recorded as its post, as hindsight's tracer does
        rows = [("Isend" if kind == "send" else "Irecv", peer, tag, comm, nb, post(rid, comm), -1)
                for kind, peer, tag, comm, nb, rid in recs if kind in ("send", "irecv_request")]
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


def import_otf2(path: Path | str, out: Path | str) -> Path:
    """Convert an OTF2 archive into a hindsight trace directory; checks that messages match."""
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
    write_trace(out, cols, communicators=comms, manifest={
        "app": extra.get("app") or _app_name(path), "paradigm": None,
        "origin": {"format": "otf2", "source": str(path),
                   **({"timeline": extra["timeline"]} if extra.get("timeline") else {})},
        "hosts": extra["hosts"], **({"network": extra["network"]} if "network" in extra else {}),
        "import": {"skipped": extra["skipped"]},
        **({"untraced_calls": extra["untraced_calls"]} if extra.get("untraced_calls") else {}),
        # the makespan from the epoch (time 0), as a traced run's (docs/trace-format.md)
        "makespan_ns": max((max(c["t_end"]) for c in cols if c["t_end"]), default=0)})
    tr = tf.read_trace(out)
    _, problems = match_messages(tr.table)
    fatal = [p for p in problems if "bytes but" not in p]
    if fatal:
        shutil.rmtree(out, ignore_errors=True)
        more = f" (and {len(fatal) - 3} more)" if len(fatal) > 3 else ""
        off_rank = sum(n for k, n in extra["skipped"].items() if k.startswith("MPI event on"))
        why = f"; {off_rank} MPI records on non-MPI locations (threads other than the ranks' " \
            "master threads) were skipped" if off_rank else ""
        raise OtfError(f"{path}: messages do not match: {'; '.join(fatal[:3])}{more}{why}")
    return out
