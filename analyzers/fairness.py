"""Fairness and friendliness (DESIGN.md, Callegari et al. section 4-5).

- Jain's index J = (sum x)^2 / (n * sum x^2) over the flows' throughputs, for
  the whole capture and per interval; fair when J >= 0.95 on long runs.
- Friendliness of a variant against a reference (Reno) flow: the ratio of
  their throughputs, and the paper's percentage difference
  |x_variant - x_reference| / min(x_variant, x_reference) * 100 (it gives
  YeAH's 216.17 vs 220.10 Mbit/s as "about 2%" and Vegas' 583.38 vs 43.42
  as "about 1300%": the smaller throughput is the base).
"""
from __future__ import annotations

from tcpvar.errors import UsageError
from tcpvar.store.db import one

from .connections import data_direction
from .sqlfiles import sql

BULK_SHARE = 0.01   # default flows: at least 1% of the largest flow's bytes
TOGETHER = 0.5      # --pair warns when the flows share fewer of their intervals


def jain(xs) -> float | None:
    xs = [float(x) for x in xs]
    total_sq = sum(x * x for x in xs)
    if not xs or total_sq == 0:
        return None
    return sum(xs) ** 2 / (len(xs) * total_sq)


def friendliness(variant: float, reference: float) -> dict:
    low = min(variant, reference)
    return {
        "ratio": variant / reference if reference else None,
        "percent_difference": abs(variant - reference) / low * 100 if low else None,
    }


def flows(conns: list[dict]) -> list[dict]:
    """Each connection as a flow: its data direction and goodput."""
    out = []
    for c in conns:
        d = data_direction(c)
        out.append({"conn": c["id"], "dir": 0 if d == "a2b" else 1,
                    "sender": c["a"] if d == "a2b" else c["b"],
                    "unique_bytes": c[d]["unique_bytes"],
                    "goodput_bps": c[d]["goodput_bps"] or 0.0,
                    "data_first_ns": c[d]["data_first_ns"], "data_last_ns": c[d]["data_last_ns"]})
    return out


def choose(all_flows: list[dict], ids: list[int] | None) -> list[dict]:
    """The flows named by id, or by default every bulk flow."""
    by_id = {f["conn"]: f for f in all_flows}
    if ids:
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise UsageError(f"no connection {missing[0]} in this capture "
                             f"(it has 1 to {len(all_flows)})")
        return [by_id[i] for i in ids]
    biggest = max((f["unique_bytes"] for f in all_flows), default=0)
    return [f for f in all_flows if biggest and f["unique_bytes"] >= BULK_SHARE * biggest]


def fairness(con, capture_id: int, conns: list[dict], ids: list[int] | None = None,
             pair: tuple[int, int] | None = None) -> dict:
    """Jain's index over chosen flows (whole capture and per interval) and
    the friendliness of a (variant, reference) pair; @conns are the capture's
    connections as connections() gives them."""
    all_flows = flows(conns)
    chosen = choose(all_flows, ids)
    out: dict = {"flows": chosen, "jain": jain(f["goodput_bps"] for f in chosen),
                 "intervals": [], "warnings": []}
    has_series = one(con, "SELECT with_packets FROM captures WHERE capture_id = $1",
                             [capture_id])[0]
    if has_series and len(chosen) > 1:
        rows = con.execute(sql("jain_intervals"), {
            "capture_id": capture_id,
            "conns": [f["conn"] for f in chosen],
            "dirs": [f["dir"] for f in chosen]}).fetchall()
        out["intervals"] = [{"bin": b, "t_s": t, "jain": j, "total_bps": tot}
                            for b, t, j, tot in rows]
        values = [i["jain"] for i in out["intervals"] if i["jain"] is not None]
        out["jain_intervals_mean"] = sum(values) / len(values) if values else None
        out["jain_intervals_min"] = min(values) if values else None
        if not rows:
            out["warnings"].append(
                "no interval has every chosen flow sending, so Jain's index has no "
                "per-interval values (choose connections that overlap with --conn)")
    if pair:
        variant, reference = choose(all_flows, list(pair))
        out["friendliness"] = {"variant": variant["conn"], "reference": reference["conn"],
                               **friendliness(variant["goodput_bps"],
                                              reference["goodput_bps"])}
        out["warnings"] += _apart(con, capture_id, variant, reference, has_series)
    return out


def _apart(con, capture_id: int, a: dict, b: dict, has_series: bool) -> list[str]:
    """A warning when two flows seldom send at the same time: their
    goodputs then come from different periods of the path."""
    names = f"connections {a['conn']} and {b['conn']}"
    if has_series:
        together, a_bins, b_bins = one(con, sql("pair_overlap"), {
            "capture_id": capture_id, "conns": [a["conn"], b["conn"]],
            "dirs": [a["dir"], b["dir"]]})
        fewer = min(a_bins, b_bins)
        if fewer and together < TOGETHER * fewer:
            return [f"{names} send data together in {together} of the {fewer} intervals in "
                    f"which the less active one sends: their friendliness compares "
                    f"different periods"]
        return []
    if None not in (a["data_first_ns"], b["data_first_ns"]) and \
            min(a["data_last_ns"], b["data_last_ns"]) < max(a["data_first_ns"], b["data_first_ns"]):
        return [f"{names} never send data at the same time: their friendliness "
                f"compares different periods"]
    return []
