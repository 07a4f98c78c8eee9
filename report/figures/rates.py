"""Throughput per flow and in total, with the bottleneck's rate and its
schedule and iperf3's own reports; Jain's index per interval; throughput
with the latency probe's round trips under it."""
from __future__ import annotations

from .axes import color, empty, finish, one_panel, panels


def _per_bin(doc: dict) -> str:
    return f"per {doc['bin_s'] * 1e3:g} ms"


def draw_throughput(doc: dict):
    return one_panel(doc, "Throughput", f"goodput (Mbit/s)\n{_per_bin(doc)}",
                     lambda ax: _paint_throughput(ax, doc))


def _paint_throughput(ax, doc: dict) -> None:
    for i, f in enumerate(doc["senders"]):
        rows = f["goodput"]
        ax.plot([t for t, _ in rows], [b / 1e6 for _, b in rows], color=color(i),
                drawstyle="steps-post", linewidth=1.2, label=f"{f['label']} (capture)")
        for k, (a, b, bps) in enumerate(f["iperf3"]):
            ax.plot([a, b], [bps / 1e6] * 2, color=color(i), linestyle=":", linewidth=1.5,
                    label=None if k else f"{f['label']} (iperf3 sender reports)")
    if len(doc["senders"]) > 1:
        ax.plot([t for t, _ in doc["total"]], [b / 1e6 for _, b in doc["total"]],
                color="0.2", drawstyle="steps-post", linewidth=1,
                label=doc.get("total_label", "total"))
    if doc["rate"]:
        ts = [t for t, _ in doc["rate"]] + [doc["to_s"]]
        rates = [r / 1e6 for _, r in doc["rate"]]
        ax.step(ts, rates + rates[-1:], where="post", color="black", linestyle="--",
                linewidth=1, label="bottleneck rate")
    ax.set_ylim(bottom=0)


def draw_queue(doc: dict):
    """The queueing delay of each flow's packets above, the packets queued
    behind each below: the queue's occupancy, as the packets saw it."""
    fig, (top, bottom) = panels(2, 3.4)
    if not empty(top, doc["empty"]):
        for i, f in enumerate(doc["senders"]):
            top.plot([t for t, _ in f["delay"]], [d for _, d in f["delay"]], linestyle="none",
                     marker=".", markersize=1.5, color=color(i), label=f["label"])
        top.set_ylim(bottom=0)
        bottom.plot([t for t, _ in doc["backlog"]], [n for _, n in doc["backlog"]],
                    color="0.3", linewidth=0.8, drawstyle="steps-post",
                    label="packets queued behind the one leaving (captures)")
        if doc["sampled"]:
            bottom.plot([t for t, _ in doc["sampled"]], [n for _, n in doc["sampled"]],
                        linestyle="none", marker="o", markersize=3, color="C3",
                        label="queue length, tc -s every 100 ms")
        bottom.set_ylim(bottom=0)
    top.set_ylabel("queueing delay (ms)")
    bottom.set_ylabel("queue (packets)")
    finish(fig, [top, bottom], doc, "Queueing delay and occupancy at the bottleneck")
    return fig


def draw_fct(doc: dict):
    """Each short flow's completion time at its start, a colour per size
    class; a log axis, as sizes and queues spread them over decades."""
    from ..runs import size_text

    def paint(ax):
        for i, c in enumerate(doc["classes"]):
            ax.plot([t for t, _ in c["fct"]], [ms for _, ms in c["fct"]], linestyle="none",
                    marker="o", markersize=3, color=color(i),
                    label=f"{size_text(c['bytes'])} ({len(c['fct'])} complete)")
            if c["unfinished"]:
                ax.plot(c["unfinished"], [0.02] * len(c["unfinished"]), linestyle="none",
                        marker="x", color=color(i), transform=ax.get_xaxis_transform(),
                        label=f"{size_text(c['bytes'])}: did not complete")
        ax.set_yscale("log")
    return one_panel(doc, "Short flows' completion times",
                     "completion time (ms)\nSYN to the ACK of the last byte", paint)


def draw_latency(doc: dict):
    """Throughput above, the latency probe's round trips below, one time
    axis: what the flows did to an interactive application's delay."""
    fig, (top, bottom) = panels(2, 3.4)
    if not empty(top, doc["empty"]):
        _paint_throughput(top, doc)
    top.set_ylabel(f"goodput (Mbit/s)\n{_per_bin(doc)}")
    if not empty(bottom, doc["latency_empty"]):
        rtt = doc["rtt"]
        bottom.plot([t for t, _ in rtt], [ms for _, ms in rtt], linestyle="none", marker=".",
                    markersize=2, color="C3", label=f"{doc['tool']} round trip")
        if doc["lost"]:
            bottom.plot(doc["lost"], [0] * len(doc["lost"]), linestyle="none", marker="|",
                        markersize=8, color="black", label="lost request")
        bottom.set_ylim(bottom=0)
    bottom.set_ylabel("latency (ms)")
    finish(fig, [top, bottom], doc, "Throughput and latency under load")
    return fig


def draw_fairness(doc: dict):
    n = len(doc["labels"])

    def paint(ax):
        rows = doc["jain"]
        over = ", ".join(doc["labels"]) if n <= 3 else f"the {n} flows"
        ax.plot([t for t, _ in rows], [j for _, j in rows], color="C0",
                drawstyle="steps-post", label=f"Jain's index over {over}")
        ax.axhline(1.0, color="0.5", linewidth=0.8)
        ax.axhline(1 / n, color="0.5", linewidth=0.8, linestyle=":",
                   label=f"1/n = {1 / n:.2f}: one flow has it all")
        ax.set_ylim(0, 1.05)
    return one_panel(doc, "Fairness", f"Jain's index\n{_per_bin(doc)}", paint, height_in=3.8)
