"""How much memory a replay takes, and when a trace is streamed instead (``replay.streamed``).
Plain arithmetic: the command line asks before it loads NumPy or numba."""

from __future__ import annotations

from typing import Any

#: the bytes per trace row `hindsight replay` holds at its peak in memory (per-event times, the
#: critical path and the noise lines: 347 measured on a 1e7-event ring, cold), rounded up
REPLAY_BYTES_PER_ROW = 360
#: the same for `hindsight trace check` (143 measured on that ring)
CHECK_BYTES_PER_ROW = 150


def fits_in_memory(rows: int, available: int, bytes_per_row: int = REPLAY_BYTES_PER_ROW) -> bool:
    """Whether ``rows`` rows at ``bytes_per_row`` fit, with room to spare, in ``available``
    bytes."""
    return rows * bytes_per_row <= 0.7 * available


#: the bytes a streamed replay holds per row of its window: the rows read, the window prepared to
#: find its cut, the segment prepared and replayed (measured: 1.9 GiB for windows of 2.1 M rows
#: of a 256-rank ring, 0.5 GiB of it the interpreter, NumPy, numba and the 256 open files)
WINDOW_BYTES_PER_ROW = 800


def window_for(nranks: int, available: int) -> int:
    """Rows per rank of a window that keeps a streamed replay within about a quarter of
    ``available`` bytes."""
    w = int(0.25 * available / max(nranks, 1) / WINDOW_BYTES_PER_ROW)
    return int(min(max(w, 1 << 12), 1 << 20))


def max_window(manifest: dict[str, Any]) -> int | None:
    """The most rows per rank a streamed window of the trace of ``manifest`` may grow to where
    no consistent cut comes sooner: what about 90 % of this machine's available memory holds
    (None: not known)."""
    from hindsight.system import available_memory

    avail = available_memory()
    if not avail:
        return None
    nranks = int(manifest.get("ranks") or 1)
    return max(int(0.9 * avail / nranks / WINDOW_BYTES_PER_ROW), 1 << 12)


def streamed_window(manifest: dict[str, Any], bytes_per_row: int = REPLAY_BYTES_PER_ROW
                    ) -> tuple[int | None, str]:
    """(rows per rank of a streamed window, why) when the trace of ``manifest`` would not fit
    in this machine's memory (``hindsight.system.available_memory``) at ``bytes_per_row``,
    else (None, "")."""
    from hindsight.system import available_memory

    rows = _rows(manifest)
    avail = available_memory()
    if not avail or fits_in_memory(rows, avail, bytes_per_row):
        return None, ""
    return window_for(int(manifest.get("ranks") or 1), avail), (
        f"its {rows} events need about {_gib(rows * bytes_per_row)} in memory, "
        f"{_gib(avail)} are available: it is streamed")


#: segments past which a streamed command says its --window is small: each segment costs a
#: replay's or a check's set-up (some ms; --window 16 on 600 k events, 20 k segments: 61 s,
#: against 1.2 s in memory)
MANY_SEGMENTS = 1000


def small_window_note(manifest: dict[str, Any], window: int) -> str | None:
    """A note when ``--window`` cuts the trace of ``manifest`` into more than about
    ``MANY_SEGMENTS`` segments (the largest rank's events by ``window``), naming the window
    this machine's memory would take (``window_for``); None otherwise."""
    from hindsight.system import available_memory

    most = max((int(x) for x in (manifest.get("events") or []) if isinstance(x, (int, float))),
               default=0)
    if most // max(window, 1) <= MANY_SEGMENTS:
        return None
    better = window_for(int(manifest.get("ranks") or 1), available_memory() or 1 << 30)
    return (f"--window {window}: about {most // window} segments (its largest rank has {most} "
            "events), each with a set-up of its own, so this takes much longer than larger "
            "windows" + (f"; this machine's memory takes --window {better}" if better > window
                         else ""))


#: the bytes per trace row an export holds at its peak, the whole timeline in memory, rounded
#: up from what a 4 M-row 8-rank trace took: Perfetto 286, pipit 375, GOAL 363; the OTF2 export
#: reads one rank at a time and is not listed
EXPORT_BYTES_PER_ROW = {"perfetto": 300, "pipit": 400, "goal": 400}
#: the same for a replayed timeline (``export --model``), which every format holds whole, with
#: the replay's own arrays: Perfetto 683, pipit 770, OTF2 706 on that trace
REPLAYED_EXPORT_BYTES_PER_ROW = {"perfetto": 750, "pipit": 800, "otf2": 750}


#: the same for a sweep, which prepares the whole trace (232 on that trace, 2 configurations)
SWEEP_BYTES_PER_ROW = 250


def export_too_large(manifest: dict[str, Any], fmt: str, replayed: bool) -> str | None:
    """Why an export to ``fmt`` of the trace of ``manifest`` (its replayed timeline when
    ``replayed``) cannot fit in memory (``too_large``), or None; None as well for a format
    that reads a rank at a time."""
    per_row = (REPLAYED_EXPORT_BYTES_PER_ROW if replayed else EXPORT_BYTES_PER_ROW).get(fmt)
    if per_row is None:
        return None
    return too_large(manifest, per_row,
                     f"the export{' of its replayed timeline' if replayed else ''} to {fmt}")


def too_large(manifest: dict[str, Any], bytes_per_row: int, doing: str) -> str | None:
    """Why ``doing``, which holds the trace of ``manifest`` whole at ``bytes_per_row``, cannot
    fit in this machine's memory (``hindsight.system.available_memory``): it needs more than
    is available. None when it fits or the available memory is not known."""
    from hindsight.system import available_memory

    avail = available_memory()
    rows = _rows(manifest)
    if not avail or rows * bytes_per_row <= avail:
        return None
    return (f"{doing} holds its {rows} events in memory, about {_gib(rows * bytes_per_row)}, "
            f"and {_gib(avail)} are available")


def _rows(manifest: dict[str, Any]) -> int:
    """The trace's rows: the sum of the manifest's per-rank ``events``."""
    return sum(int(x) for x in (manifest.get("events") or []) if isinstance(x, (int, float)))


def _gib(n: float) -> str:
    """Bytes in the largest of GiB, MiB, KiB of which there are a tenth or more (a small
    HINDSIGHT_MEMORY would read as 0.0 GiB)."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size / 10:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"
