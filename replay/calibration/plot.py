"""The calibration plot: measured one-way time vs message size with the fitted curves, log-log."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from hindsight.outputs import plot_format
from hindsight.system import write_atomic
from replay.calibration.fit import loggps_one_way


def plot_profiles(profiles: list[dict], path: Path | str) -> None:
    """One PNG; several profiles (e.g. shm and tcp) share the axes, one colour each."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 5))
    colours = ["tab:blue", "tab:red", "tab:green", "tab:purple"]
    for prof, c in zip(profiles, colours):
        f = prof["fit"]
        k = np.asarray(f["sizes"], float)
        t = np.asarray(f["one_way_s"], float) * 1e6
        spread = np.asarray(f["spread"], float) * 1e6
        name = prof["measured_on"]["transport"]
        # IQR as an error bar around the median, clipped so the log axis stays valid
        lo = np.minimum(spread / 2, t * 0.95)
        ax.errorbar(k, t, yerr=[lo, spread / 2], fmt="o", ms=4, color=c, capsize=2,
                    label=f"{name}: measured median (bars: IQR)")
        kk = np.logspace(0, math.log10(k.max()), 400)
        lg = prof["loggps"]
        ax.plot(kk, loggps_one_way(kk, lg) * 1e6, "-", color=c, lw=1.3,
                label=f"{name}: LogGPS fit (R²={f['r2_loggp']:.3f})")
        h = prof["hockney"]
        ax.plot(kk, (h["l"] + h["g"] * kk) * 1e6, "--", color=c, lw=1.1,
                label=f"{name}: Hockney fit (R²={f['r2_hockney']:.3f})")
        if math.isfinite(lg["S"]):
            ax.axvline(lg["S"], color=c, ls=":", lw=0.9)
            ax.annotate(f"S={int(lg['S'])} B", (lg["S"], ax.get_ylim()[0] if False else t.min()),
                        color=c, fontsize=8, rotation=90, va="bottom", ha="right")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size k (bytes)")
    ax.set_ylabel("one-way time (µs) = round trip / 2")
    lib = profiles[0]["measured_on"]["mpi_library"]
    ax.set_title(f"hindsight calibrate: ping-pong, {' '.join(lib.split())}", fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7.5, loc="upper left")
    fig.tight_layout()
    write_atomic(path, lambda tmp: fig.savefig(tmp, dpi=110, format=plot_format(path)))
    plt.close(fig)
