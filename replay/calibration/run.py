"""`hindsight calibrate` as a library: launch the micro-benchmark, verify the transport, fit,
build the profile. The MPI job is launched exactly like `hindsight collect` does
(``find_mpiexec`` + ``launch_env``), so a trace and its profile run on the same network."""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

import numpy as np

from hindsight import conditions
from hindsight.collect import (TRANSPORTS, CollectError, find_mpiexec, ignore_signals,
                               launch_env, restore_signals, sigterm_interrupts, stop_job,
                               testbed_state)
from hindsight.system import dying_with_us, git_revision, usable_cores
from replay import units
from replay.calibration import fit as F
from replay.calibration import quality as Q
from replay.calibration.binding import fit_binding
from replay.calibration.native import native_probe
from replay.calibration.tracer import tracer_probe
from replay.calibration.reduction import fit_reduction
from replay.calibration.flags import fit_flags
from replay.calibration.progress import PREFIX as PROGRESS_PREFIX, SizeProgress
from replay.profile import FORMAT
from hindsight.errors import UsageError, UserError

DEFAULT_SIZES = "1B..16MiB"
#: seconds a benchmark run may go without a step forward before it is stopped (run_job)
STALL_TIMEOUT_S = 300.0
#: sizes (bytes) whose overheads give o' at each rank count: small, eager on every transport here
SMALL = (1, 8, 64, 512)


class CalibrationUsageError(UsageError):
    """A calibrate flag with an impossible value (exit 2); the message names the flag."""


class CalibrationError(UserError):
    """A problem the user can fix or must know about (bad flag, failed run, wrong transport)."""


class NoQuietMeasurement(CalibrationError):
    """Every attempt failed the quality checks and a noisy profile was not asked for;
    ``failed`` says why each attempt failed ("attempt k: ...")."""

    def __init__(self, failed: list[str]):
        self.failed = failed
        super().__init__(f"no quiet measurement in {len(failed)} attempt"
                         f"{'s' * (len(failed) > 1)}: {'; '.join(failed)}")


def parse_sizes(spec: str) -> list[int]:
    """``LO..HI`` (LO times the powers of two up to HI, and HI itself: ``1..4MB`` ends at
    4 000 000 bytes, not at 2 MiB), ``LO..HI:F`` (factor F) or ``a,b,c``; units as in
    replay.units (``1B``, ``64KiB``, ``16MiB``)."""
    try:
        if ".." in spec:
            lo_s, rest = spec.split("..", 1)
            hi_s, _, f_s = rest.partition(":")
            lo, hi = units.parse_bytes(lo_s), units.parse_bytes(hi_s)
            factor = int(f_s) if f_s else 2
            if lo < 1 or hi < lo or factor < 2 or not math.isfinite(hi):
                raise ValueError("need 1 <= LO <= HI and a factor >= 2")
            out, k = [], int(lo)
            while k <= hi:
                out.append(k)
                k *= factor
            if out[-1] != int(hi):
                # the size asked for is measured, not one below it; a step closer than 1.25x
                # to it is replaced by it (1..1025: 512, 1025, not 1024, 1025)
                if len(out) > 1 and hi < 1.25 * out[-1]:
                    out.pop()
                out.append(int(hi))
        else:
            out = sorted({int(units.parse_bytes(s)) for s in spec.split(",") if s.strip()})
    except ValueError as exc:
        raise CalibrationUsageError(f"--sizes {spec!r}: {exc}") from None
    if len(out) < 4 or out[0] < 1:
        raise CalibrationUsageError(f"--sizes {spec!r}: need at least 4 sizes of at least 1 byte")
    return out


