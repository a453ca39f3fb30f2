"""A small built-in mpi4py program for the demo and the tests: a plain program, no hindsight
imports, so it is traced the way any user's program is (`python -m instrument.run`).

Each of `--rounds` rounds: compute (`--work` sorts of a random array), pass a token of `--bytes`
bytes around the ring with Sendrecv, then an Allreduce of one float. Message count per rank is
known exactly: rounds x (Sendrecv_send + Sendrecv_recv + Allreduce).
"""

import argparse

import numpy as np
from mpi4py import MPI


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--bytes", type=int, default=4096)
    parser.add_argument("--work", type=int, default=20000, help="elements sorted per round")
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    rng = np.random.default_rng(rank)
    token = np.zeros(args.bytes, np.uint8)
    incoming = np.empty_like(token)
    total = 0.0
    for i in range(args.rounds):
        x = np.sort(rng.random(args.work))
        comm.Sendrecv(token, dest=(rank + 1) % size, sendtag=i, recvbuf=incoming,
                      source=(rank - 1) % size, recvtag=i)
        token, incoming = incoming, token
        out = np.zeros(1)
        comm.Allreduce(np.array([x[0] if len(x) else 0.0]), out, op=MPI.SUM)
        total += out[0]
    if rank == 0:
        print(f"ring: {size} ranks, {args.rounds} rounds, checksum {total:.6f}")


if __name__ == "__main__":
    main()
