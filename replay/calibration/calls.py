"""The call probe of the calibration benchmark (bench.py): the software overhead of the calls that
move no message of their own, as the traced program makes them through mpi4py.

Rank 0 times, rank 1 serves; the idle ranks are not involved. Each quantity is timed in batches of
``CALL_BATCH`` calls between two ``time.perf_counter_ns`` readings, the batch's time divided by
its calls (the timer's own ~50 ns is then spread over the batch); ``CALL_BATCHES`` batches are
kept after one warm-up batch, and fit.fit_calls takes their median. An empty loop over the same
items is timed the same way (``loop_s``): the fit subtracts it, since in a trace the loop's
iteration falls between two calls (a burst), not inside one.

* o_irecv: rank 0 posts ``CALL_BATCH`` receives, nothing arriving (rank 1 sends only after the
  batch, on a "go"); then it waits for them, outside the timing. The buffer API times
  ``comm.Irecv(buf, source, tag)`` (one 8-byte buffer per request, prepared before the batch);
  the pickle API times ``comm.irecv(source=, tag=)`` without a buffer, as a traced program posts
  one (mpi4py then allocates the receive buffer inside the call).
* test (evidence): ``Test`` of one of those requests, still incomplete (an empty Test).
* o_wait: rank 0 Isends ``CALL_BATCH`` small messages (eager); rank 1 receives them and answers
  with an ack; once rank 0 has the ack and MPI reports every send request complete
  (``Get_status``, which does not free it), the batch times ``Wait`` (pickle API: ``wait``) on
  each request.
* o_probe: in rounds of ``CALL_QUEUED`` calls (fewer messages queued than stall MPICH's tcp
  netmod), rank 1 sends that many small messages and then an end marker; rank 0 polls ``Iprobe``
  until the marker is there (the messages are, ahead of it on the channel), then times the
  round's probes alone; the receives follow outside the timing. A batch is the sum of its rounds.
  Buffer API: ``comm.Probe(source, tag)``, which leaves the message queued, so every Probe of the
  batch finds the first message (what a Probe before its Recv finds). Pickle API: the traced
  ``recv``'s probe row is a matched probe ``comm.Mprobe``, which dequeues: each call of the
  batch takes the next message.
* o_call: ``comm.Iprobe(source, tag)`` on a tag nothing is sent with (an Iprobe finding nothing:
  one trip through the progress engine).
"""

from __future__ import annotations

import time

import numpy as np
from mpi4py import MPI

#: calls per timed batch
CALL_BATCH = 100
#: timed batches per quantity (one warm-up batch before them is not kept)
CALL_BATCHES = 20
#: bytes of the buffer-API messages of the probe (eager everywhere)
CALL_BYTES = 8
#: messages queued at once for the Probe batch: MPICH over libfabric's tcp provider stopped
#: delivering (an Iprobe never saw a message) behind 70 unexpected messages, not behind 64
CALL_QUEUED = 20

_TAG_IRECV, _TAG_WAIT, _TAG_PROBE, _TAG_END, _TAG_GO, _TAG_NONE = 40, 41, 42, 43, 44, 49


