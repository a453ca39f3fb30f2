"""`hindsight import otf2` of hybrid archives: MPI + OpenMP, MPI + CUDA + pthreads, PAPI metrics.

The archives are written with the `otf2` package the way Score-P lays a hybrid run out
(scorep: tracing/scorep_tracing_definitions.c, thread/fork_join/..._team_unify.c):

* system tree machine -> node -> one PROCESS location group `MPI Rank R` per rank; every thread of
  the process is a CPU_THREAD location of that group, numbered `thread << 32 | rank` (so the
  master threads are 0..P-1); a CUDA stream is an ACCELERATOR_STREAM location of an ACCELERATOR
  location group (a context: its system-tree parent the device, created by the rank's process);
* per paradigm a COMM_LOCATIONS group of that paradigm (MPI: the master threads; OpenMP / pthread:
  all CPU threads of all processes, rank-major; CUDA: the host threads and the streams) and
  COMM_GROUP groups of the same paradigm whose members are positions in it: MPI's world, one
  OpenMP thread team per process (one communicator, unnamed, which every parallel region of the
  process reuses), one pthread contingent and one CUDA context per process;
* PAPI counters: one strictly synchronous metric class of two PAPI members, whose values every
  CPU thread writes right before each Enter and Leave, at the same time;
* OpenMP on the master thread: ThreadFork / ThreadTeamBegin, the `!$omp ...` regions (paradigm
  OPENMP), ThreadTeamEnd / ThreadJoin; an MPI call inside `!$omp master` (MPI_THREAD_FUNNELED).

Timestamps are CPU cycles at 2 GHz with a global offset, as Score-P's TSC timer writes them.
"""

from __future__ import annotations

from pathlib import Path

import otf2
from otf2.definitions import Location

import replay
from hindsight import trace as tf
from hindsight.check import check_trace
from hindsight.interop.otf2_import import import_otf2
from tests.conftest import hindsight

RESOLUTION = 2_000_000_000          # ticks per second
OFFSET = 7_000_000_000_000          # the first tick (the writer makes it the global offset)
RANKS = 2
P = otf2.Paradigm


def _ticks(ns: int) -> int:
    return OFFSET + ns * RESOLUTION // 10**9


def _location(d, ref: int, name: str, group, kind=otf2.LocationType.CPU_THREAD):
    """A location with Score-P's id (the package numbers locations 0, 1, ... otherwise)."""
    reg = d._registry_for_type(Location)
    loc = Location(reg, ref, name, kind, 0, group)
    reg._register(loc)
    return loc


