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
* eager probe: rank 0 times Isend + Wait of k bytes while rank 1 posts its receive only after
  ``EAGER_DELAY``; a send that completes well before then did not need the receiver (eager), one
  that lasts the delay waited for it (rendezvous). The largest eager size is S (the protocol
  switch itself, not a bend of the one-way curve, which shared memory hardly shows).
* progress probe: does a rendezvous transfer advance while the peer computes outside MPI? For
  the first size the eager probe saw wait (above S) and the largest eager one (the control):
  rank 1 posts its Irecv, rank 0 Isends ``PROGRESS_LEAD`` after rank 1 began to compute D (no
  MPI call) and times Isend + Wait (the receiver computes); and rank 0 Isends, computes D, then
  Waits while rank 1 times a Recv posted at once (the sender computes). A wait
  lasting most of D waited for the peer to enter MPI (fit.fit_progress decides).
* call probe (``replay.calibration.calls``): the overheads of posting an Irecv, of a Wait on a
  complete send, of a Probe finding its message, of an Iprobe finding nothing, timed in batches.
* unexpected probe (``replay.calibration.unexpected``): a batch of eager messages received after
  they arrived (unexpected) against the same batch received into receives posted first.
* burst probe (``replay.calibration.bursts``): the CPU time of a fixed compute kernel between
  8-byte exchanges with the peer against the same kernel with no call between: the transport's
  cost in the program's compute bursts.
* collective probe (``replay.calibration.flags``): each rank's time in Bcast, Reduce,
  Allreduce and Barrier on a communicator of ranks 0 and 1, entering last or first.
* binding probe (``replay.calibration.binding``): mpi4py's own time per call, timed on calls
  to ``MPI.PROC_NULL`` and on ``MPI.COMM_SELF``, where MPI does nothing (rank 0 alone).
* loopback probe: bytes the kernel counted on the ``lo`` interface while 32 x 1 MiB went 0 -> 1
  (evidence of whether the transport goes through the TCP/IP stack).

Rank 0 reports its progress on stderr, one line per visit of a size and per probe
(``replay.calibration.progress``; `hindsight calibrate` relays it).

