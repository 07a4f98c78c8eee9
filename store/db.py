"""Opening the store, applying its schema, and the few operations on it
that every stage shares (transactions, capture bookkeeping, user queries)."""
from __future__ import annotations

import contextlib
import copy
import functools
import os
import re
import sys
import threading
import time
from pathlib import Path

from tcpvar import safe_write, signals
from tcpvar.beside import Beside
from tcpvar.digest import blake2b
from tcpvar.errors import StoreError
from tcpvar.progress import Progress

from . import checked, engine, segments
from .engine import duckdb as _duckdb  # imported when a store is first opened

_HERE = Path(__file__).resolve().parent     # the SQL files are beside it
SCHEMA_VERSION = "2"        # 2: packets in Parquet segments; 1 (a table) is migrated
# the tables holding a capture's rows, the capture's own row last (its
# packets are segment files: store/segments.py)
CAPTURE_TABLES = ("connections", "dir_counters", "retransmit_events", "throughput", "captures")


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


def _views() -> str:
    return (_HERE / "views.sql").read_text()


def _schema() -> str:
    return (_HERE / "schema.sql").read_text()


@functools.cache
def made_of() -> str:
    """A digest of what makes a store tcpvar's: the schema, the views, the
    check of the catalog and DuckDB's version. A store that a tcpvar of
    another make left (store/checked.py) is checked in full."""
    text = f"{SCHEMA_VERSION}\n{_schema()}\n{_views()}\n{(_HERE / 'catalog.sql').read_text()}"
    return f"{_duckdb().__version__}-{blake2b(text.encode(), digest_size=8).hexdigest()}"


def identifier(name: str) -> str:
    """@name as a quoted SQL identifier, whatever it holds."""
    return '"' + name.replace('"', '""') + '"'


_CREATES = re.compile(r"^CREATE (?:OR REPLACE )?(TABLE|VIEW|SEQUENCE) (?:IF NOT EXISTS )?(\w+)",
                      re.M)


@functools.cache
def own_objects() -> frozenset[tuple[str, str]]:
    """(kind, name) of what tcpvar creates in a store's main schema, read
    from the SQL that creates it: the packets view is segments.py's (a
    table in a version 1 store)."""
    made = {(kind.lower(), name) for kind, name in _CREATES.findall(_schema() + _views())}
    return frozenset(made | {("view", "packets"), ("table", "packets")})


@functools.cache
def added_columns() -> frozenset[tuple[str, str]]:
    """(table, column) that schema.sql adds to stores written before them:
    an older store may lack them."""
    return frozenset(re.findall(r"^ALTER TABLE (\w+) ADD COLUMN IF NOT EXISTS (\w+)",
                                _schema(), re.M))


# tables a later schema added: a store written before them lacks them, and
# opened read-only (nothing may be added to it) gets them empty, as
# temporary tables, so that tcpvar's queries find nothing there
LATER_TABLES = ("hops", "latency", "queue_delays", "backlog_samples", "short_flows")


def _create_statement(table: str) -> str:
    """schema.sql's CREATE TABLE of @table."""
    m = re.search(rf"^CREATE TABLE IF NOT EXISTS {table} \(.*?\);", _schema(), re.M | re.S)
    return m[0]


@functools.cache
def own_columns() -> frozenset[tuple[str, str, str]]:
    """(table, column, type) of tcpvar's tables, read from schema.sql:
    `name TYPE ...` items of each CREATE TABLE, and the ALTER TABLE ... ADD
    COLUMNs (test_untrusted_store holds this to what DuckDB makes of it)."""
    schema = re.sub(r"--[^\n]*", "", _schema())
    out = set()
    for table, body in re.findall(r"^CREATE TABLE IF NOT EXISTS (\w+) \((.*?)\);", schema,
                                  re.M | re.S):
        for item in re.sub(r"PRIMARY KEY \([^)]*\)", "", body).split(","):
            if m := re.match(r"\s*(\w+)\s+(\w+(?:\[\])?)", item):
                out.add((table, m[1], m[2]))
    out |= set(re.findall(r"^ALTER TABLE (\w+) ADD COLUMN IF NOT EXISTS (\w+) (\w+)", schema,
                          re.M))
    return frozenset(out)


PAGE = 4096                 # the unit in which the template is copied sparse
_COLUMNS = ("SELECT table_name, column_name, data_type FROM system.main.duckdb_columns() "
            "WHERE database_name = system.main.current_database() AND schema_name = 'main' "
            "AND system.main.list_contains($1, table_name)")
