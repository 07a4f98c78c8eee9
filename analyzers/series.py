"""Time series of a capture: throughput per interval (materialised for the
chosen interval), bytes in flight, RTT samples, the RTO timeline and the
NGWA window (views), and all of them for a capture's figure."""
from __future__ import annotations

from tcpvar.store.db import one

from .fairness import choose, flows
from .sqlfiles import sql

POINTS = 2000       # per flow and series in a figure


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


# per-packet series, reduced to one value per time bucket: the largest bytes
# in flight and RTT; the smallest NGWA window of the sender's packets (set
# ones only) and window its receiver advertised (SYNs and ACKs), the
# constraint that held
_BUCKETED = {
    "cwnd": "SELECT floor(t_s / $b) * $b AS t, max(bytes_in_flight) FROM cwnd_estimate "
            "WHERE capture_id = $c AND conn = $n AND dir = $d GROUP BY 1 ORDER BY 1",
    "rtt": "SELECT floor(t_s / $b) * $b AS t, max(rtt_ms) FROM rtt_samples "
           "WHERE capture_id = $c AND conn = $n AND dir = $d GROUP BY 1 ORDER BY 1",
    "ngwa": "SELECT floor(t_s / $b) * $b AS t, min(ngwa_window) FROM ngwa_windows "
            "WHERE capture_id = $c AND conn = $n AND dir = $d AND NOT ngwa_unset "
            "GROUP BY 1 ORDER BY 1",
    "advertised": "SELECT floor(t_s / $b) * $b AS t, min(win) FROM packet_marks "
                  "WHERE capture_id = $c AND conn = $n AND dir = 1 - $d "
                  "AND flags & 18 <> 0 GROUP BY 1 ORDER BY 1",
}


def bucketed(con, series: str, capture_id: int, conn: int, direction: int, bucket_s: float):
    """[(t, value)] of the 'cwnd' (bytes in flight), 'rtt' (ms), 'ngwa' or
    'advertised' (bytes) series of one sender, one point per bucket of
    @bucket_s seconds."""
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


def capture_figure(con, doc: dict, points: int = POINTS) -> dict:
    """Every series of an analysed capture's figure (`doc` as analyze gives
    it), per chosen flow and at most @points points each: the data only."""
    capture_id = doc["capture_id"]
    bucket = max((doc["duration_s"] or 1.0) / points, 1e-6)
    out = []
    for f in choose(flows(doc["connections"]), None):
        conn, d = f["conn"], f["dir"]
        ngwa = bucketed(con, "ngwa", capture_id, conn, d, bucket)
        out.append({
            "conn": conn, "sender": f["sender"],
            "throughput": throughput(con, capture_id, conn, d),
            "in_flight": bucketed(con, "cwnd", capture_id, conn, d, bucket),
            "rtt": bucketed(con, "rtt", capture_id, conn, d, bucket),
            "rto": {kind: rto_timeline(con, capture_id, conn, d, kind)
                    for kind in ("timeout", "fast")},
            "ngwa": ngwa,
            "advertised": bucketed(con, "advertised", capture_id, conn, d, bucket)
                          if ngwa else [],
        })
    return {"name": doc["path"], "interval_ms": doc["interval_ms"], "flows": out}
