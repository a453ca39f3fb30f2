/* MPI_Request_free of active requests, the scenario of request_free.py (2 ranks). Rank 0 frees
 * an Isend and a started persistent send (each a Request_free row; rank 1 receives them with
 * MPI_Recv), and frees two inactive persistent sends, one never started, one started and
 * completed (no row: that is how a program releases them). Rank 1 frees an Irecv that named
 * its source and tag; rank 0's Ssend fills it (matched as any receive). Rank 1 prints the sum
 * of what its MPI_Recv calls received. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    double a[4] = {1, 2, 3, 4}, b[2] = {5, 6};
    MPI_Request q;
    if (r == 0) {
        MPI_Isend(a, 4, MPI_DOUBLE, 1, 1, MPI_COMM_WORLD, &q);
        MPI_Request_free(&q);                           /* active: a Request_free row */
        MPI_Send_init(b, 2, MPI_DOUBLE, 1, 2, MPI_COMM_WORLD, &q);
        MPI_Start(&q);
        MPI_Request_free(&q);                           /* started: a Request_free row */
        MPI_Send_init(b, 2, MPI_DOUBLE, 1, 3, MPI_COMM_WORLD, &q);
        MPI_Start(&q);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
        MPI_Request_free(&q);                           /* inactive: no row */
        MPI_Send_init(b, 2, MPI_DOUBLE, 1, 9, MPI_COMM_WORLD, &q);
        MPI_Request_free(&q);                           /* never started: no row */
        MPI_Ssend(a, 2, MPI_DOUBLE, 1, 4, MPI_COMM_WORLD);  /* into rank 1's freed Irecv */
        MPI_Send(a, 1, MPI_DOUBLE, 1, 5, MPI_COMM_WORLD);
    } else if (r == 1) {
        double late[2], got[4], total = 0;
        MPI_Irecv(late, 2, MPI_DOUBLE, 0, 4, MPI_COMM_WORLD, &q);
        MPI_Request_free(&q);                           /* active receive: a Request_free row */
        int tags[4] = {1, 2, 3, 5}, counts[4] = {4, 2, 2, 1};
        for (int k = 0; k < 4; k++) {
            MPI_Recv(got, counts[k], MPI_DOUBLE, 0, tags[k], MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            for (int i = 0; i < counts[k]; i++) total += got[i];
        }
        printf("%.1f\n", total);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
