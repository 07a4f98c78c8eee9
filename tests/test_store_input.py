"""The store as users find it: corrupt or cut short, of an older tcpvar,
held by another process, on a read-only or a full file system. Each gets
one line on stderr and its documented exit status (docs/analyze.md), and
nothing stored before is lost."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

import peers
from conftest import FIXTURES
from conftest import tcpvar_process as tcpvar

SMALL = FIXTURES / "out_of_order.pcap"
LARGE = FIXTURES / "iperf_bulk_loss.pcap"


def one_error(res, status: int, words: str) -> None:
    lines = res.stderr.strip().splitlines()
    assert res.returncode == status, res.stderr
    assert len(lines) == 1 and words in lines[0], res.stderr
    assert "Traceback" not in res.stderr


def paths(db: Path) -> list[str]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return [Path(p).name for (p,) in con.execute(
            "SELECT path FROM captures WHERE complete ORDER BY capture_id").fetchall()]
    finally:
        con.close()


@pytest.fixture
def stored(tmp_path) -> Path:
    """A store holding one capture."""
    db = tmp_path / "t.duckdb"
    assert tcpvar("analyze", "-q", "--db", db, SMALL).returncode == 0
    return db


@pytest.fixture
def tmpfs(tmp_path):
    """A small tmpfs of our own, unmounted whatever happens."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=300k", "tcpvar-test", str(mnt)],
                   check=True)
    yield mnt
    subprocess.run(["umount", str(mnt)], check=False)


@pytest.mark.parametrize("stem", ["memory", "system", "temp", "main"])
def test_a_store_named_like_duckdbs_own_databases(tmp_path, stem):
    """A command attaches its store to the DuckDB instance it started as it
    began (store.engine.start_early()): a store named like one of DuckDB's
    own databases is written and read all the same, under the name
    DuckDB's own connection gives it."""
    db = tmp_path / f"{stem}.duckdb"
    assert tcpvar("analyze", "-q", "--db", db, SMALL).returncode == 0
    res = tcpvar("query", "--db", db, "--csv",
                 "SELECT current_database(), count(*) FROM connections")
    assert res.returncode == 0, res.stderr
    con = duckdb.connect(str(db), read_only=True)
    name = con.execute("SELECT current_database()").fetchone()[0]
    con.close()
    assert res.stdout.splitlines()[1] == f"{name},{len(peers.tcptrace(str(SMALL)))}"


