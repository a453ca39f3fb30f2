"""`hindsight collect`: launch a traced MPI run with the MPI that ships in this environment."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from hindsight import trace as tf
from hindsight.system import dying_with_us, git_revision, usable_cores
from hindsight.errors import UsageError, UserError
from hindsight.programs import imports_instrument, not_executable, not_python

#: Environment that selects a network in MPICH (see ../shared/NOTES.md and docs/cli.md).
TRANSPORTS: dict[str, dict[str, str]] = {
    "shm": {},
    "tcp": {"MPIR_CVAR_NOLOCAL": "1", "FI_PROVIDER": "tcp", "MPIR_CVAR_CH4_NETMOD": "ofi"},
}


class CollectError(UserError):
    """A run that cannot be made or finished (no MPI, no trace written, a full disk): exit 1."""


class CollectUsageError(UsageError, CollectError):
    """A flag of `hindsight collect` given a value it cannot take (exit 2); still a
    CollectError, so callers that launch through this module catch one class."""


#: what mpiexec (hydra) prints on stdout when it forwards a SIGINT: launcher chatter about the
#: Ctrl-C that `collect` handles itself, not output of the program
_LAUNCHER_CHATTER = (b"Sending Ctrl-C to processes as requested",
                     b"Press Ctrl-C again to force abort")
#: the lines hydra prints after its box "BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES"
#: when a rank died of a signal (mpiexec.c: "YOUR APPLICATION TERMINATED WITH THE EXIT STRING:
#: <signal> (signal N)" and two lines of advice)
_BAD_TERMINATION_TAIL = (b"YOUR APPLICATION TERMINATED WITH THE EXIT STRING: ",
                         b"This typically refers to a problem with your application.",
                         b"Please see the FAQ page for debugging suggestions")


def _is_rule(text: bytes) -> bool:
    """A line of hydra's box: '=' only (83 of them in MPICH 4)."""
    return len(text) >= 20 and text.strip(b"=") == b""


def find_mpiexec() -> str:
    """The mpiexec next to this Python (the `mpich` wheel's), else the one on PATH."""
    here = Path(sys.executable).parent / "mpiexec"
    if here.exists():
        return str(here)
    found = shutil.which("mpiexec")
    if not found:
        raise CollectError("no mpiexec found: install the project (make test) or put an MPI "
                           "launcher on PATH")
    return found




def launch_env(nprocs: int, transport: str = "shm", cpu_sampling: str = "regions") -> dict:
    import hindsight
    env = {k: v for k, v in os.environ.items() if k not in hindsight.ENV_ADDED}
    if transport not in TRANSPORTS:
        raise CollectUsageError(f"--transport must be one of {', '.join(TRANSPORTS)}, "
                                f"not {transport!r}")
    env.update(TRANSPORTS[transport])
    env["HINDSIGHT_CPU_SAMPLING"] = cpu_sampling
    env["HINDSIGHT_LAUNCHER"] = "hindsight collect"
    env["HINDSIGHT_TRANSPORT"] = transport
    rev = git_revision()
    if rev:
        env["HINDSIGHT_GIT_REVISION"] = rev
    if nprocs > usable_cores():
        # Oversubscribed: waiting ranks would spin on the cores the working ranks need. MPICH's
        # ch4 throttle makes an idle progress loop sleep (usleep(1) after every empty poll): measured
        # here, a rank waiting 2 s in MPI_Recv burnt 1.99 s of CPU by default and 1.01 s with it.
        env.setdefault("MPIR_CVAR_CH4_PROGRESS_THROTTLE", "1")
        env.setdefault("MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT", "1")
    # The project's packages must be importable by the ranks wherever the user stands.
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


#: who records a program's MPI calls (`collect --recorder`): the mpi4py tracer in Python
#: (instrument/comm.py ...), or the PMPI library below mpi4py (instrument/pmpi, docs/native.md);
#: "auto" picks one of them (`resolve_recorder`)
RECORDERS = ("auto", "python", "pmpi")


