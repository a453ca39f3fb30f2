"""Every non-blocking collective once, overlapped with computation, completed by Wait, Waitall,
Test and Waitany; each result checked against what the blocking collective gives."""
import numpy as np
from mpi4py import MPI

w = MPI.COMM_WORLD
r, n = w.rank, w.size
mine = np.arange(4, dtype=np.float64) + 10 * r
counts = [4] * n
displs = [4 * i for i in range(n)]


def work() -> float:
    return sum(i * i for i in range(3000))


checks = []
out = np.zeros(4)
req = w.Iallreduce(mine, out)
work()
req.Wait()
checks.append(out.tolist() == (np.arange(4) * n + 10 * sum(range(n))).tolist())

red = np.zeros(4)
scan, exscan = np.zeros(4), np.zeros(4)
reqs = [w.Ireduce(mine, red, root=n - 1), w.Iscan(mine, scan), w.Iexscan(mine, exscan),
        w.Ibarrier()]
work()
MPI.Request.Waitall(reqs)
if r == n - 1:
    checks.append(red.tolist() == out.tolist())
checks.append(scan.tolist() == sum(np.arange(4) + 10 * q for q in range(r + 1)).tolist())
if r > 0:
    checks.append(exscan.tolist() == sum(np.arange(4) + 10 * q for q in range(r)).tolist())

b = mine.copy() if r == 0 else np.zeros(4)
req = w.Ibcast(b, root=0)
while not req.Test():
    work()
checks.append(b.tolist() == [0.0, 1.0, 2.0, 3.0])

g = np.zeros(4 * n)
gv = np.zeros(4 * n) if r == 1 else None
ag, agv = np.zeros(4 * n), np.zeros(4 * n)
reqs = [w.Igather(mine, g if r == 0 else None, root=0),
        w.Igatherv(mine, [gv, counts, displs, MPI.DOUBLE] if r == 1 else None, root=1),
        w.Iallgather(mine, ag), w.Iallgatherv(mine, [agv, counts, displs, MPI.DOUBLE])]
done = 0
while done < len(reqs):
    MPI.Request.Waitany(reqs)
    done += 1
whole = np.concatenate([np.arange(4) + 10 * q for q in range(n)])
checks += [ag.tolist() == whole.tolist(), agv.tolist() == whole.tolist()]
if r == 0:
    checks.append(g.tolist() == whole.tolist())
if r == 1:
    checks.append(gv.tolist() == whole.tolist())

sc, scv = np.zeros(4), np.zeros(4)
a2a, a2av = np.zeros(4 * n), np.zeros(4 * n)
rs, rsb = np.zeros(4), np.zeros(4)
src = np.concatenate([np.arange(4.0) + 100 * q for q in range(n)])
reqs = [w.Iscatter(src if r == 0 else None, sc, root=0),
        w.Iscatterv([src, counts, displs, MPI.DOUBLE] if r == 1 else None, scv, root=1),
        w.Ialltoall(src, a2a), w.Ialltoallv([src, counts, displs, MPI.DOUBLE],
                                            [a2av, counts, displs, MPI.DOUBLE]),
        w.Ireduce_scatter(src, rs, counts), w.Ireduce_scatter_block(src, rsb)]
work()
MPI.Request.Waitall(reqs)
part = (np.arange(4) + 100 * r).tolist()
checks += [sc.tolist() == part, scv.tolist() == part, a2a.tolist() == a2av.tolist(),
           a2a.tolist() == [100.0 * r + j for _ in range(n) for j in range(4)],
           rs.tolist() == rsb.tolist() == (np.array(part) * n).tolist()]
w.Barrier()
told = w.gather(f"rank {r}: {len(checks)} checks, {'all passed' if all(checks) else 'FAILED'}")
if r == 0:
    print("\n".join(told))
