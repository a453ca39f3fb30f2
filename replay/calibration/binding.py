"""The binding probe of the calibration benchmark (bench.py), and its fit: the time mpi4py spends
in each kind of call outside the MPI library (rule ``binding_in_bursts``, ``replay.binding``).

Every other probe times a call as the traced program makes it, through mpi4py: the Python
binding's own work (parsing the buffer specification, creating the Request and Status objects,
converting the arguments) is part of each measured o. A trace recorded below the binding (the
PMPI library, an OTF2 archive, a GOAL schedule) has that work in its bursts instead, so the
replay takes it off the profile's per-call costs for such a trace.

Rank 0 times, alone, batches of ``BIND_BATCH`` calls on paths where MPI itself does nothing:
point-to-point calls to or from ``MPI.PROC_NULL`` and collectives on ``MPI.COMM_SELF``, each in
the form the probe of the cost it corrects uses (``CALLS``: the call probe's ``Irecv``, ``Wait``,
``Probe`` and ``Iprobe``; the ping-pong's ``Send`` and ``Recv``, as the API under calibration
makes them; the collective probe's four collectives with 8 bytes). ``BIND_BATCHES`` batches are
kept after one warm-up batch; the fit takes the median time per call less the median time per
iteration of an empty loop (``loop_s``: in a trace the loop's iteration is a burst). MPICH's own
work on these paths is not taken off: a C program timing the same calls here measured 5-36 ns
each (docs/calibration.md, "Binding probe").
"""

from __future__ import annotations

import time

import numpy as np

#: calls per timed batch
BIND_BATCH = 200
#: kept batches per call (one warm-up batch before them is not kept)
BIND_BATCHES = 20
#: bytes of each call's buffer (the call probe's and the collective probe's smallest size)
BIND_BYTES = 8

#: call -> what is timed, per API (the probe of the cost the rule corrects times the same form)
CALLS: dict[str, dict[str, str]] = {
    "Send": {"buffer": "comm.Send([buf, BYTE], PROC_NULL, tag)",
             "pickle": "comm.Send([pickled bytes, BYTE], PROC_NULL, tag)"},
    "Recv": {"buffer": "comm.Recv([buf, BYTE], PROC_NULL, tag)",
             "pickle": "comm.Mprobe(PROC_NULL, tag, status), status.Get_count, "
                       "message.Recv([buf, BYTE])"},
    "Irecv": {"buffer": "comm.Irecv([buf, BYTE], PROC_NULL, tag)",
              "pickle": "comm.irecv(None, PROC_NULL, tag)"},
    "Wait": {"buffer": "Request.Wait() of a PROC_NULL Isend (complete)",
             "pickle": "Request.wait() of a PROC_NULL Isend (complete)"},
    "Probe": {"buffer": "comm.Probe(PROC_NULL, tag)",
              "pickle": "comm.Mprobe(PROC_NULL, tag)"},
    "Iprobe": {"buffer": "comm.Iprobe(PROC_NULL, tag)", "pickle": "comm.Iprobe(PROC_NULL, tag)"},
    "Barrier": {"buffer": "COMM_SELF.Barrier()", "pickle": "COMM_SELF.Barrier()"},
    "Bcast": {"buffer": "COMM_SELF.Bcast(array, root=0)", "pickle": "COMM_SELF.Bcast(array, root=0)"},
    "Reduce": {"buffer": "COMM_SELF.Reduce(array, array, op=SUM, root=0)",
               "pickle": "COMM_SELF.Reduce(array, array, op=SUM, root=0)"},
    "Allreduce": {"buffer": "COMM_SELF.Allreduce(array, array, op=SUM)",
                  "pickle": "COMM_SELF.Allreduce(array, array, op=SUM)"},
}

_TAG = 57


