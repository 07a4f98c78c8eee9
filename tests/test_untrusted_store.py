"""Stores and exported Parquet folders are somebody else's data, never their
code (docs/security.md): a store made by `tcpvar analyze` and then altered
here as an attacker would (a column name that is SQL, a macro that replaces
a built-in, a view replaced under tcpvar's name, objects tcpvar never
creates, a symbolic link among the segments), run through the real command
line. What a store may hold runs nowhere: merge copies this store's own
columns, a read-only open refuses the store, a writable one drops what it
did not create, and each says so on one line."""
from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tcpvar.store.db import own_columns

import peers
from conftest import FIXTURES, ROOT
from conftest import tcpvar_process as tcpvar

CAPTURE = FIXTURES / "iperf_rto.pcap"       # RTT stdev 10.8 and 5.1 ms by tcptrace
STDEVS = "SELECT conn, dir, rtt_stdev_ms FROM conn_stats ORDER BY conn, dir"


def one_error(res, status: int, words: str) -> None:
    lines = res.stderr.strip().splitlines()
    assert res.returncode == status, res.stderr
    assert len(lines) == 1 and words in lines[0], res.stderr
    assert "Traceback" not in res.stderr


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> Path:
    """A store as tcpvar writes it, holding CAPTURE."""
    db = tmp_path_factory.mktemp("clean") / "clean.duckdb"
    res = tcpvar("analyze", "-q", "--db", db, CAPTURE)
    assert res.returncode == 0, res.stderr
    return db


@pytest.fixture(scope="module")
def truth(clean) -> list[tuple]:
    """conn_stats' RTT stdevs from the clean store, held once to tcptrace's."""
    res = tcpvar("query", "--db", clean, "--json", STDEVS)
    rows = [(r["conn"], r["dir"], r["rtt_stdev_ms"]) for r in json.loads(res.stdout)]
    theirs = peers.tcptrace(str(CAPTURE))
    assert len(theirs) == 2 and len(rows) == 4
    for conn, side in zip(theirs, (1, 2)):
        for d, key in ((0, "a2b"), (1, "b2a")):
            ours = next(s for c, dd, s in rows if c == side and dd == d)
            if peers.number(conn[key]["RTT samples"]) > 2:
                assert abs(ours - peers.number(conn[key]["RTT stdev"])) <= 0.05 + 1e-9
    assert max(s for *_, s in rows) > 5      # a figure a fake sqrt would change
    return rows


def attacker(clean: Path, tmp_path: Path, *sql: str, name: str = "evil") -> Path:
    """A copy of @clean (file and packets) altered by @sql, as anybody can."""
    db = tmp_path / f"{name}.duckdb"
    shutil.copy(clean, db)
    shutil.copytree(f"{clean}.packets", f"{db}.packets")
    con = duckdb.connect(str(db))
    for statement in sql:
        con.execute(statement)
    con.close()
    return db


def catalog(db: Path, sql: str) -> list:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def stdevs_of(res) -> list[tuple]:
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    return sorted((c["id"], d, c[key]["rtt_stdev_ms"]) for c in doc["connections"]
                  for d, key in ((0, "a2b"), (1, "b2a")))


def identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# -- merge ------------------------------------------------------------------

@pytest.mark.parametrize("how", ["renamed", "added"])
def test_a_column_name_is_never_sql(clean, tmp_path, how):
    """A column whose name closes the quoted identifier and adds a COPY: in
    place of one of tcpvar's (the store lacks that column: refused) or
    beside them (not copied: the store merges without it)."""
    victim = tmp_path / "written_by_the_store"
    evil = (f'capture_id" AS reset FROM src.connections s LEFT JOIN capture_map m_capture_id '
            f"ON m_capture_id.old = s.capture_id WHERE false; COPY (SELECT 42) TO '{victim}' "
            f'(HEADER false); SELECT "capture_id')
    alter = (f"ALTER TABLE connections RENAME COLUMN reset TO {identifier(evil)}"
             if how == "renamed" else
             f"ALTER TABLE connections ADD COLUMN {identifier(evil)} INTEGER")
    db = attacker(clean, tmp_path, alter)
    res = tcpvar("merge", "--db", tmp_path / "mine.duckdb", db)
    if how == "renamed":
        one_error(res, 5, "table connections has no column reset")
    else:
        assert res.returncode == 0 and "1 captures copied" in res.stderr, res.stderr
        assert catalog(tmp_path / "mine.duckdb", "SELECT count(*) FROM connections") == [(2,)]
    assert not victim.exists()


