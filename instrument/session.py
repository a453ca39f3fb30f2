"""Start and finish tracing in one MPI process: clocks, manifest, regions, exit and signal paths.

    comm = instrument.start("traces/run1", app="sorting", paradigm="pipeline", args={...})
    with instrument.region("task", size=n):
        ...
    instrument.finish(result_verified=True)

`start` is collective over COMM_WORLD (a barrier, a broadcast of the epoch and of the run id, an
allgather of host names); `finish` is collective too (a gather of per-rank summaries). Exits that
skip `finish` (an exception, a signal) still write the rank's own file with an honest status but
do no collective work, since the other ranks may be gone.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import sys
import threading
import time
from pathlib import Path
from time import perf_counter_ns
from typing import Any

from mpi4py import MPI

from hindsight import conditions, system
from hindsight.trace import core as tf
from instrument import comm as tcomm, stopped as _stopped, untraced as _untraced_calls
from instrument.tracer import DEFAULT_CAPACITY, RECORD as _RECORD, Tracer, TraceWriteError
from instrument.tracer import pack as _pack
from instrument.seal import finalize_manifest
from instrument.signals import SIGNAL_GRACE_S, exit_on_signals

#: Environment variables that change how MPI moves data; recorded in the manifest.
TRANSPORT_PREFIXES = ("MPIR_CVAR_", "MPICH_", "FI_", "UCX_", "HYDRA_", "OMPI_MCA_", "I_MPI_")

_tracer: Tracer | None = None
_world: tcomm.TracedComm | None = None
_status = "running"
_lock = threading.Lock()
#: An untraced run (HINDSIGHT_UNTRACED=1): what `finish` needs to write its wall time.
_untraced: dict[str, Any] | None = None
#: This rank's clock reading when the program ended (`end_of_program`), and at its start.
_program_end: int | None = None
_conditions_start: dict[str, Any] = {}
_conditions_end: dict[str, Any] = {}
_region_op = tf.OP_CODE["region"]


def active() -> bool:
    return _tracer is not None and not _tracer.closed


def tracer() -> Tracer | None:
    return _tracer


def start(trace_dir: str | os.PathLike | None, app: str | None = None,
          paradigm: str | None = None, args: dict[str, Any] | None = None,
          program: str | None = None, capacity: int | None = None,
          cpu_sampling: str | None = None, refuse: str | None = None) -> MPI.Intracomm:
    """Begin tracing this process; returns the traced COMM_WORLD (plain COMM_WORLD if off).

    Every rank must call it. With `trace_dir` None tracing is off and `region`/`finish` are no-ops.
    With HINDSIGHT_UNTRACED=1 in the environment (`hindsight collect --untraced`) nothing is
    recorded: the run's wall time, measured as a traced run's is, goes into `trace_dir`'s
    manifest (`"traced": false`) and no rank files are written.

    Nothing heavier than the standard library and mpi4py is loaded here or while the program
    runs (docs/robustness.md, "No observer effect").

    `refuse`: a reason the run cannot be traced (`python -m instrument.run` refuses a program
    that asks for MPI_THREAD_MULTIPLE): rank 0 prints it and leaves it in the trace directory
    (`.staging/refused.txt`, for `hindsight collect`), and every rank exits with status 2.

    From here on `MPI.Finalize` finishes the rank first (`finish`, collective as Finalize is),
    so a program that finalizes MPI itself keeps its trace.
    """
    global _tracer, _world, _untraced
    world = MPI.COMM_WORLD
    if trace_dir is None:
        return world
    if _tracer is not None or _untraced is not None:
        raise RuntimeError("instrument.start() called twice in one process")
    untraced = os.environ.get("HINDSIGHT_UNTRACED") == "1"
    cpu_sampling = cpu_sampling or os.environ.get("HINDSIGHT_CPU_SAMPLING", "regions")
    if cpu_sampling not in ("regions", "all"):
        raise ValueError(f"cpu sampling must be 'regions' or 'all', not {cpu_sampling!r}")
    capacity = capacity or int(os.environ.get("HINDSIGHT_BUFFER_EVENTS", DEFAULT_CAPACITY))
    rank, size = world.Get_rank(), world.Get_size()
    trace_dir = Path(trace_dir)
    # HINDSIGHT_HOSTNAME stands in for the host name where ranks share one (network namespaces
    # of the testbed, or tests of the multi-host clock alignment).
    host = os.environ.get("HINDSIGHT_HOSTNAME") or os.uname().nodename

    # Rank 0 prepares the directory; the others wait so that no one writes into a stale trace.
    error = None
    if rank == 0:
        error = _prepare_dir(trace_dir)
    error = world.bcast(error, root=0)
    if error:
        if rank == 0:
            sys.stderr.write(f"hindsight: {error}\n")
        world.Barrier()
        raise SystemExit(2)
    if refuse:
        if rank == 0:
            sys.stderr.write(f"hindsight: {refuse}\n")
            (trace_dir / tf.STAGING_DIR / "refused.txt").write_text(refuse + "\n")
        world.Barrier()
        raise SystemExit(2)

    hosts = world.allgather(host)
    run_id = world.bcast(os.urandom(8).hex() if rank == 0 else None, root=0)
    manifest = None
    if rank == 0:
        manifest = _base_manifest(run_id, size, hosts, app, paradigm, args, program,
                                  cpu_sampling, [0] * size, [0] * size)
        if untraced:
            manifest.update(traced=False, cpu_sampling=None)
        else:
            (trace_dir / tf.STAGING_DIR / "start.json").write_text(json.dumps(manifest))
    manifest = world.bcast(manifest, root=0)

    # The tracer's set-up (its staging file, the first window's pages faulted in: the first write
    # into a new file mapping costs milliseconds here) happens before the epoch, so that the run's
    # measured time holds the same work traced and untraced.
    if not untraced:
        try:
            t = Tracer(trace_dir, rank, run_id, 0, capacity, cpu_sampling == "all")
            t.prefault()
            problem = None
        except (OSError, TraceWriteError) as exc:
            problem = f"rank {rank}: cannot set up the trace in {trace_dir}: " \
                      f"{getattr(exc, 'strerror', None) or exc}"
        problems = [p for p in world.allgather(problem) if p]
        if problems:
            if rank == 0:
                sys.stderr.write(f"hindsight: {problems[0]}\n")
            raise SystemExit(2)
        t.host = host
        t.hosts = hosts
        # Every rank file carries the run's metadata too, so one file describes its run.
        t.run_meta = manifest
        t.untraced_calls = _untraced_calls.COUNTS
        _tracer = t
        tcomm.set_tracer(t)
        _world = tcomm.TracedComm(world)
        _install_exit_paths()
        try:
            # where the rank is when `hindsight collect` stops the run: no cost per call
            _stopped.install(t.stage)
        except OSError:
            pass                 # the run is traced all the same; collect says "not known"
    else:
        _install_exit_paths(signals=False)
    _wrap_finalize()

    _conditions_start.update(snapshot=conditions.snapshot() if rank == 0 else None,
                             ctx=conditions.ctx_switches(), wait=conditions.run_queue_wait_ns(),
                             t=perf_counter_ns(), oversubscribed=manifest["oversubscribed"])
    world.Barrier()
    epoch0 = world.bcast(perf_counter_ns() if rank == 0 else None, root=0)
    offsets, errors = _clock_offsets(world, hosts)
    epoch = epoch0 + offsets[rank]      # this rank's clock reading at rank 0's epoch
    if rank == 0:
        clock = manifest["clock"]
        clock.update(start_offset_ns=offsets, start_uncertainty_ns=errors, epoch_reading_ns=epoch0)
        tf.write_manifest(trace_dir, manifest)

    if untraced:
        _untraced = {"trace_dir": trace_dir, "epoch": epoch, "hosts": hosts}
        return world
    t.set_epoch(epoch)
    t.clock_offset_ns = offsets[rank]
    t.clock_error_ns = errors[rank]
    return _world


_real_finalize = MPI.Finalize


def _finalize() -> None:
    """`MPI.Finalize` as a traced program calls it: the rank's trace is finished (collective,
    as MPI_Finalize is) while MPI still works, then MPI is finalized."""
    finish()
    _real_finalize()


def _wrap_finalize() -> None:
    _finalize.__doc__ = _real_finalize.__doc__
    MPI.Finalize = _finalize


def _prepare_dir(trace_dir: Path) -> str | None:
    problem = tf.trace_dir_problem(trace_dir)
    if problem:
        return problem
    # A new run replaces an old trace in the same folder; anything else there is left alone.
    tf.clear_run(trace_dir)
    (trace_dir / tf.STAGING_DIR).mkdir()
    return None


CLOCK_ROUNDS = 32


def _clock_offsets(world: MPI.Intracomm, hosts: list[str]) -> tuple[list[int], list[int]]:
    """Offset of each rank's clock to rank 0's (local reading = rank 0's reading + offset), and
    its uncertainty (half the smallest round trip), both in ns.

    A clock belongs to a host, not a rank: ranks on rank 0's host read the same CLOCK_MONOTONIC,
    so their offset is exactly 0; on every other host, its lowest rank runs Cristian's method
    against rank 0 (the round trip with the least delay out of CLOCK_ROUNDS) and the host's other
    ranks take that offset.
    """
    rank = world.Get_rank()
    size = world.Get_size()
    probes = {}                                   # host -> the rank that measures its clock
    for r, h in enumerate(hosts):
        if h != hosts[0]:
            probes.setdefault(h, r)
    if not probes:
        return [0] * size, [0] * size
    mine = (0, 0)
    for r in probes.values():
        if rank == 0:
            for _ in range(CLOCK_ROUNDS):
                world.recv(source=r, tag=31000)
                world.send(perf_counter_ns(), dest=r, tag=31001)
        elif rank == r:
            best = None
            for _ in range(CLOCK_ROUNDS):
                t0 = perf_counter_ns()
                world.send(None, dest=0, tag=31000)
                t_remote = world.recv(source=0, tag=31001)
                t1 = perf_counter_ns()
                if best is None or t1 - t0 < best[0]:
                    best = (t1 - t0, (t0 + t1) // 2 - t_remote)
            mine = (best[1], best[0] // 2)
    measured = world.allgather(mine)
    offsets = [0] * size
    errors = [0] * size
    for r, h in enumerate(hosts):
        if h in probes:
            offsets[r], errors[r] = measured[probes[h]]
    return offsets, errors


def _base_manifest(run_id, size, hosts, app, paradigm, args, program, cpu_sampling,
                   offsets, errors) -> dict[str, Any]:
    by_host: dict[str, list[int]] = {}
    for r, h in enumerate(hosts):
        by_host.setdefault(h, []).append(r)
    cores = system.usable_cores()
    import mpi4py
    return {
        "format_version": tf.FORMAT_VERSION,
        "run_id": run_id,
        "traced": True,
        "app": app,
        "paradigm": paradigm,
        "args": args or {},
        "program": program,
        "ranks": size,
        "hosts": by_host,
        "ranks_per_host": {h: len(rs) for h, rs in by_host.items()},
        "cores": cores,
        "oversubscribed": any(len(rs) > (cores or 1) for rs in by_host.values()),
        "mpi_library": MPI.Get_library_version().strip().splitlines()[0],
        "mpi_version": "%d.%d" % MPI.Get_version(),
        "mpi4py_version": mpi4py.__version__,
        "transport": {k: v for k, v in sorted(os.environ.items())
                      if k.startswith(TRANSPORT_PREFIXES)},
        "transport_name": os.environ.get("HINDSIGHT_TRANSPORT", "default"),
        "clock": {
            "source": "CLOCK_MONOTONIC (time.perf_counter_ns)",
            "epoch": "rank 0 clock after the start-up barrier",
            "method": "shared-host-clock" if len(by_host) == 1
            else f"shared-host-clock on rank 0's host, Cristian min-RTT of {CLOCK_ROUNDS} "
                 "per other host",
            "start_offset_ns": offsets,
            "start_uncertainty_ns": errors,
        },
        "cpu_sampling": cpu_sampling,
        "start_unix": time.time(),
        "end_unix": None,
        "makespan_ns": None,
        "rank_status": ["running"] * size,
        "complete": False,
        "result_verified": None,
        "communicators": {"0": list(range(size))},   # COMM_SELF (1): each rank alone
        "git_revision": os.environ.get("HINDSIGHT_GIT_REVISION") or system.git_revision(),
        "events": None,
        "launcher": os.environ.get("HINDSIGHT_LAUNCHER", "mpiexec"),
    }


# ----------------------------------------------------------------------------------------------
# Regions


class _Region(contextlib.ContextDecorator):
    def __init__(self, name: str, size: int = -1) -> None:
        self.name = name
        self.size = int(size)

    def _recreate_cm(self):
        # As a decorator, each call gets its own instance, so recursion nests correctly.
        return _Region(self.name, self.size)

    def __enter__(self):
        t = _tracer
        if t is None or t.closed:
            return self
        self._code = t.region_code(self.name)
        self._saved = t.region
        t.region = self._code
        self._c0 = time.thread_time_ns()
        self._t0 = perf_counter_ns()
        return self

    def __exit__(self, *exc) -> bool:
        t = _tracer
        if t is None or t.closed or not hasattr(self, "_t0"):
            return False
        t1 = perf_counter_ns()
        cpu = time.thread_time_ns() - self._c0
        t.region = self._saved
        o = t.off
        _pack(t.buf, o, _region_op, self._code, self._t0, cpu, -1, -1, -1, self.size, -1, -1, t1)
        o += _RECORD
        t.off = o
        if o >= t.end:
            t.roll()
        del self._t0
        return False


def region(name: str, size: int = -1) -> _Region:
    """Mark an application phase (`task`, `merge`, `divide`, ...). Context manager or decorator.

    `size` is the work size of the phase (elements, edges, documents ...), recorded in `nbytes`
    of the region row for cost-model fits.
    """
    if not isinstance(name, str) or not name:
        raise ValueError("region name must be a non-empty string")
    return _Region(name, size)


# ----------------------------------------------------------------------------------------------
# Finishing


def end_of_program() -> None:
    """Mark the end of the measured program on this rank (the first call counts).

    A run's wall time (manifest ``wall_ns``, traced or not) is the largest time from the start
    barrier to this mark over the ranks. `python -m instrument.run` marks it when the program
    returns; an application that checks its result after the parallel phase marks it before
    the check, and `finish` marks it if nobody did."""
    global _program_end
    if _program_end is None:
        _program_end = perf_counter_ns()
        _conditions_end.update(ctx=conditions.ctx_switches(), wait=conditions.run_queue_wait_ns(),
                               snapshot=conditions.snapshot()
                               if _conditions_start.get("snapshot") else None)


def _rank_conditions() -> dict[str, Any]:
    """This rank's own conditions from `start` to the program's end: its context switches and
    the share of the time it was runnable but waiting for a core."""
    now, before = _conditions_end.get("ctx"), _conditions_start.get("ctx")
    w0, w1, t0 = _conditions_start.get("wait"), _conditions_end.get("wait"), \
        _conditions_start.get("t")
    wait = round((w1 - w0) / (_program_end - t0), 4) \
        if None not in (w0, w1, t0, _program_end) and _program_end > t0 else None
    return {"ctx_switches": [a - b for a, b in zip(now, before)] if now and before else None,
            "run_queue_wait": wait}


def _run_conditions(per_rank: list[dict[str, Any]]) -> dict[str, Any]:
    """The machine's conditions over the run (rank 0's view) and each rank's context switches."""
    return conditions.of_run(_conditions_start.get("snapshot"), _conditions_end.get("snapshot"),
                             per_rank, bool(_conditions_start.get("oversubscribed")))


