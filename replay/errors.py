"""The replay core's error: a trace that cannot be replayed."""

from __future__ import annotations

from hindsight.errors import DataError


class ReplayError(DataError):
    """A trace that cannot be replayed (unmatched messages, deadlock, ...); readable message."""


class NoPredictionError(ReplayError):
    """The model's premise fails for this trace (e.g. an M/M/1 link with rho >= 1), so it has no
    prediction to give; a sweep or a prediction grid records the point as failed and goes on."""


class ReplayDeadlock(NoPredictionError):
    """The replay cannot finish: ranks wait for messages or collectives that never come. Under
    some parameter values only (an unsafe exchange once its messages go by rendezvous) it is
    that configuration's answer, so a sweep records the point as failed and goes on."""


def deadlock(stuck: int, nonblocking: bool, S: float = float("inf"), over_s: int = 0,
             where: str = "", by_values: bool = False) -> ReplayError:
    """The error of a replay whose ``stuck`` ranks never finished, with what may explain it: the
    trace's non-blocking collectives (rules nonblocking_split and nonblocking_in_order,
    replay.patterns), its ``over_s`` messages above the eager limit ``S`` (bytes). A
    ReplayDeadlock where some messages go by rendezvous or a rule's parameter made it
    (``by_values``: rule ack_cells' held acknowledgements): other values may replay it, and a
    sweep goes on; else a plain ReplayError (no value would: a sweep stops at it)."""
    text = ("replay deadlock: the dependencies are cyclic or a partner is missing (some ranks "
            f"wait for messages or collectives that can never happen) ({stuck} ranks "
            f"stuck){where}")
    if over_s:
        text += (f"; {over_s} messages are larger than S = {S:g} B, so their sends wait for "
                 "their receives (rendezvous): ranks that send to each other before they "
                 "receive deadlock so, as MPI allows (a larger S, or --set S=..., replays them "
                 "eagerly)")
    if nonblocking:
        text += ("; the trace has non-blocking collectives, whose steps after the first are "
                 "replayed at their Wait/Test: a rank that waits for a peer's message before "
                 "completing its collective, while that peer completes the collective first, or "
                 "ranks that complete collectives on different communicators in different "
                 "orders, deadlock under that rule (use --model measured)")
    return (ReplayDeadlock if over_s or by_values else ReplayError)(text)
