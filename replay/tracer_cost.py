"""Rule ``python_tracer_in_bursts``: the Python tracer's own time, taken out of the bursts.

The Python tracer (instrument.comm) times a call right around the mpi4py call; its own work per
call (the traced method's dispatch before t_start, packing the record into its staging file after
t_end) lies outside the recorded interval, in the burst between the call and the
next. The untraced program does not do that work, so for a trace of the Python tracer every burst
before an operation of kernel kind κ is replayed as

    b' = max(0, b − c(κ))

with c from calibrate's Python tracer probe (``replay.calibration.tracer``: the gap between
consecutive recorded calls of one form in a loop with nothing else in it, less the loop's own
iteration), the profile's ``[python_tracer]`` section, seconds per call:

    κ = SEND: send          RECV: recv          ISEND: isend         IRECV: irecv
    κ = WSEND: wait_send    WRECV: wait_recv    COLL: collective (the probe's Allreduce)
    any other kind (probe, one-sided, persistent, polls): other, the smallest of the above

The cost is charged to the burst before each operation, the one whose gap holds the tracer's
work before that call and after the previous one: the probe measured exactly that gap. The
operations of one call after its first (a Sendrecv's second half, a Waitall's other requests)
have no burst before them, and the floor at 0 leaves them so. ``--cpu-time`` bursts are changed
the same way.

It applies to traces of the Python tracer (a manifest without ``tracer`` and without
``origin``: neither the PMPI library's, nor imported, nor a replayed timeline) under the network
models the kernel runs; ``--model measured`` keeps the measured bursts, ``--model loggopsim``
replays the bursts as recorded (said by replay). Without a ``[python_tracer]`` section (profiles
made before the probe) nothing changes. Evidence: docs/replay.md, "The Python tracer's own time".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from replay.profile import time_section

NAME = "python_tracer_in_bursts"
#: the section's keys (seconds per call), as replay.calibration.tracer writes them
KEYS = ("send", "recv", "isend", "irecv", "wait_send", "wait_recv", "collective", "other")
#: kernel kind (replay.kernel's name) -> the key whose cost the burst before it loses (any
#: other kind: ``other``); by name, so that reading a profile does not load the kernel (numba)
KIND_KEY = {"SEND": "send", "RECV": "recv", "ISEND": "isend", "IRECV": "irecv",
            "WSEND": "wait_send", "WRECV": "wait_recv", "COLL": "collective"}


def tracer_costs(profile: Mapping[str, Any] | None, where: str = "profile"
                 ) -> dict[str, float] | None:
    """The ``[python_tracer]`` section of a calibration profile (seconds per call, every key of
    ``KEYS``), None where it has none. A malformed section is a DataError naming ``where``."""
    return time_section(profile, "python_tracer", KEYS, where)


def by_python_tracer(manifest: Mapping[str, Any]) -> bool:
    """Whether the trace was recorded by the Python tracer: no ``tracer`` (the PMPI library's
    manifests say ``pmpi``), no ``origin`` (imported) and no ``replay`` (a replayed timeline)."""
    return not any(k in manifest for k in ("tracer", "origin", "replay"))


def per_kind_ns(costs: Mapping[str, float]) -> np.ndarray:
    """c(κ) in ns for every kernel kind κ (module docstring; the kinds NOP ... POLL)."""
    from replay import kernel as K

    c = np.full(K.POLL + 1, costs["other"] * 1e9)
    for kind, key in KIND_KEY.items():
        c[getattr(K, kind)] = costs[key] * 1e9
    return c


def less_tracer(burst: np.ndarray, kind: np.ndarray, c_ns: np.ndarray) -> np.ndarray:
    """b' = max(0, b − c(κ)) per operation (ns)."""
    return np.maximum(np.asarray(burst, np.float64) - c_ns[kind], 0.0)


def tracer_line(change_s: float | None, costs: Mapping[str, float] | None) -> str | None:
    """The replay report's line on the rule (None where it did not apply)."""
    if change_s is None or not costs:
        return None
    parts = ", ".join(f"{k} {costs[k] * 1e6:.2g}" for k in KEYS)
    return (f"tracer     recorded by the Python tracer: bursts {change_s:+.6f} s, its own time "
            f"per call taken off, in us: {parts} (rule {NAME})")