def finish(result_verified: bool | None = None, extra: dict[str, Any] | None = None) -> None:
    """Collective: seal this rank's file, and (rank 0) write the final manifest."""
    global _status
    end_of_program()
    if _untraced is not None:
        _finish_untraced(result_verified, extra)
        return
    t = _tracer
    if t is None or t.closed:
        return
    world = MPI.COMM_WORLD
    _end_clock_alignment(world, t)
    # Corrected for this clock's drift, as the rank's timestamps are when its file is sealed.
    t.program_end_ns = round((_program_end - t.epoch_ns) * (1.0 - t.drift))
    mine = {"program_end_ns": t.program_end_ns, **_rank_conditions()}
    with _lock:
        _status = "complete"
        t.close("complete")
    # Status, events, end time and communicators are read back from the rank files by
    # finalize_manifest; only what the files do not say travels here.
    summary = {"result_verified": result_verified, "end_offset_ns": t.end_offset_ns,
               "drift": t.drift, **mine}
    summaries = world.gather(summary, root=0)
    if world.Get_rank() == 0:
        ends = [s["program_end_ns"] for s in summaries]
        extra = dict(extra or {}, wall_ns=max(ends), program_end_ns=ends,
                     conditions=_run_conditions(summaries))
        finalize_manifest(t.trace_dir, summaries=summaries, extra=extra)
    world.Barrier()


