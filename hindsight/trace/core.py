"""The trace format's dependency-free core: op codes, sentinels, names, the manifest writer and
the raw staging record a traced rank writes while the program runs.

Standard library only: a traced rank imports this and nothing heavier until the program has
finished, because whatever a traced process loads runs inside the program too (a library that
allocates and frees one large block changes glibc's malloc thresholds, and with them the speed
of a NumPy program: docs/robustness.md, "No observer effect").
"""

from __future__ import annotations

import json
import os
import re
import struct
from pathlib import Path
from typing import Any

from hindsight.system import write_text_atomic
from hindsight.errors import DataError

FORMAT_VERSION = "1.3"
#: Largest rank count a manifest may claim (the `rank` column is int32; a bound also keeps a
#: damaged manifest from sending the reader through billions of missing files).
MAX_RANKS = 1 << 22
MANIFEST_NAME = "manifest.json"
STAGING_DIR = ".staging"
RANK_FILE_RE = re.compile(r"^rank-(\d{5})\.parquet$")
METADATA_KEY = b"hindsight"

# Integer columns that do not apply to an event hold -1; two other sentinels:
#: `peer` of an Irecv post or Probe that named MPI_ANY_SOURCE (the completion row has the real one).
ANY_SOURCE = -2
#: `tag` of an Irecv post that named MPI_ANY_TAG.
ANY_TAG = -2

#: Communicator ids that are fixed; derived communicators get ids from `derived_comm_id`.
COMM_WORLD_ID = 0
COMM_SELF_ID = 1

# Op names. The order defines the dictionary codes written to Parquet, so only append.
OPS: tuple[str, ...] = (
    "region",
    # point-to-point
    "Send", "Ssend", "Bsend", "Rsend", "Recv",
    "Isend", "Issend", "Ibsend", "Irsend", "Irecv",
    "Sendrecv_send", "Sendrecv_recv",
    "Probe", "Iprobe",
    # completion of non-blocking requests: one row per completed request
    "Wait", "Waitall", "Waitany", "Waitsome", "Test", "Testall", "Testany", "Testsome",
    # collectives
    "Barrier", "Bcast", "Reduce", "Allreduce", "Gather", "Gatherv", "Scatter", "Scatterv",
    "Allgather", "Allgatherv", "Alltoall", "Alltoallv", "Scan", "Exscan",
    "Reduce_scatter", "Reduce_scatter_block",
    # communicator creation
    "Comm_split", "Comm_dup", "Comm_create",
    # non-blocking collectives: the post row (with its request); a Wait*/Test* row completes it
    "Ibarrier", "Ibcast", "Ireduce", "Iallreduce", "Igather", "Igatherv", "Iscatter",
    "Iscatterv", "Iallgather", "Iallgatherv", "Ialltoall", "Ialltoallv", "Iscan", "Iexscan",
    "Ireduce_scatter", "Ireduce_scatter_block",
    # one-sided communication (`comm` holds the window's id, a communicator of its own)
    "Win_create", "Win_free", "Win_fence", "Put", "Get", "Accumulate", "Get_accumulate",
    "Fetch_and_op", "Compare_and_swap", "Win_lock", "Win_unlock", "Win_lock_all",
    "Win_unlock_all", "Win_flush", "Win_sync",
    # neighbourhood collectives of a topology communicator (the manifest's `neighbours`)
    "Neighbor_allgather", "Neighbor_allgatherv", "Neighbor_alltoall", "Neighbor_alltoallv",
    "Ineighbor_allgather", "Ineighbor_allgatherv", "Ineighbor_alltoall", "Ineighbor_alltoallv",
    # general active-target synchronisation of a window (format 1.1): Post and Start one row
    # per member of their group, Complete and Wait one row, Test one row when it returns true
    "Win_post", "Win_start", "Win_complete", "Win_wait", "Win_test",
    # a request the program freed while active (format 1.2): MPI_Request_free, Request.Free
    "Request_free",
    # a run of unsuccessful polls (format 1.3): Iprobe/Improbe that found nothing, Test* that
    # completed nothing, one row per run (POLL_OPS)
    "Poll",
)
OP_CODE: dict[str, int] = {name: i for i, name in enumerate(OPS)}

SEND_OPS = frozenset({"Send", "Ssend", "Bsend", "Rsend", "Isend", "Issend", "Ibsend", "Irsend",
                      "Sendrecv_send"})
