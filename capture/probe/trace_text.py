"""The tcp:tcp_probe tracepoint's text lines (trace_pipe, stock or extended)
-> the tcp_probe record's CSV (artefacts/probe_record.py)."""
from __future__ import annotations

from pathlib import Path

from tcpvar import safe_write
from tcpvar.artefacts import probe_record as record
from tcpvar.capture.probe.recorder import norm_addr


def parse_trace_line(line: str, offset_ns: int) -> dict | None:
    """One trace_pipe line -> {column: text}, or None for other lines. Fields
    are named as the record's columns; those with no column are kept under
    their tracepoint name (the record's writer leaves them out)."""
    i = line.find(": tcp_probe: ")
    if i < 0:
        return None
    ts = line[line.rfind(" ", 0, i) + 1:i]
    sec, _, frac = ts.partition(".")
    ns = int(sec) * 1_000_000_000 + int(frac.ljust(9, "0")[:9]) + offset_ns
    row = {"ts_ns": str(ns)}
    for item in line[i + 13:].split():
        key, eq, val = item.partition("=")
        if not eq:
            continue
        if key in record.TRACEPOINT_ENDPOINTS:
            addr_col, port_col = record.TRACEPOINT_ENDPOINTS[key]
            addr, _, port = val.rpartition(":")
            row[addr_col] = norm_addr(addr)
            row[port_col] = port
        elif key in record.TRACEPOINT_HEX:
            row[record.TRACEPOINT_RENAMES.get(key, key)] = str(int(val, 16))
        else:
            row[record.TRACEPOINT_RENAMES.get(key, key)] = val
    return row


def convert_trace(raw: Path, csv_path: Path, offset_ns: int, addrs: list[str]) -> int:
    """trace_pipe text -> tcp_probe.csv; returns the events written."""
    wanted = set(addrs)
    events = 0
    with open(raw, errors="replace") as src, safe_write.replacing(csv_path) as out:
        out.write(record.header())
        buf = []
        for line in src:
            row = parse_trace_line(line, offset_ns)
            if row is None:
                continue
            if wanted and row.get("saddr") not in wanted and row.get("daddr") not in wanted:
                continue
            buf.append(",".join(row.get(c, "") for c in record.NAMES))
            events += 1
            if len(buf) >= 10000:
                out.write("\n".join(buf) + "\n")
                buf.clear()
        if buf:
            out.write("\n".join(buf) + "\n")
    return events
