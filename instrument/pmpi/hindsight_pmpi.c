/* hindsight_pmpi: trace a compiled MPI program through the PMPI profiling interface.
 *
 * Preloaded (LD_PRELOAD) into every rank by instrument/native.py; tracing is on when
 * HINDSIGHT_TRACE_DIR names the trace directory (native.py has prepared TRACE/.staging/).
 * Each rank writes the records of hindsight.trace.core (RAW_RECORD "<11q", RAW_COLUMNS) into a
 * shared mapping of TRACE/.staging/rank-NNNNN/events.raw, the rows the Python tracer
 * (instrument/comm.py, instrument/completion.py, instrument/rma.py, instrument/topology.py)
 * writes for the same calls, and names.jsonl beside it (communicators' members, topologies'
 * out-neighbours). The kernel owns the mapped pages, so a killed rank keeps what it recorded;
 * t_end is stored last (after a compiler barrier), so a record cut short by a kill reads as
 * unwritten.
 * At MPI_Finalize each rank leaves status.json; native.py seals the ranks after the run.
 * Where the rank is when `hindsight collect` stops the run is kept at no cost beyond two stores
 * a call and written on request (stop signal, instrument/stopped.py) to stopped_in.txt.
 * With HINDSIGHT_UNTRACED=1 as well (`hindsight collect --untraced`), a rank takes the same
 * start-up barrier and epoch and leaves the same status.json (its end of program, the machine's
 * conditions), but records nothing: every wrapper passes straight to PMPI.
 *
 * The same library records an mpi4py program preloaded with it: mpi4py 4 calls the MPI 4
 * large-count variants (MPI_Send_c...), recorded as their int-count calls, and receives a
 * pickled message by a matched probe (MPI_Mprobe, MPI_Mrecv_c), recorded as the Python tracer
 * records the pickle-API recv.
 *
 * One record cursor per process: the calls of one thread at a time are recorded. A rank whose
 * MPI is called from two threads at once (a program at mpi4py's default MPI_THREAD_MULTIPLE)
 * stops recording at the first such overlap and says so in status.json (the owner section
 * below); its program runs on untouched.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <pthread.h>

#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Op codes: hindsight.trace.core.OPS (append-only; checked by tests/test_native.py). */
enum {
    OP_SEND = 1, OP_SSEND, OP_BSEND, OP_RSEND, OP_RECV, OP_ISEND, OP_ISSEND, OP_IBSEND,
    OP_IRSEND, OP_IRECV, OP_SR_SEND, OP_SR_RECV, OP_PROBE, OP_IPROBE,
    OP_WAIT, OP_WAITALL, OP_WAITANY, OP_WAITSOME, OP_TEST, OP_TESTALL, OP_TESTANY, OP_TESTSOME,
    OP_BARRIER, OP_BCAST, OP_REDUCE, OP_ALLREDUCE, OP_GATHER, OP_GATHERV, OP_SCATTER,
    OP_SCATTERV, OP_ALLGATHER, OP_ALLGATHERV, OP_ALLTOALL, OP_ALLTOALLV, OP_SCAN, OP_EXSCAN,
    OP_REDUCE_SCATTER, OP_REDUCE_SCATTER_BLOCK, OP_COMM_SPLIT, OP_COMM_DUP, OP_COMM_CREATE,
    OP_IBARRIER, OP_IBCAST, OP_IREDUCE, OP_IALLREDUCE, OP_IGATHER, OP_IGATHERV, OP_ISCATTER,
    OP_ISCATTERV, OP_IALLGATHER, OP_IALLGATHERV, OP_IALLTOALL, OP_IALLTOALLV, OP_ISCAN,
    OP_IEXSCAN, OP_IREDUCE_SCATTER, OP_IREDUCE_SCATTER_BLOCK,
    OP_WIN_CREATE, OP_WIN_FREE, OP_WIN_FENCE, OP_PUT, OP_GET, OP_ACCUMULATE, OP_GET_ACCUMULATE,
    OP_FETCH_AND_OP, OP_COMPARE_AND_SWAP, OP_WIN_LOCK, OP_WIN_UNLOCK, OP_WIN_LOCK_ALL,
    OP_WIN_UNLOCK_ALL, OP_WIN_FLUSH, OP_WIN_SYNC,
    OP_NEIGHBOR_ALLGATHER, OP_NEIGHBOR_ALLGATHERV, OP_NEIGHBOR_ALLTOALL, OP_NEIGHBOR_ALLTOALLV,
    OP_INEIGHBOR_ALLGATHER, OP_INEIGHBOR_ALLGATHERV, OP_INEIGHBOR_ALLTOALL,
    OP_INEIGHBOR_ALLTOALLV, OP_WIN_POST, OP_WIN_START, OP_WIN_COMPLETE, OP_WIN_WAIT, OP_WIN_TEST,
    OP_REQUEST_FREE, OP_POLL
};
#define NFIELDS 11
#define RECORD (NFIELDS * 8)
#define GRANULE 512            /* records per 4096-byte-aligned multiple of 88 bytes */
#ifdef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE_ MADV_POPULATE_WRITE
#else
#define MADV_POPULATE_WRITE_ 23
#endif
#define ANY_SOURCE_SENTINEL (-2)
#define ANY_TAG_SENTINEL (-2)

/* ---- state ------------------------------------------------------------------------------ */

static int on;                          /* recording */
static int started;                     /* start() set the run up (traced or untraced) */
static int untraced;                    /* HINDSIGHT_UNTRACED=1: started, recording nothing */
static int finished;                    /* status written (Finalize, exit or signal) */
static int cpu_all;
static int wrank, wsize;
static int64_t *cur, *lim;              /* next record, end of the mapped window */
static size_t window_bytes, windows;
static int raw_fd = -1, names_fd = -1;
static int64_t epoch, next_request, clock_offset, clock_error;
static char stage[4096];
static char host[256];

static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline int64_t cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- communicators: id, world ranks of members, creations so far -------------------------- */

typedef struct {
    MPI_Comm comm;
    int64_t id;
    int *world;                          /* NULL: world numbering */
    int size;
    int64_t created;
    int outdeg;                          /* out-neighbours of its topology (0: none) */
} comm_t;

/* Entries are allocated one by one and never freed: a request posted on a communicator keeps
 * pointing at its entry after the program frees the communicator. */
static comm_t **comms;
static int ncomms, capcomms;
static comm_t world_entry, self_entry;

static void name_line(const char *line);
static void neighbours_line(comm_t *c);

static uint32_t crc32_of(const char *s) {
    uint32_t c = 0xFFFFFFFFu;
    for (; *s; s++) {
        c ^= (unsigned char)*s;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xEDB88320u & (uint32_t)-(int32_t)(c & 1));
    }
    return c ^ 0xFFFFFFFFu;
}

/* hindsight.trace.core.derived_comm_id */
static int64_t derived_id(int64_t parent, int64_t index, int lowest) {
    char key[96];
    snprintf(key, sizeof key, "%lld/%lld/%d", (long long)parent, (long long)index, lowest);
    return 2 + (int64_t)(crc32_of(key) % 2147483645u);
}

static void forget_comm(MPI_Comm comm) {
    for (int i = 0; i < ncomms; i++)
        if (comms[i]->comm == comm) {
            comms[i] = comms[--ncomms];
            return;
        }
}

/* The world ranks of `comm`'s members, in its rank order (malloc'ed). */
static int *members_of(MPI_Comm comm, int *size) {
    MPI_Group g, wg;
    PMPI_Comm_size(comm, size);
    int *world = malloc((size_t)*size * sizeof(int));
    int *local = malloc((size_t)*size * sizeof(int));
    for (int i = 0; i < *size; i++) local[i] = i;
    PMPI_Comm_group(comm, &g);
    PMPI_Comm_group(MPI_COMM_WORLD, &wg);
    PMPI_Group_translate_ranks(g, *size, local, wg, world);
    PMPI_Group_free(&g);
    PMPI_Group_free(&wg);
    free(local);
    return world;
}

static int lowest(const int *world, int size) {
    int m = world[0];
    for (int i = 1; i < size; i++) if (world[i] < m) m = world[i];
    return m;
}

/* names.jsonl's ["comm", id, [world ranks]] (world NULL: world numbering, 0..size-1) */
static void comm_line(int64_t id, const int *world, int size) {
    size_t n = 64 + (size_t)size * 12;
    char *line = malloc(n);
    int k = snprintf(line, n, "[\"comm\", %lld, [", (long long)id);
    for (int i = 0; i < size; i++)
        k += snprintf(line + k, n - (size_t)k, i ? ", %d" : "%d", world ? world[i] : i);
    snprintf(line + k, n - (size_t)k, "]]\n");
    name_line(line);
    free(line);
}

static comm_t *add_comm(MPI_Comm comm, int64_t id, int *world, int size) {
    forget_comm(comm);                    /* a handle reused after an untraced free */
    if (ncomms == capcomms) {
        capcomms = capcomms ? 2 * capcomms : 16;
        comms = realloc(comms, (size_t)capcomms * sizeof *comms);
    }
    comm_t *c = malloc(sizeof *c);
    *c = (comm_t){comm, id, world, size, 0, 0};
    comms[ncomms++] = c;
    comm_line(id, world, size);
    neighbours_line(c);
    return c;
}

static int64_t named_id(const int *world, int size) {
    char key[64];
    uint32_t h = 0;
    for (int i = 0; i < size; i++) {
        snprintf(key, sizeof key, "%u/%d", h, world[i]);
        h = crc32_of(key);
    }
    return derived_id(-1, h, 0);
}

static int ascending(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* An intercommunicator (made by MPI_Intercomm_create, MPI_Comm_spawn...: counted, not traced).
 * The peers and roots its calls name are ranks of the remote group, so its entry maps them
 * through that group's world ranks (-1 for a process outside this MPI_COMM_WORLD, a spawned
 * one); it is named by both groups' world ranks in ascending order (those in this
 * MPI_COMM_WORLD), the same list, hence the same id, on both sides. */
static comm_t *adopt_inter(MPI_Comm comm) {
    int lsize, rsize;
    int *local = members_of(comm, &lsize);
    PMPI_Comm_remote_size(comm, &rsize);
    int *remote = malloc((size_t)(rsize + 1) * sizeof(int));
    int *index = malloc((size_t)(rsize + 1) * sizeof(int));
    for (int i = 0; i < rsize; i++) index[i] = i;
    MPI_Group rg, wg;
    PMPI_Comm_remote_group(comm, &rg);
    PMPI_Comm_group(MPI_COMM_WORLD, &wg);
    PMPI_Group_translate_ranks(rg, rsize, index, wg, remote);
    PMPI_Group_free(&rg);
    PMPI_Group_free(&wg);
    free(index);
    int *both = malloc((size_t)(lsize + rsize) * sizeof(int)), nboth = lsize;
    memcpy(both, local, (size_t)lsize * sizeof(int));
    free(local);
    for (int i = 0; i < rsize; i++) {
        if (remote[i] == MPI_UNDEFINED) remote[i] = -1;
        else both[nboth++] = remote[i];
    }
    qsort(both, (size_t)nboth, sizeof(int), ascending);
    comm_t *c = add_comm(comm, named_id(both, nboth), both, nboth);
    free(both);
    c->world = remote;
    c->size = rsize;
    return c;
}

/* A communicator made by a call that is not traced (MPI_Comm_idup, MPI_Intercomm_merge,
 * MPI_Comm_create_group...): named by its members, the same on every member without
 * communicating. */
static comm_t *adopt(MPI_Comm comm) {
    int inter = 0;
    PMPI_Comm_test_inter(comm, &inter);
    if (inter) return adopt_inter(comm);
    int size;
    int *world = members_of(comm, &size);
    return add_comm(comm, named_id(world, size), world, size);
}

static inline comm_t *comm_of(MPI_Comm comm) {
    if (comm == MPI_COMM_WORLD) return &world_entry;
    for (int i = 0; i < ncomms; i++)
        if (comms[i]->comm == comm) return comms[i];
    if (comm == MPI_COMM_SELF) return &self_entry;
    return adopt(comm);
}

static inline int64_t world_of(const comm_t *c, int r) {
    return (c->world == NULL || r < 0 || r >= c->size) ? r : c->world[r];
}

/* A communicator with a topology (made by MPI_Cart_create, MPI_Graph_create,
 * MPI_Dist_graph_create*, or duplicated from one): names.jsonl's ["nbrs", id, [world ranks]],
 * this rank's out-neighbours in the order its neighbourhood collectives send (per dimension the
 * lower neighbour then the upper one, MPI_Cart_shift; MPI_Graph_neighbors; the destinations of
 * MPI_Dist_graph_neighbors), -1 for MPI_PROC_NULL (instrument/topology.py). */
static void neighbours_line(comm_t *c) {
    int kind = MPI_UNDEFINED, n = 0, *outs = NULL;
    PMPI_Topo_test(c->comm, &kind);
    if (kind == MPI_CART) {
        int ndims = 0;
        PMPI_Cartdim_get(c->comm, &ndims);
        outs = malloc((size_t)(2 * ndims + 1) * sizeof(int));
        for (int d = 0; d < ndims; d++, n += 2)
            PMPI_Cart_shift(c->comm, d, 1, &outs[n], &outs[n + 1]);
    } else if (kind == MPI_GRAPH) {
        int me;
        PMPI_Comm_rank(c->comm, &me);
        PMPI_Graph_neighbors_count(c->comm, me, &n);
        outs = malloc((size_t)(n + 1) * sizeof(int));
        PMPI_Graph_neighbors(c->comm, me, n, outs);
    } else if (kind == MPI_DIST_GRAPH) {
        int in = 0, weighted = 0;
        PMPI_Dist_graph_neighbors_count(c->comm, &in, &n, &weighted);
        int *ins = malloc((size_t)(2 * in + 2 * n + 2) * sizeof(int));
        outs = malloc((size_t)(n + 1) * sizeof(int));
        PMPI_Dist_graph_neighbors(c->comm, in, ins, ins + in, n, outs, ins + 2 * in);
        free(ins);
    } else {
        return;
    }
    c->outdeg = n;
    size_t cap = 64 + (size_t)n * 12;
    char *line = malloc(cap);
    int k = snprintf(line, cap, "[\"nbrs\", %lld, [", (long long)c->id);
    for (int i = 0; i < n; i++)
        k += snprintf(line + k, cap - (size_t)k, i ? ", %lld" : "%lld",
                      (long long)(outs[i] == MPI_PROC_NULL ? -1 : world_of(c, outs[i])));
    snprintf(line + k, cap - (size_t)k, "]]\n");
    name_line(line);
    free(line);
    free(outs);
}

/* ---- requests: open addressing on the handle (duplicates allowed), backward-shift deletion - */

typedef struct {
    MPI_Request req;
    int64_t hid;
    comm_t *recv_comm;                  /* NULL for a send */
    int64_t cid;
    int used;
} req_t;

static req_t *reqs;
static size_t reqcap, nreqs;

static inline size_t rslot(MPI_Request r) {
    return ((uint64_t)(uintptr_t)r * 0x9E3779B97F4A7C15ull) >> 20 & (reqcap - 1);
}

static void req_put(MPI_Request r, int64_t hid, comm_t *recv_comm, int64_t cid);

static void req_grow(void) {
    req_t *old = reqs;
    size_t oldcap = reqcap;
    reqcap = reqcap ? 2 * reqcap : 1024;
    reqs = calloc(reqcap, sizeof *reqs);
    nreqs = 0;
    for (size_t i = 0; i < oldcap; i++)
        if (old[i].used) req_put(old[i].req, old[i].hid, old[i].recv_comm, old[i].cid);
    free(old);
}

static void req_put(MPI_Request r, int64_t hid, comm_t *recv_comm, int64_t cid) {
    if (2 * (nreqs + 1) > reqcap) req_grow();
    size_t i = rslot(r);
    while (reqs[i].used) i = (i + 1) & (reqcap - 1);
    nreqs++;
    reqs[i] = (req_t){r, hid, recv_comm, cid, 1};
}

/* The oldest pending traced request with handle `r`. Several may share one: MPICH hands out
 * one preallocated handle for every send that completed at once. */
static inline req_t *req_find(MPI_Request r) {
    if (!nreqs || r == MPI_REQUEST_NULL) return NULL;
    req_t *best = NULL;
    for (size_t i = rslot(r); reqs[i].used; i = (i + 1) & (reqcap - 1))
        if (reqs[i].req == r && (best == NULL || reqs[i].hid < best->hid)) best = &reqs[i];
    return best;
}

static void req_del(req_t *e) {
    size_t i = (size_t)(e - reqs), j = i;
    reqs[i].used = 0;
    nreqs--;
    for (;;) {
        j = (j + 1) & (reqcap - 1);
        if (!reqs[j].used) return;
        size_t k = rslot(reqs[j].req);
        /* move j back to i unless its home slot k lies cyclically in (i, j] */
        if ((i <= j) ? (i < k && k <= j) : (i < k || k <= j)) continue;
        reqs[i] = reqs[j];
        reqs[j].used = 0;
        i = j;
    }
}

/* ---- files ------------------------------------------------------------------------------ */

static void fail_write(const char *what, int err);

static void name_line(const char *line) {
    size_t n = strlen(line);
    while (n && names_fd >= 0) {
        ssize_t w = write(names_fd, line, n);
        if (w < 0) { if (errno == EINTR) continue; fail_write("names.jsonl", errno); return; }
        line += w;
        n -= (size_t)w;
    }
}