BLOCKING_RECV_OPS = frozenset({"Recv", "Sendrecv_recv"})
NONBLOCKING_SEND_OPS = frozenset({"Isend", "Issend", "Ibsend", "Irsend"})
COMPLETION_OPS = frozenset({"Wait", "Waitall", "Waitany", "Waitsome", "Test", "Testall",
                            "Testany", "Testsome"})
#: The free of an active request (format 1.2): one row at the call, with the freed request's id,
#: peer, tag and nbytes -1 (no status: for a receive, its source, tag and size are not known),
#: `comm` the request's. It ends the request without completing it: the operation goes on
#: without the program waiting for it (a send completes on its own; a receive still takes its
#: message), so it is not a completion row and nothing moves at it.
FREE_OPS = frozenset({"Request_free"})
#: A run of consecutive unsuccessful polls of one rank (format 1.3): `Iprobe`/`Improbe` calls
#: that found no message and `Test`/`Testall`/`Testany`/`Testsome` calls on traced requests
#: that completed none, with no other row of the rank between them. One row: `t_start` the
#: first poll's entry, `t_end` the last one's exit, `nbytes` the number of polls; peer, tag,
#: comm, request, root -1. The row that follows is usually the poll that succeeded.
POLL_OPS = frozenset({"Poll"})
COLLECTIVE_OPS = frozenset({"Barrier", "Bcast", "Reduce", "Allreduce", "Gather", "Gatherv",
                            "Scatter", "Scatterv", "Allgather", "Allgatherv", "Alltoall",
                            "Alltoallv", "Scan", "Exscan", "Reduce_scatter",
                            "Reduce_scatter_block"})
#: A non-blocking collective's post row -> the blocking collective it performs (same block
#: size, same algorithms in replay; its completion row is the Wait*/Test* row of its request).
BLOCKING_OF: dict[str, str] = {
    "I" + name[0].lower() + name[1:]: name
    for name in ("Barrier", "Bcast", "Reduce", "Allreduce", "Gather", "Gatherv", "Scatter",
                 "Scatterv", "Allgather", "Allgatherv", "Alltoall", "Alltoallv", "Scan",
                 "Exscan", "Reduce_scatter", "Reduce_scatter_block", "Neighbor_allgather",
                 "Neighbor_allgatherv", "Neighbor_alltoall", "Neighbor_alltoallv")}
NONBLOCKING_COLLECTIVE_OPS = frozenset(BLOCKING_OF)
#: Collectives, blocking and non-blocking: MPI orders both kinds in one sequence per
#: communicator (MPI 4.0 §6.12), so each is one instance of its communicator's sequence.
#: Neighbourhood collectives: each member sends to its out-neighbours of the communicator's
#: topology (the manifest's `neighbours`) and receives from its in-neighbours.
NEIGHBOR_OPS = frozenset({"Neighbor_allgather", "Neighbor_allgatherv", "Neighbor_alltoall",
                          "Neighbor_alltoallv", "Ineighbor_allgather", "Ineighbor_allgatherv",
                          "Ineighbor_alltoall", "Ineighbor_alltoallv"})
COLLECTIVE_OPS = COLLECTIVE_OPS | NONBLOCKING_COLLECTIVE_OPS | NEIGHBOR_OPS | {"Win_fence",
                                                                              "Win_free"}
#: One-sided data operations: origin to target (PUT), target to origin (GET), or both ways.
RMA_PUT_OPS = frozenset({"Put", "Accumulate"})
RMA_GET_OPS = frozenset({"Get"})
RMA_BOTH_OPS = frozenset({"Get_accumulate", "Fetch_and_op", "Compare_and_swap"})
RMA_OPS = RMA_PUT_OPS | RMA_GET_OPS | RMA_BOTH_OPS
#: Passive-target synchronisation (no collective): lock epochs and their flushes.
RMA_LOCK_OPS = frozenset({"Win_lock", "Win_unlock", "Win_lock_all", "Win_unlock_all",
                          "Win_flush", "Win_sync"})
#: General active-target synchronisation (post/start/complete/wait): one exposure or access
#: epoch per Post..Wait (Test) or Start..Complete of a window.
RMA_PSCW_OPS = frozenset({"Win_post", "Win_start", "Win_complete", "Win_wait", "Win_test"})
ROOTED_OPS = frozenset({"Bcast", "Reduce", "Gather", "Gatherv", "Scatter", "Scatterv",
                        "Ibcast", "Ireduce", "Igather", "Igatherv", "Iscatter", "Iscatterv"})