def resolve_recorder(program: str | None, recorder: str = "auto") -> str:
    """The recorder ``"auto"`` stands for: the PMPI library for a Python program, because its
    few hundred ns a call leave a program's speed as it is where the Python tracer's 2-8 µs a
    call slow a program that calls MPI every few tens of µs by 10-40 % (README, "What is traced,
    and what it costs"); the Python tracer for an application and for a program that imports
    ``instrument`` (its regions are recorded by the Python tracer only). A compiled program is
    recorded by the library whatever this says (`by_library`). Other values are returned as
    they are."""
    if recorder != "auto":
        return recorder
    if program is None or imports_instrument(program):
        return "python"
    return "pmpi"


def by_library(program: str | None, recorder: str = "auto") -> bool:
    """Whether the runs of `program` go through the PMPI library: a compiled program always, a
    Python program whose recorder resolves to ``"pmpi"`` (`resolve_recorder`); traced or not (an untraced run loads the library
    with recording off, as a compiled program's does, so that the tracing perturbation measures
    the recording, not the library's presence in the process)."""
    if program is None:
        return False
    from instrument import native
    return native.is_native(program) or resolve_recorder(program, recorder) == "pmpi"


def plain_untraced(program: str | None) -> bool:
    """Whether the untraced runs of `program` run it as the user does, `python prog.py`
    (`instrument.native.plain_command`): a Python program that does not import ``instrument``,
    whichever recorder its traced runs have. Its ground truth is then the program itself, with
    nothing of hindsight loaded but the preloaded library, recording off (docs/native.md)."""
    if program is None:
        return False
    from instrument import native
    return not native.is_native(program) and not imports_instrument(program)


def checked_recorder(program: str | None, recorder: str) -> str:
    """``recorder`` (``collect --recorder``) checked and resolved (`resolve_recorder`), once per
    run: the program's source is parsed here, not again by `build_command` or `by_library`."""
    if recorder not in RECORDERS:
        raise CollectUsageError(f"--recorder must be one of {', '.join(RECORDERS)}, "
                                f"not {recorder!r}")
    if program is not None and Path(program).is_file():
        from instrument import native
        if native.is_native(program):
            if recorder == "python":
                raise CollectUsageError(f"--recorder python: {program} is a compiled program, "
                                        "which the PMPI library records (leave --recorder out)")
            problem = not_executable(Path(program))
            if problem:
                raise CollectUsageError(f"--program {program}: {problem}")
        else:
            problem = not_python(Path(program))
            if problem:
                raise CollectUsageError(f"--program {program}: {problem}")
    if recorder == "pmpi" and program is not None and imports_instrument(program):
        raise CollectUsageError(f"--recorder pmpi: {program} imports instrument, whose regions "
                                "only the Python tracer records: use --recorder python (or "
                                "auto)")
    return resolve_recorder(program, recorder)


def build_command(nprocs: int, out: Path, app: str | None, paradigm: str | None,
                  program: str | None, args: list[str], recorder: str = "python",
                  plain: bool = False) -> list[str]:
    """The job's command line; ``recorder`` as `checked_recorder` resolved it; ``plain``: the
    untraced run of a Python program (`plain_untraced`), the program alone."""
    if nprocs < 1:
        raise CollectUsageError(f"-n must be at least 1, not {nprocs}")
    launcher = [find_mpiexec(), "-n", str(nprocs)]
    py = sys.executable
    if program is not None:
        if not Path(program).is_file():
            raise CollectUsageError(f"--program: no such file: {program}")
        from instrument import native
        if native.is_native(program):       # a compiled program: traced through PMPI
            return launcher + native.command(nprocs, program, args)[3:]
        if plain:
            return launcher + native.plain_command(program, args)
        via = ["--recorder", "pmpi"] if recorder == "pmpi" else []
        return launcher + [py, "-m", "instrument.run", "--trace", str(out)] + via + \
            (["--paradigm", paradigm] if paradigm else []) + [program] + list(args)
    if recorder != "python":
        raise CollectUsageError("--recorder pmpi is for a --program: an application records "
                                "its calls through instrument's Python API")
    if app is None:
        raise CollectUsageError("name an application (feature_extraction, sorting, components) "
                           "or give --program prog.py")
    _check_app(app, paradigm)
    cmd = launcher + [py, "-m", f"apps.{app}", "--trace", str(out)]
    if paradigm:
        cmd += ["--paradigm", paradigm]
    return cmd + list(args)


