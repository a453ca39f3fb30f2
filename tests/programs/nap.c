/* A run of a known least length: rank 0 sleeps NAP milliseconds (first argument, default 200)
 * before a barrier, then a token goes once around a ring. Every rank reaches MPI_Finalize at
 * least NAP ms after MPI_Init returned. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size, nap = argc > 1 ? atoi(argv[1]) : 200;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0) {
        struct timespec ts = {nap / 1000, (long)(nap % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0) {}
    }
    MPI_Barrier(MPI_COMM_WORLD);
    int token = 0;
    if (rank == 0) {
        MPI_Send(&token, 1, MPI_INT, 1 % size, 0, MPI_COMM_WORLD);
        MPI_Recv(&token, 1, MPI_INT, size - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        printf("token went round %d ranks\n", token + 1);
    } else {
        MPI_Recv(&token, 1, MPI_INT, rank - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        token++;
        MPI_Send(&token, 1, MPI_INT, (rank + 1) % size, 0, MPI_COMM_WORLD);
    }
    MPI_Finalize();
    return 0;
}
