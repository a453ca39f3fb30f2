/* Two ranks that each wait to receive from the other first: a deadlock. `collect --timeout`
 * stops it and records where each rank was (instrument/stopped.py). Built with -g. With the
 * argument "winwait", each waits instead at the end of an exposure epoch that no one accesses
 * (MPI_Win_wait: a call the PMPI library counts, not traces). */
#include <mpi.h>
#include <string.h>

int main(int argc, char **argv) {
    int rank, buf = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    if (argc > 1 && strcmp(argv[1], "winwait") == 0) {
        MPI_Win win;
        MPI_Group world, other;
        int peer = 1 - rank;
        MPI_Win_create(&buf, sizeof buf, sizeof buf, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
        MPI_Comm_group(MPI_COMM_WORLD, &world);
        MPI_Group_incl(world, 1, &peer, &other);
        MPI_Win_post(other, 0, win);
        MPI_Win_wait(win);
    }
    if (rank == 0)
        MPI_Recv(&buf, 1, MPI_INT, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else
        MPI_Recv(&buf, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(&buf, 1, MPI_INT, 1 - rank, 7, MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