class _Writer:
    """Event writer of one location: times in ns, PAPI values before each Enter/Leave."""

    def __init__(self, archive, loc, papi=None):
        self.w, self.papi, self.cycles = archive.event_writer_from_location(loc), papi, 0

    def _metric(self, t):
        if self.papi is not None:
            self.cycles += 1000
            self.w.metric(_ticks(t), self.papi, [self.cycles, self.cycles // 4])

    def enter(self, t, region):
        self._metric(t)
        self.w.enter(_ticks(t), region)

    def leave(self, t, region):
        self._metric(t)
        self.w.leave(_ticks(t), region)

    def __getattr__(self, record):       # any other record: time in ns first
        return lambda t, *args: getattr(self.w, record)(_ticks(t), *args)


def _definitions(d, threads: int, cuda: bool):
    """Score-P's definitions of a run of RANKS processes with ``threads`` CPU threads each (the
    master thread first): OpenMP threads, or with ``cuda`` pthreads and one CUDA stream per
    process."""
    for par, name, cls in ((P.MPI, "MPI", otf2.ParadigmClass.PROCESS),
                           (P.OPENMP, "OpenMP", otf2.ParadigmClass.THREAD_FORK_JOIN),
                           (P.PTHREAD, "Pthread", otf2.ParadigmClass.THREAD_CREATE_WAIT),
                           (P.CUDA, "CUDA", otf2.ParadigmClass.ACCELERATOR)):
        d.paradigm(par, name, cls)
    machine = d.system_tree_node("Linux", class_name="machine")
    node = d.system_tree_node("n01", class_name="node", parent=machine)
    procs = [d.location_group(f"MPI Rank {r}", system_tree_parent=node) for r in range(RANKS)]
    worker = "Pthread thread" if cuda else "OMP thread"
    cpu = [[_location(d, k << 32 | r, f"{worker} {k}" if k else "Master thread", procs[r])
            for k in range(threads)] for r in range(RANKS)]
    streams = []
    if cuda:
        for r in range(RANKS):
            device = d.system_tree_node(f"CUDA device {r}", class_name="accelerator",
                                        parent=node)
            ctx = d.location_group("CUDA Context 0", system_tree_parent=device,
                                   location_group_type=otf2.LocationGroupType.ACCELERATOR,
                                   creating_location_group=procs[r])
            streams.append(_location(d, (threads + 1) << 32 | r, "CUDA[0:13]", ctx,
                                     otf2.LocationType.ACCELERATOR_STREAM))
    masters = [c[0] for c in cpu]
    d.group("", group_type=otf2.GroupType.COMM_LOCATIONS, paradigm=P.MPI, members=masters)
    world = d.comm("MPI_COMM_WORLD", group=d.group(
        "", group_type=otf2.GroupType.COMM_GROUP, paradigm=P.MPI, members=list(range(RANKS))))
    d.comm("MPI_COMM_SELF", group=d.group("", group_type=otf2.GroupType.COMM_SELF,
                                          paradigm=P.MPI, members=[]))
    threads_of = {}      # per-process communicators of the thread paradigm
    thread_paradigm = P.PTHREAD if cuda else P.OPENMP
    d.group("", group_type=otf2.GroupType.COMM_LOCATIONS, paradigm=thread_paradigm,
            members=[loc for c in cpu for loc in c])
    for r in range(RANKS):
        team = d.group("", group_type=otf2.GroupType.COMM_GROUP, paradigm=thread_paradigm,
                       members=[r * threads + k for k in range(threads)])
        threads_of[r] = d.comm("", group=team)
    cuda_of = {}
    if cuda:
        d.group("", group_type=otf2.GroupType.COMM_LOCATIONS, paradigm=P.CUDA,
                members=[*masters, *streams])
        for r in range(RANKS):
            g = d.group("", group_type=otf2.GroupType.COMM_GROUP, paradigm=P.CUDA,
                        members=[r, RANKS + r])
            cuda_of[r] = d.comm(f"CUDA_CONTEXT {r}", group=g)
    members = [d.metric_member(name, metric_type=otf2.MetricType.PAPI,
                               metric_mode=otf2.MetricMode.ACCUMULATED_START,
                               value_type=otf2.Type.UINT64, unit="#")
               for name in ("PAPI_TOT_CYC", "PAPI_FP_OPS")]
    papi = d.metric_class(members, occurrence=otf2.MetricOccurrence.SYNCHRONOUS_STRICT,
                          recorder_kind=otf2.RecorderKind.CPU)
    return cpu, streams, world, threads_of, cuda_of, papi


def _region(d, name, paradigm, role):
    return d.region(name, paradigm=paradigm, region_role=role)


def openmp_archive(path: Path, threads: int = 2, with_papi: bool = True) -> Path:
    """MPI + OpenMP, ``threads`` threads per process. Per rank, on the master thread: main
    { MPI_Init; parallel { for; implicit barrier }; rank 0 MPI_Send 4096 B to 1, rank 1 MPI_Recv;
    parallel { master { MPI_Allreduce 8 B }; implicit barrier }; MPI_Finalize }. The workers run
    both parallel regions (for and barrier, then barrier)."""
    with otf2.writer.open(str(path), timer_resolution=RESOLUTION) as w:
        d = w.definitions
        cpu, _, world, team, _, papi = _definitions(d, threads, cuda=False)
        papi = papi if with_papi else None
        R = otf2.RegionRole
        main = _region(d, "main", P.COMPILER, R.FUNCTION)
        init, fin = (_region(d, f"MPI_{n}", P.MPI, R.ARTIFICIAL) for n in ("Init", "Finalize"))
        send, recv = (_region(d, f"MPI_{n}", P.MPI, R.POINT2POINT) for n in ("Send", "Recv"))
        allreduce = _region(d, "MPI_Allreduce", P.MPI, R.COLL_ALL2ALL)
        par1 = _region(d, "!$omp parallel @hybrid.c:21", P.OPENMP, R.PARALLEL)
        loop = _region(d, "!$omp for @hybrid.c:23", P.OPENMP, R.LOOP)
        bar1 = _region(d, "!$omp implicit barrier @hybrid.c:27", P.OPENMP, R.IMPLICIT_BARRIER)
        par2 = _region(d, "!$omp parallel @hybrid.c:30", P.OPENMP, R.PARALLEL)
        master = _region(d, "!$omp master @hybrid.c:31", P.OPENMP, R.MASTER)
        bar2 = _region(d, "!$omp implicit barrier @hybrid.c:35", P.OPENMP, R.IMPLICIT_BARRIER)
        for r in range(RANKS):
            m = _Writer(w, cpu[r][0], papi)
            m.enter(1000, main)
            m.enter(1100, init), m.leave(1400, init)
            m.thread_fork(1500, P.OPENMP, threads), m.thread_team_begin(1510, team[r])
            m.enter(1520, par1)
            m.enter(1530, loop), m.leave(2530, loop)
            m.enter(2540, bar1), m.leave(2600, bar1)
            m.leave(2610, par1)
            m.thread_team_end(2620, team[r]), m.thread_join(2630, P.OPENMP)
            if r == 0:
                m.enter(3000, send), m.mpi_send(3000, 1, world, 7, 4096), m.leave(3500, send)
            else:
                m.enter(3000, recv), m.mpi_recv(3800, 0, world, 7, 4096), m.leave(3800, recv)
            m.thread_fork(4000, P.OPENMP, threads), m.thread_team_begin(4010, team[r])
            m.enter(4020, par2)
            m.enter(4030, master)
            m.enter(4040, allreduce), m.mpi_collective_begin(4040)
            # Score-P's sizes of an 8-byte Allreduce: 2 x 8 sent and received on each rank
            m.mpi_collective_end(4500, otf2.CollectiveOp.ALLREDUCE, world, 0xFFFFFFFF, 16, 16)
            m.leave(4500, allreduce)
            m.leave(4510, master)
            m.enter(4520, bar2), m.leave(4600, bar2)
            m.leave(4610, par2)
            m.thread_team_end(4620, team[r]), m.thread_join(4630, P.OPENMP)
            m.enter(5000, fin), m.leave(5200, fin)
            m.leave(5300, main)
            for k in range(1, threads):
                t = _Writer(w, cpu[r][k], papi)
                t.thread_team_begin(1510, team[r])
                t.enter(1520, par1)
                t.enter(1530, loop), t.leave(2500, loop)
                t.enter(2540, bar1), t.leave(2600, bar1)
                t.leave(2610, par1)
                t.thread_team_end(2620, team[r])
                t.thread_team_begin(4010, team[r])
                t.enter(4020, par2)
                t.enter(4040, bar2), t.leave(4600, bar2)
                t.leave(4610, par2)
                t.thread_team_end(4620, team[r])
    return path / "traces.otf2"


def cuda_pthread_archive(path: Path, send_on_pthread: bool = False) -> Path:
    """MPI + pthreads + CUDA, no PAPI. Per rank, master thread: MPI_Isend 64 B and MPI_Irecv to
    and from the other rank, pthread_create, cudaLaunchKernel, MPI_Waitall, MPI_Barrier,
    pthread_join; the pthread: worker { MPI_Comm_rank } (an MPI call off the master thread); the
    CUDA stream: one kernel. With ``send_on_pthread`` rank 0's pthread calls MPI_Send to rank 1
    instead of MPI_Comm_rank, and rank 1's master thread receives it after the barrier."""
    with otf2.writer.open(str(path), timer_resolution=RESOLUTION) as w:
        d = w.definitions
        cpu, streams, world, contingent, _, _ = _definitions(d, threads=2, cuda=True)
        R = otf2.RegionRole
        isend, irecv, waitall, barrier, comm_rank, send, recv = (
            _region(d, f"MPI_{n}", P.MPI, role) for n, role in (
                ("Isend", R.POINT2POINT), ("Irecv", R.POINT2POINT), ("Waitall", R.POINT2POINT),
                ("Barrier", R.BARRIER), ("Comm_rank", R.FUNCTION), ("Send", R.POINT2POINT),
                ("Recv", R.POINT2POINT)))
        create = _region(d, "pthread_create", P.PTHREAD, R.THREAD_CREATE)
        join = _region(d, "pthread_join", P.PTHREAD, R.THREAD_WAIT)
        launch = _region(d, "cudaLaunchKernel", P.CUDA, R.WRAPPER)
        kernel = _region(d, "saxpy", P.CUDA, R.KERNEL)
        worker = _region(d, "worker", P.USER, R.FUNCTION)
        for r in range(RANKS):
            m, peer = _Writer(w, cpu[r][0]), 1 - r
            m.enter(100, isend), m.mpi_isend(100, peer, world, 3, 64, 11), m.leave(150, isend)
            m.enter(200, irecv), m.mpi_irecv_request(200, 12), m.leave(250, irecv)
            m.enter(300, create), m.thread_create(350, contingent[r], 1), m.leave(400, create)
            m.enter(500, launch), m.leave(600, launch)
            m.enter(700, waitall), m.mpi_isend_complete(800, 11)
            m.mpi_irecv(900, peer, world, 3, 64, 12), m.leave(900, waitall)
            m.enter(1000, barrier), m.mpi_collective_begin(1000)
            m.mpi_collective_end(1200, otf2.CollectiveOp.BARRIER, world, 0xFFFFFFFF, 0, 0)
            m.leave(1200, barrier)
            if send_on_pthread and r == 1:
                m.enter(1210, recv), m.mpi_recv(1290, 0, world, 5, 16), m.leave(1290, recv)
            m.enter(1300, join), m.thread_wait(1400, contingent[r], 1), m.leave(1400, join)
            t = _Writer(w, cpu[r][1])
            t.thread_begin(360, contingent[r], 1)
            t.enter(370, worker)
            if send_on_pthread and r == 0:
                t.enter(380, send), t.mpi_send(380, 1, world, 5, 16), t.leave(390, send)
            else:
                t.enter(380, comm_rank), t.leave(390, comm_rank)
            t.leave(1000, worker)
            t.thread_end(1010, contingent[r], 1)
            s = _Writer(w, streams[r])
            s.enter(620, kernel), s.leave(1500, kernel)
    return path / "traces.otf2"


def _rows(trace: Path) -> list[list[tuple]]:
    """Per rank: (op, region, t_start, t_end, peer, tag, comm, nbytes, request) of each row."""
    df = tf.read_trace(trace).table.to_pandas()
    df["region"] = df["region"].astype(object).where(df["region"].notna(), None)
    cols = ["op", "region", "t_start", "t_end", "peer", "tag", "comm", "nbytes", "request"]
    return [[tuple(x) for x in df[df["rank"] == r][cols].itertuples(index=False)]
            for r in range(RANKS)]


PAR1, LOOP = "!$omp parallel @hybrid.c:21", "!$omp for @hybrid.c:23"
BAR1, PAR2 = "!$omp implicit barrier @hybrid.c:27", "!$omp parallel @hybrid.c:30"
MASTER, BAR2 = "!$omp master @hybrid.c:31", "!$omp implicit barrier @hybrid.c:35"


def _span(name: str, t0: int, t1: int) -> tuple:
    """A region row as ``_rows`` gives it."""
    return ("region", name, t0, t1, -1, -1, -1, -1, -1)


def _openmp_rows(rank: int) -> list[tuple]:
    """The rows of ``openmp_archive``'s master thread of ``rank``: the program's times less the
    first event's (1000 ns); regions as they close."""
    p2p = ("Send", "main", 2000, 2500, 1, 7, 0, 4096, -1) if rank == 0 else \
        ("Recv", "main", 2000, 2800, 0, 7, 0, 4096, -1)
    return [_span(LOOP, 530, 1530), _span(BAR1, 1540, 1600), _span(PAR1, 520, 1610), p2p,
            ("Allreduce", MASTER, 3040, 3500, -1, -1, 0, 8, -1), _span(MASTER, 3030, 3510),
            _span(BAR2, 3520, 3600), _span(PAR2, 3020, 3610), _span("main", 0, 4300)]


def _skipped_openmp(threads: int, with_papi: bool = True) -> dict[str, int]:
    """What ``openmp_archive`` holds that a trace cannot, counted from the program: per worker
    thread 14 events in the first parallel region (team begin and end, 3 regions entered and
    left, 6 PAPI records) and 10 in the second (team begin and end, 2 regions, 4 PAPI records);
    per master thread 11 regions entered and left (22 PAPI records of 2 values), 2 forks, joins,
    team begins and ends."""
    workers = RANKS * (threads - 1)
    out = {"event on a non-MPI location (OpenMP)": workers * (24 if with_papi else 14),
           "thread event": RANKS * 8, "MPI call without a trace op": RANKS * 2,
           "non-MPI communicator (OpenMP)": RANKS, "non-MPI location (OpenMP)": workers}
    if with_papi:
        out |= {f"value of metric {name}": RANKS * 22 for name in ("PAPI_TOT_CYC", "PAPI_FP_OPS")}
    return out


def test_openmp_hybrid_archive_imports_checks_and_replays(tmp_path):
    """MPI + OpenMP + PAPI: the master threads' MPI calls are the rows, the OpenMP constructs
    around them region rows; the worker threads, the thread teams and the counters are skipped
    and counted, on the command's second line and in the manifest."""
    anchor = openmp_archive(tmp_path / "scorep-hybrid")
    out = tmp_path / "t"
    p = hindsight("import", "otf2", anchor, "--out", out)
    assert p.returncode == 0, p.stderr
    first, second = p.stdout.splitlines()
    assert first == (f"imported {anchor} -> {out}: 2 ranks, 18 events, makespan (traced run) "
                     "4.3 us; trace check: ok")
    assert second == ("skipped: 48 events on a non-MPI location (OpenMP), 44 values of metric "
                      "PAPI_FP_OPS, 44 values of metric PAPI_TOT_CYC, 16 thread events, 4 MPI "
                      "calls without a trace op, 2 non-MPI communicators (OpenMP), 2 non-MPI "
                      "locations (OpenMP)")
    m = tf.read_manifest(out)
    assert m["import"]["skipped"] == _skipped_openmp(threads=2)
    assert m["app"] == "scorep-hybrid"
    assert m["communicators"] == {"0": [0, 1]} and m["hosts"] == {"n01": [0, 1]}   # no team
    assert _rows(out) == [_openmp_rows(0), _openmp_rows(1)]
    c = hindsight("trace", "check", out)
    assert c.returncode == 0 and c.stdout.strip() == f"{out}: ok", c.stdout + c.stderr
    r = hindsight("replay", out, "--model", "loggps")
    assert r.returncode == 0, r.stderr
    assert "measured   4.3 us" in r.stdout and "predicted" in r.stdout


def test_openmp_threads_and_counters_change_only_the_skipped_counts(tmp_path):
    """Workers and PAPI values are outside the rows: 4 threads instead of 2, or no counters, give
    the same rows; only the counts of what was skipped follow."""
    for threads, with_papi in ((4, True), (2, False)):
        name = f"t{threads}{'p' if with_papi else ''}"
        import_otf2(openmp_archive(tmp_path / f"{name}-run", threads, with_papi), tmp_path / name)
        assert _rows(tmp_path / name) == [_openmp_rows(0), _openmp_rows(1)], name
        assert tf.read_manifest(tmp_path / name)["import"]["skipped"] == \
            _skipped_openmp(threads, with_papi), name
        assert check_trace(tmp_path / name) == [], name


def test_cuda_pthread_hybrid_archive(tmp_path):
    """MPI + pthreads + CUDA: the streams (an accelerator location group of their own) and the
    pthreads are skipped, an MPI call made on a pthread is counted as such; the master thread's
    non-blocking exchange, Waitall and Barrier are the rows and replay."""
    import_otf2(cuda_pthread_archive(tmp_path / "run"), tmp_path / "t")
    for r, rows in enumerate(_rows(tmp_path / "t")):
        peer = 1 - r
        assert rows == [("Isend", None, 0, 50, peer, 3, 0, 64, 0),
                        ("Irecv", None, 100, 150, -2, -2, 0, -1, 1),
                        _span("pthread_create", 200, 300), _span("cudaLaunchKernel", 400, 500),
                        ("Waitall", None, 600, 800, -1, -1, 0, -1, 0),
                        ("Waitall", None, 600, 800, peer, 3, 0, 64, 1),
                        ("Barrier", None, 900, 1100, -1, -1, 0, 0, -1),
                        _span("pthread_join", 1200, 1300)], r
    assert tf.read_manifest(tmp_path / "t")["import"]["skipped"] == {
        "event on a non-MPI location (Pthread)": 8, "MPI event on a non-MPI location (Pthread)": 4,
        "event on a non-MPI location (CUDA)": 4, "thread event": 4,
        "non-MPI communicator (CUDA)": 2, "non-MPI communicator (Pthread)": 2,
        "non-MPI location (CUDA)": 2, "non-MPI location (Pthread)": 2}
    assert check_trace(tmp_path / "t") == []
    res = replay.run(replay.prepare(tmp_path / "t"), "loggps")
    assert res.makespan_ns > 0 and res.measured_makespan_ns == 1300


def test_app_name_is_the_archive_directory(tmp_path):
    """A trace imported from ``X/traces.otf2`` or from ``X`` is app X; an archive of another
    name is that name."""
    anchor = openmp_archive(tmp_path / "scorep-20240501_1200_42", with_papi=False)
    import_otf2(anchor, tmp_path / "a")
    import_otf2(anchor.parent, tmp_path / "b")
    for t in ("a", "b"):
        assert tf.read_manifest(tmp_path / t)["app"] == "scorep-20240501_1200_42", t
    with otf2.writer.open(str(tmp_path / "named"), archive_name="jacobi",
                          timer_resolution=10**9) as w:
        d = w.definitions
        grp = d.location_group("MPI Rank 0", system_tree_parent=d.system_tree_node("n01"))
        loc = d.location("Master thread", group=grp)
        d.group("", group_type=otf2.GroupType.COMM_LOCATIONS, paradigm=P.MPI, members=[loc])
        work = d.region("work")
        ew = w.event_writer_from_location(loc)
        ew.enter(10, work), ew.leave(20, work)
    import_otf2(tmp_path / "named" / "jacobi.otf2", tmp_path / "c")
    assert tf.read_manifest(tmp_path / "c")["app"] == "jacobi"


def test_a_message_sent_off_the_master_thread_is_named_in_the_error(tmp_path):
    """An MPI_Send on a pthread (beyond MPI_THREAD_FUNNELED) is skipped with its location, so
    the receive on rank 1 has no send: the import fails, one line saying why, and writes
    nothing."""
    anchor = cuda_pthread_archive(tmp_path / "run", send_on_pthread=True)
    p = hindsight("import", "otf2", anchor, "--out", tmp_path / "t")
    assert p.returncode == 1 and p.stdout == "", p.stdout + p.stderr
    assert len(p.stderr.splitlines()) == 1, p.stderr
    assert p.stderr.startswith(f"Error: {anchor}: messages do not match: ")
    assert p.stderr.rstrip().endswith("; 5 MPI records on non-MPI locations (threads other than "
                                      "the ranks' master threads) were skipped"), p.stderr
    assert not (tmp_path / "t").exists()
