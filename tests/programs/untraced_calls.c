/* Calls the PMPI library counts but does not record, the scenario of untraced_calls.py: a
 * request-based Rput (and a matched probe that finds nothing: no row, counted by the Python
 * tracer only); with traced non-blocking collectives, a traced neighbourhood collective, a
 * traced window and one traced Barrier.
 * With the argument "all", then more of them: a general active-target epoch (post, start,
 * complete, wait), Alltoallw, Isendrecv, a persistent Bcast_init started and waited for (made
 * after a persistent send was freed: MPI may give it that one's handle), and an
 * intercommunicator between the even and the odd ranks, with a message across it, merged
 * into an intracommunicator that an Allreduce then uses. Prints what each rank received. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The calls untraced_calls.py does not make; returns a number made of what was received. */
static double the_rest(int r, int n, MPI_Win win, double *mem) {
    int right = (r + 1) % n, left = (r + n - 1) % n;
    MPI_Group world, from_left, to_right;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 1, &left, &from_left);
    MPI_Group_incl(world, 1, &right, &to_right);
    MPI_Win_post(from_left, 0, win);                     /* the left one puts into mine */
    MPI_Win_start(to_right, 0, win);
    double mine[4] = {r, r, r, r};
    MPI_Put(mine, 4, MPI_DOUBLE, right, 0, 4, MPI_DOUBLE, win);
    MPI_Win_complete(win);
    MPI_Win_wait(win);
    double seen = mem[0];

    int *one = malloc((size_t)n * sizeof(int)), *got = malloc((size_t)n * sizeof(int));
    int *counts = malloc((size_t)n * sizeof(int)), *displs = malloc((size_t)n * sizeof(int));
    MPI_Datatype *types = malloc((size_t)n * sizeof(MPI_Datatype));
    for (int i = 0; i < n; i++) {
        one[i] = r;
        counts[i] = 1;
        displs[i] = i * (int)sizeof(int);
        types[i] = MPI_INT;
    }
    MPI_Alltoallw(one, counts, displs, types, got, counts, displs, types, MPI_COMM_WORLD);
    for (int i = 0; i < n; i++) seen += got[i];

    int sent = 10 * r, back = -1;
    MPI_Request req;
    MPI_Isendrecv(&sent, 1, MPI_INT, right, 11, &back, 1, MPI_INT, left, 11, MPI_COMM_WORLD,
                  &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    seen += back;

    MPI_Request gone;
    MPI_Send_init(&sent, 1, MPI_INT, right, 12, MPI_COMM_WORLD, &gone);
    MPI_Request_free(&gone);
    int root_value = r == 0 ? 1000 : 0;
    MPI_Bcast_init(&root_value, 1, MPI_INT, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &req);
    MPI_Start(&req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Request_free(&req);
    seen += root_value;

    MPI_Comm half, inter, merged;
    MPI_Comm_split(MPI_COMM_WORLD, r % 2, r, &half);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, r % 2 ? 0 : 1, 13, &inter);
    int hello = 100 + r, heard = -1;
    if (r == 0) MPI_Send(&hello, 1, MPI_INT, 0, 14, inter);          /* to world rank 1 */
    if (r == 1) {
        MPI_Recv(&heard, 1, MPI_INT, 0, 14, inter, MPI_STATUS_IGNORE);   /* from world rank 0 */
        seen += heard;
    }
    MPI_Intercomm_merge(inter, r % 2, &merged);
    int sum = 0;
    MPI_Allreduce(&r, &sum, 1, MPI_INT, MPI_SUM, merged);
    seen += sum;
    MPI_Comm_free(&merged);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
    MPI_Group_free(&from_left);
    MPI_Group_free(&to_right);
    MPI_Group_free(&world);
    free(one);
    free(got);
    free(counts);
    free(displs);
    free(types);
    return seen;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    double ones = 1, total = 0;
    MPI_Request req;
    for (int k = 0; k < 3; k++) {
        MPI_Iallreduce(&ones, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    /* a matched probe that finds nothing (one that found a traced Send would leave it
     * unmatched) */
    int found = 1;
    MPI_Message msg;
    MPI_Improbe(MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, &found, &msg, MPI_STATUS_IGNORE);
    MPI_Comm cart;
    int dims[1] = {n}, periodic[1] = {1};
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periodic, 0, &cart);
    double me = r, nb[2];
    MPI_Neighbor_allgather(&me, 1, MPI_DOUBLE, nb, 1, MPI_DOUBLE, cart);
    double mem[4] = {0}, mine[4] = {r, r, r, r};
    MPI_Win win;
    MPI_Win_create(mem, sizeof mem, sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_fence(0, win);
    MPI_Put(mine, 4, MPI_DOUBLE, (r + 1) % n, 0, 4, MPI_DOUBLE, win);
    MPI_Rput(mine, 4, MPI_DOUBLE, (r + 1) % n, 0, 4, MPI_DOUBLE, win, &req);   /* counted */
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Win_fence(0, win);
    double rest = 0;
    if (argc > 1 && strcmp(argv[1], "all") == 0) rest = the_rest(r, n, win, mem);
    MPI_Win_free(&win);
    MPI_Barrier(MPI_COMM_WORLD);
    double line[4] = {total, nb[0], nb[1], rest}, *all = malloc((size_t)n * sizeof line);
    MPI_Gather(line, 4, MPI_DOUBLE, all, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (r == 0)
        for (int i = 0; i < n; i++)
            printf("rank %d: total %.0f, neighbours %.0f %.0f, the rest %.0f, found %d\n", i,
                   all[4 * i], all[4 * i + 1], all[4 * i + 2], all[4 * i + 3], found);
    free(all);
    MPI_Comm_free(&cart);
    MPI_Finalize();
    return 0;
}
