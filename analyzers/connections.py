"""Per-connection statistics in the shape of `tcpvar analyze --json`."""
from __future__ import annotations

from typing import Iterator

from tcpvar.store.db import one

from .sqlfiles import sql

CONN_FIELDS = ("ip_version", "start_s", "connection_duration_s", "total_packets",
               "handshake", "closed", "reset")
DIRECTIONS = ("a2b", "b2a")
BATCH = 50_000      # connections read back at a time (connection_batches)
ENDS = ("conn", "dir", "ip_version", "a_addr", "a_port", "b_addr", "b_port")
# The statistics of each direction a one-line summary of a connection needs
# (analyze's table; sql/connection_brief.sql reads only these): a table of
# thousands of connections reads in half the time without the others.
SUMMARY_STATS = ("packets", "data_packets", "data_bytes", "unique_bytes",
                 "retransmitted_packets", "retransmitted_bytes", "out_of_order_packets",
                 "duplicate_acks", "rto_events", "fast_retransmits", "rtt_avg_ms",
                 "rtt_samples", "throughput_bps", "goodput_bps")


def endpoint(addr: str, port: int, ip_version: int) -> str:
    """'ip:port', with IPv6 addresses in brackets (RFC 3986)."""
    return f"[{addr}]:{port}" if ip_version == 6 else f"{addr}:{port}"


def connections(con, capture_id: int, brief: bool = False) -> list[dict]:
    """Every connection of a capture: endpoints, then a2b and b2a statistics,
    all of them (and CONN_FIELDS) or, @brief, only SUMMARY_STATS."""
    return _read(con, capture_id, brief, 0, 2**32)


def connection_count(con, capture_id: int) -> int:
    return one(con, "SELECT count(*) FROM connections WHERE capture_id = $1", [capture_id])[0]


def _batches(con, capture_id: int) -> Iterator[tuple[int, int]]:
    """The capture's connection numbers, BATCH at a time: (first, last) of
    each, so that a million connections are read back in flat memory."""
    top = one(con, "SELECT max(conn) FROM connections WHERE capture_id = $1",
              [capture_id])[0] or 0
    for first in range(1, top + 1, BATCH):
        yield first, first + BATCH - 1


def connection_batches(con, capture_id: int, brief: bool = False) -> Iterator[list[dict]]:
    """connections(), BATCH connections at a time, each batch a query of its
    own: a capture of a million connections is read back (and printed) in
    flat memory."""
    for first, last in _batches(con, capture_id):
        batch = _read(con, capture_id, brief, first, last)
        if batch:
            yield batch


def connection_lines(con, capture_id: int,
                     widths: list[int]) -> Iterator[tuple[list[str], list[int]]]:
    """analyze's plain-text table of the capture's connections
    (sql/connection_lines.sql), BATCH connections at a time: each batch's
    lines and its columns' widths, each at least @widths or an earlier
    batch's."""
    con.execute(sql("text_macros"))
    for first, last in _batches(con, capture_id):
        rows = con.execute(sql("connection_lines"), {
            "capture_id": capture_id, "first_conn": first, "last_conn": last,
            "widths": widths}).fetchall()
        if rows:
            widths = list(rows[0][1:])
            yield [row[0] for row in rows], widths


def _read(con, capture_id: int, brief: bool, first: int, last: int) -> list[dict]:
    """The connections numbered @first to @last."""
    params = {"capture_id": capture_id, "first_conn": first, "last_conn": last}
    cur = con.execute(sql("connection_brief" if brief else "connections"), params)
    names = [d[0] for d in cur.description]
    first_stat = names.index("packets")             # the direction's statistics from here
    stat_names = names[first_stat:]
    at = {name: i for i, name in enumerate(names[:first_stat])}
    conn_at, a_at, a_port, b_at, b_port, ver = (at[k] for k in (
        "conn", "a_addr", "a_port", "b_addr", "b_port", "ip_version"))
    fields = [(k, at[k]) for k in CONN_FIELDS if k in at and k != "connection_duration_s"]
    if "connection_duration_s" in at:               # brief: only ip_version of them
        fields.append(("duration_s", at["connection_duration_s"]))
    out: list[dict] = []
    for row in cur.fetchall():
        if row[1] == 0:                             # dir: a connection's first row
            conn = {"id": row[conn_at], "a": endpoint(row[a_at], row[a_port], row[ver]),
                    "b": endpoint(row[b_at], row[b_port], row[ver])}
            for key, i in fields:
                conn[key] = row[i]
            out.append(conn)
        out[-1][DIRECTIONS[row[1]]] = dict(zip(stat_names, row[first_stat:]))
    return out


def capture_info(con, capture_id: int) -> dict:
    """A capture's path, link type, frames, TCP segments and duration."""
    cur = con.execute("SELECT path, link_name AS link_type, frames, tcp_packets, "
                      "(last_ns - first_ns) / 1e9 AS duration_s FROM captures "
                      "WHERE capture_id = $1", [capture_id])
    return dict(zip([d[0] for d in cur.description], cur.fetchone()))


def capture_counts(con, capture_id: int) -> tuple:
    """What analyze reports of a capture as a whole: link type, frames, TCP
    segments, non-TCP frames, IP fragments, too short, malformed, duration
    (s) and the scan's warning."""
    return con.execute("SELECT link_name, frames, tcp_packets, non_tcp, ip_fragments, "
                       "too_short, malformed, (last_ns - first_ns) / 1e9, warning "
                       "FROM captures WHERE capture_id = $1", [capture_id]).fetchone()


def data_direction(conn: dict) -> str:
    """The direction that carried more new data: the flow's sender."""
    return "a2b" if conn["a2b"]["unique_bytes"] >= conn["b2a"]["unique_bytes"] else "b2a"