@pytest.mark.parametrize("via", ["sub/../t.duckdb", "link/t.duckdb", "./sub/..//t.duckdb"])
def test_a_store_named_through_dots_and_links(tmp_path, via):
    """DuckDB names an attached file by its path made absolute and
    normalised: a store named through `..`, `.`, `//` or a linked folder
    is the same store, analysed and read back."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "link").symlink_to(tmp_path)
    assert tcpvar("analyze", "-q", "--db", via, SMALL, cwd=tmp_path).returncode == 0
    assert paths(tmp_path / "t.duckdb") == [SMALL.name]
    res = tcpvar("query", "--db", via, "--csv", "SELECT count(*) FROM connections",
                 cwd=tmp_path)
    assert res.stdout.splitlines()[1:] == [str(len(peers.tcptrace(str(SMALL))))], res.stderr


def test_a_command_leaves_its_store_checkpointed(stored):
    """The store detaches from the command's DuckDB instance as it closes,
    the process then ending whole: its commits are in the file, no WAL is
    left beside it for the next opening to replay."""
    assert not Path(f"{stored}.wal").exists()
    assert tcpvar("analyze", "-q", "--db", stored, LARGE).returncode == 0
    assert not Path(f"{stored}.wal").exists()
    assert paths(stored) == [SMALL.name, LARGE.name]


def test_not_a_database(tmp_path):
    db = tmp_path / "t.duckdb"
    db.write_bytes(bytes(range(256)) * 20)
    one_error(tcpvar("analyze", "--db", db, SMALL), 5, "not a valid DuckDB database file")
    assert db.read_bytes() == bytes(range(256)) * 20        # left as it was


def test_cut_short(stored, tmp_path):
    cut = tmp_path / "cut.duckdb"
    cut.write_bytes(stored.read_bytes()[:20000])
    one_error(tcpvar("analyze", "--db", cut, SMALL), 5, "Could not read enough bytes")
    one_error(tcpvar("query", "--db", cut, "SELECT 1"), 5, "cannot open store")


def test_a_duckdb_file_of_someone_else(tmp_path):
    db = tmp_path / "other.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE t AS SELECT 1 AS x")
    con.close()
    one_error(tcpvar("query", "--db", db, "SELECT 1"), 5, "not a tcpvar database")


def test_an_older_schema(stored):
    con = duckdb.connect(str(stored))
    con.execute("UPDATE meta SET value = '0' WHERE key = 'schema_version'")
    con.close()
    one_error(tcpvar("analyze", "--db", stored, LARGE), 5,
              "schema version 0, this tcpvar needs 2; use a new --db file")
    con = duckdb.connect(str(stored), read_only=True)
    assert con.execute("SELECT count(*) FROM captures").fetchone()[0] == 1
    con.close()


def test_a_version_1_store_is_read_then_migrated(stored):
    """A store of schema version 1 kept its packets in a table: a reader
    reads it as it is; the first writer moves the packets into segment
    files, and they are the same packets."""
    def packets(con) -> list[tuple]:
        return con.execute("SELECT * FROM packets ORDER BY capture_id, frame").fetchall()

    con = duckdb.connect(str(stored))
    before = packets(con)
    con.execute("CREATE TABLE packets_table AS SELECT * FROM packets")
    con.execute("DROP VIEW packets")
    con.execute("ALTER TABLE packets_table RENAME TO packets")
    con.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    con.execute("DELETE FROM meta WHERE key = 'schema_digest'")
    con.close()
    shutil.rmtree(f"{stored}.packets")
    res = tcpvar("query", "--db", stored, "--csv", "SELECT count(*) AS n FROM cwnd_estimate")
    assert res.returncode == 0 and int(res.stdout.split()[1]) > 0, res.stderr
    assert tcpvar("analyze", "-q", "--db", stored, LARGE).returncode == 0
    con = duckdb.connect(str(stored), read_only=True)
    assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("2",)
    assert not con.execute("SELECT * FROM duckdb_tables() WHERE table_name = 'packets'"
                           ).fetchall()
    after = [p for p in packets(con) if p[0] == before[0][0]]
    con.close()
    assert after == before and len(before) > 10
    assert paths(stored) == [SMALL.name, LARGE.name]


def test_a_store_from_before_rto_var_gets_the_column(stored):
    """probe_events of a store written before the rto_var_us column: the
    next writer adds it, and probe_timeline shows it."""
    con = duckdb.connect(str(stored))
    con.execute("ALTER TABLE probe_events DROP COLUMN rto_var_us")
    con.execute("DELETE FROM meta WHERE key = 'schema_digest'")
    con.close()
    assert tcpvar("analyze", "-q", "--db", stored, LARGE).returncode == 0
    res = tcpvar("query", "--db", stored, "--csv",
                 "SELECT count(*) AS n, count(rto_var_ms) AS v FROM probe_timeline")
    assert res.returncode == 0 and res.stdout.split() == ["n,v", "0,0"], res.stderr
    assert paths(stored) == [SMALL.name, LARGE.name]


@pytest.mark.parametrize("table", ["hops", "latency", "queue_delays", "backlog_samples"])
def test_a_store_from_before_a_table_is_read_then_gets_it(stored, table):
    """A store written before one of the later tables: read as it is (the
    commands that read it find the table empty), and the next writer adds
    the table."""
    con = duckdb.connect(str(stored))
    con.execute(f"DROP TABLE {table}")
    con.execute("DELETE FROM meta WHERE key = 'schema_digest'")
    con.close()
    res = tcpvar("query", "--csv", "--db", stored, f"SELECT count(*) AS n FROM {table}")
    assert res.returncode == 0 and res.stdout.split() == ["n", "0"], res.stderr
    con = duckdb.connect(str(stored), read_only=True)
    assert not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = ?",
                           [table]).fetchone()[0]      # reading added nothing to the file
    con.close()
    res = tcpvar("compare", "--by", "cc", "--db", stored)      # it migrates, as writers do
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    con = duckdb.connect(str(stored), read_only=True)
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = ?",
                       [table]).fetchone()[0] == 1
    con.close()


def test_held_by_another_writer(stored):
    """DuckDB lets one process write a store: the second one fails clearly,
    naming the holder, and the first one's data stay."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys; c = duckdb.connect(sys.argv[1]); "
         "print('open', flush=True); sys.stdin.read()", str(stored)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        res = tcpvar("analyze", "--db", stored, LARGE)
        assert "is open in another process" in res.stderr
        one_error(res, 5, f"PID {holder.pid}): wait for it to finish, or use another --db")
        one_error(tcpvar("query", "--db", stored, "SELECT 1"), 5, f"PID {holder.pid}")
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert paths(stored) == [SMALL.name]
    assert tcpvar("analyze", "-q", "--db", stored, LARGE).returncode == 0   # now it is free
    assert paths(stored) == [SMALL.name, LARGE.name]


