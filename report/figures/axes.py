"""What every figure is drawn with: its panels and margins, the flows'
colours, the legend, the "no data" panel and the shaded bands."""
from __future__ import annotations

WIDTH_IN = 10           # 1500 px at 150 dpi: one time column of the data per pixel
TALL_IN = 16            # panels get lower beyond this height (many senders)
LEGEND_INSIDE = 8       # entries a legend may have inside its panel
LEGEND_BELOW = 12       # entries a legend below the panel names


def panels(n: int, height_in: float = 3.2):
    """A figure of @n panels sharing the time axis (a bare Figure: pyplot's
    state and its import are not needed to draw into a file). One panel is
    laid out by matplotlib's constrained layout; several get fixed margins
    (finish() sets them): constrained layout measures every tick label of
    every panel, twice, and took most of a 12-panel figure's time."""
    from matplotlib.figure import Figure

    height_in = max(min(height_in, TALL_IN / n), 1.8)
    fig = Figure(figsize=(WIDTH_IN, 1.2 + height_in * n),
                 layout="constrained" if n == 1 else None)
    axes = fig.subplots(n, 1, sharex=True, squeeze=False)
    return fig, list(axes[:, 0])


def _margins(fig, title_lines: int) -> None:
    """Fixed margins of a figure of several panels, in inches: the y tick
    labels and label on the left, the title on top, a panel's own title
    between panels, the time axis below."""
    width, height = fig.get_size_inches()
    n = len(fig.axes)
    top_in = 0.45 + 0.2 * title_lines     # and the first panel's own title
    panel_in = (height - top_in - 0.55 - 0.4 * (n - 1)) / n
    fig.subplots_adjust(left=0.95 / width, right=1 - 0.2 / width, bottom=0.55 / height,
                        top=1 - top_in / height, hspace=0.4 / panel_in)


def one_panel(doc: dict, what: str, ylabel: str, paint, height_in: float = 4.5):
    """A figure of one panel: @paint(ax) draws the data, unless there is
    none (then the panel says why)."""
    fig, axes = panels(1, height_in)
    if not empty(axes[0], doc["empty"]):
        paint(axes[0])
    axes[0].set_ylabel(ylabel)
    finish(fig, axes, doc, what)
    return fig


def empty(ax, why: str | None) -> bool:
    """Write why a panel has no data in its middle; True when it is empty."""
    if not why:
        return False
    ax.text(0.5, 0.5, f"no data: {why}", transform=ax.transAxes, ha="center", va="center",
            wrap=True, color="0.35", fontsize="medium")
    ax.set_yticks([])
    return True


def color(i: int) -> str:
    return f"C{i % 10}"


def finish(fig, axes, doc: dict, what: str) -> None:
    """Title, shared time axis and grid."""
    title = doc["title"]
    if doc.get("others"):
        title += f"\n({doc['others']} smaller connection{'s' if doc['others'] != 1 else ''} "
        title += "left out: choose with --conn)"
    suptitle = fig.suptitle(f"{what}\n{title}", fontsize="medium")
    if fig.get_layout_engine() is None:
        suptitle.set_y(1 - 0.1 / fig.get_size_inches()[1])
        _margins(fig, title.count("\n") + 2)
    for ax in axes:
        ax.grid(True, alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        if len(handles) > LEGEND_INSIDE and len(axes) == 1:
            # many flows: a legend inside would hide the data (and "best"
            # costs a pass over every point per candidate place)
            if len(handles) > LEGEND_BELOW:
                from matplotlib.lines import Line2D

                # beyond a dozen, a legend names some and counts the rest: a
                # full one would be taller than the panel (and unreadable)
                more = len(handles) - LEGEND_BELOW + 1
                handles = [*handles[:LEGEND_BELOW - 1], Line2D([], [], linestyle="none")]
                labels = [*labels[:LEGEND_BELOW - 1], f"… and {more} more (choose with --conn)"]
            fig.legend(handles, labels, loc="outside lower center", ncols=3,
                       fontsize="small")
        elif handles:
            ax.legend(loc="best", fontsize="small")
    axes[-1].set_xlim(doc["from_s"], doc["to_s"])
    axes[-1].set_xlabel("time (s)")


def finish_plain(fig, ax, title: str) -> None:
    """Title, grid and legend of a figure whose x axis is not time."""
    fig.suptitle(title, fontsize="medium")
    ax.grid(True, alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", fontsize="small")


def band(ax, rows, i: int, label: str, scale: float = 1.0, **style):
    """A min/max-per-column series: the band between the two and the max as
    a line (one column per pixel: a band one pixel wide is a point)."""
    if not rows:
        return
    t = [r[0] for r in rows]
    lo = [r[1] * scale for r in rows]
    hi = [r[2] * scale for r in rows]
    points = style.get("linestyle") == "none"      # samples: no line through the gaps
    ax.plot(t, hi, color=color(i), label=label, linewidth=1,
            drawstyle="default" if points else "steps-post", **style)
    if not any(a != b for a, b in zip(lo, hi)):
        return
    if points:
        # a column's range as one vertical stroke, all strokes one path with
        # gaps (vlines() makes a path per stroke, point by point)
        gap = float("nan")
        ax.plot([x for x in t for _ in range(3)],
                [y for a, b in zip(lo, hi) for y in (a, b, gap)],
                color=color(i), alpha=0.4, linewidth=1)
    else:
        ax.fill_between(t, lo, hi, step="post", color=color(i), alpha=0.3, linewidth=0)
