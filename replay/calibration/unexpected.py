"""The unexpected probe of the calibration benchmark (bench.py): what an eager message costs its
receiver more when it arrives before its receive is posted (rule ``unexpected_copy``,
``replay.rules.unexpected_copy``).

Per eager size k and round, on a "go" from rank 0, rank 1 sends ``UNEXP_BATCH`` messages of k
bytes and then a 0-byte marker; rank 0, having sent the go, waits outside MPI (``wait``: a spin
or a sleep, as bench.py's ``_wait``) for D, long enough for all of them to be in its
transport, then times all the receiving work of the batch in two cases:

* unexpected: ``Recv`` of the marker (its progress engine takes the batch in first: no receive
  is posted for it, so it goes to the unexpected list), then ``Irecv`` of each message (which
  matches it there and copies it out) and ``Waitall``;
* expected: the same ``Irecv``s posted before rank 1 starts (timed), then after D the marker's
  ``Recv`` (the progress engine copies each message straight into its posted buffer) and the
  ``Waitall`` (timed).

Each case is one sample: its time / ``UNEXP_BATCH``. A sample counts only when rank 1 had sent
everything before rank 0's timed part began (one host, one CLOCK_MONOTONIC: rank 1 sends its
send-end readings at the end), so a sender preempted past D does not turn an unexpected batch
into an expected one. fit.fit_unexpected takes u(k) = median(unexpected) − median(expected)
and fits u(k) = o_unexpected + O_unexpected·k.

Buffer API (``Irecv`` of k bytes) for both benchmark APIs: a pickle-API receive is a matched
probe and a receive (instrument.comm), which always finds its message in the unexpected list;
what the copy costs per byte is the same. Batches stay at most 20 messages: MPICH over
libfabric's tcp provider stopped delivering behind ~70 unexpected messages (calls.py).
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np
from mpi4py import MPI

#: messages per batch (at most 20: see the module docstring)
UNEXP_BATCH = 16
#: rounds per size and case (one warm-up round before them is not kept)
UNEXP_ROUNDS = 10
#: the sizes probed, those up to the largest eager size
UNEXP_SIZES = (8, 512, 4096, 16384, 65536)

_TAG_MSG, _TAG_MARK, _TAG_GO, _TAG_CLOCK = 60, 61, 62, 63


def unexpected_probe(comm: MPI.Comm, rank: int, eager_max: int | None, one_way_s: float,
                     pair_sync: Callable[[], None], wait: Callable[[int], None],
                     batch: int = UNEXP_BATCH, rounds: int = UNEXP_ROUNDS) -> dict:
    """Run the probe on ranks 0 and 1 (``rank`` is 0 or 1) for the sizes of ``UNEXP_SIZES`` up
    to ``eager_max``, the largest eager size, and that size (None: no rendezvous seen, all).
    ``one_way_s``: the largest size's measured one-way time (D is 4 ms or 4·batch of it, if
    longer); ``wait(ns)`` lets ns pass outside MPI. Rank 0 returns per size the samples of both
    cases (seconds per message, None where invalid), rank 1 an empty dict."""
    peer = 1 - rank
    sizes = sorted({k for k in UNEXP_SIZES if eager_max is None or k <= eager_max}
                   | ({eager_max} if eager_max is not None else set()))
    D = int(max(4e-3, 4 * batch * one_way_s) * 1e9)
    big = max(sizes) if sizes else 8
    src = np.ones(big, np.uint8)
    dst = [np.zeros(big, np.uint8) for _ in range(batch)]
    mark = np.zeros(1, np.uint8)
    ns = 1e-9
    out: dict = {"batch": batch, "rounds": rounds, "D_s": D * ns, "sizes": sizes,
                 "unexpected_s": [], "expected_s": []}
    t_probe = time.perf_counter_ns()
    for k in sizes:
        unexp: list = []
        exp: list = []
        sent_at: list[int] = []
        starts: list[int] = []
        for rnd in range(2 * (rounds + 1)):
            expected = rnd % 2 == 1
            pair_sync()
            if rank == 1:
                # on rank 0's go: it then makes no call until its timed part (an earlier call
                # would take messages in outside the timing)
                comm.Recv([mark, 0, MPI.BYTE], source=peer, tag=_TAG_GO)
                # Isend: a size above the eager limit (a wrong eager_max) cannot deadlock
                sreqs = [comm.Isend([src[:k], MPI.BYTE], dest=peer, tag=_TAG_MSG)
                         for _ in range(batch)]
                comm.Send([mark, 0, MPI.BYTE], dest=peer, tag=_TAG_MARK)
                sent_at.append(time.perf_counter_ns())
                MPI.Request.Waitall(sreqs)
                continue
            if expected:
                t0 = time.perf_counter_ns()
                reqs = [comm.Irecv([b[:k], MPI.BYTE], source=peer, tag=_TAG_MSG) for b in dst]
                t1 = time.perf_counter_ns()
                comm.Send([mark, 0, MPI.BYTE], dest=peer, tag=_TAG_GO)
                wait(D)
                t2 = time.perf_counter_ns()
                comm.Recv([mark, 0, MPI.BYTE], source=peer, tag=_TAG_MARK)
                MPI.Request.Waitall(reqs)
                t3 = time.perf_counter_ns()
                took = (t1 - t0) + (t3 - t2)
            else:
                comm.Send([mark, 0, MPI.BYTE], dest=peer, tag=_TAG_GO)
                wait(D)
                t2 = time.perf_counter_ns()
                comm.Recv([mark, 0, MPI.BYTE], source=peer, tag=_TAG_MARK)
                reqs = [comm.Irecv([b[:k], MPI.BYTE], source=peer, tag=_TAG_MSG) for b in dst]
                MPI.Request.Waitall(reqs)
                t3 = time.perf_counter_ns()
                took = t3 - t2
            starts.append(t2)
            (exp if expected else unexp).append(took * ns / batch)
        theirs = comm.sendrecv(sent_at, dest=peer, source=peer, sendtag=_TAG_CLOCK,
                               recvtag=_TAG_CLOCK)
        if rank == 0:
            # the first round of each case is a warm-up; a round whose sender finished after
            # the timed part began is invalid
            valid = [s_end < t2 for s_end, t2 in zip(theirs, starts)]
            out["unexpected_s"].append([v if valid[2 * j] else None
                                        for j, v in enumerate(unexp)][1:])
            out["expected_s"].append([v if valid[2 * j + 1] else None
                                      for j, v in enumerate(exp)][1:])
    out["took_s"] = (time.perf_counter_ns() - t_probe) * ns
    return out if rank == 0 else {}


def main(argv: list[str] | None = None) -> None:
    """The probe alone under ``mpiexec -n 2``: ``python -m replay.calibration.unexpected
    [--eager-max K] [--batch N] [--rounds R]``; rank 0 prints the probe's dict and the fit as
    JSON (tests/test_unexpected_copy.py runs it)."""
    import argparse
    import json

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--eager-max", type=int, default=None, help="largest eager size, bytes")
    ap.add_argument("--batch", type=int, default=UNEXP_BATCH)
    ap.add_argument("--rounds", type=int, default=UNEXP_ROUNDS)
    a = ap.parse_args(argv)
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    if comm.Get_size() != 2:
        raise SystemExit("Error: run the unexpected probe on 2 ranks (mpiexec -n 2)")
    token = np.zeros(1, np.uint8)

    def pair_sync() -> None:
        comm.Sendrecv([token, 0, MPI.BYTE], dest=1 - rank, sendtag=_TAG_CLOCK + 1,
                      recvbuf=[token, 0, MPI.BYTE], source=1 - rank, recvtag=_TAG_CLOCK + 1)

    def spin(ns: int) -> None:
        end = time.perf_counter_ns() + ns
        while time.perf_counter_ns() < end:
            pass

    out = unexpected_probe(comm, rank, a.eager_max, 0.0, pair_sync, spin, a.batch, a.rounds)
    if rank == 0:
        from replay.calibration.fit import fit_unexpected
        fit = fit_unexpected(out)
        print(json.dumps({"params": fit.params if fit else None, "notes": fit.notes if fit
                          else [], "evidence": fit.evidence if fit else None, "probe": out}))


if __name__ == "__main__":
    main()
