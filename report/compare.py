"""Renderings of `tcpvar compare` (analyzers/compare.py) and of a sweep's
end: a table per group with each metric as "mean ± half-width of the 95 %
CI", or laid out as the seed papers' tables (variant × scenario; connection
1 / connection 2 / Jain; Reno / variant), as Markdown (for papers' notes and
docs/), as CSV (one row per group, mean and ci95 columns per metric) and as
JSON."""
from __future__ import annotations

import csv
import io

from rich import box
from rich.table import Table

from tcpvar.analyzers.significance import MAX_REPEATS

from .untrusted import printable

# metric -> heading and digits after the point
HEADINGS = {
    "throughput_mbps": ("throughput Mbit/s", 2), "goodput_mbps": ("goodput Mbit/s", 2),
    "system_goodput_mbps": ("system goodput Mbit/s", 2),
    "iperf3_mbps": ("iperf3 Mbit/s", 2), "retransmissions": ("retransmitted pkts", 1),
    "rtt_ms": ("RTT ms", 1), "rtt_p95_ms": ("RTT p95 ms", 1), "jain": ("Jain", 3),
    "friendliness": ("vs Reno", 2),
    "background_mbps": ("background Mbit/s", 2), "test_mbps": ("test flows Mbit/s", 2),
    "flow_mbps": ("per flow Mbit/s", 2), "through_mbps": ("through all hops Mbit/s", 2),
    "cross_mbps": ("cross flows Mbit/s", 2), "utilization_pct": ("utilisation %", 1),
    "bottleneck_drops": ("queue drops", 1), "bottleneck_marks": ("queue CE marks", 1),
    "ce_packets": ("CE pkts (capture)", 1),
    "latency_p50_ms": ("latency p50 ms", 1), "latency_p95_ms": ("latency p95 ms", 1),
    "latency_p99_ms": ("latency p99 ms", 1), "latency_loss_pct": ("latency loss %", 2),
    "queue_delay_p50_ms": ("queueing p50 ms", 1), "queue_delay_p95_ms": ("queueing p95 ms", 1),
    "queue_delay_p99_ms": ("queueing p99 ms", 1),
    "fct_p50_ms": ("short-flow FCT p50 ms", 1), "fct_p95_ms": ("short-flow FCT p95 ms", 1),
    "fct_p99_ms": ("short-flow FCT p99 ms", 1),
    "oscillation_cov": ("oscillation (CoV)", 3), "convergence_s": ("convergence s", 1),
    "refill_s": ("refill after a step s", 1),
}


def shown_metrics(doc: dict) -> list[str]:
    """The metrics some group has a value of (Jain needs two flows,
    friendliness a friendliness run)."""
    return [m for m in doc["metrics"] if any(g["mean"][m] is not None for g in doc["groups"])]


def cell(mean, ci, digits: int) -> str:
    if mean is None:
        return "—"
    return f"{mean:.{digits}f}" + (f" ± {ci:.{digits}f}" if ci is not None else "")


# the papers' two-flow layouts: their columns, each a metric
PAPER_LAYOUTS = {
    "fairness": (("connection 1 Mbit/s", "background_mbps"), ("connection 2 Mbit/s", "test_mbps"),
                 ("Jain's index", "jain")),
    "friendliness": (("Reno Mbit/s", "background_mbps"), ("variant Mbit/s", "test_mbps"),
                     ("variant / Reno", "friendliness")),
}
LAYOUTS = ("groups", "variants", *PAPER_LAYOUTS)


def _value(v) -> str:
    """A key's value: a study file's or a store's, shown as text."""
    return "—" if v is None else f"{v:g}" if isinstance(v, float) else printable(v)


def rows(doc: dict, layout: str = "groups",
         metric: str = "iperf3_mbps") -> tuple[list[str], list[list[str]], int]:
    """The table's heading, its rows and how many of its first columns are
    keys (left-aligned)."""
    if layout == "variants":
        return _variants(doc, metric)
    columns = PAPER_LAYOUTS.get(layout) or [(HEADINGS[m][0], m) for m in shown_metrics(doc)]
    head = [*map(printable, doc["by"]), "n", *(h for h, _ in columns)]
    body = [[*(_value(v) for v in g["key"].values()), str(g["n"]) + unfaithful_mark(g),
             *(cell(g["mean"][m], g["ci95"][m], HEADINGS[m][1]) for _, m in columns)]
            for g in doc["groups"]]
    return head, body, len(doc["by"])


