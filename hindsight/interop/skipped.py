"""What an importer could not put into the trace, counted by kind.

Importers count each thing they skip under a singular kind ("RMA event", "non-MPI location
(OpenMP)"); the manifest keeps the counts (``import.skipped``) and ``hindsight import`` prints
them as one line, ``skipped: 12 RMA events, 2 non-MPI locations (OpenMP)``.
"""

from __future__ import annotations

_PREPOSITIONS = ("on", "in", "of", "with", "without")


def plural(kind: str, n: int) -> str:
    """``n kind``, the kind's noun (the word before its first preposition or parenthesis) in the
    plural unless n is 1 ("MPI call without an op" -> "MPI calls without an op", "non-MPI
    location (OpenMP)" -> "non-MPI locations (OpenMP)")."""
    if n == 1:
        return f"1 {kind}"
    words = kind.split(" ")
    at = next((k for k, w in enumerate(words)
               if k > 0 and (w in _PREPOSITIONS or w.startswith("("))), len(words)) - 1
    words[at] += "es" if words[at].endswith("s") else "s"
    return f"{n} " + " ".join(words)


def skipped_line(skipped: dict[str, int]) -> str | None:
    """The one line for ``skipped`` (kind -> count), largest first; None if nothing was."""
    items = sorted(((k, int(n)) for k, n in (skipped or {}).items() if n),
                   key=lambda kv: (-kv[1], kv[0]))
    if not items:
        return None
    return "skipped: " + ", ".join(plural(k, n) for k, n in items)