def test_a_column_of_another_type_is_refused(clean, tmp_path):
    db = attacker(clean, tmp_path, "ALTER TABLE connections ALTER a_port TYPE VARCHAR")
    one_error(tcpvar("merge", "--db", tmp_path / "mine.duckdb", db), 5,
              "table connections has no column a_port of type USMALLINT")
    assert catalog(tmp_path / "mine.duckdb", "SELECT count(*) FROM captures") == [(0,)]


def test_a_symlinked_segment_is_refused(clean, tmp_path):
    """A segment that links to a file elsewhere (another store's packets,
    /etc/shadow) is not copied into this store."""
    db = attacker(clean, tmp_path)
    segment = next(Path(f"{db}.packets", "capture_id=1").glob("*.parquet"))
    segment.unlink()
    segment.symlink_to(next(Path(f"{clean}.packets", "capture_id=1").glob("*.parquet")))
    one_error(tcpvar("merge", "--db", tmp_path / "mine.duckdb", db), 5, "a symbolic link")
    assert not Path(tmp_path / "mine.duckdb.packets", "capture_id=1").exists()
    assert catalog(tmp_path / "mine.duckdb", "SELECT count(*) FROM captures") == [(0,)]


# -- what a store holds besides its rows -----------------------------------

def test_a_macro_named_like_a_built_in_is_refused_read_only(clean, tmp_path, truth):
    db = attacker(clean, tmp_path, "CREATE MACRO sqrt(x) AS 0")
    one_error(tcpvar("query", "--db", db, STDEVS), 5,
              f"store {db}: holds a macro 'sqrt' that tcpvar did not create; refused")
    one_error(tcpvar("merge", "--db", tmp_path / "mine.duckdb", db), 5, "a macro 'sqrt'")
    assert catalog(db, "SELECT count(*) FROM duckdb_functions() WHERE function_name = 'sqrt' "
                       "AND NOT internal") == [(1,)]            # read-only: left as it was


@pytest.mark.parametrize("hide", [
    "CREATE MACRO duckdb_functions() AS TABLE SELECT * FROM system.main.duckdb_functions() "
    "WHERE false",
    "CREATE MACRO current_database() AS 'elsewhere'",
    "CREATE MACRO duckdb_tables() AS TABLE SELECT 1 AS x"])
def test_a_macro_cannot_hide_itself_from_the_check(clean, tmp_path, hide):
    """A macro named like a catalog function the check reads: the check
    names every function with its catalog, so it still sees sqrt."""
    db = attacker(clean, tmp_path, "CREATE MACRO sqrt(x) AS 0", hide)
    one_error(tcpvar("query", "--db", db, STDEVS), 5, "that tcpvar did not create; refused")


def test_a_macro_named_like_a_built_in_is_dropped_when_writable(clean, tmp_path, truth):
    db = attacker(clean, tmp_path, "CREATE MACRO sqrt(x) AS 0")
    res = tcpvar("analyze", "--json", "--db", db, CAPTURE)
    assert stdevs_of(res) == truth
    assert res.stderr.strip() == (f"warning: store {db}: held a macro 'sqrt' that tcpvar "
                                  f"did not create; dropped")
    assert catalog(db, "SELECT count(*) FROM duckdb_functions() WHERE NOT internal "
                       "AND database_name = 'evil'") == [(0,)]


