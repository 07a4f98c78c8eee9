"""Windows: the NGWA window the bottleneck advertised in each sender's
packets beside the window its receiver advertised; the advertised window
beside the data outstanding."""
from __future__ import annotations

from . import band, color, empty, finish, panels


def _draw(doc: dict, what: str, first: str, second: str):
    fig, axes = panels(1, height_in=4.5)
    ax = axes[0]
    if not empty(ax, doc["empty"]):
        for i, f in enumerate(doc["senders"]):
            if first == "ngwa":
                rows = f["ngwa"]
                if rows:
                    ax.plot([r[0] for r in rows], [r[1] / 1e3 for r in rows], color=color(i),
                            drawstyle="steps-post", label=f"{f['label']}: NGWA window")
            else:
                band(ax, f["advertised"], i, f"{f['label']}: advertised window", scale=1e-3)
            if second == "advertised":
                band(ax, f["advertised"], i, f"{f['label']}: receiver's window", scale=1e-3,
                     linestyle="--")
            else:
                rows = f["in_flight"]
                ax.plot([r[0] for r in rows], [r[1] / 1e3 for r in rows], color=color(i),
                        linestyle=":", drawstyle="steps-post",
                        label=f"{f['label']}: outstanding data")
        ax.set_ylim(bottom=0)
    ax.set_ylabel("kB")
    finish(fig, axes, doc, what)
    return fig


def draw_ngwa(doc: dict):
    return _draw(doc, "NGWA window and the advertised window", "ngwa", "advertised")


def draw_window(doc: dict):
    return _draw(doc, "Advertised window and outstanding data", "advertised", "in_flight")
