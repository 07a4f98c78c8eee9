"""Merging stores (`tcpvar merge`): the runs and captures of other stores
copied into this one, for studies split across machines with `tcpvar sweep
--shard`. Ids are drawn anew from this store's sequences and every table's
run_id and capture_id columns are mapped through them, so the result is a
store like any other. A run this store holds already (same folder, same
start) and a capture it holds already (same path, same fingerprint) are not
copied again: merging twice changes nothing. A folder of Parquet that
`tcpvar export` wrote merges the same way.

The other store may be anybody's: what is copied is the columns of this
store's own tables, named by this store and checked against the other's
(docs/schema.md), never a name the other store holds in SQL."""
from __future__ import annotations

import tempfile
from pathlib import Path

from tcpvar.errors import StoreError

from . import segments
from .db import Store, _duckdb, added_columns, identifier, own_objects
from .parquet import META, from_parquet, is_export

RUN_REFS = ("run_id",)
CAPTURE_REFS = ("capture_id", "sender_capture", "bottleneck_capture", "arrivals_capture",
                "departures_capture")


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
    # an absolute path (no `md:` prefix), read as DuckDB's whatever it holds
    con.execute(f"ATTACH '{segments.quoted(source.resolve())}' AS src (TYPE duckdb, READ_ONLY)")
    try:
        with store.transaction() as c:
            counts = _copy(c, _selects(c, source))
            _copy_packets(c, store, source, old_packets)
    except _duckdb().Error as exc:
        if "No space left on device" in str(exc):
            raise                       # exit 10, as for any full disk
        raise StoreError(f"{source}: cannot merge: {' '.join(str(exc).split())}") from None
    finally:
        con.execute("DETACH src")
    return counts


def _copy(con, selects: dict[str, str]) -> dict:
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
    for table, select in selects.items():
        con.execute(f"INSERT INTO {identifier(table)} BY NAME {select}")
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


def _selects(con, source: Path) -> dict[str, str]:
    """Per table of this store's that the source has too, the SELECT of its
    rows of fresh runs or captures, ids mapped. A column of the source is
    copied when this store's table has it, of the same type; a column a
    later schema added (schema.sql's ALTER TABLE) may be missing, any other
    refuses the source."""
    columns: dict[tuple[str, str], dict[str, str]] = {}
    for db, table, column, typ in con.execute(
            "SELECT database_name = 'src', table_name, column_name, data_type "
            "FROM duckdb_columns() JOIN duckdb_tables() USING (database_name, schema_name, "
            "table_name) WHERE schema_name = 'main' AND database_name IN ('src', "
            "current_database()) ORDER BY table_name, column_index").fetchall():
        columns.setdefault(("src" if db else "dst", table), {})[column] = typ
    selects = {}
    for table in sorted(name for kind, name in own_objects() if kind == "table"):
        mine, theirs = columns.get(("dst", table)), columns.get(("src", table))
        if table in ("meta", "packets") or mine is None or theirs is None:
            continue                    # packets: below; a table older stores lack
        owner = "run_id" if "run_id" in mine else "capture_id"
        joins, shown = [], []
        for col, typ in mine.items():
            if col not in theirs:
                if (table, col) in added_columns():
                    continue            # NULL, as in the store before it was added
                raise StoreError(f"{source}: table {table} has no column {col}; "
                                 f"not a store tcpvar wrote")
            if theirs[col] != typ:
                raise StoreError(f"{source}: column {table}.{col} is "
                                 f"{' '.join(theirs[col].split())[:60]!r}, not {typ}")
            if col in RUN_REFS or col in CAPTURE_REFS:
                alias = identifier(f"m_{col}")
                kind = "run_map" if col in RUN_REFS else "capture_map"
                joins.append(f"LEFT JOIN {kind} {alias} ON {alias}.old = s.{identifier(col)}")
                shown.append(f"{alias}.new AS {identifier(col)}")
            else:
                shown.append(f"s.{identifier(col)}")
        selects[table] = (f"SELECT {', '.join(shown)} FROM src.main.{identifier(table)} s "
                          f"{' '.join(joins)} WHERE {identifier(f'm_{owner}')}.fresh")
    return selects
