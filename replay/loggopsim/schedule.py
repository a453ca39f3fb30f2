"""A hindsight trace as a LogGOPSim schedule: what ``--model loggopsim`` replays.

``schedule_from_trace`` turns a prepared trace's program order into a GOAL schedule;
``sidecar_schedule`` gives back the schedule a trace imported from GOAL was made from (kept as
``TRACE/schedule.goal``), which the replay runs instead, dependency graph and all.
"""

from __future__ import annotations

import functools
import json
import shutil
from pathlib import Path
from typing import Mapping, NamedTuple

import numpy as np

from hindsight import sources
from hindsight import trace as tf
from hindsight.jit import njit
from replay import kernel as K
from replay.cache import CACHE_DIR, write_dir
from replay.loggopsim.goal import GoalError, GoalLabels, read_goal
from replay.loggopsim import buckets as _buckets
from replay.loggopsim.simulator import ANY, CALC, RECV, SEND, Schedule, schedule_buckets
from replay.prepare import Prepared, Stream

SIDECAR = tf.GOAL_SIDECAR


class TraceSchedule(NamedTuple):
    """A trace's schedule and how it maps back: ``stream_op[j]`` is the stream operation
    schedule operation ``j`` stands for (``-2 - i`` for the calc of stream operation i's burst,
    ``-2 - nops`` for the rank's trailing computation)."""

    schedule: Schedule
    stream: Stream
    stream_op: np.ndarray


def schedule_from_trace(prep: Prepared, scale: np.ndarray, cpu_time: bool = False,
                        algorithms: Mapping[str, str] | None = None) -> TraceSchedule:
    """The GOAL schedule of a prepared trace, bursts multiplied by ``scale`` (per region + 1,
    ``scale[0]`` for bursts outside regions).

    Each rank's program order becomes a dependency chain: a compute burst is a ``calc``; a
    blocking send/receive is an operation the next one ``requires``; a non-blocking post is one
    the next ``irequires`` (it only has to have started) and its Wait adds a ``requires`` on it.
    Collectives are the point-to-point messages of their algorithms (as in every network model).
    One-sided PSCW epochs are their messages; passive round trips are left out
    (``passive_round_trips``).
    Tags: a point-to-point message on COMM_WORLD keeps its tag; the others (collectives, other
    communicators) get tags above every user tag, unique per sender/receiver pair, so
    LogGOPSim's (source, tag) matching pairs exactly the messages the trace paired.
    """
    st = prep.stream(expand=True, algorithms=dict(algorithms or {}))
    tags = _message_tags(prep, st)
    burst = st.burst_cpu if cpu_time else st.burst
    # at x1 (the default) the bursts are taken as they are: the product and its index were
    # three arrays of 8 bytes per operation, new memory (dearer on these VMs than the chain)
    burst = np.asarray(burst) if (scale == 1).all() else burst * scale[st.reg.astype(np.int64) + 1]
    trail = prep.trail * scale[0]
    out = _chain(st.rank_off, np.asarray(st.kind), st.msg, burst, trail, st.m_bytes,
                 st.m_src, st.m_dst, tags, K.SEND, K.RECV, K.ISEND, K.IRECV, K.WSEND, K.WRECV)
    (rank, kind, size, peer, tag, stream_op, dep_op, dep_on, dep_start) = out
    z = np.zeros(len(kind), np.int64)
    sched = Schedule(prep.nranks, rank, kind, size, peer, tag, z, z.copy(), dep_op, dep_on,
                     dep_start)
    return TraceSchedule(sched, st, stream_op)


def passive_round_trips(prep: Prepared) -> int:
    """How many one-sided passive round trips (rules ``lock_epoch`` and ``pscw_epoch``'s gets,
    ``replay.rma_epochs``) a schedule of ``prep`` leaves out: GOAL has no operation whose
    receiver is a target's library rather than its rank, so their PSEND and PRECV operations
    are not in it (the calls stay, their transfers do not)."""
    return int(np.count_nonzero(prep.rma.kind == K.PSEND))


