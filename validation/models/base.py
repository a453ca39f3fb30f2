"""What every paper module shares: the error of an impossible input."""

from __future__ import annotations

from hindsight.errors import UsageError


class ModelError(UsageError, ValueError):
    """An impossible input (e.g. an M/M/1 utilisation >= 1); the message says which."""