#: Communicator creation (a window's creation gives it a communicator id of its own).
COMM_OPS = frozenset({"Comm_split", "Comm_dup", "Comm_create", "Win_create"})


# The raw staging record: one per event, written by the tracer into a memory-mapped file while the
# program runs and turned into Parquet when the rank finishes (or by `hindsight collect` / `trace
# seal` for a rank that died). Little-endian int64 fields; `t_start` and `t_end` are the rank's raw
# CLOCK_MONOTONIC readings; `t_end` comes last and is never 0, so a record whose `t_end` is 0 was
# never written (the file's unwritten tail is zeros), and one that is being written when the rank
# is killed has no `t_end` yet: the reader stops at the first such record.
RAW_COLUMNS: tuple[str, ...] = ("op", "region", "t_start", "cpu_ns", "peer", "tag", "comm",
                                "nbytes", "request", "root", "t_end")
RAW_RECORD = struct.Struct("<" + "q" * len(RAW_COLUMNS))
RAW_FILE = "events.raw"
#: Beside the raw file, one JSON array a line, appended as they become known (one small write
#: each, so a killed rank's records can still be named): ["rank", rank, run_id, capacity],
#: ["epoch", ns], ["region", code, name], ["comm", id, [world ranks]].
RAW_NAMES_FILE = "names.jsonl"
#: Beside them, the rank's pid (first line, ``pid N``) and, once `hindsight collect` asked
#: before stopping the run, where the rank was (instrument.stopped).
STOP_FILE = "stopped_in.txt"
#: The exception that ended a Python rank recorded by the PMPI library (instrument/run.py), as
#: ``Type: message``; the sealer puts it into the rank file's metadata (manifest `rank_errors`).
ERROR_FILE = "error.txt"


#: The status of a rank whose MPI was called from two threads at once: its recording stopped at
#: the first overlap (the PMPI library sees it as it happens; for the Python tracer the sealer
#: finds it in the records), so its rows end there. The rank file's metadata and the manifest's
#: `concurrent_mpi` name the two calls.
CONCURRENT_STATUS = "concurrent-mpi"


def concurrent_calls(pair: Any) -> list[str]:
    """A `concurrent_mpi` entry's two calls as names: the call that began and the one already
    in progress in another thread. The PMPI library writes op codes (0: a call it did not name,
    -1 MPI_Finalize, below that a call it counts but does not trace); the sealer writes names."""
    names = []
    for c in list(pair or [])[:2]:
        if isinstance(c, str):
            names.append(c)
        elif isinstance(c, int) and 0 < c < len(OPS):
            names.append(OPS[c])
        elif c == -1:
            names.append("Finalize")
        else:
            names.append("an untraced call" if isinstance(c, int) and c < -1 else "an MPI call")
    return names + ["an MPI call"] * (2 - len(names))


def concurrent_text(manifest: dict[str, Any]) -> str | None:
    """``rank 0 called MPI from two threads at once (Barrier began while Recv was in progress
    in another thread)``, from the manifest's `concurrent_mpi`; None when no rank did."""
    found = manifest.get("concurrent_mpi") or {}
    if not found:
        return None
    ranks = sorted(found, key=lambda r: int(r) if str(r).isdigit() else 0)
    if len(ranks) == 1:
        first, during = concurrent_calls(found[ranks[0]])
        return (f"rank {ranks[0]} called MPI from two threads at once ({first} began while "
                f"{during} was in progress in another thread)")
    # (each rank's recording stopped at its own overlap: "each ... its recording")
    each = "; ".join("rank {}: {} began while {} was in progress in another thread".format(
        r, *concurrent_calls(found[r])) for r in ranks)
    return f"ranks {', '.join(ranks)} each called MPI from two threads at once ({each})"


def epoch_of(manifest: dict[str, Any], rank: int) -> int | None:
    """A rank's raw clock reading at the run's epoch, from the manifest (rank 0's reading plus
    the rank's start offset); None if the manifest does not say."""
    clock = manifest.get("clock") or {}
    epoch0, offsets = clock.get("epoch_reading_ns"), clock.get("start_offset_ns") or []
    if not isinstance(epoch0, int) or rank >= len(offsets):
        return None
    return epoch0 + int(offsets[rank])