# characters read_parquet would take as a pattern in the packets' folder
_GLOB = re.compile(r"[*?\[{]")

# what a store may hold that tcpvar drops when it did not create it, in the
# order dropped: views first (they may name the rest), a schema once emptied
_DROP = {"view": "VIEW", "trigger": "TRIGGER", "index": "INDEX", "macro": "MACRO",
         "table macro": "MACRO TABLE", "sequence": "SEQUENCE", "type": "TYPE", "schema": "SCHEMA"}


def _drop_statement(kind: str, schema: str, name: str, table: str | None) -> str:
    """The statement that drops a @kind of object catalog.sql found."""
    if kind == "schema":
        return f"DROP SCHEMA {identifier(name)}"
    if kind == "trigger":       # DuckDB names a trigger by its table
        return f"DROP TRIGGER {identifier(name)} ON {identifier(schema)}.{identifier(table)}"
    return f"DROP {_DROP[kind]} {identifier(schema)}.{identifier(name)}"


class Store:
    """A tcpvar workspace database (default ./tcpvar.duckdb)."""

    def __init__(self, path: str | Path = "tcpvar.duckdb", read_only: bool = False,
                 wait_s: float = 0.0, progress=None, copy_template: bool = True):
        """@wait_s: how long to wait for another process that holds the
        store (DuckDB lets one process at a time write a database), telling
        @progress; 0 fails at once. A new store starts as a copy of the
        template (template()), unless @copy_template is false."""
        self.path = str(path)
        self.read_only = read_only
        self._locked = False
        self.packets = segments.root(self.path)     # the packets' segment files
        self._limit = _SharedLimit()
        self._database = None       # its name, when attached to the command's instance
        self._detach = False        # this Store attached it (not a worker's view)
        self._record = False        # close() records its state (store/checked.py): once open
        if Path(self.path).is_dir():
            raise StoreError(f"store {self.path}: is a directory, not a DuckDB file")
        if read_only and not Path(self.path).exists():
            raise StoreError(f"store {self.path}: no such database (run `tcpvar analyze` first)")
        _check_header(Path(self.path))
        if _GLOB.search(str(self.packets)):
            raise StoreError(f"store {self.path}: a name with * ? [ or {{ cannot be a store "
                             f"(its packets are read by a pattern)")
        copied = copy_template and not read_only and _copy_template(Path(self.path))
        known = not copied and self._as_left()
        self.con = self._connect(read_only, time.monotonic() + wait_s, progress)
        try:
            if copied:                  # tcpvar's own empty store: only its packets' view
                self._point_packets()
            elif known and self._as_left():     # before DuckDB read it, and after
                self._open_as_left(read_only)
            else:
                self._open(read_only)
        except _duckdb().Error as exc:
            self.close()
            if "No space left on device" in str(exc):
                raise                   # exit 10, as for any full disk
            raise StoreError(f"store {self.path}: not a store this tcpvar reads "
                             f"({_one_line(exc)})") from None
        except BaseException:
            self.close()
            raise
        self._record = True

    def _open(self, read_only: bool) -> None:
        cleaned = self._refuse_or_clean(read_only)   # before any query reads the store
        if not read_only:
            self._apply_schema(force=cleaned)
        self._check_version(read_only)
        if read_only:
            self._stand_in_tables()
        self._check_columns()
        if read_only:
            # this tcpvar's views, in memory: a store written by an older
            # tcpvar keeps its own, which may lack columns (and a version 1
            # store its packets table)
            if not self.has_packets_table():
                self.con.execute(segments.view_sql(self.packets, temp=True))
            self.con.execute(_views().replace("CREATE OR REPLACE VIEW",
                                              "CREATE OR REPLACE TEMP VIEW"))
        else:
            self._drop_partial_captures()

    def _as_left(self) -> bool:
        """The store is as this tcpvar left it (store/checked.py), its
        packets' schema segment in place (its view reads the folder)."""
        return checked.unchanged(self.path, made_of()) and safe_write.is_regular_file(
            segments.folder(self.packets, 0) / segments.SCHEMA_FILE)

    def _open_as_left(self, read_only: bool) -> None:
        """_open() for a store this tcpvar left itself: its catalog, views
        and columns are the ones it wrote."""
        if not read_only:
            self._drop_partial_captures()

    def _point_packets(self) -> None:
        """The packets view of a store copied from the template, over this
        store's folder, whose schema segment is a copy of the template's."""
        segments.prepare(self.con, self.packets, _template_schema())
        self.con.execute(segments.view_sql(self.packets, temp=False))

    def _connect(self, read_only: bool, deadline: float, progress):
        duckdb = _duckdb()
        path = str(Path(self.path).absolute())
        early = engine.take_early()
        if early is not None:
            try:
                return self._attach(early, path, read_only)
            except duckdb.Error:    # a name DuckDB keeps, a lock: connecting says why
                early.close()
        while True:
            try:
                # an absolute path: DuckDB reads `md:x` or `s3://x` as a place
                # to fetch
                return duckdb.connect(path, read_only=read_only, config=engine.CONFIG)
            except duckdb.Error as exc:
                holder = re.search(r"Conflicting lock is held in (\S+) \(PID (\d+)\)",
                                   str(exc))
                if not holder:
                    raise StoreError(f"cannot open store {self.path}: {_one_line(exc)}") \
                        from None
                who = f"{Path(holder[1]).name}, PID {holder[2]}"
                if time.monotonic() >= deadline:
                    raise StoreError(f"store {self.path} is open in another process ({who}): "
                                     f"wait for it to finish, or use another --db") from None
                if progress:
                    progress(Progress(f"waiting for the store {self.path}, open in {who}"))
                time.sleep(0.5)

    def _attach(self, con, path: str, read_only: bool):
        """The database at @path attached to the instance the command
        started early (engine.start_early()), under the name connecting to
        it gives, and the default of @con and of the store's workers."""
        con.execute(f"ATTACH '{segments.quoted(path)}'" + (" (READ_ONLY)" if read_only else ""))
        # the instance is the command's: the one database it did not start
        # with (DuckDB keeps @path normalised, links and `..` resolved)
        self._database = one(con, "SELECT database_name FROM duckdb_databases() "
                                  "WHERE NOT internal AND database_name <> current_database()")[0]
        con.execute(f"USE {identifier(self._database)}")
        self._detach = True
        return con

    def _refuse_or_clean(self, read_only: bool) -> bool:
        """A store is data: what tcpvar did not create in it that runs in
        queries (a macro named like a built-in function replaces it, a view
        is read as tcpvar's) refuses a read-only store, and is dropped from
        a writable one, said on one line. Tables it did not create stay and
        tcpvar never reads them; an expression in a table of tcpvar's, or a
        table where tcpvar keeps a view, refuses it either way (dropping
        them would lose rows). Whether it dropped anything."""
        own = own_objects()
        sql = (_HERE / "catalog.sql").read_text()
        found, drops, stuck = [], [], False
        for kind, schema, name, table in self.con.execute(sql).fetchall():
            main = schema == "main"
            if kind in ("view", "sequence") and main and (kind, name) in own:
                continue
            if kind == "table":
                if not main or ("view", name) not in own or name == "packets":
                    continue        # somebody's own table, kept and never read (or
                stuck = True        # its schema's); but not in the way of a view
            elif table is not None and kind not in ("index", "trigger"):
                if not main or ("table", table) not in own:
                    continue        # on a table tcpvar never reads
                stuck = True        # an expression or check in a table of tcpvar's
            elif kind in _DROP:
                drops.append((list(_DROP).index(kind), _drop_statement(kind, schema, name, table)))
            else:
                stuck = True        # a kind of function SQL cannot make
            found.append(("an " if kind[0] in "aeiou" else "a ") + kind
                         + (f" {name!r}" if name is not None else "")
                         + (f" on table {table!r}" if table else ""))
        if not found:
            return False
        what = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
        if read_only or stuck:
            raise StoreError(f"store {self.path}: holds {what} that tcpvar did not create; "
                             f"refused")
        try:
            with self.transaction() as con:
                for _, drop in sorted(drops):
                    con.execute(drop)
        except _duckdb().Error as exc:
            raise StoreError(f"store {self.path}: holds {what} that tcpvar did not create "
                             f"and cannot drop ({_one_line(exc)}); refused") from None
        # said whoever opened it: the user's store changed
        print(f"warning: store {self.path}: held {what} that tcpvar did not create; dropped",
              file=sys.stderr)
        return True

    def lock_down(self, *allowed: Path) -> None:
        """No file outside the packets' folder and @allowed is read or
        written on this connection any more, no extension loaded, and no
        setting changed back: for SQL tcpvar did not write."""
        if self._locked:
            return
        folders = ", ".join(f"'{segments.quoted(Path(p).resolve())}/'"
                            for p in (self.packets, *allowed))
        self.con.execute(f"SET allowed_directories = [{folders}]")
        self.con.execute("SET enable_external_access = false")
        self.con.execute("SET lock_configuration = true")
        self._locked = True

    def _apply_schema(self, force: bool = False) -> None:
        """The tables and the packets' folder, unless the store has them as
        this tcpvar writes them (the digest of schema.sql in meta) and
        nothing was dropped in their place (@force); then the views, every
        time: a store may be somebody else's, its views and its digest
        whatever they wrote (rebuilding them costs about 40 ms)."""
        segments.prepare(self.con, self.packets)
        schema = _schema()
        views = segments.view_sql(self.packets, temp=False) + ";\n" + _views()
        digest = blake2b(schema.encode(), digest_size=16).hexdigest()
        fresh = not force and self._meta("schema_digest") == digest
        with self.transaction() as con:      # one commit: quicker for a new store
            if not fresh:
                con.execute(schema)
                con.execute("INSERT INTO meta VALUES ('schema_version', ?) "
                            "ON CONFLICT DO NOTHING", [SCHEMA_VERSION])
                if self._meta("schema_version") == "1" and self.has_packets_table():
                    # a version 1 store's packets table into segments, one per capture
                    segments.write_partitioned(con, "SELECT * FROM packets", self.packets)
                    con.execute("DROP TABLE packets")
                    con.execute("UPDATE meta SET value = $1 WHERE key = 'schema_version'",
                                [SCHEMA_VERSION])
                con.execute("INSERT OR REPLACE INTO meta VALUES ('schema_digest', ?)",
                            [digest])
            # the analyzers' views over the tables
            con.execute(views)

    def _meta(self, key: str) -> str | None:
        try:
            row = one(self.con, "SELECT value FROM meta WHERE key = $1", [key])
        except _duckdb().Error:         # no meta table: a new file, or not tcpvar's
            return None
        return row[0] if row else None

    def has_packets_table(self) -> bool:
        """A version 1 store (read only) keeps its packets in a table."""
        return bool(one(self.con, "SELECT count(*) FROM duckdb_tables() WHERE database_name = "
                                  "current_database() AND schema_name = 'main' "
                                  "AND table_name = 'packets'")[0])

    def _check_version(self, read_only: bool) -> None:
        try:
            row = one(self.con, "SELECT value FROM meta WHERE key = 'schema_version'")
        except _duckdb().Error:
            raise StoreError(f"store {self.path}: not a tcpvar database") from None
        # version 1 is read as it is, and migrated when opened for writing
        if row is None or row[0] not in (SCHEMA_VERSION, "1" if read_only else None):
            found = row[0] if row else "none"
            raise StoreError(
                f"store {self.path}: schema version {found}, this tcpvar needs "
                f"{SCHEMA_VERSION}; use a new --db file")

    def _stand_in_tables(self) -> None:
        """Each of LATER_TABLES the store lacks, empty and temporary."""
        have = {t for (t,) in self.con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
            "AND schema_name = 'main'").fetchall()}
        for table in LATER_TABLES:
            if table not in have:
                self.con.execute(_create_statement(table).replace(
                    "CREATE TABLE IF NOT EXISTS", "CREATE TEMP TABLE", 1))

    def _check_columns(self) -> None:
        """tcpvar's tables have tcpvar's columns, of its types (a renamed or
        retyped one would fail tcpvar's queries halfway); columns schema.sql
        adds to older stores may be missing from one opened read-only. One
        opened to write has no other columns (its inserts would fail)."""
        tables = sorted({t for t, _, _ in own_columns()})
        have = set(self.con.execute(_COLUMNS, [tables]).fetchall())
        present = {t for t, _, _ in have}
        for table, column, kind in sorted(own_columns() - have):
            if self.read_only and ((table, column) in added_columns() or (
                    table in LATER_TABLES and table not in present)) and not any(
                    t == table and c == column for t, c, _ in have):
                continue
            raise StoreError(f"store {self.path}: table {table} has no column {column} of "
                             f"type {kind}; not a store this tcpvar reads")
        extra = sorted((t, c) for t, c, _ in have - own_columns()
                       if not any(t == t2 and c == c2 for t2, c2, _ in own_columns()))
        if extra and not self.read_only:
            raise StoreError(f"store {self.path}: table {extra[0][0]} has a column "
                             f"{extra[0][1]!r} that tcpvar did not create; not a store this "
                             f"tcpvar writes into")

    def _drop_partial_captures(self) -> None:
        """A process killed while loading leaves an incomplete capture: drop it.
        (DuckDB lets one process write a database at a time, so none is loading now.)"""
        partial = self.con.execute(
            "SELECT capture_id FROM captures WHERE NOT complete").fetchall()
        for (capture_id,) in partial:
            self.delete_capture(capture_id)
        complete = {i for (i,) in self.con.execute(
            "SELECT capture_id FROM captures WHERE complete").fetchall()}
        for capture_id in segments.captures(self.packets) - complete:
            segments.remove(self.packets, capture_id)   # its row was never written

    def delete_capture(self, capture_id: int) -> None:
        """Every row of one capture, in one transaction, then its packets."""
        with self.transaction():
            for table in CAPTURE_TABLES:
                self.con.execute(f"DELETE FROM {table} WHERE capture_id = $1", [capture_id])
        segments.remove(self.packets, capture_id)

    def worker(self) -> Store:
        """This store for another thread: its own DuckDB connection to the
        same database. A process's connections may write at once (DuckDB's
        appends never conflict); close it when the thread is done."""
        view = copy.copy(self)
        view.con = self.con.cursor()
        view._detach = False
        view._record = False
        if self._database is not None:      # a new connection starts in the instance's own
            view.con.execute(f"USE {identifier(self._database)}")
        return view

    @contextlib.contextmanager
    def memory_limit(self, limit: str):
        """DuckDB keeps written blocks cached up to its memory limit (most of
        the RAM by default): a lower limit keeps a long load's memory flat.
        The limit is the database's, shared by its connections: the first
        load to start sets it, the last to end restores it."""
        with self._limit.lock:
            if not self._limit.depth:
                self._limit.old = one(self.con, "SELECT current_setting('memory_limit')")[0]
                self.con.execute(f"SET memory_limit = '{limit}'")
            self._limit.depth += 1
        try:
            yield
        finally:
            with self._limit.lock:
                self._limit.depth -= 1
                if not self._limit.depth:
                    self.con.execute(f"SET memory_limit = '{self._limit.old}'")

    @contextlib.contextmanager
    def transaction(self):
        """All or nothing: an interrupted ingest leaves the store as it was.
        A Ctrl-C in it waits until it is done: inside a query DuckDB would
        turn it into an error of its own, half way through a commit or a
        cleanup."""
        with signals.held():
            self.con.execute("BEGIN TRANSACTION")
            try:
                yield self.con
            except BaseException:
                self.con.execute("ROLLBACK")
                raise
            self.con.execute("COMMIT")

    def query(self, sql: str, params=None):
        """Run a user's SQL; return (column names, rows). On a store opened
        read-only it runs locked down (lock_down()): what it reads is the
        store and its packets."""
        try:
            if self.read_only:
                self.lock_down()
            rel = self.con.execute(sql, params or [])
            if rel.description is None:
                return [], []
            return [d[0] for d in rel.description], rel.fetchall()
        except _duckdb().Error as exc:
            raise StoreError(f"query failed: {_one_line(exc)}") from None

    def close(self) -> None:
        """Close the connection. A store attached to the command's instance
        (engine.take_early()) is detached first: its checkpoint written and
        its file let go, the instance left to the end of the process."""
        if self._detach:
            self._detach = False
            try:
                self.con.execute("USE memory")
                self.con.execute(f"DETACH {identifier(self._database)}")
            except _duckdb().Error:
                pass        # as a checkpoint at close fails: the WAL keeps the commits
        self.con.close()
        if self._record and not self.read_only:
            self._record = False
            checked.remember(self.path, made_of())      # none while its WAL holds commits

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Opening:
    """Store(@path) opened on a thread of its own while the caller goes on
    (importing the rest of tcpvar, starting to read a capture): DuckDB
    releases Python's lock as it opens the file, so on a second core most
    of the opening is hidden. The thread starts as the block is entered;
    store() waits for it and returns the store, or raises what Store()
    raised; leaving the block waits for it and closes the store: a thread
    still inside DuckDB as Python exits aborts the process."""

    def __init__(self, path: str | Path):
        self._opening = Beside(functools.partial(Store, path), name="tcpvar-open-store")
        self._path = path

    def store(self) -> Store:
        return self._opening.result()

    def __enter__(self):
        # what the thread would import, imported here: a Ctrl-C in this
        # thread's imports can leave Python's import lock held, and an
        # import on the other thread would then wait for ever (DuckDB
        # imports decimal for the first DECIMAL it returns; a new store is
        # copied from the template, which may have to be made first; one
        # that exists may hold a partial capture, whose segments shutil removes)
        import decimal  # noqa: F401

        _duckdb()
        if not os.path.lexists(self._path):
            template()
        else:
            import shutil  # noqa: F401
        try:
            with signals.held():        # a Ctrl-C now comes once it has started
                self._opening.start()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        if not self._opening.started:
            return
        self._opening.wait()            # another Ctrl-C waits for it too
        if self._opening.value is not None:
            self._opening.value.close()


