/* A ring: each rank sends to the next and receives from the previous, ITER times. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size, iters = argc > 1 ? atoi(argv[1]) : 10;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double buf[256];
    long sum = 0;
    for (int i = 0; i < 256; i++) buf[i] = rank;
    for (int it = 0; it < iters; it++) {
        int next = (rank + 1) % size, prev = (rank + size - 1) % size;
        if (rank % 2 == 0) {
            MPI_Send(buf, 256, MPI_DOUBLE, next, it, MPI_COMM_WORLD);
            MPI_Recv(buf, 256, MPI_DOUBLE, prev, it, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            double tmp[256];
            MPI_Recv(tmp, 256, MPI_DOUBLE, prev, it, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, 256, MPI_DOUBLE, next, it, MPI_COMM_WORLD);
            for (int i = 0; i < 256; i++) buf[i] = tmp[i];
        }
        sum += (long)buf[0];
    }
    printf("rank %d of %d: sum %ld\n", rank, size, sum);
    MPI_Finalize();
    return 0;
}
