"""The tcp_probe record (docs/probe.md): one CSV line per tcp:tcp_probe event,
written by every recorder of capture/probe/ (the eBPF hook's loader
hooks/tcp_probe_ext writes the same header in C) and read by ingest/probe.py
into store/schema.sql's probe_events. Its columns, their DuckDB types and
units, and the names the extended tracepoint gives them are defined here
only; tests/test_record_contract.py holds the C hook, the tracepoint and the
schema to them.

  tcp_probe.csv    the events, a header line then one line per event
  tcp_probe.json   how they were recorded: source, events, lost, filter, clock
"""
from __future__ import annotations

from typing import NamedTuple

CSV_NAME = "tcp_probe.csv"
JSON_NAME = "tcp_probe.json"


class Column(NamedTuple):
    name: str
    type: str       # DuckDB type, in the CSV scan and in probe_events
    unit: str


COLUMNS = (
    Column("ts_ns", "BIGINT", "ns since the Unix epoch"),
    Column("cookie", "UBIGINT", "socket cookie"),
    Column("saddr", "VARCHAR", "local address"),
    Column("sport", "USMALLINT", "local port"),
    Column("daddr", "VARCHAR", "remote address"),
    Column("dport", "USMALLINT", "remote port"),
    Column("data_len", "UINTEGER", "bytes"),
    Column("snd_nxt", "UINTEGER", "sequence number"),
    Column("snd_una", "UINTEGER", "sequence number"),
    Column("snd_cwnd", "UINTEGER", "packets"),
    Column("ssthresh", "UINTEGER", "packets"),
    Column("snd_wnd", "UINTEGER", "bytes"),
    Column("rcv_wnd", "UINTEGER", "bytes"),
    Column("srtt_us", "UINTEGER", "us"),
    Column("rttvar_us", "UINTEGER", "us"),
    Column("rto_us", "UINTEGER", "us"),
    Column("rto_var_us", "UINTEGER", "us"),
    Column("packets_out", "UINTEGER", "packets"),
    Column("retrans_out", "UINTEGER", "packets"),
    Column("lost_out", "UINTEGER", "packets"),
    Column("sacked_out", "UINTEGER", "packets"),
    Column("ca_state", "UTINYINT", "0 Open, 1 Disorder, 2 CWR, 3 Recovery, 4 Loss"),
    Column("retransmits", "UTINYINT", "timeouts since the last progress"),
    Column("backoff", "UTINYINT", "RTO backoff exponent"),
    Column("delivered", "UINTEGER", "packets"),
    Column("total_retrans", "UINTEGER", "packets"),
    Column("pacing_rate", "UBIGINT", "bytes per second"),
    Column("wbrto_cwnd", "UINTEGER", "packets"),
    Column("wbrto_max_cwnd", "UINTEGER", "packets"),
    Column("wbrto_awnd", "UINTEGER", "packets"),
    Column("wbrto_c10", "UINTEGER", "tenths"),
    Column("wbrto_a10", "UINTEGER", "tenths"),
    Column("ngwa_window", "UINTEGER", "bytes"),
)
NAMES = tuple(c.name for c in COLUMNS)
TYPES = {c.name: c.type for c in COLUMNS}
# columns added since the first records, oldest first: a record written
# before one of them lacks it and every later one
ADDED = ("wbrto_cwnd", "rto_var_us")

# tracepoint fields whose column has another name; src and dest each give
# an address and a port column, every other field keeps its name
TRACEPOINT_RENAMES = {"sock_cookie": "cookie", "srtt": "srtt_us", "rttvar": "rttvar_us",
                      "rto": "rto_us", "rto_var": "rto_var_us"}
TRACEPOINT_ENDPOINTS = {"src": ("saddr", "sport"), "dest": ("daddr", "dport")}
# tracepoint fields printed in hex (%#x, %llx)
TRACEPOINT_HEX = {"sock_cookie", "snd_nxt", "snd_una"}
# tracepoint fields with no column (newer kernels add the socket's and the
# segment's kernel addresses to the stock tracepoint)
TRACEPOINT_DROPPED = {"family", "mark", "skbaddr", "skaddr"}


def headers() -> list[list[str]]:
    """The column lists a record may have: today's, then each older one."""
    return [[c for c in NAMES if c not in ADDED[k:]] for k in range(len(ADDED), -1, -1)]


def header() -> str:
    """The CSV's first line, newline included."""
    return ",".join(NAMES) + "\n"
