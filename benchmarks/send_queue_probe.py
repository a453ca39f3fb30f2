"""When does a nonblocking send complete if the receiver stops calling MPI? (MPICH queue probe)

A standalone mpi4py program, run under ``mpiexec -n 2`` (evidence for docs/replay.md, rule
``ack_cells``): rank 0 ``Isend``s N messages of S bytes to rank 1 (one numpy buffer each;
``--gap`` ms of compute after each) and then completes them; rank 1 waits ``--lead`` ms,
receives the messages (``--modes``: how each side sends, waits and receives), optionally
computing ``--per`` ms after each receive, then computes C ms with no MPI call (a
``perf_counter`` spin) and enters a final ``Barrier``. Both ranks read ``time.perf_counter``
(CLOCK_MONOTONIC, one clock per host), so rank 0's end of its waits is compared with rank 1's
end of receiving (``recv_end``) and of computing (``comp_end``).

``held`` = (sender's wait end - receiver's recv end) / C: about 0 when the sends completed with
the receives, about 1 or more when the last send completed only when the receiver entered MPI
again (its Barrier). Per configuration the median, min and max over the rounds; the
configurations are interleaved in every round.

    mpiexec -n 2 -bind-to core python benchmarks/send_queue_probe.py --modes Isend:all:Recv \
        --counts 32,63,64,65,66,96,128 --sizes 4KiB,8KiB,128KiB --compute 20 --lead 0 \
        --gap 0.2 --rounds 5

With ``MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_NUM_CELLS=32`` the count at which sends are held moves
with it. With tcp: ``MPIR_CVAR_NOLOCAL=1 FI_PROVIDER=tcp MPIR_CVAR_CH4_NETMOD=ofi`` in the
environment (``--transport tcp`` of ``hindsight collect``). Output: one JSON line per
configuration on rank 0's stdout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
from mpi4py import MPI

UNITS = {"B": 1, "KiB": 1024, "MiB": 1024 * 1024}


def size(text: str) -> int:
    for unit in ("KiB", "MiB", "B"):
        if text.endswith(unit):
            return int(text[: -len(unit)]) * UNITS[unit]
    return int(text)


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def one_round(comm: MPI.Intracomm, n: int, s: int, mode: str, lead: float, per: float, gap: float,
              compute: float, bufs: list[np.ndarray], rbufs: list[np.ndarray]
              ) -> dict[str, float] | None:
    """One round of a configuration. ``mode`` = SEND:WAIT:RECV: SEND ``Isend`` (buffer, the
    same buffers every round), ``Isendnew`` (buffer, fresh copies made before the round) or
    ``isend`` (pickle: the array is pickled and sent as bytes), WAIT ``all`` (one Waitall) or
    ``each`` (one Wait per request, in order), RECV ``Recv``, ``Probe`` (then ``Recv``),
    ``Mprobe`` (then the message's ``Recv``), ``recv`` (pickle: mpi4py's matched probe,
    allocation, copy, unpickling) or ``Irecv`` (all posted, then one Waitall). The buffer-API
    receives take a buffer 4 KiB larger than S, so that they also receive a pickled array's
    bytes; ``recv`` needs ``isend``."""
    send, wait, recv = mode.split(":")
    me = comm.Get_rank()
    if me == 0 and send == "Isendnew":
        bufs = [b.copy() for b in bufs[:n]]
    comm.Barrier()
    t0 = time.perf_counter()
    if me == 0:
        reqs = []
        for i in range(n):
            if send == "isend":
                reqs.append(comm.isend(bufs[i], dest=1, tag=7))
            else:
                reqs.append(comm.Isend(bufs[i], dest=1, tag=7))
            if gap:
                spin(gap)
        t_posted = time.perf_counter()
        if wait == "each":
            for q in reqs:
                q.Wait()
        else:
            MPI.Request.Waitall(reqs)
        t_wait = time.perf_counter()
        comm.Barrier()
        other = comm.recv(source=1, tag=9)
        return {"posted": t_posted - t0, "wait_end": t_wait - t0,
                "recv_end": other["recv_end"] - t0, "comp_end": other["comp_end"] - t0}
    spin(lead)
    if recv == "Irecv":
        MPI.Request.Waitall([comm.Irecv(rbufs[i], source=0, tag=7) for i in range(n)])
    else:
        for i in range(n):
            if recv == "Recv":
                comm.Recv(rbufs[i], source=0, tag=7)
            elif recv == "Probe":
                comm.Probe(source=0, tag=7)
                comm.Recv(rbufs[i], source=0, tag=7)
            elif recv == "Mprobe":
                comm.Mprobe(source=0, tag=7).Recv(rbufs[i])
            else:
                comm.recv(source=0, tag=7)
            if per:
                spin(per)
    t_recv = time.perf_counter()
    spin(compute)
    t_comp = time.perf_counter()
    comm.Barrier()
    comm.send({"recv_end": t_recv, "comp_end": t_comp}, dest=0, tag=9)
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--counts", default="16,32,64,65,128,256")
    ap.add_argument("--sizes", default="8KiB,128KiB,1MiB")
    ap.add_argument("--modes", default="Isend:all:Recv,Isend:all:Irecv,isend:each:recv")
    ap.add_argument("--compute", type=float, default=20.0, help="C, ms")
    ap.add_argument("--lead", type=float, default=2.0, help="receiver's delay before receiving, ms")
    ap.add_argument("--per", type=float, default=0.0,
                    help="receiver's compute after each receive, ms")
    ap.add_argument("--gap", type=float, default=0.0, help="sender's compute after each send, ms")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    comm = MPI.COMM_WORLD
    counts = [int(c) for c in a.counts.split(",")]
    sizes = [size(s) for s in a.sizes.split(",")]
    modes = a.modes.split(",")
    configs = [(n, s, m) for s in sizes for n in counts for m in modes]
    if any(m.split(":")[2] == "recv" and m.split(":")[0] != "isend" for m in modes):
        ap.error("the pickle receive `recv` needs the pickle send `isend`")
    bufs = {s: [np.ones(s, dtype=np.uint8) for _ in range(max(counts))] for s in sizes}
    rbufs = {s: [np.ones(s + 4096, dtype=np.uint8) for _ in range(max(counts))] for s in sizes}
    results: dict[tuple[int, int, str], list[dict[str, float]]] = {c: [] for c in configs}
    for c in configs[:2]:                                   # warm-up, untimed
        one_round(comm, c[0], c[1], c[2], a.lead / 1e3, a.per / 1e3, a.gap / 1e3, 1e-3,
                  bufs[c[1]], rbufs[c[1]])
    for r in range(a.rounds):                               # configurations interleaved
        for c in configs:
            got = one_round(comm, c[0], c[1], c[2], a.lead / 1e3, a.per / 1e3, a.gap / 1e3,
                            a.compute / 1e3, bufs[c[1]], rbufs[c[1]])
            if got is not None:
                results[c].append(got)
    if comm.Get_rank() != 0:
        return
    C = a.compute / 1e3
    for (n, s, m), rows in results.items():
        held = [(x["wait_end"] - x["recv_end"]) / C for x in rows]
        print(json.dumps({
            "n": n, "bytes": s, "mode": m, "compute_ms": a.compute, "lead_ms": a.lead,
            "per_ms": a.per, "gap_ms": a.gap, "rounds": len(rows),
            "held_median": round(statistics.median(held), 3),
            "held_min": round(min(held), 3), "held_max": round(max(held), 3),
            "posted_ms": round(1e3 * statistics.median(x["posted"] for x in rows), 3),
            "wait_end_ms": round(1e3 * statistics.median(x["wait_end"] for x in rows), 3),
            "recv_end_ms": round(1e3 * statistics.median(x["recv_end"] for x in rows), 3),
            "comp_end_ms": round(1e3 * statistics.median(x["comp_end"] for x in rows), 3),
        }), flush=True)


if __name__ == "__main__":
    main()