static int map_next(void) {
    if (cur) munmap((char *)lim - window_bytes, window_bytes);
    cur = lim = NULL;
    off_t start = (off_t)(windows * window_bytes);
    int err = posix_fallocate(raw_fd, start, (off_t)window_bytes);
    if (err) return err;
    void *p = mmap(NULL, window_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, raw_fd, start);
    if (p == MAP_FAILED) return errno;
    /* Fault the whole window in, writable, in one call (Linux 5.14+; elsewhere the pages fault
     * one by one as records are written): measured here, the faults of a shared file mapping
     * cost about 150 ns a record when the program takes them one page at a time. */
    madvise(p, window_bytes, MADV_POPULATE_WRITE_);
    windows++;
    cur = p;
    lim = (int64_t *)((char *)p + window_bytes);
    return 0;
}

static int64_t scratch[NFIELDS];

/* The open run of unsuccessful polls (failed_poll): its Poll record while it is still the last
 * one written (cur == poll_rec + NFIELDS), and its count. A full window ends the run. */
static int64_t *poll_rec;
static int64_t poll_n;

static void roll(void) {
    poll_rec = NULL;
    if (!on) { cur = scratch; lim = scratch + NFIELDS; return; }
    int err = map_next();
    if (err) fail_write("events.raw", err);
}

/* Append one record (hindsight.trace.core.RAW_COLUMNS); t_end goes last. Always inlined: a call
 * of its own costs the wrapper about 20 instructions (callgrind). */
static inline __attribute__((always_inline)) void rec(int64_t op, int64_t t0, int64_t cpu, int64_t peer, int64_t tag,
                       int64_t comm, int64_t nbytes, int64_t request, int64_t root, int64_t t1) {
    int64_t *r = cur;
    r[0] = op; r[1] = -1; r[2] = t0; r[3] = cpu; r[4] = peer; r[5] = tag; r[6] = comm;
    r[7] = nbytes; r[8] = request; r[9] = root;
    __asm__ __volatile__("" ::: "memory");
    r[10] = t1;
    cur = r + NFIELDS;
    if (cur >= lim) roll();
}

/* An unsuccessful poll [t0, t1] (MPI_Iprobe/MPI_Improbe that found nothing, MPI_Test* on traced
 * requests that completed none; instrument/completion.py failed_poll): it extends the rank's
 * open run, whose Poll record is still the last one (count and t_end rewritten in place), or
 * starts one (format 1.3). No record per poll; any other record ends the run. */
static inline void failed_poll(int64_t t0, int64_t t1) {
    if (poll_rec && cur == poll_rec + NFIELDS) {
        poll_rec[7] = ++poll_n;
        __asm__ __volatile__("" ::: "memory");
        poll_rec[10] = t1;
        return;
    }
    int64_t *r = cur;
    rec(OP_POLL, t0, -1, -1, -1, -1, 1, -1, -1, t1);
    /* (rec rolled when the record filled the window: then the run ends with it) */
    if (cur == r + NFIELDS) { poll_rec = r; poll_n = 1; }
}

static size_t put_str(char *b, size_t at, size_t cap, const char *s) {
    while (*s && at + 1 < cap) {
        if (*s == '"' || *s == '\\') { if (at + 2 >= cap) break; b[at++] = '\\'; }
        b[at++] = ((unsigned char)*s < 0x20) ? ' ' : *s;   /* no raw control characters in JSON */
        s++;
    }
    b[at] = 0;
    return at;
}

/* n after appending to b[cap]: snprintf returns what it would have written, which may be more */
#define CLAMP(n, cap) ((n) >= (cap) ? (cap) - 1 : (n))

/* ---- the machine's conditions (hindsight/conditions.py reads the same /proc files) -------- */

typedef struct {
    int64_t t;                          /* CLOCK_MONOTONIC */
    int64_t ctx[2];                     /* voluntary, involuntary context switches; -1 unknown */
    int64_t wait;                       /* ns runnable but waiting for a core; -1 unknown */
    double load[3];
    int nload;                          /* load averages read (0: none) */
    long long ticks[8];                 /* /proc/stat's cpu line: user .. steal */
    int nticks;
} cond_t;

static cond_t cond_start;

static ssize_t slurp(const char *path, char *b, size_t cap) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return -1;
    ssize_t n = read(fd, b, cap - 1);
    close(fd);
    if (n < 0) return -1;
    b[n] = 0;
    return n;
}

/* This rank's context switches and run-queue wait; with `machine`, the load averages and CPU
 * ticks too (rank 0's view, as instrument.session takes it). */
static void read_conditions(cond_t *c, int machine) {
    char b[4096];
    c->t = now_ns();
    c->ctx[0] = c->ctx[1] = c->wait = -1;
    c->nload = c->nticks = 0;
    if (slurp("/proc/self/status", b, sizeof b) > 0) {
        static const char vol[] = "\nvoluntary_ctxt_switches:";
        static const char invol[] = "\nnonvoluntary_ctxt_switches:";
        char *v = strstr(b, vol), *i = strstr(b, invol);
        if (v && i) {
            c->ctx[0] = strtoll(v + sizeof vol - 1, NULL, 10);
            c->ctx[1] = strtoll(i + sizeof invol - 1, NULL, 10);
        }
    }
    if (slurp("/proc/self/schedstat", b, sizeof b) > 0) {
        char *end;
        strtoll(b, &end, 10);
        if (end != b) c->wait = strtoll(end, NULL, 10);
    }
    if (!machine) return;
    c->nload = getloadavg(c->load, 3) == 3 ? 3 : 0;
    if (slurp("/proc/stat", b, sizeof b) > 0 && strncmp(b, "cpu ", 4) == 0) {
        char *p = b + 4, *end;
        for (int k = 0; k < 8; k++, p = end) {
            c->ticks[k] = strtoll(p, &end, 10);
            if (end == p) break;
            c->nticks = k + 1;
        }
        if (c->nticks < 8) c->nticks = 0;
    }
}

/* One snapshot as hindsight.conditions.snapshot writes it: {"time_ns", "loadavg", "cpu_ticks"}. */
static size_t put_snapshot(char *b, size_t n, size_t cap, const char *key, const cond_t *c) {
    n += (size_t)snprintf(b + n, cap - n, ", \"%s\": {\"time_ns\": %lld, \"loadavg\": ", key,
                          (long long)c->t);
    n = CLAMP(n, cap);
    if (c->nload)
        n += (size_t)snprintf(b + n, cap - n, "[%.6g, %.6g, %.6g]", c->load[0], c->load[1],
                              c->load[2]);
    else
        n += (size_t)snprintf(b + n, cap - n, "null");
    n = CLAMP(n, cap);
    n += (size_t)snprintf(b + n, cap - n, ", \"cpu_ticks\": ");
    n = CLAMP(n, cap);
    if (c->nticks) {
        for (int k = 0; k < 8; k++) {
            n += (size_t)snprintf(b + n, cap - n, k ? ", %lld" : "[%lld", c->ticks[k]);
            n = CLAMP(n, cap);
        }
        n += (size_t)snprintf(b + n, cap - n, "]}");
    } else {
        n += (size_t)snprintf(b + n, cap - n, "null}");
    }
    return CLAMP(n, cap);
}

/* The conditions from start() to the end of the program `c`: this rank's context switches
 * and run-queue wait over that span (null where /proc did not tell), rank 0 the machine's two
 * snapshots; native.py turns them into the manifest's `conditions`. */
static size_t put_conditions(char *b, size_t n, size_t cap, const cond_t *c) {
    const cond_t *a = &cond_start;
    if (a->ctx[0] >= 0 && c->ctx[0] >= 0)
        n += (size_t)snprintf(b + n, cap - n, ", \"ctx_switches\": [%lld, %lld]",
                              (long long)(c->ctx[0] - a->ctx[0]),
                              (long long)(c->ctx[1] - a->ctx[1]));
    else
        n += (size_t)snprintf(b + n, cap - n, ", \"ctx_switches\": null");
    n = CLAMP(n, cap);
    if (a->wait >= 0 && c->wait >= 0)
        n += (size_t)snprintf(b + n, cap - n, ", \"run_queue_wait_ns\": %lld",
                              (long long)(c->wait - a->wait));
    else
        n += (size_t)snprintf(b + n, cap - n, ", \"run_queue_wait_ns\": null");
    n = CLAMP(n, cap);
    n += (size_t)snprintf(b + n, cap - n, ", \"conditions_ns\": %lld", (long long)(c->t - a->t));
    n = CLAMP(n, cap);
    if (wrank == 0) {
        n = put_snapshot(b, n, cap, "machine_start", a);
        n = put_snapshot(b, n, cap, "machine_end", c);
    }
    return n;
}

/* ---- calls without a row, counted per name: the rank's `untraced_calls` in status.json ---- *
 * They move data or synchronise, but the trace has no row model for them (as for the Python
 * tracer: docs/trace-format.md, "What is not traced"); the sealer sums them into the manifest,
 * and `trace check` and `trace info` say the traffic is incomplete. Each is counted under the
 * name the Python tracer gives the same mpi4py call (instrument/untraced.py, instrument/rma.py),
 * so a C and a Python program are counted alike (an MPI 4 large-count variant, MPI_Rput_c...,
 * under its call's name). Per call: one increment, and the two stores that say where the rank
 * is (the stop signal, below), nothing else. */
#define UNTRACED_CALLS(X)                                                                    \
    X(RPUT, "Win.Rput") X(RGET, "Win.Rget") X(RACCUMULATE, "Win.Raccumulate")                \
    X(RGET_ACCUMULATE, "Win.Rget_accumulate")                                                \
    X(ISENDRECV, "Isendrecv")                                                                \
    X(ISENDRECV_REPLACE, "Isendrecv_replace") X(PSEND_INIT, "Psend_init")                    \
    X(PRECV_INIT, "Precv_init")                                                              \
    X(ALLTOALLW, "Alltoallw") X(IALLTOALLW, "Ialltoallw")                                    \
    X(NEIGHBOR_ALLTOALLW, "Neighbor_alltoallw") X(INEIGHBOR_ALLTOALLW, "Ineighbor_alltoallw") \
    X(BARRIER_INIT, "Barrier_init") X(BCAST_INIT, "Bcast_init") X(GATHER_INIT, "Gather_init") \
    X(GATHERV_INIT, "Gatherv_init") X(SCATTER_INIT, "Scatter_init")                          \
    X(SCATTERV_INIT, "Scatterv_init") X(ALLGATHER_INIT, "Allgather_init")                    \
    X(ALLGATHERV_INIT, "Allgatherv_init") X(ALLTOALL_INIT, "Alltoall_init")                  \
    X(ALLTOALLV_INIT, "Alltoallv_init") X(ALLTOALLW_INIT, "Alltoallw_init")                  \
    X(REDUCE_INIT, "Reduce_init") X(ALLREDUCE_INIT, "Allreduce_init")                        \
    X(REDUCE_SCATTER_INIT, "Reduce_scatter_init")                                            \
    X(REDUCE_SCATTER_BLOCK_INIT, "Reduce_scatter_block_init") X(SCAN_INIT, "Scan_init")      \
    X(EXSCAN_INIT, "Exscan_init") X(NEIGHBOR_ALLGATHER_INIT, "Neighbor_allgather_init")      \
    X(NEIGHBOR_ALLGATHERV_INIT, "Neighbor_allgatherv_init")                                  \
    X(NEIGHBOR_ALLTOALL_INIT, "Neighbor_alltoall_init")                                      \
    X(NEIGHBOR_ALLTOALLV_INIT, "Neighbor_alltoallv_init")                                    \
    X(NEIGHBOR_ALLTOALLW_INIT, "Neighbor_alltoallw_init")                                    \
    X(INTERCOMM_CREATE, "Create_intercomm")                                                  \
    X(INTERCOMM_FROM_GROUPS, "Intercomm.Create_from_groups")                                 \
    X(INTERCOMM_MERGE, "Intercomm.Merge") X(SPAWN, "Spawn")                                  \
    X(SPAWN_MULTIPLE, "Spawn_multiple") X(ACCEPT, "Accept") X(CONNECT, "Connect")            \
    X(JOIN, "Join") X(CANCEL, "Request.Cancel")
#define U_ENUM(ID, NAME) U_##ID,
#define U_NAME(ID, NAME) NAME,
enum { UNTRACED_CALLS(U_ENUM) N_UNTRACED };
static const char *const untraced_name[N_UNTRACED] = {UNTRACED_CALLS(U_NAME)};
static int64_t uncounted[N_UNTRACED];     /* per UNTRACED_CALLS entry: calls made */

/* Set when two threads called MPI at once (the owner section below): the rank records nothing
 * more; the op codes of the call that came in and of the one in progress (0: not known, -2 - k:
 * counted call k, as in_op) go into status.json's "concurrent_mpi". */
static volatile int clashed;
static int64_t clash_ops[2];

/* status.json beside the records (what the rank file's metadata says); rank 0 adds the MPI
 * library. `end` (the conditions at the end of the program) is NULL on the signal path, which
 * only calls write/rename. */
/* The MPI library's first version line into lib (MPI_MAX_LIBRARY_VERSION_STRING bytes) and the
 * standard's version. */
static void mpi_library(char *lib, int *v, int *sv) {
    int len = 0;
    PMPI_Get_library_version(lib, &len);
    char *nl = strchr(lib, '\n');
    if (nl) *nl = 0;
    PMPI_Get_version(v, sv);
}

static void write_status(const char *status, int64_t program_end, const cond_t *end) {
    char tmp[4200], dst[4200], b[8192];
    snprintf(tmp, sizeof tmp, "%s/.status.json.tmp", stage);
    snprintf(dst, sizeof dst, "%s/status.json", stage);
    size_t n = (size_t)snprintf(b, sizeof b,
        "{\"format_version\": \"1.1\", \"rank\": %d, \"status\": \"%s\", \"host\": \"", wrank,
        status);
    n = CLAMP(n, sizeof b);
    n = put_str(b, n, sizeof b, host);
    n += (size_t)snprintf(b + n, sizeof b - n,
        "\", \"clock_offset_ns\": %lld, \"clock_error_ns\": %lld, \"epoch_ns\": %lld, "
        "\"tracer\": \"pmpi\", \"program_end_ns\": ", (long long)clock_offset,
        (long long)clock_error, (long long)epoch);
    n = CLAMP(n, sizeof b);
    if (program_end >= 0)
        n += (size_t)snprintf(b + n, sizeof b - n, "%lld", (long long)program_end);
    else
        n += (size_t)snprintf(b + n, sizeof b - n, "null");
    n = CLAMP(n, sizeof b);
    n += (size_t)snprintf(b + n, sizeof b - n, ", \"untraced_calls\": {");
    n = CLAMP(n, sizeof b);
    for (int i = 0, first = 1; i < N_UNTRACED; i++) {
        if (!uncounted[i]) continue;
        n += (size_t)snprintf(b + n, sizeof b - n, "%s\"%s\": %lld", first ? "" : ", ",
                              untraced_name[i], (long long)uncounted[i]);
        n = CLAMP(n, sizeof b);
        first = 0;
    }
    n += (size_t)snprintf(b + n, sizeof b - n, "}");
    n = CLAMP(n, sizeof b);
    if (clashed) {
        n += (size_t)snprintf(b + n, sizeof b - n, ", \"concurrent_mpi\": [%lld, %lld]",
                              (long long)clash_ops[0], (long long)clash_ops[1]);
        n = CLAMP(n, sizeof b);
    }
    if (wrank == 0) {
        char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
        int v = 0, sv = 0;
        mpi_library(lib, &v, &sv);
        n += (size_t)snprintf(b + n, sizeof b - n, ", \"mpi_version\": \"%d.%d\", "
                              "\"mpi_library\": \"", v, sv);
        n = CLAMP(n, sizeof b);
        n = put_str(b, n, sizeof b, lib);
        n += (size_t)snprintf(b + n, sizeof b - n, "\"");
        n = CLAMP(n, sizeof b);
    }
    if (end) n = put_conditions(b, n, sizeof b, end);
    n += (size_t)snprintf(b + n, sizeof b - n, "}\n");
    n = CLAMP(n, sizeof b);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return;
    ssize_t w = write(fd, b, n);
    close(fd);
    if (w == (ssize_t)n) rename(tmp, dst);
}

static void stop(const char *status, int64_t program_end, const cond_t *end) {
    if (finished) return;
    finished = 1;
    on = 0;
    write_status(status, program_end, end);
    cur = scratch;
    lim = scratch + NFIELDS;
    /* the mapping is left to the kernel (it stays the file's); the lock goes with the fd */
    if (names_fd >= 0) close(names_fd);
    if (raw_fd >= 0) close(raw_fd);
    names_fd = raw_fd = -1;
}

static void fail_write(const char *what, int err) {
    fprintf(stderr, "hindsight: rank %d: cannot write %s/%s: %s; stopping the run (the trace "
            "stays incomplete)\n", wrank, stage, what, strerror(err));
    stop("write-error", -1, NULL);
    PMPI_Abort(MPI_COMM_WORLD, 1);
}

static void at_exit(void) {
    if (on && !finished) stop("exited", -1, NULL);
}

/* ---- where the rank is, for the stop signal (instrument/stopped.py) ----------------------- *
 * The op code of the traced call the rank is inside (0: none, -1: MPI_Finalize, -2 - k: the
 * counted call k of UNTRACED_CALLS) and the call's
 * return address (the program's call site), stored at the call's entry; the op code is cleared
 * at its exit. Nothing else is done per call: the signal handler reads them when asked. */
static volatile int64_t in_op;
static void *volatile in_caller;
static int stop_fd = -1;

#define WHERE(OPC) (in_caller = __builtin_return_address(0), in_op = (OPC))

/* ---- one thread at a time ----------------------------------------------------------------- *
 * The rank belongs to the thread of its last traced call (`owner`); `depth` counts that
 * thread's wrappers in progress (more than one only when MPI calls back into the program, which
 * calls MPI again). A wrapper that records or reads the tables owns the rank for its whole run
 * (OWN, released when the wrapper returns): on the owner thread that is one comparison and an
 * increment, nothing else. Another thread takes the rank under a lock, and only if no wrapper
 * is in progress: a program that calls MPI from one thread at a time (funneled or serialized
 * use, mpi4py.futures' manager thread) is recorded whole. If one is in progress, two threads
 * call MPI at once: the rank stops recording (`clashed`, the owner becomes nobody), every later
 * call passes straight to PMPI, and MPI_Finalize writes status "concurrent-mpi". The call in
 * progress checks at its return, before it records or touches a table, that the rank is still
 * its thread's (`kept`): so is a clash found whichever thread got in first, and no record is
 * ever written by two threads. */
