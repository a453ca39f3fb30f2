"""What a calibration profile's rules make of one trace, by who recorded it.

A profile's per-call costs were measured through mpi4py, without a tracer. Two rules correct a
replay for where the trace's recorder put the time around its calls:

* ``binding_in_bursts`` (``replay.binding``): recorded below mpi4py (the PMPI library, OTF2,
  GOAL), the bursts hold mpi4py's own work, so the profile's per-call costs lose it;
* ``python_tracer_in_bursts`` (``replay.tracer_cost``): recorded by the Python tracer, the bursts
  hold the tracer's own work, so the bursts lose it.

`trace_rules` decides both once per trace and profile, and the shared-flag costs (rule
shared_flag_meeting) less the binding's where it applies; every command that replays a trace
with a profile (replay, sweep, export, `trace info --noise`, validate) takes the model's
binding flag, the shared-flag costs and the burst correction from its answer, and reports what
it applied.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from replay.binding import (applies, below_binding, binding_costs, binding_line,
                            made_from_python, native_costs, native_line)
from replay.profile import toml_of
from replay.tracer_cost import by_python_tracer, per_kind_ns, tracer_costs, tracer_line

if TYPE_CHECKING:
    from replay.flags import FlagCosts
    from replay.resume import Resume


def resume_line(change: Mapping[str, float] | None) -> str | None:
    """The report's line on rule resume_after_wait (None: not applied)."""
    if not change:
        return None
    return (f"resume     bursts after long waits: {change['removed']:.6f} s taken off as traced, "
            f"{change['added']:.6f} s put back as replayed (rule resume_after_wait)")


@dataclass(frozen=True)
class TraceRules:
    """The recorder-dependent rules of one trace under one profile: ``binding`` (seconds per
    call, rule binding_in_bursts) and ``tracer`` (seconds per call, rule
    python_tracer_in_bursts), each None where it does not apply; ``profile`` (the TOML
    document, None for none or a JSON parameter file) and ``where`` (how errors name it), for
    the shared-flag costs."""

    binding: dict[str, float] | None = None
    tracer: dict[str, float] | None = None
    #: the ``[native]`` costs for a trace recorded below mpi4py whose calls were made from C
    #: (rule native_call_costs)
    native: dict[str, float] | None = None
    profile: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)
    where: str = "profile"
    #: recorded below mpi4py, but a Python program's: its calls were made through mpi4py
    from_python: bool = False

    @property
    def below(self) -> bool | str:
        """load_profile's ``below_binding``: False where the profile's per-call costs stand as
        they are; "Python" where they lose mpi4py's own (rule binding_in_bursts); "C" where the
        profile's ``[native]`` costs replace them, if it has them (rule native_call_costs)."""
        if not (self.binding or self.native):
            return False
        return "Python" if self.from_python else "C"

    def tracer_ns(self, mod: Any) -> np.ndarray | None:
        """``engine.run``'s ``tracer_cost`` for model ``mod``: per kernel kind, ns; None where
        the rule does not apply (no section, another recorder, a model whose bursts the kernel
        does not replay: measured keeps the measured ones, loggopsim has its own simulator)."""
        if not self.tracer or mod.MODE == "measured" or mod.OWN_SIMULATOR:
            return None
        return per_kind_ns(self.tracer)

    def flags_for(self, mod: Any) -> FlagCosts | None:
        """``engine.run``'s ``flags`` for model ``mod``: the profile's ``[shared_flag]`` costs
        (less the binding's for a trace recorded below mpi4py), None where the profile has none
        or the kernel does not run the model (measured, loggopsim). Read when asked, so that a
        model that takes none never reads the table."""
        if not self.profile or mod.MODE == "measured" or mod.OWN_SIMULATOR:
            return None
        from replay.flags import flag_costs      # (numba: not on a command's --help path)
        return flag_costs(self.profile, self.where, self.below)

    def resume_for(self, mod: Any, trace_profile: Mapping[str, Any] | None = None
                   ) -> Resume | None:
        """``engine.run``'s ``resume`` for model ``mod``: rule resume_after_wait under the
        profile's ``[resume]`` section (``trace_profile``: the traced network's, validate's and
        ``--trace-profile``), None where it has none or the kernel does not run the model."""
        if not self.profile or mod.MODE == "measured" or mod.OWN_SIMULATOR:
            return None
        from replay.resume import resume_rule    # (numba: not on a command's --help path)
        return resume_rule(self.profile, trace_profile, self.where)

    def json(self, mod: Any, info: Mapping[str, Any]) -> dict[str, Any]:
        """The fields `replay --json` and validate's cells add: the binding costs taken off,
        the bursts' change by the tracer's costs."""
        out: dict[str, Any] = {}
        if self.native and applies(mod):
            out["native_call_costs_s"] = self.native
        elif self.binding and applies(mod):
            out["binding_in_bursts_s"] = self.binding
        for key in ("python_tracer_in_bursts_s", "resume_after_wait_s"):
            if key in info:
                out[key] = info[key]
        return out

    def lines(self, mod: Any, info: Mapping[str, Any]) -> list[str]:
        """The replay report's lines on both rules (none where neither applied)."""
        out = [(native_line(self.native) or binding_line(self.binding)) if applies(mod)
               else None,
               tracer_line(info.get("python_tracer_in_bursts_s"), self.tracer),
               resume_line(info.get("resume_after_wait_s"))]
        if self.profile and "resume" in self.profile and mod.OWN_SIMULATOR:
            out.append(f"resume     rule resume_after_wait not applied: --model {mod.NAME} "
                       "replays the bursts as recorded")
        if self.profile and "reduction" in self.profile and mod.OWN_SIMULATOR:
            out.append(f"reduce     rule reduction_combine not applied: --model {mod.NAME} "
                       "has no combining time (LogGOPSim's rules)")
        if self.tracer and mod.OWN_SIMULATOR:
            out.append(f"tracer     recorded by the Python tracer: not taken off the bursts, "
                       f"--model {mod.NAME} replays them as recorded")
        return [line for line in out if line]


def trace_rules(path: Any, manifest: Mapping[str, Any], where: str = "--profile"
                ) -> TraceRules:
    """The rules of the trace of ``manifest`` under the profile file ``path`` (None: none);
    errors are a DataError naming ``where``."""
    return trace_rules_of(toml_of(path, where), manifest, f"{where} {path}")


def trace_rules_of(profile: Mapping[str, Any] | None, manifest: Mapping[str, Any],
                   where: str = "profile") -> TraceRules:
    """`trace_rules` from a profile already read (a dict, validate's; None: none)."""
    below = below_binding(manifest)
    python = below and made_from_python(manifest)
    return TraceRules((binding_costs(profile, where) or None) if below else None,
                      tracer_costs(profile, where) if by_python_tracer(manifest) else None,
                      (native_costs(profile, where) or None) if below and not python else None,
                      profile, where, python)