def _batches(pickled: bool, small: bytes) -> dict:
    """call -> a function timing one batch (ns per call of the whole batch)."""
    from mpi4py import MPI
    comm, me = MPI.COMM_WORLD, MPI.COMM_SELF
    null, n = MPI.PROC_NULL, BIND_BATCH
    items = range(n)
    buf = np.zeros(BIND_BYTES, np.uint8)
    msg = [small, MPI.BYTE] if pickled else [buf, MPI.BYTE]
    sbuf, rbuf = np.ones(BIND_BYTES // 8), np.zeros(BIND_BYTES // 8)
    st = MPI.Status()

    def timed(call) -> float:
        t0 = time.perf_counter_ns()
        for _ in items:
            call()
        return (time.perf_counter_ns() - t0) / n

    def recv_pickled() -> None:
        m = comm.Mprobe(null, _TAG, st)
        st.Get_count(MPI.BYTE)
        m.Recv([buf, MPI.BYTE])

    def irecv() -> float:
        post = (lambda: comm.irecv(None, null, _TAG)) if pickled else \
            (lambda: comm.Irecv([buf, MPI.BYTE], null, _TAG))
        t0 = time.perf_counter_ns()
        reqs = [post() for _ in items]
        t1 = time.perf_counter_ns()
        MPI.Request.Waitall(reqs)
        return (t1 - t0) / n

    def wait() -> float:
        reqs = [comm.Isend(msg, null, _TAG) for _ in items]
        t0 = time.perf_counter_ns()
        if pickled:
            for r in reqs:
                r.wait()
        else:
            for r in reqs:
                r.Wait()
        return (time.perf_counter_ns() - t0) / n

    def loop() -> float:
        t0 = time.perf_counter_ns()
        for _ in items:
            pass
        return (time.perf_counter_ns() - t0) / n

    return {
        "Send": lambda: timed(lambda: comm.Send(msg, null, _TAG)),
        "Recv": lambda: timed(recv_pickled if pickled
                              else lambda: comm.Recv([buf, MPI.BYTE], null, _TAG)),
        "Irecv": irecv,
        "Wait": wait,
        "Probe": lambda: timed((lambda: comm.Mprobe(null, _TAG)) if pickled
                               else lambda: comm.Probe(null, _TAG)),
        "Iprobe": lambda: timed(lambda: comm.Iprobe(null, _TAG)),
        "Barrier": lambda: timed(me.Barrier),
        "Bcast": lambda: timed(lambda: me.Bcast(sbuf, root=0)),
        "Reduce": lambda: timed(lambda: me.Reduce(sbuf, rbuf, op=MPI.SUM, root=0)),
        "Allreduce": lambda: timed(lambda: me.Allreduce(sbuf, rbuf, op=MPI.SUM)),
        "loop": loop,
    }


def binding_probe(rank: int, pickled: bool, small: bytes) -> dict:
    """Run the probe on rank 0 (other ranks return an empty dict at once). ``small`` is the
    pickle API's payload (pre-pickled bytes, as the ping-pong sends them). Rank 0 returns, per
    call and for the empty loop, the time per call of every batch (seconds)."""
    if rank != 0:
        return {}
    t_probe = time.perf_counter_ns()
    batch = _batches(pickled, small)
    out: dict = {"api": "pickle" if pickled else "buffer", "batch": BIND_BATCH,
                 "batches": BIND_BATCHES, "bytes": BIND_BYTES,
                 "samples_s": {name: [] for name in batch}}
    for b in range(BIND_BATCHES + 1):
        # the calls interleaved batch by batch, so that a slow phase of the machine falls on all
        for name, run in batch.items():
            t = run()
            if b > 0:
                out["samples_s"][name].append(t * 1e-9)
    out["took_s"] = (time.perf_counter_ns() - t_probe) * 1e-9
    return out


def fit_binding(probe: dict) -> tuple[dict, dict, list[str]]:
    """(params, evidence, notes): params the ``[binding]`` section, ``api`` and per call of
    ``CALLS`` the median time per call less the empty loop's (seconds, >= 0); evidence the
    interquartile ranges, the loop and what each call timed."""
    api = str(probe.get("api", "buffer"))
    samples = probe["samples_s"]
    loop = float(np.median(samples["loop"]))
    params: dict = {"api": api}
    evidence: dict = {"batch": int(probe["batch"]), "batches": int(probe["batches"]),
                      "loop_s": loop, "took_s": probe.get("took_s")}
    notes: list[str] = []
    for name, forms in CALLS.items():
        a = np.asarray(samples[name], np.float64)
        med = float(np.median(a)) - loop
        iqr = float(np.percentile(a, 75) - np.percentile(a, 25))
        evidence[name] = {"call": forms[api], "median_s": med, "iqr_s": iqr}
        if med < 0:
            notes.append(f"binding probe: {name} measured no longer than the empty loop: 0 kept")
            med = 0.0
        elif iqr > 0.5 * med:
            notes.append(f"binding probe: {name} varied widely over its batches (IQR "
                         f"{iqr * 1e9:.0f} ns, median {med * 1e9:.0f} ns): the machine was busy, "
                         "the median is kept")
        params[name] = med
    return params, evidence, notes
