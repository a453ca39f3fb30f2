"""Two outstanding non-blocking collectives completed in different orders on different ranks
(valid MPI: the library advances every pending collective in any call): even ranks Wait for
the first Iallreduce and then the second, odd ranks the other way round; then an Iallreduce and
an Ibcast completed by Waitany over arrays ordered differently per rank. Results checked."""
import numpy as np
from mpi4py import MPI

w = MPI.COMM_WORLD
r, n = w.rank, w.size


def work() -> float:
    return sum(i * i for i in range(20000))


checks = []
a, b = np.arange(8.0) + r, np.arange(16.0) * (r + 1)
sa, sb = np.zeros(8), np.zeros(16)
ra, rb = w.Iallreduce(a, sa), w.Iallreduce(b, sb)
work()
for req in ((ra, rb) if r % 2 == 0 else (rb, ra)):
    req.Wait()
checks.append(sa.tolist() == (np.arange(8.0) * n + sum(range(n))).tolist())
checks.append(sb.tolist() == (np.arange(16.0) * sum(range(1, n + 1))).tolist())

c, sc = np.full(32, float(r)), np.zeros(32)
bc = np.arange(4.0) if r == 0 else np.zeros(4)
reqs = [w.Iallreduce(c, sc), w.Ibcast(bc, root=0)]
work()
order = reqs if r % 2 == 0 else reqs[::-1]
MPI.Request.Waitany(order)
MPI.Request.Waitany(order)
checks.append(sc.tolist() == [float(sum(range(n)))] * 32)
checks.append(bc.tolist() == [0.0, 1.0, 2.0, 3.0])
w.Barrier()
told = w.gather(f"rank {r}: {len(checks)} checks, {'all passed' if all(checks) else 'FAILED'}")
if r == 0:
    print("\n".join(told))
