"""Replay results of the fixed trace corpus, for the regression test ``tests/test_corpus.py``.

The folders beside this file are real traces collected once with ``hindsight collect`` (the
papers' applications, the workload suite and two test programs). ``digest(trace_dir)`` replays
one under every model and a few options and returns, per configuration, the makespan, each
rank's end and two checksums of the per-row replayed times (their sum, and their sum weighted
by row index, so a reordering shows too). ``expected.json`` holds the digests the replay gave
when the corpus was written; refactors must leave them unchanged.

    python tests/corpus/digest.py            # compare with expected.json, print the differences
    python tests/corpus/digest.py --update   # rewrite expected.json (a deliberate model change)
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
EXPECTED = HERE / "expected.json"

# name -> (model, params, run options)
CONFIGS: dict[str, tuple[str, dict[str, str], dict[str, Any]]] = {
    "loggp": ("loggp", {}, {}),
    "loggps": ("loggps", {}, {}),
    "loggps-slow": ("loggps", {"L": "20us", "G": "1ns", "S": "4KiB", "o": "3us"}, {}),
    "loggps-scaled": ("loggps", {}, {"compute_scale": 0.5}),
    "loggps-cpu": ("loggps", {}, {"cpu_time": True}),
    "loggopsim": ("loggopsim", {}, {}),
    "hockney": ("hockney", {}, {}),
    "mm1": ("mm1", {}, {}),
    "measured": ("measured", {}, {}),
}


def traces() -> list[Path]:
    return sorted(p for p in HERE.iterdir() if (p / "manifest.json").is_file())


def _checksums(values: Any) -> list[float]:
    import numpy as np

    v = np.asarray(values, dtype=float)
    return [float(v.sum()), float((v * np.arange(len(v))).sum())]


def digest(trace_dir: Path) -> dict[str, Any]:
    import replay

    prep = replay.prepare(trace_dir, use_cache=False)   # the replay itself, not a cache
    out: dict[str, Any] = {}
    for name, (model, params, opts) in CONFIGS.items():
        res = replay.run(prep, model, params, **opts)
        out[name] = {
            "makespan_ns": res.makespan_ns,
            "rank_end_ns": [float(x) for x in res.rank_end_ns],
            "row_start": _checksums(res.row_start_ns),
            "row_end": _checksums(res.row_end_ns),
        }
    return out


def digest_all() -> dict[str, Any]:
    return {p.name: digest(p) for p in traces()}


def differences(got: Any, want: Any, where: str = "", rtol: float = 1e-12) -> list[str]:
    """Human-readable differences between two digests (numbers compared to ``rtol``)."""
    if isinstance(want, dict):
        if not isinstance(got, dict) or set(got) != set(want):
            return [f"{where}: keys {sorted(got) if isinstance(got, dict) else got} != "
                    f"{sorted(want)}"]
        return [d for k in want for d in differences(got[k], want[k], f"{where}/{k}", rtol)]
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return [f"{where}: length differs"]
        return [d for i, (g, w) in enumerate(zip(got, want))
                for d in differences(g, w, f"{where}[{i}]", rtol)]
    if not math.isclose(got, want, rel_tol=rtol, abs_tol=1e-6):
        return [f"{where}: {got!r} != {want!r}"]
    return []


def main(argv: list[str]) -> int:
    got = digest_all()
    if "--update" in argv:
        EXPECTED.write_text(json.dumps(got, indent=1) + "\n")
        print(f"wrote {EXPECTED} ({len(got)} traces x {len(CONFIGS)} configurations)")
        return 0
    diffs = differences(got, json.loads(EXPECTED.read_text()))
    print("\n".join(diffs[:50]) if diffs else f"identical: {len(got)} traces x {len(CONFIGS)}")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
