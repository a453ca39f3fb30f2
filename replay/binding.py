"""Rule ``binding_in_bursts``: mpi4py's own time per call, counted once.

`hindsight calibrate` times every call through mpi4py, as a Python program makes it, so each
per-call cost of a profile (o_send, o_recv, o_irecv, o_wait, o_probe, o_call; the shared-flag
collectives' own and after) includes the Python binding's own work b(call): parsing the buffer
specification, creating the Request and Status objects, converting arguments. Where that work
lies in a trace depends on who recorded it:

* the Python tracer records a call around the mpi4py call: b is inside the call's row, and the
  profile's costs are what the row's call costs;
* the PMPI library records the C call below mpi4py, and an OTF2 archive (Score-P and other C
  tools) or a GOAL schedule has no binding at all: b (if any) is in the bursts between the rows,
  which replay keeps as the program's compute.

For a trace of the second kind the model's per-call costs are the profile's less the binding's,
so that b is counted once:

    o_send' = max(0, o_send − b(Send))      o_recv' = max(0, o_recv − b(Recv))
    o_irecv' = max(0, o_irecv − b(Irecv))   o_wait' = max(0, o_wait − b(Wait))
    o_probe' = max(0, o_probe − b(Probe))   o_call' = max(0, o_call − b(Iprobe))
    own'(op, k) = max(0, own(op, k) − b(op)),  after'(op, k) = max(0, after(op, k) − b(op))
                                             op in Barrier, Bcast, Reduce, Allreduce

b comes from calibrate's binding probe (``replay.calibration.binding``: the same calls on paths
where MPI does nothing, ``MPI.PROC_NULL`` and ``MPI.COMM_SELF``), written as the profile's
``[binding]`` section. L stays as calibrated: L = T − o_s − o_r was fitted with the binding's
work on both sides, so the replayed one-way time of a message between two C-level calls is
T − b(Send) − b(Recv), shorter by the binding's work the calls do after the sender's C call
returns and before the receiver's begins (bounded by b(Send) + b(Recv), 0.5 µs here). Except
where that would make the message arrive before its send's C call began: a shared-memory fit
can put most of T in o_r and L below zero, with o_s + L (0.15 µs on this project's machines)
shorter than b(Send) (0.33 µs). Then

    L' = −(o_send' + 2·o_b_send)

the earliest arrival the LogGP models accept (``L >= −o_s`` at the fewest ranks that send, P
= 2): the message arrives as the C call begins, and the one-way time is T − b(Send) − b(Recv)
plus what o_s + L fell short of b(Send). Values
set with ``--set`` are the model's own and are never changed. Models without these parameters
(hockney, mm1: one latency per message) are unchanged. Without a ``[binding]`` section (profiles
made before the probe) nothing changes.

Rule ``native_call_costs``: a profile with a ``[native]`` section (calibrate's native probe,
``replay.calibration.native``: the same calls made from C, on 2 ranks) prices the calls of such
a trace made from C (a compiled program recorded by the PMPI library, an OTF2 or GOAL import) by
it instead, for the binding probe prices mpi4py's own work on calls where MPI does nothing, not
all that a call through mpi4py costs more (an 8-byte one-way time of about 1 µs in C against
3-5 µs through mpi4py on this project's machines). A Python program recorded by the PMPI
library keeps rule binding_in_bursts (``made_from_python``): its calls are made from Python,
between whose interpreter's work they take longer than in the probe's tight C loops (the
workload suite's library-recorded cells erred 14.2 % on their own network with the native
costs, 12.9 % without; the collectives loop −15.2 % against −6.2 %):

    o_send' = max(0, o_send(C) − 2·o_b_send)     o_recv' = max(0, o_recv(C) − 2·o_b_recv)
    L' = max(one_way(C) − s − r, −s),   s = o_send' + 2·o_b_send,   r = o_recv' + 2·o_b_recv
    o_irecv' = o_irecv(C)   o_wait' = o_wait(C)   o_probe' = o_probe(C)   o_call' = o_call(C)

(o_b·2: the model adds o_b·P to the overheads, and the probe ran on 2 ranks; so a message
between two ranks takes the probe's one-way time). A model's own bounds hold after it
(``within_own_bounds``: LogGOPSim's L ≥ 0). The shared-flag
collectives take the profile's ``[native_shared_flag]`` table where it has one
(``replay.flags.flag_costs``), else ``[shared_flag]`` less the binding's. Values set with
``--set`` are kept, as above.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from replay.profile import time_section

NAME = "binding_in_bursts"
#: the model parameter -> the call whose binding cost it loses
PARAM_CALL = {"o_send": "Send", "o_recv": "Recv", "o_irecv": "Irecv", "o_wait": "Wait",
              "o_probe": "Probe", "o_call": "Iprobe"}
#: the shared-flag collectives, whose own and after lose their binding cost
COLLECTIVES = ("Barrier", "Bcast", "Reduce", "Allreduce")
CALLS = tuple(PARAM_CALL.values()) + COLLECTIVES
#: the manifest's ``origin.format`` of imported traces, none of which went through mpi4py
_IMPORTED = ("otf2", "goal")


#: the ``[native]`` section's keys (calibrate's native probe writes them), seconds
NATIVE_KEYS = ("o_send", "o_recv", "one_way", "o_irecv", "o_wait", "o_probe", "o_call")
NATIVE = "native_call_costs"


def native_costs(profile: Mapping[str, Any] | None, where: str = "profile"
                 ) -> dict[str, float] | None:
    """The ``[native]`` section of a calibration profile (seconds), None where it has none. A
    malformed section (a key missing, unknown or not a time) is a DataError naming ``where``."""
    return time_section(profile, "native", NATIVE_KEYS, where)


def with_native(params: Mapping[str, Any], native: Mapping[str, float],
                model_params: Any = ()) -> dict[str, Any]:
    """``params`` (a model's parameters from a profile, seconds) with the per-call costs of
    rule native_call_costs (formula in the module docstring): the per-call overheads the model
    has (``model_params``, or those ``params`` has), and o_send, o_recv and L where ``params``
    has all three."""
    out = dict(params)
    for name in ("o_irecv", "o_wait", "o_probe", "o_call"):
        if name in out or name in model_params:
            out[name] = native[name]
    if not all(isinstance(out.get(k), (int, float)) for k in ("L", "o_send", "o_recv")):
        return out
    b_s, b_r = (float(out.get(k, 0.0)) for k in ("o_b_send", "o_b_recv"))
    out["o_send"] = max(0.0, native["o_send"] - 2.0 * b_s)
    out["o_recv"] = max(0.0, native["o_recv"] - 2.0 * b_r)
    # the overheads the model gives at 2 ranks (o' + 2·o_b: more than the probe's where o' was
    # floored at 0), so that o_s + L + o_r is the probe's one-way time
    send, recv = out["o_send"] + 2.0 * b_s, out["o_recv"] + 2.0 * b_r
    out["L"] = max(native["one_way"] - send - recv, -send)
    return out


def native_line(native: Mapping[str, float] | None) -> str | None:
    """The replay report's line on rule native_call_costs (None where it did not apply)."""
    if not native:
        return None
    parts = ", ".join(f"{k} {native[k] * 1e6:.2g}" for k in NATIVE_KEYS)
    return (f"native     calls recorded at the MPI library (C or below mpi4py): the profile's "
            f"costs of calls made from C, in us: {parts} (rule {NATIVE})")


def binding_costs(profile: Mapping[str, Any] | None, where: str = "profile"
                  ) -> dict[str, float] | None:
    """The ``[binding]`` section of a calibration profile (seconds per call, the calls it has;
    ``api`` left out), None where it has none. A malformed section is a DataError naming
    ``where``."""
    return time_section(profile, "binding", CALLS, where, required=False, ignored=("api",))


def made_from_python(manifest: Mapping[str, Any]) -> bool:
    """Whether the trace's program is a Python one: recorded by the PMPI library, its calls
    were made through mpi4py, not from C (rule native_call_costs does not apply). The
    manifest's ``program_kind`` says so; a trace of the PMPI library written before it had
    that key, by its program's name (a ``.py`` file). An import (OTF2, GOAL) is C's."""
    kind = manifest.get("program_kind")
    if kind is not None:
        return kind == "python"
    return manifest.get("tracer") == "pmpi" and any(
        str(manifest.get(k) or "").endswith(".py") for k in ("program", "app"))


def below_binding(manifest: Mapping[str, Any]) -> bool:
    """Whether the trace's calls were recorded below mpi4py (PMPI library, OTF2, GOAL): its
    bursts then hold the binding's work (module docstring)."""
    if manifest.get("tracer") == "pmpi":
        return True
    origin = manifest.get("origin")
    return isinstance(origin, Mapping) and origin.get("format") in _IMPORTED


def less_binding(params: Mapping[str, Any], costs: Mapping[str, float]) -> dict[str, Any]:
    """``params`` (a model's parameters from a profile, seconds) with each per-call cost less
    its call's binding cost, at least 0 (formula in the module docstring)."""
    out = dict(params)
    for name, call in PARAM_CALL.items():
        if name in out and call in costs and isinstance(out[name], (int, float)):
            out[name] = max(0.0, float(out[name]) - costs[call])
    before, after = (_earliest_arrival(p) for p in (params, out))
    if before is not None and after is not None and params["L"] >= before:
        # (a profile that breaks the rule on its own values stays an error)
        out["L"] = max(float(params["L"]), after)
    return out


def _earliest_arrival(params: Mapping[str, Any]) -> float | None:
    """-(o_send + 2·o_b_send), the lowest L the LogGP models take with these values; None
    where ``params`` have no numeric L or o_send."""
    vals = [params.get(k, 0.0 if k == "o_b_send" else None) for k in ("L", "o_send", "o_b_send")]
    if not all(isinstance(v, (int, float)) for v in vals):
        return None
    return -(float(vals[1]) + 2.0 * float(vals[2]))


def binding_line(costs: Mapping[str, float] | None) -> str | None:
    """The replay report's line on the rule (None where it did not apply)."""
    if not costs:
        return None
    parts = ", ".join(f"{c} {costs[c] * 1e6:.2g}" for c in CALLS if c in costs)
    # (a C program's calls, as an mpi4py program's recorded by the PMPI library, pay no
    # mpi4py: the profile, measured through mpi4py, does)
    return (f"binding    calls recorded at the MPI library (C or below mpi4py): the profile's "
            f"per-call costs, measured through mpi4py, less mpi4py's own, in us: {parts} "
            f"(rule {NAME})")


def applies(model: Any) -> bool:
    """Whether ``model`` (a NetworkModel) has a per-call cost the rule changes."""
    return model.MODE != "measured" and any(p in model.PARAMS for p in PARAM_CALL)
