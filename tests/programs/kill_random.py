"""One rank SIGKILLs itself at a seeded random point (rank, round and phase drawn from --seed):
ring messages with Isend/Irecv + Waitall, a blocking exchange with the neighbour, an Allreduce.
Run with a small buffer (HINDSIGHT_BUFFER_EVENTS=16) so that row groups were flushed before."""
import argparse
import os
import random
import signal

import numpy as np
from mpi4py import MPI

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, required=True)
parser.add_argument("--rounds", type=int, default=30)
args = parser.parse_args()
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
rng = random.Random(args.seed)
victim = rng.randrange(size)
when = (rng.randrange(3, args.rounds - 2), rng.randrange(3))     # (round, phase)
buf = np.zeros(64, np.uint8)
inc = np.empty_like(buf)
right, left = (rank + 1) % size, (rank - 1) % size


def maybe_die(i: int, phase: int) -> None:
    if rank == victim and (i, phase) == when:
        os.kill(os.getpid(), signal.SIGKILL)


for i in range(args.rounds):
    maybe_die(i, 0)
    reqs = [comm.Irecv(inc, source=left, tag=i), comm.Isend(buf, dest=right, tag=i)]
    MPI.Request.Waitall(reqs)
    maybe_die(i, 1)
    if rank % 2 == 0 and rank + 1 < size:          # pairs (0, 1), (2, 3), ...
        comm.Send(buf, dest=rank + 1, tag=1000 + i)
    elif rank % 2 == 1:
        comm.Recv(inc, source=rank - 1, tag=1000 + i)
    maybe_die(i, 2)
    out = np.zeros(1)
    comm.Allreduce(np.ones(1), out, op=MPI.SUM)
