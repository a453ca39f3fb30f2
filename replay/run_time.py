"""A program's predicted run time, as ``collect --untraced`` measures it.

The models replay a trace from its first traced event to its last. A program's run time, the
untraced run's ``wall_ns``, runs from the start barrier to the program's end, so it also holds
the compute before the first MPI call and after the last, which no model changes: the
prediction adds them as traced (``validate`` compares with untraced runs the same way).
"""

from __future__ import annotations

from typing import Any


def run_time(res: Any, manifest: dict[str, Any]) -> dict[str, float] | None:
    """``predicted_s`` = the replay's makespan + ``lead_in_s`` (start barrier to the first
    traced event) + ``tail_s`` (last traced event to the program's end), both as the traced
    run had them, with ``traced_wall_s``; None where the manifest has no ``wall_ns``, the
    replay stopped at a partial trace's cut, or lead-in and tail together are under 0.5 % of
    the wall time. ``res``: a ``replay.Result``."""
    wall, epoch = manifest.get("wall_ns"), manifest.get("makespan_ns")
    if not wall or not epoch or manifest.get("partial_cut"):
        return None     # (a replay up to a cut: the rest of the run is not a tail)
    lead, tail = epoch - res.measured_makespan_ns, max(wall - epoch, 0)
    if lead + tail <= 0.005 * wall:
        return None
    return {"predicted_s": (res.makespan_ns + lead + tail) / 1e9, "lead_in_s": lead / 1e9,
            "tail_s": tail / 1e9, "traced_wall_s": wall / 1e9}
