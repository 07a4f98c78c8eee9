"""`tcpvar export --parquet`: the store's tables as Hive-partitioned Parquet,
read back here with pyarrow (not DuckDB) and held to tshark's frame counts;
and `tcpvar merge` of such a folder, which gives the store back. The
selection by study is tested on a real study in test_sweep.py."""
from __future__ import annotations

import json
import subprocess

import pyarrow.dataset as ds
import pytest

from conftest import FIXTURES, error_lines
from conftest import tcpvar_main as tcpvar

FILES = [FIXTURES / n for n in ("sll.pcap", "iperf_4flows.pcap", "sack_recovery.pcap")]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("export")
    assert tcpvar("analyze", "-q", "--db", tmp / "s.duckdb", *FILES).returncode == 0
    r = tcpvar("export", "--parquet", tmp / "out", "--db", tmp / "s.duckdb")
    assert r.returncode == 0, r.stderr
    return tmp


def _table(folder, name):
    return ds.dataset(folder / name, format="parquet", partitioning="hive").to_table()


def test_packets_per_capture_are_tsharks_frames(exported):
    captures = _table(exported / "out", "captures").to_pylist()
    paths = {c["capture_id"]: c["path"] for c in captures}
    assert sorted(paths.values()) == sorted(str(f.resolve()) for f in FILES)
    packets = _table(exported / "out", "packets")
    counts = {}
    for cid in packets.column("capture_id").to_pylist():
        counts[cid] = counts.get(cid, 0) + 1
    for cid, path in paths.items():
        frames = subprocess.run(["tshark", "-r", path, "-Y", "tcp"], capture_output=True,
                                text=True, check=True).stdout.count("\n")
        assert counts[cid] == frames, path


def test_partitions_and_columns(exported):
    out = exported / "out"
    assert (out / "meta.parquet").is_file()
    assert sorted(p.name for p in (out / "packets").iterdir()) == \
        [f"capture_id={i}" for i in (1, 2, 3)]
    import duckdb
    con = duckdb.connect(str(exported / "s.duckdb"), read_only=True)
    for table in ("packets", "connections", "dir_counters", "throughput", "captures"):
        store_cols = [c for (c,) in con.execute(
            "SELECT column_name FROM duckdb_columns() WHERE table_name = $1", [table])
            .fetchall()]
        assert sorted(_table(out, table).column_names) == sorted(store_cols), table
    con.close()


def test_merge_gives_the_store_back(exported, tmp_path):
    """The export merged into an empty store: `tcpvar analyze --json` on the
    same files then reads them from it and says what it said first."""
    first = json.loads(tcpvar("analyze", "--json", "--db", exported / "s.duckdb",
                              *FILES).stdout)
    r = tcpvar("merge", exported / "out", "--db", tmp_path / "m.duckdb")
    assert r.returncode == 0 and "0 runs and 3 captures copied" in r.stderr, r.stderr
    again = json.loads(tcpvar("analyze", "--json", "--db", tmp_path / "m.duckdb",
                              *FILES).stdout)
    assert all(c["reused"] for c in again["captures"])
    assert _without_ids(again) == _without_ids(first)
    assert again["connections"] == first["connections"]
    r = tcpvar("merge", exported / "out", "--db", tmp_path / "m.duckdb")
    assert "0 runs and 0 captures copied" in r.stderr and "3 captures were here" in r.stderr


def _without_ids(doc: dict) -> list[dict]:
    return [{k: v for k, v in c.items() if k not in ("capture_id", "reused")}
            for c in doc["captures"]]


@pytest.mark.parametrize("args, status, words", [
    (["export", "--parquet", "{out}"], 2, "exists and is not empty"),
    (["export", "--parquet", "{new}", "--study", "nope"], 2, "no run of the store matches"),
    (["merge", "{fixtures}"], 5, "not one tcpvar export --parquet wrote"),
])
def test_bad_input(exported, tmp_path, args, status, words):
    fill = {"out": exported / "out", "new": tmp_path / "new", "fixtures": FIXTURES}
    r = tcpvar(*[a.format(**fill) for a in args], "--db", exported / "s.duckdb")
    errors = error_lines(r.stderr)
    assert r.returncode == status and len(errors) == 1 and words in errors[0], r.stderr