def run_bench(nprocs: int, transport: str, sizes: list[int], repeat: int,
              overhead_only: bool = False, timeout: float = STALL_TIMEOUT_S,
              testbed: str | None = None, api: str = "buffer",
              progress: Callable[[str], None] | None = None,
              every_s: float | None = None) -> tuple[dict, str]:
    """One mpiexec run of ``replay.calibration.bench``; returns (its JSON, MPICH's stdout).

    ``progress`` gets a line about the sizes measured and the time the others need at most
    every ``every_s`` seconds (replay.calibration.progress); a run that takes no step forward
    (a size visited, a probe begun) for ``timeout`` seconds is stopped with an error that says
    where it was (``run_job``'s watchdog)."""
    env, command = bench_job(nprocs, transport, testbed)
    with tempfile.TemporaryDirectory(prefix="hindsight-calibrate-") as tmp:
        out = Path(tmp) / "bench.json"
        program = [sys.executable, "-m", "replay.calibration.bench",
                   "--sizes", ",".join(map(str, sizes)), "--repeat", str(repeat), "--api", api,
                   "--out", str(out)]
        if overhead_only:
            program.append("--overhead-only")
        stdout, stderr, rc = run_job(command(program), env, timeout,
                                     f"the benchmark at -n {nprocs}",
                                     SizeProgress(progress or (lambda m: None), every_s))
        if rc != 0 or not out.is_file():
            last = (stderr.strip().splitlines() or ["no output"])[-1]
            raise CalibrationError(f"the benchmark at -n {nprocs} failed (exit code "
                                   f"{rc}): {last}")
        data = json.loads(out.read_text())
    if "error" in data:
        raise CalibrationError(data["error"])
    return data, stdout


def bench_job(nprocs: int, transport: str, testbed: str | None
              ) -> tuple[dict, Callable[[list[str]], list[str]]]:
    """The environment of a calibration job on ``nprocs`` ranks and the launch command of a
    program in it (its argv in, the mpiexec line out), on ``transport`` or the testbed's nodes."""
    try:
        env = launch_env(nprocs, transport)
        mpiexec = find_mpiexec()
    except CollectError as exc:
        raise CalibrationError(str(exc)) from None
    state = None
    if testbed:
        from hindsight import testbed as tb

        state = testbed_state(testbed)
        env.update(tb.TESTBED_ENV)
        env["HINDSIGHT_TRANSPORT"] = f"testbed:{testbed}"
        env["HINDSIGHT_PROBE_IFACE"] = tb.NODE_DEV
    env["HINDSIGHT_LAUNCHER"] = "hindsight calibrate"
    # MPICH prints the netmod/provider it chose at MPI_Init: part of the transport evidence.
    env["MPIR_CVAR_DEBUG_SUMMARY"] = "1"

    def command(program: list[str]) -> list[str]:
        if state is not None:
            # Cyclic placement: ranks 0 and 1 (the ping-pong pair) always on different nodes.
            return tb.mpmd_command([mpiexec, "-bind-to", "core"], program, state, nprocs,
                                   "cyclic")
        return bench_command(mpiexec, nprocs, program, bind=not oversubscribed(nprocs))
    return env, command


def oversubscribed(nprocs: int) -> bool:
    """More ranks than this machine has usable cores."""
    cores = usable_cores()
    return bool(cores) and nprocs > cores


def bench_command(mpiexec: str, nprocs: int, program: list[str], bind: bool) -> list[str]:
    """The mpiexec line of one benchmark run. With ``bind``, one core per rank (round-robin):
    two communicating ranks sharing a core would measure the scheduler (each hop a context
    switch, ~1 ms seen here), not the network. Oversubscribed, binding is left out: hydra's
    ``-bind-to core`` with more ranks than cores was seen to hang."""
    return [mpiexec] + (["-bind-to", "core"] if bind else []) + ["-n", str(nprocs)] + program


