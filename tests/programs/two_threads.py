"""Calls MPI from two threads at once, at mpi4py's default thread level (the program sets no
mpi4py.rc.thread_level): on rank 0 a second thread blocks in Recv while the main thread enters a
Barrier; rank 1 sends that message only once the Barrier is done, so the two calls overlap.
MPICH grants MPI_THREAD_MULTIPLE, so the program is correct MPI and prints the same traced or
not."""
import threading
import time

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
comm.Barrier()
buf = bytearray(4)
if rank == 0:
    entered = threading.Event()

    def receive() -> None:
        entered.set()
        comm.Recv(buf, source=1, tag=7)

    worker = threading.Thread(target=receive)
    worker.start()
    entered.wait()
    time.sleep(0.1)          # the worker is inside Recv by now
    comm.Barrier()           # overlaps the worker's Recv: rank 1 sends only after it
    worker.join()
    print("rank 0 received", bytes(buf))
else:
    comm.Barrier()
    comm.Send(b"abcd", dest=0, tag=7)
comm.Barrier()
if rank == 0:
    print("done")        # rank 0 alone prints: two ranks' lines may interleave
