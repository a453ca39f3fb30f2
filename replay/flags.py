"""Rule ``shared_flag_meeting``: the collectives MPICH runs on shared flags within a node,
priced by what each member's call costs, as calibrate measured it.

On one node MPICH's ch4 device runs Bcast, Reduce, Allreduce and Barrier (blocking, built-in
commutative operations) by "release_gather" on flags and buffers in shared memory
(``src/mpid/ch4/shm/posix/posix_coll_release_gather.h``, selected by
``maint/tuning/coll/ch4/posix_generic.json``), not as point-to-point messages. A member's call
ends when its own part is done and when the members it waits for have entered:

    end = max(start + own(k), last_entry + after(k))

with ``last_entry`` the latest entry among the members it waits for, k the largest block a member
recorded, and per collective and role (root: the root of a Bcast or Reduce, local rank 0 of an
Allreduce or Barrier, which release_gather gathers to; member: the others):

| collective | root waits for | a member waits for |
|---|---|---|
| Barrier, Allreduce | every member | every member (the root's release follows the gather) |
| Bcast | nobody (it writes the data and the release flag) | the root |
| Reduce | every member (it combines their buffers) | nobody (it writes its buffer) |

``own`` and ``after`` come from calibrate's collective probe (``replay.calibration.flags``):
``own`` the call's duration when the rank entered last, ``after`` its end after the awaited
entry when it entered first, both medians at the probe's sizes, interpolated linearly in k
between them (a profile's ``[shared_flag]``).

The rule applies to an instance when its collective is one of those four (blocking), MPICH's
own selection runs it (no ``--algo`` for that collective), its communicator has at least two
members, all on one host (the replay's placement) and all recorded (a partial trace's instance
that lacks members keeps its pattern), the profile has that collective's costs and its largest
block is within the probe's sizes: a larger one (an 8 MiB Bcast against a probe up to 64 KiB)
keeps its pattern, priced by the network model's parameters, which calibrate measured up to
its largest message, rather than by the probe's costs extrapolated.
Other instances keep their point-to-point pattern. Not modelled: the first four such calls of a
communicator, which MPICH runs as point-to-point messages (MPIR_CVAR_POSIX_NUM_COLLS_THRESHOLD
= 5); a root that runs more than the buffer's cells (MPIR_CVAR_BCAST_INTRANODE_NUM_CELLS) ahead
of its members and waits for a cell; costs at other communicator sizes than the probe's (the
probe measures 2 ranks; a larger communicator takes them as they are, and the replay says so).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from hindsight import sortedsets
from hindsight import trace as tf
from hindsight.errors import DataError
from replay import kernel as K
from replay.profile import is_number
from replay.selection import SELECTION, SHARED_FLAG_COLLECTIVES
from replay.selection import SHARED_FLAG_WAITS as WAITS_FOR

RULE = "shared_flag_meeting"
#: the name the replay reports for instances the rule prices (``collective_algorithms_run``)
ALGORITHM = "release_gather"
ROLES = ("root", "member")


@dataclass(frozen=True)
class FlagCosts:
    """A profile's ``[shared_flag]`` table: per collective the probe's sizes (bytes) and per
    role ``own`` and (for a role that waits) ``after`` in seconds; ``ranks`` the probe's
    communicator size."""

    ranks: int
    table: Mapping[str, Mapping[str, tuple[float, ...]]]
    transport: str = "?"

    def ops(self) -> frozenset[str]:
        return frozenset(self.table)

    def limits(self) -> frozenset[tuple[str, int]]:
        """(collective, the probe's largest size in bytes): the rule prices no instance whose
        largest block is above it (module docstring)."""
        return frozenset((op, int(max(c["bytes"]))) for op, c in self.table.items())

    def cost_ns(self, op: str, role: str, what: str, k: np.ndarray) -> np.ndarray:
        """``own`` or ``after`` of ``role`` in ``op`` for blocks of k bytes, ns (formula in the
        module docstring)."""
        sizes = np.asarray(self.table[op]["bytes"], np.float64)
        y = np.asarray(self.table[op][f"{role}_{what}_s"], np.float64) * 1e9
        k = np.asarray(k, np.float64)
        # (blocks above the probe's sizes are not priced here: ``eligible``)
        return np.maximum(np.interp(k, sizes, y), 0.0)

    def less(self, binding: Mapping[str, float]) -> "FlagCosts":
        """These costs less mpi4py's own time per call of each collective (rule
        binding_in_bursts, ``replay.binding``), at least 0."""
        table = {op: {name: (v if name == "bytes" else
                             tuple(max(0.0, x - binding.get(op, 0.0)) for x in v))
                      for name, v in costs.items()}
                 for op, costs in self.table.items()}
        return FlagCosts(self.ranks, table, self.transport)


def flag_costs(profile: Mapping[str, Any] | None, where: str = "profile",
               below_binding: bool | str = False) -> FlagCosts | None:
    """The ``[shared_flag]`` table of a calibration profile (a TOML document), None where it has
    none; for a trace recorded ``below_binding`` (as ``replay.models.load_profile`` takes it),
    the ``[native_shared_flag]`` table where the profile has one and the calls were made from C
    (the same collectives made from C: rule native_call_costs), else ``[shared_flag]`` less the
    profile's ``[binding]`` costs (rule binding_in_bursts). A malformed table is a DataError
    naming ``where``."""
    if not profile:
        return None
    if below_binding and below_binding != "Python" and "native_shared_flag" in profile:
        return _flag_table(profile, "native_shared_flag", where)
    costs = _flag_table(profile, "shared_flag", where)
    if costs is not None and below_binding:
        from replay.binding import binding_costs
        binding = binding_costs(profile, where)
        if binding:
            costs = costs.less(binding)
    return costs


def _flag_table(profile: Mapping[str, Any], name: str, where: str) -> FlagCosts | None:
    """Section ``[name]`` of a profile in the ``[shared_flag]`` layout, None where it has none
    (or no collective)."""
    if name not in profile:
        return None
    sec = profile[name]
    bad = f"{where}: [{name}]"
    if not isinstance(sec, Mapping):
        raise DataError(f"{bad} must be a table")
    ranks = sec.get("ranks")
    if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 2:
        raise DataError(f"{bad} ranks must be an integer >= 2, not {ranks!r}")
    table: dict[str, dict[str, tuple[float, ...]]] = {}
    for op, costs in sec.items():
        if op == "ranks":
            continue
        if op not in SHARED_FLAG_COLLECTIVES or not isinstance(costs, Mapping):
            raise DataError(f"{bad}.{op}: not one of {', '.join(sorted(SHARED_FLAG_COLLECTIVES))}")
        sizes = costs.get("bytes")
        if not (isinstance(sizes, list) and sizes and all(is_number(x) and x >= 0 for x in sizes)
                and all(a < b for a, b in zip(sizes, sizes[1:]))):
            raise DataError(f"{bad}.{op} bytes must be increasing sizes >= 0")
        need = {f"{role}_own_s" for role in ROLES} | \
            {f"{role}_after_s" for role in ROLES if WAITS_FOR[(op, role)] != "none"}
        for key in sorted(need):
            v = costs.get(key)
            if not (isinstance(v, list) and len(v) == len(sizes)
                    and all(is_number(x) and x >= 0 for x in v)):
                raise DataError(f"{bad}.{op} {key} must be {len(sizes)} times >= 0 (seconds), "
                                "one per size")
        unknown = set(costs) - need - {"bytes"}
        if unknown:
            raise DataError(f"{bad}.{op}: unknown key {sorted(unknown)[0]!r} (known: "
                            f"{', '.join(sorted(need | {'bytes'}))})")
        table[op] = {key: tuple(float(x) for x in costs[key]) for key in need | {"bytes"}}
    if not table:
        return None
    transport = str((profile.get("measured_on") or {}).get("transport", "?"))
    return FlagCosts(int(ranks), table, transport)


def largest_blocks(coll, nbytes: np.ndarray) -> np.ndarray:
    """Per collective instance, the largest block a member recorded (bytes, at least 0)."""
    blocks = np.maximum(nbytes[coll.rows], 0).astype(np.float64)
    return np.maximum.reduceat(blocks, coll.off[:-1]) if len(blocks) else blocks


def eligible(coll, comm_members: Mapping[int, list[int]], host_of_rank: np.ndarray,
             algos: Mapping[str, str], limits: Mapping[str, int],
             nbytes: np.ndarray) -> np.ndarray:
    """Per collective instance, whether rule shared_flag_meeting prices it (conditions in the
    module docstring); ``limits``: per collective the probe's largest size, ``nbytes`` the
    rows' bytes."""
    ninst = len(coll.comm)
    out = np.zeros(ninst, bool)
    if not ninst or not limits:
        return out
    codes = [tf.OP_CODE[op] for op in limits if algos.get(op) == SELECTION]
    if not codes:
        return out
    limit = np.full(len(tf.OPS), -1.0)
    for op, k in limits.items():
        limit[tf.OP_CODE[op]] = k
    # every member recorded: a partial trace's incomplete instance keeps its pattern, whose
    # missing members' messages the partial replay already leaves out; a block above the
    # probe's sizes keeps it too (a measurement is not extrapolated)
    out = np.isin(coll.op, codes) & (coll.size >= 2) & (coll.comm != tf.COMM_SELF_ID) \
        & (np.diff(coll.off) == coll.size) & (largest_blocks(coll, nbytes) <= limit[coll.op])
    hosts = np.asarray(host_of_rank)
    one_host = {cid: len({int(hosts[r]) for r in comm_members[cid] if 0 <= r < len(hosts)}) == 1
                for cid in sortedsets.unique(coll.comm[out]).tolist() if cid in comm_members}
    out &= np.array([one_host.get(c, False) for c in coll.comm.tolist()], bool)
    return out