def call_probe(comm: MPI.Comm, rank: int, pickled: bool, small: bytes, pair_sync) -> dict:
    """Run the probe on ranks 0 and 1 (``rank`` is 0 or 1). ``small`` is the pickle API's payload
    (a pickled object, sent as bytes as the tracer sends it); ``pair_sync`` synchronises the two.
    Rank 0 returns the per-call times of every batch (seconds), rank 1 an empty dict."""
    peer = 1 - rank
    n = CALL_BATCH
    msg = [small, MPI.BYTE] if pickled else [np.ones(CALL_BYTES, np.uint8), MPI.BYTE]
    sink = np.zeros(max(len(small), CALL_BYTES) + 64, np.uint8)
    go = [sink, 0, MPI.BYTE]
    out: dict = {"api": "pickle" if pickled else "buffer", "batch": n, "batches": CALL_BATCHES,
                 "bytes": len(small) if pickled else CALL_BYTES,
                 "loop_s": [], "irecv_s": [], "test_s": [], "wait_s": [], "probe_s": [],
                 "iprobe_s": []}
    ns = 1e-9
    t_probe = time.perf_counter_ns()
    items = list(range(n))
    queued = list(range(CALL_QUEUED))
    for batch in range(CALL_BATCHES + 1):
        keep = batch > 0
        # o_irecv, and an empty Test of one of the posted requests
        pair_sync()
        if rank == 0:
            if pickled:
                irecv = comm.irecv
                t0 = time.perf_counter_ns()
                reqs = [irecv(None, peer, _TAG_IRECV) for _ in items]
                t1 = time.perf_counter_ns()
                test = reqs[-1].test
            else:
                bufs = [[np.zeros(CALL_BYTES, np.uint8), MPI.BYTE] for _ in items]
                irecv = comm.Irecv
                t0 = time.perf_counter_ns()
                reqs = [irecv(b, peer, _TAG_IRECV) for b in bufs]
                t1 = time.perf_counter_ns()
                test = reqs[-1].Test
            t2 = time.perf_counter_ns()
            for _ in items:
                test()
            t3 = time.perf_counter_ns()
            comm.Send(go, dest=peer, tag=_TAG_GO)
            if pickled:
                MPI.Request.waitall(reqs)
            else:
                MPI.Request.Waitall(reqs)
            if keep:
                out["irecv_s"].append((t1 - t0) * ns / n)
                out["test_s"].append((t3 - t2) * ns / n)
        else:
            comm.Recv(go, source=peer, tag=_TAG_GO)
            for _ in items:
                comm.Send(msg, dest=peer, tag=_TAG_IRECV)
        # o_wait: Wait on send requests already complete
        pair_sync()
        if rank == 0:
            reqs = [comm.Isend(msg, dest=peer, tag=_TAG_WAIT) for _ in items]
            comm.Recv(go, source=peer, tag=_TAG_GO)
            while not all(r.Get_status() for r in reqs):
                pass
            if pickled:
                t0 = time.perf_counter_ns()
                for r in reqs:
                    r.wait()
                t1 = time.perf_counter_ns()
            else:
                t0 = time.perf_counter_ns()
                for r in reqs:
                    r.Wait()
                t1 = time.perf_counter_ns()
            if keep:
                out["wait_s"].append((t1 - t0) * ns / n)
        else:
            for _ in items:
                comm.Recv([sink, MPI.BYTE], source=peer, tag=_TAG_WAIT)
            comm.Send(go, dest=peer, tag=_TAG_GO)
        # o_probe: the messages are there, at most CALL_QUEUED at a time
        probe_ns = 0
        for _ in range(n // CALL_QUEUED):
            pair_sync()
            if rank == 1:
                for _ in queued:
                    comm.Send(msg, dest=peer, tag=_TAG_PROBE)
                comm.Send(go, dest=peer, tag=_TAG_END)
                continue
            while not comm.Iprobe(source=peer, tag=_TAG_END):
                pass
            if pickled:
                mprobe = comm.Mprobe
                t0 = time.perf_counter_ns()
                found = [mprobe(peer, _TAG_PROBE) for _ in queued]
                t1 = time.perf_counter_ns()
                for m in found:
                    m.Recv([sink, MPI.BYTE])
            else:
                probe = comm.Probe
                t0 = time.perf_counter_ns()
                for _ in queued:
                    probe(peer, _TAG_PROBE)
                t1 = time.perf_counter_ns()
                for _ in queued:
                    comm.Recv([sink, MPI.BYTE], source=peer, tag=_TAG_PROBE)
            comm.Recv(go, source=peer, tag=_TAG_END)
            probe_ns += t1 - t0
        if rank == 0:
            # o_call: an Iprobe that finds nothing; and the empty loop
            iprobe = comm.Iprobe
            t2 = time.perf_counter_ns()
            for _ in items:
                iprobe(peer, _TAG_NONE)
            t3 = time.perf_counter_ns()
            for _ in items:
                pass
            t4 = time.perf_counter_ns()
            if keep:
                out["probe_s"].append(probe_ns * ns / (n // CALL_QUEUED * CALL_QUEUED))
                out["iprobe_s"].append((t3 - t2) * ns / n)
                out["loop_s"].append((t4 - t3) * ns / n)
    out["took_s"] = (time.perf_counter_ns() - t_probe) * ns
    return out if rank == 0 else {}