static volatile pthread_t owner;
static volatile int depth;
static pthread_mutex_t owner_lock = PTHREAD_MUTEX_INITIALIZER;

/* Under owner_lock: the first clash is the one kept. */
static void clash(int64_t op, int64_t other) {
    if (clashed) return;
    clash_ops[0] = op;
    clash_ops[1] = other;
    clashed = 1;
    owner = (pthread_t)0;
}

static __attribute__((noinline, cold)) int take_slow(int64_t op) {
    pthread_mutex_lock(&owner_lock);
    int ok = !clashed && depth == 0;
    if (ok) {
        owner = pthread_self();
        depth = 1;
    } else {
        clash(op, in_op);
    }
    pthread_mutex_unlock(&owner_lock);
    return ok;
}

/* At a wrapper's entry while recording: 1 if this thread may record the call `op`. */
static inline int take(int64_t op) {
    if (__builtin_expect(pthread_equal(owner, pthread_self()), 1)) {
        depth++;
        return 1;
    }
    return take_slow(op);
}

static inline void release(int *own) {
    if (*own) depth--;
}

/* Another thread took the rank while call `op` was in MPI: both ran at once. */
static __attribute__((noinline, cold)) int lost(int64_t op) {
    pthread_mutex_lock(&owner_lock);
    clash(op, in_op);
    pthread_mutex_unlock(&owner_lock);
    return 0;
}

/* After the PMPI call: 1 if the rank is still this thread's (the call may be recorded). */
static inline int kept(int64_t op) {
    return __builtin_expect(pthread_equal(owner, pthread_self()), 1) || lost(op);
}

/* own_: this wrapper records (recording is on and the rank is this thread's), released on
 * return; ENTER/LEAVE bracket the PMPI call (where the rank is, for the stop signal), and
 * LEAVE returns the call's result at once, recording nothing, if the rank was lost meanwhile. */
#define OWN(OPC) int own_ __attribute__((cleanup(release))) = on && take(OPC)
#define ENTER(OPC) const int64_t op_ = (OPC); WHERE(op_)
#define LEAVE_THEN(CLEANUP) in_op = 0; if (!kept(op_)) { CLEANUP; return rc; }
#define LEAVE() LEAVE_THEN((void)0)

static size_t put_hex(char *b, size_t n, uint64_t v) {
    char d[16];
    int k = 0;
    do { d[k++] = "0123456789abcdef"[v & 15]; v >>= 4; } while (v);
    while (k) b[n++] = d[--k];
    return n;
}

static size_t put_lit(char *b, size_t n, const char *s) {
    while (*s) b[n++] = *s++;
    return n;
}

/* The answer: "pmpi op N caller 0xADDR" (a counted call: "pmpi call NAME caller 0xADDR") and
 * "end", with write(2) only (async-signal-safe). */
static void on_stop_signal(int sig) {
    (void)sig;
    int saved = errno;
    char b[160];
    size_t n;
    int64_t op = in_op;
    if (op <= -2 && -2 - op < N_UNTRACED) {
        n = put_lit(b, 0, "pmpi call ");
        n = put_lit(b, n, untraced_name[-2 - op]);
    } else {
        n = put_lit(b, 0, "pmpi op ");
        if (op < 0) { b[n++] = '-'; op = -op; }
        char d[24];
        int k = 0;
        do { d[k++] = (char)('0' + op % 10); op /= 10; } while (op);
        while (k) b[n++] = d[--k];
    }
    n = put_lit(b, n, " caller 0x");
    n = put_hex(b, n, (uint64_t)(uintptr_t)in_caller);
    n = put_lit(b, n, "\nend\n");
    if (stop_fd >= 0) {
        ssize_t w = write(stop_fd, b, n);
        (void)w;
    }
    errno = saved;
}

/* "module LO HI BIAS PATH" for every loaded ELF object (its PT_LOAD range and load bias), so
 * that the sealer can turn a return address into a file and an address addr2line reads. */
static int module_line(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    (void)data;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        if (ph->p_vaddr < lo) lo = ph->p_vaddr;
        if (ph->p_vaddr + ph->p_memsz > hi) hi = ph->p_vaddr + ph->p_memsz;
    }
    if (hi <= lo) return 0;
    char path[4096];
    const char *name = info->dlpi_name;
    if (!name || !*name) {                       /* the main program */
        ssize_t m = readlink("/proc/self/exe", path, sizeof path - 1);
        if (m <= 0) return 0;
        path[m] = 0;
        name = path;
    }
    dprintf(stop_fd, "module %llx %llx %llx %s\n", (unsigned long long)(info->dlpi_addr + lo),
            (unsigned long long)(info->dlpi_addr + hi), (unsigned long long)info->dlpi_addr,
            name);
    return 0;
}

/* Leave the handler first, then write the pid: collect signals only ranks whose pid it read,
 * and a real-time signal without a handler would kill the rank. */
static void stop_setup(void) {
    const char *s = getenv("HINDSIGHT_STOP_SIGNAL");
    int sig = s ? atoi(s) : 0;
    if (sig <= 0 || sig > SIGRTMAX) return;
    char path[4200];
    snprintf(path, sizeof path, "%s/stopped_in.txt", stage);
    stop_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
    if (stop_fd < 0) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESTART;
    sigaction(sig, &sa, NULL);
    dprintf(stop_fd, "pid %d\n", (int)getpid());
    dl_iterate_phdr(module_line, NULL);
}

static struct sigaction old_term, old_int;

static void on_signal(int sig) {
    if (on && !finished) stop("terminated", -1, NULL);
    sigaction(sig, sig == SIGTERM ? &old_term : &old_int, NULL);
    raise(sig);
}

/* A rank that crashes (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) says so beside its records, as
 * a Python rank that raised does: its error.txt names the signal and its status is "error", so
 * the sealed trace tells the crashed rank from the ones mpiexec killed after it. The handler
 * that was there before (a Python faulthandler, say) runs next, by re-raising under it. */
static const int fatal_sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
#define NFATAL ((int)(sizeof fatal_sigs / sizeof fatal_sigs[0]))
static struct sigaction old_fatal[NFATAL];

/* The rank's error (error.txt beside its records, which the sealer puts in the manifest's
 * rank_errors) and its status "error"; open/write/close only (async-signal-safe). With
 * `keep`, an error already written stays (a Python rank's exception, before its Abort). */
static void failed_with(const char *msg, int n, int keep) {
    char path[4200];
    snprintf(path, sizeof path, "%s/error.txt", stage);
    int fd = open(path, O_WRONLY | O_CREAT | (keep ? O_EXCL : O_TRUNC), 0644);
    if (fd >= 0) {
        ssize_t w = write(fd, msg, (size_t)(n > 0 ? n : 0));
        (void)w;
        close(fd);
    }
    stop("error", -1, NULL);
}

static void on_fatal(int sig) {
    int k = 0;
    while (k < NFATAL - 1 && fatal_sigs[k] != sig) k++;
    if (on && !finished) {
        char msg[96];
        int n = snprintf(msg, sizeof msg, "crashed: signal %d (%s)", sig,
                         sig == SIGSEGV ? "SIGSEGV" : sig == SIGBUS ? "SIGBUS" :
                         sig == SIGFPE ? "SIGFPE" : sig == SIGILL ? "SIGILL" : "SIGABRT");
        failed_with(msg, (int)CLAMP((size_t)n, sizeof msg), 0);
    }
    sigaction(sig, &old_fatal[k], NULL);
    raise(sig);
}

/* The rank that aborts the job says so, as one that crashed does: the others are killed by
 * mpiexec and would otherwise look the same as it. A rank whose launcher aborts it after an
 * uncaught exception (instrument/run.py) keeps the exception as its error. */
int MPI_Abort(MPI_Comm comm, int errorcode) {
    if (on && !finished) {
        char msg[96];
        int n = snprintf(msg, sizeof msg, "called MPI_Abort (error code %d)", errorcode);
        failed_with(msg, (int)CLAMP((size_t)n, sizeof msg), 1);
    }
    return PMPI_Abort(comm, errorcode);
}

/* ---- set-up ------------------------------------------------------------------------------ */

#define CLOCK_ROUNDS 32

/* As instrument.session._clock_offsets: ranks on rank 0's host read its clock (offset 0); on
 * every other host, its lowest rank measures the offset by Cristian's method (min round trip
 * of CLOCK_ROUNDS) and the host's other ranks take it. */
static void clock_offsets(const char *hosts, int hlen) {
    int64_t *meas = calloc((size_t)wsize * 2, sizeof(int64_t));
    int *probe = malloc((size_t)wsize * sizeof(int));
    for (int r = 0; r < wsize; r++) {
        probe[r] = -1;
        if (strcmp(hosts + (size_t)r * hlen, hosts) == 0) continue;
        for (int q = 0; q <= r; q++)
            if (strcmp(hosts + (size_t)q * hlen, hosts + (size_t)r * hlen) == 0) {
                probe[r] = q;
                break;
            }
    }
    int64_t mine[2] = {0, 0};
    for (int r = 1; r < wsize; r++) {
        if (probe[r] != r) continue;
        int64_t t_remote = 0, best = -1, dummy = 0;
        for (int k = 0; k < CLOCK_ROUNDS; k++) {
            if (wrank == 0) {
                PMPI_Recv(&dummy, 1, MPI_INT64_T, r, 31000, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                t_remote = now_ns();
                PMPI_Send(&t_remote, 1, MPI_INT64_T, r, 31001, MPI_COMM_WORLD);
            } else if (wrank == r) {
                int64_t t0 = now_ns();
                PMPI_Send(&dummy, 1, MPI_INT64_T, 0, 31000, MPI_COMM_WORLD);
                PMPI_Recv(&t_remote, 1, MPI_INT64_T, 0, 31001, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                int64_t t1 = now_ns();
                if (best < 0 || t1 - t0 < best) {
                    best = t1 - t0;
                    mine[0] = (t0 + t1) / 2 - t_remote;
                    mine[1] = best / 2;
                }
            }
        }
    }
    PMPI_Allgather(mine, 2, MPI_INT64_T, meas, 2, MPI_INT64_T, MPI_COMM_WORLD);
    if (probe[wrank] >= 0) {
        clock_offset = meas[2 * probe[wrank]];
        clock_error = meas[2 * probe[wrank] + 1];
    }
    free(meas);
    free(probe);
}

/* The rank's staging folder (for status.json); traced, its records and names files too. */
static int open_stage(const char *dir, int64_t capacity) {
    snprintf(stage, sizeof stage, "%s/.staging/rank-%05d", dir, wrank);
    if (mkdir(stage, 0755) != 0 && errno != EEXIST) return errno;
    char path[4200];
    if (untraced) {     /* names.jsonl for start_lines only: nothing is recorded */
        snprintf(path, sizeof path, "%s/names.jsonl", stage);
        names_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
        return names_fd < 0 ? errno : 0;
    }
    snprintf(path, sizeof path, "%s/events.raw", stage);
    raw_fd = open(path, O_RDWR | O_CREAT, 0644);
    if (raw_fd < 0) return errno;
    /* held while the rank lives: `trace seal` tells a live rank from a dead one by it; emptied
     * only once held, so that another process with this rank number cannot cut a live rank's
     * mapped file short */
    if (flock(raw_fd, LOCK_EX | LOCK_NB) != 0) return errno;
    if (ftruncate(raw_fd, 0) != 0) return errno;
    snprintf(path, sizeof path, "%s/names.jsonl", stage);
    names_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
    if (names_fd < 0) return errno;
    window_bytes = (size_t)capacity * RECORD;
    int err = map_next();
    if (err) return err;
    /* the first window's pages are written once now, outside the program's measured time
     * (where MADV_POPULATE_WRITE is missing) */
    for (size_t o = 0; o < window_bytes; o += 4096) ((volatile char *)cur)[o] = 0;
    return 0;
}

/* The rank's host and (rank 0) the MPI library, into names.jsonl at start-up (untraced too):
 * status.json, which says them too, is written only at the end (MPI_Finalize, a signal), so a
 * run killed before that (an abort, a crashing rank, SIGKILL) still has them in its manifest
 * (native.finish). */
static void start_lines(void) {
    char b[MPI_MAX_LIBRARY_VERSION_STRING + 600];
    size_t n = (size_t)snprintf(b, sizeof b, "[\"host\", \"");
    n = put_str(b, n, sizeof b, host);
    n += (size_t)snprintf(b + n, sizeof b - n, "\"]\n");
    n = CLAMP(n, sizeof b);
    name_line(b);
    if (wrank != 0) return;
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int v = 0, sv = 0;
    mpi_library(lib, &v, &sv);
    n = (size_t)snprintf(b, sizeof b, "[\"mpi\", \"%d.%d\", \"", v, sv);
    n = put_str(b, n, sizeof b, lib);
    n += (size_t)snprintf(b + n, sizeof b - n, "\"]\n");
    n = CLAMP(n, sizeof b);
    name_line(b);
}

static void start(void) {
    const char *dir = getenv("HINDSIGHT_TRACE_DIR");
    if (!dir || !*dir) return;
    /* A process started by MPI_Comm_spawn has an MPI_COMM_WORLD of its own, whose rank numbers
     * are the traced job's: it runs untraced (its parent counts the spawn). */
    MPI_Comm parent = MPI_COMM_NULL;
    PMPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL) return;
    PMPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    PMPI_Comm_size(MPI_COMM_WORLD, &wsize);
    const char *h = getenv("HINDSIGHT_HOSTNAME");
    if (h && *h) snprintf(host, sizeof host, "%s", h);
    else gethostname(host, sizeof host - 1);
    const char *s = getenv("HINDSIGHT_CPU_SAMPLING");
    cpu_all = s && strcmp(s, "all") == 0;
    s = getenv("HINDSIGHT_BUFFER_EVENTS");
    int64_t capacity = s ? atoll(s) : 65536;
    if (capacity < 1) capacity = 1;
    capacity = (capacity + GRANULE - 1) / GRANULE * GRANULE;
    const char *run_id = getenv("HINDSIGHT_RUN_ID");
    s = getenv("HINDSIGHT_UNTRACED");
    untraced = s && strcmp(s, "1") == 0;

    int err = open_stage(dir, capacity), any = 0;
    PMPI_Allreduce(&err, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any) {
        if (err)
            fprintf(stderr, "hindsight: rank %d: cannot set up the trace in %s: %s\n", wrank, dir,
                    strerror(err));
        PMPI_Finalize();
        _exit(2);
    }
    char line[512];
    snprintf(line, sizeof line, "[\"rank\", %d, \"%s\", %lld]\n", wrank, run_id ? run_id : "",
             (long long)capacity);
    name_line(line);
    start_lines();
    if (untraced) {
        close(names_fd);
        names_fd = -1;
    }

    char *hosts = calloc((size_t)wsize, sizeof host);
    PMPI_Allgather(host, sizeof host, MPI_CHAR, hosts, sizeof host, MPI_CHAR, MPI_COMM_WORLD);
    world_entry = (comm_t){MPI_COMM_WORLD, 0, NULL, wsize, 0, 0};
    owner = pthread_self();
    self_entry = (comm_t){MPI_COMM_SELF, 1, &wrank, 1, 0, 0};
    started = 1;
    if (!untraced) {
        on = 1;
        stop_setup();
        atexit(at_exit);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigaction(SIGTERM, &sa, &old_term);
        sigaction(SIGINT, &sa, &old_int);
        struct sigaction fa;
        memset(&fa, 0, sizeof fa);
        fa.sa_handler = on_fatal;
        fa.sa_flags = SA_NODEFER;       /* a fault inside the handler kills at once */
        for (int k = 0; k < NFATAL; k++) sigaction(fatal_sigs[k], &fa, &old_fatal[k]);
    }

    read_conditions(&cond_start, wrank == 0);
    PMPI_Barrier(MPI_COMM_WORLD);
    int64_t epoch0 = wrank == 0 ? now_ns() : 0;
    PMPI_Bcast(&epoch0, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
    clock_offsets(hosts, (int)sizeof host);
    free(hosts);
    epoch = epoch0 + clock_offset;
    snprintf(line, sizeof line, "[\"epoch\", %lld]\n", (long long)epoch);
    name_line(line);
}

int MPI_Init(int *argc, char ***argv) {
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS) start();
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    const char *dir = getenv("HINDSIGHT_TRACE_DIR"), *u = getenv("HINDSIGHT_UNTRACED");
    const char *d = getenv("HINDSIGHT_MULTIPLE_IS_DEFAULT");
    int tracing = dir && *dir && !(u && strcmp(u, "1") == 0);
    int by_default = d && strcmp(d, "1") == 0;
    if (rc == MPI_SUCCESS && tracing) {
        /* a process made by MPI_Comm_spawn (mpi4py.futures' workers...) is not traced (start) */
        MPI_Comm parent = MPI_COMM_NULL;
        PMPI_Comm_get_parent(&parent);
        tracing = parent == MPI_COMM_NULL;
    }
    if (rc == MPI_SUCCESS && tracing && *provided == MPI_THREAD_MULTIPLE && !by_default) {
        /* One record cursor per rank: calls of several threads would overlap and corrupt it.
         * Refused as the Python tracer refuses it: one line, every rank exits with status 2.
         * Accepted with HINDSIGHT_MULTIPLE_IS_DEFAULT=1: the level is the default of the
         * runtime that initialised MPI (mpi4py's), not one the program asked for, and the
         * program is taken to call MPI from one thread (as the Python tracer takes it). */
        int r = 0;
        PMPI_Comm_rank(MPI_COMM_WORLD, &r);
        if (r == 0) {
            /* as the Python tracer words it; collect prints refused.txt after "Error: " */
            const char *msg = "the program asks for MPI_THREAD_MULTIPLE (thread-multiple): the "
                              "tracer records the MPI calls of one thread at a time; ask "
                              "MPI_Init_thread for MPI_THREAD_SERIALIZED or MPI_THREAD_FUNNELED "
                              "(mpi4py: MPI.Init_thread(MPI.THREAD_SERIALIZED), or "
                              "mpi4py.rc.thread_level = 'serialized' where mpi4py initialises "
                              "MPI) to trace it, or run it untraced";
            char path[4200];
            snprintf(path, sizeof path, "%s/.staging/refused.txt", dir);
            FILE *f = fopen(path, "w");
            if (f) { fprintf(f, "%s\n", msg); fclose(f); }
            fprintf(stderr, "hindsight: %s\n", msg);
        }
        PMPI_Barrier(MPI_COMM_WORLD);
        PMPI_Finalize();
        exit(2);
    }
    if (rc == MPI_SUCCESS) start();
    return rc;
}

/* The end of a Python program that the library records (instrument/run.py, --recorder pmpi),
 * marked by the launcher through ctypes as soon as the program's code has returned: the point
 * where the Python tracer and an untraced run end the wall time. mpi4py finalizes MPI only in
 * the interpreter's teardown (tens of ms later), which no untraced run counts. */
static int64_t program_end_mark = -1;
static cond_t cond_end_mark;

void hindsight_program_end(void) {
    if (!started || finished || program_end_mark >= 0) return;
    program_end_mark = now_ns() - epoch;
    read_conditions(&cond_end_mark, wrank == 0);
}

/* The end of a Python program's untraced run (instrument/plain/sitecustomize.py): its last
 * exit handler puts CLOCK_MONOTONIC into HINDSIGHT_PROGRAM_END_NS, read here. */
static void end_from_environment(void) {
    const char *s = getenv("HINDSIGHT_PROGRAM_END_NS");
    if (!started || finished || program_end_mark >= 0 || !s || !*s) return;
    program_end_mark = atoll(s) - epoch;
    read_conditions(&cond_end_mark, wrank == 0);
}

/* The end of the program (`program_end_ns`, what `wall_ns` ends at) is this call's entry, or
 * the mark above when the launcher (or an untraced Python program's exit handler) set one. */
int MPI_Finalize(void) {
    if (started && !finished) {
        end_from_environment();
        hindsight_program_end();            /* a no-op when the end is marked already */
        stop(clashed ? "concurrent-mpi" : "complete", program_end_mark, &cond_end_mark);
    }
    WHERE(-1);
    int rc = PMPI_Finalize();
    in_op = 0;
    return rc;
}

/* ---- point-to-point --------------------------------------------------------------------- */

/* Every call with a count has, since MPI 4, a large-count variant MPI_X_c (counts MPI_Count,
 * displacements and displacement units MPI_Aint), which mpi4py 4 calls; both record the same
 * row. Each such wrapper is a macro W(SFX, CNT, DSP) instantiated for both: SFX the name's
 * suffix (empty or _c), CNT the count type (int or MPI_Count), DSP the displacement type (int
 * or MPI_Aint). */
#if MPI_VERSION >= 4
#define INT_AND_LARGE(W) W(, int, int) W(_c, MPI_Count, MPI_Aint)
#else
#define INT_AND_LARGE(W) W(, int, int)
#endif

#define CPU0 int64_t c0 = cpu_all ? cpu_ns() : 0
#define CPU1 (cpu_all ? cpu_ns() - c0 : -1)

static inline int64_t bytes(int64_t count, MPI_Datatype t) {
    int s;
    PMPI_Type_size(t, &s);
    return count * s;
}

static inline int64_t status_bytes(const MPI_Status *st) {
#if MPI_VERSION >= 4
    MPI_Count n;
    PMPI_Get_count_c(st, MPI_BYTE, &n);
#else
    int n;
    PMPI_Get_count(st, MPI_BYTE, &n);
#endif
    return n == MPI_UNDEFINED ? -1 : (int64_t)n;
}

#define SEND_WRAPPER(NAME, OPC, SFX, CNT)                                                    \
int NAME##SFX(const void *buf, CNT count, MPI_Datatype type, int dest, int tag,              \
              MPI_Comm comm) {                                                               \
    OWN(OPC);                                                                                \
    if (!own_) return P##NAME##SFX(buf, count, type, dest, tag, comm);                       \
    CPU0;                                                                                    \
    ENTER(OPC);                                                                              \
    int64_t t0 = now_ns();                                                                   \
    int rc = P##NAME##SFX(buf, count, type, dest, tag, comm);                                \
    int64_t t1 = now_ns();                                                                   \
    LEAVE();                                                                                 \
    comm_t *c = comm_of(comm);                                                               \
    rec(OPC, t0, CPU1, world_of(c, dest), tag, c->id, bytes(count, type), -1, -1, t1);       \
    return rc;                                                                               \
}

