"""PNG plots of a capture's time series: throughput, bytes in flight (the
cwnd estimate), RTT samples and the inferred RTO timeline, one panel each,
sharing the time axis, plus the NGWA window next to the receiver's advertised
window when the flows carry the NGWA option. Series are reduced in SQL to at
most POINTS points per flow, so plotting a capture of millions of packets
stays quick."""
from __future__ import annotations

from pathlib import Path

from tcpvar.analyzers import series
from tcpvar.analyzers.fairness import choose, flows

POINTS = 2000       # per flow and panel

# NGWA window of a sender's packets (set ones only) and the window its receiver
# advertises (SYNs and ACKs), smallest per time bucket: the constraint that held
_NGWA = ("SELECT floor(t_s / $b) * $b AS t, min(ngwa_window) FROM ngwa_windows "
         "WHERE capture_id = $c AND conn = $n AND dir = $d AND NOT ngwa_unset "
         "GROUP BY 1 ORDER BY 1")
_ADVERTISED = ("SELECT floor(t_s / $b) * $b AS t, min(win) FROM packet_marks "
               "WHERE capture_id = $c AND conn = $n AND dir = 1 - $d AND flags & 18 <> 0 "
               "GROUP BY 1 ORDER BY 1")


def _ngwa_series(con, capture_id: int, flow: dict, bucket: float):
    """(NGWA points, receiver's advertised-window points) of one flow."""
    args = {"b": bucket, "c": capture_id, "n": flow["conn"], "d": flow["dir"]}
    ngwa = con.execute(_NGWA, args).fetchall()
    return ngwa, (con.execute(_ADVERTISED, args).fetchall() if ngwa else [])


def plot_capture(con, doc: dict, out_dir: str) -> list[Path]:
    """Write DIR/<capture name>.png for one analysed capture; return the paths."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    capture_id = doc["capture_id"]
    chosen = choose(flows(doc["connections"]), None)
    bucket = max((doc["duration_s"] or 1.0) / POINTS, 1e-6)
    ngwa = {f["conn"]: _ngwa_series(con, capture_id, f, bucket) for f in chosen}
    ngwa = {k: v for k, v in ngwa.items() if v[0]}
    panels = 5 if ngwa else 4
    fig, axes = plt.subplots(panels, 1, sharex=True, figsize=(11, 11 + 2.5 * (panels - 4)),
                             constrained_layout=True)
    tput, infl, rtt, rto = axes[:4]
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
        if f["conn"] in ngwa:
            points, advertised = ngwa[f["conn"]]
            axes[4].plot([r[0] for r in points], [r[1] / 1e3 for r in points], color=color,
                         linewidth=1, drawstyle="steps-post", label=f"#{f['conn']} NGWA")
            axes[4].plot([r[0] for r in advertised], [r[1] / 1e3 for r in advertised],
                         color=color, linewidth=1, linestyle="--", drawstyle="steps-post",
                         label=f"#{f['conn']} receiver's window")
    if ngwa:
        axes[4].set_ylabel("NGWA window and\nadvertised window (kB)")
        axes[4].legend(loc="upper right", fontsize="small")
    tput.set_ylabel(f"goodput (Mbit/s)\nper {doc['interval_ms']:g} ms")
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
    fig.suptitle(f"{Path(doc['path']).name}: {len(chosen)} flow{'s' if len(chosen) != 1 else ''} "
                 f"(x timeout, o fast retransmit)")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    png = out / f"{Path(doc['path']).name}.png"
    fig.savefig(png, dpi=100)
    plt.close(fig)
    return [png]
