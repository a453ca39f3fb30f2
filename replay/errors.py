"""The replay core's error: a trace that cannot be replayed."""

from __future__ import annotations

from hindsight.errors import DataError


class ReplayError(DataError):
    """A trace that cannot be replayed (unmatched messages, deadlock, ...); readable message."""