def _check_app(app: str, paradigm: str | None) -> None:
    from apps import APPS  # the registry of applications and their paradigms (imports no MPI)

    if app not in APPS:
        raise CollectUsageError(f"unknown application {app!r}; choose from "
                                f"{', '.join(sorted(APPS))}, or trace a program of your own "
                                f"with --program (collect -n P --program {app} ...)")
    if paradigm and paradigm not in APPS[app]:
        raise CollectUsageError(f"application {app!r} does not run on paradigm {paradigm!r}; "
                           f"choose from {', '.join(APPS[app])}")


def testbed_state(testbed: str) -> dict:
    """The state of testbed ``testbed`` (``--testbed``), which must be up: else a CollectError,
    a CollectUsageError for a name no testbed can have (collect's and calibrate's)."""
    from hindsight import testbed as tb

    try:
        return tb.require_up(testbed)
    except tb.TestbedFlagError as exc:
        raise CollectUsageError(str(exc)) from None
    except tb.TestbedError as exc:
        raise CollectError(str(exc)) from None


def testbed_launch(cmd: list[str], env: dict, nprocs: int, testbed: str,
                   placement: str = "block") -> tuple[list[str], dict, dict, dict]:
    """Turn an `mpiexec -n P PROGRAM` line into one that starts each rank inside its testbed
    node with MPI on TCP over the node's veth. Returns (command, env, state, network record)."""
    from hindsight import testbed as tb

    state = testbed_state(testbed)
    launcher, program = cmd[:3], cmd[3:]            # [mpiexec, -n, P] + the rank's command
    env = dict(env, **tb.TESTBED_ENV)
    env["HINDSIGHT_TRANSPORT"] = f"testbed:{testbed}"
    return (tb.mpmd_command(launcher[:1] + launcher[3:], program, state, nprocs, placement), env,
            state, tb.network_record(state, nprocs, placement))


def sigterm_interrupts():
    """Make SIGTERM raise KeyboardInterrupt in this (main) thread; returns the old handler, or
    None where handlers cannot be set (not the main thread)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum, frame):
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, handler)


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children first found by their parent in /proc). mpiexec's
    proxy and the ranks each start a session of their own, so a signal to mpiexec's process group
    does not reach them; only mpiexec forwards it."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def stop_job(proc: subprocess.Popen, sig: int, grace: float = 10.0) -> None:
    """Stop the job in ``proc``: ``sig`` to mpiexec (it forwards it; the ranks save what they
    buffered), and if the job has not ended after ``grace`` seconds, SIGTERM and then SIGKILL to
    mpiexec *and every process below it*. Never waits without a limit and leaves no rank behind:
    seen once, ranks that never acted on a forwarded SIGINT kept `hindsight collect` waiting and,
    mpiexec gone, would have run on as orphans; so whatever ran below mpiexec when it was told to
    stop and still runs once it has ended is killed too."""
    below = _started(_descendants(proc.pid))
    for s in (sig, signal.SIGTERM, signal.SIGKILL):
        targets = [] if s == sig else _descendants(proc.pid)
        for pid in targets:
            try:
                os.kill(pid, s)
            except ProcessLookupError:
                pass
        try:
            os.killpg(proc.pid, s)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=grace)
            break
        except subprocess.TimeoutExpired:
            continue
    for pid, started in below.items():
        if _started([pid]).get(pid) == started:      # the same process, not a reused pid
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _started(pids: list[int]) -> dict[int, int]:
    """pid -> its start time (clock ticks since boot), for the pids still running."""
    out = {}
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            out[pid] = int(stat.rsplit(")", 1)[1].split()[19])
        except (OSError, ValueError, IndexError):
            continue
    return out


#: how long, after the launcher has returned, `collect` waits for a rank's staged records that
#: a process still holds (a rank killed by an abort that has not yet released its files, or
#: one sealing its own) before sealing them (instrument.seal.finalize_manifest)
SETTLE_S = 10.0

#: collect's exit code when its --timeout stopped the job (as `timeout(1)`), and when Ctrl-C or
#: SIGTERM did (128 + SIGINT, as a shell reports a job stopped by Ctrl-C)
TIMED_OUT, INTERRUPTED = 124, 130


def _relay(pipe, sink, stopping=None) -> None:
    """Copy the job's stdout (the ranks' output, through mpiexec) to ``sink`` line by line,
    leaving out mpiexec's own lines about the Ctrl-C that collect forwards, and, once
    ``stopping`` (a threading.Event) is set because collect stops the job, mpiexec's report of
    the ranks that stop killed: the blank line and '='-ruled box "BAD TERMINATION OF ONE OF YOUR
    APPLICATION PROCESSES", and the lines after it (_BAD_TERMINATION_TAIL). Collect says itself
    that and why it stopped the job; a job that fails on its own keeps mpiexec's report."""
    in_box, blank = False, None        # blank: a blank line held until the next shows a box

    def write(line: bytes) -> None:
        try:
            sink.write(line.decode(errors="replace"))
            sink.flush()
        except (OSError, ValueError):
            pass                         # our stdout closed: keep draining the pipe

    for line in iter(pipe.readline, b""):
        if any(c in line for c in _LAUNCHER_CHATTER):
            continue
        if stopping is not None and stopping.is_set():
            text = line.rstrip(b"\r\n")
            if _is_rule(text):          # the box's first or last line
                in_box, blank = not in_box, None
                continue
            if in_box:
                continue
            if text.startswith(_BAD_TERMINATION_TAIL):
                continue
            if not text.strip():
                if blank is not None:
                    write(blank)
                blank = line
                continue
        if blank is not None:
            write(blank)
            blank = None
        write(line)
    if blank is not None:
        write(blank)
    pipe.close()


