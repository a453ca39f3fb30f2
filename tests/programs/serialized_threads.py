"""Calls MPI from a second thread, one thread at a time (the main thread waits for the worker
before it calls MPI again), at mpi4py's default thread level: each rank's calls follow each
other, so both recorders record them whole."""
import threading
from array import array

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
peer = 1 - rank
comm.Barrier()
got = []


def exchange() -> None:
    if rank == 0:
        comm.send({"from": 0}, dest=peer, tag=3)
        got.append(comm.recv(source=peer, tag=4))
    else:
        got.append(comm.recv(source=peer, tag=3))
        comm.send({"from": 1}, dest=peer, tag=4)


worker = threading.Thread(target=exchange)
worker.start()
worker.join()
# what each rank got, summed (rank 0 alone prints: two ranks' lines may interleave)
right = array("i", [0])
comm.Allreduce(array("i", [got == [{"from": peer}]]), right)
if rank == 0:
    print(f"both ranks got their peer's message: {right[0] == 2}")
