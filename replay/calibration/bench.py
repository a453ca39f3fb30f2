"""The calibration micro-benchmark: an mpi4py program run under mpiexec by ``replay.calibration.run``.

Only ranks 0 and 1 communicate; every other rank waits in ``MPI_Barrier`` for the whole run (paper
004 §3.2, Fig. 3: P - 2 processors stay idle while two exchange messages, so the overhead's growth
with P can be measured). Rank 0 writes one JSON document (raw samples in seconds) to ``--out``.

Per message size k (buffer API, numpy buffers, ``time.perf_counter_ns``):

* ping-pong (paper 002 §5.1): rank 0 Send(k), Recv(k); rank 1 Recv(k), Send(k). One sample is one
  round trip; the one-way time is half of it. The time rank 0 spends inside Send is the send
  overhead o_s(k) (the sender is busy in the call; Culler et al. 1996, Kielmann et al. 2000) as long
  as the message is eager (above S the call waits for the receiver and the sample is not an
  overhead).
* receive overhead o_r(k): rank 0 sends k bytes; rank 1 sleeps ``delay`` (3 round trips plus a
  margin), polls Iprobe until MPI reports the message arrived, then times its Recv (the receiver is
  busy in the call: matching and copy-out), then returns a 0-byte ack. Kielmann et al. time the
  receive after the delay alone; the Iprobe makes the result stable on a loaded machine (some
  progress work moves into the probe, so o_r can be slightly low).
* gap g: rank 0 sends bursts of n1 and n2 one-byte messages back to back, rank 1 acks each burst;
  g = (t(n2) - t(n1)) / (n2 - n1) removes the ack's round trip (Kielmann et al. 2000 measure g as the
  steady-state time per message of a burst).
* loopback probe: bytes the kernel counted on the ``lo`` interface while 32 x 1 MiB went 0 -> 1
  (evidence of whether the transport goes through the TCP/IP stack).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import socket
import sys
import time

import numpy as np
from mpi4py import MPI

ENV_PREFIXES = ("MPIR_CVAR_", "MPICH_", "FI_", "UCX_", "HINDSIGHT_TRANSPORT")


def _probe_iface() -> str:
    """The interface the MPI bytes should cross: ``lo`` for TCP on one host, the node's veth
    (HINDSIGHT_PROBE_IFACE, set by ``calibrate --testbed``) inside a testbed node."""
    return os.environ.get("HINDSIGHT_PROBE_IFACE", "lo")


def _lo_bytes() -> int | None:
    """Transmitted bytes of the probed interface (whole network namespace), or None."""
    iface = _probe_iface()
    try:
        with open("/proc/net/dev") as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name.strip() == iface:
                    return int(rest.split()[8])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cvars(names: list[str]) -> dict[str, int | str]:
    """Integer MPICH control variables as MPICH itself parsed them (MPI_T), or why not."""
    out: dict[str, int | str] = {}
    try:
        import mpi4py.MPI as m
        lib = ctypes.CDLL(m.__file__)   # resolves MPI_T_* through the extension's libmpi
        provided = ctypes.c_int()
        if lib.MPI_T_init_thread(0, ctypes.byref(provided)) != 0:
            return {"error": "MPI_T_init_thread failed"}
        for name in names:
            idx, count = ctypes.c_int(), ctypes.c_int()
            if lib.MPI_T_cvar_get_index(name.encode(), ctypes.byref(idx)) != 0:
                out[name] = "unknown to this MPI"
                continue
            handle = ctypes.c_void_p()
            if lib.MPI_T_cvar_handle_alloc(idx, None, ctypes.byref(handle),
                                           ctypes.byref(count)) != 0 or count.value != 1:
                out[name] = "not readable"
                continue
            val = ctypes.c_int()
            lib.MPI_T_cvar_read(handle, ctypes.byref(val))
            lib.MPI_T_cvar_handle_free(ctypes.byref(handle))
            out[name] = int(val.value)
        lib.MPI_T_finalize()
    except (OSError, AttributeError) as exc:
        out["error"] = f"MPI_T unavailable ({exc})"
    return out


def _last_cpu() -> int | None:
    try:
        with open("/proc/self/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[36])
    except (OSError, ValueError, IndexError):
        return None


def _reps(k: int, repeat: int) -> int:
    # Fewer repetitions for big messages keeps the run short: a fixed byte budget per size of
    # repeat x 64 KiB, but never fewer than 10 samples for the median.
    return max(10, min(repeat, (repeat * 65536) // max(k, 1)))


def _wait(ns: int) -> None:
    # Sleep, not busy-wait: when both ranks share one core (a loaded machine), a spinning receiver
    # keeps the sender off the core and the message only leaves when the receiver enters MPI.
    # Measured here: a 100 us spin gave o_r ~110 us in such runs, a sleep gives the copy-out cost.
    # The wake-up jitter of the sleep falls before the timed call.
    time.sleep(ns * 1e-9)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", required=True, help="comma-separated message sizes in bytes")
    ap.add_argument("--repeat", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=5, help="untimed round trips before each batch")
    ap.add_argument("--passes", type=int, default=5, help="interleaved passes over the sizes")
    ap.add_argument("--overhead-only", action="store_true",
                    help="only small-message overheads (the runs at other rank counts)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    sizes = [int(s) for s in a.sizes.split(",")]
    env = {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES)}
    cvars = _cvars(["MPIR_CVAR_NOLOCAL", "MPIR_CVAR_CH4_IPC_CMA_P2P_THRESHOLD",
                    "MPIR_CVAR_CH4_OFI_EAGER_THRESHOLD"])
    me = {"rank": rank, "host": MPI.Get_processor_name(), "hostname": socket.gethostname(),
          "cpus_allowed": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
          else None, "env": env, "cvars": cvars}
    if size < 2:
        if rank == 0:
            with open(a.out, "w") as f:
                json.dump({"error": "the benchmark needs at least 2 ranks"}, f)
        return
    comm.Barrier()
    result: dict = {"ranks": size, "sizes": sizes, "repeat": a.repeat}
    if rank >= 2:
        comm.Barrier()          # idle: paper 004 Fig. 3
    else:
        peer = 1 - rank
        maxk = max(sizes + [1 << 20])
        buf = np.ones(maxk, dtype=np.uint8)
        ack = np.zeros(1, dtype=np.uint8)
        ns = 1e-9

        def pingpong(k: int, reps: int) -> tuple[list[float], list[float]]:
            rtt, osend = [], []
            view = buf[:k]
            for i in range(reps):
                if rank == 0:
                    t0 = time.perf_counter_ns()
                    comm.Send([view, MPI.BYTE], dest=1, tag=1)
                    t1 = time.perf_counter_ns()
                    comm.Recv([view, MPI.BYTE], source=1, tag=1)
                    t2 = time.perf_counter_ns()
                    rtt.append((t2 - t0) * ns)
                    osend.append((t1 - t0) * ns)
                else:
                    comm.Recv([view, MPI.BYTE], source=0, tag=1)
                    comm.Send([view, MPI.BYTE], dest=0, tag=1)
            return rtt, osend

        def recv_overhead(k: int, reps: int, delay_ns: int) -> list[float]:
            orecv = []
            view = buf[:k]
            for i in range(reps):
                if rank == 0:
                    comm.Send([view, MPI.BYTE], dest=1, tag=2)
                    comm.Recv([ack, 0, MPI.BYTE], source=1, tag=3)
                else:
                    _wait(delay_ns)
                    # Make sure the message is here (MPI's word, not an assumption about the
                    # delay), so the timed Recv is matching plus copy-out only.
                    while not comm.Iprobe(source=0, tag=2):
                        pass
                    t0 = time.perf_counter_ns()
                    comm.Recv([view, MPI.BYTE], source=0, tag=2)
                    orecv.append((time.perf_counter_ns() - t0) * ns)
                    comm.Send([ack, 0, MPI.BYTE], dest=0, tag=3)
            return orecv

        def burst(n: int) -> float:
            one = buf[:1]
            t0 = time.perf_counter_ns()
            if rank == 0:
                for _ in range(n):
                    comm.Send([one, MPI.BYTE], dest=1, tag=4)
                comm.Recv([ack, 0, MPI.BYTE], source=1, tag=5)
            else:
                for _ in range(n):
                    comm.Recv([one, MPI.BYTE], source=0, tag=4)
                comm.Send([ack, 0, MPI.BYTE], dest=0, tag=5)
            return (time.perf_counter_ns() - t0) * ns

        # Global warm-up: connection set-up and first-touch of the buffers happen here, not in
        # the first measured size.
        for k in (1, 1024, 65536, maxk):
            pingpong(k, 5)

        # Interleaved passes over all sizes (ascending, then descending, ...): a burst of
        # interference from other work on the machine then hits a few samples of every size
        # instead of all samples of a few neighbouring sizes, and the medians stay clean.
        samples = {k: {"rtt": [], "o_send": [], "o_recv": []} for k in sizes}
        for p in range(a.passes):
            order = sizes if p % 2 == 0 else sizes[::-1]
            for k in order:
                reps = -(-_reps(k, a.repeat) // a.passes)
                pingpong(k, min(a.warmup, reps))
                rtt, osend = pingpong(k, reps)
                # rank 1 chooses its wait from the round trip: rank 0 shares its median.
                med = comm.sendrecv(float(np.median(rtt)) if rank == 0 else None, dest=peer,
                                    source=peer, sendtag=9, recvtag=9)
                rtt_med = float(np.median(rtt)) if rank == 0 else med
                delay = int((3 * rtt_med + 20e-6) * 1e9)
                # o_r needs a wait per sample: half as many samples as round trips.
                orecv = recv_overhead(k, max(2, reps // 2), delay)
                if rank == 1:
                    comm.send(orecv, dest=0, tag=10)
                else:
                    orecv = comm.recv(source=1, tag=10)
                    samples[k]["rtt"] += rtt
                    samples[k]["o_send"] += osend
                    samples[k]["o_recv"] += orecv
        per_size = [{"k": k, **samples[k]} for k in sizes] if rank == 0 else []
        result["per_size"] = per_size

        if not a.overhead_only:
            n1, n2 = 8, 64
            for n in (n1, n2):
                burst(n)            # warm-up
            t1 = [burst(n1) for _ in range(max(10, a.repeat // 4))]
            t2 = [burst(n2) for _ in range(max(10, a.repeat // 4))]
            result["gap"] = {"n1": n1, "n2": n2, "t_n1": t1, "t_n2": t2}

            # Loopback probe: 32 x 1 MiB one way, each acknowledged.
            probe = buf[: 1 << 20]
            before = _lo_bytes() if rank == 0 else None
            for _ in range(32):
                if rank == 0:
                    comm.Send([probe, MPI.BYTE], dest=1, tag=6)
                    comm.Recv([ack, 0, MPI.BYTE], source=1, tag=7)
                else:
                    comm.Recv([probe, MPI.BYTE], source=0, tag=6)
                    comm.Send([ack, 0, MPI.BYTE], dest=0, tag=7)
            after = _lo_bytes() if rank == 0 else None
            result["loopback_probe"] = {
                "payload_bytes": 32 << 20, "iface": _probe_iface(),
                "lo_tx_bytes": None if before is None or after is None else after - before}
        comm.Barrier()          # release the idle ranks
    me["last_cpu"] = _last_cpu()
    ranks = comm.gather(me, root=0)
    if rank == 0:
        result["rank_info"] = ranks
        result["mpi_library"] = MPI.Get_library_version().strip().splitlines()[0]
        result["mpi_version"] = "%d.%d" % MPI.Get_version()
        result["mpi_library_full"] = MPI.Get_library_version().strip()
        import mpi4py
        result["mpi4py_version"] = mpi4py.__version__
        with open(a.out, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1:])
