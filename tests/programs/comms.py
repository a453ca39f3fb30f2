"""Every communicator constructor, each new communicator used for a collective and a message:
Dup, Clone, Idup, Create, Create_group, Split_type, Create_cart (and its Sub). Rank 0 prints."""
import numpy as np
from mpi4py import MPI

w = MPI.COMM_WORLD
r, n = w.rank, w.size
new, req = w.Idup()
req.Wait()
made = [("Dup", w.Dup()), ("Clone", w.Clone()), ("Idup", new),
        ("Create", w.Create(w.Get_group())),
        ("Create_group", w.Create_group(w.Get_group().Incl(list(range(n - 1))))
         if r < n - 1 else MPI.COMM_NULL),
        ("Split_type", w.Split_type(MPI.COMM_TYPE_SHARED))]
cart = w.Create_cart([n], [True])
made += [("Create_cart", cart), ("Sub", cart.Sub([True]))]
lines = []
for name, c in made:
    if c == MPI.COMM_NULL:
        continue
    total = np.zeros(1)
    c.Allreduce(np.ones(1) * (c.rank + 1), total)
    got = np.zeros(2)
    right, left = (c.rank + 1) % c.size, (c.rank - 1) % c.size
    c.Sendrecv(np.full(2, c.rank, dtype=float), right, 7, got, left, 7)
    lines.append(f"{name} size={c.size} sum={total[0]:g} from_left={got[0]:g}")
src, dst = cart.Shift(0, 1)
everything = w.gather(lines, root=0)
if r == 0:
    for rank, rows in enumerate(everything):
        print(rank, "; ".join(rows))
    print("shift", src, dst)
