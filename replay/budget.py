"""How much memory a replay takes, and when a trace is streamed instead (``replay.streamed``).
Plain arithmetic: the command line asks before it loads NumPy or numba."""

from __future__ import annotations

from typing import Any

#: the bytes per trace row the in-memory replay holds at its peak (README, "Large traces": 129-141
#: measured at 1e8 rows), rounded up
BYTES_PER_ROW = 160


def fits_in_memory(rows: int, available: int) -> bool:
    """Whether an in-memory replay of ``rows`` rows fits, with room to spare, in ``available``
    bytes."""
    return rows * BYTES_PER_ROW <= 0.7 * available


#: the bytes a streamed replay holds per row of its window: the rows read, the window prepared to
#: find its cut, the segment prepared and replayed (measured: 1.9 GiB for windows of 2.1 M rows
#: of a 256-rank ring, 0.5 GiB of it the interpreter, NumPy, numba and the 256 open files)
WINDOW_BYTES_PER_ROW = 800


def window_for(nranks: int, available: int) -> int:
    """Rows per rank of a window that keeps a streamed replay within about a quarter of
    ``available`` bytes."""
    w = int(0.25 * available / max(nranks, 1) / WINDOW_BYTES_PER_ROW)
    return int(min(max(w, 1 << 12), 1 << 20))


def streamed_window(manifest: dict[str, Any]) -> tuple[int | None, str]:
    """(rows per rank of a streamed window, why) when the trace of ``manifest`` would not fit
    in this machine's memory (``hindsight.system.available_memory``), else (None, "")."""
    from hindsight.system import available_memory

    rows = sum(int(x) for x in (manifest.get("events") or []) if isinstance(x, (int, float)))
    avail = available_memory()
    if not avail or fits_in_memory(rows, avail):
        return None, ""
    return window_for(int(manifest.get("ranks") or 1), avail), (
        f"its {rows} events need about {_gib(rows * BYTES_PER_ROW)} in memory, "
        f"{_gib(avail)} are available: it is streamed")


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"
