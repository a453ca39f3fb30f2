"""Asks for MPI_THREAD_MULTIPLE itself and calls MPI from two threads."""
import threading

import mpi4py

mpi4py.rc.thread_level = "multiple"
from mpi4py import MPI  # noqa: E402

w = MPI.COMM_WORLD
t = threading.Thread(target=w.Barrier)
t.start()
w.Barrier()
t.join()
print("done")