#define P2P(SFX, CNT, DSP)                                                                   \
SEND_WRAPPER(MPI_Send, OP_SEND, SFX, CNT)                                                    \
SEND_WRAPPER(MPI_Ssend, OP_SSEND, SFX, CNT)                                                  \
SEND_WRAPPER(MPI_Bsend, OP_BSEND, SFX, CNT)                                                  \
SEND_WRAPPER(MPI_Rsend, OP_RSEND, SFX, CNT)                                                  \
                                                                                             \
int MPI_Recv##SFX(void *buf, CNT count, MPI_Datatype type, int source, int tag,              \
                  MPI_Comm comm, MPI_Status *status) {                                       \
    OWN(OP_RECV);                                                                            \
    if (!own_) return PMPI_Recv##SFX(buf, count, type, source, tag, comm, status);           \
    MPI_Status mine;                                                                         \
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &mine : status;                           \
    CPU0;                                                                                    \
    ENTER(OP_RECV);                                                                          \
    int64_t t0 = now_ns();                                                                   \
    int rc = PMPI_Recv##SFX(buf, count, type, source, tag, comm, st);                        \
    int64_t t1 = now_ns();                                                                   \
    LEAVE();                                                                                 \
    comm_t *c = comm_of(comm);                                                               \
    rec(OP_RECV, t0, CPU1, world_of(c, st->MPI_SOURCE), st->MPI_TAG, c->id,                  \
        status_bytes(st), -1, -1, t1);                                                       \
    return rc;                                                                               \
}                                                                                            \
                                                                                             \
int MPI_Sendrecv##SFX(const void *sendbuf, CNT sendcount, MPI_Datatype sendtype, int dest,   \
                      int sendtag, void *recvbuf, CNT recvcount, MPI_Datatype recvtype,      \
                      int source, int recvtag, MPI_Comm comm, MPI_Status *status) {          \
    OWN(OP_SR_SEND);                                                                         \
    if (!own_)                                                                               \
        return PMPI_Sendrecv##SFX(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf,      \
                                  recvcount, recvtype, source, recvtag, comm, status);       \
    MPI_Status mine;                                                                         \
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &mine : status;                           \
    CPU0;                                                                                    \
    ENTER(OP_SR_SEND);                                                                       \
    int64_t t0 = now_ns();                                                                   \
    int rc = PMPI_Sendrecv##SFX(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf,        \
                                recvcount, recvtype, source, recvtag, comm, st);             \
    int64_t t1 = now_ns();                                                                   \
    LEAVE();                                                                                 \
    comm_t *c = comm_of(comm);                                                               \
    rec(OP_SR_SEND, t0, CPU1, world_of(c, dest), sendtag, c->id, bytes(sendcount, sendtype), \
        -1, -1, t1);                                                                         \
    rec(OP_SR_RECV, t0, -1, world_of(c, st->MPI_SOURCE), st->MPI_TAG, c->id,                 \
        status_bytes(st), -1, -1, t1);                                                       \
    return rc;                                                                               \
}                                                                                            \
                                                                                             \
/* as instrument/comm.py records it: the rows of a Sendrecv of `count` elements each way */  \
int MPI_Sendrecv_replace##SFX(void *buf, CNT count, MPI_Datatype type, int dest,             \
                              int sendtag, int source, int recvtag, MPI_Comm comm,           \
                              MPI_Status *status) {                                          \
    OWN(OP_SR_SEND);                                                                         \
    if (!own_)                                                                               \
        return PMPI_Sendrecv_replace##SFX(buf, count, type, dest, sendtag, source, recvtag,  \
                                          comm, status);                                     \
    MPI_Status mine;                                                                         \
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &mine : status;                           \
    CPU0;                                                                                    \
    ENTER(OP_SR_SEND);                                                                       \
    int64_t t0 = now_ns();                                                                   \
    int rc = PMPI_Sendrecv_replace##SFX(buf, count, type, dest, sendtag, source, recvtag,    \
                                        comm, st);                                           \
    int64_t t1 = now_ns();                                                                   \
    LEAVE();                                                                                 \
    comm_t *c = comm_of(comm);                                                               \
    rec(OP_SR_SEND, t0, CPU1, world_of(c, dest), sendtag, c->id, bytes(count, type), -1, -1, \
        t1);                                                                                 \
    rec(OP_SR_RECV, t0, -1, world_of(c, st->MPI_SOURCE), st->MPI_TAG, c->id,                 \
        status_bytes(st), -1, -1, t1);                                                       \
    return rc;                                                                               \
}
INT_AND_LARGE(P2P)

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status) {
    OWN(OP_PROBE);
    if (!own_) return PMPI_Probe(source, tag, comm, status);
    MPI_Status mine;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &mine : status;
    ENTER(OP_PROBE);
    int64_t t0 = now_ns();
    int rc = PMPI_Probe(source, tag, comm, st);
    int64_t t1 = now_ns();
    LEAVE();
    comm_t *c = comm_of(comm);
    rec(OP_PROBE, t0, -1, world_of(c, st->MPI_SOURCE), st->MPI_TAG, c->id, status_bytes(st), -1,
        -1, t1);
    return rc;
}

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status) {
    OWN(OP_IPROBE);
    if (!own_) return PMPI_Iprobe(source, tag, comm, flag, status);
    MPI_Status mine;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &mine : status;
    ENTER(OP_IPROBE);
    int64_t t0 = now_ns();
    int rc = PMPI_Iprobe(source, tag, comm, flag, st);
    int64_t t1 = now_ns();
    LEAVE();
    if (*flag) {
        comm_t *c = comm_of(comm);
        rec(OP_IPROBE, t0, -1, world_of(c, st->MPI_SOURCE), st->MPI_TAG, c->id,
            status_bytes(st), -1, -1, t1);
    } else if (rc == MPI_SUCCESS) {
        failed_poll(t0, t1);
    }
    return rc;
}

/* ---- non-blocking posts ------------------------------------------------------------------ */

#define ISEND_WRAPPER(NAME, OPC, SFX, CNT)                                                   \
int NAME##SFX(const void *buf, CNT count, MPI_Datatype type, int dest, int tag,              \
              MPI_Comm comm, MPI_Request *request) {                                         \
    OWN(OPC);                                                                                \
    if (!own_) return P##NAME##SFX(buf, count, type, dest, tag, comm, request);              \
    ENTER(OPC);                                                                              \
    int64_t t0 = now_ns();                                                                   \
    int rc = P##NAME##SFX(buf, count, type, dest, tag, comm, request);                       \
    int64_t t1 = now_ns();                                                                   \
    LEAVE();                                                                                 \
    comm_t *c = comm_of(comm);                                                               \
    int64_t rid = next_request++;                                                            \
    rec(OPC, t0, -1, world_of(c, dest), tag, c->id, bytes(count, type), rid, -1, t1);        \
    req_put(*request, rid, NULL, c->id);                                                     \
    return rc;                                                                               \
}

#define POSTS(SFX, CNT, DSP)                                                                 \
ISEND_WRAPPER(MPI_Isend, OP_ISEND, SFX, CNT)                                                 \
ISEND_WRAPPER(MPI_Issend, OP_ISSEND, SFX, CNT)                                               \
ISEND_WRAPPER(MPI_Ibsend, OP_IBSEND, SFX, CNT)                                               \
ISEND_WRAPPER(MPI_Irsend, OP_IRSEND, SFX, CNT)                                               \
                                                                                             \
int MPI_Irecv##SFX(void *buf, CNT count, MPI_Datatype type, int source, int tag,             \
                   MPI_Comm comm, MPI_Request *request) {                                    \
    OWN(OP_IRECV);                                                                           \
    if (!own_) return PMPI_Irecv##SFX(buf, count, type, source, tag, comm, request);         \
    ENTER(OP_IRECV);                                                                         \
    int64_t t0 = now_ns();                                                                   \
    int rc = PMPI_Irecv##SFX(buf, count, type, source, tag, comm, request);                  \
    int64_t t1 = now_ns();                                                                   \
    LEAVE();                                                                                 \
    comm_t *c = comm_of(comm);                                                               \
    int64_t rid = next_request++;                                                            \
    rec(OP_IRECV, t0, -1,                                                                    \
        source == MPI_ANY_SOURCE ? ANY_SOURCE_SENTINEL : world_of(c, source),                \
        tag == MPI_ANY_TAG ? ANY_TAG_SENTINEL : tag, c->id, bytes(count, type), rid, -1, t1); \
    req_put(*request, rid, c, c->id);                                                        \
    return rc;                                                                               \
}
INT_AND_LARGE(POSTS)


/* ---- matched probes (MPI_Mprobe, MPI_Improbe) and their receives (MPI_Mrecv, MPI_Imrecv):
 *      an Mprobe and its Mrecv give the rows of instrument/comm.py's pickle-API recv, a Probe
 *      row then a Recv row; an Improbe that matched an Iprobe row (one that did not, none, as
 *      Iprobe); an Imrecv an Irecv post whose peer and tag are the message's, completed by its
 *      Wait or Test row. A message handle names no communicator: each matched message's is
 *      kept here from its probe to its receive, with its source (a world rank) and tag ------ */

typedef struct {
    MPI_Message msg;
    comm_t *comm;
    int64_t peer, tag;
} matched_t;

static matched_t *matched;
static int nmatched, capmatched;

static void matched_put(MPI_Message m, comm_t *c, const MPI_Status *st) {
    if (nmatched == capmatched) {
        capmatched = capmatched ? 2 * capmatched : 8;
        matched = realloc(matched, (size_t)capmatched * sizeof *matched);
    }
    matched[nmatched++] = (matched_t){m, c, world_of(c, st->MPI_SOURCE), st->MPI_TAG};
}

/* The entry of message `m` into *out, taken out of the table (0: there is none). */
static int matched_take(MPI_Message m, matched_t *out) {
    for (int i = 0; i < nmatched; i++)
        if (matched[i].msg == m) {
            *out = matched[i];
            matched[i] = matched[--nmatched];
            return 1;
        }
    return 0;
}

int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *message, MPI_Status *status) {
    OWN(OP_PROBE);
    if (!own_) return PMPI_Mprobe(source, tag, comm, message, status);
    MPI_Status mine;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &mine : status;
    CPU0;
    ENTER(OP_PROBE);
    int64_t t0 = now_ns();
    int rc = PMPI_Mprobe(source, tag, comm, message, st);
    int64_t t1 = now_ns();
    LEAVE();
    comm_t *c = comm_of(comm);
    rec(OP_PROBE, t0, CPU1, world_of(c, st->MPI_SOURCE), st->MPI_TAG, c->id, status_bytes(st),
        -1, -1, t1);
    if (rc == MPI_SUCCESS) matched_put(*message, c, st);
    return rc;
}

int MPI_Improbe(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message,
                MPI_Status *status) {
    OWN(OP_IPROBE);
    if (!own_) return PMPI_Improbe(source, tag, comm, flag, message, status);
    MPI_Status mine;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &mine : status;
    ENTER(OP_IPROBE);
    int64_t t0 = now_ns();
    int rc = PMPI_Improbe(source, tag, comm, flag, message, st);
    int64_t t1 = now_ns();
    LEAVE();
    if (rc == MPI_SUCCESS && *flag) {
        comm_t *c = comm_of(comm);
        rec(OP_IPROBE, t0, -1, world_of(c, st->MPI_SOURCE), st->MPI_TAG, c->id,
            status_bytes(st), -1, -1, t1);
        matched_put(*message, c, st);
    } else if (rc == MPI_SUCCESS) {
        failed_poll(t0, t1);
    }
    return rc;
}

/* A message whose probe the library did not see (made before tracing began) is received
 * without a row: there is none to match it either. */
#define MATCHED_RECEIVES(SFX, CNT, DSP)                                                      \
int MPI_Mrecv##SFX(void *buf, CNT count, MPI_Datatype type, MPI_Message *message,            \
                   MPI_Status *status) {                                                     \
    matched_t m;                                                                             \
    OWN(OP_RECV);                                                                            \
    if (!own_ || !matched_take(*message, &m))                                                \
        return PMPI_Mrecv##SFX(buf, count, type, message, status);                           \
    MPI_Status mine;                                                                         \
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &mine : status;                           \
    CPU0;                                                                                    \
    ENTER(OP_RECV);                                                                          \
    int64_t t0 = now_ns();                                                                   \
    int rc = PMPI_Mrecv##SFX(buf, count, type, message, st);                                 \
    int64_t t1 = now_ns();                                                                   \
    LEAVE();                                                                                 \
    rec(OP_RECV, t0, CPU1, world_of(m.comm, st->MPI_SOURCE), st->MPI_TAG, m.comm->id,        \
        status_bytes(st), -1, -1, t1);                                                       \
    return rc;                                                                               \
}                                                                                            \
                                                                                             \