def test_a_replaced_view_is_not_used(clean, tmp_path, truth):
    """conn_stats replaced under its own name, the schema digest in meta left
    as tcpvar wrote it: neither a read-only nor a writable open uses it."""
    views = (ROOT / "store" / "views.sql").read_text()
    honest = re.search(r"CREATE OR REPLACE VIEW conn_stats AS.*?;", views, re.S)[0]
    forged = honest.replace("sqrt(", "0 * sqrt(")
    db = attacker(clean, tmp_path, forged)
    query = tcpvar("query", "--db", db, "--json", STDEVS)
    assert query.returncode == 0, query.stderr
    assert [(r["conn"], r["dir"], r["rtt_stdev_ms"]) for r in json.loads(query.stdout)] == truth
    assert stdevs_of(tcpvar("analyze", "--json", "--db", db, CAPTURE)) == truth
    sql = "SELECT sql FROM duckdb_views() WHERE view_name = 'conn_stats'"
    assert catalog(db, sql) == catalog(clean, sql)              # rebuilt as tcpvar's


EXTRAS = (
    "CREATE SEQUENCE extra_ids",
    "CREATE TYPE mood AS ENUM ('a', 'b')",
    "CREATE MACRO rows_of() AS TABLE SELECT * FROM read_text('/etc/hostname')",
    "CREATE INDEX by_path ON captures (path)",
    "CREATE VIEW hostname AS SELECT * FROM read_text('/etc/hostname')",
    "CREATE SCHEMA elsewhere",
    "CREATE VIEW elsewhere.conn_stats AS SELECT 1 AS x",
    "CREATE TABLE notes (note VARCHAR DEFAULT 'mine')",          # somebody's own table
    "INSERT INTO notes VALUES ('kept')",
)


def test_objects_tcpvar_did_not_create(clean, tmp_path, truth):
    """Read-only: refused, naming them; writable: dropped, said on one line.
    A table of somebody's own stays, and tcpvar never reads it."""
    db = attacker(clean, tmp_path, *EXTRAS)
    one_error(tcpvar("query", "--db", db, "SELECT 1"), 5,
              "holds an index 'by_path' on table 'captures', a schema 'elsewhere', "
              "a sequence 'extra_ids' and 4 more that tcpvar did not create; refused")
    res = tcpvar("analyze", "--json", "--db", db, CAPTURE)
    assert stdevs_of(res) == truth
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"warning: store {db}: held an index")
    assert lines[0].endswith("and 4 more that tcpvar did not create; dropped")
    left = catalog(db, "SELECT count(*) FROM duckdb_functions() WHERE NOT internal UNION ALL "
                       "SELECT count(*) FROM duckdb_sequences() WHERE sequence_name = "
                       "'extra_ids' UNION ALL SELECT count(*) FROM duckdb_types() WHERE NOT "
                       "internal UNION ALL SELECT count(*) FROM duckdb_indexes() UNION ALL "
                       "SELECT count(*) FROM duckdb_schemas() WHERE NOT internal UNION ALL "
                       "SELECT count(*) FROM duckdb_views() WHERE view_name = 'hostname'")
    assert left == [(0,)] * 6
    assert catalog(db, "SELECT * FROM notes") == [("kept",)]
    res = tcpvar("query", "--db", db, "--csv", "SELECT count(*) AS n FROM notes")
    assert res.returncode == 0 and res.stdout.split() == ["n", "1"], res.stderr


STEAL = ("CREATE TABLE loot (content VARCHAR)",
         "CREATE TRIGGER steal AFTER INSERT ON captures FOR EACH STATEMENT "
         "INSERT INTO loot SELECT content FROM read_text('/etc/hostname')")


def test_a_trigger_never_fires(clean, tmp_path, truth):
    """A trigger on one of tcpvar's tables runs its SQL in tcpvar's inserts,
    here copying a file of the user's into the store: refused read-only;
    dropped when writable, before anything is inserted."""
    db = attacker(clean, tmp_path, *STEAL)
    one_error(tcpvar("query", "--db", db, "SELECT 1"), 5,
              "holds a trigger 'steal' on table 'captures' that tcpvar did not create; refused")
    res = tcpvar("analyze", "--json", "--force", "--db", db, CAPTURE)
    assert stdevs_of(res) == truth
    assert res.stderr.strip() == (f"warning: store {db}: held a trigger 'steal' on table "
                                  f"'captures' that tcpvar did not create; dropped")
    assert catalog(db, "SELECT count(*) FROM duckdb_triggers()") == [(0,)]
    assert catalog(db, "SELECT count(*) FROM loot") == [(0,)]


