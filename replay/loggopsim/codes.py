"""What the LogGOPSim simulator's modules share: operation types, the wildcard, and the error
of a schedule that cannot run. Imports nothing."""

# Operation types. The values are LogGOPSim's, and their order is its tie-break order.
SEND, RECV, CALC = 1, 2, 3
KIND_NAMES = {SEND: "send", RECV: "recv", CALC: "calc"}
ANY = -1   # wildcard source / tag


class ScheduleError(ValueError):
    """A schedule that cannot run (deadlock, unmatched messages); readable message. Callers that
    read the schedule from a file or a trace say which one."""