int MPI_Imrecv##SFX(void *buf, CNT count, MPI_Datatype type, MPI_Message *message,           \
                    MPI_Request *request) {                                                  \
    matched_t m;                                                                             \
    OWN(OP_IRECV);                                                                           \
    if (!own_ || !matched_take(*message, &m))                                                \
        return PMPI_Imrecv##SFX(buf, count, type, message, request);                         \
    ENTER(OP_IRECV);                                                                         \
    int64_t t0 = now_ns();                                                                   \
    int rc = PMPI_Imrecv##SFX(buf, count, type, message, request);                           \
    int64_t t1 = now_ns();                                                                   \
    LEAVE();                                                                                 \
    int64_t rid = next_request++;                                                            \
    rec(OP_IRECV, t0, -1, m.peer, m.tag, m.comm->id, bytes(count, type), rid, -1, t1);       \
    req_put(*request, rid, m.comm, m.comm->id);                                              \
    return rc;                                                                               \
}
INT_AND_LARGE(MATCHED_RECEIVES)

/* ---- persistent point-to-point (instrument/completion.py, TracedPrequest): nothing at
 *      MPI_Send_init/Ssend_init/Bsend_init/Rsend_init/Recv_init but what each MPI_Start will
 *      record, the non-blocking post it starts (Isend, Issend, Ibsend, Irsend, Irecv) with a
 *      fresh request id, completed by the Wait or Test row of its request as any other ---- */

typedef struct {
    MPI_Request req;
    int64_t op;                          /* 0: a persistent request that is not traced */
    int64_t peer, tag, nbytes;
    comm_t *comm;
    int recv, used;
} preq_t;

/* By handle, one entry each (open addressing); an entry is overwritten by the next persistent
 * request MPI makes with its handle, never removed. */
static preq_t *preqs;
static size_t preqcap, npreqs;

static preq_t *preq_slot(MPI_Request r) {
    size_t i = ((uint64_t)(uintptr_t)r * 0x9E3779B97F4A7C15ull) >> 20 & (preqcap - 1);
    while (preqs[i].used && preqs[i].req != r) i = (i + 1) & (preqcap - 1);
    return &preqs[i];
}

static void preq_set(MPI_Request r, int64_t op, int64_t peer, int64_t tag, int64_t nbytes,
                     comm_t *comm, int recv) {
    if (2 * (npreqs + 1) > preqcap) {
        preq_t *old = preqs;
        size_t oldcap = preqcap;
        preqcap = preqcap ? 2 * preqcap : 64;
        preqs = calloc(preqcap, sizeof *preqs);
        for (size_t i = 0; i < oldcap; i++)
            if (old[i].used) *preq_slot(old[i].req) = old[i];
        free(old);
    }
    preq_t *e = preq_slot(r);
    if (!e->used) npreqs++;
    *e = (preq_t){r, op, peer, tag, nbytes, comm, recv, 1};
}

/* A persistent request MPI made that is not traced (a persistent collective's, a partitioned
 * one's): its handle may have been a traced one's before. */
static void preq_untraced(MPI_Request r) {
    if (!npreqs) return;
    preq_t *e = preq_slot(r);
    if (e->used) e->op = 0;
}

static inline const preq_t *preq_find(MPI_Request r) {
    if (!npreqs || r == MPI_REQUEST_NULL) return NULL;
    const preq_t *e = preq_slot(r);
    return e->used && e->op ? e : NULL;
}

#define PSEND_INIT(NAME, OPC, SFX, CNT)                                                      \
int NAME##SFX(const void *buf, CNT count, MPI_Datatype type, int dest, int tag,              \
              MPI_Comm comm, MPI_Request *request) {                                         \
    OWN(0);                                                                                  \
    int rc = P##NAME##SFX(buf, count, type, dest, tag, comm, request);                       \
    if (own_ && kept(0) && rc == MPI_SUCCESS) {                                              \
        comm_t *c = comm_of(comm);                                                           \
        preq_set(*request, OPC, world_of(c, dest), tag, bytes(count, type), c, 0);           \
    }                                                                                        \
    return rc;                                                                               \
}

#define P2P_INITS(SFX, CNT, DSP)                                                             \
PSEND_INIT(MPI_Send_init, OP_ISEND, SFX, CNT)                                                \
PSEND_INIT(MPI_Ssend_init, OP_ISSEND, SFX, CNT)                                              \
PSEND_INIT(MPI_Bsend_init, OP_IBSEND, SFX, CNT)                                              \
PSEND_INIT(MPI_Rsend_init, OP_IRSEND, SFX, CNT)                                              \
                                                                                             \
int MPI_Recv_init##SFX(void *buf, CNT count, MPI_Datatype type, int source, int tag,         \
                       MPI_Comm comm, MPI_Request *request) {                                \
    OWN(0);                                                                                  \
    int rc = PMPI_Recv_init##SFX(buf, count, type, source, tag, comm, request);              \
    if (own_ && kept(0) && rc == MPI_SUCCESS) {                                              \
        comm_t *c = comm_of(comm);                                                           \
        preq_set(*request, OP_IRECV,                                                         \
                 source == MPI_ANY_SOURCE ? ANY_SOURCE_SENTINEL : world_of(c, source),       \
                 tag == MPI_ANY_TAG ? ANY_TAG_SENTINEL : tag, bytes(count, type), c, 1);     \
    }                                                                                        \
    return rc;                                                                               \
}
INT_AND_LARGE(P2P_INITS)

/* The post row of a started persistent request; its completion is then looked up as any. */
static void preq_started(const preq_t *p, MPI_Request r, int64_t t0, int64_t t1) {
    int64_t rid = next_request++;
    rec(p->op, t0, -1, p->peer, p->tag, p->comm->id, p->nbytes, rid, -1, t1);
    req_put(r, rid, p->recv ? p->comm : NULL, p->comm->id);
}

int MPI_Start(MPI_Request *request) {
    OWN(0);
    const preq_t *p = own_ ? preq_find(*request) : NULL;
    if (!p) return PMPI_Start(request);
    ENTER(p->op);
    int64_t t0 = now_ns();
    int rc = PMPI_Start(request);
    int64_t t1 = now_ns();
    LEAVE();
    preq_started(p, *request, t0, t1);
    return rc;
}

/* One post row per traced request, each with the call's times (as TracedPrequest.Startall). */
int MPI_Startall(int count, MPI_Request reqs_in[]) {
    OWN(0);
    const preq_t *first = NULL;
    for (int i = 0; own_ && i < count && !first; i++) first = preq_find(reqs_in[i]);
    if (!first) return PMPI_Startall(count, reqs_in);
    ENTER(first->op);
    int64_t t0 = now_ns();
    int rc = PMPI_Startall(count, reqs_in);
    int64_t t1 = now_ns();
    LEAVE();
    for (int i = 0; i < count; i++) {
        const preq_t *p = preq_find(reqs_in[i]);
        if (p) preq_started(p, reqs_in[i], t0, t1);
    }
    return rc;
}

/* ---- completions: one row per traced request that completed ----------------------------- */

/* The row of a completed request `e` (status `st` for a receive; NULL for a freed request,
 * whose row has no source, tag or size); removes it from the table. */
static inline void completed(int op, int64_t t0, int64_t cpu, int64_t t1, req_t *e,
                             const MPI_Status *st) {
    int64_t peer = -1, tag = -1, n = -1;
    if (e->recv_comm && st) {
        peer = world_of(e->recv_comm, st->MPI_SOURCE);
        tag = st->MPI_TAG;
        n = status_bytes(st);
    }
    rec(op, t0, cpu, peer, tag, e->cid, n, e->hid, -1, t1);
    req_del(e);
}

int MPI_Wait(MPI_Request *request, MPI_Status *status) {
    OWN(OP_WAIT);
    req_t *e = own_ ? req_find(*request) : NULL;
    if (!e) return PMPI_Wait(request, status);
    MPI_Status mine;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &mine : status;
    CPU0;
    ENTER(OP_WAIT);
    int64_t t0 = now_ns();
    int rc = PMPI_Wait(request, st);
    int64_t t1 = now_ns();
    LEAVE();
    completed(OP_WAIT, t0, CPU1, t1, e, st);
    return rc;
}

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status) {
    OWN(OP_TEST);
    req_t *e = own_ ? req_find(*request) : NULL;
    if (!e) return PMPI_Test(request, flag, status);
    MPI_Status mine;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &mine : status;
    CPU0;
    ENTER(OP_TEST);
    int64_t t0 = now_ns();
    int rc = PMPI_Test(request, flag, st);
    int64_t t1 = now_ns();
    LEAVE();
    if (*flag) completed(OP_TEST, t0, CPU1, t1, e, st);
    else if (rc == MPI_SUCCESS) failed_poll(t0, t1);
    return rc;
}

#define LOCAL 64

/* Scratch for the -all/-any/-some calls: the handles before the call (MPI sets completed ones
 * to MPI_REQUEST_NULL) and statuses when the caller ignores them. */
typedef struct {
    MPI_Request hs[LOCAL];
    MPI_Status ss[LOCAL];
    MPI_Request *h;
    MPI_Status *s;
} scratch_t;

static void scratch_take(scratch_t *x, int n, const MPI_Request *reqs_in, MPI_Status *given) {
    x->h = n <= LOCAL ? x->hs : malloc((size_t)n * sizeof(MPI_Request));
    memcpy(x->h, reqs_in, (size_t)n * sizeof(MPI_Request));
    x->s = given != MPI_STATUSES_IGNORE ? given
         : n <= LOCAL ? x->ss : malloc((size_t)n * sizeof(MPI_Status));
}

static void scratch_drop(scratch_t *x, const MPI_Status *given) {
    if (x->h != x->hs) free(x->h);
    if (x->s != x->ss && x->s != given) free(x->s);
}

static int any_traced(int n, const MPI_Request *r) {
    if (!nreqs) return 0;
    for (int i = 0; i < n; i++) if (req_find(r[i])) return 1;
    return 0;
}

#define ALL_WRAPPER(NAME, OPC, FLAG_DECL, FLAG_ARG, DONE, POLLS)                                  \
int NAME(int count, MPI_Request reqs_in[] FLAG_DECL, MPI_Status statuses[]) {                \
    OWN(OPC);                                                                                \
    if (!own_ || !any_traced(count, reqs_in))                                                \
        return P##NAME(count, reqs_in FLAG_ARG, statuses);                                   \
    scratch_t x;                                                                             \
    scratch_take(&x, count, reqs_in, statuses);                                              \
    CPU0;                                                                                    \
    ENTER(OPC);                                                                              \
    int64_t t0 = now_ns();                                                                   \
    int rc = P##NAME(count, reqs_in FLAG_ARG, x.s);                                          \
    int64_t t1 = now_ns();                                                                   \
    LEAVE_THEN(scratch_drop(&x, statuses));                                                  \
    int wrote = 0;                                                                           \
    if (DONE) {                                                                              \
        int64_t cpu = CPU1;                                                                  \
        for (int i = 0; i < count; i++) {                                                    \
            req_t *e = req_find(x.h[i]);                                                     \
            if (!e) continue;                                                                \
            completed(OPC, t0, cpu, t1, e, &x.s[i]);                                         \
            cpu = -1;                                                                        \
            wrote = 1;                                                                       \
        }                                                                                    \
    }                                                                                        \
    if (POLLS && !wrote && rc == MPI_SUCCESS) failed_poll(t0, t1);  /* no row written */    \
    scratch_drop(&x, statuses);                                                              \
    return rc;                                                                               \
}
#define COMMA ,
ALL_WRAPPER(MPI_Waitall, OP_WAITALL, , , 1, 0)
ALL_WRAPPER(MPI_Testall, OP_TESTALL, COMMA int *flag, COMMA flag, *flag, 1)

#define ANY_WRAPPER(NAME, OPC, FLAG_DECL, FLAG_ARG, DONE, POLLS)                                  \
int NAME(int count, MPI_Request reqs_in[], int *index FLAG_DECL, MPI_Status *status) {       \
    OWN(OPC);                                                                                \
    if (!own_ || !any_traced(count, reqs_in))                                                \
        return P##NAME(count, reqs_in, index FLAG_ARG, status);                              \
    scratch_t x;                                                                             \
    scratch_take(&x, count, reqs_in, MPI_STATUSES_IGNORE);                                   \
    MPI_Status mine;                                                                         \
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &mine : status;                           \
    CPU0;                                                                                    \
    ENTER(OPC);                                                                              \
    int64_t t0 = now_ns();                                                                   \
    int rc = P##NAME(count, reqs_in, index FLAG_ARG, st);                                    \
    int64_t t1 = now_ns();                                                                   \
    LEAVE_THEN(scratch_drop(&x, MPI_STATUSES_IGNORE));                                       \
    req_t *e = NULL;                                                                         \
    if ((DONE) && *index != MPI_UNDEFINED) {                                                 \
        e = req_find(x.h[*index]);                                                           \
        if (e) completed(OPC, t0, CPU1, t1, e, st);                                          \
    }                                                                                        \
    if (POLLS && !e && rc == MPI_SUCCESS) failed_poll(t0, t1);   /* no row written */       \
    scratch_drop(&x, MPI_STATUSES_IGNORE);                                                   \
    return rc;                                                                               \
}
ANY_WRAPPER(MPI_Waitany, OP_WAITANY, , , 1, 0)
ANY_WRAPPER(MPI_Testany, OP_TESTANY, COMMA int *flag, COMMA flag, *flag, 1)

#define SOME_WRAPPER(NAME, OPC, POLLS)                                                            \
int NAME(int incount, MPI_Request reqs_in[], int *outcount, int indices[],                   \
         MPI_Status statuses[]) {                                                            \
    OWN(OPC);                                                                                \
    if (!own_ || !any_traced(incount, reqs_in))                                              \
        return P##NAME(incount, reqs_in, outcount, indices, statuses);                       \
    scratch_t x;                                                                             \
    scratch_take(&x, incount, reqs_in, statuses);                                            \
    CPU0;                                                                                    \
    ENTER(OPC);                                                                              \
    int64_t t0 = now_ns();                                                                   \
    int rc = P##NAME(incount, reqs_in, outcount, indices, x.s);                              \
    int64_t t1 = now_ns();                                                                   \
    LEAVE_THEN(scratch_drop(&x, statuses));                                                  \
    int wrote = 0;                                                                           \
    if (*outcount != MPI_UNDEFINED) {                                                        \
        int64_t cpu = CPU1;                                                                  \
        for (int k = 0; k < *outcount; k++) {                                                \
            req_t *e = req_find(x.h[indices[k]]);                                            \
            if (!e) continue;                                                                \
            completed(OPC, t0, cpu, t1, e, &x.s[k]);                                         \
            cpu = -1;                                                                        \
            wrote = 1;                                                                       \
        }                                                                                    \
    }                                                                                        \
    if (POLLS && !wrote && rc == MPI_SUCCESS) failed_poll(t0, t1);  /* no row written */    \
    scratch_drop(&x, statuses);                                                              \
    return rc;                                                                               \
}
SOME_WRAPPER(MPI_Waitsome, OP_WAITSOME, 0)
SOME_WRAPPER(MPI_Testsome, OP_TESTSOME, 1)

/* The free of a pending traced request (instrument/completion.py, TracedRequest.Free): one
 * Request_free row, peer, tag and size -1 as a send's completion row (a freed receive has no
 * status). Its operation goes on without the program: a freed send completes on its own, a
 * freed receive still takes its message. A request the library does not hold (untraced, an
 * inactive persistent one: MPI_Request_free is how a program releases it) gives no row. */
int MPI_Request_free(MPI_Request *request) {
    OWN(OP_REQUEST_FREE);
    req_t *e = own_ ? req_find(*request) : NULL;
    if (!e) return PMPI_Request_free(request);
    CPU0;
    ENTER(OP_REQUEST_FREE);
    int64_t t0 = now_ns();
    int rc = PMPI_Request_free(request);
    int64_t t1 = now_ns();
    LEAVE();
    if (rc == MPI_SUCCESS) completed(OP_REQUEST_FREE, t0, CPU1, t1, e, NULL);
    return rc;
}

/* ---- collectives: byte counts as instrument/comm.py records them ------------------------- */

#define COLL(OPC, NBYTES, ROOT, CALL)                                                        \
    OWN(OPC);                                                                                \
    if (!own_) return CALL;                                                                  \
    CPU0;                                                                                    \
    ENTER(OPC);                                                                              \
    int64_t t0 = now_ns();                                                                   \
    int rc = CALL;                                                                           \
    int64_t t1 = now_ns();                                                                   \
    LEAVE();                                                                                 \
    comm_t *c = comm_of(comm);                                                               \
    rec(OPC, t0, CPU1, -1, -1, c->id, NBYTES, -1, ROOT, t1);                                 \
    return rc;

/* the bytes of the first n of `counts` elements of type t (sum_n, sum_n_c) */
#define SUM_N(SFX, CNT, DSP)                                                                 \
static int64_t sum_n##SFX(const CNT *counts, int n, MPI_Datatype t) {                        \
    int64_t s = 0;                                                                           \
    for (int i = 0; i < n; i++) s += counts[i];                                              \
    return s * bytes(1, t);                                                                  \
}
INT_AND_LARGE(SUM_N)

static int size_of(MPI_Comm comm) {
    int n;
    PMPI_Comm_size(comm, &n);
    return n;
}

static int is_root(MPI_Comm comm, int root) {
    int r;
    PMPI_Comm_rank(comm, &r);
    return r == root;
}

int MPI_Barrier(MPI_Comm comm) { COLL(OP_BARRIER, 0, -1, PMPI_Barrier(comm)) }

#define COLLECTIVES(SFX, CNT, DSP)                                                           \
int MPI_Bcast##SFX(void *buf, CNT count, MPI_Datatype t, int root, MPI_Comm comm) {          \
    COLL(OP_BCAST, bytes(count, t), world_of(c, root),                                       \
         PMPI_Bcast##SFX(buf, count, t, root, comm))                                         \
}                                                                                            \
                                                                                             \
