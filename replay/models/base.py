"""The contract every network model meets, and the registry the CLI builds its choices from.

A model is a subclass of ``NetworkModel`` decorated with ``@register``; its module docstring (or
class docstring) gives its formula and source. It declares:

- ``NAME``: the ``--model`` name;
- ``PARAMS``: name -> ``Param`` (kind and unit, default, doc, bounds); ``ALIASES``: a name that
  sets several others (``o`` sets ``o_send`` and ``o_recv``);
- ``MODE``: ``"network"`` (messages cost what the formula says; collectives become their
  algorithm's messages) or ``"measured"`` (messages keep the times of the trace);
- ``kernel_params(values, ctx)``: the flat parameter vector of ``replay.kernel`` (``make_params``):
  the kernel applies the LogGPS rules (``replay.kernel``), and a model says what its parameters
  mean in those terms (Hockney: L = l, G = g, no overheads, no rendezvous).

and may override:

- ``message_delay(values, ctx, send_times, horizon, last)``: an extra delay per message (ns),
  e.g. M/M/1 queueing; ``last``: this is the last of ``passes`` (what a model decides on, such
  as refusing a saturated link); the default adds none;
- ``call_costs(values)``: the software overhead of each class of the program's own calls that
  move no message of their own (``replay.stream.CALL_*``: an ``Irecv`` post, a ``Wait``
  completing a send, a ``Probe``, any other call), ns, indexed by class; None (the default):
  those calls cost nothing;
- ``passes(values)``: replays for a fixed point (a delay that depends on the previous pass);
- ``check(values)``: cross-parameter rules (raise ``ParamError``);
- ``from_profile(data, path)``: this model's parameters from a calibration profile
  (``replay.profile``); the default says the profile has none for this model;
- ``run_replay(prep, values, *, scale, cpu_time, algorithms, record, delay_ns)``: replay with a
  simulator of its own instead of the kernel (LogGOPSim's rules), returning the ``Result``
  fields it computed (``replay.models.loggopsim.Replayed``); ``OWN_SIMULATOR = True`` marks
  such a model.

``WHOLE_TRACE = True`` marks a model whose message delays look at every message of the trace
before it replays (M/M/1's utilisations): it cannot replay a trace streamed segment by segment
(``replay.streamed``).

``RETIRED`` maps a parameter name the model no longer has to what replaces it; setting one is
an error whose message says so.

``ctx`` (``replay.engine``) gives what a model may look at: ``nranks``, per message
``m_bytes``, ``m_src``, ``m_dst``, ``host_of_rank`` and ``default_tcomp()``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from hindsight.errors import DataError, UsageError


@dataclass(frozen=True)
class Param:
    kind: str                 # a key of replay.units.PARSERS, or "choice"
    default: Any
    doc: str
    minimum: float = 0.0      # values below are impossible
    strict: bool = False      # the minimum itself is impossible too (e.g. a bandwidth of 0)
    allow_inf: bool = False
    choices: tuple[str, ...] = ()


class ParamError(UsageError, ValueError):
    """A bad model parameter or parameter file; the message names the parameter or the file."""


class ProfileParamError(DataError, ParamError):
    """A profile file whose content the model cannot use (unknown or impossible parameters, a
    missing section, not a profile): a data error, exit 1 (the file is wrong, not the command
    line), still a ParamError for callers that catch those. The message names the file."""


class NetworkModel:
    """Base class of the network models (see the module docstring for the contract)."""

    NAME: ClassVar[str] = ""
    MODE: ClassVar[str] = "network"
    PARAMS: ClassVar[dict[str, Param]] = {}
    ALIASES: ClassVar[dict[str, tuple[str, ...]]] = {}
    OWN_SIMULATOR: ClassVar[bool] = False
    WHOLE_TRACE: ClassVar[bool] = False
    RETIRED: ClassVar[dict[str, str]] = {}

    def kernel_params(self, values: dict[str, Any], ctx: Any) -> np.ndarray:
        raise NotImplementedError(f"model {self.NAME} does not define kernel_params")

    def message_delay(self, values: dict[str, Any], ctx: Any, send_times: np.ndarray | None,
                      horizon: float, last: bool = True) -> tuple[np.ndarray, dict[str, Any]]:
        """Extra delay per message (ns) and facts for ``Result.info``; none by default."""
        return np.zeros(max(len(ctx.m_bytes), 1)), {}

    def passes(self, values: dict[str, Any]) -> int:
        return 1

    def call_costs(self, values: dict[str, Any]) -> np.ndarray | None:
        """Per ``replay.stream.CALL_*`` class the call's own overhead (ns); None: none."""
        return None

    def check(self, values: dict[str, Any]) -> None:
        """Rules between parameters; each parameter's own bounds are in its ``Param``."""

    def from_profile(self, data: dict[str, Any], path: Path) -> dict[str, Any]:
        raise ParamError(f"profile {path}: a calibration profile has no parameters for model "
                         f"{self.NAME}")

    def within_own_bounds(self, values: dict[str, Any]) -> dict[str, Any]:
        """A profile's values (``from_profile``'s, after the rules that rewrite them for a
        trace: ``replay.binding``) within what this model takes of a profile. Default: as
        they are."""
        return values

    def run_replay(self, prep: Any, values: dict[str, Any], *, scale: np.ndarray,
                   cpu_time: bool = False, algorithms: Any = None, record: bool = True,
                   delay_ns: np.ndarray | None = None) -> Any:
        raise NotImplementedError(f"model {self.NAME} replays with the kernel")

    def __repr__(self) -> str:
        return f"<network model {self.NAME}>"


