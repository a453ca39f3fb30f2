"""How far a calibration benchmark has got, told while it runs.

Rank 0 of the benchmark (``bench``) writes one line to stderr per step (``report``): first the
plan (every visit of a message size, in order, with its weight in round trips), then one line
per visit done (its size and how long it took), then the name of each probe after the sizes.
``run.run_job`` reads them as they come and hands them to a ``SizeProgress``, which turns them
into `calibrate:` lines with an estimate of the time the remaining sizes need, keeps the time of
the last step forward (``last_step``: the watchdog of ``run.run_job`` counts from it), and says
where the benchmark was if it has to be stopped.

A step forward is the plan (once), a visit done with a higher count than the last, or a probe
not begun before: a run has a fixed number of them (the visits of its plan and five probes), so
a benchmark that keeps stepping forward ends, and a line repeated does not hold off the watchdog.

The estimate: a size already measured takes, per round trip, what it took on average; a size
not measured yet takes ``a + b·k`` per round trip, a straight line through the sizes measured so
far (least squares, a and b at least 0), so the time of the remaining sizes grows with their
bytes.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, Callable

import numpy as np

#: what starts a progress line on the benchmark's stderr
PREFIX = "hindsight-bench: "
#: at most one `calibrate:` line about the sizes every this many seconds (a fast benchmark
#: prints none, a slow one is never silent for longer)
EVERY_S = 5.0


def report(**item: Any) -> None:
    """One progress line on stderr (rank 0 of the benchmark calls it)."""
    sys.stderr.write(PREFIX + json.dumps(item) + "\n")
    sys.stderr.flush()


def _fmt_s(s: float) -> str:
    return f"{s:.0f} s" if s >= 10 else f"{s:.1f} s"


class SizeProgress:
    """The benchmark's progress lines, turned into ``say`` lines and an answer to "where was it"."""

    def __init__(self, say: Callable[[str], None], every_s: float | None = None) -> None:
        self.say = say
        self.every_s = EVERY_S if every_s is None else every_s
        self.plan: list[tuple[int, float]] = []    # (size in bytes, round trips) per visit
        self.passes = 1
        self.took: dict[int, list[tuple[float, float]]] = {}   # size -> (round trips, seconds)
        self.done = 0
        self.phase: str | None = None
        self.warmup: int | None = None             # largest size of the warm-up, until size 1
        self.t0 = time.monotonic()
        self.last_said = self.t0
        self.last_step = self.t0                   # the start, or the last step forward
        self.phases: set[str] = set()

    def line(self, text: str) -> None:
        """One line of the benchmark's stderr that starts with PREFIX."""
        try:
            item = json.loads(text[len(PREFIX):])
        except ValueError:
            return
        if not isinstance(item, dict):
            return
        if "plan" in item and not self.plan:
            self.plan = [(int(k), float(n)) for k, n in item["plan"]]
            self.passes = int(item.get("passes", 1))
            self.warmup = int(item["warmup"]) if item.get("warmup") else None
            self.last_step = time.monotonic()
        elif "done" in item and self.done < int(item["done"]) <= len(self.plan):
            self.done = int(item["done"])
            self.warmup = None
            k, n = self.plan[self.done - 1]
            self.took.setdefault(k, []).append((n, float(item["s"])))
            self.last_step = time.monotonic()
            self._maybe_say(self._size_text())
        elif "phase" in item and str(item["phase"]) not in self.phases:
            self.phase = str(item["phase"])
            self.phases.add(self.phase)
            self.last_step = time.monotonic()
            self._maybe_say(f"  {self.phase}, after all {len(self.plan)} sizes")

    def _maybe_say(self, text: str) -> None:
        now = time.monotonic()
        if now - self.last_said >= self.every_s:
            self.last_said = now
            self.say(text)

    def _size_text(self) -> str:
        k, _ = self.plan[self.done - 1]
        left = self.seconds_left()
        return (f"  size {k} B ({self._pass(self.done - 1)}): {self.done}/{len(self.plan)} "
                "done" + (f", ~{_fmt_s(left)} left in the sizes" if left else ""))

    def _pass(self, visit: int) -> str:
        per = max(1, len(self.plan) // max(1, self.passes))
        return f"pass {visit // per + 1}/{self.passes}"

    def per_round_trip(self) -> Callable[[int], float | None]:
        """Seconds per round trip of a size: measured, else the straight line in bytes through
        the sizes measured (None until two sizes are: one gives no slope)."""
        mean = {k: sum(s for _, s in v) / sum(n for n, _ in v) for k, v in self.took.items()
                if sum(n for n, _ in v) > 0}
        if len(mean) < 2:
            return mean.get
        ks = np.array(sorted(mean), float)
        ts = np.array([mean[k] for k in sorted(mean)])
        b, a = (float(x) for x in np.polyfit(ks, ts, 1))
        if b < 0:
            a, b = float(ts.mean()), 0.0
        elif a < 0:
            a, b = 0.0, float(ts @ ks / (ks @ ks))
        return lambda k: mean.get(k, a + b * k)

    def seconds_left(self) -> float | None:
        """The estimated time the sizes not visited yet need (None: not known yet)."""
        rate = self.per_round_trip()
        per = [rate(k) for k, _ in self.plan[self.done:]]
        if any(p is None for p in per):
            return None
        return float(sum(n * p for (_, n), p in zip(self.plan[self.done:], per)))

    def where(self) -> str:
        """Where the benchmark was: the size it was measuring, or the probe after the sizes."""
        if not self.plan:
            return "before the first message size"
        elapsed = time.monotonic() - self.t0
        if self.phase is not None:
            return (f"in the {self.phase}, after all {len(self.plan)} sizes; "
                    f"{_fmt_s(elapsed)} in all")
        if self.done >= len(self.plan):
            return f"after all {len(self.plan)} sizes; {_fmt_s(elapsed)} in all"
        if self.warmup is not None:
            return (f"in the warm-up before the first size (ping-pongs up to {self.warmup} B); "
                    f"{_fmt_s(elapsed)} in all")
        k, _ = self.plan[self.done]
        left = self.seconds_left()
        return (f"at size {k} B ({self._pass(self.done)}), {self.done}/{len(self.plan)} sizes "
                f"measured in {_fmt_s(elapsed)}"
                + (f", ~{_fmt_s(left)} more needed for the sizes" if left else ""))
