"""Per-flow RTO and cwnd statistics from tcp_probe events (views
probe_rto_stats and probe_timeouts, docs/schema.md)."""
from __future__ import annotations


def _rows(con, sql: str, params: list) -> list[dict]:
    rel = con.execute(sql, params)
    names = [d[0] for d in rel.description]
    return [dict(zip(names, row, strict=True)) for row in rel.fetchall()]


def rto_stats(target, run_id: int, senders_only: bool = False) -> list[dict]:
    """One dict per socket the run's probe recorded (columns of
    probe_rto_stats), the run's flows first, then by events. With
    senders_only, only sockets matched to a flow of the run."""
    con = getattr(target, "con", target)
    where = "run_id = $1" + (" AND flow IS NOT NULL" if senders_only else "")
    return _rows(con, f"SELECT * FROM probe_rto_stats WHERE {where} "
                      "ORDER BY flow NULLS LAST, events DESC, cookie", [run_id])


def timeouts(target, run_id: int) -> list[dict]:
    """The run's Loss episodes (probe_timeouts), in time order."""
    con = getattr(target, "con", target)
    return _rows(con, "SELECT * FROM probe_timeouts WHERE run_id = $1 ORDER BY ts_ns, cookie",
                 [run_id])
