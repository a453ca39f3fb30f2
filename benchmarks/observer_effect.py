"""Does tracing change the program's speed? Untraced and traced runs of each program, alternated.

    python benchmarks/observer_effect.py [-n 2] [--pairs 5] [--programs a,b] [--json FILE]

For every program (the eight workloads in workloads/ at their fine and coarse settings, and the
three applications with their default paradigm and input, except a larger graph for components)
this runs, after one discarded warm-up pair, `--pairs` pairs of

    untraced:  mpiexec -n P python PROG ARGS                  (apps: python -m apps.X)
    traced:    mpiexec -n P python -m instrument.run --trace TMP PROG ARGS   (apps: ... --trace TMP)

one after the other (A B A B ...), with the same environment (PYTHONPATH = the repo root for both)
and the same working directory, and reads the time the program prints of itself: a workload's
`time_s=` line (its timed loop on rank 0, between two barriers), an application's summary line
(`..., 0.812 s: verified`, its parallel phase on rank 0). Per program it prints the untraced and
traced medians with [min, max], the median of the per-pair ratios traced/untraced and PASS/MISS
against the 3 % target, and the same ratio for the whole process (mpiexec start to end), which
includes start-up (imports, the trace's files) and is expected to differ: the target is on the
program's own time.

The machine's conditions (1-minute load average, the share of CPU time stolen by the hypervisor)
are read over each program and over the whole benchmark with hindsight/conditions.py; figures
taken while they say the machine was not quiet are labelled "taken under load".

`--root DIR` runs the ranks against another checkout's `instrument` and `apps`; `--revision REV`
against the committed tree at REV (extracted with `git archive` into a temporary directory), so
that edits in progress in the working tree do not leak into the measurement. The workloads always
come from this repository's working tree.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ROOT / "workloads"
TARGET = 0.03
#: Other work (load average less the benchmark's own ranks, or tasks found runnable when a run
#: began) above this share of the cores labels a program's figures "taken under load".
MAX_LOAD_PER_CORE = 0.5
RUN_TIMEOUT_S = 600.0

sys.path.insert(0, str(ROOT))
from hindsight import conditions, system  # noqa: E402  (leaf modules: standard library only)


@dataclass(frozen=True)
class Program:
    name: str
    kind: str               # "workload" or "app"
    target: str             # workload file name, or the app's module
    args: tuple[str, ...] = ()

    def untraced(self) -> list[str]:
        if self.kind == "workload":
            return [str(WORKLOADS / self.target), *self.args]
        return ["-m", self.target, *self.args]

    def traced(self, trace_dir: Path, recorder: str = "python") -> list[str]:
        if self.kind == "workload":
            return ["-m", "instrument.run", "--trace", str(trace_dir), "--recorder", recorder,
                    str(WORKLOADS / self.target), *self.args]
        return ["-m", self.target, *self.args, "--trace", str(trace_dir)]


PROGRAMS: list[Program] = [
    Program(f"{w}-{s}", "workload", f"{w}.py", (f"--{s}",))
    for w in ("stencil", "collectives", "master_worker", "pipeline", "cg", "transpose",
              "irregular", "overlap")
    for s in ("fine", "coarse")
] + [
    Program("feature_extraction", "app", "apps.feature_extraction"),
    Program("sorting", "app", "apps.sorting"),
    # The default graph (2^16 edges) is done in 10-80 ms on 2 ranks, shorter than the run-to-run
    # noise of this machine; 2^19 edges take about 0.6 s.
    Program("components", "app", "apps.components", ("--vertices", "262144", "--edges", "524288")),
]

_WORKLOAD_TIME = re.compile(r"^time_s=([0-9.eE+-]+)\s*$", re.M)
_APP_TIME = re.compile(r", ([0-9.]+) s: verified\s*$", re.M)


@dataclass
class Run:
    variant: str            # "untraced" or "traced"
    pair: int               # -1 for the warm-up pair
    time_s: float | None
    wall_s: float
    returncode: int
    verified: bool
    trace_complete: bool | None = None
    events: int | None = None
    error: str | None = None
    minor_faults: int | None = None     # of mpiexec and every process it waited for
    others_running: int | None = None   # runnable tasks of other work when the run began


@dataclass
class Result:
    program: Program
    runs: list[Run] = field(default_factory=list)
    conditions: dict[str, Any] | None = None
    first_program: bool = False

    def measured(self, variant: str) -> list[Run]:
        return [r for r in self.runs if r.variant == variant and r.pair >= 0]

    def pairs(self) -> list[tuple[Run, Run]]:
        u, t = self.measured("untraced"), self.measured("traced")
        return [(a, b) for a, b in zip(u, t) if a.time_s and b.time_s]

    def failed(self) -> list[Run]:
        return [r for r in self.runs if r.time_s is None]


def find_mpiexec() -> str:
    """hindsight collect's mpiexec (the environment's own MPI, else the one on PATH)."""
    from hindsight.collect import CollectError, find_mpiexec as collect_mpiexec
    try:
        return collect_mpiexec()
    except CollectError as exc:
        raise SystemExit(f"observer_effect: {exc}") from None


def launch_env(root: Path, nprocs: int) -> dict[str, str]:
    """One environment for both variants: only the command line differs between them."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(root)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    if nprocs > system.usable_cores():
        # Oversubscribed, waiting ranks would spin on the cores the working ranks need; the same
        # setting `hindsight collect` uses, applied to both variants alike.
        env.setdefault("MPIR_CVAR_CH4_PROGRESS_THROTTLE", "1")
        env.setdefault("MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT", "1")
    return env


