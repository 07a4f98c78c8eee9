"""Time series of a capture: throughput per interval (materialised for the
chosen interval), bytes in flight, RTT samples and the RTO timeline (views)."""
from __future__ import annotations

from tcpvar.store.db import one

from .sqlfiles import sql


def build_throughput(con, capture_id: int, interval_ms: float) -> bool:
    """(Re)build the throughput series at @interval_ms; False without packets."""
    row = one(con, "SELECT with_packets, interval_ms FROM captures WHERE capture_id = $1",
                      [capture_id])
    if row is None or not row[0]:
        return False
    if row[1] == interval_ms:
        return True
    con.execute("DELETE FROM throughput WHERE capture_id = $1", [capture_id])
    con.execute(sql("throughput"), {"capture_id": capture_id,
                                    "interval_ns": int(interval_ms * 1e6)})
    con.execute("UPDATE captures SET interval_ms = $1 WHERE capture_id = $2",
                [interval_ms, capture_id])
    return True


def throughput(con, capture_id: int, conn: int, direction: int):
    """[(t_s, bps, goodput_bps)] of one direction of a connection."""
    return con.execute(
        "SELECT t_s, bps, goodput_bps FROM throughput "
        "WHERE capture_id = $1 AND conn = $2 AND dir = $3 ORDER BY bin",
        [capture_id, conn, direction]).fetchall()


def cwnd_estimate(con, capture_id: int, conn: int, direction: int):
    """[(t_s, bytes_in_flight)] at each ACK the receiver sent."""
    return con.execute(
        "SELECT t_s, bytes_in_flight FROM cwnd_estimate "
        "WHERE capture_id = $1 AND conn = $2 AND dir = $3 ORDER BY frame",
        [capture_id, conn, direction]).fetchall()


def rtt_samples(con, capture_id: int, conn: int, direction: int):
    return con.execute(
        "SELECT t_s, rtt_ms FROM rtt_samples "
        "WHERE capture_id = $1 AND conn = $2 AND dir = $3 ORDER BY frame",
        [capture_id, conn, direction]).fetchall()


def rto_timeline(con, capture_id: int, conn: int | None = None):
    """Inferred timeouts and fast retransmits, oldest first."""
    return con.execute(
        "SELECT conn, dir, t_s, kind, seq, len, silence_ms, dupacks, backoff "
        "FROM rto_timeline WHERE capture_id = $1 AND ($2 IS NULL OR conn = $2) "
        "ORDER BY ts_ns", [capture_id, conn]).fetchall()