def _run_job(cmd: list[str], env: dict, timeout: float | None,
             quiet: bool, out: Path | None = None) -> tuple[int, bool]:
    """Run the job to its end; return (its exit code, whether --timeout stopped it).

    --timeout or a SIGINT / SIGTERM to collect stops the job (``stop_job``): exit code
    TIMED_OUT or INTERRUPTED. Before that, the ranks tracing into ``out`` are asked where they
    are (instrument.stopped; the sealer records it). From then on, until the caller calls
    ``restore_signals``, further signals are ignored, so a second Ctrl-C cannot leave the ranks
    running or the trace unsealed."""
    import threading

    # A session of its own, so a timeout can stop mpiexec and every rank together (and Ctrl-C
    # on the terminal reaches collect only, which forwards it).
    # (and mpiexec is told to stop if collect is killed outright: ``dying_with_us``)
    proc = subprocess.Popen(dying_with_us(cmd), env=env,
                            stdout=subprocess.DEVNULL if quiet else subprocess.PIPE,
                            start_new_session=True)
    # SIGTERM to `hindsight collect` itself (a batch system, `timeout`) stops the job like Ctrl-C,
    # instead of killing collect alone and leaving mpiexec and the ranks running.
    old_term = sigterm_interrupts()
    relay, timed_out, stopping = None, False, threading.Event()
    try:
        if proc.stdout is not None:
            relay = threading.Thread(target=_relay, args=(proc.stdout, sys.stdout, stopping),
                                     daemon=True)
            relay.start()
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        ignore_signals()
        stopping.set()
        _ask_where(proc, out)
        stop_job(proc, signal.SIGTERM)
        rc, timed_out = TIMED_OUT, True
    except KeyboardInterrupt:
        ignore_signals()
        stopping.set()
        _ask_where(proc, out)
        stop_job(proc, signal.SIGINT)
        rc = INTERRUPTED
    finally:
        if old_term is not None:
            if signal.SIGTERM in _SAVED_HANDLERS:
                _SAVED_HANDLERS[signal.SIGTERM] = old_term    # restored with SIGINT's
            else:
                signal.signal(signal.SIGTERM, old_term)
    if relay is not None:
        # A rank that outlived mpiexec may hold the pipe open: do not wait for it for long.
        relay.join(timeout=5)
    return rc, timed_out


def _ask_where(proc: subprocess.Popen, out: Path | None) -> None:
    """Ask the job's ranks where they are before they are stopped (instrument.stopped): only
    processes below mpiexec that wrote their pid into ``out``'s staging area are signalled."""
    if out is None:
        return
    from instrument import stopped

    stopped.request(out, set(_descendants(proc.pid)))


_SAVED_HANDLERS: dict[int, Any] = {}


def ignore_signals() -> None:
    """Ignore SIGINT and SIGTERM (main thread only) until ``restore_signals``: the job is being
    stopped and sealed, which a second Ctrl-C must not cut short."""
    import threading

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            _SAVED_HANDLERS.setdefault(sig, signal.signal(sig, signal.SIG_IGN))


