"""An mpi4py program whose interpreter teardown is slow: an object whose __del__ sleeps 2 s when
the module is torn down, after the program's code and its exit handlers. It spins 0.2 s, meets
at a barrier and writes the names of the modules it has loaded to ARGV[1].<rank>."""
import sys
import time

from mpi4py import MPI


class SlowAtTeardown:
    def __del__(self):
        time.sleep(2.0)


keep = SlowAtTeardown()
t0 = time.monotonic()
while time.monotonic() - t0 < 0.2:
    pass
MPI.COMM_WORLD.Barrier()
with open(f"{sys.argv[1]}.{MPI.COMM_WORLD.Get_rank()}", "w") as f:
    f.write("\n".join(sorted(sys.modules)))
