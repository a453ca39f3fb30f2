/* One-sided communication, the scenario of rma.py: fence epochs with Put, Get and Accumulate on
 * a created window, a post/start/complete/test epoch with a Put to the right neighbour, a
 * lock_all epoch with a Put, a flush and a Get back, an allocated window updated under a lock
 * with Fetch_and_op, then both windows freed; every result checked. With the argument "all",
 * then every other traced window call: a shared window on a reversed communicator (lock_all,
 * Compare_and_swap, Get_accumulate, the four flushes, sync) and a dynamic window on its
 * duplicate (a fence). */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The calls rma.py does not make; returns how many checks failed (of *nchecks). */
static int the_rest(int r, int *nchecks) {
    MPI_Comm rev, twin;
    MPI_Comm_split(MPI_COMM_WORLD, 0, -r, &rev);           /* window rank 0 = world rank n-1 */
    MPI_Comm_dup(rev, &twin);
    int64_t *slot;
    MPI_Win sh;
    MPI_Win_allocate_shared(8, 8, MPI_INFO_NULL, rev, &slot, &sh);
    *slot = 0;
    MPI_Win_lock_all(0, sh);
    MPI_Win_sync(sh);
    MPI_Barrier(rev);
    /* the first to swap 0 for its rank + 1 wins; nobody swaps after */
    int64_t mine = r + 1, zero = 0, was = -1, nothing = 0, now = -1;
    MPI_Compare_and_swap(&mine, &zero, &was, MPI_INT64_T, 0, 0, sh);
    MPI_Win_flush(0, sh);
    MPI_Get_accumulate(&nothing, 1, MPI_INT64_T, &now, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T,
                       MPI_NO_OP, sh);
    MPI_Win_flush_local_all(sh);
    MPI_Win_flush_local(0, sh);
    MPI_Win_flush_all(sh);
    MPI_Win_unlock_all(sh);
    int won = was == 0, winners = 0;
    MPI_Allreduce(&won, &winners, 1, MPI_INT, MPI_SUM, rev);
    MPI_Win_free(&sh);

    MPI_Win dyn;
    MPI_Win_create_dynamic(MPI_INFO_NULL, twin, &dyn);
    MPI_Win_fence(0, dyn);
    MPI_Win_free(&dyn);
    MPI_Comm_free(&twin);
    MPI_Comm_free(&rev);
    *nchecks += 2;
    return (winners != 1) + (now < 1 || (won && now != mine));
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int right = (r + 1) % n, left = (r + n - 1) % n, nchecks = 0, failed = 0;

    /* Put into [0, 8), Get from [0, 4), Accumulate into [4, 8): the epoch's Get and
     * Accumulate touch different locations (MPI leaves overlapping ones undefined) */
    double mem[8] = {0}, mine[8], ones[4], got[4] = {0};
    for (int i = 0; i < 8; i++) mine[i] = r;
    for (int i = 0; i < 4; i++) ones[i] = 1.0;
    MPI_Win win;
    MPI_Win_create(mem, sizeof mem, sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_fence(0, win);
    MPI_Put(mine, 8, MPI_DOUBLE, right, 0, 8, MPI_DOUBLE, win);        /* 64 B to the right */
    MPI_Win_fence(0, win);
    MPI_Get(got, 4, MPI_DOUBLE, left, 0, 4, MPI_DOUBLE, win);           /* 32 B from the left */
    MPI_Accumulate(ones, 4, MPI_DOUBLE, left, 4, 4, MPI_DOUBLE, MPI_SUM, win);   /* 32 B */
    MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
    for (int i = 0; i < 4; i++) failed += got[i] != (double)((r + 2 * n - 2) % n);
    for (int i = 0; i < 4; i++) failed += mem[i] != (double)left;
    for (int i = 4; i < 8; i++) failed += mem[i] != left + 1.0;
    nchecks += 4 + 4 + 4;

    /* PSCW: exposed to the left neighbour, accessing the right one; 16 B into its [0, 2) */
    MPI_Group world, from_left, to_right;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 1, &left, &from_left);
    MPI_Group_incl(world, 1, &right, &to_right);
    double ten[2] = {10.0 + r, 10.0 + r}, twenty[2] = {20.0 + r, 20.0 + r}, back[2] = {0};
    MPI_Win_post(from_left, 0, win);
    MPI_Win_start(to_right, 0, win);
    MPI_Put(ten, 2, MPI_DOUBLE, right, 0, 2, MPI_DOUBLE, win);
    MPI_Win_complete(win);
    int exposed = 1;                  /* until a Test returns true: the epoch ended */
    while (exposed) {
        int done = 0;
        MPI_Win_test(win, &done);
        exposed = !done;
    }
    for (int i = 0; i < 2; i++) failed += mem[i] != 10.0 + left;
    /* passive target: 16 B into the right one's [2, 4), flushed, then read back */
    MPI_Win_lock_all(0, win);
    MPI_Put(twenty, 2, MPI_DOUBLE, right, 2, 2, MPI_DOUBLE, win);
    MPI_Win_flush(right, win);
    MPI_Get(back, 2, MPI_DOUBLE, right, 2, 2, MPI_DOUBLE, win);
    MPI_Win_unlock_all(win);
    for (int i = 0; i < 2; i++) failed += back[i] != 20.0 + r;
    nchecks += 4;
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Group_free(&from_left);
    MPI_Group_free(&to_right);
    MPI_Group_free(&world);

    int64_t *counter;
    MPI_Win cwin;
    MPI_Win_allocate(8, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &counter, &cwin);
    *counter = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    int64_t one = 1, old = -1;
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, cwin);
    MPI_Fetch_and_op(&one, &old, MPI_INT64_T, 0, 0, MPI_SUM, cwin);
    MPI_Win_unlock(0, cwin);
    MPI_Barrier(MPI_COMM_WORLD);
    if (r == 0) {
        int64_t total = -1;
        MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, cwin);
        MPI_Get(&total, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T, cwin);
        MPI_Win_unlock(0, cwin);
        failed += total != n;
        nchecks++;
    }
    failed += old < 0 || old >= n;
    nchecks++;
    MPI_Win_free(&cwin);
    MPI_Win_free(&win);

    if (argc > 1 && strcmp(argv[1], "all") == 0) failed += the_rest(r, &nchecks);

    char line[64] = {0}, *lines = malloc((size_t)n * sizeof line);
    snprintf(line, sizeof line, "rank %d: %d checks, %s", r, nchecks,
             failed ? "FAILED" : "all passed");
    MPI_Gather(line, sizeof line, MPI_CHAR, lines, sizeof line, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (r == 0)
        for (int i = 0; i < n; i++) printf("%s\n", lines + sizeof line * i);
    free(lines);
    MPI_Finalize();
    return 0;
}