def run_job(cmd: list[str], env: dict, timeout: float, what: str,
            progress: SizeProgress | None = None) -> tuple[str, str, int]:
    """Run an MPI job in a session of its own and return (stdout, stderr, exit code); the
    benchmark's progress lines on stderr go to ``progress`` as they come, not into the returned
    stderr.

    ``timeout`` is a watchdog: the job is stopped once ``timeout`` seconds passed since its last
    step forward (``progress.last_step``; without ``progress``, since its start), so a slow run
    that keeps stepping forward is never stopped and a hung one is, ``timeout`` seconds after
    its last step. There is no cap on the whole run: its steps are a fixed number (the visits of
    its plan and four probes, each counted once), so it ends within (steps + 1) x ``timeout``,
    and a cap would stop exactly the slow runs that are making progress.

    A timeout, Ctrl-C or SIGTERM to this process stops the job, mpiexec and every rank below it
    (``stop_job``), before the error (which says where the benchmark was) or the interrupt goes
    on: calibrate never leaves a benchmark running behind it."""
    # (mpiexec stops the job if this process is killed outright: ``dying_with_us``)
    proc = subprocess.Popen(dying_with_us(cmd), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    kept: dict[str, list[str]] = {"out": [], "err": []}

    def read(pipe, name: str) -> None:
        for line in pipe:
            if name == "err" and progress is not None and line.startswith(PROGRESS_PREFIX):
                progress.line(line)
            else:
                kept[name].append(line)
        pipe.close()

    readers = [threading.Thread(target=read, args=(pipe, name), daemon=True)
               for pipe, name in ((proc.stdout, "out"), (proc.stderr, "err"))]
    for r in readers:
        r.start()
    started = time.monotonic()
    old_term = sigterm_interrupts()
    try:
        while True:
            last = progress.last_step if progress is not None else started
            try:
                proc.wait(timeout=max(0.0, last + timeout - time.monotonic()))
                break
            except subprocess.TimeoutExpired:
                if progress is None or progress.last_step == last:
                    raise
    except subprocess.TimeoutExpired:
        stop_job(proc, signal.SIGTERM, grace=2.0)
        for r in readers:
            r.join(timeout=5)
        where = ""
        if progress is not None:
            where = f" ({progress.where()})"
            if progress.plan and progress.phase is None and progress.done < len(progress.plan):
                where += "; smaller --sizes or a smaller --repeat shorten each size"
        raise CalibrationError(f"{what} made no progress for {timeout:g} s{where}") from None
    except BaseException:
        ignore_signals()        # a second Ctrl-C must not cut the stopping of the job short
        try:
            stop_job(proc, signal.SIGINT, grace=2.0)
        finally:
            restore_signals()
        raise
    finally:
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)
    for r in readers:
        r.join(timeout=5)       # a rank that outlived mpiexec may hold a pipe open
    return "".join(kept["out"]), "".join(kept["err"]), proc.returncode


def summarize(run: dict) -> dict:
    """Per-size medians and interquartile ranges (seconds) of a benchmark run."""
    rows = run["per_size"]
    one = [np.asarray(r["rtt"]) / 2.0 for r in rows]
    q = lambda a: float(np.percentile(a, 75) - np.percentile(a, 25))  # noqa: E731
    out = {"sizes": np.array([r["k"] for r in rows], float),
           "one_way": np.array([np.median(a) for a in one]),
           "spread": np.array([q(a) for a in one]),
           "o_send": np.array([np.median(r["o_send"]) for r in rows]),
           "o_recv": np.array([np.median(r["o_recv"]) for r in rows])}
    gap = run.get("gap")
    if gap:
        out["g"] = (float(np.median(gap["t_n2"])) - float(np.median(gap["t_n1"]))) / \
            (gap["n2"] - gap["n1"])
    return out


def _without_unexpected(lg: F.LogGPSFit, uf: F.UnexpectedFit) -> None:
    """The pickle API's receive is a matched probe, which always takes its message from the
    unexpected list, so its ping-pong's one-way time includes rule ``unexpected_copy``'s
    o_unexpected, which the replay adds to such a receive itself: L is fitted without it
    (bounded below by -o_send, as fit_loggps bounds it), noted. O_unexpected·k is left in L's
    per-size medians (below 0.4 ns/B measured here)."""
    L0 = float(lg.params["L"])
    L = max(L0 - uf.params["o_unexpected"], -max(float(lg.params["o_send"]), 0.0))
    lg.params["L"] = L
    lg.notes.append(f"pickle API: every receive is unexpected (a matched probe), so the "
                    f"one-way time includes o_unexpected: L = {L0:.3g} - {L0 - L:.3g} s")


def o_prime(summary: dict, O: float) -> float:
    """o' at one rank count: the mean send/receive overhead of small messages, O·k removed."""
    k = summary["sizes"]
    sel = np.isin(k, SMALL) if np.isin(k, SMALL).any() else k <= 512
    if not sel.any():
        sel = k == k.min()
    o = 0.5 * (summary["o_send"][sel] + summary["o_recv"][sel]) - O * k[sel]
    return float(np.median(o))


