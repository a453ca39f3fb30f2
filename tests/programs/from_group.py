"""MPI 4's communicators made from a group (the sessions model): an intracommunicator from
COMM_WORLD's group (traced, rows on it) and an intercommunicator from two groups (counted)."""
from mpi4py import MPI
import numpy as np
w = MPI.COMM_WORLD
assert isinstance(w, MPI.Intracomm) and issubclass(type(w), MPI.Intracomm) and isinstance(w, MPI.Comm)
g = w.Get_group()
c = MPI.Intracomm.Create_from_group(g, "tag.x")
assert isinstance(c, MPI.Intracomm)
b = np.zeros(4)
c.Allreduce(np.ones(4), b)
c.Barrier()
if w.rank == 0:
    half = g.Incl([0])
else:
    half = g.Incl([1])
ic = MPI.Intercomm.Create_from_groups(half, 0, g.Incl([1 - w.rank]), 0, "tag.y")
assert isinstance(ic, MPI.Intercomm)
ic.Barrier()
if w.rank == 0:
    print("done", b[0])
c.Free(); ic.Free()
