"""The native front end of `tcpvar analyze` (cli/native/) against the Python
command it stands in for, the independent truth here: for every capture,
the same table on stdout, the same warnings on stderr and the same store
(every row but the time of analysis, the views, the packets' segments, the
record that lets the next command skip the full check). Where it does not
apply, it leaves everything to the Python command, having made nothing."""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pty
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import OWN_CAPTURES, ROOT, SHARED_CAPTURES, read_terminal

NATIVE = ROOT / "cli" / "native" / "tcpvar"
# what the native front end leaves to the Python command, by design (a
# capture that fails is the Python command's to report, as it does)
DECLINED = ("gzip", "series")
MODES = {"packets": [], "stats-only": ["--stats-only"]}


@pytest.fixture(scope="module")
def native() -> Path:
    """The native front end, built for this Python as bootstrap.sh builds it,
    and the template it copies, in the cache (the Python command makes it
    the first time a new store is wanted: an empty cache's first analysis)."""
    from tcpvar.store.db import template

    subprocess.run(["make", "-s", "-C", str(NATIVE.parent), f"PYTHON={sys.executable}"],
                   check=True)
    assert template() is not None
    return NATIVE


def run(argv, env=None, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], capture_output=True, cwd=cwd,
                          env={**os.environ, **(env or {})}, timeout=600)


def without_timings(out: bytes):
    """The table, or --json's document without its speed."""
    if not out.startswith(b"{"):
        return out
    doc = json.loads(out)
    del doc["summary"]
    return doc


def python_command(*args, cwd=None) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", "tcpvar.cli", *args], cwd=cwd)


def differences(mine: Path, theirs: Path) -> list[str]:
    """What differs between two stores, read by DuckDB: every table's rows
    (captures without analyzed_at), the views' SQL with each store's own
    path taken out, the packets' segment files and their rows."""
    import _duckdb

    con = _duckdb.connect()
    con.execute(f"ATTACH '{mine}' AS a (READ_ONLY)")
    con.execute(f"ATTACH '{theirs}' AS b (READ_ONLY)")
    out = []
    tables = con.execute("SELECT table_name FROM duckdb_tables() WHERE database_name = 'b' "
                         "ORDER BY 1").fetchall()
    for (table,) in tables:
        names = ", ".join(f'"{c}"' for (c,) in con.execute(
            "SELECT column_name FROM duckdb_columns() WHERE database_name = 'b' AND "
            "table_name = $1 AND column_name <> 'analyzed_at' ORDER BY column_index",
            [table]).fetchall())
        for x, y in (("a", "b"), ("b", "a")):
            n = con.execute(f"SELECT count(*) FROM (SELECT {names} FROM {x}.{table} "
                            f"EXCEPT ALL SELECT {names} FROM {y}.{table})").fetchone()[0]
            if n:
                out.append(f"{table}: {n} rows of {x} not in {y}")

    def views(name: str, db: Path):
        return sorted((v, sql.replace(str(db), "STORE")) for v, sql in con.execute(
            "SELECT view_name, sql FROM duckdb_views() WHERE database_name = $1 "
            "AND NOT internal", [name]).fetchall())
    if views("a", mine) != views("b", theirs):
        out.append("views")

    def segments(db: Path):
        top = Path(f"{db}.packets")
        return sorted(str(p.relative_to(top)) for p in top.rglob("*"))
    if segments(mine) != segments(theirs):
        out.append(f"segments: {segments(mine)} against {segments(theirs)}")
    elif any(Path(f"{mine}.packets").glob("capture_id=1/*")):
        read = "SELECT * FROM read_parquet('{}.packets/capture_id=1/*.parquet')"
        n = con.execute(f"SELECT count(*) FROM ({read.format(mine)} EXCEPT ALL "
                        f"{read.format(theirs)})").fetchone()[0]
        m = con.execute(f"SELECT count(*) FROM ({read.format(theirs)} EXCEPT ALL "
                        f"{read.format(mine)})").fetchone()[0]
        if n or m:
            out.append(f"packets: {n} and {m} rows differ")
    return out


def as_left_by_tcpvar(db: Path) -> bool:
    """store/checked.py's word: the store is as this tcpvar left it."""
    from tcpvar.store import checked
    from tcpvar.store.db import made_of

    return checked.unchanged(db, made_of())


