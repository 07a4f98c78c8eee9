"""PNG plots of a capture's time series: throughput, bytes in flight (the
cwnd estimate), RTT samples and the inferred RTO timeline, one panel each,
sharing the time axis. Series are reduced in SQL to at most POINTS points
per flow, so plotting a capture of millions of packets stays quick."""
from __future__ import annotations

from pathlib import Path

from tcpvar.analyzers import series
from tcpvar.analyzers.fairness import choose, flows

POINTS = 2000       # per flow and panel


def plot_capture(con, doc: dict, out_dir: str) -> list[Path]:
    """Write DIR/<capture name>.png for one analysed capture; return the paths."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    capture_id = doc["capture_id"]
    chosen = choose(flows(doc["connections"]), None)
    bucket = max((doc["duration_s"] or 1.0) / POINTS, 1e-6)
    fig, axes = plt.subplots(4, 1, sharex=True, figsize=(11, 11), constrained_layout=True)
    tput, infl, rtt, rto = axes
    markers = {"timeout": "x", "fast": "o"}
    for i, f in enumerate(chosen):
        color = f"C{i % 10}"
        label = f"#{f['conn']} {f['sender']}"
        rows = series.throughput(con, capture_id, f["conn"], f["dir"])
        if rows:
            tput.plot([r[0] for r in rows], [r[2] / 1e6 for r in rows], color=color,
                      label=label, linewidth=1)
        rows = series.bucketed(con, "cwnd", capture_id, f["conn"], f["dir"], bucket)
        infl.plot([r[0] for r in rows], [r[1] / 1e3 for r in rows], color=color, linewidth=1,
                  drawstyle="steps-post")   # flat while idle, not a ramp across it
        rows = series.bucketed(con, "rtt", capture_id, f["conn"], f["dir"], bucket)
        rtt.plot([r[0] for r in rows], [r[1] for r in rows], ".", color=color, markersize=2)
        for kind, marker in markers.items():
            rows = series.rto_timeline(con, capture_id, f["conn"], f["dir"], kind)
            if rows:
                rto.plot([r[0] for r in rows], [r[1] for r in rows], marker, color=color,
                         linestyle="none", label=f"#{f['conn']} {kind}")
    tput.set_ylabel(f"goodput (Mbit/s)\nper {doc['interval_ms']:g} ms")
    infl.set_ylabel("bytes in flight (kB)")
    rtt.set_ylabel("RTT (ms)")
    rto.set_ylabel("silence before\nresend (ms)")  # for a timeout: the timer's value
    rto.set_xlabel("time since capture start (s)")
    for ax in axes:
        ax.grid(True, alpha=0.3)
    if chosen:
        tput.legend(loc="upper right", fontsize="small")
    if rto.get_legend_handles_labels()[0]:
        rto.legend(loc="upper right", fontsize="small")
    fig.suptitle(f"{Path(doc['path']).name}: {len(chosen)} flow{'s' if len(chosen) != 1 else ''} "
                 f"(x timeout, o fast retransmit)")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    png = out / f"{Path(doc['path']).name}.png"
    fig.savefig(png, dpi=100)
    plt.close(fig)
    return [png]
