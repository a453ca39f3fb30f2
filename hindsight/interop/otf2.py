"""OTF2 (Score-P's Open Trace Format 2): what the exporter (``otf2_export``) and the importer
(``otf2_import``) agree on.

hindsight's rows map to OTF2 records as Score-P writes them (see ``otf2_export``); what a row
holds and OTF2 has no field for travels as attributes named ``hindsight::...``, which other
readers show and the importer reads back. Sizes of collectives: hindsight records the
per-process block; the exporter writes it as sizeSent = sizeReceived, times the communicator's
size for ``TOTAL_OVER_PEERS``, and the importer reads that back from archives hindsight wrote
(Score-P's per-process sizes, which depend on the root and MPI_IN_PLACE, are read by
``scorep_sizes.scorep_block``).
"""

from __future__ import annotations

from hindsight.errors import DataError

ARCHIVE_NAME = "traces"
# hindsight collective op -> name of its OTF2 CollectiveOp
COLLECTIVE_OPS_OTF2 = {
    "Barrier": "BARRIER", "Bcast": "BCAST", "Reduce": "REDUCE", "Allreduce": "ALLREDUCE",
    "Gather": "GATHER", "Gatherv": "GATHERV", "Scatter": "SCATTER", "Scatterv": "SCATTERV",
    "Allgather": "ALLGATHER", "Allgatherv": "ALLGATHERV", "Alltoall": "ALLTOALL",
    "Alltoallv": "ALLTOALLV", "Scan": "SCAN", "Exscan": "EXSCAN",
    "Reduce_scatter": "REDUCE_SCATTER", "Reduce_scatter_block": "REDUCE_SCATTER_BLOCK"}
# the ops whose sizes hindsight's exporter writes as totals over all peers: nbytes times the
# comm's size
TOTAL_OVER_PEERS = {"Gather", "Scatter", "Allgather", "Alltoall", "Reduce_scatter_block"}
ATTR_SOURCE = "hindsight::irecv_source"
ATTR_TAG = "hindsight::irecv_tag"
ATTR_COMM = "hindsight::comm"
ATTR_SIZE = "hindsight::size"
ATTR_CPU = "hindsight::cpu_ns"
ATTR_IRECV_BYTES = "hindsight::irecv_bytes"
ATTR_NEW_COMM = "hindsight::new_comm"
ATTR_NBYTES = "hindsight::nbytes"
ATTR_ROWS = "hindsight::rows"
#: The archive property (OTF2 keeps it in the anchor file) saying how a timeline that no run
#: measured was made ("replayed under loggps", "simulated with LogGOPSim rules"): the import
#: keeps it as the trace's ``origin.timeline``, so that nothing measured is read from it.
PROP_TIMELINE = "HINDSIGHT::TIMELINE"
#: The archive property naming the program (the manifest's ``app``), which the import keeps
#: rather than the archive's folder name.
PROP_APP = "HINDSIGHT::APP"
#: The archive property holding the manifest's ``untraced_calls`` (JSON: calls the recorder
#: counted but did not record), which the import keeps: the traffic stays known incomplete.
PROP_UNTRACED = "HINDSIGHT::UNTRACED_CALLS"
#: The archive property of a partial export (``export --allow-partial``): JSON, each rank that
#: did not finish cleanly in the source trace and its status, which the import keeps (the
#: imported trace is as incomplete as its source)
PROP_INCOMPLETE = "HINDSIGHT::INCOMPLETE_RANKS"
UNDEFINED_ROOT = 0xFFFFFFFF    # OTF2_UNDEFINED_UINT32: a collective without a root, a wildcard
UNDEFINED_UINT64 = 0xFFFFFFFFFFFFFFFF   # OTF2_UNDEFINED_UINT64: a probe's message id
# The columns of one row in ATTR_ROWS: the rows of a call that no OTF2 record can carry (a send
# to MPI_PROC_NULL, the completion of a receive from it, ...), "position:op:peer:tag:comm:
# nbytes:request:root" each, ";"-separated; position is the row's place among the call's rows.
# a system-tree level below a host: a testbed node (the manifest's network.node_of_rank)
TESTBED_NODE = "testbed node"
ROW_FIELDS = ("op", "peer", "tag", "comm", "nbytes", "request", "root")


_SILENT = []     # the registered callback, kept alive for as long as the library may call it


def quiet_library() -> None:
    """Stop the OTF2 C library from printing its own ``[OTF2] file:line: error: ...`` lines on
    stderr (four for one damaged event file): the error code it returns becomes the command's
    one ``Error:`` line. Once per process; the callback (``OTF2_Error_RegisterCallback``, which
    the ``otf2`` package does not bind: its last argument is a ``va_list``, passed on x86-64 as
    a pointer) returns the code it is given, as the default handler does after printing."""
    if _SILENT:
        return
    import ctypes

    from _otf2.Config import conf

    proto = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint64,
                             ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
    callback = proto(lambda user, file, line, function, code, fmt, args: code)
    register = conf.lib.OTF2_Error_RegisterCallback
    register.argtypes = [proto, ctypes.c_void_p]
    register.restype = ctypes.c_void_p
    register(callback, None)
    _SILENT.append(callback)


class OtfError(DataError, ValueError):
    """An OTF2 archive that cannot be written or imported; the message names the file and the
    problem."""


def format_rows(rows: list[tuple]) -> str:
    """ATTR_ROWS's value for ``rows``: (position, op name, peer, tag, comm, nbytes, request,
    root) each."""
    return ";".join(":".join(str(v) for v in row) for row in rows)


def parse_rows(text: str, where: str) -> list[tuple]:
    """The rows of an ATTR_ROWS value, as ``format_rows`` wrote them."""
    out = []
    for item in filter(None, str(text).split(";")):
        parts = item.split(":")
        try:
            if len(parts) != 1 + len(ROW_FIELDS):
                raise ValueError
            out.append((int(parts[0]), parts[1], *(int(x) for x in parts[2:])))
        except ValueError:
            raise OtfError(f"{where}: malformed {ATTR_ROWS} attribute {item!r}") from None
    return out
