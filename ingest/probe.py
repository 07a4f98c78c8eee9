"""tcp_probe.csv (docs/probe.md) -> the probe_events table, in one DuckDB
scan of the file, each event given the run's flow its socket belongs to
(same 4-tuple, either orientation) and its side: the flow's sender or its
receiver."""
from __future__ import annotations

import ipaddress
from pathlib import Path

import duckdb

from tcpvar.artefacts import checks
from tcpvar.artefacts import probe_record as record
from tcpvar.errors import InputError


def _addr(text: str) -> str:
    """As the artefact writes addresses: IPv4 (also IPv4-mapped IPv6) dotted."""
    try:
        a = ipaddress.ip_address(str(text).strip("[]"))
    except ValueError:
        return str(text)
    if a.version == 6 and a.ipv4_mapped:
        return str(a.ipv4_mapped)
    return str(a)


def _header(path: Path) -> list[str]:
    """The record's first line (at most 4 kB of it: a header is 400 bytes)."""
    try:
        with checks.open_regular(path) as f:
            return f.readline(4096).decode().strip().split(",")
    except FileNotFoundError:
        raise InputError(f"{path}: no such probe record") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read: {exc}") from None


def load_probe(target, run_id: int, csv_path: str | Path, flows=()) -> int:
    """Append the events of csv_path to probe_events under run_id; `flows` is
    a list of (flow, saddr, sport, daddr, dport) of the runs' sender sockets.
    `target` is a Store or a DuckDB connection. Returns the rows loaded."""
    con = getattr(target, "con", target)
    path = Path(csv_path)
    header = _header(path)
    if header not in record.headers():
        raise InputError(f"{path}: not a tcp_probe record (its header is not the one of "
                         f"docs/probe.md)")
    pairs = {}
    for flow, saddr, sport, daddr, dport in flows:
        a, b = (_addr(saddr), int(sport)), (_addr(daddr), int(dport))
        pairs.setdefault((a, b), (flow, "sender"))
        pairs.setdefault((b, a), (flow, "receiver"))
    con.execute("CREATE OR REPLACE TEMP TABLE probe_flow_keys (flow INTEGER, side VARCHAR, "
                "saddr VARCHAR, sport INTEGER, daddr VARCHAR, dport INTEGER)")
    if pairs:
        con.executemany("INSERT INTO probe_flow_keys VALUES (?, ?, ?, ?, ?, ?)",
                        [(f, side, a[0], a[1], b[0], b[1])
                         for (a, b), (f, side) in pairs.items()])
    columns = "{" + ", ".join(f"'{c}': '{record.TYPES[c]}'" for c in header) + "}"
    cols = ", ".join(f"p.{c}" if c in header else f"NULL AS {c}" for c in record.NAMES)
    try:
        row = con.execute(
            f"INSERT INTO probe_events (run_id, flow, side, {', '.join(record.NAMES)}) "
            f"SELECT $run_id, k.flow, k.side, {cols} "
            f"FROM read_csv($path, header = true, delim = ',', quote = '', "
            f"               columns = {columns}) p "
            f"LEFT JOIN probe_flow_keys k ON k.saddr = p.saddr AND k.sport = p.sport "
            f"  AND k.daddr = p.daddr AND k.dport = p.dport",
            {"run_id": run_id, "path": str(path)}).fetchone()
    except duckdb.Error as exc:
        msg = " ".join(str(exc).split())[:300]
        raise InputError(f"{path}: cannot load the probe record: {msg}") from None
    finally:
        con.execute("DROP TABLE IF EXISTS probe_flow_keys")
    return int(row[0]) if row else 0
