"""The burst probe of the calibration benchmark (bench.py): how much longer a program's compute
takes between MPI calls on this transport than the same compute with no MPI call between.

Ranks 0 and 1 run the same fixed kernel (numpy: ``q = 2p - shift(p) - shift(p)``, then the sum of
``p * q``, on ``n`` doubles: a sparse product and a dot product, the work of a fine iterative
solver) in blocks of iterations, alternately:

* *exchanged*: before every kernel the two ranks exchange k bytes (``Sendrecv``, buffer API: a
  neighbour exchange, the commonest call of a fine program), k each of ``BURST_MESSAGES`` in
  turn: the extra time grows with the bytes a call moved (TCP's copies through the kernel's
  socket buffers evict more of the kernel's data than an 8-byte exchange);
* *silent*: the kernel alone, iteration after iteration.

Each kernel is timed on its own with ``time.thread_time_ns`` (the thread's CPU time, so that time
spent waiting for a core while other work shares the machine is not counted); a block's value is
the mean CPU time per kernel. ``BURST_ROUNDS`` rounds of one exchanged and one silent block are
kept per message and kernel size after one warm-up round, on both ranks. fit.fit_bursts takes,
per kernel size, the silent time as the burst's length and, per message size, the median over
rounds and ranks of (exchanged − silent) as the extra time a burst of that length takes on this
transport after a call that moved that many bytes. The exchanges' mean duration per block is kept
too: on a slow link they last milliseconds, and the fit takes off what rule resume_after_wait
(calibration/resume.py) already prices for that long a wait.

Sizes ``BURST_SIZES`` span the bursts of fine programs (about 10 µs to a few hundred µs on this
machine); a block lasts about ``BURST_BLOCK_S``.
"""

from __future__ import annotations

import time

import numpy as np
from mpi4py import MPI

#: doubles per kernel: about 15 µs, 40 µs and 300 µs of CPU time each on this machine
BURST_SIZES = (1024, 8192, 65536)
#: kept rounds (one exchanged and one silent block each) per size, after one warm-up round
BURST_ROUNDS = 6
#: target length of one block (s); at least ``BURST_MIN_ITERS`` kernels
BURST_BLOCK_S = 0.012
BURST_MIN_ITERS = 20
#: bytes exchanged before each kernel of an exchanged block, one series per size
BURST_MESSAGES = (8, 2048, 32768)

_TAG = 47


def kernel(p: np.ndarray, q: np.ndarray) -> float:
    """The fixed compute of the probe: q = A p for A = tridiag(-1, 2, -1), then p.q."""
    np.multiply(p, 2.0, out=q)
    q[1:] -= p[:-1]
    q[:-1] -= p[1:]
    return float(np.sum(p * q))


def burst_probe(comm: MPI.Comm, rank: int, pair_sync) -> dict:
    """Run the probe on ranks 0 and 1 (``rank`` is 0 or 1; ``pair_sync`` synchronises the two).
    Rank 0 returns, per message size and kernel size, the silent and exchanged CPU times per
    kernel of every kept round of both ranks and the exchanges' mean duration (wall) per
    exchanged block (seconds); rank 1 an empty dict."""
    t_probe = time.perf_counter_ns()
    out: dict = {"sizes": list(BURST_SIZES), "rounds": BURST_ROUNDS,
                 "bytes": list(BURST_MESSAGES), "silent_s": [], "exchanged_s": [],
                 "exchange_s": []}
    for nbytes in BURST_MESSAGES:
        one = _series(comm, rank, pair_sync, nbytes)
        for key in ("silent_s", "exchanged_s", "exchange_s"):
            out[key].append(one[key])
    if rank != 0:
        return {}
    out["took_s"] = (time.perf_counter_ns() - t_probe) * 1e-9
    return out


def _series(comm: MPI.Comm, rank: int, pair_sync, nbytes: int) -> dict:
    """One message size's blocks: per kernel size, both ranks' kept rounds (rank 0's answer)."""
    peer = 1 - rank
    tt = time.thread_time_ns
    sbuf = np.zeros(nbytes, np.uint8)
    rbuf = np.zeros(nbytes, np.uint8)
    pc = time.perf_counter_ns
    mine: dict = {"silent_s": [], "exchanged_s": [], "exchange_s": []}
    for n in BURST_SIZES:
        p = np.random.default_rng(n + rank).random(n)
        q = np.empty_like(p)
        c0 = tt()
        for _ in range(5):
            kernel(p, q)
        each = max((tt() - c0) / 5, 1.0)
        # both ranks run the same number of iterations: the exchanges pair them up
        iters = comm.sendrecv(max(BURST_MIN_ITERS, int(BURST_BLOCK_S * 1e9 / each)),
                              dest=peer, source=peer, sendtag=_TAG, recvtag=_TAG)
        iters = max(iters, max(BURST_MIN_ITERS, int(BURST_BLOCK_S * 1e9 / each)))
        silent, exchanged, took = [], [], []
        for rnd in range(BURST_ROUNDS + 1):
            for exchange in (True, False):
                pair_sync()
                cpu = wall = 0
                for _ in range(iters):
                    if exchange:
                        w0 = pc()
                        comm.Sendrecv(sbuf, dest=peer, sendtag=_TAG, recvbuf=rbuf,
                                      source=peer, recvtag=_TAG)
                        wall += pc() - w0
                    c0 = tt()
                    kernel(p, q)
                    cpu += tt() - c0
                if rnd > 0:                 # the first round is a warm-up
                    (exchanged if exchange else silent).append(cpu / iters * 1e-9)
                    if exchange:
                        took.append(wall / iters * 1e-9)
        mine["silent_s"].append(silent)
        mine["exchanged_s"].append(exchanged)
        mine["exchange_s"].append(took)
    theirs = comm.sendrecv(mine, dest=peer, source=peer, sendtag=_TAG + 1, recvtag=_TAG + 1)
    return {key: [a + b for a, b in zip(mine[key], theirs[key])]
            for key in ("silent_s", "exchanged_s", "exchange_s")}
