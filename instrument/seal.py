"""After a run: the manifest finished from what the ranks' files say, dead ranks sealed.

Rank 0 calls ``finalize_manifest`` at a clean finish, and `hindsight collect` (or `hindsight
trace seal`) after the launcher returns, so that a crashed run is described by what is actually
on disk. Nothing here runs while the program does: ``hindsight.trace`` loads pyarrow only when
these functions first use it.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from hindsight import trace as tf
from instrument import stopped
from instrument.tracer import seal_rank, still_recording


def finalize_manifest(trace_dir: Path, summaries: list[dict] | None = None,
                      extra: dict[str, Any] | None = None,
                      launcher_exit: int | None = None,
                      settle_s: float = 0.0) -> dict[str, Any]:
    """Write the final manifest from the ranks' own files (and gathered summaries if any).

    Used by rank 0 at a clean finish and by `hindsight collect` after mpiexec returns, so a
    crashed run is described by what is actually on disk. ``settle_s``: how long to wait for
    staged records a process still holds (``still_recording``) before they are sealed. After
    the launcher has returned (`collect`), such a process is a rank still exiting (killed by an
    abort, its files not yet released: the launcher returns once their output is closed) or
    sealing its own records; without the wait the rank was recorded as `missing`.
    """
    trace_dir = Path(trace_dir)
    deadline = time.monotonic() + settle_s
    start_path = trace_dir / tf.STAGING_DIR / "start.json"
    try:
        manifest = tf.read_manifest(trace_dir)
    except tf.TraceError:
        if not start_path.is_file():
            raise
        manifest = json.loads(start_path.read_text())
    nranks = int(manifest["ranks"])
    status, events, comms, ends, verified = [], [], dict(manifest.get("communicators") or {}), [], []
    untraced: dict[str, int] = {}
    errors: dict[str, str] = {}
    concurrent: dict[str, list[str]] = {}
    stopped_in: dict[str, Any] = {}
    neighbours: dict[str, dict[str, list]] = dict(manifest.get("neighbours") or {})
    for rank in range(nranks):
        path = trace_dir / tf.rank_file_name(rank)
        where = stopped.read(tf.staging_dir(trace_dir, rank), manifest.get("program"))
        if where is not None:
            stopped_in[str(rank)] = where
        if not path.is_file():
            _seal_dead_rank(trace_dir, rank, manifest["run_id"], tf.epoch_of(manifest, rank),
                            nranks, deadline)
        meta = None
        if path.is_file():
            try:
                meta = tf.file_metadata(path)
            except tf.TraceError:
                meta = None
        if meta is not None and meta.get("run_id") == manifest["run_id"]:
            status.append(meta["status"])
            events.append(meta["events"])
            ends.append(meta.get("max_t_end_ns", 0))
            comms.update(meta.get("communicators", {}))
            for cid, outs in (meta.get("neighbours") or {}).items():
                neighbours.setdefault(cid, {})[str(rank)] = outs
            for name, n in (meta.get("untraced_calls") or {}).items():
                untraced[name] = untraced.get(name, 0) + int(n)
            if meta.get("error"):
                errors[str(rank)] = str(meta["error"])
            if meta.get("concurrent_mpi"):
                concurrent[str(rank)] = tf.concurrent_calls(meta["concurrent_mpi"])
        else:
            status.append("missing")
            events.append(None)
        if summaries:
            verified.append(summaries[rank].get("result_verified"))
    manifest["rank_status"] = status
    manifest["events"] = events
    manifest["communicators"] = comms
    if neighbours:
        manifest["neighbours"] = neighbours
    manifest["end_unix"] = time.time()
    manifest["makespan_ns"] = max(ends) if ends else None
    manifest["complete"] = all(s == "complete" for s in status)
    # Calls the trace has no rows for (instrument/untraced.py): its traffic is incomplete.
    manifest["untraced_calls"] = dict(sorted(untraced.items()))
    if errors:
        manifest["rank_errors"] = errors
    if concurrent:
        # ranks whose MPI two threads called at once: their recording stopped there
        manifest["concurrent_mpi"] = concurrent
    if stopped_in:
        # where each rank was when `hindsight collect` stopped the run (instrument.stopped)
        manifest["stopped_in"] = {str(r): stopped_in.get(str(r)) for r in range(nranks)}
    if summaries:
        clock = manifest.setdefault("clock", {})
        clock["end_offset_ns"] = [s.get("end_offset_ns", 0) for s in summaries]
        clock["drift_ppm"] = [1e6 * s.get("drift", 0.0) for s in summaries]
        clock["drift_correction"] = ("linear, applied to t_start/t_end when each rank file was "
                                     "merged, where the offset changed by more than the "
                                     "measurements' uncertainty")
    if verified and any(v is not None for v in verified):
        manifest["result_verified"] = all(v is True for v in verified if v is not None)
    if launcher_exit is not None:
        manifest["launcher_exit_code"] = launcher_exit
        if launcher_exit != 0:
            manifest["complete"] = False
    if extra:
        manifest.update(extra)
    tf.write_manifest(trace_dir, manifest)
    if manifest["complete"]:
        shutil.rmtree(trace_dir / tf.STAGING_DIR, ignore_errors=True)
    return manifest


def _seal_dead_rank(trace_dir: Path, rank: int, run_id: str, epoch_ns: int | None,
                    nranks: int, deadline: float = 0.0) -> None:
    """Turn what a rank that did not finish left in staging into its rank file, honestly marked.

    Its status is the one it left beside its records (`terminated` after a signal, `error`
    with its exception after it raised), else `killed`. A record being written when the rank
    was killed ends the data (hindsight.trace.core). Records a process still holds are waited
    for until ``deadline`` (time.monotonic()), then left staged.
    """
    stage = tf.staging_dir(trace_dir, rank)
    while still_recording(stage) and time.monotonic() < deadline:
        time.sleep(0.02)
    if not (stage / tf.RAW_FILE).is_file() or still_recording(stage):
        return              # sealed by the rank itself meanwhile, or a rank still running
    meta = {"format_version": tf.FORMAT_VERSION, "run_id": run_id, "rank": rank,
            "status": "killed", "communicators": {}}
    status_file = stage / "status.json"
    if status_file.is_file():
        try:
            meta.update(json.loads(status_file.read_text()))
        except (OSError, json.JSONDecodeError):
            pass
    try:
        meta["error"] = (stage / tf.ERROR_FILE).read_text(errors="replace").strip()[:2000]
        meta["status"] = "error"            # as the Python tracer marks a rank that raised
    except OSError:
        pass                                # the rank raised nothing
    # the run's rank count, which a rank file of the Python tracer carries in its manifest copy,
    # so that a file moved into another run's folder is named as such (trace.read)
    meta.setdefault("run", {"ranks": nranks})
    meta["sealed_by"] = "hindsight collect"
    seal_rank(trace_dir, rank, meta, epoch_ns=epoch_ns)