def unfaithful_mark(g: dict) -> str:
    """After a group's n: how many of its runs failed the fidelity check."""
    u = len(g.get("unfaithful") or ())
    return f" ({u} unfaithful)" if u else ""


def _variants(doc: dict, metric: str) -> tuple[list[str], list[list[str]], int]:
    """Variant × scenario, as the papers' throughput tables: a row per
    variant (cc), a column per combination of the other keys, each cell the
    metric's mean ± CI (and n when it is not the same everywhere)."""
    others = [k for k in doc["by"] if k != "cc"]
    scenarios = list(dict.fromkeys(tuple(g["key"][k] for k in others) for g in doc["groups"]))
    variants = list(dict.fromkeys(g["key"]["cc"] for g in doc["groups"]))
    ns = {g["n"] for g in doc["groups"]}
    by = {(g["key"]["cc"], tuple(g["key"][k] for k in others)): g for g in doc["groups"]}
    head = [f"cc: {HEADINGS[metric][0]}",
            *(", ".join(f"{k} {_value(v)}" for k, v in zip(others, s)) or HEADINGS[metric][0]
              for s in scenarios)]
    body = []
    for v in variants:
        line = [printable(v)]
        for s in scenarios:
            g = by.get((v, s))
            line.append("—" if g is None else
                        cell(g["mean"][metric], g["ci95"][metric], HEADINGS[metric][1])
                        + (f" (n={g['n']})" if len(ns) > 1 else "") + unfaithful_mark(g))
        body.append(line)
    return head, body, 1


def table(doc: dict, title: str, layout: str = "groups", metric: str = "iperf3_mbps") -> Table:
    head, body, keys = rows(doc, layout, metric)
    t = Table(title=printable(title), box=box.SIMPLE, title_justify="left")
    for i, h in enumerate(head):
        t.add_column(h, justify="left" if i < keys else "right")
    for r in body:
        t.add_row(*r)
    return t


def markdown(doc: dict, layout: str = "groups", metric: str = "iperf3_mbps") -> str:
    head, body, keys = rows(doc, layout, metric)
    align = ["---" if i < keys else "---:" for i in range(len(head))]
    lines = ["| " + " | ".join(r) + " |" for r in (head, align, *body)]
    return "\n".join(lines) + "\n"


def to_csv(doc: dict) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([*doc["by"], "n", "unfaithful",
                *(f"{m}_{x}" for m in doc["metrics"] for x in ("mean", "ci95"))])
    for g in doc["groups"]:
        w.writerow([*g["key"].values(), g["n"], len(g.get("unfaithful") or ()),
                    *(v for m in doc["metrics"] for v in (g["mean"][m], g["ci95"][m]))])
    return buf.getvalue()


TEST_HEAD = ("group A", "group B", "n", "test", "p", "p Holm", "differ", "B - A", "Cohen's d",
             "repeats for power 0.8", "95 % CIs")


def _key(key: dict) -> str:
    return ", ".join(f"{printable(k)} {_value(v)}" for k, v in key.items()) or "all"


def _num(v, fmt: str) -> str:
    return "—" if v is None else format(v, fmt)


def test_rows(tests: dict) -> list[list[str]]:
    """A row per pair of groups (analyzers/significance.py)."""
    digits = HEADINGS[tests["metric"]][1]
    out = []
    for t in tests["pairs"]:
        need = t["repeats_needed"]
        out.append([_key(t["a"]), _key(t["b"]), "/".join(map(str, t["n"])),
                    t["test"] or f"none ({t['reason']})", _num(t["p"], ".3g"),
                    _num(t["p_holm"], ".3g"),
                    "—" if t["differ"] is None else "yes" if t["differ"] else "no",
                    _num(t["difference"], f".{digits}f"), _num(t["cohens_d"], ".2f"),
                    "—" if need is None else f"> {need - 1}" if need > MAX_REPEATS else str(need),
                    "—" if t["ci_overlap"] is None else "overlap" if t["ci_overlap"] else "apart"])
    return out


