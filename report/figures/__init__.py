"""Figures: matplotlib drawings of the data analyzers.figures gives, one
module per family (tsg: time-sequence; kernel: cwnd, rtt, rto; rates:
throughput, fairness, latency under load, queueing delay; windows: ngwa,
window; scatter: throughput against delay across runs, and spread: a
metric's CDF or boxes across runs, for `tcpvar compare --plot`). Every
figure has the subject's title, a legend naming each flow, "no data" with
the reason in an empty panel, and time in seconds on the subject's one
axis. The format follows the file's extension: .png, .svg or .pdf."""
from __future__ import annotations

from pathlib import Path

from tcpvar import safe_write
from tcpvar.errors import UsageError

FORMATS = (".png", ".svg", ".pdf")
DPI = 150


def draw(doc: dict):
    """The matplotlib figure of a figure's data."""
    from . import kernel, rates, scatter, spread, tsg, windows

    painters = {"tsg": tsg.draw, "cwnd": kernel.draw_cwnd, "rtt": kernel.draw_rtt,
                "rto": kernel.draw_rto, "throughput": rates.draw_throughput,
                "fairness": rates.draw_fairness, "ngwa": windows.draw_ngwa,
                "window": windows.draw_window, "scatter": scatter.draw_scatter,
                "latency": rates.draw_latency, "queue": rates.draw_queue, "fct": rates.draw_fct,
                "cdf": spread.draw_cdf, "box": spread.draw_box}
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
