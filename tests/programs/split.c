/* Communicators: COMM_WORLD split in two by parity, a duplicate of each half; collectives and
 * point-to-point on them (peers are communicator-local ranks). */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm half, dup;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);   /* reversed order inside */
    MPI_Comm_dup(half, &dup);
    int hr, hs, x = rank, total = 0;
    MPI_Comm_rank(half, &hr);
    MPI_Comm_size(half, &hs);
    MPI_Allreduce(&x, &total, 1, MPI_INT, MPI_SUM, half);
    MPI_Bcast(&total, 1, MPI_INT, hs - 1, dup);
    if (hs > 1) {
        int got = -1;
        if (hr == 0) MPI_Send(&x, 1, MPI_INT, 1, 9, dup);
        if (hr == 1) MPI_Recv(&got, 1, MPI_INT, 0, 9, dup, MPI_STATUS_IGNORE);
        total += got;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    printf("rank %d: half rank %d of %d, total %d\n", rank, hr, hs, total);
    MPI_Comm_free(&dup);
    MPI_Comm_free(&half);
    MPI_Finalize();
    return 0;
}
