"""The packets table as Parquet segment files beside the DuckDB file, one
folder per capture, which the store's `packets` view reads:

    STORE.packets/capture_id=N/part-K.parquet     a batch of capture N's packets
    STORE.packets/capture_id=0/schema.parquet     no rows: the columns' types

A segment is written in one go under a temporary name and renamed, so a
reader never sees half a file. Ingest's batches are written by the scanner
itself (write_batch(): ingest/native/parquet.c, zstd, frame numbers and
times delta-encoded), about a quarter of the CPU of DuckDB's COPY for files
a quarter to two thirds the size; the rest (the schema file, merges) by
DuckDB's Parquet writer (write(), whose delta encoding is left off: DuckDB
writes UINTEGER columns holding values above 2^31 in one that other
readers refuse). Either costs less than inserting into a DuckDB table
(bench/RESULTS.md). The capture's row in `captures` decides whether its
segments count: the store removes the folders of captures that are not
complete when it opens.
"""
from __future__ import annotations

import contextlib
import errno
import itertools
import os
from pathlib import Path

from tcpvar import __version__
from tcpvar.errors import StoreError

# the packets table's columns (docs/schema.md), capture_id from the folder's name
COLUMNS = (
    ("frame", "UINTEGER"), ("ts_ns", "BIGINT"), ("conn", "UINTEGER"), ("dir", "UTINYINT"),
    ("seq", "BIGINT"), ("ack", "BIGINT"), ("flags", "UTINYINT"), ("win", "UINTEGER"),
    ("len", "UINTEGER"), ("wire_len", "UINTEGER"), ("ev", "USMALLINT"),
    ("tsval", "UINTEGER"), ("tsecr", "UINTEGER"), ("rtt_us", "UINTEGER"),
    ("inflight", "UINTEGER"), ("mss", "USMALLINT"), ("wscale", "UTINYINT"),
    ("ngwa_window", "UINTEGER"), ("sack_l", "BIGINT[]"), ("sack_r", "BIGINT[]"),
)
ROWS = 1 << 17              # packets per segment written by ingest: one row group
# zstd at level 1, and dictionaries only for columns with few values: half
# the time of DuckDB's defaults, and smaller files (bench/RESULTS.md)
WRITE = (f"FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL 1, DICTIONARY_SIZE_LIMIT 1000, "
         f"ROW_GROUP_SIZE {ROWS}")
SCHEMA_FILE = "schema.parquet"
CREATED_BY = f"tcpvar version {__version__}"     # as Parquet readers parse a writer's name
_serial = itertools.count()


def root(db_path: str | Path) -> Path:
    return Path(f"{Path(db_path).resolve()}.packets")


def folder(top: Path, capture_id: int) -> Path:
    return top / f"capture_id={capture_id}"


def quoted(path: Path) -> str:
    """@path inside a SQL string literal."""
    return str(path).replace("'", "''")


def view_sql(top: Path, temp: bool) -> str:
    """The `packets` view over the segments under @top (no rows when the
    folder is gone: a store file copied without it)."""
    names = ", ".join(name for name, _ in COLUMNS)
    if (folder(top, 0) / SCHEMA_FILE).is_file():
        source = (f"read_parquet('{quoted(top)}/*/*.parquet', hive_partitioning = true, "
                  f"hive_types = {{'capture_id': INTEGER}})")
    else:
        source = "(SELECT NULL::INTEGER AS capture_id, " + ", ".join(
            f"NULL::{typ} AS {name}" for name, typ in COLUMNS) + " WHERE false)"
    return (f"CREATE OR REPLACE {'TEMP ' if temp else ''}VIEW packets AS "
            f"SELECT capture_id, {names} FROM {source}")


