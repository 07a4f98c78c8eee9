"""`tcpvar spark`: Spark in local mode with two workers analyses the fixtures,
one task per capture, into Parquet laid out as `tcpvar export --parquet`
lays out a store. What it wrote is read here with DuckDB and held to what
`tcpvar analyze` stores for the same files (the CLI's own store): every
per-direction counter, every connection, the packets and the series; and
`tcpvar merge` reads the folder into a store whose conn_stats are the CLI's."""
from __future__ import annotations

import json
import os

import duckdb
import pytest

from conftest import FIXTURES, OWN_CAPTURES, error_lines, tcpvar_process
from conftest import tcpvar_main as tcpvar

pytestmark = pytest.mark.slow

BAD = FIXTURES / "bad" / "garbage.pcap"


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("spark")
    res = tcpvar_process("spark", "--master", "local[2]", "--json", "-q", "--out", tmp / "out",
                         *OWN_CAPTURES, BAD, timeout=900)
    cli = tcpvar("analyze", "-q", "--db", tmp / "cli.duckdb", *OWN_CAPTURES)
    assert cli.returncode == 0, cli.stderr
    return tmp, res


def _rows(tmp, table: str, spark: bool, order: str = "") -> list[tuple]:
    """@table's rows with the capture's path in place of its id, from the
    job's Parquet or from the CLI's store."""
    con = duckdb.connect()
    if spark:
        def source(name):
            return (f"read_parquet('{tmp}/out/{name}/*/*.parquet', hive_partitioning = true, "
                    f"hive_types = {{'capture_id': INTEGER}})")
    else:
        con.execute(f"ATTACH '{tmp}/cli.duckdb' AS cli (READ_ONLY)")

        def source(name):
            return f"cli.{name}"
    rows = con.execute(f"SELECT c.path, t.* EXCLUDE (capture_id) FROM {source(table)} t "
                       f"JOIN {source('captures')} c USING (capture_id) "
                       f"ORDER BY ALL {order}").fetchall()
    con.close()
    return rows


def test_one_task_per_capture_on_two_workers(job):
    """Every capture is analysed once and given its place in the sorted list
    of all the files as its id; the bad one is one error line, and the exit
    status is its (3: not a capture)."""
    _, res = job
    assert res.returncode == 3, res.stderr
    assert len(error_lines(res.stderr)) == 1 and BAD.name in res.stderr
    doc = json.loads(res.stdout)
    every = sorted(os.path.realpath(p) for p in [*OWN_CAPTURES, BAD])
    read = {c["path"]: c["capture_id"] for c in doc["captures"] if "error" not in c}
    assert read == {p: every.index(p) + 1 for p in every if p != os.path.realpath(BAD)}
    assert doc["summary"]["cores"] == 2 and doc["summary"]["captures_read"] == len(OWN_CAPTURES)
    assert doc["summary"]["packets"] == sum(c["frames"] for c in doc["captures"]
                                            if "error" not in c)


@pytest.mark.parametrize("table", ["dir_counters", "connections", "retransmit_events",
                                   "throughput"])
def test_tables_equal_the_cli_store(job, table):
    tmp, _ = job
    mine, cli = _rows(tmp, table, True), _rows(tmp, table, False)
    assert mine == cli and (mine or table == "retransmit_events")


def test_packets_equal_the_cli_store(job):
    tmp, _ = job
    query = ("SELECT c.path, count(*), sum(p.len), sum(p.seq), count(p.rtt_us), "
             "sum(len(p.sack_l)) FROM {p} p JOIN {c} c USING (capture_id) GROUP BY 1 ORDER BY 1")
    con = duckdb.connect()
    mine = con.execute(query.format(
        p=f"read_parquet('{tmp}/out/packets/*/*.parquet', hive_partitioning = true)",
        c=f"read_parquet('{tmp}/out/captures/*/*.parquet', hive_partitioning = true)")
    ).fetchall()
    con.execute(f"ATTACH '{tmp}/cli.duckdb' AS cli (READ_ONLY)")
    con.execute("SET search_path = 'cli'")
    cli = con.execute(query.format(p="packets", c="captures")).fetchall()
    con.close()
    assert mine == cli and len(mine) == len(OWN_CAPTURES)


def test_directions_are_tsharks(job):
    """Beyond equality with the CLI's store: per direction of every
    connection of iperf_4flows.pcap, the packets and data bytes in the
    Parquet Spark wrote are what tshark counts (frames, sum of tcp.len)."""
    import collections
    import subprocess

    tmp, _ = job
    path = os.path.realpath(FIXTURES / "iperf_4flows.pcap")
    con = duckdb.connect()

    def parquet(name):
        return f"read_parquet('{tmp}/out/{name}/*/*.parquet', hive_partitioning = true)"
    rows = con.execute(
        f"SELECT c.a_addr, c.a_port, c.b_addr, c.b_port, d.dir, d.packets, d.data_bytes "
        f"FROM {parquet('dir_counters')} d JOIN {parquet('connections')} c "
        f"USING (capture_id, conn) JOIN {parquet('captures')} f USING (capture_id) "
        f"WHERE f.path = $1", [path]).fetchall()
    con.close()
    mine = {((a, ap, b, bp) if d == 0 else (b, bp, a, ap)): (n, data)
            for a, ap, b, bp, d, n, data in rows}
    out = subprocess.run(["tshark", "-n", "-r", path, "-Y", "tcp", "-T", "fields", "-e", "ip.src",
                          "-e", "tcp.srcport", "-e", "ip.dst", "-e", "tcp.dstport", "-e",
                          "tcp.len"], capture_output=True, text=True, check=True).stdout
    counted: dict[tuple, list[int]] = collections.defaultdict(lambda: [0, 0])
    for line in out.splitlines():
        src, sport, dst, dport, n = line.split("\t")
        c = counted[(src, int(sport), dst, int(dport))]
        c[0], c[1] = c[0] + 1, c[1] + int(n)
    assert len(mine) == 12 and mine == {k: tuple(v) for k, v in counted.items()}


def test_merge_reads_the_folder(job):
    """The folder is an export: `tcpvar merge` makes it a store, whose
    conn_stats (the figures `tcpvar analyze` prints) are the CLI's."""
    tmp, _ = job
    r = tcpvar("merge", tmp / "out", "--db", tmp / "merged.duckdb")
    assert r.returncode == 0, r.stderr

    def stats(db):
        con = duckdb.connect(str(db), read_only=True)
        rows = con.execute("SELECT c.path, s.* EXCLUDE (capture_id) FROM conn_stats s "
                           "JOIN captures c USING (capture_id) ORDER BY ALL").fetchall()
        con.close()
        return rows

    assert stats(tmp / "merged.duckdb") == stats(tmp / "cli.duckdb")


def test_bad_input_is_one_line(tmp_path):
    """Before Spark starts: no capture in a folder, an output folder that
    holds something, a bad --shard, a shard without a capture."""
    (tmp_path / "empty").mkdir()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    for args, words in ((["--out", tmp_path / "o", tmp_path / "empty"], "no captures in"),
                        (["--out", tmp_path / "full", BAD], "exists and is not empty"),
                        (["--out", tmp_path / "o", "--shard", "3/2", BAD], "i must be 1 to n"),
                        (["--out", tmp_path / "o", "--shard", "2/2", BAD], "no capture of the 1")):
        r = tcpvar("spark", "-q", *args)
        assert r.returncode == 2 and len(error_lines(r.stderr)) == 1, r.stderr
        assert words in r.stderr
