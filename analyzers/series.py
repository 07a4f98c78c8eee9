"""A capture's stored throughput series (materialised for the interval
`tcpvar analyze` was asked for; a run's at 1 s). Figures compute their own
bins (analyzers/figures.py) and never rebuild these."""
from __future__ import annotations

from tcpvar.store.db import one

from .sqlfiles import sql


def build_throughput(con, capture_id: int, interval_ms: float, sums=None) -> bool:
    """(Re)build the throughput series at @interval_ms, from the sums the
    scan gathered at that interval (@sums, an Arrow stream) or from the
    packets; False without packets."""
    row = one(con, "SELECT with_packets, interval_ms FROM captures WHERE capture_id = $1",
                      [capture_id])
    if row is None or not row[0]:
        return False
    if row[1] == interval_ms:
        return True
    con.execute("DELETE FROM throughput WHERE capture_id = $1", [capture_id])
    params = {"capture_id": capture_id, "interval_ns": int(interval_ms * 1e6)}
    if sums is None:
        con.execute(sql("throughput_sums"), params)
    else:
        con.register("tv_sums", sums)
    try:
        con.execute(sql("throughput"), params)
    finally:
        if sums is None:
            con.execute("DROP TABLE tv_sums")
        else:
            con.unregister("tv_sums")
    con.execute("UPDATE captures SET interval_ms = $1 WHERE capture_id = $2",
                [interval_ms, capture_id])
    return True


def build_run_series(con, run_id: int, interval_ms: float) -> None:
    """The throughput series of both captures of a run, at @interval_ms."""
    row = one(con, "SELECT sender_capture, bottleneck_capture FROM runs WHERE run_id = $1",
              [run_id])
    for capture_id in row or ():
        if capture_id is not None:
            build_throughput(con, capture_id, interval_ms)
