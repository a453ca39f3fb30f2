"""The collective probe of the calibration benchmark (bench.py), and its fit: what MPICH's
shared-flag collectives cost each member on one node (rule ``shared_flag_meeting``,
``replay.flags``).

On one node MPICH's ch4 device runs Bcast, Reduce, Allreduce and Barrier on flags in shared
memory ("release_gather", ``src/mpid/ch4/shm/posix/posix_coll_release_gather.h``), not as
messages. Their cost is not o, L and G of a point-to-point pattern, so it is measured as the
program meets it: per collective, message size and role, the call's duration.

Ranks 0 and 1 run each collective on a communicator of their own (``Create_group``; rank 0 is
the root), ``FLAG_REPEAT`` times per case after ``FLAG_WARMUP`` untimed calls (MPICH runs the
first MPIR_CVAR_POSIX_NUM_COLLS_THRESHOLD - 1 = 4 flag collectives of a communicator as
point-to-point messages). Before each call the two synchronise, then one of them (the *late*
one, alternately) waits ``FLAG_DELAY_NS`` first, so that the other certainly entered before it.
Both read ``time.perf_counter_ns`` (CLOCK_MONOTONIC: one clock for every process of a node)
before and after the call, in the same Python call the traced program makes (buffer API).

The fit takes, per collective, size and role (root: rank 0; member: rank 1), the medians of

* ``own``: the call's duration when this rank entered last (it found the others there);
* ``after``: the call's end minus the other rank's entry when this rank entered first and
  waited for it (only for the roles that wait: every member of a Barrier or Allreduce, a Bcast's
  members for the root, a Reduce's root for the members).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from replay.selection import SHARED_FLAG_WAITS

#: the collectives MPICH runs on shared flags within a node, and the roles that wait (for whom)
FLAG_OPS = ("Barrier", "Bcast", "Reduce", "Allreduce")
#: message sizes (bytes, float64 elements) of the probe; a Barrier has none
FLAG_SIZES = (8, 512, 8192, 65536)
#: timed calls per collective, size and late rank
FLAG_REPEAT = 60
#: untimed calls before each case (and before the first: MPICH's flag threshold is 5 calls)
FLAG_WARMUP = 6
#: how long the late rank waits before its call
FLAG_DELAY_NS = 40_000

_TAG = 53


def sizes_of(op: str) -> tuple[int, ...]:
    """The message sizes the probe measures ``op`` at."""
    return (0,) if op == "Barrier" else FLAG_SIZES


def _call(pair, op: str, n: int, sbuf: np.ndarray, rbuf: np.ndarray) -> Callable:
    from mpi4py import MPI
    k = max(n // 8, 1)
    s, r = sbuf[:k], rbuf[:k]
    if op == "Barrier":
        return pair.Barrier
    if op == "Bcast":
        return lambda: pair.Bcast(s, root=0)
    if op == "Reduce":
        return lambda: pair.Reduce(s, r, op=MPI.SUM, root=0)
    return lambda: pair.Allreduce(s, r, op=MPI.SUM)


def flag_probe(comm, rank: int, pair_sync: Callable[[], None],
               wait: Callable[[int], None]) -> dict:
    """Run the probe on ranks 0 and 1 of ``comm`` (``rank`` is 0 or 1; ``pair_sync``
    synchronises the two, ``wait(ns)`` lets time pass). Rank 0 returns, per case, both ranks'
    entry and exit times (ns, one clock), rank 1 an empty dict. (mpi4py is imported by the
    benchmark; the fit below runs in calibrate's own process, which must not start MPI.)"""
    pair = comm.Create_group(comm.Get_group().Incl([0, 1]))
    sbuf = np.ones(max(FLAG_SIZES) // 8)
    rbuf = np.zeros_like(sbuf)
    t_probe = time.perf_counter_ns()
    for _ in range(FLAG_WARMUP):
        pair.Barrier()
    cases = []
    for op in FLAG_OPS:
        for n in sizes_of(op):
            call = _call(pair, op, n, sbuf, rbuf)
            for late in (0, 1):
                for _ in range(FLAG_WARMUP):
                    call()
                t_in = np.empty(FLAG_REPEAT, np.int64)
                t_out = np.empty(FLAG_REPEAT, np.int64)
                for j in range(FLAG_REPEAT):
                    pair_sync()
                    if rank == late:
                        wait(FLAG_DELAY_NS)
                    t_in[j] = time.perf_counter_ns()
                    call()
                    t_out[j] = time.perf_counter_ns()
                cases.append({"op": op, "bytes": n, "late": late,
                              "in": t_in.tolist(), "out": t_out.tolist()})
    theirs = comm.sendrecv(cases, dest=1 - rank, source=1 - rank, sendtag=_TAG, recvtag=_TAG)
    pair.Free()
    if rank != 0:
        return {}
    for c, o in zip(cases, theirs):
        c["in"] = [c["in"], o["in"]]
        c["out"] = [c["out"], o["out"]]
    return {"repeat": FLAG_REPEAT, "delay_s": FLAG_DELAY_NS * 1e-9, "cases": cases,
            "took_s": (time.perf_counter_ns() - t_probe) * 1e-9}


def fit_flags(probe: dict) -> tuple[dict, dict, list[str]]:
    """(params, evidence, notes) of the probe: params per collective ``{"bytes": [...],
    "<role>_own_s": [...], "<role>_after_s": [...]}`` (after only for the roles that wait),
    medians in seconds; evidence the interquartile ranges and sample counts."""
    acc: dict[tuple[str, str, str], dict[int, np.ndarray]] = {}
    for c in probe["cases"]:
        t_in = np.asarray(c["in"], np.float64)       # [rank][sample]
        t_out = np.asarray(c["out"], np.float64)
        late = int(c["late"])
        early = 1 - late
        role_late = "root" if late == 0 else "member"
        role_early = "root" if early == 0 else "member"
        acc.setdefault((c["op"], role_late, "own"), {})[int(c["bytes"])] = \
            (t_out[late] - t_in[late]) * 1e-9
        if SHARED_FLAG_WAITS[(c["op"], role_early)] != "none":
            acc.setdefault((c["op"], role_early, "after"), {})[int(c["bytes"])] = \
                (t_out[early] - t_in[late]) * 1e-9
    params: dict = {}
    evidence: dict = {"repeat": int(probe["repeat"]), "delay_s": float(probe["delay_s"]),
                      "took_s": probe.get("took_s")}
    notes: list[str] = []
    for (op, role, what), per in sorted(acc.items()):
        sizes = sorted(per)
        med = [float(np.median(per[n])) for n in sizes]
        iqr = [float(np.percentile(per[n], 75) - np.percentile(per[n], 25)) for n in sizes]
        sec = params.setdefault(op, {"bytes": sizes})
        sec[f"{role}_{what}_s"] = [max(m, 0.0) for m in med]
        evidence.setdefault(op, {"bytes": sizes})[f"{role}_{what}_iqr_s"] = iqr
        if what == "after" and min(med) < 0:
            notes.append(f"flag probe: {op} {role} ended before its peer entered "
                         f"({min(med) * 1e6:.3g} us): kept at 0")
        wide = [n for n, m, q in zip(sizes, med, iqr) if q > max(m, 0.0)]
        if wide:
            notes.append(f"flag probe: {op} {role} {what} varied widely at {wide[0]} B (IQR "
                         "above the median): the machine was busy, the median is kept")
    return params, evidence, notes
