"""PNG plots of a capture's time series: throughput, bytes in flight (the
cwnd estimate), RTT samples and the inferred RTO timeline, one panel each,
sharing the time axis. Series are reduced in SQL to at most POINTS points
per flow, so plotting a capture of millions of packets stays quick."""
from __future__ import annotations

from pathlib import Path

from tcpvar.analyzers.fairness import choose, flows

POINTS = 2000       # per flow and panel


def _series(con, view: str, value: str, capture_id: int, conn: int, direction: int,
            span_s: float):
    """(t, max value) per time bucket of one flow from a view with t_s."""
    bucket = max(span_s / POINTS, 1e-6)
    return con.execute(
        f"SELECT floor(t_s / $b) * $b AS t, max({value}) FROM {view} "
        "WHERE capture_id = $c AND conn = $n AND dir = $d GROUP BY 1 ORDER BY 1",
        {"b": bucket, "c": capture_id, "n": conn, "d": direction}).fetchall()


def plot_capture(con, doc: dict, out_dir: str) -> list[Path]:
    """Write DIR/<capture name>.png for one analysed capture; return the paths."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    capture_id = doc["capture_id"]
    chosen = choose(flows(doc["connections"]), None)
    span = doc["duration_s"] or 1.0
    fig, axes = plt.subplots(4, 1, sharex=True, figsize=(11, 11), constrained_layout=True)
    tput, infl, rtt, rto = axes
    markers = {"timeout": "x", "fast": "o"}
    for i, f in enumerate(chosen):
        color = f"C{i % 10}"
        label = f"#{f['conn']} {f['sender']}"
        rows = con.execute(
            "SELECT t_s, goodput_bps FROM throughput WHERE capture_id = $1 AND conn = $2 "
            "AND dir = $3 ORDER BY bin", [capture_id, f["conn"], f["dir"]]).fetchall()
        if rows:
            tput.plot([r[0] for r in rows], [r[1] / 1e6 for r in rows], color=color,
                      label=label, linewidth=1)
        rows = _series(con, "cwnd_estimate", "bytes_in_flight", capture_id, f["conn"],
                       f["dir"], span)
        infl.plot([r[0] for r in rows], [r[1] / 1e3 for r in rows], color=color, linewidth=1)
        rows = _series(con, "rtt_samples", "rtt_ms", capture_id, f["conn"], f["dir"], span)
        rtt.plot([r[0] for r in rows], [r[1] for r in rows], ".", color=color, markersize=2)
        for kind, marker in markers.items():
            rows = con.execute(
                "SELECT t_s, silence_ms FROM rto_timeline WHERE capture_id = $1 AND conn = $2 "
                "AND dir = $3 AND kind = $4", [capture_id, f["conn"], f["dir"], kind]).fetchall()
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
