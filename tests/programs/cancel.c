/* Rank 0 posts a receive and cancels it, then receives rank 1's message: one MPI_Cancel. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r, cancelled = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    double x[4] = {1, 2, 3, 4}, y[4];
    if (r == 0) {
        MPI_Request q;
        MPI_Status st;
        MPI_Irecv(y, 4, MPI_DOUBLE, MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, &q);
        MPI_Cancel(&q);
        MPI_Wait(&q, &st);
        MPI_Test_cancelled(&st, &cancelled);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (r == 0) MPI_Recv(y, 4, MPI_DOUBLE, 1, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (r == 1) MPI_Send(x, 4, MPI_DOUBLE, 0, 5, MPI_COMM_WORLD);
    if (r == 0) printf("cancelled %d\n", cancelled);
    MPI_Finalize();
    return 0;
}
