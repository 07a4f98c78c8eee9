"""How a metric spreads across the runs of each group (`tcpvar compare
--plot FILE --plot-kind cdf|box`): per group the empirical CDF of its
runs' values, or a box (quartiles, whiskers to the farthest value within
1.5 interquartile ranges, the rest as points) with every run drawn on it."""
from __future__ import annotations

from .axes import color, finish_plain
from .scatter import label


def _label(doc: dict) -> str:
    """The metric's heading: as compare's table names it."""
    from ..compare import HEADINGS

    return HEADINGS[doc["metric"]][0]


def _values(g: dict, metric: str) -> list[float]:
    return sorted(v for v in g["values"].get(metric, []) if v is not None)


def draw_cdf(doc: dict):
    from matplotlib.figure import Figure

    metric, heading = doc["metric"], _label(doc)
    fig = Figure(figsize=(7, 5.5), layout="constrained")
    ax = fig.subplots()
    drawn = 0
    for i, g in enumerate(doc["groups"]):
        xs = _values(g, metric)
        if not xs:
            continue
        drawn += 1
        n = len(xs)
        # a step up of 1/n at each run's value
        ax.step([xs[0], *xs], [0, *((k + 1) / n for k in range(n))], where="post",
                color=color(i), label=f"{label(g['key'])} (n={n})")
    if not drawn:
        _empty(ax, metric)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel(heading)
    ax.set_ylabel("fraction of the group's runs")
    finish_plain(fig, ax, f"{heading} across runs (CDF)\n{doc['title']}")
    return fig


def draw_box(doc: dict):
    from matplotlib.figure import Figure

    metric, heading = doc["metric"], _label(doc)
    groups = [(g, _values(g, metric)) for g in doc["groups"]]
    groups = [(g, xs) for g, xs in groups if xs]
    fig = Figure(figsize=(max(5.0, 1.2 * len(groups) + 2), 5.5), layout="constrained")
    ax = fig.subplots()
    if groups:
        ax.boxplot([xs for _, xs in groups], showfliers=False, medianprops={"color": "black"})
        for i, (_, xs) in enumerate(groups):
            ax.plot([i + 1] * len(xs), xs, linestyle="none", marker="o", markersize=4,
                    alpha=0.6, color=color(i))
        ax.set_xticks(range(1, len(groups) + 1),
                      [f"{label(g['key'])}\n(n={len(xs)})" for g, xs in groups],
                      rotation=30 if len(groups) > 4 else 0)
    else:
        _empty(ax, metric)
    ax.set_ylabel(heading)
    finish_plain(fig, ax, f"{heading} across runs\n{doc['title']}")
    return fig


def _empty(ax, metric: str) -> None:
    ax.text(0.5, 0.5, f"no data: no complete run has {metric}", transform=ax.transAxes,
            ha="center", va="center", color="0.35")
