"""Fallback network calibration (used only when `hindsight calibrate` is not available): a
ping-pong between ranks 0 and 1 through mpi4py's pickle API with numpy payloads, the path the
applications' messages take. Run as ``mpiexec -n 2 python -m validation.pingpong OUT.json``.

Writes, per payload size, the minimum and median one-way time (half a round trip), the time a
small ``isend`` call takes (send overhead) and the time a ``recv`` of an already-arrived small
message takes (receive overhead). ``fit_profile`` turns that into the TOML profile sections."""

from __future__ import annotations

import json
import sys
import time

SIZES = [64, 1024, 8192, 65536, 262144, 1048576, 4194304]


def _reps(k: int) -> int:
    return 200 if k <= 8192 else 60 if k <= 262144 else 20


def main(out: str) -> None:
    import numpy as np
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    if comm.Get_size() < 2:
        raise SystemExit("pingpong needs 2 ranks")
    result: dict = {"sizes": [], "min_s": [], "median_s": []}
    for k in SIZES:
        buf = np.zeros(k, dtype=np.uint8)
        times = []
        for i in range(_reps(k) + 3):          # 3 warm-up round trips
            comm.Barrier()
            if rank == 0:
                t = time.perf_counter()
                comm.send(buf, dest=1, tag=1)
                comm.recv(source=1, tag=2)
                if i >= 3:
                    times.append((time.perf_counter() - t) / 2)
            elif rank == 1:
                comm.recv(source=0, tag=1)
                comm.send(buf, dest=0, tag=2)
        if rank == 0:
            result["sizes"].append(k)
            result["min_s"].append(float(np.min(times)))
            result["median_s"].append(float(np.median(times)))
    # overheads: an eager isend's call time; a recv of a message that has already arrived
    small = np.zeros(64, dtype=np.uint8)
    o_s, o_r = [], []
    for i in range(103):
        comm.Barrier()
        if rank == 0:
            t = time.perf_counter()
            req = comm.isend(small, dest=1, tag=3)
            o_s.append(time.perf_counter() - t)
            req.wait()
        elif rank == 1:
            time.sleep(0.0005)                   # let the message arrive first
            t = time.perf_counter()
            comm.recv(source=0, tag=3)
            o_r.append(time.perf_counter() - t)
    o_r_all = comm.gather(o_r, root=0)
    if rank == 0:
        result["o_send_s"] = float(np.median(o_s[3:]))
        result["o_recv_s"] = float(np.median(o_r_all[1][3:]))
        with open(out, "w") as fh:
            json.dump(result, fh, indent=1)


def fit_profile(data: dict) -> dict[str, dict[str, float]]:
    """One-way time t(k) ≈ a + b·k by least squares on the median times (k >= 1 KiB);
    LogGPS: G = b, o_send/o_recv measured, L = a - o_send - o_recv (>= 0); Hockney: l = a, g = b;
    M/M/1: C = 1/b bytes/s (replay reads bare numbers as bytes/s), tau = a."""
    import numpy as np

    k = np.array(data["sizes"], dtype=float)
    t = np.array(data["median_s"], dtype=float)
    sel = k >= 1024
    b, a = np.polyfit(k[sel], t[sel], 1)
    b = max(float(b), 1e-13)
    a = max(float(a), float(t.min()) / 2)
    o_s, o_r = data["o_send_s"], data["o_recv_s"]
    return {"loggps": {"L": max(a - o_s - o_r, 0.0), "o_send": o_s, "o_recv": o_r, "g": 0.0,
                       "G": b, "S": 65536.0},
            "hockney": {"l": a, "g": b},
            "mm1": {"C": 1.0 / b, "tau": a}}


if __name__ == "__main__":
    main(sys.argv[1])
