/* Asks for MPI_THREAD_MULTIPLE and, granted it, calls MPI from two threads at once (a thread
 * receives the message the main thread sends to its own rank): the PMPI tracer refuses such a
 * program at start-up. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>

static void *receive(void *arg) {
    int *got = arg;
    MPI_Recv(got, 1, MPI_INT, MPI_ANY_SOURCE, 5, MPI_COMM_SELF, MPI_STATUS_IGNORE);
    return NULL;
}

int main(int argc, char **argv) {
    int provided = 0, got = -1, rank = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    printf("started with thread level %d\n", provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (provided == MPI_THREAD_MULTIPLE) {
        pthread_t t;
        pthread_create(&t, NULL, receive, &got);
        MPI_Send(&rank, 1, MPI_INT, 0, 5, MPI_COMM_SELF);
        pthread_join(t, NULL);
    }
    MPI_Finalize();
    return got == rank || provided != MPI_THREAD_MULTIPLE ? 0 : 1;
}
