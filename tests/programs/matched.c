/* Matched probes on 2 ranks, both ways: each rank sends its partner ROUNDS messages of growing
 * size, then receives the partner's, alternately by MPI_Mprobe + MPI_Mrecv (any source, any
 * tag: the pickle API's recv) and by polling MPI_Improbe until it matches, then MPI_Imrecv and
 * MPI_Wait. Prints the sum each rank received. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define ROUNDS 6

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    int peer = 1 - r;
    int out[ROUNDS + 1], *in = malloc((ROUNDS + 1) * sizeof(int));
    for (int k = 0; k <= ROUNDS; k++) out[k] = 100 * r + k;
    MPI_Request sends[ROUNDS];
    for (int k = 0; k < ROUNDS; k++)
        MPI_Isend(out, k + 1, MPI_INT, peer, 20 + k, MPI_COMM_WORLD, &sends[k]);
    long sum = 0;
    for (int k = 0; k < ROUNDS; k++) {
        MPI_Message m;
        MPI_Status st;
        int count = 0;
        if (k % 2 == 0) {
            MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &m, &st);
            MPI_Get_count(&st, MPI_INT, &count);
            MPI_Mrecv(in, count, MPI_INT, &m, MPI_STATUS_IGNORE);
        } else {
            int found = 0;
            while (!found) MPI_Improbe(peer, 20 + k, MPI_COMM_WORLD, &found, &m, &st);
            MPI_Get_count(&st, MPI_INT, &count);
            MPI_Request q;
            MPI_Imrecv(in, count, MPI_INT, &m, &q);
            MPI_Wait(&q, MPI_STATUS_IGNORE);
        }
        for (int i = 0; i < count; i++) sum += in[i];
    }
    MPI_Waitall(ROUNDS, sends, MPI_STATUSES_IGNORE);
    printf("rank %d got %ld\n", r, sum);
    free(in);
    MPI_Finalize();
    return 0;
}