def _copy_template(path: Path) -> bool:
    """A new store at @path as a copy of tcpvar's empty one (template()):
    copying takes a millisecond where creating the tables, binding the
    views and checking them take about 0.1 s. False when @path or its WAL
    exists (the store is opened as it is) or no template can be made."""
    wal = Path(f"{path}.wal")
    if os.path.lexists(path) or os.path.lexists(wal):
        return False
    source = template()
    if source is None:
        return False
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
    except OSError:
        return False                    # made meanwhile, or a folder tcpvar cannot write
    data = source.read_bytes()
    with os.fdopen(fd, "wb") as out:
        # sparse, as DuckDB writes its own: most of the file is empty blocks
        for at in range(0, len(data), PAGE):
            page = data[at:at + PAGE]
            if page.count(0) != len(page):
                out.seek(at)
                out.write(page)
        out.truncate(len(data))
    return True


@functools.cache
def template() -> Path | None:
    """tcpvar's empty store for this schema and this DuckDB, kept in its
    cache and made the first time it is wanted; None where the cache cannot
    hold it. Its name carries what it is made of: a new schema or DuckDB
    makes a new one."""
    from tcpvar.resources import cache_dir

    name = f"empty-{made_of()}.duckdb"
    folder = cache_dir() / "stores"
    final = folder / name
    if safe_write.is_regular_file(final) and safe_write.is_regular_file(_schema_segment(final)):
        return final
    import shutil  # only to make it: a command's start-up skips these
    import tempfile

    try:
        folder.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".template-", dir=folder))
    except OSError:
        return None
    try:
        Store(work / name, copy_template=False).close()   # tables, views, meta rows
        # its packets' schema segment moved beside it first, so that a
        # template in place always has one (new stores copy it)
        segment = segments.folder(segments.root(work / name), 0) / segments.SCHEMA_FILE
        os.replace(segment, _schema_segment(final))
        os.replace(work / name, final)
        return final
    except (OSError, StoreError):
        return None
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _schema_segment(template_path: Path) -> Path:
    return template_path.with_suffix(".schema.parquet")


