"""The native probe of the calibration (``native_probe.c``), and its fit: what the calls the
other probes time through mpi4py cost when a C program makes them (rule ``native_call_costs``,
``replay.binding``).

Every other probe times its calls through mpi4py, as a Python program makes them. A trace
recorded below mpi4py (the PMPI library, an OTF2 archive, a GOAL schedule) is mostly a C
program's, whose calls pay no binding at all; and the binding probe, which times mpi4py's calls
on paths where MPI does nothing, prices the binding's own work but not all of what a call
through it costs more (on this project's machines an 8-byte one-way time of 0.9-1.4 µs in C
against 3-5 µs through mpi4py, a receive of a message already there 0.1-0.2 µs against 2 µs).
This probe makes the same measurements in C, built with the MPI's own ``mpicc``, on 2 ranks of
the calibrated transport, after the benchmark:

* per size k of ``SMALL`` up to S (all eager): T(k), half the median round trip of a C
  ping-pong (``MPI_Send`` / ``MPI_Recv``); o_s(k), the median time rank 0 spends in ``MPI_Send``;
  o_r(k), the median time of an ``MPI_Recv`` whose message ``MPI_Iprobe`` has found there;
* per call, batches of 100 timed as a whole: ``MPI_Irecv`` posts, ``MPI_Wait`` on a completed
  send, ``MPI_Probe`` of a queued message, ``MPI_Iprobe`` finding nothing, less an empty loop;
* the collective probe of ``flags.py`` (rule shared_flag_meeting): Barrier, Bcast, Reduce and
  Allreduce on a communicator of the two, each call's entry and exit on both ranks.

The fit, with O_send, O_recv and G of the main fit (per byte: the same wire and copies):

    o_send = median_k (o_s(k) − O_send·k)        o_recv = median_k (o_r(k) − O_recv·k)
    one_way = median_k (T(k) − (O_send + O_recv)·k − (k − 1)·G)

and o_irecv, o_wait, o_probe, o_call the calls' medians per call, each at least 0. Written as the
profile's ``[native]`` section (seconds); a replay of a trace recorded below mpi4py takes them
instead of the mpi4py costs less the binding's, with L = one_way − o_send − o_recv. The
collectives are fitted as the collective probe's (``flags.fit_flags``) into
``[native_shared_flag]`` (on shared memory only, as ``[shared_flag]``), which such a trace's
shared-flag collectives take instead of ``[shared_flag]`` less the binding's.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Callable

import numpy as np

from replay.binding import NATIVE_KEYS

SOURCE = Path(__file__).resolve().parent / "native_probe.c"
BUILD_DIR = SOURCE.parent / "build"
CFLAGS = ("-O2",)
#: the ``[native]`` section's keys, seconds: what rule native_call_costs reads
KEYS = NATIVE_KEYS
#: runs of the probe, each value the median of theirs (``median_of_runs``)
NATIVE_RUNS = 3
#: per-call quantity of the program's output -> the profile's key
CALLS = {"irecv_ns": "o_irecv", "wait_ns": "o_wait", "probe_ns": "o_probe",
         "iprobe_ns": "o_call"}


def run_probe(job: Callable[[list[str]], list[str]], run_job: Callable[..., tuple[str, str, int]],
              env: dict[str, str], sizes: list[int], reps: int, timeout: float = 120.0) -> dict:
    """Build the probe (``instrument.native.compiled``), run it on 2 ranks (``job``: the
    launch command of a program, as the benchmark's runs are launched; ``run_job`` runs it,
    stopped on a timeout or Ctrl-C) and return both ranks' outputs. A RuntimeError with the
    job's last line when it fails; a NativeError when it cannot be built."""
    from instrument.native import compiled

    exe = compiled(SOURCE, BUILD_DIR, "native_probe", CFLAGS, "",
                   "the native probe of calibrate")
    with tempfile.TemporaryDirectory(prefix="hindsight-native-probe-") as tmp:
        out = Path(tmp) / "probe"
        _, stderr, rc = run_job(job([str(exe), str(out), str(reps), *map(str, sizes)]), env,
                                timeout, "the native probe")
        if rc != 0:
            last = (stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"the native probe failed (exit code {rc}): {last}")
        try:
            return {"sender": json.loads(Path(f"{out}.0").read_text()),
                    "receiver": json.loads(Path(f"{out}.1").read_text())}
        except (OSError, ValueError) as exc:
            raise RuntimeError(f"the native probe wrote no readable output: {exc}") from None


