"""Offline analysis of a capture, all stages but presentation: ingest the
file into the store, build its series, and gather the results."""
from __future__ import annotations

from dataclasses import dataclass, field

from tcpvar.analyzers import fairness as fairness_mod
from tcpvar.analyzers.connections import connections
from tcpvar.analyzers.series import build_throughput
from tcpvar.ingest.capture import ScanOptions, ingest
from tcpvar.store.db import one


@dataclass
class AnalyzeOptions:
    scan: ScanOptions = field(default_factory=ScanOptions)
    interval_ms: float = 100.0
    force: bool = False
    fairness: bool = False
    flows: list[int] | None = None          # flows for Jain's index (default: bulk flows)
    pair: tuple[int, int] | None = None     # (variant, reference) for friendliness


def analyze_capture(store, path: str, options: AnalyzeOptions, progress=None) -> dict:
    """One capture's results as a JSON-ready dict."""
    res = ingest(store, path, options.scan, force=options.force, progress=progress)
    with store.transaction() as con:
        has_series = build_throughput(con, res.capture_id, options.interval_ms)
    con = store.con
    cap = one(con, "SELECT link_name, frames, tcp_packets, non_tcp, ip_fragments, "
                      "too_short, malformed, (last_ns - first_ns) / 1e9 "
                      "FROM captures WHERE capture_id = $1", [res.capture_id])
    doc = {
        "path": res.path,
        "capture_id": res.capture_id,
        "reused": res.reused,
        "link_type": cap[0],
        "frames": cap[1],
        "tcp_packets": cap[2],
        "non_tcp_frames": cap[3],
        "ip_fragments": cap[4],
        "too_short": cap[5],
        "malformed": cap[6],
        "duration_s": cap[7],
        "truncated": res.truncated,
        "warning": res.warning,
        "interval_ms": options.interval_ms if has_series else None,
        "connections": connections(con, res.capture_id),
    }
    if options.fairness or options.pair:
        doc["fairness"] = fairness_mod.fairness(con, res.capture_id, doc["connections"],
                                                options.flows, options.pair)
    return doc

