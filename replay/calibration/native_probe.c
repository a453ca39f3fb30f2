/* The native probe of `hindsight calibrate` (replay/calibration/native.py): what the calls
 * the other probes time through mpi4py cost when a C program makes them.
 *
 *   mpiexec -n 2 native_probe OUT REPS SIZE...
 *
 * Ranks 0 and 1 (any others wait in the final barrier):
 *   ping-pong  per size, rank 0 times MPI_Send then MPI_Recv (the round trip), rank 1 the
 *              mirror; REPS round trips a size in 5 passes (ascending, descending, ...), each
 *              after 10 untimed ones;
 *   receive    per size, REPS / 2 rounds: rank 0 sends, rank 1 spins 3 round trips + 20 us,
 *              polls MPI_Iprobe until the message is there, then times MPI_Recv;
 *   calls      BATCHES batches of BATCH calls kept after one warm-up batch, each timed as a
 *              whole: MPI_Irecv posts nothing satisfies yet, MPI_Wait on sends known complete,
 *              MPI_Probe of a queued message, MPI_Iprobe of a tag nothing is sent with, and an
 *              empty loop of the same length;
 *   flags      the collective probe of replay/calibration/flags.py made from C: Barrier, and
 *              Bcast, Reduce, Allreduce of 8, 512, 8192, 65536 bytes of doubles (rank 0 the
 *              root) on a communicator of ranks 0 and 1, per late rank 60 calls after 6
 *              untimed ones, each after a 0-byte Sendrecv of the two, the late rank spinning
 *              40 us first; both ranks keep each call's entry and exit.
 * Each rank writes OUT.<rank>, one JSON object of nanoseconds (rank 0: the round trips, the
 * time in each Send and the call batches; rank 1: the receives; both: the collectives' entries
 * and exits). Clock: CLOCK_MONOTONIC, one for every process of a node. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { TAG_PP = 71, TAG_RECV, TAG_ACK, TAG_GO, TAG_IRECV, TAG_WAIT, TAG_PROBE, TAG_MARK,
       TAG_NONE, TAG_SYNC };
enum { BATCH = 100, BATCHES = 20, QUEUED = 20, PASSES = 5, WARM = 10, MAXSIZES = 16 };
/* the collective probe's (replay/calibration/flags.py: FLAG_*) */
enum { FLAG_REPEAT = 60, FLAG_WARMUP = 6, FLAG_DELAY_NS = 40000, FLAG_NSIZES = 4 };
static const int FLAG_SIZES[FLAG_NSIZES] = {8, 512, 8192, 65536};
static const char *FLAG_OPS[4] = {"Barrier", "Bcast", "Reduce", "Allreduce"};

static long long now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void spin(long long ns) {
    long long end = now() + ns;
    while (now() < end) {
    }
}

__attribute__((noinline)) static void empty(volatile int *x) { *x += 1; }

static void put_list(FILE *f, const char *name, const long long *v, int n, int last) {
    fprintf(f, "\"%s\": [", name);
    for (int i = 0; i < n; i++) fprintf(f, "%s%lld", i ? ", " : "", v[i]);
    fprintf(f, "]%s\n", last ? "" : ",");
}

/* one collective call of the probe on `pair` (rank 0 the root), n bytes of doubles */
static void flag_call(MPI_Comm pair, int op, int n, double *sbuf, double *rbuf) {
    int k = n / 8 > 0 ? n / 8 : 1;
    if (op == 0) MPI_Barrier(pair);
    else if (op == 1) MPI_Bcast(sbuf, k, MPI_DOUBLE, 0, pair);
    else if (op == 2) MPI_Reduce(sbuf, rbuf, k, MPI_DOUBLE, MPI_SUM, 0, pair);
    else MPI_Allreduce(sbuf, rbuf, k, MPI_DOUBLE, MPI_SUM, pair);
}

