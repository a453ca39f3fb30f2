"""The resume probe of the calibration benchmark (bench.py), and its fit: how much longer a
burst of compute takes when the rank comes back to it after spending d in other work (an MPI call
that waited) than when it computed just before (rule ``resume_after_wait``, ``replay.resume``).

Ranks 0 and 1 run the burst probe's fixed kernel (``bursts.kernel``: a sparse product and a dot
product of n doubles) in blocks of iterations (``iterations``), alternately:

* *away* for d: before every kernel one of the two (the *late* one, alternately) waits d (a spin,
  or a sleep when the ranks may share a core) and sends 8 bytes, which the other waits for in
  ``Recv`` (buffer API): both were away from the kernel's data for d, one inside MPI, the way a
  program is away in a call that waits for a late peer;
* *resumed at once*: the kernel alone, iteration after iteration (d = 0).

Each kernel is timed on its own with ``time.thread_time_ns`` (the thread's CPU time: waiting for
a core is not counted); a block's value is its mean CPU time per kernel. Per kernel size, every
round makes one resumed block and one block per d of ``RESUME_AWAY_S``; ``RESUME_ROUNDS`` rounds
are kept after one warm-up round, on both ranks.

``fit_resume``: per kernel size the burst's length b = the median CPU time per kernel of the
resumed blocks, and per d the extra time w(b, d) = the median over rounds and ranks of (away −
resumed) of one round (adjacent blocks, so a drift of the machine's speed cancels), negative
medians kept at 0 (noted). The ``[resume]`` section: ``burst_s``, ``away_s``, ``extra_s`` (one
row per d).

Measured here (2026-11-27, MPICH 5.0.2, 2 ranks on shared memory, quiet): after 10 ms away a
10 µs kernel took +5 µs, a 60 µs one +48 µs, a 0.7 ms one +0.67 ms; after 1 ms +0.3, +7 and
+0.1 ms; within 0.3 ms nothing beyond the noise. On the CI machine a 20 µs kernel took +0.17 ms
after 32 ms away: part of the extra time does not scale with the kernel. Spinning in Python,
sleeping and waiting in ``Recv`` gave the same growth; so did TCP and a 100 Mbit/s testbed (it is
the machine's, not the transport's). Not established: the cause (the machine's caches and TLBs
refilled after other work or other tenants of the host ran; this VM exposes no hardware
counters).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

#: doubles per kernel: about 10 µs, 60 µs and 0.5 ms of CPU time each on this machine
RESUME_SIZES = (8192, 65536, 524288)
#: how long the ranks are away before each kernel of an away block (s)
RESUME_AWAY_S = (0.0001, 0.0005, 0.002, 0.008, 0.032)
#: kernels per block: about RESUME_BLOCK_S of time away, within these bounds (the short times
#: away differ least from none, so they get the most kernels; the resumed block the most)
RESUME_ITERS = (5, 40)
RESUME_BLOCK_S = 0.016
#: kept rounds (one resumed block and one block per d each) per kernel size, after a warm-up
RESUME_ROUNDS = 3

_TAG = 59


def iterations(d: float) -> int:
    """Kernels in a block of time away ``d`` (s; 0: the resumed block)."""
    lo, hi = RESUME_ITERS
    return hi if d <= 0 else int(min(max(RESUME_BLOCK_S / d, lo), hi))


def resume_probe(comm, rank: int, pair_sync: Callable[[], None],
                 wait: Callable[[int], None]) -> dict:
    """Run the probe on ranks 0 and 1 (``rank`` 0 or 1; ``pair_sync`` synchronises the two;
    ``wait(ns)`` lets ns pass the way the benchmark's late ranks wait). Rank 0 returns, per
    kernel size, the resumed and, per d, the away CPU times per kernel of every kept round of
    both ranks (seconds); rank 1 an empty dict."""
    from replay.calibration.bursts import kernel      # (mpi4py: in the benchmark's ranks only)
    t_probe = time.perf_counter_ns()
    peer = 1 - rank
    tt = time.thread_time_ns
    note = np.zeros(1)
    mine: dict = {"resumed_s": [], "away_s": []}
    for n in RESUME_SIZES:
        p = np.random.default_rng(n + rank).random(n)
        q = np.empty_like(p)
        resumed: list[float] = []
        away: list[list[float]] = [[] for _ in RESUME_AWAY_S]
        for rnd in range(RESUME_ROUNDS + 1):
            for j, d in enumerate((0.0,) + RESUME_AWAY_S):
                pair_sync()
                cpu = 0
                iters = iterations(d)
                for it in range(iters):
                    if d > 0:
                        if (it + rnd) % 2 == rank:      # the late one
                            wait(int(d * 1e9))
                            comm.Send(note, dest=peer, tag=_TAG)
                        else:
                            comm.Recv(note, source=peer, tag=_TAG)
                    c0 = tt()
                    kernel(p, q)
                    cpu += tt() - c0
                if rnd > 0:                             # the first round is a warm-up
                    (away[j - 1] if j else resumed).append(cpu / iters * 1e-9)
        mine["resumed_s"].append(resumed)
        mine["away_s"].append(away)
    theirs = comm.sendrecv(mine, dest=peer, source=peer, sendtag=_TAG + 1, recvtag=_TAG + 1)
    if rank != 0:
        return {}
    return {"sizes": list(RESUME_SIZES), "away": list(RESUME_AWAY_S), "rounds": RESUME_ROUNDS,
            "resumed_s": [a + b for a, b in zip(mine["resumed_s"], theirs["resumed_s"])],
            "away_s": [[a + b for a, b in zip(ma, ta)]
                       for ma, ta in zip(mine["away_s"], theirs["away_s"])],
            "took_s": (time.perf_counter_ns() - t_probe) * 1e-9}


@dataclass
class ResumeFit:
    params: dict                        # burst_s, away_s, extra_s: the [resume] section
    evidence: dict
    notes: list[str] = field(default_factory=list)


def fit_resume(probe: dict) -> ResumeFit:
    """The ``[resume]`` section from the probe's blocks (formula in the module docstring)."""
    from replay.calibration.fit import median_iqr
    notes: list[str] = []
    rounds = int(probe["rounds"])
    burst = [float(np.median(r)) for r in probe["resumed_s"]]
    order = np.argsort(burst)
    extra, iqr = [], []
    for j, d in enumerate(probe["away"]):
        row, row_iqr = [], []
        for i in order:
            res = np.asarray(probe["resumed_s"][i], float)
            aw = np.asarray(probe["away_s"][i][j], float)
            # rank 0's rounds, then rank 1's: one round's blocks are adjacent in both
            w, spread = median_iqr(aw - res)
            if w < 0:
                notes.append(f"resume probe: a {burst[i] * 1e6:.3g} us kernel took "
                             f"{-w * 1e6:.3g} us less after {d * 1e3:g} ms away than at once: "
                             "extra time set to 0")
                w = 0.0
            row.append(w)
            row_iqr.append(spread)
        extra.append(row)
        iqr.append(row_iqr)
    params = {"burst_s": [burst[i] for i in order], "away_s": [float(d) for d in probe["away"]],
              "extra_s": extra}
    ev = {"kernel_doubles": [int(probe["sizes"][i]) for i in order], "rounds": rounds,
          "iters": [iterations(0.0)] + [iterations(d) for d in probe["away"]],
          "extra_iqr_s": iqr,
          "resumed_s": [probe["resumed_s"][i] for i in order],
          "away_block_s": [[probe["away_s"][i][j] for i in order]
                           for j in range(len(probe["away"]))],
          "took_s": probe.get("took_s")}
    return ResumeFit(params, ev, notes)
