"""What every workload shares: its command line (a fine or coarse setting, overridable per value)
and the telling of its self-check (`verdict`).

    ns = workload_args.parse(__doc__, {"fine": {"size": 256, "iters": 3000}, "coarse": {...}},
                        fine="256 x 256 grid, ...", coarse="...",
                        helps={"size": "interior grid size N", "iters": "timed iterations"})

Standard library only, beside the programs (a script's own folder is on its path)."""

from __future__ import annotations

import argparse
from typing import Any


def parse(doc: str, settings: dict[str, dict[str, int]], fine: str, coarse: str,
          helps: dict[str, str], minimum: dict[str, int] | None = None,
          argv: list[str] | None = None) -> argparse.Namespace:
    """`--fine` (the default) or `--coarse`, then one `--NAME` per key of the settings, each
    overriding its value; every value must be at least its `minimum` (default 1)."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    g = p.add_mutually_exclusive_group()
    g.add_argument("--fine", dest="setting", action="store_const", const="fine",
                   help=f"{fine} (default)")
    g.add_argument("--coarse", dest="setting", action="store_const", const="coarse", help=coarse)
    for key, text in helps.items():
        p.add_argument(f"--{key}", type=int, help=f"{text} (overrides the setting)")
    p.set_defaults(setting="fine")
    ns = p.parse_args(argv)
    for key, value in settings[ns.setting].items():
        if getattr(ns, key) is None:
            setattr(ns, key, value)
    for key in helps:
        low = (minimum or {}).get(key, 1)
        if getattr(ns, key) < low:
            p.error(f"--{key} must be at least {low}")
    return ns


def verdict(comm: Any, ok: bool, summary: str | None) -> int:
    """Rank 0's self-check told and shared: rank 0 (which passes `summary`) prints
    `SUMMARY: verified` or `SUMMARY: WRONG`; every rank returns the exit code, 0 or 1."""
    if summary is not None:
        print(f"{summary}: {'verified' if ok else 'WRONG'}", flush=True)
    return 0 if comm.bcast(ok, root=0) else 1