def tests_table(tests: dict) -> Table:
    tested = sum(p["p"] is not None for p in tests["pairs"])
    t = Table(title=f"{HEADINGS[tests['metric']][0]}: every pair of groups tested at "
                    f"{tests['alpha']:g} (Holm over {tested} pair{'' if tested == 1 else 's'})",
              box=box.SIMPLE, title_justify="left")
    for i, h in enumerate(TEST_HEAD):
        t.add_column(h, justify="left" if i < 2 else "right")
    for r in test_rows(tests):
        t.add_row(*r)
    return t


def tests_markdown(tests: dict) -> str:
    lines = ["| " + " | ".join(r) + " |" for r in
             (TEST_HEAD, ["---", "---", *["---:"] * (len(TEST_HEAD) - 2)], *test_rows(tests))]
    return "\n".join(lines) + "\n"


def tests_csv(tests: dict) -> str:
    """One row per pair: the groups' keys as A's and B's columns, then the
    numbers unrounded."""
    keys = list(dict.fromkeys(k for t in tests["pairs"] for k in t["a"]))
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([*(f"a_{k}" for k in keys), *(f"b_{k}" for k in keys), "metric", "n_a", "n_b",
                "test", "statistic", "p", "p_holm", "differ", "difference", "cohens_d",
                "repeats_needed", "ci_overlap"])
    for t in tests["pairs"]:
        w.writerow([*(t["a"].get(k) for k in keys), *(t["b"].get(k) for k in keys),
                    tests["metric"], *t["n"], t["test"], t["statistic"], t["p"], t["p_holm"],
                    t["differ"], t["difference"], t["cohens_d"], t["repeats_needed"],
                    t["ci_overlap"]])
    return buf.getvalue()


def notes(doc: dict) -> list[str]:
    """What the table leaves out, and how to read it."""
    out = ["mean ± half-width of the 95 % confidence interval (Student's t, n − 1 degrees of "
           "freedom); no interval with one run"]
    if doc.get("tests"):
        out.append("tests: Welch's t-test, or Mann-Whitney U where a group's values do not look "
                   "normal (Shapiro-Wilk at 0.05); differ: Holm's p below 0.05; repeats: runs "
                   "per group for a power of 0.8 at the observed Cohen's d (docs/compare.md)")
    incomplete = [r for r in doc["left_out"] if r["status"] != "complete"]
    if incomplete:
        names = ", ".join(f"{r['run_id']} ({printable(r['status'])})" for r in incomplete[:5])
        more = len(incomplete) - 5
        out.append(f"left out, not complete: {names}" + (f" and {more} more" if more > 0 else ""))
    unfaithful = [r for g in doc["groups"] for r in g.get("unfaithful") or ()]
    left = [r["run_id"] for r in doc["left_out"] if r["status"] == "complete"]
    if left:
        out.append(f"left out, their fidelity check failed (--faithful-only): {_ids(left)}")
    if unfaithful:
        out.append(f"counted although their fidelity check failed: {_ids(unfaithful)} "
                   f"(--faithful-only leaves them out)")
    return out


def _ids(ids: list[int]) -> str:
    more = len(ids) - 10
    return ", ".join(map(str, ids[:10])) + (f" and {more} more" if more > 0 else "")


def sweep_table(name: str, entries: list[dict], dry_run: bool = False) -> Table:
    """A sweep's end (or its plan): per run its store id, cell, repetition
    and what happened (or will)."""
    keys = list(dict.fromkeys(k for e in entries for k in e["cell"]))
    t = Table(title=printable(f"study {name}"), box=box.SIMPLE, title_justify="left")
    for h in ("run", *keys, "rep", "status"):
        t.add_column(printable(h))
    for e in entries:       # a study file's values and name: shown as text
        t.add_row(str(e["run_id"] or "—"), *(printable(e["cell"].get(k, "—")) for k in keys),
                  str(e["repetition"]),
                  "in the store already" if e["skipped"] else
                  "another shard's" if e["other_shard"] else
                  "to run" if dry_run else printable(e["status"] or "not run"))
    return t
