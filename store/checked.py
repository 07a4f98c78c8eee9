"""A store as tcpvar last left it. Opening a store lists its catalog and
rebuilds its views, since it may be somebody else's (store/db.py,
docs/security.md): 40-70 ms on every open. A store that this user's tcpvar
closed itself, unchanged since, needs neither.

When a writable store has closed with its checkpoint written (no WAL
left), its state goes into tcpvar's cache: device, inode, size, the
modification and change times to the nanosecond, and a hash of DuckDB's
headers, whose iteration every checkpoint counts up. The kernel sets a
file's change time at every write and every change of its mode or times,
and only root can set it back, so a store altered since, a copy of one, or
another file made in its place does not match, and is checked in full. A file system
whose times stop at the second could not tell two writes within one
apart: its stores are always checked in full.

The cache holds a store's record in one of SLOTS files, by a hash of its
path: two stores that share a slot are checked in full in turn, and the
cache never holds more than SLOTS small files."""
from __future__ import annotations

import os
import stat
from pathlib import Path

from tcpvar import safe_write
from tcpvar.digest import blake2b

HEADERS = 3 * 4096      # DuckDB's file header and its two database headers
SLOTS = 4096


def _slot(path: Path) -> Path:
    from tcpvar.resources import cache_dir

    digest = int(blake2b(str(path).encode(), digest_size=8).hexdigest(), 16)
    return cache_dir() / "stores" / "checked" / f"{digest % SLOTS:03x}"


def _state(path: Path) -> str | None:
    """What identifies the file at @path as it is now; None when it cannot
    be told apart from a later version of itself (its WAL holds changes
    not yet in the file, its times stop at the second) or is no file."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or os.path.lexists(f"{path}.wal") or \
                st.st_ctime_ns % 1_000_000_000 == 0:
            return None
        with open(path, "rb") as f:
            headers = blake2b(f.read(HEADERS), digest_size=16).hexdigest()
    except OSError:
        return None
    return (f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:"
            f"{headers}")


def _record(path: Path, made_of: str) -> str | None:
    state = _state(path)
    return f"{path}\n{made_of}\n{state}\n" if state else None


def unchanged(path: str | Path, made_of: str) -> bool:
    """The store at @path is as a tcpvar made of @made_of (the schema, the
    views, the checks and DuckDB's version: db.made_of()) left it."""
    path = Path(path).resolve()
    record = _record(path, made_of)
    if record is None:
        return False
    try:
        return _slot(path).read_text() == record
    except (OSError, UnicodeDecodeError):
        return False


def remember(path: str | Path, made_of: str) -> None:
    """Record the store at @path as this tcpvar leaves it, after its close;
    nothing when its WAL still holds changes or the cache cannot be
    written (it is then checked in full next time)."""
    path = Path(path).resolve()
    record = _record(path, made_of)
    if record is None:
        return
    slot = _slot(path)
    try:
        slot.parent.mkdir(parents=True, exist_ok=True)
        safe_write.write_text(slot, record)
    except OSError:
        pass