def others_running() -> int | None:
    """Tasks running or runnable right now besides this one (/proc/stat's procs_running), read
    between two runs, when none of this benchmark's ranks exist: other work on the machine, seen
    at once, where the 1-minute load average trails by a minute and counts our own ranks."""
    try:
        with open("/proc/stat") as f:
            for line in f:
                if line.startswith("procs_running "):
                    return max(0, int(line.split()[1]) - 1)
    except OSError:
        pass
    return None


def run_once(prog: Program, variant: str, pair: int, root: Path, nprocs: int,
             env: dict[str, str], recorder: str = "python") -> Run:
    trace_dir = Path(tempfile.mkdtemp(prefix="hindsight-observer-")) / "trace"
    library = variant == "traced" and recorder == "pmpi"
    try:
        tail = prog.traced(trace_dir, recorder) if variant == "traced" else prog.untraced()
        cmd = [find_mpiexec(), "-n", str(nprocs), sys.executable, *tail]
        if library:
            # As `hindsight collect --recorder pmpi`: the library preloaded, the run's start
            # written beside the trace; sealed below.
            from instrument import native
            env = {**env, **native.prepare(trace_dir, nprocs, str(WORKLOADS / prog.target),
                                           list(prog.args), env)}
        others = others_running()
        faults0 = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=root,
                                  timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return Run(variant, pair, None, time.perf_counter() - t0, -1, False,
                       error=f"timed out after {RUN_TIMEOUT_S:.0f} s", others_running=others)
        wall = time.perf_counter() - t0
        faults = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt - faults0
        out = proc.stdout + "\n" + proc.stderr
        found = (_WORKLOAD_TIME if prog.kind == "workload" else _APP_TIME).search(
            proc.stdout if prog.kind == "workload" else proc.stderr)
        verified = proc.returncode == 0 and "verified" in out and "WRONG" not in out
        run = Run(variant, pair, float(found.group(1)) if found and verified else None, wall,
                  proc.returncode, verified, minor_faults=faults, others_running=others)
        if run.time_s is None:
            tail_lines = [line for line in out.strip().splitlines() if line.strip()][-3:]
            run.error = f"exit {proc.returncode}: " + " | ".join(tail_lines)
        if library:
            from instrument import native
            from instrument.seal import finalize_manifest
            try:
                native.finish(trace_dir)
                finalize_manifest(trace_dir, launcher_exit=proc.returncode)
            except Exception as exc:            # reported as the run's trace, not raised
                run.error = f"cannot seal the trace: {exc}"
        if variant == "traced":
            manifest = trace_dir / "manifest.json"
            if manifest.exists():
                m = json.loads(manifest.read_text())
                run.trace_complete = bool(m.get("complete"))
                events = m.get("events")
                run.events = sum(events) if isinstance(events, list) else events
            else:
                run.trace_complete = False
        return run
    finally:
        shutil.rmtree(trace_dir.parent, ignore_errors=True)


def measure(prog: Program, root: Path, nprocs: int, pairs: int, warmup: int,
            env: dict[str, str], log: Callable[[str], None], recorder: str = "python") -> Result:
    res = Result(prog)
    before = conditions.snapshot()
    for pair in [-1] * warmup + list(range(pairs)):
        for variant in ("untraced", "traced"):
            run = run_once(prog, variant, pair, root, nprocs, env, recorder)
            res.runs.append(run)
            shown = f"{run.time_s:.3f} s" if run.time_s is not None else f"FAILED ({run.error})"
            log(f"  {prog.name:<24} {'warm-up' if pair < 0 else f'pair {pair}':<8} "
                f"{variant:<9} {shown}  (wall {run.wall_s:.2f} s)")
    res.conditions = conditions.between(before, conditions.snapshot())
    return res


