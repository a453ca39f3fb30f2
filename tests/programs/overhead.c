/* Per-call cost of MPI calls, for benchmarks/native_overhead.py: rank 0 prints the ns per
 * MPI_Send to MPI_PROC_NULL and per message of a 0-byte ping-pong with rank 1 (half a round
 * trip), each the median of 5 timed loops of ITERS calls. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size, iters = argc > 1 ? atoi(argv[1]) : 100000;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double procnull[5], pingpong[5];
    char b = 0;
    for (int k = 0; k < 5; k++) {
        double t0 = now();
        for (int i = 0; i < iters; i++) MPI_Send(&b, 0, MPI_BYTE, MPI_PROC_NULL, 0, MPI_COMM_WORLD);
        procnull[k] = (now() - t0) / iters;
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = now();
        for (int i = 0; i < iters / 10 && size > 1; i++) {
            if (rank == 0) {
                MPI_Send(&b, 0, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
                MPI_Recv(&b, 0, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                MPI_Recv(&b, 0, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(&b, 0, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
            }
        }
        pingpong[k] = (now() - t0) / (2.0 * (iters / 10));
        MPI_Barrier(MPI_COMM_WORLD);
    }
    qsort(procnull, 5, sizeof(double), cmp);
    qsort(pingpong, 5, sizeof(double), cmp);
    if (rank == 0) printf("procnull_ns %.1f pingpong_ns %.1f\n", procnull[2], pingpong[2]);
    MPI_Finalize();
    return 0;
}
