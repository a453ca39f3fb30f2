/* Persistent requests in a ring, the scenario of persistent.py: Send_init/Ssend_init/Recv_init
 * (one from MPI_ANY_SOURCE), Start, Startall, Wait, Waitall, 3 rounds each. With the argument
 * "all", then an Rsend_init started after the matching receive is posted, a
 * Sendrecv_replace around the ring and a Startall of two sends and two receives. Prints each rank's sum of what it received. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int right = (r + 1) % n, left = (r + n - 1) % n;
    double out[4] = {r, r, r, r}, got[4] = {0}, total = 0;

    MPI_Request pq[2];                                   /* receive first, as persistent.py */
    MPI_Send_init(out, 4, MPI_DOUBLE, right, 5, MPI_COMM_WORLD, &pq[1]);
    MPI_Recv_init(got, 4, MPI_DOUBLE, left, 5, MPI_COMM_WORLD, &pq[0]);
    for (int k = 0; k < 3; k++) {
        MPI_Startall(2, pq);
        MPI_Waitall(2, pq, MPI_STATUSES_IGNORE);
        for (int i = 0; i < 4; i++) total += got[i];
    }
    MPI_Request ss, rr;
    MPI_Ssend_init(out, 4, MPI_DOUBLE, right, 6, MPI_COMM_WORLD, &ss);
    MPI_Recv_init(got, 4, MPI_DOUBLE, MPI_ANY_SOURCE, 6, MPI_COMM_WORLD, &rr);
    for (int k = 0; k < 3; k++) {
        MPI_Start(&rr);
        MPI_Start(&ss);
        MPI_Wait(&ss, MPI_STATUS_IGNORE);
        MPI_Wait(&rr, MPI_STATUS_IGNORE);
        for (int i = 0; i < 4; i++) total += got[i];
    }
    MPI_Request_free(&pq[0]);
    MPI_Request_free(&pq[1]);
    MPI_Request_free(&ss);
    MPI_Request_free(&rr);

    if (argc > 1 && strcmp(argv[1], "all") == 0) {
        MPI_Request rs, recv;
        MPI_Rsend_init(out, 2, MPI_DOUBLE, right, 7, MPI_COMM_WORLD, &rs);
        MPI_Irecv(got, 2, MPI_DOUBLE, left, 7, MPI_COMM_WORLD, &recv);
        MPI_Barrier(MPI_COMM_WORLD);                     /* every receive is posted */
        MPI_Start(&rs);
        MPI_Wait(&rs, MPI_STATUS_IGNORE);
        MPI_Wait(&recv, MPI_STATUS_IGNORE);
        total += got[0] + got[1];
        MPI_Request_free(&rs);
        double buf[3] = {r, r, r};
        MPI_Sendrecv_replace(buf, 3, MPI_DOUBLE, right, 8, left, 8, MPI_COMM_WORLD,
                             MPI_STATUS_IGNORE);
        total += buf[0] + buf[1] + buf[2];
        /* one Startall of two sends then two receives: calls holding two posts of one op */
        double two[2] = {r, r}, back[2] = {0};
        MPI_Request q4[4];
        MPI_Send_init(&two[0], 1, MPI_DOUBLE, right, 9, MPI_COMM_WORLD, &q4[0]);
        MPI_Send_init(&two[1], 1, MPI_DOUBLE, right, 10, MPI_COMM_WORLD, &q4[1]);
        MPI_Recv_init(&back[0], 1, MPI_DOUBLE, left, 9, MPI_COMM_WORLD, &q4[2]);
        MPI_Recv_init(&back[1], 1, MPI_DOUBLE, left, 10, MPI_COMM_WORLD, &q4[3]);
        MPI_Startall(4, q4);
        MPI_Waitall(4, q4, MPI_STATUSES_IGNORE);
        total += back[0] + back[1];
        for (int i = 0; i < 4; i++) MPI_Request_free(&q4[i]);
    }

    double *sums = malloc((size_t)n * sizeof(double));
    MPI_Gather(&total, 1, MPI_DOUBLE, sums, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (r == 0) {
        printf("[");
        for (int i = 0; i < n; i++) printf(i ? ", %.1f" : "%.1f", sums[i]);
        printf("]\n");
    }
    free(sums);
    MPI_Finalize();
    return 0;
}
