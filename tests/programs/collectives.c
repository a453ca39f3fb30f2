/* Every blocking collective hindsight traces, once each on COMM_WORLD. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    enum { N = 8 };
    double a[N], b[N * 16];
    int counts[16], displs[16];
    for (int i = 0; i < N; i++) a[i] = rank + i;
    for (int i = 0; i < size; i++) { counts[i] = N; displs[i] = i * N; }
    double *all = malloc(sizeof(double) * N * size);
    double check = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Bcast(a, N, MPI_DOUBLE, 1 % size, MPI_COMM_WORLD);
    MPI_Reduce(a, b, N, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Allreduce(a, b, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    check += b[0];
    MPI_Gather(a, N, MPI_DOUBLE, all, N, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Gatherv(a, N, MPI_DOUBLE, all, counts, displs, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Scatter(all, N, MPI_DOUBLE, a, N, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Scatterv(all, counts, displs, MPI_DOUBLE, a, N, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Allgather(a, N, MPI_DOUBLE, all, N, MPI_DOUBLE, MPI_COMM_WORLD);
    MPI_Allgatherv(a, N, MPI_DOUBLE, all, counts, displs, MPI_DOUBLE, MPI_COMM_WORLD);
    check += all[N * (size - 1)];
    MPI_Alltoall(all, N, MPI_DOUBLE, b, N, MPI_DOUBLE, MPI_COMM_WORLD);
    MPI_Alltoallv(all, counts, displs, MPI_DOUBLE, b, counts, displs, MPI_DOUBLE,
                  MPI_COMM_WORLD);
    MPI_Scan(a, b, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Exscan(a, b, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Reduce_scatter(all, b, counts, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Reduce_scatter_block(all, b, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, b, N, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    check += b[0];
    printf("rank %d: check %.1f\n", rank, check);
    free(all);
    MPI_Finalize();
    return 0;
}