def verify_transport(transport: str, run: dict, stdout: str) -> dict:
    """Evidence that the ranks used ``transport``; raises CalibrationError on a contradiction.

    Three independent checks: MPICH's own parsed MPIR_CVAR_NOLOCAL (MPI_T, inside the
    communicating ranks), the netmod/provider MPICH reports at start-up, and the bytes the kernel
    counted on the loopback interface while 32 MiB went from rank 0 to rank 1.
    """
    wanted = TRANSPORTS[transport]
    problems, evidence = [], []
    infos = run.get("rank_info", [])[:2]
    nolocal = [i.get("cvars", {}).get("MPIR_CVAR_NOLOCAL") for i in infos]
    expect = 1 if wanted.get("MPIR_CVAR_NOLOCAL") == "1" else 0
    if all(isinstance(v, int) for v in nolocal):
        (evidence if all(v == expect for v in nolocal) else problems).append(
            f"MPI_T MPIR_CVAR_NOLOCAL={'/'.join(map(str, nolocal))} on ranks 0/1")
    else:
        evidence.append("MPI_T unavailable (NOLOCAL not read back)")
    for k, v in wanted.items():
        seen = {i.get("env", {}).get(k) for i in infos}
        if seen != {v}:
            problems.append(f"ranks saw {k}={'/'.join(map(str, seen))}, expected {v}")
    provider = re.findall(r"libfabric provider:\s*(\S+)", stdout)
    netmods = re.findall(r"==== (\w+) netmod", stdout)
    if transport == "tcp":
        if provider:
            (evidence if provider[0] == "tcp" else problems).append(
                f"MPICH reports libfabric provider {provider[0]}")
        else:
            problems.append("MPICH did not report a libfabric provider")
    elif netmods or provider:
        evidence.append("MPICH reports netmod " + (netmods[0] if netmods else "ofi")
                        + (f" (provider {provider[0]})" if provider else "")
                        + ", used between nodes only")
    probe = run.get("loopback_probe") or {}
    lo, payload = probe.get("lo_tx_bytes"), probe.get("payload_bytes")
    iface = probe.get("iface", "lo")
    if lo is not None and payload:
        ratio = lo / payload
        text = (f"{'loopback interface' if iface == 'lo' else 'interface ' + iface} carried "
                f"{lo / 1e6:.3g} MB during a {payload / 1e6:.3g} MB transfer")
        if transport == "tcp":
            (evidence if ratio >= 0.9 else problems).append(text)
        else:
            # other users of the machine may use lo too: only a full payload's worth contradicts
            (evidence if ratio < 1.0 else problems).append(text)
    else:
        evidence.append("loopback byte counters unavailable")
    if problems:
        raise CalibrationError(f"transport {transport} not confirmed: " + "; ".join(problems))
    return {"verified": True, "how": "; ".join(evidence), "nolocal": nolocal,
            "provider": provider[0] if provider else None,
            "netmod": netmods[0] if netmods else None, "loopback_probe": probe}


def _network(transport: str, nprocs: int, testbed: str | None) -> dict:
    """The network record of the profile (as the manifest's ``network``)."""
    if not testbed:
        return {"transport": transport, "testbed": "", "nodes": 1, "ranks_per_node": [nprocs]}
    from hindsight import testbed as tb

    return tb.network_record(tb.require_up(testbed), nprocs, "cyclic")


def placement(run: dict) -> list[dict]:
    return [{"rank": i["rank"], "host": i["host"], "cpus_allowed": i.get("cpus_allowed"),
             "last_cpu": i.get("last_cpu")} for i in run.get("rank_info", [])]


def progress_fit(run: dict) -> F.ProgressFit | None:
    """``progress`` from the run's progress probe (None if it has none), with the library's own
    setting of asynchronous progress (MPIR_CVAR_ASYNC_PROGRESS read through MPI_T) as evidence."""
    probe = run.get("progress_probe")
    if not probe:
        return None
    pg = F.fit_progress(probe)
    cvar = ((run.get("rank_info") or [{}])[0].get("cvars") or {}).get("MPIR_CVAR_ASYNC_PROGRESS")
    if cvar is not None:
        pg.evidence["MPIR_CVAR_ASYNC_PROGRESS"] = cvar
    if isinstance(cvar, int) and (cvar != 0) != (pg.progress == "async"):
        pg.notes.append(f"progress {pg.progress!r} measured although MPICH reports "
                        f"MPIR_CVAR_ASYNC_PROGRESS={cvar}")
    return pg


