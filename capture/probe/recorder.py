"""What every recorder shares: the artefact's paths (artefacts/probe_record.py),
the socket filter, the statistics and the JSON written beside the CSV."""
from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass, field
from pathlib import Path

from tcpvar import safe_write
from tcpvar.artefacts.probe_record import CSV_NAME, JSON_NAME


@dataclass
class ProbeStats:
    source: str
    events: int
    lost: int
    detail: dict = field(default_factory=dict)


def norm_addr(text: str) -> str:
    """IPv4 dotted; IPv4-mapped IPv6 (dual-stack sockets) as IPv4; IPv6 compressed."""
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if ":" not in text:
        return text
    try:
        a = ipaddress.IPv6Address(text)
    except ValueError:
        return text
    return str(a.ipv4_mapped) if a.ipv4_mapped else str(a)


def port_filter(ports: list[int], cookie: int | None) -> str:
    """The tracefs filter of @ports (runs of consecutive ports as ranges: a
    run's flows have theirs side by side, and the kernel bounds a filter's
    terms) and @cookie."""
    parts = []
    if ports:
        terms = []
        for lo, hi in port_runs(sorted(set(ports))):
            terms += [f"{f} == {lo}" if lo == hi else f"({f} >= {lo} && {f} <= {hi})"
                      for f in ("sport", "dport")]
        parts.append("(" + " || ".join(terms) + ")")
    if cookie:
        parts.append(f"sock_cookie == {cookie}")
    return " && ".join(parts) if parts else "0"


def port_runs(ports: list[int]) -> list[tuple[int, int]]:
    """Sorted @ports as (first, last) of each run of consecutive ones."""
    out: list[tuple[int, int]] = []
    for p in ports:
        if out and p == out[-1][1] + 1:
            out[-1] = (out[-1][0], p)
        else:
            out.append((p, p))
    return out


class Recorder:
    """Common to both kinds: the artefact's paths, the filter, the JSON."""

    source = ""

    def __init__(self, out_dir: Path, ports: list[int], addrs: list[str] | None = None,
                 cookie: int | None = None, reason: str = ""):
        self.out_dir = Path(out_dir)
        self.ports = [int(p) for p in ports]
        self.addrs = [norm_addr(a) for a in (addrs or [])]
        self.cookie = cookie
        self.reason = reason
        self.csv_path = self.out_dir / CSV_NAME
        self.json_path = self.out_dir / JSON_NAME
        self.started = False
        self.stats: ProbeStats | None = None
        self.started_ns = self.stopped_ns = 0

    def filter_doc(self) -> dict:
        return {"ports": self.ports, "addrs": self.addrs, "cookie": self.cookie}

    def _write_json(self, stats: ProbeStats) -> None:
        doc = {"source": stats.source, "events": stats.events, "lost": stats.lost,
               "filter": self.filter_doc(), "reason": self.reason,
               "started_ns": self.started_ns, "stopped_ns": self.stopped_ns,
               **stats.detail}
        safe_write.write_text(self.json_path, json.dumps(doc, indent=1) + "\n")

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        if self.started:
            self.stop()

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> ProbeStats:
        raise NotImplementedError