def _template_schema() -> Path | None:
    """The template's packets schema segment, for a store copied from it."""
    source = template()
    return _schema_segment(source) if source is not None else None


def _check_header(path: Path) -> None:
    """A file that is not DuckDB's is refused before DuckDB opens it: it
    would load the extension that reads its kind (SQLite's, if installed),
    whatever autoload says."""
    try:
        with path.open("rb") as f:
            head = f.read(12)
    except OSError:
        return                          # none yet, or DuckDB says why
    if len(head) == 12 and head[8:] != b"DUCK":
        raise StoreError(f"cannot open store {path}: not a valid DuckDB database file")


class _SharedLimit:
    """The memory limit's owner among a store's connections."""

    def __init__(self):
        self.lock = threading.Lock()
        self.depth = 0
        self.old = ""


def one(con, sql: str, params=None):
    """The first row of a query, or None. Reads the whole result: DuckDB
    refuses other work on a connection with a partly fetched result."""
    rows = con.execute(sql, params or []).fetchall()
    return rows[0] if rows else None


def check_writable(path: str | Path) -> None:
    """Before work that ends by storing (a run's flows, a VM's boot): the
    store can be created or written where it is named, else StoreError now
    rather than after the work. DuckDB writes a .wal file beside the store,
    so its folder must be writable too."""
    path = Path(path)
    folder = path.parent
    try:
        if path.is_dir():
            raise StoreError(f"store {path}: is a directory, not a DuckDB file")
        if not folder.is_dir():
            raise StoreError(f"store {path}: {folder} is not a folder")
        writable = os.access(folder, os.W_OK | os.X_OK) and (not path.exists()
                                                             or os.access(path, os.W_OK))
    except OSError as exc:      # a folder above it that this user cannot enter
        raise StoreError(f"store {path}: cannot be reached ({exc.strerror})") from None
    if not writable:
        raise StoreError(f"store {path}: cannot be written there (permissions, or a "
                         f"read-only file system)")