int MPI_Reduce##SFX(const void *sb, void *rb, CNT count, MPI_Datatype t, MPI_Op op, int root, \
                    MPI_Comm comm) {                                                         \
    COLL(OP_REDUCE, bytes(count, t), world_of(c, root),                                      \
         PMPI_Reduce##SFX(sb, rb, count, t, op, root, comm))                                 \
}                                                                                            \
                                                                                             \
int MPI_Allreduce##SFX(const void *sb, void *rb, CNT count, MPI_Datatype t, MPI_Op op,       \
                       MPI_Comm comm) {                                                      \
    COLL(OP_ALLREDUCE, bytes(count, t), -1, PMPI_Allreduce##SFX(sb, rb, count, t, op, comm)) \
}                                                                                            \
                                                                                             \
int MPI_Scan##SFX(const void *sb, void *rb, CNT count, MPI_Datatype t, MPI_Op op,            \
                  MPI_Comm comm) {                                                           \
    COLL(OP_SCAN, bytes(count, t), -1, PMPI_Scan##SFX(sb, rb, count, t, op, comm))           \
}                                                                                            \
                                                                                             \
int MPI_Exscan##SFX(const void *sb, void *rb, CNT count, MPI_Datatype t, MPI_Op op,          \
                    MPI_Comm comm) {                                                         \
    COLL(OP_EXSCAN, bytes(count, t), -1, PMPI_Exscan##SFX(sb, rb, count, t, op, comm))       \
}                                                                                            \
                                                                                             \
int MPI_Gather##SFX(const void *sb, CNT sc, MPI_Datatype st, void *rb, CNT rc_,              \
                    MPI_Datatype rt, int root, MPI_Comm comm) {                              \
    COLL(OP_GATHER, sb != MPI_IN_PLACE ? bytes(sc, st) : bytes(rc_, rt), world_of(c, root),  \
         PMPI_Gather##SFX(sb, sc, st, rb, rc_, rt, root, comm))                              \
}                                                                                            \
                                                                                             \
int MPI_Gatherv##SFX(const void *sb, CNT sc, MPI_Datatype st, void *rb, const CNT rcs[],     \
                     const DSP displs[], MPI_Datatype rt, int root, MPI_Comm comm) {         \
    COLL(OP_GATHERV, sb != MPI_IN_PLACE ? bytes(sc, st) : -1, world_of(c, root),             \
         PMPI_Gatherv##SFX(sb, sc, st, rb, rcs, displs, rt, root, comm))                     \
}                                                                                            \
                                                                                             \
int MPI_Scatter##SFX(const void *sb, CNT sc, MPI_Datatype st, void *rb, CNT rc_,             \
                     MPI_Datatype rt, int root, MPI_Comm comm) {                             \
    COLL(OP_SCATTER, rb != MPI_IN_PLACE ? bytes(rc_, rt) : bytes(sc, st), world_of(c, root), \
         PMPI_Scatter##SFX(sb, sc, st, rb, rc_, rt, root, comm))                             \
}                                                                                            \
                                                                                             \
int MPI_Scatterv##SFX(const void *sb, const CNT scs[], const DSP displs[], MPI_Datatype st,  \
                      void *rb, CNT rc_, MPI_Datatype rt, int root, MPI_Comm comm) {         \
    COLL(OP_SCATTERV,                                                                        \
         is_root(comm, root) ? sum_n##SFX(scs, size_of(comm), st) : bytes(rc_, rt),          \
         world_of(c, root), PMPI_Scatterv##SFX(sb, scs, displs, st, rb, rc_, rt, root, comm)) \
}                                                                                            \
                                                                                             \
int MPI_Allgather##SFX(const void *sb, CNT sc, MPI_Datatype st, void *rb, CNT rc_,           \
                       MPI_Datatype rt, MPI_Comm comm) {                                     \
    COLL(OP_ALLGATHER, sb != MPI_IN_PLACE ? bytes(sc, st) : bytes(rc_, rt), -1,              \
         PMPI_Allgather##SFX(sb, sc, st, rb, rc_, rt, comm))                                 \
}                                                                                            \
                                                                                             \
int MPI_Allgatherv##SFX(const void *sb, CNT sc, MPI_Datatype st, void *rb, const CNT rcs[],  \
                        const DSP displs[], MPI_Datatype rt, MPI_Comm comm) {                \
    COLL(OP_ALLGATHERV, sb != MPI_IN_PLACE ? bytes(sc, st) : -1, -1,                         \
         PMPI_Allgatherv##SFX(sb, sc, st, rb, rcs, displs, rt, comm))                        \
}                                                                                            \
                                                                                             \
int MPI_Alltoall##SFX(const void *sb, CNT sc, MPI_Datatype st, void *rb, CNT rc_,            \
                      MPI_Datatype rt, MPI_Comm comm) {                                      \
    COLL(OP_ALLTOALL, sb != MPI_IN_PLACE ? bytes(sc, st) : bytes(rc_, rt), -1,               \
         PMPI_Alltoall##SFX(sb, sc, st, rb, rc_, rt, comm))                                  \
}                                                                                            \
                                                                                             \
int MPI_Alltoallv##SFX(const void *sb, const CNT scs[], const DSP sdispls[], MPI_Datatype st, \
                       void *rb, const CNT rcs[], const DSP rdispls[], MPI_Datatype rt,      \
                       MPI_Comm comm) {                                                      \
    COLL(OP_ALLTOALLV, sb != MPI_IN_PLACE ? sum_n##SFX(scs, size_of(comm), st)               \
                                          : sum_n##SFX(rcs, size_of(comm), rt), -1,          \
         PMPI_Alltoallv##SFX(sb, scs, sdispls, st, rb, rcs, rdispls, rt, comm))              \
}                                                                                            \
                                                                                             \
int MPI_Reduce_scatter##SFX(const void *sb, void *rb, const CNT rcs[], MPI_Datatype t,       \
                            MPI_Op op, MPI_Comm comm) {                                      \
    COLL(OP_REDUCE_SCATTER, sum_n##SFX(rcs, size_of(comm), t), -1,                           \
         PMPI_Reduce_scatter##SFX(sb, rb, rcs, t, op, comm))                                 \
}                                                                                            \
                                                                                             \
int MPI_Reduce_scatter_block##SFX(const void *sb, void *rb, CNT rcount, MPI_Datatype t,      \
                                  MPI_Op op, MPI_Comm comm) {                                \
    COLL(OP_REDUCE_SCATTER_BLOCK, bytes(rcount, t), -1,                                      \
         PMPI_Reduce_scatter_block##SFX(sb, rb, rcount, t, op, comm))                        \
}
INT_AND_LARGE(COLLECTIVES)

/* ---- non-blocking collectives: a post row with a request id, sized as the blocking one;
 *      the Wait/Test that completes the request records its row ---------------------------- */

#define ICOLL(OPC, NBYTES, ROOT, CALL)                                                       \
    OWN(OPC);                                                                                \
    if (!own_) return CALL;                                                                  \
    ENTER(OPC);                                                                              \
    int64_t t0 = now_ns();                                                                   \
    int rc = CALL;                                                                           \
    int64_t t1 = now_ns();                                                                   \
    LEAVE();                                                                                 \
    comm_t *c = comm_of(comm);                                                               \
    int64_t rid = next_request++;                                                            \
    rec(OPC, t0, -1, -1, -1, c->id, NBYTES, rid, ROOT, t1);                                  \
    req_put(*request, rid, NULL, c->id);                                                     \
    return rc;

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request) {
    ICOLL(OP_IBARRIER, 0, -1, PMPI_Ibarrier(comm, request))
}

#define NONBLOCKING_COLLECTIVES(SFX, CNT, DSP)                                               \
int MPI_Ibcast##SFX(void *buf, CNT count, MPI_Datatype t, int root, MPI_Comm comm,           \
                    MPI_Request *request) {                                                  \
    ICOLL(OP_IBCAST, bytes(count, t), world_of(c, root),                                     \
          PMPI_Ibcast##SFX(buf, count, t, root, comm, request))                              \
}                                                                                            \
                                                                                             \
int MPI_Ireduce##SFX(const void *sb, void *rb, CNT count, MPI_Datatype t, MPI_Op op,         \
                     int root, MPI_Comm comm, MPI_Request *request) {                        \
    ICOLL(OP_IREDUCE, bytes(count, t), world_of(c, root),                                    \
          PMPI_Ireduce##SFX(sb, rb, count, t, op, root, comm, request))                      \
}                                                                                            \
                                                                                             \
int MPI_Iallreduce##SFX(const void *sb, void *rb, CNT count, MPI_Datatype t, MPI_Op op,      \
                        MPI_Comm comm, MPI_Request *request) {                               \
    ICOLL(OP_IALLREDUCE, bytes(count, t), -1,                                                \
          PMPI_Iallreduce##SFX(sb, rb, count, t, op, comm, request))                         \
}                                                                                            \
                                                                                             \
int MPI_Iscan##SFX(const void *sb, void *rb, CNT count, MPI_Datatype t, MPI_Op op,           \
                   MPI_Comm comm, MPI_Request *request) {                                    \
    ICOLL(OP_ISCAN, bytes(count, t), -1,                                                     \
          PMPI_Iscan##SFX(sb, rb, count, t, op, comm, request))                              \
}                                                                                            \
                                                                                             \
int MPI_Iexscan##SFX(const void *sb, void *rb, CNT count, MPI_Datatype t, MPI_Op op,         \
                     MPI_Comm comm, MPI_Request *request) {                                  \
    ICOLL(OP_IEXSCAN, bytes(count, t), -1,                                                   \
          PMPI_Iexscan##SFX(sb, rb, count, t, op, comm, request))                            \
}                                                                                            \
                                                                                             \
int MPI_Igather##SFX(const void *sb, CNT sc, MPI_Datatype st, void *rb, CNT rc_,             \
                     MPI_Datatype rt, int root, MPI_Comm comm, MPI_Request *request) {       \
    ICOLL(OP_IGATHER, sb != MPI_IN_PLACE ? bytes(sc, st) : bytes(rc_, rt), world_of(c, root), \
          PMPI_Igather##SFX(sb, sc, st, rb, rc_, rt, root, comm, request))                   \
}                                                                                            \
                                                                                             \
int MPI_Igatherv##SFX(const void *sb, CNT sc, MPI_Datatype st, void *rb, const CNT rcs[],    \
                      const DSP displs[], MPI_Datatype rt, int root, MPI_Comm comm,          \
                      MPI_Request *request) {                                                \
    ICOLL(OP_IGATHERV, sb != MPI_IN_PLACE ? bytes(sc, st) : -1, world_of(c, root),           \
          PMPI_Igatherv##SFX(sb, sc, st, rb, rcs, displs, rt, root, comm, request))          \
}                                                                                            \
                                                                                             \
int MPI_Iscatter##SFX(const void *sb, CNT sc, MPI_Datatype st, void *rb, CNT rc_,            \
                      MPI_Datatype rt, int root, MPI_Comm comm, MPI_Request *request) {      \
    ICOLL(OP_ISCATTER, rb != MPI_IN_PLACE ? bytes(rc_, rt) : bytes(sc, st),                  \
          world_of(c, root), PMPI_Iscatter##SFX(sb, sc, st, rb, rc_, rt, root, comm, request)) \
}                                                                                            \
                                                                                             \
int MPI_Iscatterv##SFX(const void *sb, const CNT scs[], const DSP displs[], MPI_Datatype st, \
                       void *rb, CNT rc_, MPI_Datatype rt, int root, MPI_Comm comm,          \
                       MPI_Request *request) {                                               \
    ICOLL(OP_ISCATTERV,                                                                      \
          is_root(comm, root) ? sum_n##SFX(scs, size_of(comm), st) : bytes(rc_, rt),         \
          world_of(c, root),                                                                 \
          PMPI_Iscatterv##SFX(sb, scs, displs, st, rb, rc_, rt, root, comm, request))        \
}                                                                                            \
                                                                                             \
int MPI_Iallgather##SFX(const void *sb, CNT sc, MPI_Datatype st, void *rb, CNT rc_,          \
                        MPI_Datatype rt, MPI_Comm comm, MPI_Request *request) {              \
    ICOLL(OP_IALLGATHER, sb != MPI_IN_PLACE ? bytes(sc, st) : bytes(rc_, rt), -1,            \
          PMPI_Iallgather##SFX(sb, sc, st, rb, rc_, rt, comm, request))                      \
}                                                                                            \
                                                                                             \
int MPI_Iallgatherv##SFX(const void *sb, CNT sc, MPI_Datatype st, void *rb, const CNT rcs[], \
                         const DSP displs[], MPI_Datatype rt, MPI_Comm comm,                 \
                         MPI_Request *request) {                                             \
    ICOLL(OP_IALLGATHERV, sb != MPI_IN_PLACE ? bytes(sc, st) : -1, -1,                       \
          PMPI_Iallgatherv##SFX(sb, sc, st, rb, rcs, displs, rt, comm, request))             \
}                                                                                            \
                                                                                             \
int MPI_Ialltoall##SFX(const void *sb, CNT sc, MPI_Datatype st, void *rb, CNT rc_,           \
                       MPI_Datatype rt, MPI_Comm comm, MPI_Request *request) {               \
    ICOLL(OP_IALLTOALL, sb != MPI_IN_PLACE ? bytes(sc, st) : bytes(rc_, rt), -1,             \
          PMPI_Ialltoall##SFX(sb, sc, st, rb, rc_, rt, comm, request))                       \
}                                                                                            \
                                                                                             \
int MPI_Ialltoallv##SFX(const void *sb, const CNT scs[], const DSP sdispls[],                \
                        MPI_Datatype st, void *rb, const CNT rcs[], const DSP rdispls[],     \
                        MPI_Datatype rt, MPI_Comm comm, MPI_Request *request) {              \
    ICOLL(OP_IALLTOALLV, sb != MPI_IN_PLACE ? sum_n##SFX(scs, size_of(comm), st)             \
                                            : sum_n##SFX(rcs, size_of(comm), rt), -1,        \
          PMPI_Ialltoallv##SFX(sb, scs, sdispls, st, rb, rcs, rdispls, rt, comm, request))   \
}                                                                                            \
                                                                                             \
int MPI_Ireduce_scatter##SFX(const void *sb, void *rb, const CNT rcs[], MPI_Datatype t,      \
                             MPI_Op op, MPI_Comm comm, MPI_Request *request) {               \
    ICOLL(OP_IREDUCE_SCATTER, sum_n##SFX(rcs, size_of(comm), t), -1,                         \
          PMPI_Ireduce_scatter##SFX(sb, rb, rcs, t, op, comm, request))                      \
}                                                                                            \
                                                                                             \
int MPI_Ireduce_scatter_block##SFX(const void *sb, void *rb, CNT rcount, MPI_Datatype t,     \
                                   MPI_Op op, MPI_Comm comm, MPI_Request *request) {         \
    ICOLL(OP_IREDUCE_SCATTER_BLOCK, bytes(rcount, t), -1,                                    \
          PMPI_Ireduce_scatter_block##SFX(sb, rb, rcount, t, op, comm, request))             \
}
INT_AND_LARGE(NONBLOCKING_COLLECTIVES)

/* ---- neighbourhood collectives of a topology communicator (instrument/topology.py): one row
 *      (a post row with a request id for the non-blocking forms) whose nbytes is what this rank
 *      sends each out-neighbour: the send block (allgather(v), alltoall), for alltoallv the sum
 *      of the send counts; the out-neighbours are on the communicator's "nbrs" line --------- */

#define NEIGHBOURHOOD_COLLECTIVES(SFX, CNT, DSP)                                             \
int MPI_Neighbor_allgather##SFX(const void *sb, CNT sc, MPI_Datatype st, void *rb, CNT rc_,  \
                                MPI_Datatype rt, MPI_Comm comm) {                            \
    COLL(OP_NEIGHBOR_ALLGATHER, bytes(sc, st), -1,                                           \
         PMPI_Neighbor_allgather##SFX(sb, sc, st, rb, rc_, rt, comm))                        \
}                                                                                            \
                                                                                             \
int MPI_Neighbor_allgatherv##SFX(const void *sb, CNT sc, MPI_Datatype st, void *rb,          \
                                 const CNT rcs[], const DSP displs[], MPI_Datatype rt,       \
                                 MPI_Comm comm) {                                            \
    COLL(OP_NEIGHBOR_ALLGATHERV, bytes(sc, st), -1,                                          \
         PMPI_Neighbor_allgatherv##SFX(sb, sc, st, rb, rcs, displs, rt, comm))               \
}                                                                                            \
                                                                                             \
int MPI_Neighbor_alltoall##SFX(const void *sb, CNT sc, MPI_Datatype st, void *rb, CNT rc_,   \
                               MPI_Datatype rt, MPI_Comm comm) {                             \
    COLL(OP_NEIGHBOR_ALLTOALL, bytes(sc, st), -1,                                            \
         PMPI_Neighbor_alltoall##SFX(sb, sc, st, rb, rc_, rt, comm))                         \
}                                                                                            \
                                                                                             \
int MPI_Neighbor_alltoallv##SFX(const void *sb, const CNT scs[], const DSP sdispls[],        \
                                MPI_Datatype st, void *rb, const CNT rcs[],                  \
                                const DSP rdispls[], MPI_Datatype rt, MPI_Comm comm) {       \
    COLL(OP_NEIGHBOR_ALLTOALLV, sum_n##SFX(scs, c->outdeg, st), -1,                          \
         PMPI_Neighbor_alltoallv##SFX(sb, scs, sdispls, st, rb, rcs, rdispls, rt, comm))     \
}                                                                                            \
                                                                                             \
int MPI_Ineighbor_allgather##SFX(const void *sb, CNT sc, MPI_Datatype st, void *rb, CNT rc_, \
                                 MPI_Datatype rt, MPI_Comm comm, MPI_Request *request) {     \
    ICOLL(OP_INEIGHBOR_ALLGATHER, bytes(sc, st), -1,                                         \
          PMPI_Ineighbor_allgather##SFX(sb, sc, st, rb, rc_, rt, comm, request))             \
}                                                                                            \
                                                                                             \
int MPI_Ineighbor_allgatherv##SFX(const void *sb, CNT sc, MPI_Datatype st, void *rb,         \
                                  const CNT rcs[], const DSP displs[], MPI_Datatype rt,      \
                                  MPI_Comm comm, MPI_Request *request) {                     \
    ICOLL(OP_INEIGHBOR_ALLGATHERV, bytes(sc, st), -1,                                        \
          PMPI_Ineighbor_allgatherv##SFX(sb, sc, st, rb, rcs, displs, rt, comm, request))    \
}                                                                                            \
                                                                                             \
int MPI_Ineighbor_alltoall##SFX(const void *sb, CNT sc, MPI_Datatype st, void *rb, CNT rc_,  \
                                MPI_Datatype rt, MPI_Comm comm, MPI_Request *request) {      \
    ICOLL(OP_INEIGHBOR_ALLTOALL, bytes(sc, st), -1,                                          \
          PMPI_Ineighbor_alltoall##SFX(sb, sc, st, rb, rc_, rt, comm, request))              \
}                                                                                            \
                                                                                             \
int MPI_Ineighbor_alltoallv##SFX(const void *sb, const CNT scs[], const DSP sdispls[],       \
                                 MPI_Datatype st, void *rb, const CNT rcs[],                 \
                                 const DSP rdispls[], MPI_Datatype rt, MPI_Comm comm,        \
                                 MPI_Request *request) {                                     \
    ICOLL(OP_INEIGHBOR_ALLTOALLV, sum_n##SFX(scs, c->outdeg, st), -1,                        \
          PMPI_Ineighbor_alltoallv##SFX(sb, scs, sdispls, st, rb, rcs, rdispls, rt, comm,    \
                                        request))                                            \
}
INT_AND_LARGE(NEIGHBOURHOOD_COLLECTIVES)