def test_read_only_file_system(stored, tmpfs):
    db = tmpfs / "t.duckdb"
    subprocess.run(["mount", "-o", "remount,size=64m", str(tmpfs)], check=True)
    shutil.copy(stored, db)
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
    one_error(tcpvar("analyze", "--db", db, LARGE), 5, "Read-only file system")
    res = tcpvar("query", "--db", db, "--csv", "SELECT count(*) AS n FROM captures")
    assert res.returncode == 0 and res.stdout.split() == ["n", "1"]     # reading still works


def test_full_disk(tmpfs):
    """A capture that does not fit: one line, exit 10, the capture before it
    kept whole, and the same file analysed once there is room."""
    db = tmpfs / "t.duckdb"
    assert tcpvar("analyze", "-q", "--db", db, SMALL).returncode == 0
    one_error(tcpvar("analyze", "-q", "--db", db, LARGE), 10, "no space left on device")
    assert paths(db) == [SMALL.name]
    subprocess.run(["mount", "-o", "remount,size=64m", str(tmpfs)], check=True)
    assert tcpvar("analyze", "-q", "--db", db, LARGE).returncode == 0
    assert paths(db) == [SMALL.name, LARGE.name]
    con = duckdb.connect(str(db), read_only=True)
    packets = con.execute("SELECT count(*) FROM packets p JOIN captures c USING (capture_id) "
                          "WHERE c.path LIKE '%iperf_bulk_loss.pcap'").fetchone()[0]
    con.close()
    frames = subprocess.run(["tshark", "-r", str(LARGE), "-Y", "tcp"], capture_output=True,
                            text=True, check=True).stdout.count("\n")
    assert packets == frames



def test_a_segment_that_cannot_be_written_fails_its_capture(tmp_path):
    """A packets segment a writer thread cannot put in place (here a folder
    stands where its file goes, in a new store: an older one removes such
    leftovers as it opens) fails the capture in one line, the store keeps
    no part of it, and the next try stores it."""
    db = tmp_path / "t.duckdb"
    blocker = tmp_path / "t.duckdb.packets" / "capture_id=1" / "part-0.parquet"
    blocker.mkdir(parents=True)
    (blocker / "x").write_text("")
    one_error(tcpvar("analyze", "-q", "--db", db, LARGE), 5,
              "part-0.parquet: cannot write this segment of the packets (Is a directory)")
    assert paths(db) == []
    assert not blocker.exists()
    assert tcpvar("analyze", "-q", "--db", db, LARGE).returncode == 0
    assert paths(db) == [LARGE.name]


