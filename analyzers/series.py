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
    """[(t_s, bps, goodput_bps)] of one direction of a connection, per interval."""
    return con.execute(
        "SELECT t_s, bps, goodput_bps FROM throughput "
        "WHERE capture_id = $1 AND conn = $2 AND dir = $3 ORDER BY bin",
        [capture_id, conn, direction]).fetchall()


# per-ACK series, reduced to the largest value per time bucket
_BUCKETED = {
    "cwnd": "SELECT floor(t_s / $b) * $b AS t, max(bytes_in_flight) FROM cwnd_estimate "
            "WHERE capture_id = $c AND conn = $n AND dir = $d GROUP BY 1 ORDER BY 1",
    "rtt": "SELECT floor(t_s / $b) * $b AS t, max(rtt_ms) FROM rtt_samples "
           "WHERE capture_id = $c AND conn = $n AND dir = $d GROUP BY 1 ORDER BY 1",
}


def bucketed(con, series: str, capture_id: int, conn: int, direction: int, bucket_s: float):
    """[(t, max value)] of the 'cwnd' (bytes in flight) or 'rtt' (ms) series
    of one sender, one point per bucket of @bucket_s seconds."""
    return con.execute(_BUCKETED[series], {"b": bucket_s, "c": capture_id, "n": conn,
                                           "d": direction}).fetchall()


def rto_timeline(con, capture_id: int, conn: int, direction: int, kind: str):
    """[(t_s, silence_ms)] of one sender's inferred timeouts or fast retransmits."""
    return con.execute(
        "SELECT t_s, silence_ms FROM rto_timeline WHERE capture_id = $1 AND conn = $2 "
        "AND dir = $3 AND kind = $4 ORDER BY ts_ns", [capture_id, conn, direction, kind]
    ).fetchall()


def build_run_series(con, run_id: int, interval_ms: float) -> None:
    """The throughput series of both captures of a run, at @interval_ms."""
    row = one(con, "SELECT sender_capture, bottleneck_capture FROM runs WHERE run_id = $1",
              [run_id])
    for capture_id in row or ():
        if capture_id is not None:
            build_throughput(con, capture_id, interval_ms)
