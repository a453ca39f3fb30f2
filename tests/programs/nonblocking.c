/* Non-blocking exchanges: Isend/Irecv with Waitall, an ANY_SOURCE Irecv completed by Wait,
 * Waitany, Waitsome and a Test loop, a Sendrecv, and a Probe before a Recv. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    int out[100], in[2][100];
    MPI_Request r[4];
    for (int i = 0; i < 100; i++) out[i] = rank * 1000 + i;
    long sum = 0;
    for (int it = 0; it < 5; it++) {                       /* 4 requests, one Waitall */
        MPI_Irecv(in[0], 100, MPI_INT, prev, 1, MPI_COMM_WORLD, &r[0]);
        MPI_Irecv(in[1], 100, MPI_INT, next, 2, MPI_COMM_WORLD, &r[1]);
        MPI_Isend(out, 100, MPI_INT, next, 1, MPI_COMM_WORLD, &r[2]);
        MPI_Isend(out, 50, MPI_INT, prev, 2, MPI_COMM_WORLD, &r[3]);
        MPI_Waitall(4, r, MPI_STATUSES_IGNORE);
        sum += in[0][0] + in[1][49];
    }
    /* ANY_SOURCE / ANY_TAG receive completed by Wait */
    MPI_Irecv(in[0], 100, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &r[0]);
    MPI_Send(out, 10, MPI_INT, next, 7, MPI_COMM_WORLD);
    MPI_Status st;
    MPI_Wait(&r[0], &st);
    sum += st.MPI_SOURCE + st.MPI_TAG;
    /* Waitany then Waitsome */
    MPI_Irecv(in[0], 100, MPI_INT, prev, 3, MPI_COMM_WORLD, &r[0]);
    MPI_Isend(out, 20, MPI_INT, next, 3, MPI_COMM_WORLD, &r[1]);
    int idx, left = 2;
    while (left > 0) {
        MPI_Waitany(2, r, &idx, MPI_STATUS_IGNORE);
        left--;
    }
    MPI_Irecv(in[0], 100, MPI_INT, prev, 4, MPI_COMM_WORLD, &r[0]);
    MPI_Isend(out, 30, MPI_INT, next, 4, MPI_COMM_WORLD, &r[1]);
    int outcount, indices[2];
    left = 2;
    while (left > 0) {
        MPI_Waitsome(2, r, &outcount, indices, MPI_STATUSES_IGNORE);
        left -= outcount;
    }
    /* a Test loop */
    MPI_Irecv(in[0], 100, MPI_INT, prev, 5, MPI_COMM_WORLD, &r[0]);
    MPI_Send(out, 40, MPI_INT, next, 5, MPI_COMM_WORLD);
    int flag = 0;
    while (!flag) MPI_Test(&r[0], &flag, MPI_STATUS_IGNORE);
    /* Sendrecv, then Probe + Recv */
    MPI_Sendrecv(out, 60, MPI_INT, next, 6, in[0], 100, MPI_INT, prev, 6, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    MPI_Send(out, 70, MPI_INT, next, 8, MPI_COMM_WORLD);
    MPI_Probe(prev, 8, MPI_COMM_WORLD, &st);
    MPI_Recv(in[0], 100, MPI_INT, st.MPI_SOURCE, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    sum += in[0][69];
    printf("rank %d: sum %ld\n", rank, sum);
    MPI_Finalize();
    return 0;
}
