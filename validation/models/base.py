"""What every paper module shares: the error of an impossible input, and the valid range of each
input of an evaluator (``@inputs(N=COUNT, t_comp=POSITIVE_TIME, ...)``), checked before the
model runs so that a negative time or a division by zero never reaches the user."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from hindsight.errors import UsageError


class ModelError(UsageError, ValueError):
    """An impossible input (e.g. an M/M/1 utilisation >= 1); the message says which."""


@dataclass(frozen=True)
class Bound:
    """The values an input may take: finite, ``low`` <= v (< with ``strict``), v <= ``high``,
    an integer with ``integer``; ``what`` says so in words for the error message."""

    what: str
    low: float = -math.inf
    strict: bool = False
    high: float = math.inf
    integer: bool = False

    def check(self, name: str, value: float) -> None:
        """Raise ModelError naming ``name`` when ``value`` is outside the range."""
        ok = (math.isfinite(value) and (value > self.low if self.strict else value >= self.low)
              and value <= self.high and (not self.integer or value == int(value)))
        if not ok:
            raise ModelError(f"--param {name}={value:g}: must be {self.what}")


COUNT = Bound("a count >= 1", 1)
INTEGER_COUNT = Bound("an integer >= 1", 1, integer=True)
TIME = Bound("a time >= 0 s", 0)
POSITIVE_TIME = Bound("a time > 0 s", 0, strict=True)
SIZE = Bound("a size >= 0", 0)
POSITIVE = Bound("> 0", 0, strict=True)
RATE = Bound("a rate > 0", 0, strict=True)
FLAG = Bound("0 or 1", 0, high=1, integer=True)


def inputs(**bounds: Bound) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare the valid range of every keyword input of an evaluator (``fn.bounds``)."""
    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        fn.bounds = bounds          # type: ignore[attr-defined]
        return fn
    return mark
