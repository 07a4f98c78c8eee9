"""Throughput against delay across runs, Pantheon's figure: a point per
run, and per group (a variant, or whatever `tcpvar compare --by` groups) its
mean with the 95 % confidence interval on both axes. The delay axis runs
from high to low, so better is up and to the right."""
from __future__ import annotations

from itertools import groupby

from .axes import color, finish_plain

X, Y = "rtt_p95_ms", "iperf3_mbps"
MARKERS = "os^D"        # the ten colours come round again: the 11th group is a square


def label(key: dict) -> str:
    """cubic, rtt 100; a mechanism not in use (ngwa, wbrto None) is "off";
    a run of many flows is cubic×11+bic×11+reno×10."""
    return ", ".join(_variants(v) if k == "cc" else f"{k} {'off' if v is None else v}"
                     for k, v in key.items()) or "all runs"


def _variants(cc: str) -> str:
    runs = [(name, len(list(group))) for name, group in groupby(cc.split("+"))]
    return "+".join(name if n == 1 else f"{name}×{n}" for name, n in runs)


def draw_scatter(doc: dict):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 5.5), layout="constrained")
    ax = fig.subplots()
    drawn = 0
    for i, g in enumerate(doc["groups"]):
        points = [(x, y) for x, y in zip(g["values"][X], g["values"][Y])
                  if x is not None and y is not None]
        if not points:
            continue
        drawn += 1
        marker = MARKERS[i // 10 % len(MARKERS)]
        ax.scatter([x for x, _ in points], [y for _, y in points], color=color(i), alpha=0.45,
                   s=18, linewidths=0, marker=marker)
        ax.errorbar(g["mean"][X], g["mean"][Y], xerr=g["ci95"][X], yerr=g["ci95"][Y],
                    color=color(i), marker=marker, markersize=7, capsize=3,
                    label=f"{label(g['key'])} (n={len(points)})")
    if not drawn:
        ax.text(0.5, 0.5, "no data: no complete run with RTT samples", transform=ax.transAxes,
                ha="center", va="center", color="0.35")
    ax.invert_xaxis()
    ax.set_xlabel("95th percentile of the RTT samples (ms), better →")
    ax.set_ylabel("throughput, iperf3 (Mbit/s)")
    finish_plain(fig, ax, f"throughput against delay\n{doc['title']}")
    return fig
