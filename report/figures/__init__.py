"""Figures: matplotlib drawings of the data analyzers.figures gives, one
module per family (tsg: time-sequence; kernel: cwnd, rtt, rto; rates:
throughput, fairness; windows: ngwa, window; scatter: throughput against
delay across runs, for `tcpvar compare --plot`). Every figure has the
subject's title, a legend naming each flow, "no data" with the reason in
an empty panel, and time in seconds on the subject's one axis. The format
follows the file's extension: .png, .svg or .pdf."""
from __future__ import annotations

from pathlib import Path

from tcpvar import safe_write
from tcpvar.errors import UsageError

FORMATS = (".png", ".svg", ".pdf")
WIDTH_IN = 10           # 1500 px at 150 dpi: one time column of the data per pixel
DPI = 150
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


def draw(doc: dict):
    """The matplotlib figure of a figure's data."""
    from . import kernel, rates, scatter, tsg, windows

    painters = {"tsg": tsg.draw, "cwnd": kernel.draw_cwnd, "rtt": kernel.draw_rtt,
                "rto": kernel.draw_rto, "throughput": rates.draw_throughput,
                "fairness": rates.draw_fairness, "ngwa": windows.draw_ngwa,
                "window": windows.draw_window, "scatter": scatter.draw_scatter}
    fig = painters[doc["kind"]](doc)
    _literal(fig)
    return fig


def _literal(fig) -> None:
    """Every text shown as it is: titles and legends name runs, flows and
    variants of run folders and stores that may be anyone's, and matplotlib
    would read `$...$` in them as mathtext (a formula, or an error that
    loses the figure). tcpvar's own texts use none; the tick labels, which
    a log axis writes in mathtext, are left alone. Control characters are
    shown escaped."""
    from matplotlib.text import Text

    from ..untrusted import printable_lines

    ticks = {id(t) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)
             for t in axis.findobj(Text)}
    for text in fig.findobj(Text):
        if id(text) not in ticks:
            text.set_usetex(False)
            text.set_parse_math(False)
            text.set_text(printable_lines(text.get_text()))


def check_format(path: str | Path) -> None:
    if Path(path).suffix.lower() not in FORMATS:
        raise UsageError(f"{path}: the figure's format follows its extension: "
                         f"{', '.join(FORMATS)}")


def save(doc: dict, path: str | Path, dpi: int = DPI) -> Path:
    """Draw @doc into @path (.png, .svg or .pdf)."""
    check_format(path)
    path = Path(path)
    fig = draw(doc)
    path.parent.mkdir(parents=True, exist_ok=True)
    with safe_write.replacing(path, "wb") as fh:
        fig.savefig(fh, format=path.suffix[1:].lower(), dpi=dpi, metadata=_metadata(path))
    return path


def _metadata(path: Path) -> dict:
    """No creation date in SVG and PDF, so a figure drawn again is the same file."""
    return {".svg": {"Date": None}, ".pdf": {"CreationDate": None}}.get(path.suffix.lower(), {})
