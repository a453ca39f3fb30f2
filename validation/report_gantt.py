"""The report's per-rank timeline of one run, measured vs replayed under LogGPS (a matplotlib
PNG: one bar per event, too many to label one by one)."""

from __future__ import annotations

from pathlib import Path


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update({"font.size": 10, "axes.grid": True, "grid.alpha": 0.3})
    return plt


def plot_gantt(vdir: Path, cells: list[dict], path: Path) -> Path | None:
    """Measured vs replayed (LogGPS) per-rank timeline of one run."""
    import replay
    from hindsight import trace as tf
    from validation.profiles import read_profile, replay_params

    cand = [c for c in cells if not c["baseline"] and c["ranks"] >= 2]
    if not cand:
        return None
    c = max(cand, key=lambda c: (c["ranks"], c["paradigm"] == "pipeline"))
    trace = Path(vdir) / c["traces"][c["replayed_rep"]]
    prep = replay.prepare(trace)
    prof_path = Path(vdir) / c["profile"]
    res = replay.run(prep, "loggps",
                     profile=replay_params("loggps", read_profile(prof_path), prof_path))
    ev = res.events_frame()
    tab = tf.read_trace(trace, columns=["rank", "seq", "region"]).to_pandas()
    ev = ev.merge(tab, on=["rank", "seq"], how="left")
    plt = _plt()
    colors = {"task": "tab:green", "merge": "tab:blue", "io": "tab:gray", "divide": "tab:olive",
              "conquer": "tab:green", "combine": "tab:blue", "send_to_server": "tab:purple"}
    fig, axes = plt.subplots(2, 1, figsize=(11, 2.2 + 0.9 * prep.nranks), sharex=True)
    for ax, (s, e, title) in zip(axes, (("measured_start_ns", "measured_end_ns", "measured"),
                                        ("start_ns", "end_ns", "replayed (loggps)"))):
        for _, r in ev.iterrows():
            if r.op == "region":
                col = colors.get(str(r.region), "tab:cyan")
                y, h = r["rank"] - 0.35, 0.7
            else:
                col = "tab:red" if r.op in ("Recv", "Wait", "Waitall", "Sendrecv_recv",
                                             "Sendrecv_send", "Bcast", "Comm_split") else "tab:orange"
                y, h = r["rank"] - 0.15, 0.3
            ax.broken_barh([(r[s] / 1e6, max((r[e] - r[s]) / 1e6, 0.001))], (y, h), color=col)
        ax.set_yticks(range(prep.nranks), [f"rank {i}" for i in range(prep.nranks)])
        ax.invert_yaxis()
        ax.set_title(f"{title}: {c['app']} / {c['paradigm']} P={c['ranks']} "
                     f"({c['traces'][c['replayed_rep']]})", fontsize=9)
    axes[-1].set_xlabel("time since the first event (ms)")
    from matplotlib.patches import Patch
    handles = [Patch(color=v, label=k) for k, v in colors.items()
               if k in set(ev.region.dropna().astype(str))]
    handles += [Patch(color="tab:red", label="MPI wait/receive/collective"),
                Patch(color="tab:orange", label="MPI send")]
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.legend(handles=handles, fontsize=8, ncol=len(handles), loc="lower center")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def safe_gantt(vdir: Path, cells: list[dict], path: Path) -> Path | None:
    """The timeline needs the trace and profile files; a report of a copied errors.csv and
    cells/ without them simply has no timeline."""
    try:
        return plot_gantt(vdir, cells, path)
    except Exception as exc:  # noqa: BLE001 - any missing/unreadable input: skip the plot
        print(f"report: no timeline plot ({type(exc).__name__}: {exc})")
        return None