def fit_native(probe: dict, main: dict) -> tuple[dict, dict, list[str]]:
    """(params, evidence, notes): params the ``[native]`` section (``KEYS``, seconds, >= 0)
    from the probe's output and the main fit's per-byte terms ``main`` ([loggps]: O_send,
    O_recv, G, seconds per byte); evidence T(k), o_s(k), o_r(k) per size and each call's
    median and interquartile range per call."""
    snd, rcv = probe["sender"], probe["receiver"]
    ks = np.asarray(snd["sizes"], np.float64)
    ns = 1e-9
    T = np.array([np.median(snd[f"rt_ns_{i}"]) / 2 for i in range(len(ks))]) * ns
    os_ = np.array([np.median(snd[f"os_ns_{i}"]) for i in range(len(ks))]) * ns
    or_ = np.array([np.median(rcv[f"or_ns_{i}"]) for i in range(len(ks))]) * ns
    O_s, O_r, G = (float(main.get(k, 0.0)) for k in ("O_send", "O_recv", "G"))
    notes: list[str] = []
    params = {"o_send": float(np.median(os_ - O_s * ks)),
              "o_recv": float(np.median(or_ - O_r * ks)),
              "one_way": float(np.median(T - (O_s + O_r) * ks - (ks - 1) * G))}
    batch = float(snd["batch"])
    loop = float(np.median(snd["loop_ns"])) / batch * ns
    evidence: dict = {"sizes": [int(k) for k in ks], "one_way_s": T.tolist(),
                      "o_send_s": os_.tolist(), "o_recv_s": or_.tolist(),
                      "batch": int(batch), "loop_s": loop}
    for name, key in CALLS.items():
        per = np.asarray(snd[name], np.float64) / batch * ns
        med = float(np.median(per))
        evidence[key] = {"median_s": med,
                         "iqr_s": float(np.percentile(per, 75) - np.percentile(per, 25))}
        params[key] = med - loop
    for key in KEYS:
        if params[key] < 0:
            notes.append(f"native probe: {key} {params[key]:.3g} s < 0: 0 kept")
            params[key] = 0.0
    return {k: params[k] for k in KEYS}, evidence, notes


def fit_native_flags(probe: dict) -> tuple[dict, dict, list[str]]:
    """``flags.fit_flags`` of the probe's collectives (both ranks' entries and exits, case by
    case): the ``[native_shared_flag]`` section's tables, their evidence and notes."""
    # (native_probe.c makes them as flags.py's FLAG_REPEAT and FLAG_DELAY_NS say)
    from replay.calibration.flags import FLAG_DELAY_NS, FLAG_REPEAT, fit_flags

    cases = []
    for mine, theirs in zip(probe["sender"]["flag_cases"], probe["receiver"]["flag_cases"]):
        cases.append({**mine, "in": [mine["in"], theirs["in"]],
                      "out": [mine["out"], theirs["out"]]})
    params, evidence, notes = fit_flags({"repeat": FLAG_REPEAT, "delay_s": FLAG_DELAY_NS * 1e-9,
                                         "cases": cases})
    return params, evidence, [n.replace("flag probe:", "native flag probe:") for n in notes]


def native_probe(job: Callable[[list[str]], list[str]], run_job: Callable[..., tuple],
                 env: dict[str, str], sizes: list[int], reps: int, main: dict, flags: bool,
                 progress: Callable[[str], None], notes: list[str]
                 ) -> tuple[dict, dict] | None:
    """The probe run ``NATIVE_RUNS`` times and fitted: (the profile's sections, the evidence).
    ``[native]`` (``fit_native``), and with ``flags`` (shared memory on one node, where MPICH
    runs those collectives on flags) ``[native_shared_flag]`` (``fit_native_flags``), each
    value the median of the runs' (``median_of_runs``). None with a note in ``notes`` when it
    could not be built or a job failed (the profile then has neither)."""
    from hindsight.errors import UserError

    if not sizes:
        notes.append("native probe: no size up to S to measure; no [native] section")
        return None
    progress(f"the calls' costs made from C (2 ranks, {NATIVE_RUNS} runs of about a second)")
    runs: list[dict] = []
    tables: list[dict] = []
    more: list[str] = []
    try:
        for k in range(NATIVE_RUNS):
            probe = run_probe(job, run_job, env, sizes, reps)
            params, evidence, said = fit_native(probe, main)
            runs.append({"params": params, "evidence": evidence})
            if flags:
                table, flag_evidence, flag_notes = fit_native_flags(probe)
                tables.append(table)
                evidence["flag_probe"] = flag_evidence
                said += flag_notes
            # (each run's own facts; the values written are the runs' medians)
            more += [n.replace("probe:", f"probe (run {k + 1} of {NATIVE_RUNS}):", 1)
                     for n in said]
        sections = {"native": median_of_runs([r["params"] for r in runs])}
        if flags:
            sections["native_shared_flag"] = {"ranks": 2, **median_of_runs(tables)}
    except (RuntimeError, OSError, UserError) as exc:   # (no mpicc, a stalled job)
        notes.append(f"native probe: {exc}; no [native] section")
        return None
    notes.extend(more)
    return sections, {"runs": runs}


def median_of_runs(runs: list[dict]) -> dict:
    """Per key (and per element of a list, in nested tables) the median over the runs' values:
    this VM's speed moves by 2-5x between runs of a second (an 8-byte one-way time of 0.9 µs
    in one run, 5.4 µs in the next), and one such run would price every call."""
    first = runs[0]
    out: dict = {}
    for key, v in first.items():
        vals = [r.get(key) for r in runs]
        if any(type(x) is not type(v) or (isinstance(v, (list, dict)) and len(x) != len(v))
               or (key == "bytes" and x != v) for x in vals):
            # (the C program measures the same things every run: another shape is a fault)
            raise RuntimeError(f"its runs measured different things ({key!r})")
        if isinstance(v, dict):
            out[key] = median_of_runs(vals)
        elif isinstance(v, list) and key == "bytes":
            out[key] = v
        elif isinstance(v, list):
            out[key] = [float(x) for x in np.median(np.asarray(vals, np.float64), axis=0)]
        else:
            out[key] = float(np.median(vals))
    return out
