"""A program (run by `collect --program`) that marks a phase with instrument.region: under
`--recorder auto` the Python tracer records it, since the PMPI library records no regions."""
import numpy as np
from mpi4py import MPI

import instrument

comm = MPI.COMM_WORLD
with instrument.region("work", size=1000):
    x = np.sort(np.random.default_rng(comm.Get_rank()).random(1000))
comm.Barrier()