def prepare(con, top: Path, like: Path | None = None) -> None:
    """The folder and its schema segment (the view needs a file to read):
    a copy of @like, the template's, where it is given (a new store; DuckDB's
    COPY takes 2.5-4.4 ms of its opening), else written by DuckDB."""
    schema = folder(top, 0) / SCHEMA_FILE
    if not schema.is_file():
        own_folder(top, 0)
        try:
            data = like.read_bytes() if like is not None else None
        except OSError:             # gone from the cache since: DuckDB writes it
            data = None
        if data is not None:
            with _in_place(schema) as tmp:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                             | os.O_CLOEXEC, 0o666)
                with os.fdopen(fd, "wb") as out:
                    out.write(data)
            return
        columns = ", ".join(f"NULL::{typ} AS {name}" for name, typ in COLUMNS)
        write(con, f"SELECT {columns} WHERE false", schema)


def own_folder(top: Path, capture_id: int) -> Path:
    """Capture @capture_id's folder under @top, made if need be, to write
    segments into: StoreError if @top or the folder is a symbolic link."""
    refuse_links(top, shallow=True)
    path = folder(top, capture_id)
    path.mkdir(parents=True, exist_ok=True)
    refuse_links(path, shallow=True)
    return path


def write(con, query: str, path: Path) -> None:
    """@query's rows as the segment @path, which appears whole or not at all."""
    with _in_place(path) as tmp:
        con.execute(f"COPY ({query}) TO '{quoted(tmp)}' ({WRITE})")


def write_batch(batch, path: Path) -> None:
    """A packet batch of the scanner (its Table, in the columns' order) as
    the segment @path, written by the scanner with Python's lock released."""
    with _in_place(path) as tmp:
        batch.write_parquet(str(tmp), CREATED_BY)


@contextlib.contextmanager
def _in_place(path: Path):
    """A temporary name beside @path to write, renamed to @path once the
    block is done (removed if it fails). An error is one line: a full disk
    stays an OSError (exit 10, as everywhere), anything else a StoreError."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{next(_serial)}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise
        raise StoreError(f"{path}: cannot write this segment of the packets "
                         f"({exc.strerror})") from None
    finally:
        tmp.unlink(missing_ok=True)


def write_partitioned(con, query: str, top: Path) -> None:
    """@query's rows (a capture_id and the packets' columns) as one segment
    per capture under @top."""
    names = ", ".join(name for name, _ in COLUMNS)
    con.execute(f"COPY (SELECT capture_id, {names} FROM ({query})) TO '{quoted(top)}' "
                f"({WRITE}, PARTITION_BY (capture_id), OVERWRITE_OR_IGNORE, "
                f"FILENAME_PATTERN 'part-{{uuid}}')")


def captures(top: Path) -> set[int]:
    """The capture ids that have a folder (the schema's 0 left out)."""
    ids = set()
    for entry in top.glob("capture_id=*"):
        number = entry.name.partition("=")[2]
        if number.isdigit() and int(number):
            ids.add(int(number))
    return ids


def remove(top: Path, capture_id: int) -> None:
    import shutil  # not at the top: 3 ms of every command, for a capture's removal

    shutil.rmtree(folder(top, capture_id), ignore_errors=True)


def copy(top: Path, capture_id: int, to: Path, new_id: int) -> None:
    """Capture @capture_id's segments as capture @new_id's under @to. The
    folder may be somebody else's: a symbolic link (to another store's
    segments, to /etc/shadow) refuses it, never followed."""
    import shutil

    source = folder(top, capture_id)
    refuse_links(top, shallow=True)
    if source.is_dir():
        refuse_links(source)
        shutil.copytree(source, folder(to, new_id), dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns(".*"))


def refuse_links(path: Path, shallow: bool = False) -> None:
    """StoreError if @path, or (unless @shallow) anything under it, is a
    symbolic link."""
    links = [path] if path.is_symlink() else [] if shallow else [
        Path(parent, name) for parent, dirs, files in os.walk(path)
        for name in dirs + files if os.path.islink(os.path.join(parent, name))]
    if links:
        raise StoreError(f"{links[0]}: a symbolic link where tcpvar writes files of its "
                         f"own; refused")
