"""Neighbourhood collectives on a periodic 1-D Cartesian ring and on a distributed graph (each
rank sends to the next two ranks), blocking, pickled and non-blocking; every result checked."""
import numpy as np
from mpi4py import MPI

w = MPI.COMM_WORLD
r, n = w.rank, w.size
ring = w.Create_cart([n], [True])
left, right = ring.Shift(0, 1)
got = np.zeros(2 * 4)
ring.Neighbor_allgather(np.full(4, float(r)), got)             # from left, then from right
checks = [got.tolist() == [float(left)] * 4 + [float(right)] * 4]
a2a = np.zeros(2 * 3)
ring.Neighbor_alltoall(np.array([r, r, r, -r, -r, -r], float), a2a)   # 3 doubles each way
checks.append(a2a.tolist() == [-float(left)] * 3 + [float(right)] * 3)
objs = ring.neighbor_allgather({"rank": r})
checks.append([o["rank"] for o in objs] == [left, right])
req = ring.Ineighbor_allgather(np.full(4, float(r)), got)
req.Wait()
checks.append(got.tolist() == [float(left)] * 4 + [float(right)] * 4)

dests = [(r + 1) % n, (r + 2) % n]
sources = [(r - 1) % n, (r - 2) % n]
graph = w.Create_dist_graph_adjacent(sources, dests)
inbox = np.zeros(2 * 2)
graph.Neighbor_allgatherv(np.full(2, float(r)), [inbox, [2, 2], [0, 2], MPI.DOUBLE])
checks.append(inbox.tolist() == [float(s) for s in sources for _ in range(2)])
told = w.gather(f"rank {r}: {len(checks)} checks, {'all passed' if all(checks) else 'FAILED'}")
if r == 0:
    print("\n".join(told))
