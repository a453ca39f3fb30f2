/* Three barriers, then rank 1 dereferences a null pointer (SIGSEGV): the library's handler
 * marks it, and mpiexec kills the others. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 0; i < 3; i++) MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        volatile int *p = NULL;
        *p = 1;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
