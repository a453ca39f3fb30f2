/* Every collective hindsight traces, blocking and non-blocking, once each on COMM_WORLD. */
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
    /* the same again, non-blocking, all in flight together, completed by one Waitall */
    double c[N], d[N], e[N], f[N], g[N], h[N], u[N], v[N], w[N];
    double *all2 = malloc(sizeof(double) * N * size), *all3 = malloc(sizeof(double) * N * size);
    double *all4 = malloc(sizeof(double) * N * size), *all5 = malloc(sizeof(double) * N * size);
    double *b2 = malloc(sizeof(double) * N * size);
    MPI_Request q[16];
    MPI_Ibarrier(MPI_COMM_WORLD, &q[0]);
    MPI_Ibcast(c, N, MPI_DOUBLE, 1 % size, MPI_COMM_WORLD, &q[1]);
    MPI_Ireduce(a, d, N, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD, &q[2]);
    MPI_Iallreduce(a, e, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q[3]);
    MPI_Igather(a, N, MPI_DOUBLE, all2, N, MPI_DOUBLE, 0, MPI_COMM_WORLD, &q[4]);
    MPI_Igatherv(a, N, MPI_DOUBLE, all3, counts, displs, MPI_DOUBLE, 0, MPI_COMM_WORLD, &q[5]);
    MPI_Iscatter(all, N, MPI_DOUBLE, f, N, MPI_DOUBLE, 0, MPI_COMM_WORLD, &q[6]);
    MPI_Iscatterv(all, counts, displs, MPI_DOUBLE, g, N, MPI_DOUBLE, 0, MPI_COMM_WORLD, &q[7]);
    MPI_Iallgather(a, N, MPI_DOUBLE, all4, N, MPI_DOUBLE, MPI_COMM_WORLD, &q[8]);
    MPI_Iallgatherv(a, N, MPI_DOUBLE, all5, counts, displs, MPI_DOUBLE, MPI_COMM_WORLD, &q[9]);
    MPI_Ialltoall(all, N, MPI_DOUBLE, b2, N, MPI_DOUBLE, MPI_COMM_WORLD, &q[10]);
    MPI_Ialltoallv(all, counts, displs, MPI_DOUBLE, b, counts, displs, MPI_DOUBLE,
                   MPI_COMM_WORLD, &q[11]);
    MPI_Iscan(a, h, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q[12]);
    MPI_Iexscan(a, u, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q[13]);
    MPI_Ireduce_scatter(all, v, counts, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q[14]);
    MPI_Ireduce_scatter_block(all, w, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q[15]);
    MPI_Waitall(16, q, MPI_STATUSES_IGNORE);
    check += e[0];
    free(all2);
    free(all3);
    free(all4);
    free(all5);
    free(b2);
    printf("rank %d: check %.1f\n", rank, check);
    free(all);
    MPI_Finalize();
    return 0;
}