``--api pickle`` times what ``instrument.comm`` records as MPI calls for a pickle-API message: the
object is pickled *before* the send (the tracer pickles outside the call to learn the wire size),
the bytes are sent with ``Send``; the receive is mpi4py's matched probe and the receive of the
bytes (the traced ``recv``'s ``Probe`` and ``Recv`` rows). Allocating the receive buffer and
unpickling are the receiver's work in a trace (bursts between and after the rows), so they are
not timed here: the buffer of each size is allocated once. The payload of size k is a pickled
numpy array whose pickle is k bytes long; sizes below the pickle header (~130 B) are that
header.
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

from hindsight import conditions
from replay.calibration import progress as _progress
from replay.calibration.binding import binding_probe
from replay.calibration.reduction import reduction_probe
from replay.calibration.bursts import burst_probe
from replay.calibration.resume import resume_probe
from replay.calibration.calls import call_probe
from replay.calibration.flags import flag_probe
from replay.calibration.queue import queue_probe
from replay.calibration.unexpected import unexpected_probe

_dumps = MPI.pickle.dumps   # what instrument.comm pickles with
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


#: how long the receiver of the eager probe waits before posting its receive
EAGER_DELAY = 0.002
#: the peer's compute (no MPI call) in the progress probe, at least; longer when a transfer of
#: the probed size takes more than an eighth of it
PROGRESS_D = 0.002
#: the sender of the progress probe sends this long after the receiver began computing, so the
#: request to send arrives while the receiver computes, not while it leaves the synchronisation
PROGRESS_LEAD = 100e-6
#: timed samples per case and size of the progress probe (after one untimed round)
PROGRESS_REPEAT = 7


def _wait(ns: int, spin: bool) -> None:
    """Let ``ns`` pass before the timed receive.

    With a core of its own the receiver spins, as an application computing before its receive
    does; a sleep lets the core idle and the timed call then pays for the wake-up (measured here:
    o_r of a small pickled message 12-18 us after a sleep, 8-10 us after a spin). When both ranks
    share a core (a loaded or oversubscribed machine) it sleeps: a spinning receiver would keep
    the sender off the core, and the message would only leave when the receiver enters MPI
    (a 100 us spin gave o_r ~110 us in such runs). The wake-up jitter falls before the timed call."""
    if spin:
        end = time.perf_counter_ns() + ns
        while time.perf_counter_ns() < end:
            pass
    else:
        time.sleep(ns * 1e-9)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", required=True, help="comma-separated message sizes in bytes")
    ap.add_argument("--repeat", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=5, help="untimed round trips before each batch")
    ap.add_argument("--passes", type=int, default=5, help="interleaved passes over the sizes")
    ap.add_argument("--overhead-only", action="store_true",
                    help="only small-message overheads (the runs at other rank counts)")
    ap.add_argument("--api", choices=("buffer", "pickle"), default="buffer",
                    help="time buffer-API Recv, or pickle-API recv of pre-pickled sends")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    sizes = [int(s) for s in a.sizes.split(",")]
    env = {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES)}
    cvars = _cvars(["MPIR_CVAR_NOLOCAL", "MPIR_CVAR_CH4_IPC_CMA_P2P_THRESHOLD",
                    "MPIR_CVAR_CH4_OFI_EAGER_THRESHOLD", "MPIR_CVAR_ASYNC_PROGRESS"])
    me = {"rank": rank, "host": MPI.Get_processor_name(), "hostname": socket.gethostname(),
          "cpus_allowed": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
          else None, "env": env, "cvars": cvars}
    if size < 2:
        if rank == 0:
            with open(a.out, "w") as f:
                json.dump({"error": "the benchmark needs at least 2 ranks"}, f)
        return
    comm.Barrier()
    # Each rank's context switches over the measurement: an involuntary one means the kernel
    # gave its core to something else mid-measurement (run.py judges the rate).
    switches0, t_start = conditions.ctx_switches(), time.monotonic()
    waited0 = conditions.run_queue_wait_ns()
    result: dict = {"ranks": size, "sizes": sizes, "repeat": a.repeat, "api": a.api}
    if rank >= 2:
        comm.Barrier()          # idle: paper 004 Fig. 3
    else:
        peer = 1 - rank
        maxk = max(sizes + [1 << 20])
        buf = np.ones(maxk, dtype=np.uint8)
        ack = np.zeros(1, dtype=np.uint8)
        ns = 1e-9
        pickled = a.api == "pickle"
        # spin only if ranks 0 and 1 can never share a core
        cpus = comm.sendrecv(me["cpus_allowed"], dest=peer, source=peer, sendtag=8, recvtag=8)
        spin = bool(me["cpus_allowed"] and cpus) and not set(me["cpus_allowed"]) & set(cpus)
        result["receiver_wait"] = "spin" if spin else "sleep"

        payloads: dict[int, bytes] = {}

        def payload(k: int) -> bytes:
            """Pickled numpy array whose pickle is k bytes long (at least the header)."""
            if k not in payloads:
                head = len(_dumps(np.zeros(0, np.uint8)))
                n = max(k - head, 0)
                data = _dumps(np.ones(n, np.uint8))
                n = max(n - (len(data) - k), 0)      # the header grows a little with n
                payloads[k] = _dumps(np.ones(n, np.uint8))
            return payloads[k]

        def message(k: int) -> list:
            """What a send of size k passes to MPI: the pre-pickled bytes, or the buffer."""
            return [payload(k), MPI.BYTE] if pickled else [buf[:k], MPI.BYTE]

        def wire(k: int) -> int:
            """Bytes on the wire for size k: a pickle is never shorter than its header."""
            return len(payload(k)) if pickled else k

        def send(k: int, dest: int, tag: int) -> None:
            comm.Send(message(k), dest=dest, tag=tag)

        st = MPI.Status()
        rbufs: dict[int, bytearray] = {}

        def recv(k: int, source: int, tag: int) -> None:
            if pickled:
                # the traced recv's Probe and Recv rows; the buffer is allocated once per size
                # (the allocation is the receiver's work in a trace, not a row)
                m = comm.Mprobe(source, tag, st)
                n = st.Get_count(MPI.BYTE)
                if n not in rbufs:
                    rbufs[n] = bytearray(n)
                m.Recv([rbufs[n], MPI.BYTE])
            else:
                comm.Recv([buf[:k], MPI.BYTE], source=source, tag=tag)

        def pingpong(k: int, reps: int) -> tuple[list[float], list[float]]:
            rtt, osend = [], []
            for i in range(reps):
                if rank == 0:
                    t0 = time.perf_counter_ns()
                    send(k, 1, 1)
                    t1 = time.perf_counter_ns()
                    recv(k, 1, 1)
                    t2 = time.perf_counter_ns()
                    rtt.append((t2 - t0) * ns)
                    osend.append((t1 - t0) * ns)
                else:
                    recv(k, 0, 1)
                    send(k, 0, 1)
            return rtt, osend

        def recv_overhead(k: int, reps: int, delay_ns: int) -> list[float]:
            orecv = []
            for i in range(reps):
                if rank == 0:
                    send(k, 1, 2)
                    comm.Recv([ack, 0, MPI.BYTE], source=1, tag=3)
                else:
                    _wait(delay_ns, spin)
                    # Make sure the message is here (MPI's word, not an assumption about the
                    # delay), so the timed Recv is matching plus copy-out only.
                    while not comm.Iprobe(source=0, tag=2):
                        pass
                    t0 = time.perf_counter_ns()
                    recv(k, 0, 2)
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

        visits = [k for p in range(a.passes) for k in (sizes if p % 2 == 0 else sizes[::-1])]
        if rank == 0:
            # each visit's weight in round trips of its size: the warm-up and timed ping-pongs,
            # and the receive-overhead samples (a message, a wait of 3 round trips, an ack)
            _progress.report(passes=a.passes, warmup=maxk, plan=[
                [k, min(a.warmup, r) + r + 4 * max(2, r // 2)]
                for k, r in ((k, -(-_reps(k, a.repeat) // a.passes)) for k in visits)])

        # Global warm-up: connection set-up and first-touch of the buffers happen here, not in
        # the first measured size.
        for k in (1, 1024, 65536, maxk):
            pingpong(k, 5)

        # Interleaved passes over all sizes (ascending, then descending, ...): a burst of
        # interference from other work on the machine then hits a few samples of every size
        # instead of all samples of a few neighbouring sizes, and the medians stay clean.
        samples = {k: {"rtt": [], "o_send": [], "o_recv": []} for k in sizes}
        done = 0
        for p in range(a.passes):
            order = sizes if p % 2 == 0 else sizes[::-1]
            for k in order:
                t_visit = time.perf_counter_ns()
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
                    done += 1
                    _progress.report(done=done, s=(time.perf_counter_ns() - t_visit) * ns)
        per_size = [{"k": wire(k), **samples[k]} for k in sizes] if rank == 0 else []
        result["per_size"] = per_size

        sync_buf = np.zeros(1, dtype=np.uint8)

        def pair_sync() -> None:
            """A barrier of ranks 0 and 1 alone: the idle ranks wait in their one Barrier of
            COMM_WORLD, which a Barrier here would complete early."""
            comm.Sendrecv([ack, 0, MPI.BYTE], dest=peer, sendtag=12,
                          recvbuf=[sync_buf, 0, MPI.BYTE], source=peer, recvtag=12)

        def eager_probe(k: int) -> float:
            """Isend + Wait time of k bytes whose receive is posted EAGER_DELAY late (median)."""
            times = []
            for _ in range(3):
                pair_sync()
                if rank == 0:
                    t0 = time.perf_counter_ns()
                    comm.Isend(message(k), dest=1, tag=11).Wait()
                    times.append((time.perf_counter_ns() - t0) * ns)
                else:
                    _wait(int(EAGER_DELAY * 1e9), False)
                    recv(k, 0, 11)
            return float(np.median(times)) if rank == 0 else 0.0

        def progress_case(k: int, receiver_computes: bool, D_ns: int) -> float:
            """One sample of the progress probe (seconds; rank 0 returns 0 when rank 1 timed).

            The rank whose compute is probed sends a 0-byte "go" (eager: it returns at once) and
            then computes; its peer starts on receiving it. A barrier instead let a rank that the
            scheduler held up in the barrier's progress loop see the request to send while still
            inside MPI (under load, 3 of 7 waits of a receiver "computing" 2 ms lasted 0.1 ms)."""
            n = wire(k)
            go = [ack, 0, MPI.BYTE]
            if receiver_computes:
                if rank == 1:
                    req = comm.Irecv([buf[:n], MPI.BYTE], source=0, tag=13)
                    pair_sync()         # neither rank is still busy with the previous sample
                    comm.Send(go, dest=0, tag=17)
                    _wait(D_ns, spin)               # computes: no MPI call
                    req.Wait()
                    return 0.0
                pair_sync()
                comm.Recv(go, source=1, tag=17)
                _wait(int(PROGRESS_LEAD * 1e9), spin)
                t0 = time.perf_counter_ns()
                comm.Isend(message(k), dest=1, tag=13).Wait()
                return (time.perf_counter_ns() - t0) * ns
            pair_sync()
            if rank == 0:
                comm.Recv(go, source=1, tag=17)
                req = comm.Isend(message(k), dest=1, tag=14)
                _wait(D_ns, spin)                   # computes: no MPI call
                req.Wait()
                return 0.0
            comm.Send(go, dest=0, tag=17)
            t0 = time.perf_counter_ns()
            comm.Recv([buf[:n], MPI.BYTE], source=0, tag=14)
            return (time.perf_counter_ns() - t0) * ns

        def progress_probe(eager_send: list[tuple[int, float]]) -> dict:
            """Both cases for the first size the eager probe saw wait (fit.eager_limit's rule) and
            the largest eager size below it (rank 0's choice, shared with rank 1)."""
            plan = None
            if rank == 0:
                rdv = next((k for k, t in eager_send if t >= 0.5 * EAGER_DELAY), None)
                eager = [k for k, t in eager_send if rdv is None or k < rdv]
                D = PROGRESS_D
                if rdv is not None:
                    # the compute must dwarf the transfer itself (a slow link's large sizes)
                    D = min(max(D, 8 * float(np.median(samples[rdv]["rtt"])) / 2), 0.25)
                plan = (rdv, eager[-1] if eager else None, D)
                comm.send(plan, dest=1, tag=15)
            else:
                plan = comm.recv(source=0, tag=15)
            rdv, eager, D = plan
            out = {"D_s": D, "lead_s": PROGRESS_LEAD, "compute": "spin" if spin else "sleep",
                   "rendezvous_k": rdv,
                   "rendezvous_size": None if rdv is None else wire(rdv),
                   "eager_size": None if eager is None else wire(eager),
                   "receiver_computes_s": {"rendezvous": [], "eager": []},
                   "sender_computes_s": {"rendezvous": [], "eager": []}}
            cases = [(name, k) for name, k in (("rendezvous", rdv), ("eager", eager))
                     if k is not None]
            t_probe = time.perf_counter_ns()
            for rep in range(PROGRESS_REPEAT + 1):
                for side, receiver_computes in (("receiver_computes_s", True),
                                                ("sender_computes_s", False)):
                    timer = 0 if receiver_computes else 1
                    for name, k in cases:
                        t = progress_case(k, receiver_computes, int(D * 1e9))
                        if rep > 0 and rank == timer:       # the first round is a warm-up
                            out[side][name].append(t)
            # rank 1 timed the sender-computes case: rank 0 writes the result
            theirs = comm.sendrecv(out["sender_computes_s"], dest=peer, source=peer,
                                   sendtag=16, recvtag=16)
            if rank == 0:
                out["sender_computes_s"] = theirs
            out["took_s"] = (time.perf_counter_ns() - t_probe) * ns
            return out

        if not a.overhead_only:
            if rank == 0:
                _progress.report(phase="eager probe")
            probes = [(k, eager_probe(k)) for k in sizes]
            result["eager_probe"] = {"delay_s": EAGER_DELAY,
                                     "sizes": [wire(k) for k, _ in probes],
                                     "send_s": [t for _, t in probes]}
            if rank == 0:
                _progress.report(phase="progress probe")
            result["progress_probe"] = progress_probe(probes)
            if rank == 0:
                _progress.report(phase="call probe")
            result["call_probe"] = call_probe(comm, rank, pickled, payload(8), pair_sync)
            rdv = result["progress_probe"]["rendezvous_k"]
            if rdv is not None:
                if rank == 0:
                    _progress.report(phase="queue probe")
                # rank 0 timed the ping-pong: its one-way time of the size, for both ranks
                mine = float(np.median(samples[rdv]["rtt"])) / 2 if rank == 0 else 0.0
                one_way = max(mine, comm.sendrecv(mine, dest=peer, source=peer, sendtag=18,
                                                  recvtag=18))
                result["queue_probe"] = queue_probe(
                    comm, rank, message(rdv), lambda tag: recv(rdv, 0, tag), one_way,
                    pair_sync, spin)
            # the eager sizes: up to the largest the eager probe saw not wait (bytes on the wire)
            eager_max = None if rdv is None else result["progress_probe"]["eager_size"]
            if rdv is None or eager_max is not None:
                if rank == 0:
                    _progress.report(phase="unexpected probe")
                big = max([k for k in sizes if eager_max is None or wire(k) <= eager_max]
                          or [min(sizes)])
                mine = float(np.median(samples[big]["rtt"])) / 2 if rank == 0 else 0.0
                one_way = max(mine, comm.sendrecv(mine, dest=peer, source=peer, sendtag=19,
                                                  recvtag=19))
                result["unexpected_probe"] = unexpected_probe(
                    comm, rank, eager_max, one_way, pair_sync, lambda d: _wait(d, spin))
            if rank == 0:
                _progress.report(phase="burst probe")
            result["burst_probe"] = burst_probe(comm, rank, pair_sync)
            if rank == 0:
                _progress.report(phase="resume probe")
            result["resume_probe"] = resume_probe(comm, rank, pair_sync,
                                                  lambda d: _wait(d, spin))
            if rank == 0:
                _progress.report(phase="collective probe")
            result["flag_probe"] = flag_probe(comm, rank, pair_sync, lambda d: _wait(d, spin))
            if rank == 0:
                _progress.report(phase="binding probe")
            result["binding_probe"] = binding_probe(rank, pickled, payload(8))
            if rank == 0:
                _progress.report(phase="reduction probe")
            result["reduction_probe"] = reduction_probe(rank)
            if rank == 0:
                _progress.report(phase="gap and loopback probes")
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
    switches1, waited1 = conditions.ctx_switches(), conditions.run_queue_wait_ns()
    me["run_queue_wait_s"] = (waited1 - waited0) / 1e9 if waited0 is not None and waited1 \
        is not None else None
    me["measured_s"] = time.monotonic() - t_start
    me["ctx_switches"] = ([b - a for a, b in zip(switches0, switches1)]
                          if switches0 and switches1 else None)
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
