"""The machine's conditions while something is measured: cores, load, steal, context switches.

A leaf module (standard library only), so that a traced rank can read it without loading anything
that would change the program's speed. Everything comes from Linux's /proc; on a system without
it, the readings are None and the judgement says it could not tell.

    before = conditions.snapshot()
    ...   # the measurement
    cond = conditions.between(before, conditions.snapshot())
    problems = conditions.load_problems(cond)

`between` gives, over the measured interval: the 1-minute load average at its start and end,
the share of CPU time the hypervisor stole (`steal_fraction`), and the share that was busy
(`busy_fraction`). A process's own involuntary context switches (`ctx_switches`) tell that
the kernel preempted it: something else wanted its core.
"""

from __future__ import annotations

import os

from hindsight.system import usable_cores
import time
from typing import Any

#: Steal above this share of the machine's CPU time: the VM's host took cores away.
MAX_STEAL_FRACTION = 0.05
#: A process that waited for a core (runnable, not running) more than this share of the measured
#: interval was preempted by other work: its timings include that work's.
MAX_RUN_QUEUE_WAIT = 0.05


def _cpu_ticks() -> list[int] | None:
    """The aggregate `cpu` line of /proc/stat: user nice system idle iowait irq softirq steal."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    return [int(x) for x in fields[1:9]]


def snapshot() -> dict[str, Any]:
    """One reading: monotonic time, load averages, /proc/stat's CPU ticks."""
    try:
        load = list(os.getloadavg())
    except OSError:
        load = None
    return {"time_ns": time.monotonic_ns(), "loadavg": load, "cpu_ticks": _cpu_ticks()}


def between(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The conditions over the interval between two snapshots (JSON-ready)."""
    out: dict[str, Any] = {
        "seconds": (after["time_ns"] - before["time_ns"]) / 1e9,
        "loadavg_1m_before": before["loadavg"][0] if before.get("loadavg") else None,
        "loadavg_1m_after": after["loadavg"][0] if after.get("loadavg") else None,
        "cores": usable_cores(),
        "steal_fraction": None,
        "busy_fraction": None,
    }
    a, b = before.get("cpu_ticks"), after.get("cpu_ticks")
    if a and b:
        d = [y - x for x, y in zip(a, b)]
        total = sum(d)
        if total > 0:
            out["steal_fraction"] = round(d[7] / total, 4)
            out["busy_fraction"] = round(1.0 - (d[3] + d[4]) / total, 4)
    return out


def ctx_switches() -> list[int] | None:
    """This process's [voluntary, involuntary] context switches so far."""
    vol = invol = None
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("voluntary_ctxt_switches:"):
                    vol = int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches:"):
                    invol = int(line.split()[1])
    except OSError:
        return None
    return None if vol is None or invol is None else [vol, invol]


def run_queue_wait_ns() -> int | None:
    """Nanoseconds this process has so far spent runnable but waiting for a core (the second
    field of /proc/self/schedstat): time the kernel gave its core to something else."""
    try:
        with open("/proc/self/schedstat") as f:
            return int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None


def preemption_problems(waits: dict[Any, float | None]) -> list[str]:
    """Why processes (``{name: share of the interval spent waiting for a core}``, from
    `run_queue_wait_ns` differences) did not have their cores to themselves; empty if they did
    or nothing could be read. Rule: a share above MAX_RUN_QUEUE_WAIT."""
    return [f"{name} waited for a core {100 * w:.1f} % of the time" for name, w in waits.items()
            if w is not None and w > MAX_RUN_QUEUE_WAIT]


def load_problems(cond: dict[str, Any] | None) -> list[str]:
    """Why a measurement taken under `cond` (from `between`) should not be trusted as a quiet
    machine's, as the machine as a whole tells; empty when nothing says so. The rule: the
    hypervisor took more than MAX_STEAL_FRACTION of the CPU time during it. The 1-minute load
    average is recorded but not judged: it trails by a minute and counts the measurement's own
    processes and the runs just before it (back-to-back runs of 2 ranks on 2 cores keep it near
    2 with nothing else running). Whether other work took the measured processes' cores is
    told by their own waits for a core (`run_queue_wait_ns`, `preemption_problems`)."""
    if not cond:
        return []
    problems = []
    steal = cond.get("steal_fraction")
    if steal is not None and steal > MAX_STEAL_FRACTION:
        problems.append(f"{100 * steal:.1f} % of the CPU time stolen by the hypervisor")
    return problems


def of_run(before: dict[str, Any] | None, after: dict[str, Any] | None,
           per_rank: list[dict[str, Any]], oversubscribed: bool) -> dict[str, Any]:
    """A run's manifest `conditions`: the machine's between two snapshots (rank 0's, at the
    start barrier and the end of the program; left out unless both were taken), each rank's
    `ctx_switches` and `run_queue_wait` (``per_rank``: dicts with those keys), and `problems`:
    `load_problems`, plus `preemption_problems` of the ranks unless the run is oversubscribed
    (its ranks wait for cores by construction, and the manifest says so)."""
    cond = between(before, after) if before and after else {}
    cond["rank_ctx_switches"] = [r.get("ctx_switches") for r in per_rank]
    cond["rank_run_queue_wait"] = [r.get("run_queue_wait") for r in per_rank]
    cond["problems"] = load_problems(cond)
    if not oversubscribed:
        cond["problems"] += preemption_problems(
            {f"rank {r}": w for r, w in enumerate(cond["rank_run_queue_wait"])})
    return cond


def describe(cond: dict[str, Any] | None) -> str:
    """One line for the conditions `between` measured: load, steal and busy share."""
    if not cond:
        return "conditions unknown"
    la = f"load {cond['loadavg_1m_before']:.2f}->{cond['loadavg_1m_after']:.2f}" \
        if cond.get("loadavg_1m_before") is not None else "load ?"
    steal = f"steal {100 * cond['steal_fraction']:.1f} %" \
        if cond.get("steal_fraction") is not None else "steal ?"
    busy = f"busy {100 * cond['busy_fraction']:.0f} %" \
        if cond.get("busy_fraction") is not None else "busy ?"
    return f"{la} on {cond.get('cores')} cores, {steal}, {busy} over {cond['seconds']:.0f} s"
