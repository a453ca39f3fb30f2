"""A trace as a tidy pandas frame: ``replay.load`` (docs/interop.md)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa

from hindsight import trace as tf


def load(trace: Path | str | pa.Table) -> pd.DataFrame:
    """A tidy frame of a trace: one row per event in (rank, seq) order, ``op``/``region`` as
    categoricals, times in ns since the trace's first event and ``duration_ns``."""
    table = tf.read_trace(trace).table if not isinstance(trace, pa.Table) else trace
    df = table.to_pandas()
    df = df.sort_values(["rank", "seq"], kind="stable").reset_index(drop=True)
    t0 = int(df["t_start"].min()) if len(df) else 0
    df["t_start"] = df["t_start"] - t0
    df["t_end"] = df["t_end"] - t0
    df["duration_ns"] = df["t_end"] - df["t_start"]
    for c in ("op", "region"):
        df[c] = df[c].astype("category")
    return df
