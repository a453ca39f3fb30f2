"""What a validation directory says about how its results were obtained: when, on which machine,
from which hindsight revision, under what load, and how well each network profile fits its own
measurements. The report's header; everything is read from the directory (spec.toml, the runs'
manifests, profiles/), and what is missing is reported as unknown, never guessed."""

from __future__ import annotations

import datetime as dt
import json
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hindsight.system import git_revision
from validation.profiles import read_profile


@dataclass
class ProfileFacts:
    """One network profile of DIR/profiles/: where it came from and how well it fits."""
    network: str
    path: str
    source: str                    # "calibrated <date>" or "copied from <path>"
    quality: str                   # "ok", "noisy: <why>", or "not judged (...)"
    r2_loggp: float = math.nan
    r2_hockney: float = math.nan
    residual_median_pct: float = math.nan
    residual_worst_pct: float = math.nan
    residual_worst_size: int | None = None
    params: str = ""


@dataclass
class RunFacts:
    """The runs' manifests summarised: dates, machine, revision, load."""
    traced: int = 0
    untraced: int = 0
    first_start: float | None = None
    last_end: float | None = None
    revisions: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    cores: list[int] = field(default_factory=list)
    mpi: list[str] = field(default_factory=list)
    loadavg: list[float] = field(default_factory=list)
    steal_max: float | None = None
    wait_max: float | None = None
    with_problems: int = 0
    oversubscribed: int = 0


def _manifests(vdir: Path, cells: list[dict]) -> list[tuple[bool, dict]]:
    """(traced?, manifest) of every run the cells name; missing or unreadable ones are left out
    (a report of a copied errors.csv and cells/ has none)."""
    out = []
    for c in cells:
        for traced, key in ((True, "traces"), (False, "untraced")):
            for rel in c.get(key) or []:
                try:
                    out.append((traced, json.loads((vdir / rel / "manifest.json").read_text())))
                except (OSError, ValueError):
                    continue
    return out


def _add(values: list, v: Any) -> None:
    if v is not None and v not in values:
        values.append(v)


def run_facts(vdir: Path, cells: list[dict]) -> RunFacts:
    f = RunFacts()
    for traced, m in _manifests(vdir, cells):
        if traced:
            f.traced += 1
        else:
            f.untraced += 1
        if isinstance(m.get("start_unix"), (int, float)):
            f.first_start = min(filter(None, (f.first_start, m["start_unix"])))
        if isinstance(m.get("end_unix"), (int, float)):
            f.last_end = max(filter(None, (f.last_end, m["end_unix"])))
        _add(f.revisions, m.get("git_revision"))
        for h in m.get("hosts") or {}:
            _add(f.hosts, h)
        _add(f.cores, m.get("cores"))
        _add(f.mpi, " ".join(str(m.get("mpi_library") or "").split()) or None)
        f.oversubscribed += bool(m.get("oversubscribed"))
        cond = m.get("conditions") or {}
        if isinstance(cond.get("loadavg_1m_before"), (int, float)):
            f.loadavg.append(cond["loadavg_1m_before"])
        if isinstance(cond.get("steal_fraction"), (int, float)):
            f.steal_max = max(cond["steal_fraction"], f.steal_max or 0.0)
        waits = [w for w in cond.get("rank_run_queue_wait") or [] if isinstance(w, (int, float))]
        if waits:
            f.wait_max = max(max(waits), f.wait_max or 0.0)
        f.with_problems += bool(cond.get("problems"))
    return f


def profile_facts(vdir: Path) -> list[ProfileFacts]:
    """Each DIR/profiles/*.toml: its source, its fit (R² of the LogGP and Hockney lines, the
    median and worst relative residual over the judged sizes) and its quality as `validate`
    judged it (replay.calibration.quality.profile_problems)."""
    from replay.calibration.quality import profile_problems

    out = []
    for path in sorted((vdir / "profiles").glob("*.toml")):
        rel = str(path.relative_to(vdir))
        try:
            prof = read_profile(path)
        except (OSError, ValueError) as exc:
            out.append(ProfileFacts(path.stem, rel, "unreadable", f"unreadable: {exc}"))
            continue
        src = prof.get("validation_source") or {}
        on = prof.get("measured_on") or {}
        source = (f"copied from {src['profile']}" if src.get("profile") else
                  f"calibrated {on.get('date', 'at an unknown date')}"
                  + (f", {on.get('api')} API" if on.get("api") else ""))
        if "format" not in prof:
            quality = "not judged (a flat profile: no fit recorded)"
        else:
            problems = profile_problems(prof)
            quality = "noisy: " + "; ".join(problems) if problems else "ok"
        fit = prof.get("fit") or {}
        check = fit.get("check") or {}
        lg = prof.get("loggps") or {}
        params = ", ".join(f"{k} {_fmt_param(k, lg[k])}" for k in ("L", "o_send", "o_recv", "G", "S")
                           if isinstance(lg.get(k), (int, float)))
        pf = ProfileFacts(path.stem, rel, source, quality, params=params)
        pf.r2_loggp = _num(fit.get("r2_loggp"))
        pf.r2_hockney = _num(fit.get("r2_hockney"))
        pf.residual_median_pct = _num(check.get("residual_median")) * 100
        pf.residual_worst_pct = _num(check.get("residual_worst")) * 100
        pf.residual_worst_size = check.get("residual_worst_size")
        out.append(pf)
    return out


