"""The kernel's view of each sender: cwnd and ssthresh from tcp_probe with
the capture's bytes in flight beside them and the congestion states shaded;
RTT samples with the kernel's srtt; the RTO over time with its timeouts."""
from __future__ import annotations

from .axes import band, color, empty, finish, one_panel, panels

# the states that change cwnd; Disorder (SACKs or duplicate ACKs seen, cwnd
# kept) would cover most of a run with SACK and is left unshaded
STATE_COLORS = {"CWR": "lightblue", "Recovery": "orange", "Loss": "tomato"}


def draw_cwnd(doc: dict):
    senders = doc["senders"]
    fig, axes = panels(max(1, len(senders)))
    for i, (ax, f) in enumerate(zip(axes, senders)):
        mss = f["mss"] or 1
        band(ax, f["cwnd"], i, "cwnd (tcp_probe)")
        band(ax, f["ssthresh"], i, "ssthresh (tcp_probe)", linestyle="--")
        if f["in_flight"]:
            ax.plot([r[0] for r in f["in_flight"]], [r[1] / mss for r in f["in_flight"]],
                    color="0.4", linewidth=0.8, drawstyle="steps-post",
                    label=f"bytes in flight / MSS {mss} (capture)")
        shown = set()
        for a, b, state in f["states"]:
            if state not in STATE_COLORS:
                continue
            ax.axvspan(a, b, color=STATE_COLORS[state], alpha=0.35, linewidth=0,
                       label=None if state in shown else state)
            shown.add(state)
        ax.set_ylabel("packets")
        # y given: matplotlib then skips measuring every tick to place the
        # title above them (the time axis's labels are only at the bottom)
        ax.set_title(f["label"], fontsize="medium", loc="left", y=1.0)
        if not (f["cwnd"] or f["in_flight"]):
            empty(ax, doc["empty"]["probe"] or doc["empty"]["pcap"])
        elif doc["empty"]["probe"] and i == 0:
            ax.set_title(f"no cwnd: {doc['empty']['probe']}", fontsize="small",
                         color="0.35", y=1.0, loc="right")
    if not senders:
        empty(axes[0], "no connection carried data")
    what = "Congestion window"
    if doc.get("more_senders"):
        what += f" ({doc['more_senders']} more flows not drawn: choose them with --conn)"
    finish(fig, axes, doc, what)
    return fig


def draw_rtt(doc: dict):
    def paint(ax):
        for i, f in enumerate(doc["senders"]):
            band(ax, f["samples"], i, f"{f['label']}: RTT samples (capture)",
                 linestyle="none", marker=".", markersize=2)
            band(ax, f["srtt"], i, f"{f['label']}: srtt (tcp_probe)", linestyle="--")
    return one_panel(doc, "Round-trip time", "RTT (ms)", paint)


def draw_rto(doc: dict):
    def paint(ax):
        for i, f in enumerate(doc["senders"]):
            band(ax, f["rto"], i, f"{f['label']}: RTO (tcp_probe)")
            if not f["timeouts"]:
                continue
            what = "timeouts" if f["source"] == "tcp_probe" else \
                "timeouts (silence before the resend)"
            ax.plot([t for t, _, _ in f["timeouts"]], [ms for _, ms, _ in f["timeouts"]],
                    "x", color=color(i), markersize=8, label=f"{f['label']}: {what}")
            for t, ms, backoff in f["timeouts"]:
                if backoff > 1:
                    ax.annotate(f"\u00d72^{backoff - 1}", (t, ms), fontsize="x-small",
                                xytext=(3, 3), textcoords="offset points")
    return one_panel(doc, "Retransmission timeout (x: a timeout; \u00d72^k: its backoff)",
                     "retransmission timeout (ms)", paint)
