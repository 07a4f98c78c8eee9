"""Renderings of `tcpvar compare` (analyzers/compare.py) and of a sweep's
end: a table per group with each metric as "mean ± half-width of the 95 %
CI", as Markdown (for papers' notes and docs/), as CSV (one row per group,
mean and ci95 columns per metric) and as JSON."""
from __future__ import annotations

import csv
import io

from rich import box
from rich.table import Table

# metric -> heading and digits after the point
HEADINGS = {
    "throughput_mbps": ("throughput Mbit/s", 2), "goodput_mbps": ("goodput Mbit/s", 2),
    "iperf3_mbps": ("iperf3 Mbit/s", 2), "retransmissions": ("retransmitted pkts", 1),
    "rtt_ms": ("RTT ms", 1), "jain": ("Jain", 3), "friendliness": ("vs Reno", 2),
}


def shown_metrics(doc: dict) -> list[str]:
    """The metrics some group has a value of (Jain needs two flows,
    friendliness a friendliness run)."""
    return [m for m in doc["metrics"] if any(g["mean"][m] is not None for g in doc["groups"])]


def cell(mean, ci, digits: int) -> str:
    if mean is None:
        return "—"
    return f"{mean:.{digits}f}" + (f" ± {ci:.{digits}f}" if ci is not None else "")


def rows(doc: dict) -> tuple[list[str], list[list[str]]]:
    metrics = shown_metrics(doc)
    head = [*doc["by"], "n", *(HEADINGS[m][0] for m in metrics)]
    body = [[*("—" if v is None else f"{v:g}" if isinstance(v, float) else str(v)
               for v in g["key"].values()), str(g["n"]),
             *(cell(g["mean"][m], g["ci95"][m], HEADINGS[m][1]) for m in metrics)]
            for g in doc["groups"]]
    return head, body


def table(doc: dict, title: str) -> Table:
    head, body = rows(doc)
    t = Table(title=title, box=box.SIMPLE, title_justify="left")
    for i, h in enumerate(head):
        t.add_column(h, justify="left" if i < len(doc["by"]) else "right")
    for r in body:
        t.add_row(*r)
    return t


def markdown(doc: dict) -> str:
    head, body = rows(doc)
    align = ["---" if i < len(doc["by"]) else "---:" for i in range(len(head))]
    lines = ["| " + " | ".join(r) + " |" for r in (head, align, *body)]
    return "\n".join(lines) + "\n"


def to_csv(doc: dict) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([*doc["by"], "n", *(f"{m}_{x}" for m in doc["metrics"] for x in ("mean", "ci95"))])
    for g in doc["groups"]:
        w.writerow([*g["key"].values(), g["n"],
                    *(v for m in doc["metrics"] for v in (g["mean"][m], g["ci95"][m]))])
    return buf.getvalue()


def notes(doc: dict) -> list[str]:
    """What the table leaves out, and how to read it."""
    out = ["mean ± half-width of the 95 % confidence interval (Student's t, n − 1 degrees of "
           "freedom); no interval with one run"]
    if doc["left_out"]:
        names = ", ".join(f"{r['run_id']} ({r['status']})" for r in doc["left_out"][:5])
        more = len(doc["left_out"]) - 5
        out.append(f"left out, not complete: {names}" + (f" and {more} more" if more > 0 else ""))
    return out


def sweep_table(name: str, entries: list[dict], dry_run: bool = False) -> Table:
    """A sweep's end (or its plan): per run its store id, cell, repetition
    and what happened (or will)."""
    keys = list(entries[0]["cell"]) if entries else []
    t = Table(title=f"study {name}", box=box.SIMPLE, title_justify="left")
    for h in ("run", *keys, "rep", "status"):
        t.add_column(h)
    for e in entries:
        t.add_row(str(e["run_id"] or "—"), *(str(e["cell"][k]) for k in keys),
                  str(e["repetition"]),
                  "in the store already" if e["skipped"] else
                  "another shard's" if e["other_shard"] else
                  "to run" if dry_run else (e["status"] or "not run"))
    return t
