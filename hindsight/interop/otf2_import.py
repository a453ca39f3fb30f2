"""OTF2 import: any MPI archive (e.g. one Score-P recorded from a C or Fortran program) as a trace.

Ranks are the positions in the MPI ``COMM_LOCATIONS`` group; MPI calls hindsight has no op for
(``MPI_Init``, ``MPI_Comm_rank``, ...) are skipped (their time counts as computation); non-MPI
regions become ``region`` rows; each call's rows come from the MPI records inside it (the mapping
``hindsight.interop.otf2_export`` writes, read back). It fails with ``OtfError`` on a file that is
not an OTF2 anchor, on missing definitions, on records it cannot place, and on messages that do
not match.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from hindsight import trace as tf
from hindsight.interop.otf2 import (
    ATTR_COMM,
    ATTR_CPU,
    ATTR_IRECV_BYTES,
    ATTR_NEW_COMM,
    ATTR_SIZE,
    ATTR_SOURCE,
    ATTR_TAG,
    TOTAL_OVER_PEERS,
    UNDEFINED_ROOT,
    OtfError,
)
from hindsight.trace.schema import short_error
from replay.matching import match_messages
from hindsight.trace.write import INT_FIELDS, write_trace


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
        return _convert(trace, anchor, otf2, E)
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

    cols = [{c: [] for c in ("op", "region", *INT_FIELDS)} for _ in range(nranks)]
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
            if opn in TOTAL_OVER_PEERS and col["comm"][k] != tf.COMM_SELF_ID:
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
        "app": Path(path).stem, "paradigm": None,
        "origin": {"format": "otf2", "source": str(path),
                   "skipped_calls": extra["skipped_calls"],
                   "events_on_other_locations": extra["other_locations_events"]}})
    tr = tf.read_trace(out)
    _, problems = match_messages(tr.table)
    fatal = [p for p in problems if "bytes but" not in p]
    if fatal:
        shutil.rmtree(out, ignore_errors=True)
        more = f" (and {len(fatal) - 3} more)" if len(fatal) > 3 else ""
        raise OtfError(f"{path}: messages do not match: {'; '.join(fatal[:3])}{more}")
    return out