def read_raw_names(stage: Path) -> dict[str, Any]:
    """What a rank's names file says: epoch_ns, regions (by code), communicators, capacity,
    and from the PMPI library the rank's host and (rank 0) mpi_version and mpi_library, None
    where it says nothing. A line cut short by a kill is ignored."""
    out: dict[str, Any] = {"epoch_ns": 0, "regions": [], "communicators": {}, "neighbours": {},
                           "capacity": None, "host": None, "mpi_version": None,
                           "mpi_library": None}
    try:
        lines = (Path(stage) / RAW_NAMES_FILE).read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            item = json.loads(line)
        except ValueError:
            continue
        kind = item[0] if isinstance(item, list) and item else None
        if kind == "epoch":
            out["epoch_ns"] = int(item[1])
        elif kind == "region":
            regions = out["regions"]
            regions.extend([""] * (int(item[1]) + 1 - len(regions)))
            regions[int(item[1])] = str(item[2])
        elif kind == "comm":
            out["communicators"][str(item[1])] = list(item[2])
        elif kind == "nbrs":
            out["neighbours"][str(item[1])] = list(item[2])
        elif kind == "rank":
            out["capacity"] = int(item[3])
        elif kind == "host":
            out["host"] = str(item[1])
        elif kind == "mpi":
            out["mpi_version"], out["mpi_library"] = str(item[1]), str(item[2])
    return out


class TraceError(DataError):
    """A trace that cannot be read or is inconsistent. The message names the file and the problem."""


def rank_file_name(rank: int) -> str:
    return f"rank-{rank:05d}.parquet"


def staging_dir(trace_dir: Path, rank: int) -> Path:
    return Path(trace_dir) / STAGING_DIR / f"rank-{rank:05d}"


def derived_comm_id(parent: int, creation_index: int, lowest_world_rank: int) -> int:
    """A communicator id that every member computes alike without communicating.

    Members of a new communicator agree on the parent, on how many communicators were created
    from that parent before (creation is collective, so the count is the same everywhere), and on
    the lowest world rank among them, which tells apart the communicators one Split creates.
    """
    import zlib

    key = f"{parent}/{creation_index}/{lowest_world_rank}".encode()
    return 2 + zlib.crc32(key) % (2**31 - 3)


def write_json(path: Path, obj: Any, **dumps: Any) -> None:
    """Write `obj` as JSON to `path` atomically (a temporary file, then a rename), so a reader
    never sees half of it."""
    write_text_atomic(path, json.dumps(obj, **dumps) + "\n")


def write_manifest(trace_dir: Path, manifest: dict[str, Any]) -> None:
    write_json(Path(trace_dir) / MANIFEST_NAME, manifest, indent=2, sort_keys=True, default=str)


#: what else a trace directory holds, written by the layers above: replay's cache of prepared
#: arrays, and the GOAL schedule a trace was imported from (``--model loggopsim`` replays it)
REPLAY_CACHE_DIR = ".replay-cache"
GOAL_SIDECAR = "schedule.goal"


def foreign_entries(trace_dir: Path) -> list[str]:
    """The names in ``trace_dir`` that no trace writes (its manifest, rank files, staging area,
    replay cache, GOAL schedule): files of the user's, which replacing a trace must not take."""
    own = {MANIFEST_NAME, STAGING_DIR, REPLAY_CACHE_DIR, GOAL_SIDECAR}
    return sorted(e.name for e in os.scandir(trace_dir)
                  if e.name not in own and not RANK_FILE_RE.fullmatch(e.name))


def trace_dir_problem(trace_dir: Path) -> str | None:
    """Create ``trace_dir`` if needed; what stops a run from writing its trace there (None:
    nothing), in the words every recorder and ``collect`` use."""
    try:
        Path(trace_dir).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"cannot create trace directory {trace_dir}: {exc.strerror or exc}"
    if not os.access(trace_dir, os.W_OK):
        return f"trace directory {trace_dir} is not writable"
    return None


def clear_run(trace_dir: Path) -> None:
    """Remove an earlier run's manifest, rank files and staging area from `trace_dir`; anything
    else there is left alone."""
    import shutil

    trace_dir = Path(trace_dir)
    for old in list(trace_dir.glob("rank-*.parquet")) + [trace_dir / MANIFEST_NAME]:
        old.unlink(missing_ok=True)
    shutil.rmtree(trace_dir / STAGING_DIR, ignore_errors=True)
