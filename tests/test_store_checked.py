"""A store as tcpvar last left it (store/checked.py): after tcpvar's own
close its record matches, and anything the kernel counts as a change of
the file (a write, a change of mode or times, another file in its
place, a WAL beside it) makes it a store to check in full."""
from __future__ import annotations

import os
import shutil

import pytest

from tcpvar.store import checked
from tcpvar.store.db import made_of

from conftest import FIXTURES
from conftest import tcpvar_process as tcpvar


@pytest.fixture
def left(tmp_path):
    db = tmp_path / "left.duckdb"
    res = tcpvar("analyze", "-q", "--stats-only", "--db", db, FIXTURES / "iperf_rto.pcap")
    assert res.returncode == 0, res.stderr
    assert checked.unchanged(db, made_of())
    return db


def test_a_read_only_open_keeps_the_record(left):
    res = tcpvar("query", "--db", left, "SELECT count(*) FROM conn_stats")
    assert res.returncode == 0, res.stderr
    assert checked.unchanged(left, made_of())


def test_another_make_of_tcpvar_checks_in_full(left):
    assert not checked.unchanged(left, made_of() + "-other")


@pytest.mark.parametrize("change", ["chmod", "utime", "append", "copy over", "wal"])
def test_a_changed_file_is_checked_in_full(left, change):
    if change == "chmod":
        os.chmod(left, 0o600)
    elif change == "utime":
        st = left.stat()
        os.utime(left, ns=(st.st_atime_ns, st.st_mtime_ns))   # times as they were
    elif change == "append":
        with open(left, "ab") as f:
            f.write(b"\0")
    elif change == "copy over":
        shutil.copy2(left, f"{left}.copy")
        os.replace(f"{left}.copy", left)
    else:
        open(f"{left}.wal", "wb").close()
    assert not checked.unchanged(left, made_of())