def _spread(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.3f} [{min(values):.3f}, {max(values):.3f}]"


def program_load_problems(res: Result, nprocs: int) -> list[str]:
    """Why one program's figures are not a quiet machine's: hindsight.conditions' verdict (steal,
    and the 1-minute load average it began with, less the benchmark's own P ranks, which ran
    until just before and which that average still counts, except for the first program), and
    the other work found runnable when its runs began (median over them, against the same
    per-core limit as the load average)."""
    cond = res.conditions
    problems = conditions.load_problems(cond)           # the hypervisor's steal
    cores = (cond or {}).get("cores") or system.usable_cores()
    load = (cond or {}).get("loadavg_1m_before")
    if load is not None:
        own = 0 if res.first_program else nprocs
        if load - own > MAX_LOAD_PER_CORE * cores:
            problems.append(f"load average {load:.2f} on {cores} cores when it began"
                            + (f" (less the benchmark's own {nprocs} ranks)" if own else ""))
    seen = [r.others_running for r in res.runs if r.others_running is not None]
    if seen and statistics.median(seen) > MAX_LOAD_PER_CORE * cores:
        problems.append(f"{statistics.median(seen):g} other tasks runnable when its runs began "
                        f"(median; up to {max(seen)})")
    return problems


def summarize(res: Result, nprocs: int) -> dict[str, Any]:
    pairs = res.pairs()
    u = [a.time_s for a, _ in pairs]
    t = [b.time_s for _, b in pairs]
    ratios = [b.time_s / a.time_s for a, b in pairs]
    wall = [(a.wall_s, b.wall_s) for a, b in pairs]
    wall_ratios = [b / a for a, b in wall]
    ratio = statistics.median(ratios) if ratios else None
    failed = res.failed()
    incomplete = [r for r in res.runs if r.variant == "traced" and r.trace_complete is False]
    if failed or incomplete or ratio is None:
        verdict = "FAIL"
    else:
        verdict = "PASS" if abs(ratio - 1.0) <= TARGET else "MISS"
    out = {
        "untraced_s": u, "traced_s": t, "ratios": ratios, "ratio_median": ratio,
        "wall_untraced_s": [a for a, _ in wall], "wall_traced_s": [b for _, b in wall],
        "wall_ratios": wall_ratios,
        "wall_ratio_median": statistics.median(wall_ratios) if wall_ratios else None,
        "untraced_spread": (max(u) - min(u)) / statistics.median(u) if u else None,
        "min_ratio": min(t) / min(u) if u else None,
        "nprocs": nprocs,
        "verdict": verdict, "failed_runs": len(failed), "incomplete_traces": len(incomplete),
        "events": statistics.median([r.events for r in res.measured("traced") if r.events]
                                    or [0]),
        "load_problems": program_load_problems(res, nprocs),
    }
    # Page faults tell whether the two processes use memory alike (a fresh mmap per numpy
    # temporary in one of them was the observer effect this benchmark was written for).
    for variant in ("untraced", "traced"):
        counts = [r.minor_faults for r in res.measured(variant) if r.minor_faults is not None]
        out[f"minor_faults_{variant}"] = statistics.median(counts) if counts else None
    # What tracing added per recorded event of a rank, if all the difference were the tracer's:
    # the per-call cost that a fine-grained program's ratio is made of.
    per_rank = out["events"] / nprocs if nprocs else 0
    out["added_us_per_event"] = ((statistics.median(t) - statistics.median(u)) / per_rank * 1e6
                                 if u and per_rank else None)
    return out


def _cond_text(cond: dict[str, Any] | None) -> str:
    return conditions.describe(cond)


