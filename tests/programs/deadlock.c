/* Two ranks that each wait to receive from the other first: a deadlock. `collect --timeout`
 * stops it and records where each rank was (instrument/stopped.py). Built with -g. With the
 * argument "mprobe", each waits in a matched probe (a call the PMPI library counts, not
 * traces) instead. */
#include <mpi.h>
#include <string.h>

int main(int argc, char **argv) {
    int rank, buf = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    if (argc > 1 && strcmp(argv[1], "mprobe") == 0) {
        MPI_Message msg;
        MPI_Mprobe(1 - rank, 7, MPI_COMM_WORLD, &msg, MPI_STATUS_IGNORE);
    }
    if (rank == 0)
        MPI_Recv(&buf, 1, MPI_INT, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else
        MPI_Recv(&buf, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(&buf, 1, MPI_INT, 1 - rank, 7, MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
