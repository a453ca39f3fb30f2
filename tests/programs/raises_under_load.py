"""Rank 1 raises after a few messages; the other ranks wait for it. Two timings a loaded
machine gives, made deterministic by the arguments:

  --hold S          once rank 0 is killed, its trace records stay held open S seconds (a
                    forked helper in a session of its own keeps only that file): a rank still
                    exiting, its files not yet released, when the launcher is done
  --abort-after S   rank 0 calls MPI_Abort S seconds after rank 1 raised, while rank 1 is still
                    in its exception hook (writing its trace): an abort that comes first
"""
import os
import sys
import time

import numpy as np
from mpi4py import MPI

args = dict(zip(sys.argv[1::2], map(float, sys.argv[2::2])))
comm = MPI.COMM_WORLD
buf = np.zeros(4)
for i in range(3):
    if comm.rank == 0:
        comm.Send(buf, 1, tag=i)
    elif comm.rank == 1:
        comm.Recv(buf, 0, tag=i)
comm.Barrier()
if comm.rank == 1:
    raise RuntimeError("deliberate failure on rank 1")
if comm.rank == 0 and args.get("--hold"):
    rank0 = os.getpid()
    if os.fork() == 0:
        os.setsid()              # out of the job's process group: the abort does not kill it
        try:
            for fd in map(int, os.listdir("/proc/self/fd")):
                try:
                    if not os.readlink(f"/proc/self/fd/{fd}").endswith("events.raw"):
                        os.close(fd)
                except OSError:
                    pass                 # the listing's own descriptor, gone
            waited = time.monotonic()
            while os.getppid() == rank0 and time.monotonic() - waited < 60:
                time.sleep(0.01)         # until rank 0 is gone
            time.sleep(args["--hold"])
        finally:
            os._exit(0)
if comm.rank == 0 and args.get("--abort-after"):
    time.sleep(args["--abort-after"])
    comm.Abort(5)
comm.Recv(buf, 1, tag=99)