def _finish_untraced(result_verified: bool | None, extra: dict[str, Any] | None) -> None:
    """An untraced run's finish: gather each rank's program end, rank 0 writes the wall time."""
    global _status, _untraced
    run, _untraced = _untraced, None
    world = MPI.COMM_WORLD
    mine = {"program_end_ns": _program_end - run["epoch"], "result_verified": result_verified,
            **_rank_conditions()}
    summaries = world.gather(mine, root=0)
    _status = "complete"
    if world.Get_rank() == 0:
        manifest = json.loads((Path(run["trace_dir"]) / tf.MANIFEST_NAME).read_text())
        ends = [s["program_end_ns"] for s in summaries]
        verified = [s["result_verified"] for s in summaries if s["result_verified"] is not None]
        manifest.update(
            wall_ns=max(ends), makespan_ns=max(ends), program_end_ns=ends,
            rank_status=["complete"] * len(ends), complete=True, end_unix=time.time(),
            result_verified=all(verified) if verified else None,
            conditions=_run_conditions(summaries), **(extra or {}))
        tf.write_manifest(run["trace_dir"], manifest)
        import shutil
        shutil.rmtree(Path(run["trace_dir"]) / tf.STAGING_DIR, ignore_errors=True)
    world.Barrier()


def _end_clock_alignment(world: MPI.Intracomm, t: Tracer) -> None:
    """Measure the offsets again at the end; the change over the run is a linear drift, which
    the rank applies to its timestamps when it merges its file (docs/trace-format.md, Clocks)."""
    ends, errors = _clock_offsets(world, t.hosts)
    t.end_offset_ns = ends[t.rank]
    elapsed = perf_counter_ns() - t.epoch_ns
    change = t.end_offset_ns - t.clock_offset_ns
    # A change within the two measurements' uncertainty is noise, not drift: correcting for it
    # would distort the timestamps more than it mends them.
    if abs(change) > t.clock_error_ns + errors[t.rank] and elapsed > 0:
        t.drift = change / elapsed


