"""hindsight replay engine: recompute a trace's timeline under another network or CPU speed.

Public API (docs/replay.md)::

    prep = replay.prepare(trace_dir)                       # read, match, cache
    res = replay.run(prep, "loggps", {"L": "2.5us"}, compute_scale=1.0)
    res.makespan_ns, res.breakdown(), res.events_frame(), res.write(out_dir)
    df = replay.sweep(prep, "loggp", vary=["G=0.01ns..10ns:log:25"])
    pairs, problems = replay.matching.match_messages(table)
    df = replay.load(trace_dir)                              # tidy pandas frame (docs/interop.md)
"""

import hindsight  # noqa: F401  (first: its allocator setting must precede pyarrow's import)
from replay.engine import Result, run, sweep
from replay.frame import load
from replay.matching import MessageMatch, match_messages
from replay.models import ParamError
from replay.errors import NoPredictionError
from replay.prepare import Prepared, ReplayError, prepare

__all__ = ["prepare", "run", "sweep", "Result", "Prepared", "ReplayError", "NoPredictionError",
           "ParamError",
           "match_messages", "MessageMatch", "load"]
