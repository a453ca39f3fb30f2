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

import gc
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from hindsight import trace as tf
from hindsight.interop import otf2_events as EV
from hindsight.interop.otf2_calls import call_rows
from hindsight.interop.otf2 import (
    ARCHIVE_NAME,
    ATTR_COMM,
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
# the columns of a row as _convert collects it
_ROW = ("op", "region", "t_start", "t_end", "cpu_ns", "peer", "tag", "comm", "nbytes", "request",
        "root")
# OTF2 record name prefix -> the kind a skipped one is counted under (metric values are counted
# per metric, see _convert)
_EVENT_KINDS = (("Rma", "RMA event"), ("Omp", "OpenMP event"), ("Thread", "thread event"),
                ("Io", "I/O event"), ("Parameter", "parameter event"),
                ("CallingContext", "calling-context event"),
                ("MpiImrecv", "matched receive event"), ("MpiMrecv", "matched receive event"))


def _event_kind(record: str) -> str:
    return next((kind for prefix, kind in _EVENT_KINDS if record.startswith(prefix)),
                f"{record} event")


def _missing(name: str) -> bool:
    """An attribute the record needs is missing: as a dangling reference, a damaged archive."""
    raise KeyError(name)


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
        # the conversion makes millions of small objects that live to its end: the cyclic
        # collector's passes over them would cost more than the conversion (quadratic)
        collecting = gc.isenabled()
        gc.disable()
        try:
            return _convert(trace, anchor, otf2)
        finally:
            if collecting:
                gc.enable()
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


def _convert(trace, anchor: Path, otf2) -> tuple[list[dict[str, list]], dict[str, Any]]:
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

    def where() -> str:
        """The event being converted, for an error message."""
        return f"rank {rank_here} at {t_here} ns"

    def hindsight_comm(cm) -> int:
        if cm not in comm_id:
            raise OtfError(f"{anchor}: {where()}: MPI record names a communicator that is not a "
                           "defined MPI communicator")
        return comm_id[cm]

    def world_rank(cm, local: int) -> int:
        cid = hindsight_comm(cm)
        if cid == tf.COMM_SELF_ID:
            return rank_here
        mem = members_of[cid]
        if not 0 <= local < len(mem):
            raise OtfError(f"{anchor}: {where()}: rank {local} outside communicator "
                           f"'{cm.name}' of size {len(mem)}")
        return mem[local]

    def root_rank(cm, root: int, cid: int) -> int:
        """The world rank of a collective record's root, -1 for none (OTF2_UNDEFINED_UINT32,
        COMM_SELF, MPI_ROOT/MPI_PROC_NULL of an intercommunicator)."""
        if root == UNDEFINED_ROOT or cid == tf.COMM_SELF_ID or \
                root >= len(members_of.get(cid, [])):
            return -1
        return world_rank(cm, root)

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

    # each rank's rows as tuples (_ROW's columns), its columns made at the end
    rows_of: list[list[tuple]] = [[] for _ in range(nranks)]
    # nbc: a non-blocking collective's OTF2 request id -> (hindsight request, post op);
    # nbc_post: hindsight request -> index of its post row, which the NonBlockingCollective-
    # Complete fills; nbc_done: hindsight request -> (comm, (sizeSent, sizeReceived), world
    # root) from it
    state = [dict(stack=[], regions=[], call=None, recs=[], extras=[], req={}, next_req=0,
                  nbc={}, nbc_post={}, nbc_done={})
             for _ in range(nranks)]
    labels = _location_labels(defs, otf2)
    other_locations: set = set()
    rank_here = t_here = 0

    def about(loc) -> str:
        """What a location outside the MPI group is, where the archive says, as the suffix of
        a skipped kind: " (OpenMP)"."""
        return f" ({labels[loc]})" if loc in labels else ""

    def add(r, op_name, t0, t1, peer=-1, tag=-1, comm=0, nbytes=-1, request=-1, root=-1,
            region=None, cpu=-1):
        rows_of[r].append((op_name, region, t0, t1, cpu, peer, tag, comm, nbytes, request, root))

    regions = {}                 # region ref -> (name, is MPI)
    comms = {}                   # comm ref -> definition
    coll_ops: dict[int, str] = {}
    rank_of_ref = {loc._ref: r for loc, r in rank_of_loc.items()}
    attr_refs = {str(a.name): a._ref for a in defs.attributes}
    # the attributes' places in a record's values (EV.ATTRS) and presence bits
    (A_SIZE, A_CPU, A_NEW, A_COMM, A_ROWS, A_SRC, A_TAG, A_RBYTES, A_NBYTES) = \
        range(len(EV.ATTRS))

    def region(ref: int) -> tuple[str, bool]:
        if ref not in regions:
            reg = defs.regions[ref]
            regions[ref] = (str(reg.name), _is_mpi(reg, otf2))
        return regions[ref]

    def comm(ref: int):
        if ref not in comms:
            comms[ref] = defs.comms[ref]
        return comms[ref]

    def coll_op(code: int) -> str:
        if code not in coll_ops:
            coll_ops[code] = str(otf2.CollectiveOp(code)).rsplit(".", 1)[-1]
        return coll_ops[code]

    def ns_array(ticks: np.ndarray) -> list[int]:
        """``ns`` of each of ``ticks``; exact (integers) as long as a tick count's remainder
        times 1e9 fits 64 bits, else per element."""
        if res == 10**9:
            return (ticks - offset).tolist()
        if res >= 2**63 // 10**9 or abs(offset) >= 2**62:
            return [ns(t) for t in ticks.tolist()]
        d = ticks - offset
        return (d // res * 10**9 + d % res * 10**9 // res).tolist()

    for recs, rare in EV.read_events(trace, attr_refs):
        times = ns_array(recs[:, EV.TIME])
        u64 = recs.view(np.uint64)
        for (k, lref, f0, f1, f2, mask, *a), t, f3, f4, f5 in zip(
                recs[:, [EV.KIND, EV.LOC, EV.F0, EV.F1, EV.F2, EV.MASK, *range(EV.A0, EV.WIDTH)]]
                .tolist(), times, u64[:, EV.F3].tolist(), u64[:, EV.F4].tolist(),
                u64[:, EV.F5].tolist()):
            r = rank_of_ref.get(lref)
            if r is None:
                loc = defs.locations[lref]
                other_locations.add(loc)
                mpi = EV.KIND_NAMES[k].startswith("Mpi") or (
                    k in (EV.ENTER, EV.LEAVE) and region(f0)[1])
                skipped[f"{'MPI ' if mpi else ''}event on a non-MPI location{about(loc)}"] += 1
                continue
            rank_here = r
            s = state[r]
            t_here = t
            if k == EV.ENTER:
                name, is_mpi = region(f0)
                s["stack"].append((name, t, is_mpi,
                                   a[A_SIZE] if mask >> A_SIZE & 1 else -1))
                if is_mpi and s["call"] is None:
                    s["call"] = (name[4:] if name.startswith("MPI_") else name, t)
                    s["recs"] = [("comm_create", a[A_NEW], -1, a[A_COMM], -1, -1)] \
                        if mask >> A_NEW & 1 and (mask >> A_COMM & 1 or _missing(ATTR_COMM)) \
                        else []
                    s["extras"] = parse_rows(defs.strings[a[A_ROWS]], f"{anchor}: {where()}") \
                        if mask >> A_ROWS & 1 else []
                elif not is_mpi:
                    s["regions"].append(name)
            elif k == EV.LEAVE:
                if not s["stack"]:
                    raise OtfError(f"{anchor}: {where()}: Leave without Enter")
                name, t_enter, is_mpi, work = s["stack"].pop()
                cpu = a[A_CPU] if mask >> A_CPU & 1 else -1
                if region(f0)[0] != name:
                    raise OtfError(f"{anchor}: {where()}: Leave of '{region(f0)[0]}' but "
                                   f"'{name}' is open")
                inner = s["regions"][-1] if s["regions"] else None
                if not is_mpi:
                    s["regions"].pop()
                    add(r, "region", t_enter, t, comm=-1, nbytes=work, region=name, cpu=cpu)
                elif s["call"] is not None and s["call"][1] == t_enter and \
                        not any(x[2] for x in s["stack"]):
                    rows = call_rows(r, s, s["call"][0], s["recs"], s["extras"], anchor,
                                      own_ids, skipped)
                    if not rows:
                        # A call hindsight has no op for, or one whose records are missing
                        # (e.g. a Test that completed nothing): its time is computation.
                        skipped["MPI call without a trace op"] += 1
                    for j, (op_name, *fields) in enumerate(rows):
                        if isinstance(fields[3], tuple):
                            # a blocking collective's (sizeSent, sizeReceived): its block
                            fields[3] = block(op_name, fields[2], fields[5], r, *fields[3])
                        if fields[2] is None:
                            # a non-blocking collective's post: its Complete gives comm,
                            # bytes, root
                            s["nbc_post"][fields[4]] = len(rows_of[r])
                            fields[2] = 0
                        add(r, op_name, t_enter, t, *fields, region=inner,
                            cpu=cpu if j == 0 else -1)  # the call's CPU time on its first row
                    s["call"] = None
            elif k in (EV.SEND, EV.ISEND):
                cm = comm(f1)
                s["recs"].append(("send", world_rank(cm, f0), f2,
                                  hindsight_comm(cm), f3, f4 if k == EV.ISEND else -1))
            elif k in (EV.RECV, EV.IRECV):
                cm = comm(f1)
                s["recs"].append(("recv", world_rank(cm, f0), f2,
                                  hindsight_comm(cm), f3, f4 if k == EV.IRECV else -1))
            elif k == EV.IRECV_REQUEST:
                s["recs"].append((
                    "irecv_request", a[A_SRC] if mask >> A_SRC & 1 else tf.ANY_SOURCE,
                    a[A_TAG] if mask >> A_TAG & 1 else tf.ANY_TAG,
                    a[A_COMM] if mask >> A_COMM & 1 else 0,
                    a[A_RBYTES] if mask >> A_RBYTES & 1 else -1, f4))
            elif k == EV.PROBE:
                cm = comm(f1)
                s["recs"].append((
                    "probe", world_rank(cm, f0) if f0 != UNDEFINED_ROOT
                    else tf.ANY_SOURCE, f2 if f2 != UNDEFINED_ROOT else tf.ANY_TAG,
                    hindsight_comm(cm),
                    a[A_NBYTES] if mask >> A_NBYTES & 1 else -1, -1))
            elif k == EV.ISEND_COMPLETE:
                s["recs"].append(("isend_complete", -1, -1, 0, -1, f4))
            elif k == EV.COLL_END:
                # nbytes is (sizeSent, sizeReceived) until the row is added (block())
                cm = comm(f1)
                cid = hindsight_comm(cm)
                s["recs"].append(("coll", root_rank(cm, f2, cid), -1, cid, (f3, f5), -1))
            elif k in (EV.NBC_REQUEST, EV.NBC_COMPLETE) and s["call"] is None:
                skipped["non-blocking collective event"] += 1     # outside any MPI call
            elif k == EV.NBC_REQUEST:
                s["recs"].append(("nbc_request", -1, -1, -1, -1, f4))
            elif k == EV.NBC_COMPLETE:
                # (kind, root, collective op's OTF2 name, comm, (sizeSent, sizeReceived),
                # request)
                cm = comm(f1)
                cid = hindsight_comm(cm)
                s["recs"].append(("nbc_complete", root_rank(cm, f2, cid), coll_op(f0),
                                  cid, (f3, f5), f4))
        for (name, lref, metric), n in rare.items():
            # events with no row, counted by the reader: what they are, where
            r = rank_of_ref.get(lref)
            if r is None:
                loc = defs.locations[lref]
                other_locations.add(loc)
                mpi = name.startswith("Mpi")
                skipped[f"{'MPI ' if mpi else ''}event on a non-MPI location{about(loc)}"] += n
            elif name == "Metric":
                # hardware counters (PAPI), rusage, plugins: a trace has no column for them
                for member in defs.metrics[metric].members:
                    skipped[f"value of metric {member.name}"] += n
            elif name not in _NOT_A_LOSS:
                skipped[_event_kind(name)] += n
    open_ranks = [r for r in range(nranks) if state[r]["stack"]]
    if open_ranks:
        raise OtfError(f"{anchor}: rank {open_ranks[0]} ends with open regions (truncated trace?)")
    cols = []
    for rows in rows_of:
        by_name = dict(zip(_ROW, map(list, zip(*rows)))) if rows else {c: [] for c in _ROW}
        cols.append({c: by_name[c] for c in ("op", "region", *INT_FIELDS)})
    del rows_of
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
        "app": _app_name(path), "paradigm": None,
        "origin": {"format": "otf2", "source": str(path)},
        "hosts": extra["hosts"], **({"network": extra["network"]} if "network" in extra else {}),
        "import": {"skipped": extra["skipped"]},
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
