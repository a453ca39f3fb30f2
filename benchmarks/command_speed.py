"""What a user waits for on a small trace: each everyday command run as its own process, with
hindsight's kernels compiled ahead of time (A, as ``make`` builds them: hindsight/jit.py) and
through numba (B, ``HINDSIGHT_AOT=0``), alternating A B A B, medians (min-max) of wall time and
peak memory, and B / A. It also says, per command, whether A imported numba at all (a kernel
called with argument types the ahead-of-time build did not compile: hindsight/aot_build.py).

The traces: a measured one (the example ring program on 2 ranks under mpiexec, the tracer's
default recorder) and a GOAL schedule imported (the build's small sample ring).

    .venv/bin/python benchmarks/command_speed.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vs_loggopsim import aot_line, run  # noqa: E402
from yardstick import line as yardstick_line  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
HINDSIGHT = [sys.executable, "-m", "hindsight.cli"]

#: a command run in this interpreter, saying on its last line whether numba was imported
_PROBE = ("import sys; from hindsight.cli import main\n"
          "try: main(sys.argv[1:], standalone_mode=False)\n"
          "except SystemExit: pass\n"
          "print('numba imported:', 'numba' in sys.modules)")


def commands(trace: Path, work: Path) -> list[list[str]]:
    """The commands timed on ``trace`` (outputs in ``work``, replaced each time)."""
    t = str(trace)
    return [["replay", t], ["replay", t, "--json"], ["replay", t, "--model", "hockney"],
            ["replay", t, "--model", "mm1", "--set", "saturation=cap"],
            ["replay", t, "--model", "loggopsim"],
            ["trace", "info", t],
            ["export", t, "--format", "perfetto", "--out", str(work / "x.json"), "--force"],
            ["export", t, "--format", "pipit", "--out", str(work / "x.csv"), "--force"],
            ["export", t, "--format", "goal", "--out", str(work / "x.goal"), "--force"],
            ["export", t, "--format", "otf2", "--out", str(work / "x-otf2"), "--force"]]


def imports_numba(cmd: list[str]) -> bool:
    out = subprocess.run([sys.executable, "-c", _PROBE, *cmd], capture_output=True, text=True,
                         check=True).stdout.strip().splitlines()
    return out[-1].endswith("True")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5, help="A B alternations per command")
    args = ap.parse_args()
    if os.environ.pop("HINDSIGHT_AOT", None) is not None:
        print("note: HINDSIGHT_AOT is ignored here (A is ahead of time, B through numba)")
    print(aot_line())
    print(f"load average {os.getloadavg()[0]:.2f}; {yardstick_line('before')}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        measured, goal = work / "ring-measured", work / "ring-goal"
        run([*HINDSIGHT, "collect", "-n", "2", "--program", ROOT / "hindsight/examples/ring.py",
             "--out", measured, "--", "--rounds", "50"])
        from hindsight.aot_build import measured_commands, sample_goal
        (work / "ring.goal").write_text(sample_goal())
        run([*HINDSIGHT, "import", "goal", work / "ring.goal", "--out", goal])
        todo = [("measured", c) for c in commands(measured, work) + measured_commands(measured)]
        todo += [("GOAL", c) for c in commands(goal, work)]
        print(f"\n{'trace':9s} {'command':58s} {'A: ahead of time':>22s} {'B: numba':>22s} "
              f"{'B/A':>5s}  A imports numba")
        for kind, cmd in todo:
            # (untimed: a first replay's cache is made once, numba's cache loads the kernels)
            _timed(cmd, aot=True), _timed(cmd, aot=False)
            a, b = [], []
            for _ in range(args.rounds):
                a.append(_timed(cmd, aot=True))
                b.append(_timed(cmd, aot=False))
            wa, wb = [x[0] for x in a], [x[0] for x in b]
            ma, mb = (statistics.median(x[1] for x in xs) / 1e6 for xs in (a, b))
            shown = " ".join(Path(c).name if c.startswith(tmp) else c for c in cmd
                             if c != "--force")
            print(f"{kind:9s} {shown:58s} {_cell(wa, ma):>22s} {_cell(wb, mb):>22s} "
                  f"{statistics.median(wb) / statistics.median(wa):4.1f}x  "
                  f"{'yes' if imports_numba(cmd) else 'no'}")
    print(f"\nload average {os.getloadavg()[0]:.2f}; {yardstick_line('after')}")


def _timed(cmd: list[str], aot: bool) -> tuple[float, int, str]:
    """``run`` of ``hindsight CMD``, ahead of time or through numba (``HINDSIGHT_AOT=0``)."""
    if aot:
        return run([*HINDSIGHT, *cmd])
    os.environ["HINDSIGHT_AOT"] = "0"
    try:
        return run([*HINDSIGHT, *cmd])
    finally:
        del os.environ["HINDSIGHT_AOT"]


def _cell(walls: list[float], mb: float) -> str:
    return (f"{statistics.median(walls):.2f} ({min(walls):.2f}-{max(walls):.2f}) s "
            f"{mb:3.0f} MB")


if __name__ == "__main__":
    main()
