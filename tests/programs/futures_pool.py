"""An mpi4py.futures pool: its manager thread spawns the workers and talks to them while the
main thread waits for the results; the main thread calls MPI again once the pool is shut."""
from mpi4py import MPI
from mpi4py.futures import MPIPoolExecutor


def square(x: int) -> int:
    return x * x


if __name__ == "__main__":
    with MPIPoolExecutor(max_workers=2) as pool:
        print(sorted(pool.map(square, range(6))))
    MPI.COMM_WORLD.Barrier()
    print("done")
