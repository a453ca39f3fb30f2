"""hindsight and LogGOPSim side by side, on the same generated GOAL schedules.

For each schedule (``benchmarks/goal_schedules.py``: pairwise, ring, tree allreduce, tree reduce
with a backlog) and each round, alternately:

* LogGOPSim: ``txt2bin`` (GOAL text to its binary form) then ``LogGOPSim`` (simulation);
* hindsight: ``import goal`` (a new trace), the first ``replay`` of that trace (LogGPS, nothing
  cached), a second ``replay`` (warm: its prepared arrays cached), and ``replay --model loggopsim``
  (LogGOPSim's semantics, on the schedule kept beside the trace).

Every step runs as its own process, as a user runs it; wall time from the clock, peak resident
memory from GNU time where it is installed (else ``os.wait4``'s, an upper bound: see
``run``). The script prints medians with min/max over the rounds, the ratios the targets are
stated in, bytes per operation, and whether the LogGOPSim-semantics makespan equals
LogGOPSim's to the nanosecond. One untimed round on the first schedule comes first (numba
compiles what its cache lacks then); the machine's yardstick (``yardstick.py``) is printed
before and after, and whether hindsight's kernels run compiled ahead of time (built first if
missing, as ``make`` does; ``HINDSIGHT_AOT=0`` measures them through numba).

LogGOPSim is built from its source tree (``--loggopsim DIR``: the repository or its
``src/LogGOPSim``) with ``re2c``, ``gengetopt`` and ``g++ -O2`` into a cache folder; without
``--loggopsim`` (or without those tools) the script says so and exits 0 without measuring.

    .venv/bin/python benchmarks/vs_loggopsim.py --loggopsim ~/src/LogGOPSim            # 5e6 ops
    .venv/bin/python benchmarks/vs_loggopsim.py --loggopsim ~/src/LogGOPSim --ops 5e5 --rounds 3
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from goal_schedules import KINDS  # noqa: E402
from yardstick import line as yardstick_line  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
HINDSIGHT = [sys.executable, "-m", "hindsight.cli"]
# LogGOPSim's defaults (its loggopsim_cmdline.ggo), given to both simulators.
LGS_ARGS = ["-L", "2500", "-o", "1500", "-g", "1000", "-G", "6", "-S", "65535"]
HS_SET = ["--set", "L=2500ns", "--set", "o=1500ns", "--set", "g=1000ns", "--set", "G=6ns",
          "--set", "S=65535B"]
# The backlog schedule's share of --ops: its LogGOPSim run is quadratic.
BACKLOG_SHARE = 0.15


def build_loggopsim(src: Path, cache: Path) -> tuple[Path, Path]:
    """Build txt2bin and LogGOPSim at -O2 (its own Makefile builds -O0 -g); cached by source."""
    if (src / "src" / "LogGOPSim").is_dir():
        src = src / "src" / "LogGOPSim"
    need = ["txt2bin.re", "txt2bin_cmdline.ggo", "LogGOPSim.cpp", "loggopsim_cmdline.ggo"]
    missing = [f for f in need if not (src / f).is_file()]
    if missing:
        raise SystemExit(f"Error: --loggopsim {src}: not a LogGOPSim source tree "
                         f"(missing {', '.join(missing)})")
    digest = hashlib.sha1(b"".join((src / f).read_bytes() for f in need)).hexdigest()[:12]
    out = cache / f"loggopsim-{digest}"
    t2b, sim = out / "txt2bin", out / "LogGOPSim"
    if t2b.is_file() and sim.is_file():
        return t2b, sim
    tools = [t for t in ("re2c", "gengetopt", "g++") if shutil.which(t) is None]
    if tools:
        print(f"skipped: building LogGOPSim needs {', '.join(tools)} "
              "(Debian: apt-get install re2c gengetopt libgraphviz-dev g++)")
        raise SystemExit(0)
    work = out.with_suffix(".build")
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(src, work)
    steps = [["re2c", "-o", "txt2bin.cpp", "txt2bin.re"],
             ["gengetopt", "-i", "txt2bin_cmdline.ggo", "-F", "txt2bin_cmdline"],
             ["gengetopt", "-i", "loggopsim_cmdline.ggo", "-F", "loggopsim_cmdline"],
             ["g++", "-O2", "txt2bin.cpp", "txt2bin_cmdline.c", "-o", "txt2bin"],
             ["g++", "-std=c++11", "-O2", "-I/usr/include/graphviz", "LogGOPSim.cpp",
              "loggopsim_cmdline.c", "-o", "LogGOPSim", "-lcgraph"]]
    for cmd in steps:
        r = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
        if r.returncode:
            raise SystemExit(f"Error: building LogGOPSim: {' '.join(cmd)} failed:\n{r.stderr}")
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy2(work / "txt2bin", t2b)
    shutil.copy2(work / "LogGOPSim", sim)
    shutil.rmtree(work)
    return t2b, sim


GNU_TIME = Path("/usr/bin/time")
_RSS_MARK = "vs_loggopsim peak KiB:"


def run(cmd: list) -> tuple[float, int, str]:
    """Run one step as its own process: (wall seconds, peak RSS bytes, output).

    A child's peak as ``wait4`` reports it includes the memory it shared with this process before
    its ``exec``; GNU time (``/usr/bin/time``), itself small, reports its own child's peak alone,
    so it is used where it is installed (its few milliseconds are in the wall time of every
    step alike). Without it the figure is an upper bound by this script's size (about 20 MB:
    schedules are generated in a separate process to keep it small)."""
    argv = [str(c) for c in cmd]
    if GNU_TIME.is_file():
        argv = [str(GNU_TIME), "-f", f"{_RSS_MARK} %M", *argv]
    exe = shutil.which(argv[0]) or argv[0]
    with tempfile.TemporaryFile("w+") as out:
        t0 = time.perf_counter()
        pid = os.posix_spawn(exe, argv, os.environ, file_actions=[
            (os.POSIX_SPAWN_DUP2, out.fileno(), 1), (os.POSIX_SPAWN_DUP2, out.fileno(), 2)])
        _, status, ru = os.wait4(pid, 0)
        wall = time.perf_counter() - t0
        out.seek(0)
        text = out.read()
    code = os.waitstatus_to_exitcode(status)
    if code:
        raise SystemExit(f"Error: {' '.join(argv)} exited {code}:\n{text[-2000:]}")
    peak = ru.ru_maxrss * 1024
    mark = re.search(rf"^{_RSS_MARK} (\d+)$", text, re.M)
    if mark:
        peak = int(mark.group(1)) * 1024
        text = text[:mark.start()]
    return wall, peak, text


def one_round(kind: str, goal: Path, work: Path, t2b: Path, sim: Path) -> dict:
    """One alternation of both tools on one schedule; returns wall times, memory and makespans."""
    m: dict = {}
    binf = work / f"{kind}.bin"
    m["txt2bin"], m["txt2bin_mem"], _ = run([t2b, "-i", goal, "-o", binf])
    m["lgs_sim"], m["lgs_mem"], out = run([sim, "-f", binf, *LGS_ARGS])
    fin = re.search(r"Maximum finishing time at host \d+: (\d+)", out)
    m["lgs_makespan_ns"] = int(fin.group(1)) if fin else None
    trace = work / f"{kind}-trace"
    shutil.rmtree(trace, ignore_errors=True)
    m["import"], m["import_mem"], _ = run([*HINDSIGHT, "import", "goal", goal, "--out", trace])
    m["replay_cold"], m["replay_cold_mem"], _ = run([*HINDSIGHT, "replay", trace, "--json"])
    m["replay_warm"], m["replay_warm_mem"], _ = run([*HINDSIGHT, "replay", trace, "--json"])
    m["hs_lgs"], m["hs_lgs_mem"], out = run([*HINDSIGHT, "replay", trace, "--model",
                                             "loggopsim", *HS_SET, "--json"])
    m["hs_makespan_ns"] = round(json.loads(out)["predicted_makespan_s"] * 1e9)
    shutil.rmtree(trace)
    binf.unlink()
    return m


def aot_line() -> str:
    """Whether hindsight's kernels run compiled ahead of time (``hindsight/jit.py``), building
    them first if they are missing (as ``make`` does), unless ``HINDSIGHT_AOT=0`` asks for
    numba alone."""
    if os.environ.get("HINDSIGHT_AOT") == "0":
        return "kernels: through numba (HINDSIGHT_AOT=0)"
    subprocess.run([sys.executable, "-m", "hindsight.aot_build"], check=True)
    probe = subprocess.run([sys.executable, "-c", "from hindsight import jit; "
                            "print(jit.aot_loaded(), jit.aot_description().name)"],
                           capture_output=True, text=True, check=True).stdout.split()
    return (f"kernels: compiled ahead of time ({probe[1]})" if probe[0] == "True" else
            "kernels: through numba (no ahead-of-time modules: see hindsight/aot_build.py)")


def fmt(xs: list[float], unit: str = "s") -> str:
    if unit == "MB":
        return f"{statistics.median(xs) / 1e6:.0f} MB"
    return f"{statistics.median(xs):.2f} s ({min(xs):.2f}-{max(xs):.2f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loggopsim", type=Path, help="LogGOPSim source tree (repository root or "
                    "src/LogGOPSim); without it the benchmark is skipped")
    ap.add_argument("--ops", type=float, default=5e6, help="operations per schedule "
                    f"(backlog: {BACKLOG_SHARE:g} of it)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "hindsight-bench")
    ap.add_argument("--json", type=Path, help="also write the raw measurements here")
    a = ap.parse_args()
    if a.loggopsim is None:
        print("skipped: give --loggopsim DIR (a LogGOPSim source tree, e.g. a clone of "
              "github.com/spcl/LogGOPSim) to measure it side by side")
        return
    t2b, sim = build_loggopsim(a.loggopsim.expanduser(), a.cache)
    kinds = a.kinds.split(",")
    for k in kinds:
        if k not in KINDS:
            raise SystemExit(f"Error: --kinds: unknown schedule '{k}' (known: {', '.join(KINDS)})")
    print(aot_line())
    print(f"load average before: {os.getloadavg()[0]:.2f}  ({os.cpu_count()} cores)")
    print(yardstick_line("before"), flush=True)
    results = {}
    with tempfile.TemporaryDirectory(prefix="vs-loggopsim-") as tmp:
        work = Path(tmp)
        for k in kinds:
            target = int(a.ops * (BACKLOG_SHARE if k == "backlog" else 1))
            goal = work / f"{k}.goal"
            _, _, said = run([sys.executable, Path(__file__).with_name("goal_schedules.py"), k,
                              str(target), goal])
            nops = int(re.search(r"(\d+) operations", said).group(1))
            if k == kinds[0]:
                # untimed: numba compiles what its cache lacks (after an edit, 10-60 s)
                one_round(k, goal, work, t2b, sim)
            rounds = [one_round(k, goal, work, t2b, sim) for _ in range(a.rounds)]
            results[k] = {"ops": nops, "rounds": rounds}
            report(k, nops, rounds)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print(yardstick_line("after"))
    if a.json:
        a.json.write_text(json.dumps(results, indent=1))


def report(kind: str, nops: int, rounds: list[dict]) -> None:
    col = lambda key: [r[key] for r in rounds]  # noqa: E731
    med = lambda key: statistics.median(col(key))  # noqa: E731
    print(f"\n{kind}: {nops:,} operations, {len(rounds)} rounds (median, min-max)")
    for label, key in [("LogGOPSim txt2bin", "txt2bin"), ("LogGOPSim simulate", "lgs_sim"),
                       ("hindsight import goal", "import"), ("hindsight replay (first)",
                                                             "replay_cold"),
                       ("hindsight replay (warm)", "replay_warm"),
                       ("hindsight --model loggopsim", "hs_lgs")]:
        print(f"  {label:30s} {fmt(col(key))}   peak {fmt(col(key + '_mem' if key != 'lgs_sim' else 'lgs_mem'), 'MB')}")
    lgs_total = [r["txt2bin"] + r["lgs_sim"] for r in rounds]
    hs_total = [r["import"] + r["replay_cold"] for r in rounds]
    ratio = statistics.median(h / g for h, g in zip(hs_total, lgs_total))
    print(f"  import + first replay / txt2bin + simulate: {ratio:.2f}x  (target < 1)")
    print(f"  LogGOPSim simulate / warm replay:          "
          f"{statistics.median(r['lgs_sim'] / r['replay_warm'] for r in rounds):.2f}x  (target >= 5)")
    print(f"  --model loggopsim / LogGOPSim simulate:    "
          f"{statistics.median(r['hs_lgs'] / r['lgs_sim'] for r in rounds):.2f}x  (target <= 1)")
    for label, key, peer, peer_key in [
            ("import", "import_mem", "txt2bin", "txt2bin_mem"),
            ("replay (first)", "replay_cold_mem", "simulate", "lgs_mem"),
            ("--model loggopsim", "hs_lgs_mem", "simulate", "lgs_mem")]:
        print(f"  memory {label:18s} {med(key) / nops:6.0f} B/op  vs LogGOPSim {peer} "
              f"{med(peer_key) / nops:.0f} B/op: {med(key) / med(peer_key):.2f}x  (target <= 2)")
    same = all(r["hs_makespan_ns"] == r["lgs_makespan_ns"] for r in rounds)
    print(f"  makespan LogGOPSim {rounds[0]['lgs_makespan_ns']} ns, hindsight --model loggopsim "
          f"{rounds[0]['hs_makespan_ns']} ns: {'identical' if same else 'DIFFERENT'}")


if __name__ == "__main__":
    main()
