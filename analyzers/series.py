"""A capture's stored throughput series (materialised for the interval
`tcpvar analyze` was asked for; a run's at 1 s). Figures compute their own
bins (analyzers/figures.py) and never rebuild these."""
from __future__ import annotations

import contextlib

from tcpvar.store.db import one

from .sqlfiles import sql

# A direction's series is dense (every interval from its first data interval
# to its last) up to MAX_SPAN intervals, and the empty intervals of a capture's
# dense series are at most MAX_FILL (about 90 bytes each while they are
# written); past either, a direction keeps only its intervals with data and
# the empty one on each side (throughput_shape.sql). Rows then stay within
# MAX_FILL plus three per data interval, whatever the time stamps say.
MAX_SPAN = 1_000_000        # 27.8 hours at 100 ms
MAX_FILL = 2_000_000
WARNING = "throughput series: "   # how its part of the capture's warning begins


def build_throughput(con, capture_id: int, interval_ms: float, sums=None) -> bool:
    """(Re)build the throughput series at @interval_ms, from the sums the
    scan gathered at that interval (@sums, an Arrow stream) or from the
    packets; False without packets. What had to be left sparse or out is
    said at the end of the capture's warning."""
    row = one(con, "SELECT with_packets, interval_ms FROM captures WHERE capture_id = $1",
                      [capture_id])
    if row is None or not row[0]:
        return False
    if row[1] == interval_ms:
        return True
    warning = throughput_rows(con, capture_id, interval_ms, sums)
    # the previous build's words go; ingest's stay (they come first)
    con.execute("""
        UPDATE captures SET interval_ms = $1,
            warning = nullif(concat_ws('; ', nullif(regexp_replace(coalesce(warning, ''),
                                                                   '(; )?' || $3 || '.*$', ''), ''),
                                       $4), '')
        WHERE capture_id = $2""", [interval_ms, capture_id, WARNING, warning])
    return True


def throughput_rows(con, capture_id: int, interval_ms: float, sums=None) -> str | None:
    """The rows of build_throughput(), without the capture's own row: what
    ingest builds beside storing the connections (the capture's row is
    ingest's until it completes), returning what to add to its warning."""
    con.execute("DELETE FROM throughput WHERE capture_id = $1", [capture_id])
    params = {"capture_id": capture_id, "interval_ns": int(interval_ms * 1e6)}
    if sums is None:
        con.execute(sql("throughput_sums"), params)
    else:
        con.register("tv_sums", sums)
    try:
        con.execute(sql("throughput_shape"), {"max_span": MAX_SPAN, "max_fill": MAX_FILL})
        con.execute(sql("throughput"), params)
        warning = _shape_warning(con, interval_ms)
    except BaseException:
        # after a failed statement DuckDB refuses all else until the rollback
        # (which takes the temp tables with it): the failure is what to report
        if sums is not None:
            from tcpvar.store.engine import duckdb
            with contextlib.suppress(duckdb().Error):
                con.unregister("tv_sums")
        raise
    con.execute("DROP TABLE tv_shape")
    if sums is None:
        con.execute("DROP TABLE tv_sums")
    else:
        con.unregister("tv_sums")
    return warning


def build_run_series(con, run_id: int, interval_ms: float) -> None:
    """The throughput series of both captures of a run, at @interval_ms."""
    row = one(con, "SELECT sender_capture, bottleneck_capture FROM runs WHERE run_id = $1",
              [run_id])
    for capture_id in row or ():
        if capture_id is not None:
            build_throughput(con, capture_id, interval_ms)


def _shape_warning(con, interval_ms: float) -> str | None:
    """What tv_shape left sparse or out, in one line; None when nothing."""
    sparse, widest, conn, direction, beyond = one(con, """
        SELECT count(*) FILTER (WHERE NOT dense), max(span) FILTER (WHERE NOT dense),
               arg_max(conn, span) FILTER (WHERE NOT dense),
               arg_max(dir, span) FILTER (WHERE NOT dense), coalesce(sum(beyond), 0)
        FROM tv_shape""")
    parts = []
    if sparse:
        where = f"connection {conn} {('a2b', 'b2a')[direction]}"
        what = "direction keeps" if sparse == 1 else "directions keep"
        parts.append(f"{sparse} {what} only the intervals with data and the empty one on "
                     f"each side ({where} spans {widest:,} intervals of {interval_ms:g} ms; "
                     f"dense series stop at {MAX_SPAN:,} intervals per direction and "
                     f"{MAX_FILL:,} empty ones per capture)")
    if beyond:
        parts.append(f"{beyond:,} intervals with data lie more than 2^31 intervals after the "
                     f"capture's start and are left out")
    return WARNING + "; ".join(parts) if parts else None
