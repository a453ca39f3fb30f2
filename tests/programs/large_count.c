/* The same calls made with int counts or, with the argument "large", with MPI 4's large-count
 * variants (MPI_Send_c, MPI_Recv_c, MPI_Isend_c, MPI_Irecv_c, MPI_Allreduce_c, MPI_Bcast_c,
 * MPI_Alltoallv_c, MPI_Sendrecv_c, MPI_Mrecv_c), which the PMPI library records as the int-count
 * calls. On 2 ranks: a message each way, a ring exchange of non-blocking posts, an Allreduce, a
 * Bcast from rank 1, an Alltoallv whose rank r sends r + 1 + i ints to rank i, a Sendrecv and a
 * matched probe with its receive. Prints what each rank received. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int large = argc > 1 && strcmp(argv[1], "large") == 0;
    int r, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Comm w = MPI_COMM_WORLD;
    int right = (r + 1) % n, left = (r + n - 1) % n;
    double d[8] = {r, r + 1, r + 2, r + 3, r + 4, r + 5, r + 6, r + 7};
    double got = 0;

    if (r == 0) {
        if (large) MPI_Send_c(d, 8, MPI_DOUBLE, 1, 7, w);
        else MPI_Send(d, 8, MPI_DOUBLE, 1, 7, w);
        if (large) MPI_Recv_c(d, 8, MPI_DOUBLE, 1, 8, w, MPI_STATUS_IGNORE);
        else MPI_Recv(d, 8, MPI_DOUBLE, 1, 8, w, MPI_STATUS_IGNORE);
    } else if (r == 1) {
        if (large) MPI_Recv_c(d, 8, MPI_DOUBLE, 0, 7, w, MPI_STATUS_IGNORE);
        else MPI_Recv(d, 8, MPI_DOUBLE, 0, 7, w, MPI_STATUS_IGNORE);
        if (large) MPI_Send_c(d, 4, MPI_DOUBLE, 0, 8, w);   /* half of it back */
        else MPI_Send(d, 4, MPI_DOUBLE, 0, 8, w);
    }
    got += d[0] + d[3];

    int out[3] = {r, 10 * r, 100 * r}, in[3];
    MPI_Request rq[2];
    if (large) {
        MPI_Irecv_c(in, 3, MPI_INT, left, 9, w, &rq[0]);
        MPI_Isend_c(out, 3, MPI_INT, right, 9, w, &rq[1]);
    } else {
        MPI_Irecv(in, 3, MPI_INT, left, 9, w, &rq[0]);
        MPI_Isend(out, 3, MPI_INT, right, 9, w, &rq[1]);
    }
    MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
    got += in[0] + in[1] + in[2];

    double sum[2], mine[2] = {r, 1};
    if (large) MPI_Allreduce_c(mine, sum, 2, MPI_DOUBLE, MPI_SUM, w);
    else MPI_Allreduce(mine, sum, 2, MPI_DOUBLE, MPI_SUM, w);
    got += sum[0] + sum[1];

    long root_value = r == 1 ? 42 : 0;
    if (large) MPI_Bcast_c(&root_value, 1, MPI_LONG, 1, w);
    else MPI_Bcast(&root_value, 1, MPI_LONG, 1, w);
    got += (double)root_value;

    /* rank r sends r + 1 + i ints to rank i (so it receives i + 1 + r from rank i) */
    int sb[64], rb[64], sc[8], rc[8], sdi[8], rdi[8];
    MPI_Count scl[8], rcl[8];
    MPI_Aint sdl[8], rdl[8];
    for (int i = 0, so = 0, ro = 0; i < n && i < 8; i++) {
        sc[i] = r + 1 + i;
        rc[i] = i + 1 + r;
        sdi[i] = so;
        rdi[i] = ro;
        scl[i] = sc[i];
        rcl[i] = rc[i];
        sdl[i] = so;
        rdl[i] = ro;
        for (int k = 0; k < sc[i]; k++) sb[so + k] = 1000 * r + i;
        so += sc[i];
        ro += rc[i];
    }
    if (large) MPI_Alltoallv_c(sb, scl, sdl, MPI_INT, rb, rcl, rdl, MPI_INT, w);
    else MPI_Alltoallv(sb, sc, sdi, MPI_INT, rb, rc, rdi, MPI_INT, w);
    for (int i = 0; i < n && i < 8; i++) got += rb[rdi[i]];

    int back = -1;
    if (large)
        MPI_Sendrecv_c(&r, 1, MPI_INT, right, 10, &back, 1, MPI_INT, left, 10, w,
                       MPI_STATUS_IGNORE);
    else
        MPI_Sendrecv(&r, 1, MPI_INT, right, 10, &back, 1, MPI_INT, left, 10, w,
                     MPI_STATUS_IGNORE);
    got += back;

    MPI_Message m;
    MPI_Status st;
    short two[2] = {(short)r, 7}, heard[2];
    MPI_Send(two, 2, MPI_SHORT, right, 11, w);
    MPI_Mprobe(left, 11, w, &m, &st);
    if (large) MPI_Mrecv_c(heard, 2, MPI_SHORT, &m, MPI_STATUS_IGNORE);
    else MPI_Mrecv(heard, 2, MPI_SHORT, &m, MPI_STATUS_IGNORE);
    got += heard[0] + heard[1];

    printf("rank %d got %g\n", r, got);
    MPI_Finalize();
    return 0;
}