def same_as_python(native: Path, capture: Path, tmp_path: Path, *options: str) -> str | None:
    """Analyse @capture with both front ends into new stores and compare;
    None when the native one did the work, else why it left it."""
    mine, theirs = tmp_path / "native" / "t.duckdb", tmp_path / "python" / "t.duckdb"
    mine.parent.mkdir()
    theirs.parent.mkdir()
    args = ["analyze", "-q", *options, "--db"]
    got = run([native, *args, mine, capture], env={"TCPVAR_NATIVE": "only"})
    if got.returncode == 99:
        assert not mine.exists() and not Path(f"{mine}.packets").exists()
        return got.stderr.decode()
    want = python_command(*args, theirs, capture)
    assert (got.returncode, got.stdout, got.stderr) == (want.returncode, want.stdout,
                                                        want.stderr)
    assert differences(mine, theirs) == []
    assert as_left_by_tcpvar(mine)
    return None


def captures() -> list[Path]:
    return OWN_CAPTURES + SHARED_CAPTURES


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("capture", captures(), ids=lambda p: p.name)
def test_the_same_as_the_python_command(native, capture, mode, tmp_path):
    declined = same_as_python(native, capture, tmp_path, *MODES[mode])
    if declined is not None and not any(word in declined for word in DECLINED):
        refused = python_command("analyze", "-q", "--db", tmp_path / "t.duckdb", capture)
        assert refused.returncode in (3, 4), declined


def test_most_captures_are_read_natively(native, tmp_path):
    """The comparison above is not vacuous: the native front end reads
    every capture of ours but the gzip'd one itself."""
    declined = []
    for i, capture in enumerate(OWN_CAPTURES):
        (tmp_path / str(i)).mkdir()
        got = run([native, "analyze", "-q", "--stats-only", "--db",
                   tmp_path / str(i) / "t.duckdb", capture], env={"TCPVAR_NATIVE": "only"})
        if got.returncode == 99:
            declined.append(capture.name)
    assert declined == [p.name for p in OWN_CAPTURES if p.suffix == ".gz"]