def sidecar_schedule(prep: Prepared) -> Schedule | None:
    """The GOAL schedule a trace was imported from, if it was (kept as TRACE/schedule.goal).

    Its parsed arrays are cached beside it (``TRACE/.replay-cache/schedule-<fingerprint>/``,
    one ``.npy`` per array, memory-mapped when read back), as LogGOPSim keeps a binary form of
    a schedule: a replay reads them instead of parsing the text again. The fingerprint is the
    file's size and modification time, so an edited schedule is parsed afresh."""
    origin = (prep.manifest or {}).get("origin") or {}
    if origin.get("format") != "goal" or prep.path is None:
        return None
    path = Path(prep.path) / SIDECAR
    if not path.is_file():
        raise GoalError(f"{path}: missing; the manifest says this trace was imported from a GOAL "
                        "schedule kept in that file")
    cached = _schedule_cache(path)
    if cached is not None and cached.is_dir():
        try:
            return _load_schedule(cached)
        except (OSError, ValueError, KeyError):   # a damaged cache is rebuilt, never trusted
            shutil.rmtree(cached, ignore_errors=True)
    sched = read_goal(path)
    cache_schedule(sched, path)
    return sched


def cache_schedule(sched: Schedule, goal: Path) -> None:
    """Keep ``sched``, parsed from the schedule file ``goal`` beside a trace, in that trace's
    cache, where ``sidecar_schedule`` reads it instead of parsing the file (``hindsight import
    goal`` keeps the schedule it parsed, as LogGOPSim's txt2bin writes a binary form). Its
    matching buckets are numbered (``schedule.buckets``, if it has none) and kept with it: a
    replay under --model loggopsim maps them instead of numbering them each time."""
    cached = _schedule_cache(goal)
    if cached is not None and isinstance(sched.labels, GoalLabels):
        if sched.buckets is None:
            sched.buckets = schedule_buckets(sched)
        _save_schedule(sched, cached)


def kept_schedule(goal: Path) -> Schedule | None:
    """The schedule ``cache_schedule`` kept for the schedule file ``goal``, its arrays mapped
    as stored (narrow: see ``_DISK``); None when there is none."""
    cached = _schedule_cache(goal)
    if cached is None or not cached.is_dir():
        return None
    return _load_schedule(cached)


# On disk the arrays are as narrow as the format allows (ranks, peers, tags, cpu/nic indices and,
# below 2**31 operations, dependencies fit int32: see the parser's and simulator's checks; cpu/nic
# indices below 2**15, all the simulator runs, int16, the width it reads them at; whole sizes
# below 2**31, int32: ``_whole``);
# they are read back memory-mapped as they are: the simulator takes any integer width (widening
# them copied some 350 MB at 5 M operations that the simulator narrowed again).
_DISK = {"rank": np.int32, "kind": np.int8, "size": np.float64, "peer": np.int32,
         "tag": np.int32, "cpu": np.int32, "nic": np.int32, "dep_op": np.int64,
         "dep_on": np.int64, "dep_start": np.bool_}
_SCHEDULE_CACHE_VERSION = 2


@functools.cache
def _buckets_source() -> str:
    """A digest of the code that numbers matching buckets: kept buckets are another version's
    numbering once it changes."""
    where = Path(_buckets.__file__).resolve()
    try:
        return sources.file_digests()[where.relative_to(sources.ROOT).as_posix()][:12]
    except (ValueError, KeyError):      # (the module from outside the project's folder)
        return sources.digest(where.read_bytes())[:12]


def _schedule_cache(goal: Path) -> Path | None:
    try:
        st = goal.stat()
    except OSError:
        return None
    key = f"{_SCHEDULE_CACHE_VERSION}:{_buckets_source()}:{st.st_size}:{st.st_mtime_ns}"
    return goal.parent / CACHE_DIR / f"schedule-{sources.digest(key)}"


def _save_schedule(s: Schedule, path: Path) -> None:
    """Write the arrays (``replay.cache.write_dir``, each narrowed by its writer: ``_on_disk``)
    and remove older copies. A trace folder that cannot be written keeps no cache (the replay
    goes on)."""
    try:
        path.parent.mkdir(exist_ok=True)
        for old in path.parent.glob("schedule-*"):
            shutil.rmtree(old, ignore_errors=True)
    except OSError:
        return
    arrays = {name: np.asarray(getattr(s, name)) for name in _DISK}
    arrays.update(lab_off=s.labels.off, lab_buf=s.labels.buf)
    meta: dict = {"nranks": s.nranks}
    if s.buckets is not None:
        bucket, cand, ubucket, nbuckets = s.buckets
        arrays["bucket"] = bucket
        # without a wildcard receive the other two are views of ``bucket`` (``_aliased``)
        meta["buckets"] = {"n": int(nbuckets), "aliased": cand.base is bucket}
        if cand.base is not bucket:
            arrays.update(cand=cand, ubucket=ubucket)
    # one writer: the import writes the schedule beside its simulation, and one narrowed copy
    # at a time is all the memory it adds
    write_dir(path, arrays, meta, threads=1, convert=functools.partial(_on_disk, s.nops))


