/* A fine-grained 1-D Jacobi solver: every iteration a halo exchange (two MPI_Sendrecv, to and
 * from MPI_PROC_NULL at the ends), the update of N points a rank, an 8-byte MPI_Allreduce of
 * the residual and an MPI_Iprobe poll for a stop message (none comes).
 *
 *   mpiexec -n P jacobi1d [N=256] [ITERS=20000]
 *
 * At N = 256 an iteration is a few microseconds here: what benchmarks/native_costs.py predicts
 * with and without the profile's costs of calls made from C (rule native_call_costs). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int n = argc > 1 ? atoi(argv[1]) : 256, iters = argc > 2 ? atoi(argv[2]) : 20000;
    double *u = calloc(n + 2, sizeof *u), *v = calloc(n + 2, sizeof *v);
    for (int i = 1; i <= n; i++) u[i] = rank * n + i;
    int left = rank > 0 ? rank - 1 : MPI_PROC_NULL;
    int right = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
    double t0 = MPI_Wtime(), res = 0;
    for (int it = 0; it < iters; it++) {
        MPI_Sendrecv(&u[1], 1, MPI_DOUBLE, left, 0, &u[n + 1], 1, MPI_DOUBLE, right, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv(&u[n], 1, MPI_DOUBLE, right, 1, &u[0], 1, MPI_DOUBLE, left, 1,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        double local = 0;
        for (int i = 1; i <= n; i++) {
            v[i] = 0.5 * (u[i - 1] + u[i + 1]);
            local += (v[i] - u[i]) * (v[i] - u[i]);
        }
        double *t = u; u = v; v = t;
        MPI_Allreduce(&local, &res, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        int flag;
        MPI_Iprobe(MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    }
    if (rank == 0) printf("res %g time %.3f s\n", res, MPI_Wtime() - t0);
    free(u);
    free(v);
    MPI_Finalize();
    return 0;
}