ALTER_IN_PLACE = """
import duckdb, os, sys
con = duckdb.connect(sys.argv[1])
con.execute("CREATE MACRO sqrt(x) AS 0")
if sys.argv[2] == "wal":
    os._exit(0)         # the macro only in the WAL, as a killed process leaves it
con.close()
"""


@pytest.mark.parametrize("where", ["file", "wal"])
def test_a_store_tcpvar_left_then_altered_in_place(tmp_path, truth, where):
    """A store tcpvar closed itself is opened without listing its catalog
    (store/checked.py); one altered in place since, the same file at the
    same path, is checked in full: whether the change reached the file or
    waits in its WAL."""
    db = tmp_path / "mine.duckdb"
    res = tcpvar("analyze", "-q", "--db", db, CAPTURE)
    assert res.returncode == 0, res.stderr
    inode = db.stat().st_ino
    done = subprocess.run([sys.executable, "-c", ALTER_IN_PLACE, str(db), where])
    assert done.returncode == 0 and db.stat().st_ino == inode
    assert Path(f"{db}.wal").exists() == (where == "wal")
    one_error(tcpvar("query", "--db", db, STDEVS), 5,
              f"store {db}: holds a macro 'sqrt' that tcpvar did not create; refused")
    res = tcpvar("analyze", "--json", "--db", db, CAPTURE)
    assert stdevs_of(res) == truth
    assert res.stderr.strip() == (f"warning: store {db}: held a macro 'sqrt' that tcpvar "
                                  f"did not create; dropped")


def test_a_view_in_place_of_a_table(clean, tmp_path):
    """A view named like one of tcpvar's tables, meta's digest left as it
    was: refused read-only; dropped when writable, and the table made anew."""
    db = attacker(clean, tmp_path, "DROP TABLE runs",
                  "CREATE VIEW runs AS SELECT * FROM read_text('/etc/hostname')")
    one_error(tcpvar("query", "--db", db, "SELECT * FROM runs"), 5,
              "holds a view 'runs' that tcpvar did not create; refused")
    res = tcpvar("analyze", "-q", "--db", db, CAPTURE)
    assert res.returncode == 0 and "held a view 'runs'" in res.stderr, res.stderr
    res = tcpvar("query", "--db", db, "--csv", "SELECT count(*) AS n FROM runs")
    assert res.returncode == 0 and res.stdout.split() == ["n", "0"], res.stderr


@pytest.mark.parametrize("alter, words", [
    ("ALTER TABLE captures ALTER COLUMN warning SET DEFAULT 'forged'",
     "a column expression 'warning' on table 'captures'"),
    ("CREATE TABLE conn_stats AS SELECT 1 AS x",   # where tcpvar keeps a view
     "a table 'conn_stats'"),
])
def test_what_cannot_be_dropped_refuses_either_way(clean, tmp_path, alter, words):
    db = attacker(clean, tmp_path, "DROP VIEW conn_stats" if "conn_stats" in alter
                  else "SELECT 1", alter)
    before = db.read_bytes()
    for args in (("query", "--db", db, "SELECT 1"), ("analyze", "--db", db, CAPTURE)):
        one_error(tcpvar(*args), 5, f"holds {words} that tcpvar did not create; refused")
    assert db.read_bytes() == before


def test_a_query_reads_the_store_and_nothing_else(clean):
    """`tcpvar query` runs the user's SQL with external access off but for
    the packets' folder, and the configuration locked."""
    res = tcpvar("query", "--db", clean, "--csv", "SELECT count(*) > 0 AS some FROM packets")
    assert res.returncode == 0 and res.stdout.split() == ["some", "True"], res.stderr
    one_error(tcpvar("query", "--db", clean, "SELECT * FROM read_text('/etc/hostname')"),
              5, "file system operations are disabled")
    one_error(tcpvar("query", "--db", clean, "SET enable_external_access = true"), 5,
              "query failed")
    one_error(tcpvar("query", "--db", clean, "SET allowed_directories = ['/']"), 5,
              "the configuration has been locked")
    res = tcpvar("query", "--db", clean, "--csv",
                 "SELECT current_setting('autoload_known_extensions') AS a, "
                 "current_setting('autoinstall_known_extensions') AS i")
    assert res.stdout.split() == ["a,i", "False,False"], res.stderr