/* ---- communicator creation: the row's peer holds the new communicator's id --------------- */

static void derived(int op, int64_t t0, int64_t t1, MPI_Comm parent, MPI_Comm made) {
    comm_t *p = comm_of(parent);
    int64_t pid = p->id, index = p->created++;
    if (made == MPI_COMM_NULL) {
        rec(op, t0, -1, -1, -1, pid, -1, -1, -1, t1);
        return;
    }
    int size;
    int *world = members_of(made, &size);
    comm_t *c = add_comm(made, derived_id(pid, index, lowest(world, size)), world, size);
    rec(op, t0, -1, c->id, -1, pid, -1, -1, -1, t1);
}

/* A communicator made from `comm` into `*newcomm`: its row, its id and members (derived). */
#define DERIVED(OPC, CALL)                                                                   \
    OWN(OPC);                                                                                \
    if (!own_) return CALL;                                                                  \
    ENTER(OPC);                                                                              \
    int64_t t0 = now_ns();                                                                   \
    int rc = CALL;                                                                           \
    LEAVE();                                                                                 \
    derived(OPC, t0, now_ns(), comm, *newcomm);                                              \
    return rc;

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm) {
    DERIVED(OP_COMM_SPLIT, PMPI_Comm_split(comm, color, key, newcomm))
}

int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm *newcomm) {
    DERIVED(OP_COMM_SPLIT, PMPI_Comm_split_type(comm, type, key, info, newcomm))
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm) {
    DERIVED(OP_COMM_DUP, PMPI_Comm_dup(comm, newcomm))
}

int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm) {
    DERIVED(OP_COMM_DUP, PMPI_Comm_dup_with_info(comm, info, newcomm))
}

int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm *newcomm) {
    DERIVED(OP_COMM_SPLIT, PMPI_Cart_sub(comm, remain_dims, newcomm))
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm) {
    DERIVED(OP_COMM_CREATE, PMPI_Comm_create(comm, group, newcomm))
}

int MPI_Cart_create(MPI_Comm comm, int ndims, const int dims[], const int periods[],
                    int reorder, MPI_Comm *newcomm) {
    DERIVED(OP_COMM_CREATE, PMPI_Cart_create(comm, ndims, dims, periods, reorder, newcomm))
}

int MPI_Graph_create(MPI_Comm comm, int nnodes, const int index[], const int edges[],
                     int reorder, MPI_Comm *newcomm) {
    DERIVED(OP_COMM_CREATE, PMPI_Graph_create(comm, nnodes, index, edges, reorder, newcomm))
}

int MPI_Dist_graph_create(MPI_Comm comm, int n, const int sources[], const int degrees[],
                          const int destinations[], const int weights[], MPI_Info info,
                          int reorder, MPI_Comm *newcomm) {
    OWN(OP_COMM_CREATE);
    if (!own_)
        return PMPI_Dist_graph_create(comm, n, sources, degrees, destinations, weights, info,
                                      reorder, newcomm);
    ENTER(OP_COMM_CREATE);
    int64_t t0 = now_ns();
    int rc = PMPI_Dist_graph_create(comm, n, sources, degrees, destinations, weights, info,
                                    reorder, newcomm);
    LEAVE();
    derived(OP_COMM_CREATE, t0, now_ns(), comm, *newcomm);
    return rc;
}

int MPI_Dist_graph_create_adjacent(MPI_Comm comm, int indegree, const int sources[],
                                   const int sourceweights[], int outdegree,
                                   const int destinations[], const int destweights[],
                                   MPI_Info info, int reorder, MPI_Comm *newcomm) {
    OWN(OP_COMM_CREATE);
    if (!own_)
        return PMPI_Dist_graph_create_adjacent(comm, indegree, sources, sourceweights, outdegree,
                                               destinations, destweights, info, reorder,
                                               newcomm);
    ENTER(OP_COMM_CREATE);
    int64_t t0 = now_ns();
    int rc = PMPI_Dist_graph_create_adjacent(comm, indegree, sources, sourceweights, outdegree,
                                             destinations, destweights, info, reorder, newcomm);
    LEAVE();
    derived(OP_COMM_CREATE, t0, now_ns(), comm, *newcomm);
    return rc;
}

int MPI_Comm_free(MPI_Comm *comm) {
    OWN(0);
    if (own_) forget_comm(*comm);
    return PMPI_Comm_free(comm);
}

/* ---- one-sided communication (instrument/rma.py): a window is a communicator of its own --- *
 * Its creation is a Win_create row on the parent (peer = the window's id, derived as a
 * communicator's from the parent's creation count), its members are the parent's; every other
 * row carries the window's id in `comm` and the target as a world rank in `peer`. */

typedef struct {
    MPI_Win win;
    int64_t id;
    const comm_t *group;                 /* the parent's entry (never freed): its world ranks */
} win_t;

static win_t *wins;
static int nwins, capwins;

/* NULL: a window the library did not see made; its calls run untraced */
static inline const win_t *win_of(MPI_Win win) {
    for (int i = 0; i < nwins; i++)
        if (wins[i].win == win) return &wins[i];
    return NULL;
}

static void forget_win(MPI_Win win) {
    for (int i = 0; i < nwins; i++)
        if (wins[i].win == win) {
            wins[i] = wins[--nwins];
            return;
        }
}

static void made_window(int64_t t0, int64_t t1, MPI_Comm parent, MPI_Win win) {
    comm_t *p = comm_of(parent);
    int64_t index = p->created++;        /* shared with the parent's communicator creations */
    int64_t id = derived_id(p->id, index, p->world ? lowest(p->world, p->size) : 0);
    comm_line(id, p->world, p->size);
    forget_win(win);                     /* a handle reused after an untraced free */
    if (nwins == capwins) {
        capwins = capwins ? 2 * capwins : 8;
        wins = realloc(wins, (size_t)capwins * sizeof *wins);
    }
    wins[nwins++] = (win_t){win, id, p};
    rec(OP_WIN_CREATE, t0, -1, id, -1, p->id, -1, -1, -1, t1);
}

#define WIN_CREATE(CALL)                                                                     \
    OWN(OP_WIN_CREATE);                                                                      \
    if (!own_) return CALL;                                                                  \
    ENTER(OP_WIN_CREATE);                                                                    \
    int64_t t0 = now_ns();                                                                   \
    int rc = CALL;                                                                           \
    LEAVE();                                                                                 \
    if (rc == MPI_SUCCESS) made_window(t0, now_ns(), comm, *win);                            \
    return rc;

/* disp_unit is DSP: an int, a MPI_Aint in the large-count variants */
#define WIN_CREATES(SFX, CNT, DSP)                                                           \
int MPI_Win_create##SFX(void *base, MPI_Aint size, DSP disp_unit, MPI_Info info,             \
                        MPI_Comm comm, MPI_Win *win) {                                       \
    WIN_CREATE(PMPI_Win_create##SFX(base, size, disp_unit, info, comm, win))                 \
}                                                                                            \
                                                                                             \
int MPI_Win_allocate##SFX(MPI_Aint size, DSP disp_unit, MPI_Info info, MPI_Comm comm,        \
                          void *baseptr, MPI_Win *win) {                                     \
    WIN_CREATE(PMPI_Win_allocate##SFX(size, disp_unit, info, comm, baseptr, win))            \
}                                                                                            \
                                                                                             \
int MPI_Win_allocate_shared##SFX(MPI_Aint size, DSP disp_unit, MPI_Info info, MPI_Comm comm, \
                                 void *baseptr, MPI_Win *win) {                              \
    WIN_CREATE(PMPI_Win_allocate_shared##SFX(size, disp_unit, info, comm, baseptr, win))     \
}
INT_AND_LARGE(WIN_CREATES)

int MPI_Win_create_dynamic(MPI_Info info, MPI_Comm comm, MPI_Win *win) {
    WIN_CREATE(PMPI_Win_create_dynamic(info, comm, win))
}

/* The timed part of a call on window `win`: w (NULL: a window the library does not know, or not
 * this thread's to record: the call passes straight to MPI), t0, t1 and rc; what it records
 * follows. */
#define WIN_TIMED(OPC, CALL)                                                                 \
    OWN(OPC);                                                                                \
    const win_t *w = own_ ? win_of(win) : NULL;                                              \
    if (!w) return CALL;                                                                     \
    ENTER(OPC);                                                                              \
    int64_t t0 = now_ns();                                                                   \
    int rc = CALL;                                                                           \
    int64_t t1 = now_ns();                                                                   \
    LEAVE();

/* A call on window `win`: target TARGET (a window rank; -1: none), NBYTES as the Python tracer
 * records them (the origin buffer's bytes; the result buffer's where there is one). */
#define WIN_CALL(OPC, TARGET, NBYTES, CALL)                                                  \
    WIN_TIMED(OPC, CALL)                                                                     \
    rec(OPC, t0, -1, world_of(w->group, TARGET), -1, w->id, NBYTES, -1, -1, t1);              \
    return rc;

#define RMA_CALLS(SFX, CNT, DSP)                                                             \
int MPI_Put##SFX(const void *oa, CNT oc, MPI_Datatype ot, int target, MPI_Aint disp, CNT tc, \
                 MPI_Datatype tt, MPI_Win win) {                                             \
    WIN_CALL(OP_PUT, target, bytes(oc, ot),                                                  \
             PMPI_Put##SFX(oa, oc, ot, target, disp, tc, tt, win))                           \
}                                                                                            \
                                                                                             \
int MPI_Get##SFX(void *oa, CNT oc, MPI_Datatype ot, int target, MPI_Aint disp, CNT tc,       \
                 MPI_Datatype tt, MPI_Win win) {                                             \
    WIN_CALL(OP_GET, target, bytes(oc, ot),                                                  \
             PMPI_Get##SFX(oa, oc, ot, target, disp, tc, tt, win))                           \
}                                                                                            \
                                                                                             \
int MPI_Accumulate##SFX(const void *oa, CNT oc, MPI_Datatype ot, int target, MPI_Aint disp,  \
                        CNT tc, MPI_Datatype tt, MPI_Op op, MPI_Win win) {                   \
    WIN_CALL(OP_ACCUMULATE, target, bytes(oc, ot),                                           \
             PMPI_Accumulate##SFX(oa, oc, ot, target, disp, tc, tt, op, win))                \
}                                                                                            \
                                                                                             \
int MPI_Get_accumulate##SFX(const void *oa, CNT oc, MPI_Datatype ot, void *ra, CNT rc_,      \
                            MPI_Datatype rt, int target, MPI_Aint disp, CNT tc,              \
                            MPI_Datatype tt, MPI_Op op, MPI_Win win) {                       \
    WIN_CALL(OP_GET_ACCUMULATE, target, bytes(rc_, rt),                                      \
             PMPI_Get_accumulate##SFX(oa, oc, ot, ra, rc_, rt, target, disp, tc, tt, op, win)) \
}
INT_AND_LARGE(RMA_CALLS)

int MPI_Fetch_and_op(const void *oa, void *ra, MPI_Datatype t, int target, MPI_Aint disp,
                     MPI_Op op, MPI_Win win) {
    WIN_CALL(OP_FETCH_AND_OP, target, bytes(1, t),
             PMPI_Fetch_and_op(oa, ra, t, target, disp, op, win))
}

int MPI_Compare_and_swap(const void *oa, const void *ca, void *ra, MPI_Datatype t, int target,
                         MPI_Aint disp, MPI_Win win) {
    WIN_CALL(OP_COMPARE_AND_SWAP, target, bytes(1, t),
             PMPI_Compare_and_swap(oa, ca, ra, t, target, disp, win))
}

int MPI_Win_fence(int assert_, MPI_Win win) {
    WIN_CALL(OP_WIN_FENCE, -1, -1, PMPI_Win_fence(assert_, win))
}

int MPI_Win_lock(int lock_type, int rank, int assert_, MPI_Win win) {
    WIN_CALL(OP_WIN_LOCK, rank, -1, PMPI_Win_lock(lock_type, rank, assert_, win))
}

int MPI_Win_unlock(int rank, MPI_Win win) {
    WIN_CALL(OP_WIN_UNLOCK, rank, -1, PMPI_Win_unlock(rank, win))
}

int MPI_Win_lock_all(int assert_, MPI_Win win) {
    WIN_CALL(OP_WIN_LOCK_ALL, -1, -1, PMPI_Win_lock_all(assert_, win))
}

int MPI_Win_unlock_all(MPI_Win win) {
    WIN_CALL(OP_WIN_UNLOCK_ALL, -1, -1, PMPI_Win_unlock_all(win))
}

int MPI_Win_flush(int rank, MPI_Win win) {
    WIN_CALL(OP_WIN_FLUSH, rank, -1, PMPI_Win_flush(rank, win))
}

int MPI_Win_flush_local(int rank, MPI_Win win) {
    WIN_CALL(OP_WIN_FLUSH, rank, -1, PMPI_Win_flush_local(rank, win))
}

int MPI_Win_flush_all(MPI_Win win) {
    WIN_CALL(OP_WIN_FLUSH, -1, -1, PMPI_Win_flush_all(win))
}

int MPI_Win_flush_local_all(MPI_Win win) {
    WIN_CALL(OP_WIN_FLUSH, -1, -1, PMPI_Win_flush_local_all(win))
}

int MPI_Win_sync(MPI_Win win) {
    WIN_CALL(OP_WIN_SYNC, -1, -1, PMPI_Win_sync(win))
}

/* General active-target synchronisation. Post and Start: one row per member of the group, in
 * group rank order (peer = its world rank, all with the call's times; an empty group: one row
 * with peer -1); Complete, Wait: one row; Test: a row when it returns true only. */
static void group_rows(int64_t opc, int64_t t0, int64_t t1, MPI_Group group, int64_t id) {
    int n = 0;
    PMPI_Group_size(group, &n);
    if (n <= 0) {
        rec(opc, t0, -1, -1, -1, id, -1, -1, -1, t1);
        return;
    }
    int *local = malloc(2 * (size_t)n * sizeof *local), *world = local + n;
    for (int i = 0; i < n; i++) local[i] = i;
    MPI_Group wg;
    PMPI_Comm_group(MPI_COMM_WORLD, &wg);
    PMPI_Group_translate_ranks(group, n, local, wg, world);
    PMPI_Group_free(&wg);
    for (int i = 0; i < n; i++)
        rec(opc, t0, -1, world[i] == MPI_UNDEFINED ? -1 : world[i], -1, id, -1, -1, -1, t1);
    free(local);
}

#define WIN_GROUP_CALL(OPC, CALL)                                                            \
    WIN_TIMED(OPC, CALL)                                                                     \
    group_rows(OPC, t0, t1, group, w->id);                                                   \
    return rc;

int MPI_Win_post(MPI_Group group, int assert_, MPI_Win win) {
    WIN_GROUP_CALL(OP_WIN_POST, PMPI_Win_post(group, assert_, win))
}

int MPI_Win_start(MPI_Group group, int assert_, MPI_Win win) {
    WIN_GROUP_CALL(OP_WIN_START, PMPI_Win_start(group, assert_, win))
}

int MPI_Win_complete(MPI_Win win) {
    WIN_CALL(OP_WIN_COMPLETE, -1, -1, PMPI_Win_complete(win))
}

int MPI_Win_wait(MPI_Win win) {
    WIN_CALL(OP_WIN_WAIT, -1, -1, PMPI_Win_wait(win))
}

int MPI_Win_test(MPI_Win win, int *flag) {
    WIN_TIMED(OP_WIN_TEST, PMPI_Win_test(win, flag))
    if (rc == MPI_SUCCESS && *flag) rec(OP_WIN_TEST, t0, -1, -1, -1, w->id, -1, -1, -1, t1);
    return rc;
}

int MPI_Win_free(MPI_Win *win) {
    OWN(OP_WIN_FREE);
    const win_t *w = own_ ? win_of(*win) : NULL;
    if (!w) return PMPI_Win_free(win);
    win_t was = *w;                      /* MPI sets *win to MPI_WIN_NULL */
    ENTER(OP_WIN_FREE);
    int64_t t0 = now_ns();
    int rc = PMPI_Win_free(win);
    int64_t t1 = now_ns();
    LEAVE();
    forget_win(was.win);
    rec(OP_WIN_FREE, t0, -1, -1, -1, was.id, -1, -1, -1, t1);
    return rc;
}

/* ---- calls without a row: counted (UNTRACED_CALLS above), then MPI's; the stop signal names
 *      the one a rank is inside ------------------------------------------------------------- */

#define COUNTED(ID, NAME, PARAMS, ARGS)                                                      \
    int NAME PARAMS {                                                                        \
        OWN(-2 - U_##ID);                                                                    \
        if (!own_) return P##NAME ARGS;                                                      \
        uncounted[U_##ID]++;                                                                 \
        ENTER(-2 - U_##ID);                                                                  \
        int rc = P##NAME ARGS;                                                               \
        LEAVE();                                                                             \
        return rc;                                                                           \
    }

/* A persistent request MPI makes that is not traced: counted, and its handle forgotten as a
 * traced persistent request's (MPI_Start then passes it through). */
#define COUNTED_INIT(ID, NAME, PARAMS, ARGS)                                                 \
    int NAME PARAMS {                                                                        \
        OWN(-2 - U_##ID);                                                                    \
        if (!own_) return P##NAME ARGS;                                                      \
        uncounted[U_##ID]++;                                                                 \
        ENTER(-2 - U_##ID);                                                                  \
        int rc = P##NAME ARGS;                                                               \
        LEAVE();                                                                             \
        if (rc == MPI_SUCCESS) preq_untraced(*request);                                      \
        return rc;                                                                           \
    }

/* request-based one-sided operations */
#define COUNTED_RMA(SFX, CNT, DSP)                                                           \
COUNTED(RPUT, MPI_Rput##SFX, (const void *oa, CNT oc, MPI_Datatype ot, int target,           \
        MPI_Aint disp, CNT tc, MPI_Datatype tt, MPI_Win win, MPI_Request *request),          \
        (oa, oc, ot, target, disp, tc, tt, win, request))                                    \
COUNTED(RGET, MPI_Rget##SFX, (void *oa, CNT oc, MPI_Datatype ot, int target, MPI_Aint disp,  \
        CNT tc, MPI_Datatype tt, MPI_Win win, MPI_Request *request),                         \
        (oa, oc, ot, target, disp, tc, tt, win, request))                                    \
COUNTED(RACCUMULATE, MPI_Raccumulate##SFX, (const void *oa, CNT oc, MPI_Datatype ot,         \
        int target, MPI_Aint disp, CNT tc, MPI_Datatype tt, MPI_Op op, MPI_Win win,          \
        MPI_Request *request), (oa, oc, ot, target, disp, tc, tt, op, win, request))         \
COUNTED(RGET_ACCUMULATE, MPI_Rget_accumulate##SFX, (const void *oa, CNT oc, MPI_Datatype ot, \
        void *ra, CNT rc_, MPI_Datatype rt, int target, MPI_Aint disp, CNT tc,               \
        MPI_Datatype tt, MPI_Op op, MPI_Win win, MPI_Request *request),                      \
        (oa, oc, ot, ra, rc_, rt, target, disp, tc, tt, op, win, request))
INT_AND_LARGE(COUNTED_RMA)

/* collectives with a datatype per peer (the neighbourhood ones' displacements are MPI_Aint
 * in both variants) */
#define COUNTED_W(SFX, CNT, DSP)                                                             \
COUNTED(ALLTOALLW, MPI_Alltoallw##SFX, (const void *sb, const CNT scs[], const DSP sdispls[], \
        const MPI_Datatype sts[], void *rb, const CNT rcs[], const DSP rdispls[],            \
        const MPI_Datatype rts[], MPI_Comm comm),                                            \
        (sb, scs, sdispls, sts, rb, rcs, rdispls, rts, comm))                                \
COUNTED(IALLTOALLW, MPI_Ialltoallw##SFX, (const void *sb, const CNT scs[],                   \
        const DSP sdispls[], const MPI_Datatype sts[], void *rb, const CNT rcs[],            \
        const DSP rdispls[], const MPI_Datatype rts[], MPI_Comm comm, MPI_Request *request), \
        (sb, scs, sdispls, sts, rb, rcs, rdispls, rts, comm, request))                       \
COUNTED(NEIGHBOR_ALLTOALLW, MPI_Neighbor_alltoallw##SFX, (const void *sb, const CNT scs[],   \
        const MPI_Aint sdispls[], const MPI_Datatype sts[], void *rb, const CNT rcs[],       \
        const MPI_Aint rdispls[], const MPI_Datatype rts[], MPI_Comm comm),                  \
        (sb, scs, sdispls, sts, rb, rcs, rdispls, rts, comm))                                \
