"""The time-sequence graph (tcptrace -S, Wireshark's tcptrace graph): the
sender's segments as vertical bars over the sequence numbers they carry,
retransmissions in red, the receiver's cumulative ACK and the right edge of
its window as step lines, SACKed spans beside the segments, duplicate ACKs
and zero windows marked on the ACK line."""
from __future__ import annotations

from matplotlib.ticker import EngFormatter

from .axes import one_panel

STYLE = {   # mark -> how its bars are drawn, in this order (retransmissions on top)
    "data": {"color": "0.15", "label": "data segments", "linewidth": 0.8},
    "sack": {"color": "tab:purple", "label": "SACK blocks", "linewidth": 1.2},
    "retransmission": {"color": "tab:red", "label": "retransmissions (R)", "linewidth": 2},
}


LINES = (("ack", "tab:green", "cumulative ACK"), ("window", "tab:olive", "ACK + receive window"))
POINTS = (("dupack", {"marker": "|", "color": "tab:orange", "label": "duplicate ACKs"}),
          ("zero_window", {"marker": "v", "color": "tab:red", "label": "zero window"}))


def _paint(ax, marks: dict) -> None:
    for mark, style in STYLE.items():
        rows = marks.get(mark, [])
        if rows:
            ax.vlines([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], **style)
    rows = marks.get("retransmission", [])
    ax.plot([r[0] for r in rows], [r[2] for r in rows], linestyle="none", marker="$R$",
            color="tab:red", markersize=6)
    for mark, color, label in LINES:
        rows = marks.get(mark, [])
        if rows:
            ax.plot([r[0] for r in rows], [r[2] for r in rows], color=color, linewidth=1,
                    drawstyle="steps-post", label=label)
    for mark, style in POINTS:
        rows = marks.get(mark, [])
        if rows:
            ax.plot([r[0] for r in rows], [r[2] for r in rows], linestyle="none", markersize=5,
                    **style)
    ax.yaxis.set_major_formatter(EngFormatter(unit="B"))


def draw(doc: dict):
    what = f"Time-sequence graph of {doc['sender']}" if doc["sender"] else "Time-sequence graph"
    if doc.get("more_senders"):
        what += f" ({doc['more_senders']} other flows: choose one with --conn)"
    return one_panel(doc, what, "relative sequence number",
                     lambda ax: _paint(ax, doc["marks"]), height_in=5.5)
