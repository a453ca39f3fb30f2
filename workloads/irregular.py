"""Irregular point-to-point: a random sparse graph of peers, message sizes varying per edge.

    mpiexec -n P python workloads/irregular.py [--fine | --coarse] [--size N] [--iters K]
                                               [--rounds R]

Every rank draws the same graph from a fixed seed: each rank wants 1-3 peers (at most P-1), edges
are added between ranks that still want one, and an edge is symmetric, so every send has its
receive. Each direction of an edge has its own message size, drawn log-uniformly between 64 B
and 64 KiB (at most the state's size), a multiple of 8. Every rank holds a state of N doubles in
[0, 1). An iteration posts an Irecv from every peer and an Isend of the first m doubles of its
state to every peer (m of that direction), waits with Waitall, then folds in what it received:
for each peer in rank order the first m values are averaged with the message, and R sweeps of
the logistic map x <- 3.9 x (1 - x) go over the whole state. The sum of the state is added to a
checksum after every iteration.

--fine (default): N = 8,192 doubles, R = 1, 1,500 iterations of about 55-70 us on 2 ranks.
--coarse: N = 131,072 doubles, R = 8, 100 iterations of about 4 ms.

Self-check: rank 0 gathers every rank's checksum and final state and compares them exactly with a
serial run of all ranks from the same graph and seed (only additions and multiplications of
equal arrays in the same order, so the results are bit for bit the same). Prints `time_s=<timed
loop, rank 0, between barriers>` and `verified`, or exits 1.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from mpi4py import MPI

import workload_args

SETTINGS = {"fine": {"size": 8_192, "iters": 1_500, "rounds": 1},
            "coarse": {"size": 131_072, "iters": 100, "rounds": 8}}
WARMUP = 10
SEED = 2024
MIN_BYTES, MAX_BYTES = 64, 64 * 1024
MAX_PEERS = 3


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    return workload_args.parse(__doc__, SETTINGS,
                               fine="8,192 doubles a rank, iterations of ~50-100 us",
                               coarse="131,072 doubles a rank, iterations of several ms",
                               helps={"size": "state doubles N per rank",
                                      "iters": "timed iterations",
                                      "rounds": "logistic-map sweeps R per iteration"},
                               minimum={"size": MIN_BYTES // 8}, argv=argv)


def graph(p: int, n: int) -> tuple[list[list[int]], dict[tuple[int, int], int]]:
    """Every rank's peers (sorted) and the doubles sent along each direction (src, dst)."""
    rng = np.random.default_rng(SEED)
    want = rng.integers(1, min(MAX_PEERS, p - 1) + 1, size=p)
    peers: list[set[int]] = [set() for _ in range(p)]
    for r in range(p):
        while len(peers[r]) < want[r]:
            free = [s for s in range(p) if s != r and s not in peers[r] and len(peers[s]) < want[s]]
            if not free:
                break
            s = int(rng.choice(free))
            peers[r].add(s)
            peers[s].add(r)
    for r in range(p):
        if not peers[r]:    # everyone else already has what it wanted: take the least connected
            s = min((s for s in range(p) if s != r), key=lambda s: (len(peers[s]), s))
            peers[r].add(s)
            peers[s].add(r)
    top = min(MAX_BYTES, 8 * n)
    sizes = {}
    for r in range(p):
        for s in sorted(peers[r]):
            nbytes = np.exp(rng.uniform(np.log(MIN_BYTES), np.log(top)))
            sizes[(r, s)] = max(1, int(nbytes) // 8)
    return [sorted(x) for x in peers], sizes


def initial(rank: int, n: int) -> np.ndarray:
    return np.random.default_rng([SEED, rank]).random(n)


def fold(x: np.ndarray, received: list[np.ndarray], rounds: int) -> np.ndarray:
    """The state after an iteration: each message (in peer order) averaged into the state's
    first values, then `rounds` sweeps of the logistic map (it keeps values in [0, 1])."""
    for buf in received:
        m = buf.size
        x[:m] = 0.5 * (x[:m] + buf)
    for _ in range(rounds):
        x = 3.9 * x * (1.0 - x)
    return x


def serial(p: int, n: int, iters: int, rounds: int) -> tuple[list[np.ndarray], list[float]]:
    """Every rank's final state and checksum, from one process."""
    peers, sizes = graph(p, n)
    states = [initial(r, n) for r in range(p)]
    sums = [0.0] * p
    for _ in range(iters):
        sent = {(r, s): states[r][:sizes[(r, s)]].copy() for r in range(p) for s in peers[r]}
        for r in range(p):
            states[r] = fold(states[r], [sent[(s, r)] for s in peers[r]], rounds)
            sums[r] += float(np.sum(states[r]))
    return states, sums


def main(argv: list[str] | None = None) -> int:
    ns = parse(argv)
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    if size < 2:
        print("error: irregular needs at least 2 ranks", file=sys.stderr)
        return 2
    n = ns.size
    peers, sizes = graph(size, n)
    mine = peers[rank]
    x = initial(rank, n)
    inbox = [np.empty(sizes[(s, rank)]) for s in mine]
    checksum = 0.0
    total_iters = WARMUP + ns.iters

    t0 = 0.0
    for it in range(total_iters):
        if it == WARMUP:
            comm.Barrier()
            t0 = MPI.Wtime()
        # A send's buffer is the state's prefix itself: fold() changes it only after Waitall.
        reqs = [comm.Irecv(buf, source=s, tag=0) for buf, s in zip(inbox, mine)]
        reqs += [comm.Isend(x[:sizes[(rank, s)]], dest=s, tag=0) for s in mine]
        MPI.Request.Waitall(reqs)
        x = fold(x, inbox, ns.rounds)
        checksum += float(np.sum(x))
    comm.Barrier()
    elapsed = MPI.Wtime() - t0

    results = comm.gather((checksum, x), root=0)
    ok, told = True, None
    if rank == 0:
        print(f"time_s={elapsed:.6f}", flush=True)
        states, sums = serial(size, n, total_iters, ns.rounds)
        ok = all(c == sums[r] and np.array_equal(s, states[r])
                 for r, (c, s) in enumerate(results))
        edges = sum(len(p) for p in peers) // 2
        told = (f"irregular: {edges} edges, {n} doubles, {ns.iters} iterations, P={size}, "
                f"checksum {sum(sums):.6f}")
    return workload_args.verdict(comm, ok, told)


if __name__ == "__main__":
    sys.exit(main())