def calibrate(nprocs: int, transport: str = "shm", sizes: str = DEFAULT_SIZES,
              repeat: int = 100, overhead_ranks: list[int] | None = None,
              progress=lambda msg: None, testbed: str | None = None,
              api: str = "buffer", attempts: int = Q.DEFAULT_ATTEMPTS,
              warn=lambda msg: None, accept_noisy: bool = True) -> dict:
    """Measure and fit; returns the profile (a dict in the hindsight-profile/1 layout).

    The main measurement is taken up to ``attempts`` times, until one passes the checks of
    replay.calibration.quality (its fit follows its own medians, the ranks had their cores); the
    profile is the first that passes, else the best (fewest problems) with ``quality = "noisy"``.
    The caller decides whether a noisy profile is written (`profile_problems` says why); without
    ``accept_noisy`` a calibration whose every attempt failed stops there (NoQuietMeasurement):
    each attempt's job ran its probes with its ping-pong; the runs at other rank counts and the
    tracer probe, which come after the attempts, are not run.

    ``api`` is the mpi4py path timed: ``buffer`` (Send/Recv of numpy buffers) or ``pickle`` (what
    a traced application's send/recv of Python objects costs inside its calls; bench.py).

    With ``testbed`` the ranks run in the testbed's nodes (cyclic placement), MPI over TCP
    through the shaped veth links; ``transport`` is then tcp.

    ``progress`` gets one line per phase (with the time it is expected to take once a first
    measurement has shown it) and, during a benchmark run, a line on the message sizes measured
    and the time the others need at most every ``progress.EVERY_S`` seconds; ``warn`` gets what
    makes the profile less trustworthy."""
    if testbed:
        transport = "tcp"
    if nprocs < 2:
        raise CalibrationUsageError(f"-n must be at least 2 (two ranks exchange messages), "
                                    f"not {nprocs}")
    if transport not in TRANSPORTS:
        raise CalibrationUsageError(f"--transport must be one of {', '.join(TRANSPORTS)}, "
                               f"not {transport!r}")
    if api not in ("buffer", "pickle"):
        raise CalibrationUsageError(f"--api must be buffer or pickle, not {api!r}")
    if repeat < 10:
        raise CalibrationUsageError(f"--repeat must be at least 10 (medians), not {repeat}")
    if attempts < 1:
        raise CalibrationUsageError(f"--attempts must be at least 1, not {attempts}")
    ks = parse_sizes(sizes)
    if testbed:
        testbed_state(testbed)      # (said before the first progress line, not after it)
    if overhead_ranks is None:
        overhead_ranks = [nprocs, 3 if nprocs == 2 else 2]
        cores = usable_cores()
        if not testbed and cores and max(overhead_ranks) > cores:
            # More ranks than cores measures the scheduler (an idle rank polls in MPI_Barrier on
            # a communicating rank's core), not o_b: keep the rank counts that fit.
            fit = [p for p in overhead_ranks if p <= cores]
            progress(f"{cores} cores: o_b not measured at {max(overhead_ranks)} ranks "
                     "(oversubscribed); pass --overhead-ranks to force it")
            overhead_ranks = fit or [nprocs]
    if any(p < 2 for p in overhead_ranks):
        raise CalibrationUsageError("--overhead-ranks: every rank count must be at least 2")
    over = sorted(p for p in {nprocs, *overhead_ranks} if oversubscribed(p))
    if over and not testbed:
        warn(f"{usable_cores()} usable cores, {'/'.join(map(str, over))} ranks: ranks are not "
             "bound to cores (oversubscribed), so ranks share cores and the overheads measured "
             "include the scheduler's")
    best, failed, took = None, [], None
    for attempt in range(1, attempts + 1):
        progress(f"attempt {attempt}/{attempts}: ping-pong over {len(ks)} sizes "
                 f"({ks[0]}..{ks[-1]} B, {repeat} round trips each) on {nprocs} ranks "
                 f"({transport}, {api} API)"
                 + (f", about {took:.0f} s" if took is not None else ""))
        before = conditions.snapshot()
        t0 = time.monotonic()
        run, stdout = run_bench(nprocs, transport, ks, repeat, testbed=testbed, api=api,
                                progress=progress)
        took = time.monotonic() - t0
        progress(f"attempt {attempt}/{attempts}: measured in {took:.1f} s")
        cond = Q.record(before, conditions.snapshot(), run.get("rank_info", []))
        verified = verify_transport(transport, run, stdout)
        s = summarize(run)
        probe = run.get("eager_probe")
        S = F.eager_limit(probe["sizes"], probe["send_s"], probe["delay_s"]) if probe else None
        lg = F.fit_loggps(s["sizes"], s["one_way"], s["o_send"], s["o_recv"], s["g"], S)
        check = Q.fit_check(s["sizes"].tolist(), lg.residuals, s["one_way"].tolist(),
                            lg.params["S"])
        problems = Q.attempt_problems(check, cond)
        score = (len(problems), Q.miss_factor(check["residual_worst"]))
        if best is None or score < best[0]:
            best = (score, run, verified, s, probe, lg, check, cond, attempt)
        if not problems:
            break
        failed.append(f"attempt {attempt}: " + Q.attempt_text(check, cond))
        if attempt < attempts:
            progress(failed[-1] + ": measuring again")
            # Interference here comes in bursts (other jobs' runs): let one pass.
            time.sleep(2.0)
        else:
            progress(failed[-1])
    if len(failed) == attempt and not accept_noisy:
        raise NoQuietMeasurement(failed)
    _, run, verified, s, probe, lg, check, cond, kept = best
    check["attempts"] = attempt
    check["kept_attempt"] = kept
    check["failed_attempts"] = failed
    pg = progress_fit(run)
    if pg is not None:
        lg.notes.extend(pg.notes)
    cf = F.fit_calls(run["call_probe"]) if run.get("call_probe") else None
    if cf is not None:
        lg.notes.extend(cf.notes)
    from replay.calibration.resume import fit_resume
    from replay.resume import resume_curve
    rf = fit_resume(run["resume_probe"]) if run.get("resume_probe") else None
    if rf is not None:
        lg.notes.extend(rf.notes)
    bf = F.fit_bursts(run["burst_probe"], resume_curve({"resume": rf.params}) if rf else None) \
        if run.get("burst_probe") else None
    if bf is not None:
        lg.notes.extend(bf.notes)
    ff = fit_flags(run["flag_probe"]) if run.get("flag_probe") else None
    if ff is not None:
        lg.notes.extend(ff[2])
    bn = fit_binding(run["binding_probe"]) if run.get("binding_probe") else None
    if bn is not None:
        lg.notes.extend(bn[2])
    rd = fit_reduction(run["reduction_probe"]) if run.get("reduction_probe") else None
    if rd is not None:
        lg.notes.extend(rd[2])
    tr = tracer_probe(transport, run_job, progress, lg.notes)
    env2, job2 = bench_job(2, transport, testbed)
    nv = native_probe(job2, run_job, env2, [k for k in SMALL if k <= lg.params["S"]],
                      max(repeat, 100) * 2, lg.params, transport == "shm" and testbed is None,
                      progress, lg.notes)
    qf = F.fit_queue(run["queue_probe"]) if run.get("queue_probe") else None
    if qf is not None:
        lg.notes.extend(qf.notes)
    uf = F.fit_unexpected(run["unexpected_probe"]) if run.get("unexpected_probe") else None
    if uf is not None:
        lg.notes.extend(uf.notes)
        if api == "pickle":
            _without_unexpected(lg, uf)
    hk = F.fit_hockney(s["sizes"], s["one_way"])
    mm = F.fit_mm1(s["sizes"], s["one_way"], lg.brk)
    O = lg.params["O"]
    o_by_p = {nprocs: o_prime(s, O)}
    for p in sorted(set(overhead_ranks) - {nprocs}):
        # its sizes are the small ones of the main run: that run's time is an upper bound
        progress(f"small-message overheads on {p} ranks (2 communicate, {p - 2} idle), "
                 f"under {took:.0f} s")
        run_p, stdout_p = run_bench(p, transport, list(SMALL), repeat, overhead_only=True,
                                    testbed=testbed, api=api, progress=progress)
        verify_transport(transport, {**run_p, "loopback_probe": None}, stdout_p)
        o_by_p[p] = o_prime(summarize(run_p), O)
    ps = sorted(o_by_p)
    o_a, o_b_raw = F.fit_overhead_vs_ranks(ps, [o_by_p[p] for p in ps])
    o_b = o_b_raw
    if o_b < 0:
        # The replay models take o_b >= 0 (paper 004: overhead grows with P). A negative fit means
        # no growth measurable above the noise: keep o_a at the mean o', o_b = 0.
        lg.notes.append(f"o' fell with P (o_b = {o_b_raw:.3g} s/rank fitted): o_b set to 0, "
                        "o_a to the mean o'")
        o_a, o_b = float(np.mean([o_by_p[p] for p in ps])), 0.0
    if o_a < 0:
        lg.notes.append(f"o_a = {o_a:.3g} s < 0: o' grows faster with P than a P = 0 intercept "
                        "allows; only o at the measured P is physical")
    hosts = sorted({i["host"] for i in run["rank_info"]})
    profile = {
        "format": FORMAT,
        "quality": "noisy" if Q.attempt_problems(check, cond) else "ok",
        "measured_on": {
            "mpi_library": run["mpi_library"], "mpi_version": run["mpi_version"],
            "mpi4py_version": run.get("mpi4py_version"),
            "transport": transport, "transport_env": dict(TRANSPORTS[transport]), "api": api,
            "network": _network(transport, nprocs, testbed),
            "transport_verified": verified["how"],
            "hosts": hosts, "ranks": nprocs, "placement": placement(run),
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "hindsight_revision": git_revision() or "unknown",
        },
        "loggps": {**lg.params, "o_a": o_a, "o_b": o_b,
                   **({"progress": pg.progress} if pg is not None else {}),
                   **(cf.params if cf is not None else {}),
                   **({"ack_cells": qf.ack_cells} if qf is not None else {}),
                   **(uf.params if uf is not None else {})},
        "hockney": {"l": hk["l"], "g": hk["g"]},
        "mm1": mm,
        **({"compute": bf.params} if bf is not None else {}),
        # a burst after a long wait takes longer (rule resume_after_wait)
        **({"resume": rf.params} if rf is not None else {}),
        # MPICH runs these on shared flags only among ranks of one node (rule
        # shared_flag_meeting); over TCP they are messages, which the patterns price
        **({"shared_flag": {"ranks": 2, **ff[0]}} if ff is not None and transport == "shm"
           and testbed is None else {}),
        # mpi4py's own time per call, which a trace recorded below mpi4py has in its bursts
        # (rule binding_in_bursts)
        **({"binding": bn[0]} if bn is not None else {}),
        # a reduction's member combines what a step received in gamma per byte (rule
        # reduction_combine)
        **({"reduction": rd[0]} if rd is not None else {}),
        # the Python tracer's own time per call, which its traces have in their bursts (rule
        # python_tracer_in_bursts)
        **({"python_tracer": tr[0]} if tr is not None else {}),
        # the calls' and shared-flag collectives' costs made from C, which a trace recorded
        # below mpi4py pays instead of the mpi4py costs (rule native_call_costs)
        **(nv[0] if nv is not None else {}),
        "fit": {
            "r2_loggp": lg.r2, "r2_hockney": hk["r2"],
            "residuals": {"loggp": lg.residuals, "hockney": hk["residuals"]},
            "spread": s["spread"].tolist(), "sizes": [int(k) for k in s["sizes"]],
            "one_way_s": s["one_way"].tolist(), "repeat": repeat,
            "o_send_s": s["o_send"].tolist(), "o_recv_s": s["o_recv"].tolist(),
            "overhead_ranks": ps, "overhead_s": [o_by_p[p] for p in ps], "o_b_fitted": o_b_raw,
            "segments": {"small": list(lg.brk.small), "large": list(lg.brk.large)},
            "S_from": "eager probe" if probe else "break of the one-way curve",
            "receiver_wait": run.get("receiver_wait", "sleep"),
            "eager_probe": probe or {},
            "progress_probe": pg.evidence if pg is not None else {},
            "call_probe": cf.evidence if cf is not None else {},
            "burst_probe": bf.evidence if bf is not None else {},
            "resume_probe": rf.evidence if rf is not None else {},
            "flag_probe": ff[1] if ff is not None else {},
            "binding_probe": bn[1] if bn is not None else {},
            "reduction_probe": rd[1] if rd is not None else {},
            "python_tracer_probe": tr[1] if tr is not None else {},
            "native_probe": nv[1] if nv is not None else {},
            "queue_probe": qf.evidence if qf is not None else {},
            "unexpected_probe": uf.evidence if uf is not None else {},
            "notes": lg.notes,
            "check": check,
        },
        "conditions": cond,
    }
    return profile