#: name -> model instance, in registration order (the order ``--model`` lists them)
REGISTRY: dict[str, NetworkModel] = {}


def register(cls: type[NetworkModel]) -> type[NetworkModel]:
    """Class decorator: add one instance of ``cls`` to ``REGISTRY`` under ``cls.NAME``."""
    if not cls.NAME or cls.NAME in REGISTRY:
        raise ValueError(f"model {cls.__name__}: NAME {cls.NAME!r} is empty or taken")
    if cls.MODE not in ("network", "measured"):
        raise ValueError(f"model {cls.NAME}: MODE must be 'network' or 'measured'")
    REGISTRY[cls.NAME] = cls()
    return cls


def profile_section(data: dict[str, Any], path: Path, name: str, keys: tuple[str, ...],
                    allowed: tuple[str, ...] = ()) -> dict[str, Any]:
    """Section ``name`` of a calibration profile, with ``keys`` present and numeric, and no key
    but ``keys`` and ``allowed`` (what `calibrate` writes there and the models read: a key
    added by hand, misspelt, ``o_sned``, or one no model reads from a profile, ``o``, would be
    dropped without a word, the prediction made without the what-if it was meant to be)."""
    sec = data.get(name)
    if not isinstance(sec, dict):
        raise ParamError(f"profile {path}: has no [{name}] section")
    known = sorted({*keys, *allowed})
    for k in sec:
        if k not in known:
            import difflib

            owner = REGISTRY.get(name)
            if owner is not None and k in set(owner.PARAMS) | set(owner.ALIASES):
                hint = f"a parameter no profile sets: --set {k}=VALUE sets it for a replay"
            else:
                near = difflib.get_close_matches(str(k), known, n=1)
                hint = (f"did you mean '{near[0]}'?" if near
                        else f"its keys: {', '.join(known)}")
            raise ParamError(f"profile {path}: [{name}] {k}: not a key of a calibrated "
                             f"profile ({hint})")
    missing = [k for k in keys if k not in sec]
    if missing:
        raise ParamError(f"profile {path}: [{name}] lacks {', '.join(missing)}")
    for k in keys:
        if isinstance(sec[k], bool) or not isinstance(sec[k], (int, float)):
            raise ParamError(f"profile {path}: [{name}] {k} = {sec[k]!r} is not a number")
    return sec


#: Rule ``reduction_combine``'s γ, a parameter of every network model the kernel runs
#: (``measured`` keeps each call's measured time, combining included): a member of a
#: reduction (Reduce, Allreduce, Reduce_scatter, Scan, their non-blocking forms) that receives
#: k bytes to combine with its own computes γ·k once that step's waits are done (Thakur,
#: Rabenseifner and Gropp 2005: a reduction step of n bytes costs α + nβ + nγ). ``calibrate``
#: measures it (the profile's ``[reduction]``); 0 without a profile.
GAMMA = Param("time_per_byte", 0.0, "rule reduction_combine: a reduction's member combines the "
              "k bytes a step received in γ·k (calibrate: the profile's [reduction])")


def profile_gamma(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """``{"gamma": γ}`` from a calibration profile's ``[reduction]`` section (calibrate's
    reduction probe), ``{}`` from a profile without one."""
    if "reduction" not in data:
        return {}
    return {"gamma": float(profile_section(data, path, "reduction", ("gamma",))["gamma"])}