@dataclass(frozen=True)
class Meetings:
    """The operations rule shared_flag_meeting put in an expanded stream: per such operation
    (``ops``: its index) its collective's name code (``op``), its role (0 root, 1 member), its
    instance's largest recorded block (``nbytes``) and communicator size (``size``)."""

    ops: np.ndarray
    op: np.ndarray
    role: np.ndarray
    nbytes: np.ndarray
    size: np.ndarray


def lay_meetings(coll, flagged: np.ndarray, comm_members: Mapping[int, list[int]],
                 nbytes: np.ndarray, first: np.ndarray, kind: np.ndarray, msg: np.ndarray,
                 coll_n: np.ndarray) -> Meetings:
    """Write the meeting operations of the ``flagged`` instances into a stream's ``kind`` and
    ``msg`` (the first operation of each member's row; ``msg`` its instance) and ``coll_n``
    (per instance, the entries its waiting members wait for): a role that waits for every
    member is a COLL (it enters and waits), one that waits for nobody a CPOST (it enters and
    goes on), a Bcast member a CWAIT on the root's entry alone, a Reduce root a CWAIT on the
    members' entries."""
    inst = coll.of_rows()
    sel = np.flatnonzero(flagged[inst])
    inst_s = inst[sel]
    rows = coll.rows[sel]
    local = coll.local[sel]
    opc = coll.op[inst_s]
    root_local = np.zeros(len(coll.comm), np.int64)
    for x in np.flatnonzero(flagged & (coll.root >= 0)).tolist():
        mem = comm_members[int(coll.comm[x])]
        root_local[x] = mem.index(int(coll.root[x])) if int(coll.root[x]) in mem else 0
    role = (local != root_local[inst_s]).astype(np.int8)
    big = largest_blocks(coll, nbytes)
    k = np.full(len(sel), K.COLL, np.int8)
    size = coll.size[inst_s].astype(np.int64)
    for op in SHARED_FLAG_COLLECTIVES:
        this = opc == tf.OP_CODE[op]
        for r, role_name in enumerate(ROLES):
            waits = WAITS_FOR[(op, role_name)]
            at = this & (role == r)
            if waits == "none":
                k[at] = K.CPOST
            elif waits == "root" or (op == "Reduce" and role_name == "root"):
                k[at] = K.CWAIT
    ops = first[rows]
    kind[ops] = k
    msg[ops] = inst_s
    # entries awaited per instance: Bcast the root's, Reduce the members', the others all
    n_of = coll.size.astype(np.int64)
    fl = np.flatnonzero(flagged)
    op_fl = coll.op[fl]
    coll_n[fl] = np.where(op_fl == tf.OP_CODE["Bcast"], 1,
                          np.where(op_fl == tf.OP_CODE["Reduce"], n_of[fl] - 1, n_of[fl]))
    return Meetings(ops, opc.astype(np.int64), role, big[inst_s], size)


