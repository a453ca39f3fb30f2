"""MPICH's default choice of collective algorithm, by message size and communicator size.

MPICH (4.x and 5.x) chooses the algorithm of a blocking collective with its collective selection
tree ("csel", ``src/mpi/coll/src/csel.c``), built from the JSON file
``maint/tuning/coll/mpir/generic.json`` compiled into the library (read at tag v5.0.1; the
installed wheel is 5.0.2, and ``mpivars`` there lists the same CVAR defaults). The thresholds of
that file equal the defaults of the older size CVARs named below, which MPICH itself now reads
only in its nonblocking and SMP paths; the JSON, not the CVARs, decides the blocking ones. Two
quirks of ``csel.c`` are kept: ``comm_size<8`` is tested as ``local_size <= 8``; ``count<pow2``
compares the element count with the largest power of two <= p.

What is modelled is the flat (point-to-point) branch of that file. On one node MPICH's ch4
device first tries shared-memory algorithms of its own (``maint/tuning/coll/ch4/
posix_generic.json``: Bcast, Barrier, Allreduce and Reduce by "release_gather" on shared flags),
which are not messages at all; over several nodes it composes node-local and node-leader steps
(``maint/tuning/coll/ch4/generic.json``). Neither is modelled: replay prices messages.

The trace records bytes, not counts or datatypes (docs/trace-format.md, ``nbytes``). Where MPICH
tests an element count (Allreduce and Reduce, ``count<pow2``), the count is taken as
``nbytes / ELEMENT_BYTES``: 8-byte elements (double, int64), NumPy's and mpi4py's usual case.
Operations are taken as built-in and commutative (the trace does not record the op; MPI.SUM,
MPI.MAX, ... are), and send buffers as not ``MPI_IN_PLACE``.

A rule is ``rule(p, nbytes, total) -> algorithm``: ``p`` members, ``nbytes`` the largest block
size the members recorded, ``total`` the sum of the members' blocks (Allgatherv's recvcounts).
"""

from __future__ import annotations

from collections.abc import Callable

#: The name of MPICH's selection among the ``--algo`` choices of every collective.
SELECTION = "mpich"

#: The blocking collectives MPICH's ch4 device runs on shared flags among ranks of one node
#: under its own selection ("release_gather", ``maint/tuning/coll/ch4/posix_generic.json``).
#: Their replayed pattern stands in for that: its messages between ranks of one host are not
#: point-to-point messages, so no library queue holds them (rule ``unexpected_copy``).
SHARED_FLAG_COLLECTIVES = frozenset({"Bcast", "Barrier", "Allreduce", "Reduce"})
#: Whom each member of those collectives waits for (release_gather): (collective, role) ->
#: "all" members, the "root", or "none"; the root is a Bcast's or Reduce's root and local rank 0
#: of an Allreduce or Barrier, which release_gather gathers to (rule shared_flag_meeting,
#: ``replay.flags``; calibrate's collective probe, ``replay.calibration.flags``).
SHARED_FLAG_WAITS = {("Barrier", "root"): "all", ("Barrier", "member"): "all",
                     ("Allreduce", "root"): "all", ("Allreduce", "member"): "all",
                     ("Bcast", "root"): "none", ("Bcast", "member"): "root",
                     ("Reduce", "root"): "all", ("Reduce", "member"): "none"}
assert {op for op, _ in SHARED_FLAG_WAITS} == SHARED_FLAG_COLLECTIVES

#: Element size assumed where MPICH tests a count and the trace has bytes only.
ELEMENT_BYTES = 8

# Thresholds of maint/tuning/coll/mpir/generic.json (MPICH v5.0.1), each the default of the CVAR
# named (mpivars of the installed 5.0.2 prints the same values).
#: Bcast: ``comm_size<8`` (MPIR_CVAR_BCAST_MIN_PROCS = 8): binomial on at most 8 ranks.
BCAST_MIN_PROCS = 8
#: Bcast: ``avg_msg_size<=12288`` (MPIR_CVAR_BCAST_SHORT_MSG_SIZE = 12288): binomial.
BCAST_SHORT_MSG_SIZE = 12288
#: Bcast: ``avg_msg_size<=524288`` (MPIR_CVAR_BCAST_LONG_MSG_SIZE = 524288), power-of-two p:
#: scatter + recursive-doubling allgather; above it, or on other p, scatter + ring allgather.
BCAST_LONG_MSG_SIZE = 524288
#: Allreduce: ``avg_msg_size<=8``: recursive doubling (no CVAR; the JSON's own constant; the
#: older MPIR_CVAR_ALLREDUCE_SHORT_MSG_SIZE = 2048 is read only by nonblocking Iallreduce).
ALLREDUCE_TINY_MSG_SIZE = 8
#: Reduce: ``avg_msg_size<=2048`` (MPIR_CVAR_REDUCE_SHORT_MSG_SIZE = 2048): binomial.
REDUCE_SHORT_MSG_SIZE = 2048
#: Allgather(v), power-of-two p: ``total_msg_size<524288`` (MPIR_CVAR_ALLGATHER_LONG_MSG_SIZE =
#: 524288): recursive doubling, else ring.
ALLGATHER_LONG_MSG_SIZE = 524288
#: Allgather(v), other p: ``total_msg_size<81920`` (MPIR_CVAR_ALLGATHER_SHORT_MSG_SIZE = 81920):
#: Bruck, else ring.
ALLGATHER_SHORT_MSG_SIZE = 81920
#: Alltoall: ``avg_msg_size<=256`` per destination (MPIR_CVAR_ALLTOALL_SHORT_MSG_SIZE = 256) on
#: more than 8 ranks: Bruck.
ALLTOALL_SHORT_MSG_SIZE = 256
#: Alltoall: ``avg_msg_size<=32768`` (MPIR_CVAR_ALLTOALL_MEDIUM_MSG_SIZE = 32768): scattered
#: (nonblocking, MPIR_CVAR_ALLTOALL_THROTTLE peers at a time), else pairwise.
ALLTOALL_MEDIUM_MSG_SIZE = 32768
#: Alltoall: ``comm_size<8``: no Bruck on at most 8 ranks.
ALLTOALL_MIN_PROCS_BRUCK = 8
#: Reduce_scatter(_block), commutative op: ``total_msg_size<524288`` (no CVAR in this version;
#: the JSON's constant): recursive halving, else pairwise.
REDUCE_SCATTER_LONG_MSG_SIZE = 524288