def million(path: Path, connections: int) -> Path:
    """bench/make_capture.py's million-connection capture, smaller."""
    spec = importlib.util.spec_from_file_location("make_capture",
                                                  ROOT / "bench" / "make_capture.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.derive_million(path, argparse.Namespace(connections=connections))
    return path


@pytest.fixture(scope="module")
def many_connections(tmp_path_factory) -> Path:
    """200,000 connections over 1.4 s of capture: beyond 50,000 live ones,
    the ended ones retire and are stored while the scan goes on."""
    return million(tmp_path_factory.mktemp("many") / "many.pcap", 200_000)


@pytest.mark.parametrize("mode", MODES)
def test_retired_connections_the_same(native, many_connections, mode, tmp_path):
    assert same_as_python(native, many_connections, tmp_path, *MODES[mode]) is None


@pytest.mark.parametrize("args, env, why", [
    (["--json"], {}, "not a command of the native front end"),
    (["--interval", "50"], {}, "not a command of the native front end"),
    ([], {"TCPVAR_MAX_CONNECTIONS": "10"}, "TCPVAR_MAX_CONNECTIONS"),
    ([], {"TCPVAR_CACHE": "{tmp}/empty-cache"}, "not a new store from the template"),
])
def test_what_it_leaves_to_python(native, tmp_path, args, env, why):
    """Other options, a connection limit, a cache without the template: the
    native front end makes nothing and says why (TCPVAR_NATIVE=only), and
    without TCPVAR_NATIVE the Python command gives its own answer."""
    env = {k: v.replace("{tmp}", str(tmp_path)) for k, v in env.items()}
    capture = OWN_CAPTURES[0]
    for name in ("native", "python"):
        (tmp_path / name).mkdir()
    db = tmp_path / "native" / "t.duckdb"
    got = run([native, "analyze", "-q", *args, "--db", db, capture],
              env={**env, "TCPVAR_NATIVE": "only"})
    assert got.returncode == 99 and why in got.stderr.decode()
    assert not db.exists()
    via = run([native, "analyze", "-q", *args, "--db", db, capture], env=env)
    direct = run([sys.executable, "-m", "tcpvar.cli", "analyze", "-q", *args, "--db",
                  tmp_path / "python" / "t.duckdb", capture], env=env)
    assert via.returncode == direct.returncode == 0
    assert without_timings(via.stdout) == without_timings(direct.stdout)


def test_an_existing_store_is_the_python_commands(native, tmp_path):
    db = tmp_path / "t.duckdb"
    first, second = OWN_CAPTURES[:2]
    assert run([native, "analyze", "-q", "--db", db, first]).returncode == 0
    got = run([native, "analyze", "-q", "--db", db, second], env={"TCPVAR_NATIVE": "only"})
    assert got.returncode == 99
    assert run([native, "analyze", "-q", "--db", db, second]).returncode == 0
    rows = python_command("query", "--db", db, "--json",
                          "SELECT count(*) AS n FROM captures WHERE complete").stdout
    assert b'"n": 2' in rows


@pytest.mark.parametrize("env, status", [({"TCPVAR_NATIVE": "only"}, 99), ({}, 0)])
def test_a_terminal_gets_the_python_commands_table(native, tmp_path, env, status):
    """On a terminal the table is Rich's, drawn by the Python command."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([str(native), "analyze", "-q", "--db", str(tmp_path / "t.duckdb"),
                             str(OWN_CAPTURES[0])], stdout=slave, stderr=subprocess.PIPE,
                            env={**os.environ, **env, "TERM": "xterm-256color", "COLUMNS": "80"})
    os.close(slave)
    out = read_terminal(master).decode()
    assert proc.wait(timeout=120) == status
    assert ("TCP connections" in out) == (status == 0)


@pytest.mark.parametrize("bad", ["not_a_capture.pcap", "header_only.pcap"])
def test_a_bad_capture_gets_the_python_commands_error(native, tmp_path, bad):
    """The native front end removes what it made and leaves the error to the
    Python command: the same words, the same status, the same files left."""
    capture = tmp_path / bad
    capture.write_bytes(b"\xd4\xc3\xb2\xa1\x02\x00\x04\x00" + b"\0" * 8 if "header" in bad
                        else b"these bytes are no capture at all\n")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    via = run([native, "analyze", "-q", "--db", tmp_path / "a" / "t.duckdb", capture])
    direct = python_command("analyze", "-q", "--db", tmp_path / "b" / "t.duckdb", capture)
    assert via.returncode == direct.returncode != 0
    assert via.stderr.replace(b"/a/", b"/b/") == direct.stderr
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == \
        sorted(p.name for p in (tmp_path / "b").iterdir())


def test_ctrl_c_leaves_no_store(native, many_connections, tmp_path):
    """Ctrl-C while a capture is read: the store it was making is removed,
    and the command says so and exits with 130, as tcpvar does."""
    db = tmp_path / "t.duckdb"
    proc = subprocess.Popen([str(native), "analyze", "-q", "--db", str(db),
                             str(many_connections)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, "TCPVAR_NATIVE": "only"})
    deadline = time.monotonic() + 30
    while not db.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.002)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.decode() == "tcpvar: error: interrupted\n" and not out
    assert sorted(tmp_path.iterdir()) == []


def test_the_warnings_of_odd_records_the_same(native, tmp_path):
    """Warnings no fixture carries: segments whose IP length is 0 (as
    segmentation offload leaves it), with records that claim more than it
    can hold, and a record from before 1970."""
    from test_input_limits import MS, ip_len_zero, one_connection, records

    conn = one_connection()
    big = conn.data("c2s", 0, off=0, length=10, flags="PA", ack=0)
    zero = conn.data("c2s", 1 * MS, off=10, length=10, flags="PA", ack=0)
    early = conn.data("c2s", 2 * MS, off=20, length=10, flags="PA", ack=0)
    data = bytearray(records([(big.ts_ns, ip_len_zero(big.data), 0xFFFFFFFF),
                              (zero.ts_ns, ip_len_zero(zero.data), len(zero.data)),
                              (early.ts_ns, early.data, len(early.data))]))
    at = 24 + 2 * 16 + len(big.data) + len(zero.data)
    struct.pack_into("<I", data, at, 0xFFFFFFFF)       # the last record 1 s before 1970
    capture = tmp_path / "odd.pcap"
    capture.write_bytes(bytes(data))
    for mode, options in MODES.items():
        (tmp_path / mode).mkdir()
        assert same_as_python(native, capture, tmp_path / mode, *options) is None
    warning = python_command("analyze", "-q", "--db", tmp_path / "t.duckdb", capture).stderr
    assert b"IP length of 0" in warning and b"(1 record claims more)" in warning
    assert b"before 1970" in warning


@pytest.mark.parametrize("planted", ["store", "packets"])
def test_a_link_planted_where_the_store_goes_is_never_written_through(native, tmp_path,
                                                                        planted):
    """A symbolic link where the new store or its packets' folder would be,
    to a file of somebody's: the native front end makes nothing and leaves
    it to the Python command; the file the link names stays as it was."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"somebody's file\n")
    db = tmp_path / "t.duckdb"
    Path(f"{db}.packets" if planted == "packets" else db).symlink_to(victim)
    got = run([native, "analyze", "-q", "--db", db, OWN_CAPTURES[0]],
              env={"TCPVAR_NATIVE": "only"})
    assert got.returncode == 99 and b"not a new store" in got.stderr
    run([native, "analyze", "-q", "--db", db, OWN_CAPTURES[0]])
    assert victim.read_bytes() == b"somebody's file\n"


def _watch(proc: subprocess.Popen, until) -> tuple[bytes, bytes, int]:
    """Its command line, environment and huge pages (kB, /proc/PID/smaps_rollup)
    once @until(command line) holds; the same PID runs each exec."""
    proc_dir = Path(f"/proc/{proc.pid}")
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            cmdline, environ = (proc_dir / "cmdline").read_bytes(), \
                (proc_dir / "environ").read_bytes()
            rollup = (proc_dir / "smaps_rollup").read_text()
        except OSError:         # between two execs
            time.sleep(0.001)
            continue
        if until(cmdline):
            huge = [int(line.split()[1]) for line in rollup.splitlines()
                    if line.startswith("AnonHugePages:")]
            return cmdline, environ, huge[0] if huge else 0
        time.sleep(0.001)
    pytest.fail("the command ended before it was seen")


def test_it_starts_again_with_malloc_in_huge_pages(native, many_connections, tmp_path):
    """The native front end runs with glibc's malloc asking for transparent
    huge pages (its tunable, read at a process's start): the kernel's
    accounting shows them in use (this machine gives them on request), and
    the tunables the user set are kept beside it."""
    if "[madvise]" not in Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text():
        pytest.fail("this machine's transparent huge pages are not given on request")
    proc = subprocess.Popen([str(native), "analyze", "-q", "--stats-only", "--db",
                             str(tmp_path / "t.duckdb"), str(many_connections)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "GLIBC_TUNABLES": "glibc.malloc.check=0"})
    time.sleep(1.0)          # the scan's rings and DuckDB's instance in place
    _, environ, huge = _watch(proc, lambda cmdline: True)
    assert proc.wait(timeout=300) == 0, proc.stderr.read()
    # (the dynamic loader, parsing the tunables, writes a NUL over each ':')
    assert any(environ.find(b"GLIBC_TUNABLES=glibc.malloc.check=0" + sep +
                            b"glibc.malloc.hugetlb=1\0") >= 0 for sep in (b":", b"\0"))
    assert huge > 0


def test_the_python_command_gets_the_users_tunables(native, tmp_path):
    """A capture the native front end starts on, then leaves to the Python
    command (it is no capture): Python runs with GLIBC_TUNABLES as the user
    set it, and without it when the user set none."""
    capture = tmp_path / "not_a_capture.pcap"
    capture.write_bytes(b"these bytes are no capture at all\n" * 100)
    for given in ("glibc.malloc.check=0", None):
        env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
        if given:
            env["GLIBC_TUNABLES"] = given
        proc = subprocess.Popen([str(native), "analyze", "-q", "--db",
                                 str(tmp_path / f"{given}.duckdb"), str(capture)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        _, environ, _ = _watch(proc, lambda cmdline: b"python" in cmdline.split(b"\0")[0])
        assert proc.wait(timeout=120) == 3
        tunables = [v for v in environ.split(b"\0") if v.startswith(b"GLIBC_TUNABLES=")]
        assert tunables == ([f"GLIBC_TUNABLES={given}".encode()] if given else [])
        assert b"TCPVAR_GLIBC_TUNABLES_WERE" not in environ