def with_costs(loc: np.ndarray, dep_lat: np.ndarray, nops: int, meetings: Meetings,
               costs: FlagCosts) -> tuple[np.ndarray, np.ndarray]:
    """A stream's ``loc`` and ``dep_lat`` with each meeting operation's ``own`` and ``after``
    (ns); ``loc`` keeps what it held for other operations (rule poll_wait's periods)."""
    loc = loc.copy() if len(loc) else np.zeros(nops)
    dep = dep_lat.copy() if len(dep_lat) else np.zeros(nops)
    for op in costs.ops():
        this = meetings.op == tf.OP_CODE[op]
        for r, role in enumerate(ROLES):
            at = this & (meetings.role == r)
            if not at.any():
                continue
            ix = meetings.ops[at]
            loc[ix] = costs.cost_ns(op, role, "own", meetings.nbytes[at])
            if WAITS_FOR[(op, role)] != "none":
                dep[ix] = costs.cost_ns(op, role, "after", meetings.nbytes[at])
    return loc, dep


def flag_summary(meetings: Meetings | None, costs: FlagCosts, coll, nbytes: np.ndarray,
                 candidates: np.ndarray) -> dict[str, Any] | None:
    """What a replay reports of the rule: the calls it priced per collective, the probe's
    communicator size and the largest communicator priced (a larger one than the probe's
    takes the probe's costs as they are), and per collective the instances the rule would
    price but for blocks above the probe's sizes (``candidates``: ``eligible`` without the
    size limit; ``above_probe``: op -> [instances, the probe's largest size]), which kept
    their patterns; None when there is neither."""
    per_op = {} if meetings is None else {
        tf.OPS[int(c)]: int(n) for c, n in zip(*np.unique(meetings.op, return_counts=True))}
    big = largest_blocks(coll, nbytes)
    above = {}
    for op, k in sorted(costs.limits()):
        n = int(np.count_nonzero(candidates & (coll.op == tf.OP_CODE[op]) & (big > k)))
        if n:
            above[op] = [n, k]
    if not per_op and not above:
        return None
    return {"calls": per_op, "probe_ranks": costs.ranks,
            "largest_communicator": int(meetings.size.max())
            if meetings is not None and len(meetings.size) else 0,
            "profile_transport": costs.transport, "above_probe": above}


def flag_line(info: Mapping[str, Any]) -> str | None:
    """The replay report's line on the rule (None where it priced nothing)."""
    s = info.get("shared_flag_meeting")
    if not s:
        return None
    calls = ", ".join(f"{n} {op}" for op, n in s["calls"].items())
    parts = []
    if calls:
        parts.append(f"{calls} calls on shared flags within a node, priced by each member's "
                     f"measured cost (rule {RULE})")
        if s["largest_communicator"] != s["probe_ranks"]:
            parts[-1] += (f"; the costs were measured with {s['probe_ranks']} ranks, "
                          f"communicators here have up to {s['largest_communicator']}")
    above = s.get("above_probe") or {}
    if above:
        parts.append(", ".join(f"{n} {op}" for op, (n, _) in above.items())
                     + " calls with blocks above the probe's largest size ("
                     + ", ".join(f"{op} {k} B" for op, (_, k) in above.items())
                     + ") keep their point-to-point patterns")
    return "flags      " + "; ".join(parts)