/* the collective probe: writes this rank's cases, as flags.flag_probe keeps them */
static void flag_probe(FILE *f, MPI_Comm pair, int rank) {
    double *sbuf = malloc(65536), *rbuf = malloc(65536);
    long long tin[FLAG_REPEAT], tout[FLAG_REPEAT];
    for (int i = 0; i < 65536 / 8; i++) sbuf[i] = 1.0;
    for (int i = 0; i < FLAG_WARMUP; i++) MPI_Barrier(pair);
    fprintf(f, "\"flag_cases\": [");
    int first = 1;
    for (int op = 0; op < 4; op++)
        for (int s = 0; s < (op ? FLAG_NSIZES : 1); s++) {
            int n = op ? FLAG_SIZES[s] : 0;
            for (int late = 0; late < 2; late++) {
                for (int i = 0; i < FLAG_WARMUP; i++) flag_call(pair, op, n, sbuf, rbuf);
                for (int j = 0; j < FLAG_REPEAT; j++) {
                    MPI_Sendrecv(NULL, 0, MPI_BYTE, 1 - rank, TAG_SYNC, NULL, 0, MPI_BYTE,
                                 1 - rank, TAG_SYNC, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    if (rank == late) spin(FLAG_DELAY_NS);
                    tin[j] = now();
                    flag_call(pair, op, n, sbuf, rbuf);
                    tout[j] = now();
                }
                fprintf(f, "%s{\"op\": \"%s\", \"bytes\": %d, \"late\": %d,\n", first ? "" : ", ",
                        FLAG_OPS[op], n, late);
                first = 0;
                put_list(f, "in", tin, FLAG_REPEAT, 0);
                put_list(f, "out", tout, FLAG_REPEAT, 1);
                fprintf(f, "}");
            }
        }
    fprintf(f, "],\n");
    free(sbuf);
    free(rbuf);
}

static int cmp(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 4 || argc - 3 > MAXSIZES || size < 2) {
        if (rank == 0) fprintf(stderr, "usage: native_probe OUT REPS SIZE... (2+ ranks)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int reps = atoi(argv[2]), nsz = argc - 3, per = (reps + PASSES - 1) / PASSES;
    reps = per * PASSES;
    long sizes[MAXSIZES], big = 1;
    for (int i = 0; i < nsz; i++) {
        sizes[i] = atol(argv[3 + i]);
        if (sizes[i] > big) big = sizes[i];
    }
    char *buf = calloc(big, 1), *bufs = calloc((size_t)BATCH * 8, 1);
    long long *rt = calloc((size_t)nsz * reps, sizeof *rt);
    long long *os = calloc((size_t)nsz * reps, sizeof *os);
    long long *orv = calloc((size_t)nsz * reps, sizeof *orv);
    long long rt_med[MAXSIZES] = {0};
    long long calls[5][BATCHES];
    MPI_Request reqs[BATCH];
    int got[MAXSIZES] = {0};
    volatile int sink = 0;
    MPI_Comm pair;
    MPI_Comm_split(MPI_COMM_WORLD, rank < 2 ? 0 : MPI_UNDEFINED, rank, &pair);
    if (rank < 2) {
        /* ping-pong, sizes in interleaved passes */
        for (int p = 0; p < PASSES; p++)
            for (int j = 0; j < nsz; j++) {
                int s = p % 2 ? nsz - 1 - j : j;
                long k = sizes[s];
                for (int i = -WARM; i < per; i++) {
                    if (rank == 0) {
                        long long t0 = now();
                        MPI_Send(buf, (int)k, MPI_BYTE, 1, TAG_PP, MPI_COMM_WORLD);
                        long long t1 = now();
                        MPI_Recv(buf, (int)k, MPI_BYTE, 1, TAG_PP, MPI_COMM_WORLD,
                                 MPI_STATUS_IGNORE);
                        long long t2 = now();
                        if (i >= 0) {
                            rt[s * reps + got[s]] = t2 - t0;
                            os[s * reps + got[s]++] = t1 - t0;
                        }
                    } else {
                        MPI_Recv(buf, (int)k, MPI_BYTE, 0, TAG_PP, MPI_COMM_WORLD,
                                 MPI_STATUS_IGNORE);
                        MPI_Send(buf, (int)k, MPI_BYTE, 0, TAG_PP, MPI_COMM_WORLD);
                    }
                }
            }
        if (rank == 0)
            for (int s = 0; s < nsz; s++) {
                long long *tmp = malloc(sizeof *tmp * reps);
                memcpy(tmp, rt + s * reps, sizeof *tmp * reps);
                qsort(tmp, reps, sizeof *tmp, cmp);
                rt_med[s] = tmp[reps / 2];
                free(tmp);
            }
        MPI_Bcast(rt_med, nsz, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    } else {
        MPI_Bcast(rt_med, nsz, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    }
    int nrecv = reps / 2;
    if (rank < 2) {
        /* the receive of a message already there */
        for (int s = 0; s < nsz; s++) {
            long k = sizes[s];
            for (int i = -WARM; i < nrecv; i++) {
                if (rank == 0) {
                    MPI_Send(buf, (int)k, MPI_BYTE, 1, TAG_RECV, MPI_COMM_WORLD);
                    MPI_Recv(NULL, 0, MPI_BYTE, 1, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    int flag = 0;
                    spin(3 * rt_med[s] + 20000);
                    while (!flag)
                        MPI_Iprobe(0, TAG_RECV, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
                    long long t0 = now();
                    MPI_Recv(buf, (int)k, MPI_BYTE, 0, TAG_RECV, MPI_COMM_WORLD,
                             MPI_STATUS_IGNORE);
                    long long t1 = now();
                    if (i >= 0) orv[s * reps + i] = t1 - t0;
                    MPI_Send(NULL, 0, MPI_BYTE, 0, TAG_ACK, MPI_COMM_WORLD);
                }
            }
        }
        /* the calls that move no message of their own */
        for (int b = -1; b < BATCHES; b++) {
            long long t0, t1;
            if (rank == 0) {
                t0 = now();
                for (int i = 0; i < BATCH; i++)
                    MPI_Irecv(bufs + 8 * i, 8, MPI_BYTE, 1, TAG_IRECV, MPI_COMM_WORLD, &reqs[i]);
                t1 = now();
                if (b >= 0) calls[0][b] = t1 - t0;
                MPI_Send(NULL, 0, MPI_BYTE, 1, TAG_GO, MPI_COMM_WORLD);
                MPI_Waitall(BATCH, reqs, MPI_STATUSES_IGNORE);

                for (int i = 0; i < BATCH; i++)
                    MPI_Isend(bufs + 8 * i, 8, MPI_BYTE, 1, TAG_WAIT, MPI_COMM_WORLD, &reqs[i]);
                MPI_Recv(NULL, 0, MPI_BYTE, 1, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                for (int i = 0; i < BATCH; i++) {
                    int flag = 0;
                    while (!flag) MPI_Request_get_status(reqs[i], &flag, MPI_STATUS_IGNORE);
                }
                t0 = now();
                for (int i = 0; i < BATCH; i++) MPI_Wait(&reqs[i], MPI_STATUS_IGNORE);
                t1 = now();
                if (b >= 0) calls[1][b] = t1 - t0;

                long long probe = 0;
                for (int r = 0; r < BATCH / QUEUED; r++) {
                    int flag = 0;
                    MPI_Send(NULL, 0, MPI_BYTE, 1, TAG_GO, MPI_COMM_WORLD);
                    while (!flag)
                        MPI_Iprobe(1, TAG_MARK, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
                    t0 = now();
                    for (int i = 0; i < QUEUED; i++)
                        MPI_Probe(1, TAG_PROBE, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    probe += now() - t0;
                    for (int i = 0; i < QUEUED; i++)
                        MPI_Recv(bufs, 8, MPI_BYTE, 1, TAG_PROBE, MPI_COMM_WORLD,
                                 MPI_STATUS_IGNORE);
                    MPI_Recv(NULL, 0, MPI_BYTE, 1, TAG_MARK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                }
                if (b >= 0) calls[2][b] = probe;

                int flag;
                t0 = now();
                for (int i = 0; i < BATCH; i++)
                    MPI_Iprobe(1, TAG_NONE, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
                t1 = now();
                if (b >= 0) calls[3][b] = t1 - t0;

                t0 = now();
                for (int i = 0; i < BATCH; i++) empty(&sink);
                t1 = now();
                if (b >= 0) calls[4][b] = t1 - t0;
            } else {
                MPI_Recv(NULL, 0, MPI_BYTE, 0, TAG_GO, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                for (int i = 0; i < BATCH; i++)
                    MPI_Send(bufs, 8, MPI_BYTE, 0, TAG_IRECV, MPI_COMM_WORLD);
                for (int i = 0; i < BATCH; i++)
                    MPI_Recv(bufs, 8, MPI_BYTE, 0, TAG_WAIT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(NULL, 0, MPI_BYTE, 0, TAG_ACK, MPI_COMM_WORLD);
                for (int r = 0; r < BATCH / QUEUED; r++) {
                    MPI_Recv(NULL, 0, MPI_BYTE, 0, TAG_GO, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    for (int i = 0; i < QUEUED; i++)
                        MPI_Send(bufs, 8, MPI_BYTE, 0, TAG_PROBE, MPI_COMM_WORLD);
                    MPI_Send(NULL, 0, MPI_BYTE, 0, TAG_MARK, MPI_COMM_WORLD);
                }
            }
        }
        char path[4096];
        snprintf(path, sizeof path, "%s.%d", argv[1], rank);
        FILE *f = fopen(path, "w");
        if (!f) {
            perror(path);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        fprintf(f, "{\"batch\": %d,\n", BATCH);
        long long sz[MAXSIZES] = {0};
        for (int s = 0; s < nsz; s++) sz[s] = sizes[s];
        put_list(f, "sizes", sz, nsz, 0);
        const char *names[5] = {"irecv_ns", "wait_ns", "probe_ns", "iprobe_ns", "loop_ns"};
        for (int s = 0; s < nsz; s++) {
            char name[64];
            if (rank == 0) {
                snprintf(name, sizeof name, "rt_ns_%d", s);
                put_list(f, name, rt + s * reps, reps, 0);
                snprintf(name, sizeof name, "os_ns_%d", s);
                put_list(f, name, os + s * reps, reps, 0);
            } else {
                snprintf(name, sizeof name, "or_ns_%d", s);
                put_list(f, name, orv + s * reps, nrecv, 0);
            }
        }
        if (rank == 0)
            for (int c = 0; c < 5; c++) put_list(f, names[c], calls[c], BATCHES, 0);
        flag_probe(f, pair, rank);
        MPI_Comm_free(&pair);
        fprintf(f, "\"ranks\": %d}\n", size);
        fclose(f);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
