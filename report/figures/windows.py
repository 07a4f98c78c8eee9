"""Windows: the NGWA window the bottleneck advertised in each sender's
packets beside the window its receiver advertised; the advertised window
beside the data outstanding."""
from __future__ import annotations

from .axes import band, color, one_panel


def _steps(ax, rows, i: int, label: str, **style) -> None:
    if rows:
        ax.plot([r[0] for r in rows], [r[1] / 1e3 for r in rows], color=color(i),
                drawstyle="steps-post", label=label, **style)


def draw_ngwa(doc: dict):
    def paint(ax):
        for i, f in enumerate(doc["senders"]):
            _steps(ax, f["ngwa"], i, f"{f['label']}: NGWA window")
            band(ax, f["advertised"], i, f"{f['label']}: receiver's window", scale=1e-3,
                 linestyle="--")
        ax.set_ylim(bottom=0)
    return one_panel(doc, "NGWA window and the advertised window", "kB", paint)


def draw_window(doc: dict):
    def paint(ax):
        for i, f in enumerate(doc["senders"]):
            band(ax, f["advertised"], i, f"{f['label']}: advertised window", scale=1e-3)
            _steps(ax, f["in_flight"], i, f"{f['label']}: outstanding data", linestyle=":")
        ax.set_ylim(bottom=0)
    return one_panel(doc, "Advertised window and outstanding data", "kB", paint)
