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

    rows = sum(int(x) for x in (manifest.get("events") or []) if isinstance(x, (int, float)))
    avail = available_memory()
    if not avail or fits_in_memory(rows, avail, bytes_per_row):
        return None, ""
    return window_for(int(manifest.get("ranks") or 1), avail), (
        f"its {rows} events need about {_gib(rows * bytes_per_row)} in memory, "
        f"{_gib(avail)} are available: it is streamed")


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"