def restore_signals() -> None:
    while _SAVED_HANDLERS:
        sig, handler = _SAVED_HANDLERS.popitem()
        signal.signal(sig, handler)


def collect(nprocs: int, out: Path, app: str | None = None, paradigm: str | None = None,
            program: str | None = None, args: list[str] = (), transport: str = "shm",
            cpu_sampling: str = "regions", timeout: float | None = None,
            quiet: bool = False, testbed: str | None = None,
            untraced: bool = False, recorder: str = "auto") -> tuple[int, dict]:
    """Run the job under mpiexec and return (exit code, final manifest).

    With ``testbed`` (the name of a testbed that is up, docs/testbed.md) the ranks run inside its
    nodes, MPI over TCP through the rate-limited veth links; ``transport`` is then ignored.
    With ``untraced`` the run is launched the same way but records nothing: ``out`` receives a
    manifest with ``traced: false`` and the run's wall time (``makespan_ns``) only.
    ``recorder`` says who records a Python program's MPI calls: ``"pmpi"`` the PMPI library,
    whose untraced runs then load the library with recording off (`by_library`), ``"python"``
    the Python tracer, ``"auto"`` one of them (`resolve_recorder`)."""
    if cpu_sampling not in ("regions", "all"):
        raise CollectUsageError(f"--cpu-sampling must be 'regions' or 'all', not {cpu_sampling!r}")
    out = Path(out)
    recorder = checked_recorder(program, recorder)
    if testbed:     # one that is down is said before anything is written at ``out``
        testbed_state(testbed)
    plain = untraced and plain_untraced(program)
    cmd = build_command(nprocs, out, app, paradigm, program, list(args), recorder, plain)
    env = launch_env(nprocs, "tcp" if testbed else transport, cpu_sampling)
    library = plain or by_library(program, recorder)
    problem = tf.trace_dir_problem(out)
    if problem:                     # said once here, not by every rank after mpiexec starts
        raise CollectError(problem)
    if library:     # the run's start (and the clearing of an earlier run) is written here
        from instrument import native
        env.update(native.prepare(out, nprocs, program, list(args), env, untraced, plain))
    network = {"transport": transport, "testbed": None, "nodes": 1, "ranks_per_node": [nprocs]}
    state = before = None
    if testbed:
        from hindsight import testbed as tb

        cmd, env, state, network = testbed_launch(cmd, env, nprocs, testbed)
        before = tb.counters(state)
    if untraced:
        # Read by instrument.start in every rank: same launch, same start barrier, no recording.
        env["HINDSIGHT_UNTRACED"] = "1"
        # What an earlier run left here must not pass for this run's result if this one dies
        # before rank 0 writes its manifest.
        if out.is_dir() and not library:
            tf.clear_run(out)
    try:
        rc, timed_out = _run_job(cmd, env, timeout, quiet, None if untraced else out)
        stopped = {"timed_out_after_s": timeout} if timed_out else {}
        return _finish(out, rc, stopped, nprocs, network, state, before, app, paradigm,
                       program, args, untraced, library)
    finally:
        restore_signals()


