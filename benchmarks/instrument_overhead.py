"""Tracing overhead: added cost per recorded MPI call, slowdown of a compute-heavy run, bytes/event.

    python benchmarks/instrument_overhead.py            # launches itself with mpiexec -n 2
    python benchmarks/instrument_overhead.py --only bandwidth     # some sections only

Both variants run in one MPI job, interleaved block by block (untraced, traced, untraced, ...),
so machine noise hits them alike; the figures are medians over blocks.

0. The wrapper alone: Send/Recv to MPI_PROC_NULL (MPI returns at once), traced vs untraced, each
   call timed on its own (200,000 calls each, interleaved in blocks): the median added cost per
   call (a typical call, which does not flush) and the mean (which includes the flushes, one per
   65,536 events). The least noisy measure of what tracing adds per call.
1. 1 KiB ping-pong: each round trip is 2 MPI calls per rank. Then the same through the pickle API
   (send/recv of a bytes object), whose traced recv is two rows (matched probe, receive): the
   added cost per message. Added cost per call =
   (traced block time - untraced block time) / calls in the block. On a busy 2-core machine the
   scheduling noise of two spinning ranks can exceed the effect measured; see the load printed.
2. A compute-heavy loop (sort 50,000 doubles, then Sendrecv 4 KiB around the ring and an
   Allreduce): slowdown % of traced vs untraced.
3. On-disk size: bytes per event of the written Parquet files, per workload.
4. Message rate (osu_bw style): rank 0 posts a window of 64 Isends, rank 1 64 Irecvs, both
   Waitall, then a 1-byte acknowledgement from rank 1; bandwidth traced / untraced for every
   power of two from 32 B to 4 KiB (the target: within 20 %, i.e. a ratio of at least 0.8).
   Blocks of 50 windows, untraced and traced alternately (the order swapped every block), 15
   of each per size: the median bandwidth with its min..max, and the median of the blocks'
   traced / untraced ratios with theirs.

5. The tracer's own CPU cost on that path, free of the other rank's pace: rank 0 alone posts a
   window of 64 Irecvs and 64 Isends to itself and completes each half with a Waitall (4 rows
   per message traced), blocks of 100 windows untraced and traced alternately (21 of each);
   the thread CPU time per message, median [min..max], and the median added by tracing.

`--only SECTION[,SECTION]` runs some sections only: wrapper (0), pingpong (1), compute (2),
bandwidth (4), selfwindow (5); the bytes per event (3) are of whatever ran. To compare two versions of the
tracer, run this file from a copy of each version's tree (it uses the tracer of the tree it
lies in), alternately.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMPUTE_BLOCKS = 40
SECTIONS = ("wrapper", "pingpong", "compute", "bandwidth", "selfwindow")
BW_SIZES = tuple(32 << k for k in range(8))            # 32 B .. 4 KiB


def _sections(argv: list[str]) -> list[str]:
    if not argv:
        return list(SECTIONS)
    if len(argv) != 2 or argv[0] != "--only" or not set(argv[1].split(",")) <= set(SECTIONS):
        sys.exit(f"usage: {Path(__file__).name} [--only SECTION[,SECTION...]]; sections: "
                 f"{', '.join(SECTIONS)}")
    return argv[1].split(",")


def _launch() -> None:
    sections = _sections(sys.argv[1:])
    sys.path.insert(0, str(ROOT))
    from hindsight.collect import find_mpiexec, launch_env

    env = launch_env(2)
    env["HINDSIGHT_BENCH_CHILD"] = "1"
    env["HINDSIGHT_BENCH_SECTIONS"] = ",".join(sections)
    sys.exit(subprocess.call([find_mpiexec(), "-n", "2", sys.executable, __file__], env=env))


def main() -> None:
    import numpy as np
    from mpi4py import MPI

    import instrument
    from instrument import session

    world = MPI.COMM_WORLD
    rank = world.Get_rank()
    tmp = Path(tempfile.mkdtemp(prefix="hindsight-bench-"))
    trace_dir = world.bcast(str(tmp) if rank == 0 else None, root=0)
    traced = instrument.start(trace_dir, app="instrument_overhead")
    tracer = session.tracer()
    plain = world
    peer = 1 - rank
    sections = os.environ["HINDSIGHT_BENCH_SECTIONS"].split(",")
    load_before = os.getloadavg()
    wrapper, rate, slow = {}, {}, []

    # 0. wrapper cost against MPI_PROC_NULL ------------------------------------------------------
    msg = np.zeros(1024, np.uint8)
    null = MPI.PROC_NULL
    now = time.perf_counter_ns
    for name in ("Send", "Recv") if "wrapper" in sections else ():
        times = {"plain": [], "traced": []}
        for _ in range(20):
            for label, comm in (("plain", plain), ("traced", traced)):
                call = getattr(comm, name)
                out = times[label]
                for _ in range(10_000):
                    t0 = now()
                    call(msg, null, 1)
                    out.append(now() - t0)
        wrapper[name] = {k: (statistics.median(v), statistics.fmean(v)) for k, v in times.items()}
    world.Barrier()

    # 1. ping-pong ------------------------------------------------------------------------------
    trips, blocks = 2000, 25

    obj = bytes(1024)

    def pingpong(comm, n, pickled=False):
        """n round trips of 1 KiB: buffer API, or the pickle API (send/recv of a bytes object)."""
        if pickled:
            send, recv = (lambda: comm.send(obj, peer, 1)), (lambda: comm.recv(source=peer, tag=1))
        else:
            send, recv = (lambda: comm.Send(msg, peer, 1)), (lambda: comm.Recv(msg, peer, 1))
        comm.Barrier() if comm is plain else MPI.Intracomm.Barrier(comm)
        t0 = time.perf_counter_ns()
        for _ in range(n):
            if rank == 0:
                send()
                recv()
            else:
                recv()
                send()
        return time.perf_counter_ns() - t0

    if "pingpong" in sections:
        pingpong(plain, 500)
        pingpong(traced, 500)             # warm-up, also the first flush path
    events_before = tracer.recorded()
    added = []
    one_way = []
    for _ in range(blocks if "pingpong" in sections else 0):
        u = pingpong(plain, trips)
        t = pingpong(traced, trips)
        added.append((t - u) / (2 * trips))
        one_way.append(u / (2 * trips))
    pp_events = tracer.recorded() - events_before

    # 1b. the same through the pickle API: a traced send pickles outside its row, a traced recv
    # is two rows (matched probe, receive), so the added cost is per message, not per row
    if "pingpong" in sections:
        pingpong(plain, 500, True)
        pingpong(traced, 500, True)
    events_before = tracer.recorded()
    added_obj, one_way_obj = [], []
    for _ in range(blocks if "pingpong" in sections else 0):
        u = pingpong(plain, trips, True)
        t = pingpong(traced, trips, True)
        added_obj.append((t - u) / (2 * trips))
        one_way_obj.append(u / (2 * trips))
    obj_rows = (tracer.recorded() - events_before) / (blocks * trips)
    world.Barrier()

    # 4. windowed nonblocking bandwidth (osu_bw style) -------------------------------------------
    window, bw_blocks, bw_reps = 64, 15, 50
    ack = np.zeros(1, np.uint8)

    def bandwidth(comm, size):
        """Bytes per second of ``bw_reps`` windows of ``window`` messages of ``size`` bytes."""
        bufs = [np.zeros(size, np.uint8) for _ in range(window)]
        comm.Barrier() if comm is plain else MPI.Intracomm.Barrier(comm)
        t0 = time.perf_counter_ns()
        for _ in range(bw_reps):
            if rank == 0:
                reqs = [comm.Isend(b, 1, 7) for b in bufs]
                MPI.Request.Waitall(reqs) if comm is plain else reqs[0].Waitall(reqs)
                comm.Recv(ack, 1, 8)
            else:
                reqs = [comm.Irecv(b, 0, 7) for b in bufs]
                MPI.Request.Waitall(reqs) if comm is plain else reqs[0].Waitall(reqs)
                comm.Send(ack, 0, 8)
        return window * bw_reps * size / ((time.perf_counter_ns() - t0) / 1e9)

    for size in BW_SIZES if "bandwidth" in sections else ():
        bandwidth(plain, size)
        bandwidth(traced, size)
        ratios, untraced_bw, traced_bw = [], [], []
        for k in range(bw_blocks):
            first, second = (plain, traced) if k % 2 == 0 else (traced, plain)
            a, b = bandwidth(first, size), bandwidth(second, size)
            u, t = (a, b) if first is plain else (b, a)
            ratios.append(t / u)
            untraced_bw.append(u)
            traced_bw.append(t)
        rate[size] = (untraced_bw, traced_bw, ratios)

    # 5. the Isend/Irecv/Waitall path's CPU cost, rank 0 alone -----------------------------------
    self_cpu = {"plain": [], "traced": []}

    def self_window(comm, blocks=100):
        """Thread CPU ns per message of ``blocks`` windows of 64 messages rank 0 sends itself."""
        waitall = MPI.Request.Waitall if comm is plain else instrument.TracedRequest.Waitall
        c0 = time.thread_time_ns()
        for _ in range(blocks):
            rr = [comm.Irecv(b, 0, 9) for b in self_in]
            ss = [comm.Isend(b, 0, 9) for b in self_out]
            waitall(rr)
            waitall(ss)
        return (time.thread_time_ns() - c0) / (blocks * len(self_in))

    if "selfwindow" in sections and rank == 0:
        self_in = [np.zeros(32, np.uint8) for _ in range(64)]
        self_out = [np.ones(32, np.uint8) for _ in range(64)]
        self_window(plain, 20)
        self_window(traced, 20)
        for k in range(21):
            for label in (("plain", "traced") if k % 2 == 0 else ("traced", "plain")):
                self_cpu[label].append(self_window(plain if label == "plain" else traced))
    world.Barrier()

    # 2. compute-heavy loop ---------------------------------------------------------------------
    rng = np.random.default_rng(rank)
    data = rng.random(50_000)
    token = np.zeros(4096, np.uint8)
    incoming = np.empty_like(token)
    out = np.zeros(1)

    def app(comm, rounds):
        comm.Barrier() if comm is plain else MPI.Intracomm.Barrier(comm)
        t0 = time.perf_counter_ns()
        for i in range(rounds):
            with instrument.region("task", size=data.size) if comm is traced else _nothing():
                np.sort(data)
            comm.Sendrecv(token, dest=peer, sendtag=i, recvbuf=incoming, source=peer, recvtag=i)
            comm.Allreduce(np.array([float(i)]), out)
        return time.perf_counter_ns() - t0

    if "compute" in sections:
        app(plain, 20)
        app(traced, 20)
    for k in range(COMPUTE_BLOCKS if "compute" in sections else 0):
        # Alternate which variant goes first, so a drift in machine speed cancels out.
        if k % 2:
            t = app(traced, 100)
            u = app(plain, 100)
        else:
            u = app(plain, 100)
            t = app(traced, 100)
        slow.append(100.0 * (t - u) / u)

    instrument.finish()
    if rank == 0:
        files = sorted(Path(trace_dir).glob("rank-*.parquet"))
        size = sum(f.stat().st_size for f in files)
        from hindsight import trace as tf
        events = sum(tf.file_metadata(f)["events"] for f in files)
        print(f"machine: {os.cpu_count()} cores, load average (1/5/15 min) before "
              f"{'/'.join(f'{x:.2f}' for x in load_before)}, after "
              f"{'/'.join(f'{x:.2f}' for x in os.getloadavg())}; "
              f"MPI: {MPI.Get_library_version().splitlines()[0]}; tracer: {instrument.__file__}")
        if wrapper:
            print("wrapper alone, 200,000 calls to MPI_PROC_NULL each, per call:")
        for name, v in wrapper.items():
            (pm, pa), (tm, ta) = v["plain"], v["traced"]
            print(f"  {name}: median untraced {pm:5.0f} ns, traced {tm:5.0f} ns, added "
                  f"{tm - pm:5.0f} ns;  mean added {ta - pa:5.0f} ns (includes flushes)")
        if added:
            print(f"1 KiB ping-pong, {blocks} blocks x {trips} round trips, 2 ranks:")
            print(f"  untraced one-way time (median)        "
                  f"{statistics.median(one_way) / 1e3:8.3f} us")
            print(f"  added cost per recorded call (median) "
                  f"{statistics.median(added) / 1e3:8.3f} us")
            print(f"  added cost per recorded call (mean)   {statistics.mean(added) / 1e3:8.3f} us"
                  "  (includes flushes)")
            print(f"  recorded ping-pong events (rank 0)    {pp_events}")
            print(f"1 KiB pickle-API ping-pong (send/recv of bytes), {blocks} blocks x {trips} "
                  f"round trips, {obj_rows:.0f} rows per round trip and rank:")
            print(f"  untraced one-way time (median)        "
                  f"{statistics.median(one_way_obj) / 1e3:8.3f} us")
            print(f"  added cost per message (median)       "
                  f"{statistics.median(added_obj) / 1e3:8.3f} us")
        if slow:
            print("compute-heavy loop (sort 50k doubles + 4 KiB Sendrecv + Allreduce), "
                  f"{COMPUTE_BLOCKS} blocks of 100 rounds:")
            print(f"  slowdown traced vs untraced (median)  {statistics.median(slow):8.2f} %")
            print(f"  slowdown spread (min..max)            {min(slow):.2f} .. {max(slow):.2f} %")
        if rate:
            print(f"windowed nonblocking bandwidth (osu_bw style), window {window}, {bw_blocks} "
                  f"blocks of {bw_reps} windows each way, alternating; MB/s median [min..max]; "
                  "traced / untraced per block, median [min..max] (target >= 0.80):")
        for nbytes, (u, t, r) in rate.items():
            print(f"  {nbytes:5d} B: untraced {statistics.median(u) / 1e6:7.1f} "
                  f"[{min(u) / 1e6:.1f}..{max(u) / 1e6:.1f}]  traced "
                  f"{statistics.median(t) / 1e6:7.1f} [{min(t) / 1e6:.1f}..{max(t) / 1e6:.1f}]  "
                  f"ratio {statistics.median(r):.2f} [{min(r):.2f}..{max(r):.2f}]")
        if self_cpu["plain"]:
            u, t = self_cpu["plain"], self_cpu["traced"]
            print("one rank's window to itself (64 Irecv + 64 Isend + 2 Waitall, 32 B), 21 blocks "
                  "of 100 windows each way, alternating; thread CPU per message:")
            print(f"  untraced {statistics.median(u):6.0f} ns [{min(u):.0f}..{max(u):.0f}]  traced "
                  f"{statistics.median(t):6.0f} ns [{min(t):.0f}..{max(t):.0f}]  added "
                  f"{statistics.median(t) - statistics.median(u):6.0f} ns (4 rows)")
        if events:
            print(f"on disk: {size} bytes for {events} events = {size / events:.2f} bytes/event")
    import shutil

    world.Barrier()
    if rank == 0:
        shutil.rmtree(trace_dir, ignore_errors=True)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


if __name__ == "__main__":
    if os.environ.get("HINDSIGHT_BENCH_CHILD"):
        main()
    else:
        _launch()