def _close_abnormally(status: str) -> None:
    global _status
    with _lock:
        t = _tracer
        if t is None or t.closed:
            return
        _status = status
        # A disk error must not hide the original failure.
        try:
            # First the status (and the error, for a rank that raised) beside the staged
            # records, one small file: sealing them loads pyarrow, seconds on a loaded machine,
            # and a job aborted meanwhile (another rank's MPI_Abort) kills this rank; the sealer
            # then reads how it ended from there (instrument.seal)
            t.mark(status)
        except (Exception, TraceWriteError):
            pass
        try:
            t.close(status)
        except (Exception, TraceWriteError) as exc:
            sys.stderr.write(f"hindsight: rank {t.rank}: could not write trace: {exc}\n")


def program_exited(code) -> None:
    """The program ended with ``sys.exit(code)``, code not 0: the rank's file is closed now,
    while the interpreter still runs (at its exit, writing the file failed), marked `error` with
    ``SystemExit: code``; and the job is aborted, as ``python -m mpi4py`` aborts on a non-zero
    exit status, since the other ranks may be waiting for this one."""
    if _tracer is not None:
        _tracer.error = f"SystemExit: {code}"
    _close_abnormally("error")
    if MPI.Is_initialized() and not MPI.Is_finalized() and MPI.COMM_WORLD.Get_size() > 1:
        MPI.COMM_WORLD.Abort(code if isinstance(code, int) and 0 < code < 256 else 1)


