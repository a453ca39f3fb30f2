"""The reduction probe of the calibration benchmark (bench.py), and its fit: γ, the time per byte
a reduction's member takes to combine what it received with its own data (rule
``reduction_combine``, ``replay.patterns.combine_steps``; Thakur, Rabenseifner and Gropp 2005:
a reduction step of n bytes costs α + nβ + nγ).

Rank 0 times, alone, ``MPI.SUM.Reduce_local`` on two arrays of doubles: the library's own
combining routine, the one its reduction algorithms call between their steps (MPICH:
``MPIR_Reduce_local``), whatever the program's language. Sizes ``REDUCE_SIZES`` (bytes) span the
blocks whose combining costs more than a call (below them a step's α hides it);
``REDUCE_REPEAT`` calls are kept per size after one warm-up call. The fit is the least-squares
slope of the median time against the bytes: its intercept (the call through mpi4py, about a
microsecond) is no part of a combine inside the library, so only the slope is kept. SUM over
doubles stands for every operation and type: the trace records a reduction's bytes, not its
operation, and the other predefined operations on the common types stream their operands
alike.
"""

from __future__ import annotations

import time

import numpy as np

#: bytes combined per timed call
REDUCE_SIZES = (64 << 10, 256 << 10, 1 << 20, 4 << 20)
#: kept calls per size (one warm-up call before them is not kept)
REDUCE_REPEAT = 15


def reduction_probe(rank: int) -> dict:
    """Rank 0 times ``REDUCE_REPEAT`` combines of each size of ``REDUCE_SIZES`` (seconds per
    call) and returns them; any other rank returns an empty dict at once."""
    if rank != 0:
        return {}
    from mpi4py import MPI

    out: dict = {"sizes": list(REDUCE_SIZES), "op": "SUM", "type": "double", "call_s": []}
    for k in REDUCE_SIZES:
        src = np.ones(k // 8)
        dst = np.ones(k // 8)
        MPI.SUM.Reduce_local(src, dst)              # warm-up: pages touched, code loaded
        times = []
        for _ in range(REDUCE_REPEAT):
            t0 = time.perf_counter_ns()
            MPI.SUM.Reduce_local(src, dst)
            times.append((time.perf_counter_ns() - t0) * 1e-9)
        out["call_s"].append(times)
    return out


def fit_reduction(probe: dict) -> tuple[dict, dict, list[str]]:
    """(the profile's ``[reduction]`` section, the evidence kept under ``fit``, notes) of a
    reduction probe: ``gamma`` (s/byte), the least-squares slope of the median time per call
    against the bytes; 0 with a note where the slope is not positive (no size took longer than
    a smaller one: nothing measurable)."""
    k = np.asarray(probe["sizes"], np.float64)
    t = np.array([float(np.median(c)) for c in probe["call_s"]])
    notes: list[str] = []
    gamma = float(np.polyfit(k, t, 1)[0]) if len(k) >= 2 else 0.0
    if not gamma > 0.0:
        notes.append(f"reduction probe: the combining time did not grow with the bytes "
                     f"(slope {gamma:.3g} s/B): gamma set to 0")
        gamma = 0.0
    evidence = {"sizes": [int(x) for x in k], "median_s": t.tolist(), "op": probe.get("op"),
                "type": probe.get("type")}
    return {"gamma": gamma}, evidence, notes


if __name__ == "__main__":
    # The probe alone (one process is enough: Reduce_local moves no message), as JSON: its
    # evidence and the fitted [reduction] section.
    import json

    section, evidence, notes = fit_reduction(reduction_probe(0))
    print(json.dumps({"reduction": section, "reduction_probe": evidence, "notes": notes}))
