"""A small built-in mpi4py program with the calls of a typical stencil code: a plain program, no
hindsight imports, traced the way any user's program is. The ahead-of-time build's sample
(``hindsight.aot_build``) traces it, so that the kernels replaying such traces are compiled.

A 1-D domain decomposition over ``--steps`` steps. Each step: post the halo receives from both
neighbours and send the halos (Irecv/Isend of ``--bytes`` bytes, Waitall), compute (``--work``
sorts of a random array), and reduce the residual with an Iallreduce that overlaps the next
step's halo exchange. The ranks form rows of two (``Comm.Split``); every ``--every`` steps each
row broadcasts from its leader and reduces to it, and rank 0 takes one status message from
every other rank in arrival order (``MPI.ANY_SOURCE``).
"""

import argparse

import numpy as np
from mpi4py import MPI

STATUS_TAG = 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--bytes", type=int, default=2048)
    parser.add_argument("--work", type=int, default=5000, help="elements sorted per step")
    parser.add_argument("--every", type=int, default=5, help="steps between row reductions")
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    row = comm.Split(color=rank // 2, key=rank)
    rng = np.random.default_rng(rank)
    left, right = (rank - 1) % size, (rank + 1) % size
    halo_out = [np.full(args.bytes, rank, np.uint8) for _ in range(2)]
    halo_in = [np.empty(args.bytes, np.uint8) for _ in range(2)]
    residual, total = np.zeros(1), np.zeros(1)
    pending = MPI.REQUEST_NULL
    for step in range(args.steps):
        reqs = [comm.Irecv(halo_in[0], source=left, tag=step),
                comm.Irecv(halo_in[1], source=right, tag=step),
                comm.Isend(halo_out[0], dest=left, tag=step),
                comm.Isend(halo_out[1], dest=right, tag=step)]
        MPI.Request.Waitall(reqs)
        pending.Wait()
        residual[0] = np.sort(rng.random(args.work))[0] + halo_in[0][0] + halo_in[1][0]
        pending = comm.Iallreduce(residual, total, op=MPI.SUM)
        if step % args.every == args.every - 1:
            seed = np.array([step], np.int64)
            row.Bcast(seed, root=0)
            row.Reduce(residual, np.zeros(1), op=MPI.MAX, root=0)
            if rank == 0:
                status = np.empty(1, np.int64)
                for _ in range(size - 1):
                    comm.Recv(status, source=MPI.ANY_SOURCE, tag=STATUS_TAG)
            else:
                comm.Send(np.array([step], np.int64), dest=0, tag=STATUS_TAG)
    pending.Wait()
    row.Free()
    if rank == 0:
        print(f"halo: {size} ranks, {args.steps} steps, residual {total[0]:.6f}")


if __name__ == "__main__":
    main()