def table(results: list[Result], summaries: list[dict[str, Any]]) -> str:
    head = (f"{'program':<24} {'untraced s: median [min, max]':<30} "
            f"{'traced s: median [min, max]':<30} {'ratio: median [min, max]':<24} {'3 %':>4} "
            f"{'wall ratio':>10} {'min ratio':>9} {'spread':>7} {'us/event':>8}  conditions")
    lines = [head, "-" * len(head)]
    for res, s in zip(results, summaries):
        ratio = (f"{s['ratio_median']:.3f} [{min(s['ratios']):.2f}, {max(s['ratios']):.2f}]"
                 if s["ratio_median"] is not None else "-")
        wall = f"{s['wall_ratio_median']:.3f}" if s["wall_ratio_median"] is not None else "-"
        spread = f"{100 * s['untraced_spread']:.0f} %" if s["untraced_spread"] is not None else "-"
        low = f"{s['min_ratio']:.3f}" if s["min_ratio"] is not None else "-"
        per = f"{s['added_us_per_event']:.2f}" if s["added_us_per_event"] is not None else "-"
        cond = "taken under load" if s["load_problems"] else "quiet"
        lines.append(f"{res.program.name:<24} {_spread(s['untraced_s']):<30} "
                     f"{_spread(s['traced_s']):<30} {ratio:<24} {s['verdict']:>4} {wall:>10} "
                     f"{low:>9} {spread:>7} {per:>8}  {cond}")
    return "\n".join(lines)


def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                             timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def report(results: list[Result], overall: dict[str, Any] | None, tracer: str, nprocs: int,
           pairs: int) -> None:
    """Print the table, the conditions and the per-program notes."""
    summaries = [summarize(r, nprocs) for r in results]
    problems = conditions.load_problems(overall)
    loaded = [r.program.name for r, s in zip(results, summaries) if s["load_problems"]]
    title = (f"Observer effect, -n {nprocs}, {pairs} alternating pairs per program; tracer "
             f"{tracer}")
    print(title)
    print(f"conditions over the benchmark: {_cond_text(overall)}")
    if problems:
        print("TAKEN UNDER LOAD: " + "; ".join(problems))
    elif loaded:
        print(f"PARTLY TAKEN UNDER LOAD: {', '.join(loaded)} (other work began during the "
              "benchmark)")
    print()
    print(table(results, summaries))
    print()
    print("ratio: median [min, max] of the per-pair ratios traced/untraced of the program's own "
          f"printed time (target: median within {100 * TARGET:.0f} %); wall ratio: the same for "
          "the whole mpiexec process, start-up included; min ratio: fastest traced / fastest "
          "untraced (other work only adds time, so under load this is the steadier estimate); "
          "spread: (max - min) / median of the untraced times, the run-to-run noise the ratio is "
          "read against; us/event: (traced - untraced median) / events recorded per rank, the "
          "per-call cost the difference amounts to.")
    for res, s in zip(results, summaries):
        notes = []
        if s["load_problems"]:
            notes.append("taken under load: " + "; ".join(s["load_problems"]))
        if s["failed_runs"]:
            errors = {r.error for r in res.failed()}
            notes.append(f"{s['failed_runs']} run(s) failed: " + "; ".join(sorted(errors))[:400])
        if s["incomplete_traces"]:
            notes.append(f"{s['incomplete_traces']} trace(s) without a complete manifest")
        faults = ""
        if s.get("minor_faults_untraced") is not None and s.get("minor_faults_traced") is not None:
            faults = (f"; minor page faults per run {s['minor_faults_untraced']:.0f} untraced, "
                      f"{s['minor_faults_traced']:.0f} traced")
        print(f"  {res.program.name}: {_cond_text(res.conditions)}; "
              f"{s['events']:.0f} events per traced run{faults}"
              + ("; " + "; ".join(notes) if notes else ""))