def _finish(out: Path, rc: int, stopped: dict, nprocs: int, network: dict, state,
            before, app: str | None, paradigm: str | None, program: str | None,
            args: list[str], untraced: bool, library: bool = False) -> tuple[int, dict]:
    """Seal the run that ended with ``rc`` and return (rc, its final manifest); ``stopped`` goes
    into the manifest (the --timeout that stopped it); ``library``: the ranks ran with the PMPI
    library (`by_library`), whose ends `native.finish` gathers."""
    from instrument.seal import finalize_manifest
    from instrument.tracer import TraceWriteError

    if state is not None:
        from hindsight import testbed as tb


        # Evidence that the ranks' bytes went through the shaped links: the kernel's counters.
        try:
            network["veth_bytes"] = tb.counters_delta(before, tb.counters(state))
        except tb.TestbedError:
            network["veth_bytes"] = None          # the testbed went down during the run
    if untraced:
        if library and (out / tf.STAGING_DIR / "start.json").is_file():
            from instrument import native
            native.finish(out)          # the ranks' ends, into the manifest of the untraced run
        manifest = _finish_untraced(out, rc, nprocs, network, app, paradigm, program, args,
                                    stopped)
        return rc, manifest
    refused = out / tf.STAGING_DIR / "refused.txt"
    if rc != 0 and refused.is_file():   # the tracer refused the program at start-up, and why
        raise CollectError(refused.read_text().strip().splitlines()[0])
    if library and (out / tf.STAGING_DIR / "start.json").is_file():
        from instrument import native
        native.finish(out)
    if not (out / tf.MANIFEST_NAME).is_file() and not (out / tf.STAGING_DIR / "start.json").is_file():
        raise CollectError(f"the run wrote no trace in {out} (mpiexec exit code {rc})")
    manifest = tf.read_manifest(out) if (out / tf.MANIFEST_NAME).is_file() else {}
    if rc != 0 or not manifest.get("complete"):
        try:
            manifest = finalize_manifest(out, launcher_exit=rc,
                                         extra={"network": network, **stopped},
                                         settle_s=SETTLE_S)
        except (OSError, TraceWriteError) as exc:
            # Disk full or directory unwritable: the staged records stay, the manifest stays
            # "incomplete"; nothing half-written is presented as a trace (docs/robustness.md).
            raise CollectError(f"{out}: cannot finish the trace ({exc}){_full_disk(out)}; its "
                               f"staged records stay in {out / tf.STAGING_DIR}: make room, then "
                               f"`hindsight trace seal {out}` (mpiexec exit code {rc})") from None
    else:
        manifest["network"] = network
        tf.write_manifest(out, manifest)
    return rc, manifest


def _finish_untraced(out: Path, rc: int, nprocs: int, network: dict, app: str | None,
                     paradigm: str | None, program: str | None, args: list[str],
                     stopped: dict | None = None) -> dict:
    """The final manifest of an untraced run. There are no rank files to seal: rank 0's manifest
    is the record, corrected by the launcher's verdict; when the ranks wrote none (a rank died
    before the start barrier, rank 0 before the end), one is written that says the run is
    incomplete, so a failed run is never mistaken for a measured one."""
    manifest: dict[str, Any] = {}
    if (out / tf.MANIFEST_NAME).is_file():
        try:
            manifest = tf.read_manifest(out)
        except tf.TraceError:
            manifest = {}                   # half-written or foreign: replaced below
    if manifest.get("traced") is not False:
        manifest = {"format_version": tf.FORMAT_VERSION, "run_id": secrets.token_hex(8),
                    "app": app or (Path(program).name if program else None),
                    "paradigm": paradigm, "args": {"argv": list(args)},
                    "program": str(Path(program).resolve()) if program else None,
                    "ranks": nprocs, "rank_status": ["missing"] * nprocs,
                    "makespan_ns": None, "complete": False}
    manifest["traced"] = False
    manifest["launcher_exit_code"] = rc
    if rc != 0:
        manifest["complete"] = False
    if not manifest.get("complete"):
        status = manifest.get("rank_status") or ["missing"] * nprocs
        # A rank that never reported its end did not finish; how it ended only mpiexec knew.
        manifest["rank_status"] = [s if s == "complete" else
                                   ("terminated" if rc in (TIMED_OUT, INTERRUPTED)
                                    else "missing")
                                   for s in status]
    manifest["network"] = network
    manifest.update(stopped or {})
    # The ranks prepare the folder as for a trace; an untraced run leaves nothing staged there.
    shutil.rmtree(out / tf.STAGING_DIR, ignore_errors=True)
    try:
        out.mkdir(parents=True, exist_ok=True)
        tf.write_manifest(out, manifest)
    except OSError as exc:
        raise CollectError(f"{out}: cannot write the manifest of the untraced run "
                           f"({exc.strerror or exc}; mpiexec exit code {rc})") from None
    return manifest


def _full_disk(out: Path) -> str:
    """``; its file system is full (12 KiB free)`` when it has less than 1 MiB free, else ""
    (a rank's own ENOSPC line scrolls by above the last one, which names another symptom)."""
    try:
        st = os.statvfs(out)
    except OSError:
        return ""
    free = st.f_bavail * st.f_frsize
    return f"; its file system is full ({free // 1024} KiB free)" if free < 1 << 20 else ""
