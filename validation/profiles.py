"""The network profile of each network of a validation run: produced once, checked, reused; and
a replay model's parameters from it.

``DIR/profiles/<network>.toml`` is the spec's own profile (copied) or one `hindsight calibrate`
writes; a noisy one stops the run unless the spec accepts it (``ensure_profile``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

from hindsight.system import write_text_atomic
from replay.profile import read_any
from validation.spec import CALIBRATE_API, SpecError

_ACCEPT_HINT = "(accept_noisy_profiles = true in the spec uses it anyway)"


def read_profile(path: Path) -> dict[str, dict[str, Any]]:
    """A TOML profile ([loggps], [hockney], [mm1], [measured_on] sections) or a JSON one
    ({"models": {...}}) as model -> params."""
    kind, data = read_any(path)
    if kind == "json":
        return dict(data.get("models", {data.get("model", "loggps"): data.get("params", data)}))
    return data


def _write_flat_profile(path: Path, sections: dict[str, dict[str, Any]]) -> None:
    """A JSON parameter file's model sections as a TOML profile without the ``format`` tag (not a
    calibration profile: `replay.profile.write_profile` checks for one and would refuse it)."""
    import tomli_w

    write_text_atomic(path, tomli_w.dumps(sections))


def ensure_profile(out: Path, net_name: str, net: dict[str, Any], log: Callable[[str], None],
                   force: bool = False) -> Path:
    """The profile of one network, produced once per validation run and reused: the spec's
    ``profile`` if given (copied), else `hindsight calibrate` on the network's transport (or
    testbed). ``calibrate = "pickle"`` times mpi4py's pickle API the way the tracer records it
    (``--api pickle``: the path the applications' messages take), ``"buffer"`` the buffer API.

    A noisy profile (replay.calibration.quality.profile_problems: its fit misses its own
    measurements, or it was taken under load) is not used silently: one it calibrated is
    calibrated once more, and if that is noisy too, or the spec's own profile is, this stops
    (SpecError) unless the spec says ``accept_noisy_profiles = true`` (then a warning is logged)."""
    dest = out / "profiles" / f"{net_name}.toml"
    accept = bool(net.get("accept_noisy_profiles"))
    if dest.is_file() and not force:
        problems = _profile_problems(dest)
        if not problems:
            return dest
        if accept:
            log(f"warning: {_noisy(dest, net_name, problems)}")
            return dest
        # left by a run that stopped on it: produce it again
    dest.parent.mkdir(parents=True, exist_ok=True)
    if net.get("profile"):
        src = Path(net["profile"])
        problems = _profile_problems(src)
        if problems and not accept:
            raise SpecError(f"{_noisy(src, net_name, problems)} {_ACCEPT_HINT}")
        if problems:
            log(f"warning: {_noisy(src, net_name, problems)}")
        if src.suffix == ".toml":
            # Copied as is, the calibration's own text and comments kept.
            write_text_atomic(dest, src.read_text().rstrip("\n") + "\n\n[validation_source]\n"
                          f"profile = {json.dumps(str(src))}\n")
        else:
            _write_flat_profile(dest, read_profile(src) | {"validation_source": {"profile": str(src)}})
        return dest
    api = CALIBRATE_API[net.get("calibrate", "pickle")]
    log(f"calibrating network {net_name} with `hindsight calibrate --api {api}`")
    cmd = [sys.executable, "-m", "hindsight.cli", "calibrate", "--transport", net["transport"],
           "--api", api, "--out", str(dest)]
    if net.get("calibrate_sizes"):
        cmd += ["--sizes", str(net["calibrate_sizes"])]
    if net.get("testbed_name"):
        cmd += ["--testbed", net["testbed_name"]]
    # --accept-noisy: a noisy profile is written (marked) and judged here, so that it is kept
    # for inspection and the spec decides. --force: the profile is this run's own, replaced by
    # the second attempt or when one left by an earlier run was noisy.
    cmd += ["--accept-noisy", "--force"]
    for attempt in (1, 2):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0 or not dest.is_file():
            said = (r.stderr or r.stdout).strip()[-300:]
            raise SpecError(f"calibration of network {net_name} failed: "
                            f"{said.removeprefix('Error: ')}")
        problems = _profile_problems(dest)
        if not problems:
            return dest
        if attempt == 1:
            log(f"profile of network {net_name} is noisy ({'; '.join(problems)}): calibrating "
                "once more")
    if accept:
        log(f"warning: {_noisy(dest, net_name, problems)}")
        return dest
    raise SpecError(f"{_noisy(dest, net_name, problems, ' after 2 calibrations')} "
                    f"{_ACCEPT_HINT}")


def check_profile(path: Path, net_name: str, net: dict[str, Any], models: list[str]) -> None:
    """Every replay model of the spec reads its parameters from the network's profile at
    ``path`` now, before any cell runs: a key no calibration writes (a misspelling) or a value
    no model takes would otherwise stop the run only once every cell had run. The error names
    the spec's own profile file where the network gives one (``path`` is the run's copy)."""
    from replay import models as M

    shown = net.get("profile") or path
    try:
        data = read_profile(path)
        for model in models:
            # (as a trace of each recorder reads it: the native and binding sections too)
            for below in (False, "C", "Python"):
                replay_params(model, data, path, below)
    except (M.ParamError, ValueError) as exc:
        raise SpecError(f"network {net_name}: " + str(exc).replace(str(path), str(shown))) \
            from None


def _noisy(path: Path, net_name: str, problems: list[str], when: str = "") -> str:
    return f"profile {path} of network {net_name} is noisy{when}: {'; '.join(problems)}"


def _profile_problems(path: Path) -> list[str]:
    """replay.calibration.quality.profile_problems of a profile file (an unreadable one is left
    to the readers that report it)."""
    from replay.calibration.quality import profile_problems
    try:
        return profile_problems(read_profile(path))
    except (OSError, ValueError):
        return []


def replay_kwargs(model: str, profile: dict[str, Any], path: Path | None,
                  manifest: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """What ``replay.run`` takes from a profile for one trace (its ``manifest``) under ``model``,
    as `hindsight replay --profile` takes it: ``profile`` (the model's parameters, rule
    binding_in_bursts), ``flags`` (rule shared_flag_meeting), ``tracer_cost`` (rule
    python_tracer_in_bursts) and ``resume`` (rule resume_after_wait); and the trace's
    ``replay.recorder_rules.TraceRules``."""
    from replay import models as M
    from replay.recorder_rules import trace_rules_of

    rules = trace_rules_of(profile, manifest, str(path or "profile"))
    mod = M.get_model(model)
    return ({"profile": replay_params(model, profile, path, rules.below),
             "flags": rules.flags_for(mod), "tracer_cost": rules.tracer_ns(mod),
             "resume": rules.resume_for(mod)}, rules)


def replay_params(model: str, profile: dict[str, dict[str, Any]],
                  path: Path | None = None, below_binding: bool | str = False
                  ) -> dict[str, Any]:
    """A replay model's parameters from a profile. A `hindsight calibrate` profile
    (``format = "hindsight-profile/1"``) is mapped exactly as `hindsight replay --profile` maps it
    (replay.models.load_profile, with rule native_call_costs or binding_in_bursts for a trace
    recorded ``below_binding``: "C" or "Python", ``replay.recorder_rules.TraceRules.below``); a flat profile (no format tag) gives its section (loggp reads the loggps
    section without S, loggopsim all of it; mm1 also uses C and tau between ranks of one host)."""
    if model == "measured":
        return {}
    if profile.get("format") is not None and path is not None:
        from replay import models as M
        return M.load_profile(path, M.get_model(model), below_binding)
    # loggp and loggopsim take LogGPS's section (loggp without S)
    sec = dict(profile.get("loggps" if model in ("loggp", "loggopsim") else model, {}))
    if model in ("loggp", "loggopsim"):   # what the model has of LogGPS's section (loggp: no S)
        from replay import models as M
        known = M.get_model(model).PARAMS
        sec = {k: v for k, v in sec.items() if k in known or k in ("o", "o_b", "O", "o_a")}
    if model == "mm1" and "C" in sec:
        sec.setdefault("C_host", sec["C"])
        sec.setdefault("L_host", sec.get("tau", 0.0))
    return sec
