/* Two ranks that each wait to receive from the other first: a deadlock. `collect --timeout`
 * stops it and records where each rank was (instrument/stopped.py). Built with -g. With the
 * argument "counted", rank 0 waits instead in an MPI_Alltoallw that rank 1 never joins (a call
 * the PMPI library counts, not traces). */
#include <mpi.h>
#include <string.h>

int main(int argc, char **argv) {
    int rank, buf = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    if (argc > 1 && strcmp(argv[1], "counted") == 0 && rank == 0) {
        int one[2] = {1, 1}, at[2] = {0, 0}, in[2];
        MPI_Datatype ints[2] = {MPI_INT, MPI_INT};
        MPI_Alltoallw(one, one, at, ints, in, one, at, ints, MPI_COMM_WORLD);
    }
    if (rank == 0)
        MPI_Recv(&buf, 1, MPI_INT, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else
        MPI_Recv(&buf, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(&buf, 1, MPI_INT, 1 - rank, 7, MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