COUNTED(INEIGHBOR_ALLTOALLW, MPI_Ineighbor_alltoallw##SFX, (const void *sb,                  \
        const CNT scs[], const MPI_Aint sdispls[], const MPI_Datatype sts[], void *rb,       \
        const CNT rcs[], const MPI_Aint rdispls[], const MPI_Datatype rts[], MPI_Comm comm,  \
        MPI_Request *request), (sb, scs, sdispls, sts, rb, rcs, rdispls, rts, comm, request))
INT_AND_LARGE(COUNTED_W)

/* intercommunicators: their creation (their traffic: adopt_inter) */
COUNTED(INTERCOMM_CREATE, MPI_Intercomm_create, (MPI_Comm local, int local_leader,
        MPI_Comm peer, int remote_leader, int tag, MPI_Comm *newcomm),
        (local, local_leader, peer, remote_leader, tag, newcomm))
COUNTED(INTERCOMM_MERGE, MPI_Intercomm_merge, (MPI_Comm inter, int high, MPI_Comm *newcomm),
        (inter, high, newcomm))
COUNTED(SPAWN, MPI_Comm_spawn, (const char *command, char *argv[], int maxprocs, MPI_Info info,
        int root, MPI_Comm comm, MPI_Comm *inter, int errcodes[]),
        (command, argv, maxprocs, info, root, comm, inter, errcodes))
COUNTED(SPAWN_MULTIPLE, MPI_Comm_spawn_multiple, (int count, char *commands[], char **argvs[],
        const int maxprocs[], const MPI_Info infos[], int root, MPI_Comm comm, MPI_Comm *inter,
        int errcodes[]), (count, commands, argvs, maxprocs, infos, root, comm, inter, errcodes))
COUNTED(ACCEPT, MPI_Comm_accept, (const char *port, MPI_Info info, int root, MPI_Comm comm,
        MPI_Comm *newcomm), (port, info, root, comm, newcomm))
COUNTED(CONNECT, MPI_Comm_connect, (const char *port, MPI_Info info, int root, MPI_Comm comm,
        MPI_Comm *newcomm), (port, info, root, comm, newcomm))
COUNTED(JOIN, MPI_Comm_join, (int fd, MPI_Comm *inter), (fd, inter))
/* a cancelled request's message may never be delivered: its post row stays, its fate unknown.
 * Counted without taking the rank (OWN): another thread cancelling a request a blocked call
 * waits for is correct MPI, not two threads calling MPI at once. */
int MPI_Cancel(MPI_Request *request) {
    if (on && !finished) __atomic_fetch_add(&uncounted[U_CANCEL], 1, __ATOMIC_RELAXED);
    return PMPI_Cancel(request);
}

#if MPI_VERSION >= 4
COUNTED(INTERCOMM_FROM_GROUPS, MPI_Intercomm_create_from_groups, (MPI_Group local,
        int local_leader, MPI_Group remote, int remote_leader, const char *tag, MPI_Info info,
        MPI_Errhandler errhandler, MPI_Comm *newcomm),
        (local, local_leader, remote, remote_leader, tag, info, errhandler, newcomm))
#define COUNTED_MPI4(SFX, CNT, DSP)                                                          \
COUNTED(ISENDRECV, MPI_Isendrecv##SFX, (const void *sb, CNT sc, MPI_Datatype st, int dest,   \
        int sendtag, void *rb, CNT rc_, MPI_Datatype rt, int source, int recvtag,            \
        MPI_Comm comm, MPI_Request *request),                                                \
        (sb, sc, st, dest, sendtag, rb, rc_, rt, source, recvtag, comm, request))            \
COUNTED(ISENDRECV_REPLACE, MPI_Isendrecv_replace##SFX, (void *buf, CNT count,                \
        MPI_Datatype type, int dest, int sendtag, int source, int recvtag, MPI_Comm comm,    \
        MPI_Request *request), (buf, count, type, dest, sendtag, source, recvtag, comm,      \
        request))                                                                            \
                                                                                             \
/* persistent collective requests: counted at their *_init */                                \
COUNTED_INIT(BCAST_INIT, MPI_Bcast_init##SFX, (void *buf, CNT count, MPI_Datatype t,         \
        int root, MPI_Comm comm, MPI_Info info, MPI_Request *request),                       \
        (buf, count, t, root, comm, info, request))                                          \
COUNTED_INIT(GATHER_INIT, MPI_Gather_init##SFX, (const void *sb, CNT sc, MPI_Datatype st,    \
        void *rb, CNT rc_, MPI_Datatype rt, int root, MPI_Comm comm, MPI_Info info,          \
        MPI_Request *request), (sb, sc, st, rb, rc_, rt, root, comm, info, request))         \
COUNTED_INIT(GATHERV_INIT, MPI_Gatherv_init##SFX, (const void *sb, CNT sc, MPI_Datatype st,  \
        void *rb, const CNT rcs[], const DSP displs[], MPI_Datatype rt, int root,            \
        MPI_Comm comm, MPI_Info info, MPI_Request *request),                                 \
        (sb, sc, st, rb, rcs, displs, rt, root, comm, info, request))                        \
COUNTED_INIT(SCATTER_INIT, MPI_Scatter_init##SFX, (const void *sb, CNT sc, MPI_Datatype st,  \
        void *rb, CNT rc_, MPI_Datatype rt, int root, MPI_Comm comm, MPI_Info info,          \
        MPI_Request *request), (sb, sc, st, rb, rc_, rt, root, comm, info, request))         \
COUNTED_INIT(SCATTERV_INIT, MPI_Scatterv_init##SFX, (const void *sb, const CNT scs[],        \
        const DSP displs[], MPI_Datatype st, void *rb, CNT rc_, MPI_Datatype rt, int root,   \
        MPI_Comm comm, MPI_Info info, MPI_Request *request),                                 \
        (sb, scs, displs, st, rb, rc_, rt, root, comm, info, request))                       \
COUNTED_INIT(ALLGATHER_INIT, MPI_Allgather_init##SFX, (const void *sb, CNT sc,               \
        MPI_Datatype st, void *rb, CNT rc_, MPI_Datatype rt, MPI_Comm comm, MPI_Info info,   \
        MPI_Request *request), (sb, sc, st, rb, rc_, rt, comm, info, request))               \
COUNTED_INIT(ALLGATHERV_INIT, MPI_Allgatherv_init##SFX, (const void *sb, CNT sc,             \
        MPI_Datatype st, void *rb, const CNT rcs[], const DSP displs[], MPI_Datatype rt,     \
        MPI_Comm comm, MPI_Info info, MPI_Request *request),                                 \
        (sb, sc, st, rb, rcs, displs, rt, comm, info, request))                              \
COUNTED_INIT(ALLTOALL_INIT, MPI_Alltoall_init##SFX, (const void *sb, CNT sc,                 \
        MPI_Datatype st, void *rb, CNT rc_, MPI_Datatype rt, MPI_Comm comm, MPI_Info info,   \
        MPI_Request *request), (sb, sc, st, rb, rc_, rt, comm, info, request))               \
COUNTED_INIT(ALLTOALLV_INIT, MPI_Alltoallv_init##SFX, (const void *sb, const CNT scs[],      \
        const DSP sdispls[], MPI_Datatype st, void *rb, const CNT rcs[],                     \
        const DSP rdispls[], MPI_Datatype rt, MPI_Comm comm, MPI_Info info,                  \
        MPI_Request *request), (sb, scs, sdispls, st, rb, rcs, rdispls, rt, comm, info,      \
        request))                                                                            \
COUNTED_INIT(ALLTOALLW_INIT, MPI_Alltoallw_init##SFX, (const void *sb, const CNT scs[],      \
        const DSP sdispls[], const MPI_Datatype sts[], void *rb, const CNT rcs[],            \
        const DSP rdispls[], const MPI_Datatype rts[], MPI_Comm comm, MPI_Info info,         \
        MPI_Request *request), (sb, scs, sdispls, sts, rb, rcs, rdispls, rts, comm, info,    \
        request))                                                                            \
COUNTED_INIT(REDUCE_INIT, MPI_Reduce_init##SFX, (const void *sb, void *rb, CNT count,        \
        MPI_Datatype t, MPI_Op op, int root, MPI_Comm comm, MPI_Info info,                   \
        MPI_Request *request), (sb, rb, count, t, op, root, comm, info, request))            \
COUNTED_INIT(ALLREDUCE_INIT, MPI_Allreduce_init##SFX, (const void *sb, void *rb, CNT count,  \
        MPI_Datatype t, MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request),      \
        (sb, rb, count, t, op, comm, info, request))                                         \
COUNTED_INIT(REDUCE_SCATTER_INIT, MPI_Reduce_scatter_init##SFX, (const void *sb, void *rb,   \
        const CNT rcs[], MPI_Datatype t, MPI_Op op, MPI_Comm comm, MPI_Info info,            \
        MPI_Request *request), (sb, rb, rcs, t, op, comm, info, request))                    \
COUNTED_INIT(REDUCE_SCATTER_BLOCK_INIT, MPI_Reduce_scatter_block_init##SFX, (const void *sb, \
        void *rb, CNT rcount, MPI_Datatype t, MPI_Op op, MPI_Comm comm, MPI_Info info,       \
        MPI_Request *request), (sb, rb, rcount, t, op, comm, info, request))                 \
COUNTED_INIT(SCAN_INIT, MPI_Scan_init##SFX, (const void *sb, void *rb, CNT count,            \
        MPI_Datatype t, MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request),      \
        (sb, rb, count, t, op, comm, info, request))                                         \
COUNTED_INIT(EXSCAN_INIT, MPI_Exscan_init##SFX, (const void *sb, void *rb, CNT count,        \
        MPI_Datatype t, MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request),      \
        (sb, rb, count, t, op, comm, info, request))                                         \
COUNTED_INIT(NEIGHBOR_ALLGATHER_INIT, MPI_Neighbor_allgather_init##SFX, (const void *sb,     \
        CNT sc, MPI_Datatype st, void *rb, CNT rc_, MPI_Datatype rt, MPI_Comm comm,          \
        MPI_Info info, MPI_Request *request), (sb, sc, st, rb, rc_, rt, comm, info, request)) \
COUNTED_INIT(NEIGHBOR_ALLGATHERV_INIT, MPI_Neighbor_allgatherv_init##SFX, (const void *sb,   \
        CNT sc, MPI_Datatype st, void *rb, const CNT rcs[], const DSP displs[],              \
        MPI_Datatype rt, MPI_Comm comm, MPI_Info info, MPI_Request *request),                \
        (sb, sc, st, rb, rcs, displs, rt, comm, info, request))                              \
COUNTED_INIT(NEIGHBOR_ALLTOALL_INIT, MPI_Neighbor_alltoall_init##SFX, (const void *sb,       \
        CNT sc, MPI_Datatype st, void *rb, CNT rc_, MPI_Datatype rt, MPI_Comm comm,          \
        MPI_Info info, MPI_Request *request), (sb, sc, st, rb, rc_, rt, comm, info, request)) \
COUNTED_INIT(NEIGHBOR_ALLTOALLV_INIT, MPI_Neighbor_alltoallv_init##SFX, (const void *sb,     \
        const CNT scs[], const DSP sdispls[], MPI_Datatype st, void *rb, const CNT rcs[],    \
        const DSP rdispls[], MPI_Datatype rt, MPI_Comm comm, MPI_Info info,                  \
        MPI_Request *request), (sb, scs, sdispls, st, rb, rcs, rdispls, rt, comm, info,      \
        request))                                                                            \
COUNTED_INIT(NEIGHBOR_ALLTOALLW_INIT, MPI_Neighbor_alltoallw_init##SFX, (const void *sb,     \
        const CNT scs[], const MPI_Aint sdispls[], const MPI_Datatype sts[], void *rb,       \
        const CNT rcs[], const MPI_Aint rdispls[], const MPI_Datatype rts[], MPI_Comm comm,  \
        MPI_Info info, MPI_Request *request),                                                \
        (sb, scs, sdispls, sts, rb, rcs, rdispls, rts, comm, info, request))
INT_AND_LARGE(COUNTED_MPI4)

/* partitioned requests (their counts are MPI_Count already) and the persistent barrier */
COUNTED_INIT(PSEND_INIT, MPI_Psend_init, (const void *buf, int partitions, MPI_Count count,
        MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Info info,
        MPI_Request *request), (buf, partitions, count, type, dest, tag, comm, info, request))
COUNTED_INIT(PRECV_INIT, MPI_Precv_init, (void *buf, int partitions, MPI_Count count,
        MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Info info,
        MPI_Request *request), (buf, partitions, count, type, source, tag, comm, info, request))
COUNTED_INIT(BARRIER_INIT, MPI_Barrier_init, (MPI_Comm comm, MPI_Info info,
        MPI_Request *request), (comm, info, request))
#endif