def _on_disk(nops: int, name: str, a: np.ndarray) -> np.ndarray:
    """Array ``name`` of a schedule of ``nops`` operations as ``_save_schedule`` stores it."""
    if name not in _DISK:
        return a
    dtype = _DISK[name]
    if name in ("dep_op", "dep_on") and nops < 2**31:
        dtype = np.int32
    elif name in ("cpu", "nic"):
        dtype = np.int16    # as the simulator reads them: mapped, not copied narrower
    elif name == "size":
        a = _whole(a)
        dtype = a.dtype
    return _narrowed(a, dtype)


def _narrowed(a: np.ndarray, dtype) -> np.ndarray:
    """``a`` as ``dtype`` when every value fits it, else as it is: a narrowing never wraps (a
    CPU index too large for the simulator is kept as written, for its check to name)."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu" and a.dtype.kind in "iu" and len(a) and a.dtype.itemsize > dtype.itemsize:
        info = np.iinfo(dtype)
        if int(a.min()) < info.min or int(a.max()) > info.max:
            return a
    return a.astype(dtype, copy=False)


def _whole(size: np.ndarray) -> np.ndarray:
    """The sizes as int32 when each is a whole number below 2**31 (a GOAL text's always are),
    else as they are: the simulator reads either, and int32 halves the bytes its loop maps (20
    MB of its peak at 5 M operations)."""
    if len(size) and size.dtype.kind == "f" and 0 <= size.min() and size.max() < 2**31:
        whole = size.astype(np.int32)
        if np.array_equal(whole, size):
            return whole
    return size


def _load_schedule(path: Path) -> Schedule:
    arr = {name: np.load(path / f"{name}.npy", mmap_mode="r") for name in _DISK}
    meta = json.loads((path / "meta.json").read_text())
    labels = GoalLabels(np.load(path / "lab_off.npy", mmap_mode="r"),
                        np.load(path / "lab_buf.npy", mmap_mode="r"))
    buckets = None
    if "buckets" in meta:
        bucket = np.asarray(np.load(path / "bucket.npy", mmap_mode="r"))
        if meta["buckets"]["aliased"]:
            cand, ubucket = bucket.reshape(-1, 1), bucket
        else:
            cand = np.asarray(np.load(path / "cand.npy", mmap_mode="r"))
            ubucket = np.asarray(np.load(path / "ubucket.npy", mmap_mode="r"))
        n, nb = len(arr["kind"]), int(meta["buckets"]["n"])
        if len(bucket) != n or len(ubucket) != n or cand.shape[0] != n:
            raise ValueError("kept buckets of another schedule")
        # the simulator indexes its queues by them unchecked: a damaged file is not trusted
        views = ((bucket, -1),) if meta["buckets"]["aliased"] else \
            ((bucket, -1), (cand, -1), (ubucket, -2))
        for a, least in views:
            if a.size and (int(a.min()) < least or int(a.max()) >= nb):
                raise ValueError("kept buckets out of range")
        buckets = (bucket, cand, ubucket, np.int64(nb))
    return Schedule(int(meta["nranks"]), labels=labels, buckets=buckets, **arr)


def _message_tags(prep, st) -> np.ndarray:
    """A tag per message of the stream (see ``schedule_from_trace``)."""
    M0 = len(prep.msgs["send_row"])
    tags = np.full(st.nmsg, -1, np.int64)
    if M0 and prep.path is not None:
        # flat arrays, no Arrow table (whose columns would be copied again into one array each)
        c = tf.read_columns(prep.path, columns=["rank", "seq", "tag", "comm"]).arrays
        rank, seq, tag_col, comm_col = c["rank"], c["seq"], c["tag"], c["comm"]
        # the files' rows are in (rank, seq) order: sorted only when they are not
        if not tf.in_rank_seq_order(rank, seq):
            order = np.lexsort((seq, rank))
            tag_col, comm_col = tag_col[order], comm_col[order]
        if len(tag_col) != prep.nrows:
            raise ValueError("trace rows changed since it was prepared")
        sr = prep.msgs["send_row"]
        user = (comm_col[sr] == 0) & (tag_col[sr] >= 0)
        tags[st.trace_ids(np.arange(M0))] = np.where(user, tag_col[sr], -1)
    base = int(tags.max()) + 1 if len(tags) else 0
    synth = np.flatnonzero(tags < 0)
    if len(synth):
        pair = st.m_src[synth] * (prep.nranks + 1) + st.m_dst[synth]
        order = np.argsort(pair, kind="stable")
        ps = pair[order]
        start = np.r_[0, np.flatnonzero(ps[1:] != ps[:-1]) + 1]
        rank_in = np.arange(len(ps)) - np.repeat(start, np.diff(np.r_[start, len(ps)]))
        tags[synth[order]] = base + rank_in
    return tags


@njit(cache=True)
def _chain(rank_off, kind, msg, burst, trail, m_bytes, m_src, m_dst, tags,
           K_SEND, K_RECV, K_ISEND, K_IRECV, K_WSEND, K_WRECV):
    P = len(rank_off) - 1
    n = len(kind)
    cap = 2 * n + P
    rank = np.empty(cap, np.int64)
    gk = np.empty(cap, np.int64)
    size = np.empty(cap)
    peer = np.empty(cap, np.int64)
    tag = np.empty(cap, np.int64)
    sop = np.empty(cap, np.int64)
    dcap = 3 * n + P + 1
    d_op = np.empty(dcap, np.int64)
    d_on = np.empty(dcap, np.int64)
    d_st = np.empty(dcap, np.bool_)
    nm = len(m_bytes)
    g_send = np.full(nm, -1, np.int64)
    g_recv = np.full(nm, -1, np.int64)
    cur = np.empty(n + 2, np.int64)      # ops the next operation depends on
    cur_st = np.empty(n + 2, np.bool_)
    ng = 0
    nd = 0
    for r in range(P):
        nc = 0
        for i in range(rank_off[r], rank_off[r + 1] + 1):
            last = i == rank_off[r + 1]
            b = trail[r] if last else burst[i]
            if b > 0:
                rank[ng], gk[ng], size[ng], peer[ng], tag[ng] = r, CALC, b, ANY, 0
                # a calc remembers the stream op it precedes as -2 - i (the trail: -2 - n)
                sop[ng] = -2 - i
                for j in range(nc):
                    d_op[nd], d_on[nd], d_st[nd] = ng, cur[j], cur_st[j]
                    nd += 1
                cur[0], cur_st[0], nc = ng, False, 1
                ng += 1
            if last:
                break
            k = kind[i]
            if k == K_SEND or k == K_ISEND or k == K_RECV or k == K_IRECV:
                m = msg[i]
                snd = k == K_SEND or k == K_ISEND
                rank[ng], gk[ng], size[ng], tag[ng] = r, SEND if snd else RECV, m_bytes[m], tags[m]
                peer[ng] = m_dst[m] if snd else m_src[m]
                sop[ng] = i
                if snd:
                    g_send[m] = ng
                else:
                    g_recv[m] = ng
                for j in range(nc):
                    d_op[nd], d_on[nd], d_st[nd] = ng, cur[j], cur_st[j]
                    nd += 1
                cur[0], cur_st[0], nc = ng, (k == K_ISEND or k == K_IRECV), 1
                ng += 1
            elif k == K_WSEND or k == K_WRECV:
                g = g_send[msg[i]] if k == K_WSEND else g_recv[msg[i]]
                if g >= 0:
                    cur[nc], cur_st[nc] = g, False
                    nc += 1
    # views, not copies: the capacity past ng/nd was never written, so it takes no memory, and
    # copies would be ~50 bytes per operation of new memory (dearer on these VMs than the loop)
    return (rank[:ng], gk[:ng], size[:ng], peer[:ng], tag[:ng], sop[:ng], d_op[:nd], d_on[:nd],
            d_st[:nd])