def _mark_write_error() -> None:
    """Leave status `write-error` beside the staged records if the disk still takes a small file."""
    global _status
    with _lock:
        _status = "write-error"
        if _tracer is not None:
            _tracer.closed = True
            try:
                _tracer.mark("write-error")
            except OSError:
                pass


def _flush_on_signal() -> None:
    """Leave the rank's status beside its staged records (they are in the kernel's pages of the
    staging file already), wait a moment, exit.

    Sealing is left to `hindsight collect` (or `trace seal`): when one rank exits, mpiexec kills
    the others at once, so each rank does the least work that makes its data safe, then waits a
    moment so that ranks signalled together all get that far before the first one exits. The
    tracer stays open: the program runs on in the main thread meanwhile, and may still record.
    """
    global _status
    with _lock:
        t = _tracer
        if t is None or t.closed:
            return
        _status = "terminated"
        try:
            t.mark("terminated")
        except (Exception, TraceWriteError) as exc:
            sys.stderr.write(f"hindsight: rank {t.rank}: could not write trace: {exc}\n")
    time.sleep(SIGNAL_GRACE_S)


def _install_exit_paths(signals: bool = True) -> None:
    """Exits that skip `finish`: the rank's file is written, marked by how it ended; a rank that
    raises aborts the job. With `signals` (a traced run), SIGTERM/SIGINT save the status too."""
    atexit.register(lambda: _close_abnormally(_status if _status != "running" else "exited"))

    previous_hook = sys.excepthook

    def hook(exc_type, exc, tb):
        if issubclass(exc_type, TraceWriteError):
            # Disk full or output directory gone: stop the run with one line, no traceback. The
            # records already written stay readable; the trace is marked incomplete, never complete.
            sys.stderr.write(f"hindsight: {exc}; stopping the run (the trace stays incomplete)\n")
            _mark_write_error()
        else:
            if _tracer is not None:
                # Into the rank file's metadata; the manifest gathers them (rank_errors).
                _tracer.error = f"{exc_type.__name__}: {exc}"[:2000]
            _close_abnormally("error")
            previous_hook(exc_type, exc, tb)
        # The other ranks may be blocked waiting for this one and MPI_Finalize would wait for
        # them: abort the job, as `python -m mpi4py` does, instead of hanging until killed.
        if MPI.Is_initialized() and not MPI.Is_finalized() and MPI.COMM_WORLD.Get_size() > 1:
            MPI.COMM_WORLD.Abort(1)
    sys.excepthook = hook
    if not signals:
        return

    exit_on_signals(_flush_on_signal)