def load_json(path: Path) -> tuple[list[Result], dict[str, Any], str, int, int]:
    """The results a `--json` file holds, to print their table again."""
    data = json.loads(path.read_text())
    by_name = {pr.name: pr for pr in PROGRAMS}
    results = []
    for name, entry in data["programs"].items():
        res = Result(by_name[name], [Run(**run) for run in entry["runs"]], entry["conditions"],
                     first_program=not results)
        results.append(res)
    return results, data["conditions"], data.get("tracer", data["tracer_root"]), \
        data["nprocs"], data["pairs"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-n", type=int, default=2, help="ranks (default 2)")
    p.add_argument("--pairs", type=int, default=5, help="untraced/traced pairs (default 5)")
    p.add_argument("--warmup", type=int, default=1,
                   help="discarded pairs before the measured ones (default 1)")
    p.add_argument("--programs", default=None,
                   help="comma-separated program names (default all: "
                        + ", ".join(pr.name for pr in PROGRAMS) + "); a workload's name without "
                        "-fine/-coarse selects both settings")
    p.add_argument("--root", type=Path, default=ROOT,
                   help="checkout whose instrument/ and apps/ the ranks run (default this one)")
    p.add_argument("--revision", default=None, metavar="REV",
                   help="run the ranks against this commit of the repository (git archive)")
    p.add_argument("--label", default=None,
                   help="how to name the tracer in the output (default: --root and its revision)")
    p.add_argument("--recorder", choices=("python", "pmpi"), default="python",
                   help="who records the workloads' traced runs: the mpi4py tracer (default) or "
                        "the PMPI library below mpi4py (hindsight collect --recorder pmpi; the "
                        "applications record through instrument's Python API and are left out)")
    p.add_argument("--json", type=Path, default=None, metavar="FILE", help="write the raw numbers")
    p.add_argument("--show", type=Path, default=None, metavar="FILE",
                   help="print the table of a --json file again, without running anything")
    ns = p.parse_args(argv)
    if ns.show:
        results, overall, tracer, nprocs, pairs = load_json(ns.show)
        report(results, overall, tracer, nprocs, pairs)
        return 0
    if ns.n < 1 or ns.pairs < 1 or ns.warmup < 0:
        p.error("-n and --pairs must be positive, --warmup non-negative")
    if ns.programs:
        wanted = [w.strip() for w in ns.programs.split(",") if w.strip()]
        chosen = [pr for pr in PROGRAMS
                  if pr.name in wanted or pr.name.rsplit("-", 1)[0] in wanted]
        unknown = [w for w in wanted
                   if not any(pr.name == w or pr.name.rsplit("-", 1)[0] == w for pr in PROGRAMS)]
        if unknown:
            p.error(f"unknown program(s) {', '.join(unknown)}; choose from "
                    + ", ".join(pr.name for pr in PROGRAMS))
    else:
        chosen = PROGRAMS
    if ns.recorder == "pmpi":
        chosen = [pr for pr in chosen if pr.kind == "workload"]
        if not chosen:
            p.error("--recorder pmpi records the workloads only")
    root = ns.root.resolve()
    snapshot = None
    if ns.revision:
        rev = _git(root, "rev-parse", "--short", ns.revision)
        if not rev:
            p.error(f"--revision {ns.revision}: not a commit of {root}")
        snapshot = Path(tempfile.mkdtemp(prefix="hindsight-observer-rev-"))
        archive = subprocess.run(["git", "-C", str(root), "archive", rev], capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(snapshot)], input=archive, check=True)
        tracer = f"{root} at {rev} (committed tree)"
        dirty = None
        root = snapshot
    else:
        rev = _git(root, "rev-parse", "--short", "HEAD")
        dirty = (_git(root, "status", "--porcelain", "--", "instrument", "hindsight")
                 if rev else None)
        tracer = f"{root}" + (f" at {rev}" + (" with uncommitted changes in instrument/ or "
                                              "hindsight/" if dirty else "") if rev else "")
    env = launch_env(root, ns.n)
    if ns.label:
        tracer = f"{ns.label} ({root})"

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    log(f"observer effect: {len(chosen)} programs, -n {ns.n}, {ns.warmup} warm-up + {ns.pairs} "
        f"pairs each; tracer: {tracer}")
    started = time.time()
    before = conditions.snapshot()
    if ns.recorder == "pmpi":
        tracer += ", recorded by the PMPI library (--recorder pmpi)"
    results = [measure(pr, root, ns.n, ns.pairs, ns.warmup, env, log, ns.recorder)
               for pr in chosen]
    results[0].first_program = True
    overall = conditions.between(before, conditions.snapshot())
    report(results, overall, tracer, ns.n, ns.pairs)
    summaries = [summarize(r, ns.n) for r in results]
    problems = conditions.load_problems(overall)

    if ns.json:
        ns.json.write_text(json.dumps({
            "started_unix": started, "nprocs": ns.n, "pairs": ns.pairs, "warmup": ns.warmup,
            "tracer": tracer, "tracer_root": str(root), "tracer_revision": rev,
            "tracer_dirty": bool(dirty),
            "python": sys.version.split()[0], "target": TARGET,
            "conditions": overall, "load_problems": problems,
            "programs": {
                r.program.name: {
                    "untraced_cmd": r.program.untraced(),
                    "traced_cmd": r.program.traced(Path("TRACE_DIR"), ns.recorder),
                    "runs": [vars(run) for run in r.runs],
                    "conditions": r.conditions,
                    **s,
                } for r, s in zip(results, summaries)
            },
        }, indent=1))
    if snapshot is not None:
        shutil.rmtree(snapshot, ignore_errors=True)
    return 1 if any(s["verdict"] == "FAIL" for s in summaries) else 0


if __name__ == "__main__":
    sys.exit(main())