def test_a_sqlite_file_loads_no_extension(tmp_path):
    """DuckDB opening a SQLite file loads its SQLite extension when one is
    installed (and fetches it, with autoinstall on): here a junk one is
    installed, which DuckDB would complain of had it tried to load it."""
    home = tmp_path / "home"
    platform = duckdb.execute("PRAGMA platform").fetchone()[0]
    extensions = home / ".duckdb" / "extensions" / f"v{duckdb.__version__}" / platform
    extensions.mkdir(parents=True)
    (extensions / "sqlite_scanner.duckdb_extension").write_bytes(b"junk")
    db = tmp_path / "other.duckdb"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    env = {**os.environ, "HOME": str(home)}
    for args in (("query", "--db", db, "SELECT 1"),
                 ("merge", "--db", tmp_path / "mine.duckdb", db)):
        one_error(tcpvar(*args, env=env), 5, "not a valid DuckDB database file")


# -- exported Parquet folders ----------------------------------------------

@pytest.fixture(scope="module")
def exported(clean, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("export") / "out"
    res = tcpvar("export", "--parquet", out, "--db", clean)
    assert res.returncode == 0, res.stderr
    return out


def altered(exported: Path, tmp_path: Path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(exported, out)
    return out


def test_an_export_merges(exported, tmp_path, truth):
    res = tcpvar("merge", "--db", tmp_path / "mine.duckdb", exported)
    assert res.returncode == 0 and "1 captures copied" in res.stderr, res.stderr
    res = tcpvar("query", "--db", tmp_path / "mine.duckdb", "--json", STDEVS)
    assert [(r["conn"], r["dir"], r["rtt_stdev_ms"]) for r in json.loads(res.stdout)] == truth


def test_an_export_holding_a_link_is_refused(exported, tmp_path):
    for where in ("packets", "connections"):
        out = altered(exported, tmp_path / where)
        part = next((out / where / "capture_id=1").glob("*.parquet"))
        part.unlink()
        part.symlink_to(next((exported / where / "capture_id=1").glob("*.parquet")))
        one_error(tcpvar("merge", "--db", tmp_path / "mine.duckdb", out), 5,
                  "a symbolic link")
    out = altered(exported, tmp_path / "dir")
    shutil.rmtree(out / "throughput")
    (out / "throughput").symlink_to(exported / "throughput")
    one_error(tcpvar("merge", "--db", tmp_path / "mine.duckdb", out), 5, "a symbolic link")
    assert catalog(tmp_path / "mine.duckdb", "SELECT count(*) FROM captures") == [(0,)]


def test_names_in_an_export_are_never_sql(exported, tmp_path):
    """A file name and a column name that would close a string or an
    identifier and COPY: data, never run."""
    out = altered(exported, tmp_path)
    copy_sql = "COPY (SELECT 42) TO 'written_by_the_export' (HEADER false)"
    part = next((out / "throughput" / "capture_id=1").glob("*.parquet"))
    part.rename(part.with_name(f"x'); {copy_sql}; SELECT ('.parquet"))
    con = duckdb.connect()
    evil = f'x" FROM t; {copy_sql}; SELECT 1 AS "x'
    con.execute(f"COPY (SELECT 1 AS conn, 2 AS {identifier(evil)}) TO "
                f"'{out}/connections/capture_id=1/extra.parquet'")
    con.close()
    res = tcpvar("merge", "--db", tmp_path / "mine.duckdb", out, cwd=tmp_path)
    one_error(res, 5, "not an export this tcpvar reads")
    (out / "connections" / "capture_id=1" / "extra.parquet").unlink()
    res = tcpvar("merge", "--db", tmp_path / "mine.duckdb", out, cwd=tmp_path)
    assert res.returncode == 0 and "1 captures copied" in res.stderr, res.stderr
    assert not (tmp_path / "written_by_the_export").exists()


@pytest.mark.parametrize("meta, words", [
    (b"PAR1 not parquet at all", "not an export this tcpvar reads"),
    ("SELECT 'schema_version' AS key, '2''; COPY (SELECT 1) TO ''x''\n' AS value",
     "exported with schema version \"2'; COPY (SELECT 1) TO 'x'\\n\", this tcpvar needs 2"),
    ("SELECT 'other' AS key, '../../etc' AS value", "exported with schema version none"),
    ("SELECT 1 AS nothing", "not an export this tcpvar reads"),
])
def test_a_malformed_meta_is_one_line(exported, tmp_path, meta, words):
    out = altered(exported, tmp_path)
    if isinstance(meta, bytes):
        (out / "meta.parquet").write_bytes(meta)
    else:
        con = duckdb.connect()
        con.execute(f"COPY ({meta}) TO '{out}/meta.parquet'")
        con.close()
    one_error(tcpvar("merge", "--db", tmp_path / "mine.duckdb", out, cwd=tmp_path), 5, words)
    assert not (tmp_path / "x").exists()


def test_a_malformed_table_is_one_line(exported, tmp_path):
    out = altered(exported, tmp_path)
    part = next((out / "captures" / "capture_id=1").glob("*.parquet"))
    part.write_bytes(b"garbage")
    one_error(tcpvar("merge", "--db", tmp_path / "mine.duckdb", out), 5,
              "not an export this tcpvar reads")


def test_the_columns_tcpvar_expects_are_the_schemas():
    """Store.own_columns() reads schema.sql's text: what DuckDB makes of it."""
    con = duckdb.connect()
    con.execute((ROOT / "store" / "schema.sql").read_text())
    made = con.execute("SELECT table_name, column_name, data_type FROM duckdb_columns() "
                       "WHERE database_name = 'memory' AND schema_name = 'main'").fetchall()
    assert set(made) == own_columns() and len(made) > 200


@pytest.mark.parametrize("alter, words", [
    ("ALTER TABLE runs RENAME COLUMN kind TO other", "table runs has no column kind"),
    ("ALTER TABLE captures ALTER COLUMN warning TYPE INTEGER USING 0",
     "table captures has no column warning of type VARCHAR")])
def test_a_renamed_or_retyped_column_is_refused(clean, tmp_path, alter, words):
    db = attacker(clean, tmp_path, alter)
    one_error(tcpvar("query", "--db", db, "SELECT 1"), 5, words)
    one_error(tcpvar("analyze", "--db", db, CAPTURE), 5, words)


def test_a_segment_that_is_not_parquet_is_one_line(clean, tmp_path):
    db = attacker(clean, tmp_path)
    (Path(f"{db}.packets") / "capture_id=0" / "schema.parquet").write_bytes(b"")
    one_error(tcpvar("query", "--db", db, "SELECT 1"), 5, "not a store this tcpvar reads")


def test_a_store_named_with_a_pattern_is_one_line(clean, tmp_path):
    folder = tmp_path / "a[b]"
    folder.mkdir()
    one_error(tcpvar("analyze", "--db", folder / "s.duckdb", CAPTURE), 5,
              "a name with * ? [ or { cannot be a store")


def test_a_column_tcpvar_did_not_create(clean, tmp_path, truth):
    """Read, a store may have more columns (merge leaves them behind); one
    written into may not: tcpvar's inserts would fail halfway (they were
    internal errors)."""
    db = attacker(clean, tmp_path, "ALTER TABLE connections ADD COLUMN extra INTEGER")
    one_error(tcpvar("analyze", "--db", db, CAPTURE), 5,
              "table connections has a column 'extra' that tcpvar did not create")
    res = tcpvar("query", "--db", db, "--json", STDEVS)
    assert res.returncode == 0, res.stderr
    assert [(r["conn"], r["dir"], r["rtt_stdev_ms"]) for r in json.loads(res.stdout)] == truth
