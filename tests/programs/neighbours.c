/* Neighbourhood collectives, the scenario of neighbours.py without its pickled call: on a
 * periodic 1-D Cartesian ring Neighbor_allgather, Neighbor_alltoall and Ineighbor_allgather; on
 * a distributed graph where each rank sends to the next two ranks, Neighbor_allgatherv. With the
 * argument "all", then the other forms: on a non-periodic line (MPI_PROC_NULL at its ends)
 * Neighbor_alltoallv; on a duplicate of the ring (its topology comes with it) Ineighbor_alltoall
 * and Ineighbor_alltoallv; on an MPI_Graph_create ring (each rank to the next and the previous)
 * Ineighbor_allgatherv. Every result checked. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int same(const double *got, const double *want, int n) {
    for (int i = 0; i < n; i++)
        if (got[i] != want[i]) return 0;
    return 1;
}

/* The calls neighbours.py does not make; returns how many checks failed (of *nchecks). */
static int the_rest(int r, int n, MPI_Comm ring, int *nchecks) {
    int failed = 0, left = (r + n - 1) % n, right = (r + 1) % n;
    /* a line 0 - 1 - ... - n-1: rank 0 has no lower neighbour, rank n-1 no upper one */
    MPI_Comm line;
    int dims[1] = {n}, open[1] = {0};
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, open, 0, &line);
    double mine[3] = {r, r, 10.0 * r}, got[3] = {-1, -1, -1};
    int scounts[2] = {1, 2}, sdispls[2] = {0, 1}, rcounts[2] = {2, 1}, rdispls[2] = {0, 2};
    /* 1 double down, 2 up; receive 2 from below, 1 from above */
    MPI_Neighbor_alltoallv(mine, scounts, sdispls, MPI_DOUBLE, got, rcounts, rdispls,
                           MPI_DOUBLE, line);
    double want[3] = {r > 0 ? r - 1 : -1, r > 0 ? 10.0 * (r - 1) : -1, r < n - 1 ? r + 1 : -1};
    failed += !same(got, want, 3);

    MPI_Comm twin;
    MPI_Comm_dup(ring, &twin);
    double out[4] = {r, r, -r, -r}, in[4], in2[4];
    MPI_Request req[3];
    MPI_Ineighbor_alltoall(out, 2, MPI_DOUBLE, in, 2, MPI_DOUBLE, twin, &req[0]);
    int c2[2] = {2, 2}, d2[2] = {0, 2};
    MPI_Ineighbor_alltoallv(out, c2, d2, MPI_DOUBLE, in2, c2, d2, MPI_DOUBLE, twin, &req[1]);

    MPI_Comm graph;
    int *index = malloc((size_t)n * sizeof(int)), *edges = malloc((size_t)2 * n * sizeof(int));
    for (int k = 0; k < n; k++) {
        index[k] = 2 * (k + 1);
        edges[2 * k] = (k + 1) % n;
        edges[2 * k + 1] = (k + n - 1) % n;
    }
    MPI_Graph_create(MPI_COMM_WORLD, n, index, edges, 0, &graph);
    double g[3] = {-1, -1, -1}, me[1] = {r};
    int gc[2] = {1, 1}, gd[2] = {0, 2};
    MPI_Ineighbor_allgatherv(me, 1, MPI_DOUBLE, g, gc, gd, MPI_DOUBLE, graph, &req[2]);
    MPI_Waitall(3, req, MPI_STATUSES_IGNORE);
    double w1[4] = {-left, -left, right, right}, w3[3] = {right, -1, left};
    failed += !same(in, w1, 4) + !same(in2, w1, 4) + !same(g, w3, 3);
    free(index);
    free(edges);
    MPI_Comm_free(&graph);
    MPI_Comm_free(&twin);
    MPI_Comm_free(&line);
    *nchecks += 4;
    return failed;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int nchecks = 0, failed = 0;

    MPI_Comm ring;
    int dims[1] = {n}, periodic[1] = {1};
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periodic, 0, &ring);
    int left, right;
    MPI_Cart_shift(ring, 0, 1, &left, &right);
    double four[4] = {r, r, r, r}, got[8], a2a[6];
    MPI_Neighbor_allgather(four, 4, MPI_DOUBLE, got, 4, MPI_DOUBLE, ring);  /* left, then right */
    double want[8] = {left, left, left, left, right, right, right, right};
    failed += !same(got, want, 8);
    double blocks[6] = {r, r, r, -r, -r, -r};                  /* 3 doubles each way */
    MPI_Neighbor_alltoall(blocks, 3, MPI_DOUBLE, a2a, 3, MPI_DOUBLE, ring);
    double want2[6] = {-left, -left, -left, right, right, right};
    failed += !same(a2a, want2, 6);
    memset(got, 0, sizeof got);
    MPI_Request req;
    MPI_Ineighbor_allgather(four, 4, MPI_DOUBLE, got, 4, MPI_DOUBLE, ring, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    failed += !same(got, want, 8);
    nchecks += 3;

    int dests[2] = {(r + 1) % n, (r + 2) % n}, sources[2] = {(r + n - 1) % n, (r + n - 2) % n};
    MPI_Comm graph;
    MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, sources, MPI_UNWEIGHTED, 2, dests,
                                   MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &graph);
    double two[2] = {r, r}, inbox[4];
    int counts[2] = {2, 2}, displs[2] = {0, 2};
    MPI_Neighbor_allgatherv(two, 2, MPI_DOUBLE, inbox, counts, displs, MPI_DOUBLE, graph);
    double want3[4] = {sources[0], sources[0], sources[1], sources[1]};
    failed += !same(inbox, want3, 4);
    nchecks++;

    if (argc > 1 && strcmp(argv[1], "all") == 0) failed += the_rest(r, n, ring, &nchecks);

    char line[64] = {0}, *lines = malloc((size_t)n * sizeof line);
    snprintf(line, sizeof line, "rank %d: %d checks, %s", r, nchecks,
             failed ? "FAILED" : "all passed");
    MPI_Gather(line, sizeof line, MPI_CHAR, lines, sizeof line, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (r == 0)
        for (int i = 0; i < n; i++) printf("%s\n", lines + sizeof line * i);
    free(lines);
    MPI_Comm_free(&graph);
    MPI_Comm_free(&ring);
    MPI_Finalize();
    return 0;
}
