"""Uses the explicit instrumentation API: start, regions with sizes, finish."""
import sys

import numpy as np

import instrument

trace_dir = sys.argv[1]
comm = instrument.start(trace_dir, app="regions-test", paradigm="tree", args={"n": 1000})
rank = comm.Get_rank()
with instrument.region("task", size=50000):
    x = np.sort(np.random.default_rng(rank).random(50000))
    with instrument.region("merge", size=10):
        comm.Barrier()


@instrument.region("combine", size=7)
def combine():
    return comm.allreduce(float(x[0]))


combine()
instrument.finish(result_verified=True)
