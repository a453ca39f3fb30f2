"""Reading and checking a trace directory's ``manifest.json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


from hindsight.trace.core import (
    FORMAT_VERSION, MANIFEST_NAME, MAX_RANKS, STAGING_DIR, TraceError)


# ----------------------------------------------------------------------------------------------
# Manifest


def run_problems(manifest: dict[str, Any]) -> list[str]:
    """What disturbed the traced run, as ``collect`` recorded it (``conditions.problems``: ranks
    that waited for a core, CPU time stolen by the hypervisor); empty when nothing did or the
    record is not a list of texts (a manifest from elsewhere)."""
    cond = manifest.get("conditions")
    problems = cond.get("problems") if isinstance(cond, dict) else None
    if not isinstance(problems, list):
        return []
    return [p for p in problems if isinstance(p, str)]


def rank_errors(manifest: dict[str, Any]) -> list[tuple[str, str]]:
    """The manifest's ``rank_errors`` (what a rank raised, the signal it crashed on, its
    MPI_Abort) as (rank, error) pairs in rank order."""
    errors = manifest.get("rank_errors") or {}
    return sorted(errors.items(), key=lambda kv: int(kv[0]) if str(kv[0]).isdigit() else 0)


def not_a_trace_dir(trace_dir: Path | str) -> str:
    """The message for a trace path that is not a directory: a file (a rank file, a manifest)
    is named as one, with its folder, the trace."""
    p = Path(trace_dir)
    if p.is_file():
        what = "a trace is the folder of manifest.json and the rank files"
        if (p.parent / MANIFEST_NAME).is_file():
            # a file of a trace: its folder is the trace meant
            return f"{p}: a file, not a trace directory ({what}: {p.parent.resolve()})"
        return f"{p}: a file, not a trace directory ({what})"
    return f"{p}: no such trace directory"


def read_manifest(trace_dir: Path) -> dict[str, Any]:
    path = Path(trace_dir) / MANIFEST_NAME
    if not Path(trace_dir).is_dir():
        raise TraceError(not_a_trace_dir(trace_dir))
    if not path.is_file():
        if (Path(trace_dir) / STAGING_DIR).is_dir():
            raise TraceError(f"{path}: missing manifest: a run's staged records are there, not "
                             f"sealed; `hindsight trace seal {trace_dir}` makes them a trace")
        raise TraceError(f"{path}: missing manifest (not a hindsight trace directory?)")
    try:
        manifest = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TraceError(f"{path}: unreadable manifest: {exc}") from None
    if not isinstance(manifest, dict) or "format_version" not in manifest:
        raise TraceError(f"{path}: not a hindsight manifest (no format_version)")
    major = str(manifest["format_version"]).split(".")[0]
    if major != FORMAT_VERSION.split(".")[0]:
        raise TraceError(f"{path}: format version {manifest['format_version']} is not supported "
                         f"(this hindsight reads {FORMAT_VERSION})")
    for key in ("ranks", "run_id"):
        if key not in manifest:
            raise TraceError(f"{path}: manifest lacks '{key}'")
    # Types are checked here, once, so that a damaged manifest is one clear error rather than a
    # TypeError deep in a reader.
    ranks = manifest["ranks"]
    if not isinstance(ranks, int) or isinstance(ranks, bool) or not 1 <= ranks <= MAX_RANKS:
        raise TraceError(f"{path}: 'ranks' must be an integer in 1..{MAX_RANKS}, not {ranks!r}")
    if not isinstance(manifest["run_id"], str):
        raise TraceError(f"{path}: 'run_id' must be a string")
    status = manifest.get("rank_status")
    if status is not None and not (isinstance(status, list) and len(status) == ranks
                                   and all(isinstance(x, str) or x is None for x in status)):
        raise TraceError(f"{path}: 'rank_status' must list one status per rank ({ranks})")
    comms = manifest.get("communicators")
    if comms is not None and not (isinstance(comms, dict) and all(
            v is None or (isinstance(v, list) and v and all(
                isinstance(r, int) and not isinstance(r, bool) and 0 <= r < ranks for r in v))
            for v in comms.values())):
        raise TraceError(f"{path}: 'communicators' must map ids to non-empty lists of ranks "
                         f"below {ranks}")
    if comms is not None and not all(k.isdigit() for k in comms):
        raise TraceError(f"{path}: 'communicators' ids must be non-negative integers")
    if comms is not None and comms.get("0") not in (None, list(range(ranks))):
        raise TraceError(f"{path}: communicator 0 (MPI_COMM_WORLD) must hold every rank, "
                         f"0..{ranks - 1}")
    events = manifest.get("events")
    if isinstance(events, list) and not (len(events) == ranks and all(
            x is None or (isinstance(x, int) and not isinstance(x, bool) and x >= 0)
            for x in events)):
        raise TraceError(f"{path}: 'events' must list one count (or null) per rank ({ranks})")
    span = manifest.get("makespan_ns")
    if isinstance(span, (int, float)) and not isinstance(span, bool) and not span >= 0:
        raise TraceError(f"{path}: 'makespan_ns' must be a number of ns >= 0, not {span!r}")
    nbrs = manifest.get("neighbours")
    if nbrs is not None and not (isinstance(nbrs, dict) and all(
            k.isdigit() and isinstance(per, dict) and all(
                r.isdigit() and int(r) < ranks and isinstance(outs, list) and all(
                    isinstance(x, int) and not isinstance(x, bool) and -1 <= x < ranks
                    for x in outs) for r, outs in per.items())
            for k, per in nbrs.items())):
        raise TraceError(f"{path}: 'neighbours' must map communicator ids to each rank's list "
                         f"of out-neighbours (ranks below {ranks}, -1 for none)")
    for key, kind in _MANIFEST_TYPES.items():
        v = manifest.get(key)
        if v is not None and (not isinstance(v, kind) or (isinstance(v, bool) and bool not in
                                                           (kind if isinstance(kind, tuple)
                                                            else (kind,)))):
            raise TraceError(f"{path}: '{key}' has the wrong type ({type(v).__name__})")
    nodes = (manifest.get("network") or {}).get("node_of_rank")
    if nodes is not None and not (isinstance(nodes, list) and len(nodes) == ranks and all(
            isinstance(x, int) and not isinstance(x, bool) and 0 <= x < ranks for x in nodes)):
        raise TraceError(f"{path}: 'network.node_of_rank' must list one node number (0.."
                         f"{ranks - 1}) per rank")
    hosts = manifest.get("hosts") or {}
    if not all(isinstance(rs, list) and all(isinstance(r, int) and not isinstance(r, bool)
                                            for r in rs) for rs in hosts.values()):
        raise TraceError(f"{path}: 'hosts' must map host names to lists of ranks")
    return manifest


#: Types of the optional manifest keys that readers use (None is always allowed).
_MANIFEST_TYPES: dict[str, type | tuple[type, ...]] = {
    "complete": bool, "result_verified": bool, "clock": dict, "hosts": dict,
    "ranks_per_host": dict, "transport": dict, "args": dict, "collective_algorithms": dict,
    "network": dict, "events": list, "makespan_ns": (int, float), "start_unix": (int, float),
    "end_unix": (int, float),
}


def simulated_timeline(manifest: dict[str, Any]) -> str | None:
    """How a trace's times were made when no run measured them, or None for a measured run.

    A timeline ``replay --out`` wrote comes from a model; an imported schedule (GOAL) from the
    import's simulation (``origin.timeline``). Such times hold no noise and no MPI library's
    behaviour, so nothing measured can be read from them (the noise report, for one)."""
    made = timeline_made(manifest)
    origin = manifest.get("origin")
    if made and not isinstance(manifest.get("replay"), dict) and isinstance(origin, dict) \
            and origin.get("format"):
        return f"{made} (imported from {str(origin['format']).upper()})"
    return made


def timeline_made(manifest: dict[str, Any]) -> str | None:
    """``simulated_timeline`` without the format it was imported from: what an export that
    keeps it writes (so that an export and import again do not say it twice)."""
    rep = manifest.get("replay")
    if isinstance(rep, dict):
        return f"replayed under {rep.get('model')}"
    origin = manifest.get("origin")
    if isinstance(origin, dict) and isinstance(origin.get("timeline"), str):
        return origin["timeline"]
    return None


def untraced_text(counts: dict[str, int], top: int = 5) -> str:
    """``18 calls (Iallreduce 9, Win.Fence 6, ...)``: the most frequent names first."""
    items = sorted(counts.items(), key=lambda kv: (-int(kv[1]), kv[0]))
    names = ", ".join(f"{k} {v}" for k, v in items[:top]) + (", ..." if len(items) > top else "")
    total = sum(int(v) for v in counts.values())
    return f"{total} call{'s' * (total != 1)} ({names})"


def untraced_note(manifest: dict[str, Any]) -> str | None:
    """What a replay or an export of a trace with untraced calls leaves out, or None (the
    manifest's ``untraced_calls``: calls the recorder counts but does not record)."""
    counts = manifest.get("untraced_calls")
    if not counts:
        return None
    return (f"{untraced_text(counts)} not traced: their traffic is not in the trace, so it is "
            "left out here (docs/trace-format.md, \"What is not traced\")")