def _num(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) else math.nan


def _fmt_param(name: str, v: float) -> str:
    if name == "S":
        return f"{v:.0f} B"
    if name == "G":
        return f"{v * 1e9:.3g} ns/B"
    return f"{v * 1e6:.3g} µs"


def spec_facts(vdir: Path) -> dict[str, Any]:
    """The spec the validation ran (DIR/spec.toml), {} when it is missing or unreadable."""
    try:
        return tomllib.loads((vdir / "spec.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def _date(t: float | None) -> str:
    if t is None:
        return "unknown"
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def header_items(vdir: Path, cells: list[dict], now: dt.datetime | None = None
                 ) -> list[tuple[str, str]]:
    """(label, text) lines of the report's header, in reading order."""
    spec = spec_facts(vdir)
    runs = run_facts(vdir, cells)
    now = now or dt.datetime.now(dt.UTC)
    items = [("Report", f"{now.strftime('%Y-%m-%d %H:%M UTC')} from {vdir}"
              + (f", hindsight {rev[:12]}" if (rev := git_revision()) else ""))]
    if runs.first_start is not None:
        mins = ((runs.last_end or runs.first_start) - runs.first_start) / 60
        items.append(("Runs", (f"{_date(runs.first_start)} to {_date(runs.last_end)} "
                      f"({mins:.0f} min): {runs.traced} traced and {runs.untraced} untraced runs")))
    else:
        items.append(("Runs", ("no run manifests in this directory (dates, machine and load "
                      "unknown)")))
    if spec:
        nets = ", ".join(spec.get("networks") or {}) or "?"
        items.append(("Spec", (f"{spec.get('name', '?')} (DIR/spec.toml): "
                      f"{spec.get('repetitions', '?')} repetitions per cell, networks {nets}, "
                      f"ground truth {spec.get('ground_truth', 'untraced')} runs, actual time = "
                      f"{'median' if spec.get('actual') == 'median' else 'mean'} of the runs, "
                      f"replayed: {_replayed(spec.get('replay_rep', 0))}")))
    else:
        items.append(("Spec", "no readable spec.toml in this directory"))
    items.append(("hindsight revision of the runs",
                  (", ".join(r[:12] for r in runs.revisions) or "unknown")
                  + ("" if len(runs.revisions) < 2 else " (several: the runs mix revisions)")))
    machine = (f"{', '.join(runs.hosts) or 'unknown host'}; "
               f"{'/'.join(map(str, runs.cores)) or '?'} usable cores; "
               f"{'; '.join(runs.mpi) or 'MPI library unknown'}")
    if runs.oversubscribed:
        machine += f"; {runs.oversubscribed} runs oversubscribed (more ranks than cores)"
    items.append(("Machine", machine))
    if runs.traced + runs.untraced:
        la = (f"load average {min(runs.loadavg):.2f}-{max(runs.loadavg):.2f} when runs began"
              if runs.loadavg else "load average not recorded")
        steal = (f"hypervisor steal up to {100 * runs.steal_max:.1f} %"
                 if runs.steal_max is not None else "steal not recorded")
        wait = (f"a rank waited for a core up to {100 * runs.wait_max:.1f} % of its run"
                if runs.wait_max is not None else "ranks' waits not recorded")
        items.append(("Load", (f"{la}; {steal}; {wait}; {runs.with_problems} of "
                      f"{runs.traced + runs.untraced} runs under load (a rank waited for a "
                      "core, or steal, above 5 %)")))
    return items


def _replayed(rep: Any) -> str:
    if rep == "all":
        return "every run from its own trace"
    if rep == "median":
        return "the median run's trace"
    return f"repetition {rep}'s trace"
