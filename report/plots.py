"""PNG plots of a capture's time series: throughput, bytes in flight (the
cwnd estimate), RTT samples and the inferred RTO timeline, one panel each,
sharing the time axis, plus the NGWA window next to the receiver's advertised
window when the flows carry the NGWA option. The data comes reduced from
analyzers.series.capture_figure (at most a few thousand points per flow), so
plotting a capture of millions of packets stays quick; this module only
draws."""
from __future__ import annotations

from pathlib import Path


def plot_capture(figure: dict, out_dir: str) -> list[Path]:
    """Write DIR/<capture name>.png of one capture's figure data; return the paths."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    chosen = figure["flows"]
    ngwa = any(f["ngwa"] for f in chosen)
    panels = 5 if ngwa else 4
    fig, axes = plt.subplots(panels, 1, sharex=True, figsize=(11, 11 + 2.5 * (panels - 4)),
                             constrained_layout=True)
    tput, infl, rtt, rto = axes[:4]
    markers = {"timeout": "x", "fast": "o"}
    for i, f in enumerate(chosen):
        color = f"C{i % 10}"
        label = f"#{f['conn']} {f['sender']}"
        rows = f["throughput"]
        if rows:
            tput.plot([r[0] for r in rows], [r[2] / 1e6 for r in rows], color=color,
                      label=label, linewidth=1)
        rows = f["in_flight"]
        infl.plot([r[0] for r in rows], [r[1] / 1e3 for r in rows], color=color, linewidth=1,
                  drawstyle="steps-post")   # flat while idle, not a ramp across it
        rows = f["rtt"]
        rtt.plot([r[0] for r in rows], [r[1] for r in rows], ".", color=color, markersize=2)
        for kind, marker in markers.items():
            rows = f["rto"][kind]
            if rows:
                rto.plot([r[0] for r in rows], [r[1] for r in rows], marker, color=color,
                         linestyle="none", label=f"#{f['conn']} {kind}")
        if f["ngwa"]:
            points, advertised = f["ngwa"], f["advertised"]
            axes[4].plot([r[0] for r in points], [r[1] / 1e3 for r in points], color=color,
                         linewidth=1, drawstyle="steps-post", label=f"#{f['conn']} NGWA")
            axes[4].plot([r[0] for r in advertised], [r[1] / 1e3 for r in advertised],
                         color=color, linewidth=1, linestyle="--", drawstyle="steps-post",
                         label=f"#{f['conn']} receiver's window")
    if ngwa:
        axes[4].set_ylabel("NGWA window and\nadvertised window (kB)")
        axes[4].legend(loc="upper right", fontsize="small")
    tput.set_ylabel(f"goodput (Mbit/s)\nper {figure['interval_ms']:g} ms")
    infl.set_ylabel("bytes in flight (kB)")
    rtt.set_ylabel("RTT (ms)")
    rto.set_ylabel("silence before\nresend (ms)")  # for a timeout: the timer's value
    axes[-1].set_xlabel("time since capture start (s)")
    for ax in axes:
        ax.grid(True, alpha=0.3)
    if chosen:
        tput.legend(loc="upper right", fontsize="small")
    if rto.get_legend_handles_labels()[0]:
        rto.legend(loc="upper right", fontsize="small")
    name = Path(figure["name"]).name
    fig.suptitle(f"{name}: {len(chosen)} flow{'s' if len(chosen) != 1 else ''} "
                 f"(x timeout, o fast retransmit)")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    png = out / f"{name}.png"
    fig.savefig(png, dpi=100)
    plt.close(fig)
    return [png]
