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

The records arrive through compiled callbacks (``otf2_events``) and become rows in compiled
kernels (``otf2_rows``, ``otf2_calls``) over the integer tables ``otf2_tables`` prepares from
the definitions; this module prepares them, words the errors where the kernels stop, counts
what is skipped and writes the trace.
"""

from __future__ import annotations

import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from hindsight import sortedsets
from hindsight import trace as tf
from hindsight.interop import otf2_events as EV
from hindsight.interop.otf2 import (
    ARCHIVE_NAME,
    ATTR_COMM,
    COLLECTIVE_OPS_OTF2,
    PROP_APP,
    PROP_TIMELINE,
    TESTBED_NODE,
    UNDEFINED_ROOT,
    OtfError,
    parse_rows,
    quiet_library,
)
from hindsight.interop.otf2_archive import (archive_property, check_event_files,
                                            incomplete_ranks, untraced_calls)
from hindsight.interop.otf2_calls import (E_NBC_KEY, E_NEVER_POSTED, R_RECV, T_DONE, T_POST,
                                          W_CPU, W_COMM, W_NBYTES, W_OP, W_PEER, W_RANK,
                                          W_REGION, W_REQ, W_ROOT, W_T0, W_T1, W_TAG)
from hindsight.interop.otf2_tables import Tables, is_mpi
from hindsight.system import gc_paused
from hindsight.interop.otf2_rows import (A_COMM, A_NEW, A_ROWS, BAIL_CALL, BAIL_LEAVE_EMPTY,
                                         BAIL_MISMATCH, C_NROWS, DONE, G_NAME, NEED_RECS,
                                         NEED_ROWS, NEED_STACK, NEED_TABLE, S_CALL_REG, S_DEPTH,
                                         Conversion, by_rank, convert, fill_nbc)
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
    """Per-rank columns (for ``hindsight.trace.write_trace``: ``op`` and ``region`` as names,
    None for no region) and manifest extras."""
    cols, extra, _ = _read_columns(path)
    out = []
    for c in cols:
        names = np.array([*c.pop("region_names"), None], dtype=object)
        ops = np.array(c.pop("op_names"), dtype=object)
        out.append({"op": ops[c["op"]].tolist(), "region": names[c["region"]].tolist(),
                    **{k: c[k].tolist() for k in INT_FIELDS}})
    return out, extra


@gc_paused()
def _read_columns(path: Path | str) -> tuple[list[dict[str, Any]], dict[str, Any], np.ndarray]:
    """Per-rank columns as arrays: ``op`` codes into ``op_names``, ``region`` codes into
    ``region_names`` (sorted, -1 for none) and the integer columns; manifest extras; and the
    rows of every rank, in rank order, as ``by_rank`` gives them (the per-rank columns are
    views of them)."""
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
        cols, extra, rows = _convert(trace, anchor, otf2)
        for key, name in (("timeline", PROP_TIMELINE), ("app", PROP_APP)):
            value = archive_property(trace, name)
            if value:
                extra[key] = value
        extra["untraced_calls"] = untraced_calls(trace, anchor)
        incomplete = incomplete_ranks(trace, anchor, len(cols))
        if incomplete:
            extra["incomplete"] = incomplete
        return cols, extra, rows
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


def _convert(trace, anchor: Path, otf2) -> tuple[list[dict[str, Any]], dict[str, Any],
                                                 np.ndarray]:
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

    check_event_files(defs, anchor)

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

    here = [0, 0]           # the rank and time (ns) of the event being converted

    def where() -> str:
        """The event being converted, for an error message."""
        return f"rank {here[0]} at {here[1]} ns"

    def hindsight_comm(cm) -> int:
        if cm not in comm_id:
            raise OtfError(f"{anchor}: {where()}: MPI record names a communicator that is not a "
                           "defined MPI communicator")
        return comm_id[cm]

    def world_rank(cm, local: int) -> int:
        cid = hindsight_comm(cm)
        if cid == tf.COMM_SELF_ID:
            return here[0]
        mem = members_of[cid]
        if not 0 <= local < len(mem):
            raise OtfError(f"{anchor}: {where()}: rank {local} outside communicator "
                           f"'{cm.name}' of size {len(mem)}")
        return mem[local]

    def root_rank(cm, root: int, cid: int) -> int:
        if root == UNDEFINED_ROOT or cid == tf.COMM_SELF_ID or \
                root >= len(members_of.get(cid, [])):
            return -1
        return world_rank(cm, root)

    def ns(t: int) -> int:
        return int((int(t) - offset) * 10**9 // res) if res != 10**9 else int(t) - offset

    def ns_array(ticks: np.ndarray) -> np.ndarray:
        """``ns`` of each of ``ticks``; exact (integers) as long as a tick count's remainder
        times 1e9 fits 64 bits, else per element."""
        if res == 10**9:
            return ticks - offset
        if res >= 2**63 // 10**9 or abs(offset) >= 2**62:
            return np.array([ns(t) for t in ticks.tolist()], np.int64)
        d = ticks - offset
        return d // res * 10**9 + d % res * 10**9 // res

    labels = _location_labels(defs, otf2)
    # (first met first: the skipped kinds are listed in that order, the same on every run)
    other_locations: dict = {}

    def about(loc) -> str:
        """What a location outside the MPI group is, where the archive says, as the suffix of
        a skipped kind: " (OpenMP)"."""
        return f" ({labels[loc]})" if loc in labels else ""

    def region(ref: int) -> tuple[str, bool]:
        reg = defs.regions[ref]
        return str(reg.name), is_mpi(reg, otf2)

    def coll_op(code: int) -> str:
        return str(otf2.CollectiveOp(code)).rsplit(".", 1)[-1]

    tab = Tables(defs, otf2, comm_id, members_of, rank_of_loc, coll_op)
    # a row takes at least one event of its rank (but for rows of ATTR_ROWS): room for as many
    # rows as the ranks' locations say they have events (``Conversion`` maps only those written)
    events = sum(int(loc.number_of_events or 0) for loc in world)
    conv = Conversion(nranks, max(events, EV.CHUNK))
    nread = 0
    # (leaving the block stops the reading ahead, before the caller closes the reader)
    with EV.read_events(trace, {str(a.name): a._ref for a in defs.attributes}) as chunks:
        for recs, rare in chunks:
            nread += len(recs) + sum(rare.values())
            got = tab.fields(recs, offset, res)
            if got is None:
                got = (ns_array(recs[:, EV.TIME]), tab.ranks_of(recs[:, EV.LOC]),
                       tab.regions(recs[:, EV.F0]), tab.comms(recs[:, EV.F1]))
            times, lrank, gidx, cidx = got
            conv.other_locations(len(tab.locations))
            extslot = tab.extras(recs)
            seen = (conv.skipped.copy(), conv.off.copy())
            i = 0
            while i < len(recs):
                why, i = convert(recs, times, lrank, gidx, cidx, extslot, i, tab.regs, tab.comm_tab,
                                 tab.slots, tab.members, tab.ops, tab.named_ops, tab.coll_ids,
                                 _KIND_MPI, tab.bad_loc, tab.ext_span, tab.ext_rows, own_ids,
                                 conv.ranks, conv.stack, conv.rstack, conv.recs, conv.rows,
                                 conv.counters, conv.skipped, conv.skipped_first, conv.off,
                                 conv.off_first, conv.aux, *conv.tables, conv.tc)
                if why in (NEED_STACK, NEED_RECS, NEED_ROWS, NEED_TABLE):
                    conv.grow(why)
                elif why != DONE:
                    here[:] = int(lrank[i]), int(times[i])
                    _explain(why, recs[i], conv, tab, anchor, here, region,
                             lambda ref: defs.comms[ref], hindsight_comm, world_rank, root_rank,
                             coll_op)
            # the kinds skipped in this chunk, in the order they first occurred
            new = [(conv.skipped_first[j], name, conv.skipped[j] - seen[0][j])
                   for j, name in enumerate(_SKIP_KINDS)]
            for slot in np.flatnonzero((conv.off[:len(seen[1])] != seen[1]).any(axis=1)).tolist() \
                    + list(range(len(seen[1]), len(conv.off))):
                loc = tab.locations[slot]
                other_locations.setdefault(loc)
                for mpi in (0, 1):
                    new.append((conv.off_first[slot, mpi],
                                f"{'MPI ' if mpi else ''}event on a non-MPI location{about(loc)}",
                                conv.off[slot, mpi] - (seen[1][slot, mpi] if slot < len(seen[1])
                                                       else 0)))
            for _, name, n in sorted(new, key=lambda x: x[0]):
                if n:
                    skipped[name] += int(n)
            for (name, lref, metric), n in rare.items():
                # events with no row, counted by the reader: what they are, where
                r = tab.rank_of_ref.get(lref)
                if r is None:
                    loc = defs.locations[lref]
                    other_locations.setdefault(loc)
                    mpi = name.startswith("Mpi")
                    skipped[f"{'MPI ' if mpi else ''}event on a non-MPI location{about(loc)}"] += n
                elif name == "Metric":
                    # hardware counters (PAPI), rusage, plugins: a trace has no column for them
                    for member in defs.metrics[metric].members:
                        skipped[f"value of metric {member.name}"] += n
                elif name not in _NOT_A_LOSS:
                    skipped[_event_kind(name)] += n
    # The C library does not always report a cut event file (a cut between two records reads
    # as a shorter file): the definitions say how many events each location wrote.
    announced = [int(loc.number_of_events or 0) for loc in defs.locations]
    if sum(announced) and nread < sum(announced):
        raise OtfError(f"{anchor}: damaged OTF2 archive ({sum(announced) - nread} of the "
                       f"{sum(announced)} events its definitions announce are missing: a cut "
                       "event file?)")
    open_ranks = np.flatnonzero(conv.ranks[:, S_DEPTH])
    if len(open_ranks):
        raise OtfError(f"{anchor}: rank {open_ranks[0]} ends with open regions (truncated trace?)")
    nrows = int(conv.counters[C_NROWS])
    keep = np.ones(nrows, np.bool_)
    never = fill_nbc(conv.rows, conv.tables[T_POST], conv.tables[T_DONE], tab.ops, own_ids,
                     tab.slots, tab.members, keep)
    if never:
        skipped["non-blocking collective without completion"] += never
    rows, start = by_rank(conv.rows, nrows, keep, nranks)
    del conv
    for loc in other_locations:
        skipped[f"non-MPI location{about(loc)}"] += 1
    extra = {"communicators": {k: v for k, v in members_of.items() if k != 0},
             "skipped": dict(skipped), **_placement(world)}
    return _columns(rows, start, tab), extra, rows


# the skipped kinds otf2_rows counts, at their SK_* places
_SKIP_KINDS = ("non-blocking collective event", "MPI call without a trace op")
_KIND_MPI = np.array([name.startswith("Mpi") for name in EV.KIND_NAMES], np.int64)


def _columns(rows: np.ndarray, start: np.ndarray, tab: "Tables") -> list[dict[str, Any]]:
    """Each rank's columns from ``by_rank``'s rows: op codes, region codes into the rank's
    sorted region names, the integer columns."""
    cols = []
    for r in range(len(start) - 1):
        part = rows[:, start[r]:start[r + 1]]
        reg = part[W_REGION]
        used = sortedsets.unique(reg[reg >= 0])
        order = sorted(range(len(used)), key=lambda j: tab.names[used[j]])
        code = np.full(len(tab.names) + 1, -1, np.int64)
        code[used[order]] = np.arange(len(used))
        col = {"op": part[W_OP], "op_names": tab.op_names, "region": code[reg],
               "region_names": [tab.names[used[j]] for j in order]}
        for name, w in zip(INT_FIELDS, (W_T0, W_T1, W_CPU, W_PEER, W_TAG, W_COMM, W_NBYTES,
                                        W_REQ, W_ROOT)):
            col[name] = part[w]
        cols.append(col)
    return cols


def _written_columns(cols: list[dict[str, Any]],
                     rows: np.ndarray) -> dict[str, np.ndarray] | None:
    """The columns ``match_messages`` reads, with the values ``write_trace`` wrote from ``cols``
    (``seq`` from 0 on each rank): views of ``rows`` (``_read_columns``), since reading the
    files back decodes every column again and concatenating ``cols`` copies them. None when an
    op is a name (one ``write_trace`` names): the files are read then."""
    if not cols or any(not isinstance(c["op"], np.ndarray) for c in cols):
        return None
    n = [len(c["op"]) for c in cols]
    out = {"rank": rows[W_RANK], "op": rows[W_OP].astype(np.int8),
           "seq": np.concatenate([np.arange(k, dtype=np.int64) for k in n])}
    for name, w in (("peer", W_PEER), ("tag", W_TAG), ("comm", W_COMM), ("nbytes", W_NBYTES),
                    ("request", W_REQ)):
        out[name] = rows[w]
    return out


def _explain(why: int, rec: np.ndarray, conv: Conversion, tab: Tables, anchor: Path, here,
             region, comm, hindsight_comm, world_rank, root_rank, coll_op) -> None:
    """Raise the error of the event ``rec`` at which ``convert`` stopped with ``why``: as the
    per-record importer worded it, or the exception its definition lookups raise."""
    where = f"rank {here[0]} at {here[1]} ns"
    k, lref, f0, f1, f2, mask = (int(rec[c]) for c in (EV.KIND, EV.LOC, EV.F0, EV.F1, EV.F2,
                                                        EV.MASK))
    if why == BAIL_LEAVE_EMPTY:
        raise OtfError(f"{anchor}: {where}: Leave without Enter")
    if why == BAIL_MISMATCH:
        raise OtfError(f"{anchor}: {where}: Leave of '{region(f0)[0]}' but "
                       f"'{tab.names[conv.aux[0]]}' is open")
    if why == BAIL_CALL:
        r = here[0]
        name = tab.names[tab.regs[conv.ranks[r, S_CALL_REG], G_NAME]]
        name = name[4:] if name.startswith("MPI_") else name
        err, rid, posted = (int(x) for x in conv.aux[[3, 0, 1]])
        if err == E_NEVER_POSTED:
            rid = rid if posted == R_RECV else rid & (2**64 - 1)    # posted: the record kind
            raise OtfError(f"{anchor}: rank {r}: MPI_{name} completes request {rid}, "
                           "which was never posted")
        posted = tab.op_names[posted]
        if err == E_NBC_KEY:
            COLLECTIVE_OPS_OTF2[tf.BLOCKING_OF[posted]]     # raises, as the reference did
        raise OtfError(f"{anchor}: rank {r}: MPI_{name} completes request {rid & (2**64 - 1)}"
                       f" of an MPI_{posted} with a {tab.coll_names[conv.aux[2]]} "
                       "NonBlockingCollectiveComplete")
    if here[0] < 0:
        tab.defs.locations[lref]
        if k in (EV.ENTER, EV.LEAVE):
            region(f0)
    elif k == EV.ENTER:
        region(f0)
        if mask >> A_NEW & 1 and not mask >> A_COMM & 1:
            _missing(ATTR_COMM)
        if mask >> A_ROWS & 1:
            parse_rows(tab.defs.strings[int(rec[EV.A0 + A_ROWS])], f"{anchor}: {where}")
    elif k == EV.LEAVE:
        region(f0)
    elif k in (EV.SEND, EV.ISEND, EV.RECV, EV.IRECV):
        world_rank(comm(f1), f0)
    elif k == EV.PROBE:
        cm = comm(f1)
        if f0 != UNDEFINED_ROOT:
            world_rank(cm, f0)
        hindsight_comm(cm)
    elif k in (EV.COLL_END, EV.NBC_COMPLETE):
        cm = comm(f1)
        root_rank(cm, f2, hindsight_comm(cm))
        if k == EV.NBC_COMPLETE:
            coll_op(f0)
    raise AssertionError(f"{anchor}: {where}: the conversion stopped at a record of kind {k} "
                         "that converts")


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


def import_otf2(path: Path | str, out: Path | str, match: bool = True) -> Path:
    """Convert an OTF2 archive into a hindsight trace directory; checks that messages match
    (``match``; without it the caller does, as ``hindsight import`` does in its check of the
    written trace, raising ``unmatched_error``'s error)."""
    cols, extra, rows = _read_columns(path)
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise OtfError(f"{out}: exists and is not empty (choose a new --out)")
    # the epoch: the earliest event, or hindsight's own epoch for archives hindsight wrote
    t_min = min(0, min((int(c["t_start"].min()) for c in cols if len(c["t_start"])),
                       default=0))
    for c in cols:
        c["t_start"] = c["t_start"] - t_min
        c["t_end"] = c["t_end"] - t_min
        names = c.pop("op_names")
        if len(c["op"]) and c["op"].max() >= len(tf.OPS):
            c["op"] = [names[k] for k in c["op"].tolist()]    # write_trace names the unknown
        else:
            c["op"] = c["op"].astype(np.int8)
    comms = {int(k): v for k, v in extra["communicators"].items()}
    unfinished = extra.get("incomplete") or {}
    write_trace(out, cols, communicators=comms, incomplete_ranks=sorted(unfinished), manifest={
        "app": extra.get("app") or _app_name(path), "paradigm": None,
        # (a timeline no run measured keeps saying so: replay's noise report reads nothing
        # measured from it)
        "origin": {"format": "otf2", "source": str(path),
                   **({"timeline": extra["timeline"]} if extra.get("timeline") else {})},
        "hosts": extra["hosts"], **({"network": extra["network"]} if "network" in extra else {}),
        "import": {"skipped": extra["skipped"]},
        **({"untraced_calls": extra["untraced_calls"]} if extra.get("untraced_calls") else {}),
        # a partial export's source: as incomplete here, each rank with its status there
        **({"rank_status": [unfinished.get(r, "complete") for r in range(len(cols))]}
           if unfinished else {}),
        # the makespan from the epoch (time 0), as a traced run's (docs/trace-format.md)
        "makespan_ns": max((int(c["t_end"].max()) for c in cols if len(c["t_end"])),
                           default=0)})
    if not match or unfinished:     # (a partial source's messages to its lost ranks)
        return out
    _, problems = match_messages(_written_columns(cols, rows) or tf.read_trace(out).table)
    error = unmatched_error(path, problems, extra["skipped"])
    if error is not None:
        shutil.rmtree(out, ignore_errors=True)
        raise error
    return out


def unmatched_error(path: Path | str, problems: list[str],
                    skipped: dict[str, int]) -> OtfError | None:
    """The error of an archive whose messages do not match (``match_messages``' ``problems``
    of its trace; ``skipped``: the import's skipped records by kind), or None. A receive
    larger than its send is not one."""
    fatal = [p for p in problems if "bytes but" not in p]
    if not fatal:
        return None
    more = f" (and {len(fatal) - 3} more)" if len(fatal) > 3 else ""
    off_rank = sum(n for k, n in skipped.items() if k.startswith("MPI event on"))
    why = f"; {off_rank} MPI records on non-MPI locations (threads other than the ranks' " \
        "master threads) were skipped" if off_rank else ""
    return OtfError(f"{path}: messages do not match: {'; '.join(fatal[:3])}{more}{why}")
