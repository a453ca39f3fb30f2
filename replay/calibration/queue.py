"""The queue probe of the calibration benchmark (bench.py): how many rendezvous completions a
receiver can acknowledge while their sender makes no MPI call (rule ``ack_cells`` of the replay,
``replay.rules.ack_cells``).

One sample at count N: rank 0 ``Isend``s N messages of the progress probe's rendezvous size to
rank 1, computing ``QUEUE_GAP`` (or two one-way times of the size, if longer) after each with no
MPI call, then computes ``QUEUE_TAIL`` more, so that rank 1 has received them all (it receives
each at once) before rank 0's first ``Waitall``; rank 1 then computes ``QUEUE_D`` with no MPI
call and synchronises. A sample is held when rank 0's ``Waitall`` ended only as rank 1 came back
into MPI: on one host (one CLOCK_MONOTONIC) when it ended after rank 1's compute did (less
``QUEUE_CLOCK_SLACK``), and a sample in which rank 1 had not received every message when the
``Waitall`` began, or had already stopped computing, says nothing (it is taken again, up to three
times the samples, the tail doubled each time); across hosts when the ``Waitall`` lasted at least
``QUEUE_SPLIT`` of ``QUEUE_D``. Comparing the two clocks keeps a rank that the scheduler held up
(a loaded machine) from looking held.

The counts: 2, 4, 8, ... up to ``QUEUE_MAX`` until one is held (the majority of
``QUEUE_SAMPLES`` valid samples), then bisection between the last count not held and the first
held one. ``fit.fit_queue`` sets ``ack_cells`` = the largest count not held (inf when none up
to ``QUEUE_MAX`` was). Measured on MPICH 5.0.2 shared memory: 128 KiB messages held from N = 65
or 66 (MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_NUM_CELLS = 64; with 32 cells from 33, with 128 from 130;
benchmarks/send_queue_probe.py), never over tcp.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np
from mpi4py import MPI

#: the sender's compute after each Isend (s): the receiver takes each message in meanwhile
QUEUE_GAP = 50e-6
#: the sender's compute after the last Isend, before its Waitall (s)
QUEUE_TAIL = 1e-3
#: the receiver's compute after its last receive (s)
QUEUE_D = 20e-3
#: a Waitall lasting at least this share of QUEUE_D waited for the receiver
QUEUE_SPLIT = 0.5
#: on one host: a held Waitall ends no earlier than this before rank 1's compute ended (s)
QUEUE_CLOCK_SLACK = 50e-6
#: valid samples per count (the majority decides)
QUEUE_SAMPLES = 3
#: the largest count tried
QUEUE_MAX = 512

_TAG = 51
#: a sample's verdict as the profile keeps it (TOML has no null)
_VERDICT = {True: "held", False: "not held", None: "invalid"}


def _spin(seconds: float) -> None:
    end = time.perf_counter_ns() + int(seconds * 1e9)
    while time.perf_counter_ns() < end:
        pass


def queue_probe(comm: MPI.Comm, rank: int, message: list, receive: Callable[[int], None],
                one_way_s: float, pair_sync: Callable[[], None],
                spin: bool) -> dict:
    """Run the probe on ranks 0 and 1 (``rank`` is 0 or 1). ``message`` is what an Isend of the
    rendezvous size passes to MPI; ``receive(tag)`` receives one such message from rank 0 as
    the benchmark's API does; ``one_way_s`` its measured one-way time. With ``spin`` false
    (ranks that may share a core) the computes sleep instead of spinning. Both ranks return
    the same dict: per count its samples' shares (Waitall / QUEUE_D) and verdicts ("held",
    "not held", "invalid")."""
    gap = max(QUEUE_GAP, 2.0 * one_way_s)
    tail = QUEUE_TAIL + 4.0 * one_way_s
    wait = _spin if spin else time.sleep
    t_probe = time.perf_counter_ns()

    # one host: CLOCK_MONOTONIC is one clock, so rank 0 can compare its Waitall with rank 1's
    # times; otherwise only the Waitall's length is known
    names = comm.sendrecv(MPI.Get_processor_name(), dest=1 - rank, source=1 - rank,
                          sendtag=_TAG + 2, recvtag=_TAG + 2)
    one_clock = names == MPI.Get_processor_name()

    def sample(n: int, tail: float) -> tuple[float, bool | None]:
        """(Waitall / QUEUE_D, held: None if rank 1 had not received everything when rank 0
        entered its Waitall, or had finished computing, so the sample says nothing about
        acknowledgements)."""
        pair_sync()
        if rank == 0:
            reqs = []
            for _ in range(n):
                reqs.append(comm.Isend(message, dest=1, tag=_TAG))
                wait(gap)                   # computes: no MPI call
            wait(tail)
            t0 = time.perf_counter_ns()
            MPI.Request.Waitall(reqs)
            t1 = time.perf_counter_ns()
            recv_end, comp_end = comm.sendrecv(None, dest=1, source=1, sendtag=_TAG + 1,
                                               recvtag=_TAG + 1)
            share = (t1 - t0) * 1e-9 / QUEUE_D
            if not one_clock:
                verdict: bool | None = share >= QUEUE_SPLIT
            elif recv_end > t0 or t0 >= comp_end:
                verdict = None              # not received yet, or rank 1 no longer computing
            else:
                # held: the Waitall ended only once rank 1 had stopped computing (a Waitall
                # that waited for nothing ends that late only if rank 0 lost its core for D)
                verdict = t1 >= comp_end - QUEUE_CLOCK_SLACK * 1e9
            out = (share, verdict)
        else:
            for _ in range(n):
                receive(_TAG)
            recv_end = time.perf_counter_ns()
            wait(QUEUE_D)                   # computes: no MPI call
            comp_end = time.perf_counter_ns()
            comm.sendrecv((recv_end, comp_end), dest=0, source=0, sendtag=_TAG + 1,
                          recvtag=_TAG + 1)
            out = (0.0, None)
        return comm.sendrecv(out, dest=1 - rank, source=1 - rank, sendtag=_TAG + 3,
                             recvtag=_TAG + 3) if rank == 1 else _pass(comm, out)

    shares: dict[int, list[float]] = {}
    verdicts: dict[int, list] = {}

    def held(n: int) -> bool:
        """The majority of QUEUE_SAMPLES valid samples (up to three times as many taken, the
        sender's tail doubled after each sample in which the receiver was not done in time);
        none valid: the majority of the Waitalls lasting QUEUE_SPLIT of QUEUE_D."""
        shares[n], verdicts[n] = [], []
        t = tail
        for _ in range(3 * QUEUE_SAMPLES):
            share, v = sample(n, t)
            shares[n].append(share)
            verdicts[n].append(v)
            valid = [x for x in verdicts[n] if x is not None]
            if len(valid) >= QUEUE_SAMPLES:
                break
            if v is None:
                t = min(2.0 * t, QUEUE_D)
        valid = [x for x in verdicts[n] if x is not None]
        if not valid:
            valid = [x >= QUEUE_SPLIT for x in shares[n]]
        return 2 * sum(valid) > len(valid)

    sample(2, tail)                         # warm-up
    lo, hi = 1, None                        # lo: not held (1: nothing to hold), hi: held
    n = 2
    while n <= QUEUE_MAX:
        if held(n):
            hi = n
            break
        lo = n
        n *= 2
    if hi is not None:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if held(mid):
                hi = mid
            else:
                lo = mid
    return {"gap_s": gap, "tail_s": tail, "D_s": QUEUE_D, "split": QUEUE_SPLIT,
            "samples": QUEUE_SAMPLES, "max_count": QUEUE_MAX,
            "compute": "spin" if spin else "sleep",
            "one_clock": one_clock,
            "shares": {str(k): v for k, v in sorted(shares.items())},
            "held": {str(k): [_VERDICT[x] for x in v] for k, v in sorted(verdicts.items())},
            "largest_not_held": lo, "first_held": hi,
            "took_s": (time.perf_counter_ns() - t_probe) * 1e-9}


def _pass(comm: MPI.Comm, out: tuple[float, bool | None]) -> tuple[float, bool | None]:
    """Rank 0's sample, sent to rank 1 (they choose the next count together)."""
    comm.sendrecv(out, dest=1, source=1, sendtag=_TAG + 3, recvtag=_TAG + 3)
    return out


def main(argv: list[str] | None = None) -> None:
    """The probe alone, buffer API, under ``mpiexec -n 2``: ``python -m
    replay.calibration.queue [--bytes K]``; rank 0 prints the probe's dict as JSON and the
    fitted ack_cells (tests/test_ack_cells.py runs it)."""
    import argparse
    import json

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--bytes", type=int, default=131072, help="message size (rendezvous)")
    a = ap.parse_args(argv)
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    if comm.Get_size() != 2:
        raise SystemExit("Error: run the queue probe on 2 ranks (mpiexec -n 2)")
    buf = np.ones(a.bytes, np.uint8)
    rbuf = np.empty(a.bytes, np.uint8)
    token = np.zeros(1, np.uint8)

    def pair_sync() -> None:
        comm.Sendrecv([token, 0, MPI.BYTE], dest=1 - rank, sendtag=_TAG + 4,
                      recvbuf=[token, 0, MPI.BYTE], source=1 - rank, recvtag=_TAG + 4)

    out = queue_probe(comm, rank, [buf, MPI.BYTE],
                      lambda tag: comm.Recv([rbuf, MPI.BYTE], source=0, tag=tag), 0.0,
                      pair_sync, True)
    if rank == 0:
        from replay.calibration.fit import fit_queue
        fit = fit_queue(out)
        print(json.dumps({"ack_cells": fit.ack_cells, "notes": fit.notes, "probe": out}))


if __name__ == "__main__":
    main()