@pytest.mark.parametrize("linked", ["t.duckdb.packets/capture_id=1", "t.duckdb.packets"])
def test_packets_are_never_written_through_a_link(tmp_path, linked):
    """A store handed over with its packets folder, or a capture's folder in
    it, as a symbolic link to somewhere else: the load is refused in one
    line and nothing is written there."""
    db = tmp_path / "t.duckdb"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / linked).parent.mkdir(parents=True, exist_ok=True)
    if linked.endswith("capture_id=1"):
        (tmp_path / "t.duckdb.packets" / "capture_id=0").mkdir()
        (elsewhere / "capture_id=0").mkdir()
    os.symlink(elsewhere, tmp_path / linked)
    res = tcpvar("analyze", "-q", "--db", db, SMALL)
    one_error(res, 5, "a symbolic link where tcpvar writes files of its own; refused")
    assert not [p for p in elsewhere.rglob("*") if p.is_file()]

CATALOG = """
    SELECT 'column', table_name, column_name || ' ' || data_type FROM duckdb_columns()
    WHERE database_name = current_database() AND table_name <> 'packets'
    UNION ALL SELECT 'view', view_name, sql FROM duckdb_views()
    WHERE database_name = current_database() AND NOT internal AND view_name <> 'packets'
    UNION ALL SELECT 'sequence', sequence_name, increment_by::VARCHAR FROM duckdb_sequences()
    WHERE database_name = current_database()
    UNION ALL SELECT 'meta', key, value FROM meta
    ORDER BY ALL"""


def test_a_new_store_is_a_copy_of_the_template(tmp_path):
    """A new store is copied, sparse, from the template tcpvar keeps in its
    cache (made by the first command that wants it): the same tables,
    views, sequences and meta rows as a store made from schema.sql and
    views.sql, the same packets schema segment (a copy of the template's),
    and a packets view over its own segments."""
    from tcpvar.store import Store

    env = {**os.environ, "TCPVAR_CACHE": str(tmp_path / "cache")}
    db = tmp_path / "new.duckdb"
    assert tcpvar("analyze", "-q", "--db", db, SMALL, env=env).returncode == 0
    files = sorted(p.name for p in (tmp_path / "cache" / "stores").iterdir() if p.is_file())
    assert len(files) == 2 and files[0].endswith(".duckdb")      # the template, and its
    assert files[1] == files[0].removesuffix(".duckdb") + ".schema.parquet"  # schema segment
    made = tmp_path / "made.duckdb"
    Store(made, copy_template=False).close()
    schema = Path("capture_id=0") / "schema.parquet"
    assert (Path(f"{db}.packets") / schema).read_bytes() == \
        (Path(f"{made}.packets") / schema).read_bytes()
    con = duckdb.connect(str(made), read_only=True)
    want = con.execute(CATALOG).fetchall()
    con.close()
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute(CATALOG).fetchall() == want
        packets = con.execute("SELECT count(*) FROM packets").fetchone()[0]
    finally:
        con.close()
    frames = subprocess.run(["tshark", "-r", str(SMALL), "-Y", "tcp"], capture_output=True,
                            text=True, check=True).stdout.count("\n")
    assert packets == frames
    assert db.stat().st_blocks * 512 < db.stat().st_size


def test_a_template_without_its_schema_segment_is_made_again(tmp_path):
    """A cache whose template has no packets schema segment beside it (one
    made before tcpvar kept it, or removed since) gets both anew, and a new
    store reads its packets."""
    env = {**os.environ, "TCPVAR_CACHE": str(tmp_path / "cache")}
    assert tcpvar("analyze", "-q", "--db", tmp_path / "a.duckdb", SMALL, env=env).returncode == 0
    stores = tmp_path / "cache" / "stores"
    segment = next(stores.glob("*.schema.parquet"))
    segment.unlink()
    db = tmp_path / "b.duckdb"
    assert tcpvar("analyze", "-q", "--db", db, SMALL, env=env).returncode == 0
    assert segment.is_file()
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM packets").fetchone()[0] == \
            con.execute("SELECT tcp_packets FROM captures").fetchone()[0] > 0
    finally:
        con.close()
