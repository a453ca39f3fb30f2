"""The replay core's error: a trace that cannot be replayed."""

from __future__ import annotations

from hindsight.errors import DataError


class ReplayError(DataError):
    """A trace that cannot be replayed (unmatched messages, deadlock, ...); readable message."""


class NoPredictionError(ReplayError):
    """The model's premise fails for this trace (e.g. an M/M/1 link with rho >= 1), so it has no
    prediction to give; a sweep or a prediction grid records the point as failed and goes on."""