def _pow2(p: int) -> bool:
    return p & (p - 1) == 0


def _pof2(p: int) -> int:
    """The largest power of two <= p (MPL_pof2)."""
    return 1 << (p.bit_length() - 1)


def _count_lt_pof2(p: int, nbytes: float) -> bool:
    return nbytes // ELEMENT_BYTES < _pof2(p)


def _bcast(p: int, nbytes: float, total: float) -> str:
    if p <= BCAST_MIN_PROCS or nbytes <= BCAST_SHORT_MSG_SIZE:
        return "binomial"
    if _pow2(p) and nbytes <= BCAST_LONG_MSG_SIZE:
        return "scatter_recursive_doubling_allgather"
    return "scatter_ring_allgather"


def _allreduce(p: int, nbytes: float, total: float) -> str:
    if nbytes <= ALLREDUCE_TINY_MSG_SIZE or _count_lt_pof2(p, nbytes):
        return "recursive_doubling"
    return "rabenseifner"


def _reduce(p: int, nbytes: float, total: float) -> str:
    if nbytes <= REDUCE_SHORT_MSG_SIZE or _count_lt_pof2(p, nbytes):
        return "binomial"
    return "rabenseifner"


def _allgather(p: int, nbytes: float, total: float) -> str:
    if _pow2(p):
        return "recursive_doubling" if total < ALLGATHER_LONG_MSG_SIZE else "ring"
    return "bruck" if total < ALLGATHER_SHORT_MSG_SIZE else "ring"


def _alltoall(p: int, nbytes: float, total: float) -> str:
    if p > ALLTOALL_MIN_PROCS_BRUCK and nbytes <= ALLTOALL_SHORT_MSG_SIZE:
        return "bruck"
    return "scattered" if nbytes <= ALLTOALL_MEDIUM_MSG_SIZE else "pairwise"


def _reduce_scatter(p: int, nbytes: float, total: float) -> str:
    return "recursive_halving" if total < REDUCE_SCATTER_LONG_MSG_SIZE else "pairwise"


def _fixed(name: str) -> Callable[[int, float, float], str]:
    def rule(p: int, nbytes: float, total: float) -> str:
        return name
    return rule


#: collective -> its rule. Communicator creation is not a collective of the selection file
#: (MPICH exchanges context ids with its own Allreduce): dissemination, as before.
RULES: dict[str, Callable[[int, float, float], str]] = {
    "Barrier": _fixed("dissemination"),  # k_dissemination, MPIR_CVAR_BARRIER_DISSEM_KVAL = 2
    "Bcast": _bcast,
    "Reduce": _reduce,
    "Allreduce": _allreduce,
    "Gather": _fixed("binomial"),
    "Gatherv": _fixed("linear"),
    "Scatter": _fixed("binomial"),
    "Scatterv": _fixed("linear"),
    "Allgather": _allgather,
    "Allgatherv": _allgather,
    "Alltoall": _alltoall,
    "Alltoallv": _fixed("scattered"),
    "Scan": _fixed("recursive_doubling"),
    "Exscan": _fixed("recursive_doubling"),
    "Reduce_scatter": _reduce_scatter,
    "Reduce_scatter_block": _reduce_scatter,
    "Comm_split": _fixed("dissemination"),
    "Comm_dup": _fixed("dissemination"),
    "Comm_create": _fixed("dissemination"),
    # MPICH (ch4) synchronises a window's creation, fence and free with a barrier over the
    # window's communicator
    "Win_create": _fixed("dissemination"),
    "Win_fence": _fixed("dissemination"),
    "Win_free": _fixed("dissemination"),
}


def total_bytes(op: str, p: int, nbytes: float, sum_nbytes: float) -> float:
    """The instance's ``total_msg_size`` in MPICH's sense from the recorded blocks: the sum of
    the members' blocks for Allgatherv, the recorded send buffer for Reduce_scatter (it holds
    all p blocks), p times the block otherwise."""
    if op == "Allgatherv":
        return sum_nbytes
    if op == "Reduce_scatter":
        return nbytes
    return p * nbytes


def choose(op: str, p: int, nbytes: float, total: float) -> str:
    """The algorithm MPICH's default selection runs for collective ``op`` on ``p`` ranks with
    blocks of ``nbytes`` (the largest a member recorded) and ``total`` bytes in all
    (``total_bytes``)."""
    return RULES[op](p, nbytes, total)
