"""Merging stores (`tcpvar merge`): the runs and captures of other stores
copied into this one, for studies split across machines with `tcpvar sweep
--shard`. Ids are drawn anew from this store's sequences and every table's
run_id and capture_id columns are mapped through them, so the result is a
store like any other. A run this store holds already (same folder, same
start) and a capture it holds already (same path, same fingerprint) are not
copied again: merging twice changes nothing. A folder of Parquet that
`tcpvar export` wrote merges the same way."""
from __future__ import annotations

import tempfile
from pathlib import Path

from tcpvar.errors import StoreError

from . import segments
from .db import Store
from .export import META, from_parquet, is_export

RUN_REFS = ("run_id",)
CAPTURE_REFS = ("capture_id", "sender_capture", "bottleneck_capture")


def merge(store: Store, source: str | Path) -> dict:
    """Copy @source's runs and captures into @store; how many of each were
    copied and how many it held already. @source is a store, or a folder
    that `tcpvar export --parquet` wrote."""
    source = Path(source)
    if is_export(source):
        with tempfile.TemporaryDirectory(prefix="tcpvar-merge-") as work:
            return merge(store, from_parquet(source, Path(work)))
    if source.is_dir():
        raise StoreError(f"{source}: a folder, but not one tcpvar export --parquet wrote "
                         f"(no {META})")
    if source.resolve() == Path(store.path).resolve():
        raise StoreError(f"{source}: is the store merged into")
    with Store(source, read_only=True) as src:  # a tcpvar store of a schema version we read
        old_packets = src.has_packets_table()
    con = store.con
    con.execute(f"ATTACH '{segments.quoted(source)}' AS src (READ_ONLY)")
    try:
        with store.transaction() as c:
            counts = _copy(c)
            _copy_packets(c, store, source, old_packets)
    finally:
        con.execute("DETACH src")
    return counts


def _copy(con) -> dict:
    # old id -> new id; `fresh` rows are copied, the others are in the store already
    con.execute("""
        CREATE OR REPLACE TEMP TABLE capture_map AS
        SELECT s.capture_id AS old, coalesce(t.capture_id, nextval('capture_ids')) AS new,
               t.capture_id IS NULL AS fresh
        FROM src.captures s
        LEFT JOIN captures t ON t.path = s.path AND t.fingerprint = s.fingerprint
                            AND t.complete
        WHERE s.complete""")
    con.execute("""
        CREATE OR REPLACE TEMP TABLE run_map AS
        SELECT s.run_id AS old, coalesce(t.run_id, nextval('run_ids')) AS new,
               t.run_id IS NULL AS fresh
        FROM src.runs s
        LEFT JOIN runs t ON t.dir = s.dir AND t.started_ns IS NOT DISTINCT FROM s.started_ns""")
    for table in _tables(con):
        _copy_table(con, table)
    (runs, runs_held), = con.execute(
        "SELECT count(*) FILTER (WHERE fresh), count(*) FILTER (WHERE NOT fresh) "
        "FROM run_map").fetchall()
    (caps, caps_held), = con.execute(
        "SELECT count(*) FILTER (WHERE fresh), count(*) FILTER (WHERE NOT fresh) "
        "FROM capture_map").fetchall()
    return {"runs": runs, "runs_held": runs_held, "captures": caps, "captures_held": caps_held}


def _copy_packets(con, store: Store, source: Path, table: bool) -> None:
    """The packet segments of the fresh captures, under their new ids; from
    a version 1 store's packets @table, written anew."""
    if table:
        segments.write_partitioned(
            con, "SELECT m.new AS capture_id, p.* EXCLUDE (capture_id) FROM src.packets p "
                 "JOIN capture_map m ON m.old = p.capture_id WHERE m.fresh", store.packets)
        return
    for old, new in con.execute("SELECT old, new FROM capture_map WHERE fresh").fetchall():
        segments.copy(segments.root(source), old, store.packets, new)


def _tables(con) -> list[str]:
    """The source's tables that this store has too (its own schema's names)."""
    return [t for (t,) in con.execute(
        "SELECT s.table_name FROM duckdb_tables() s JOIN duckdb_tables() t "
        "ON t.table_name = s.table_name AND t.database_name <> 'src' AND t.schema_name = 'main' "
        "WHERE s.database_name = 'src' AND s.schema_name = 'main' AND s.table_name <> 'meta' "
        "ORDER BY 1").fetchall()]


def _copy_table(con, table: str) -> None:
    """The table's rows of fresh runs or captures, their ids mapped."""
    columns = [c for (c,) in con.execute(
        "SELECT column_name FROM duckdb_columns() WHERE database_name = 'src' "
        "AND table_name = $1", [table]).fetchall()]
    owner = "run_id" if "run_id" in columns else "capture_id" if "capture_id" in columns \
        else None
    if owner is None:
        raise StoreError(f"cannot merge table {table}: it has neither run_id nor capture_id")
    joins, shown = [], []
    for col in columns:
        if col in RUN_REFS or col in CAPTURE_REFS:
            alias = f"m_{col}"
            kind = "run_map" if col in RUN_REFS else "capture_map"
            joins.append(f"LEFT JOIN {kind} {alias} ON {alias}.old = s.{col}")
            shown.append(f"{alias}.new AS {col}")
        else:
            shown.append(f's."{col}"')
    con.execute(f"INSERT INTO {table} BY NAME SELECT {', '.join(shown)} FROM src.{table} s "
                f"{' '.join(joins)} WHERE m_{owner}.fresh")
