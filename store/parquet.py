"""The store as Parquet (`tcpvar export --parquet`), for the engines that read
it (Spark, Trino, DuckDB, pandas): one folder per table, Hive-partitioned,
zstd-compressed, with the store's column names and types (docs/schema.md).

    DIR/meta.parquet                          the store's schema version
    DIR/runs/study=NAME/*.parquet             a run's row, by its study
    DIR/flows/run_id=N/*.parquet              and every table of a run, by run
    DIR/packets/capture_id=N/*.parquet        every table of a capture, by capture

A folder written here is a store again for `tcpvar merge` (from_parquet()).
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from tcpvar.errors import StoreError, UsageError

from . import segments
from .db import Store, _duckdb, one
from .segments import quoted as _quoted

RUN_TABLES = ("flows", "qdisc_stats", "iperf_intervals", "probe_events", "fidelity", "hops",
              "latency", "queue_delays", "backlog_samples", "short_flows")
CAPTURE_TABLES = ("captures", "packets", "connections", "dir_counters", "retransmit_events",
                  "throughput")
META = "meta.parquet"


def export(store: Store, out: Path, studies: list[str] = (), run_ids: list[int] = ()) -> dict:
    """Write the chosen runs (a study's, or by id; none chosen: the whole
    store, captures without a run included) and their captures to @out;
    rows per table."""
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"{out}: exists and is not empty (export writes a new folder)")
    con = store.con
    chosen = bool(studies or run_ids)
    con.execute("""
        CREATE OR REPLACE TEMP TABLE export_runs AS
        SELECT run_id, sender_capture, bottleneck_capture FROM runs
        WHERE NOT $chosen OR list_contains($studies, study) OR list_contains($ids, run_id)""",
                {"chosen": chosen, "studies": list(studies), "ids": list(run_ids)})
    if chosen and not one(con, "SELECT count(*) FROM export_runs")[0]:
        raise UsageError("no run of the store matches --study or --run")
    con.execute("""
        CREATE OR REPLACE TEMP TABLE export_captures AS
        SELECT capture_id FROM captures WHERE complete AND (NOT $chosen OR capture_id IN (
            SELECT sender_capture FROM export_runs UNION SELECT bottleneck_capture
            FROM export_runs UNION SELECT unnest([arrivals_capture, departures_capture])
            FROM hops WHERE run_id IN (SELECT run_id FROM export_runs)))""", {"chosen": chosen})
    out.mkdir(parents=True, exist_ok=True)
    _copy(con, "SELECT * FROM meta WHERE key = 'schema_version'", out / META, None)
    rows = {"runs": _copy(con, "SELECT * FROM runs WHERE run_id IN "
                               "(SELECT run_id FROM export_runs)", out / "runs", "study")}
    for table in RUN_TABLES:
        rows[table] = _copy(con, f"SELECT * FROM {table} WHERE run_id IN "
                                 f"(SELECT run_id FROM export_runs)", out / table, "run_id")
    for table in CAPTURE_TABLES:
        query = f"SELECT * FROM {table} WHERE capture_id IN " \
                f"(SELECT capture_id FROM export_captures)"
        if table == "packets" and not store.has_packets_table():
            rows[table] = one(con, f"SELECT count(*) FROM ({query})")[0]
            for (capture_id,) in con.execute("SELECT capture_id FROM export_captures"
                                             ).fetchall():   # the segments as they are
                segments.copy(store.packets, capture_id, out / table, capture_id)
        else:
            rows[table] = _copy(con, query, out / table, "capture_id")
    return rows


def _copy(con, query: str, path: Path, partition: str | None) -> int:
    """COPY @query to Parquet at @path (partitioned by @partition); its rows.
    An empty table writes no folder: Parquet partitions need a row."""
    n = one(con, f"SELECT count(*) FROM ({query})")[0]
    if n or partition is None:
        options = f", PARTITION_BY ({partition})" if partition else ""
        con.execute(f"COPY ({query}) TO '{_quoted(path)}' (FORMAT parquet, COMPRESSION zstd"
                    f"{options})")
    return n


def is_export(path: Path) -> bool:
    return Path(path).is_dir() and (Path(path) / META).is_file()


def from_parquet(folder: Path, work: Path) -> Path:
    """A DuckDB store in @work holding what the export @folder holds, for
    merge(): its schema version checked, its tables read back from Parquet.
    The folder may be somebody else's: a symbolic link in it refuses it,
    DuckDB reads no file outside it, and its names and values are data
    (table names are this tcpvar's; nothing of the folder becomes SQL)."""
    folder = Path(folder).resolve()
    segments.refuse_links(folder)
    db = Path(tempfile.mkdtemp(dir=work)) / "export.duckdb"
    with Store(db) as store:
        for capture_id in segments.captures(folder / "packets"):   # the segments' own layout
            segments.copy(folder / "packets", capture_id, store.packets, capture_id)
        store.lock_down(folder)
        con = store.con
        try:
            mine = one(con, "SELECT value FROM meta WHERE key = 'schema_version'")[0]
            version = one(con, f"SELECT value FROM read_parquet('{_quoted(folder / META)}') "
                               f"WHERE key = 'schema_version'")
            if version is None or version[0] != mine:
                found = _shown(version[0]) if version else "none"
                raise StoreError(f"{folder}: exported with schema version {found}, this "
                                 f"tcpvar needs {mine}")
            for table in ("runs", *RUN_TABLES, *CAPTURE_TABLES):
                if table != "packets" and (folder / table).is_dir():
                    files = _quoted(folder / table / "**" / "*.parquet")
                    con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM read_parquet("
                                f"'{files}', hive_partitioning = true, union_by_name = true)")
        except _duckdb().Error as exc:
            if "No space left on device" in str(exc):
                raise                   # exit 10, as for any full disk
            raise StoreError(f"{folder}: not an export this tcpvar reads: "
                             f"{' '.join(str(exc).split())}") from None
    return db


def _shown(value) -> str:
    """A value of somebody's file in a message: one line, not too long."""
    return repr(str(value)[:40])
