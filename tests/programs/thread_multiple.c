/* Asks for MPI_THREAD_MULTIPLE: the PMPI tracer refuses such a program at start-up. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    printf("started with thread level %d\n", provided);
    MPI_Finalize();
    return 0;
}
