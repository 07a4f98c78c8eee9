"""The packets' segments as the scanner writes them (ingest/native/parquet.c),
held to two other implementations of Parquet: DuckDB's writer (the same
batch written by its COPY reads back the same, row for row and type for
type) and Arrow's reader (pyarrow reads both files to the same table, and
its statistics of each column are the min, max and null count DuckDB
computes from the values). A wrong statistic would make readers skip rows:
filters on each column's extremes are checked too."""
from __future__ import annotations

import gzip
import os

import duckdb
import pyarrow.parquet as pq
import pytest

from tcpvar.ingest import _pcapscan
from tcpvar.store import segments

from conftest import FIXTURES

# IPv4 and IPv6, SACK blocks, NGWA options, zero windows, wrapped sequence
# numbers, VLAN tags, nanosecond times, TCP timestamps above 2^31, capture
# times that step back (the delta-encoded ts_ns goes down as well as up)
CAPTURES = ["iperf_4flows.pcap", "iperf_ipv6.pcap", "sack_recovery.pcap", "ngwa_options.pcap",
            "zero_window.pcap", "seq_wrap.pcap", "vlan.pcap", "nanosecond.pcap",
            "iperf_bulk_loss.pcap", "iperf_wrap.pcap.gz"]
BATCH_ROWS = 3001       # several batches a capture, the last one not a multiple of 8 rows


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    """(the scanner's file, DuckDB's file) of every batch of the captures."""
    out = tmp_path_factory.mktemp("segments")
    con = duckdb.connect()
    made = []
    for name in CAPTURES:
        path = FIXTURES / name
        if path.suffix == ".gz":            # libpcap reads no gzip
            path = out / path.stem
            path.write_bytes(gzip.decompress((FIXTURES / name).read_bytes()))
        scanner = _pcapscan.Scanner(str(path), packets=True, batch_rows=BATCH_ROWS)
        status = "more"
        while status == "more":
            status, batch = scanner.step()
            if batch is None or not batch.rows:
                continue
            ours, theirs = (out / f"{name}-{len(made)}-{who}.parquet" for who in ("n", "d"))
            batch.write_parquet(str(ours), segments.CREATED_BY)
            con.register("batch", batch)
            con.execute(f"COPY (SELECT * FROM batch) TO '{theirs}' ({segments.WRITE})")
            con.unregister("batch")
            made.append((ours, theirs))
        scanner.close()
    assert len(made) > len(CAPTURES)
    assert any(con.execute(f"SELECT bool_or(ts_ns < lag) FROM (SELECT ts_ns, lag(ts_ns) OVER "
                           f"(ORDER BY frame) AS lag FROM {_read(theirs)})").fetchone()[0]
               for _, theirs in made), "no capture time steps back"
    con.close()
    return made


def _read(path) -> str:
    return f"read_parquet('{path}')"


def test_rows_and_types_as_duckdb_writes_them(pairs):
    con = duckdb.connect()
    for ours, theirs in pairs:
        assert con.execute(f"DESCRIBE SELECT * FROM {_read(ours)}").fetchall() == \
            con.execute(f"DESCRIBE SELECT * FROM {_read(theirs)}").fetchall()
        for a, b in ((ours, theirs), (theirs, ours)):
            assert con.execute(f"SELECT count(*) FROM (SELECT * FROM {_read(a)} EXCEPT ALL "
                               f"SELECT * FROM {_read(b)})").fetchone()[0] == 0, ours.name
        assert con.execute(f"SELECT count(*) FROM {_read(ours)}").fetchone() == \
            con.execute(f"SELECT count(*) FROM {_read(theirs)}").fetchone()


def test_arrow_reads_the_same_table(pairs):
    for ours, theirs in pairs:
        a, b = pq.read_table(ours), pq.read_table(theirs)
        assert [(f.name, f.type) for f in a.schema] == [(f.name, f.type) for f in b.schema]
        assert a.to_pylist() == b.to_pylist(), ours.name


def test_statistics_are_the_values(pairs):
    """Each scalar column's min, max and null count, as pyarrow reads them
    from the file, against DuckDB's aggregates of the values; unsigned
    columns holding values above 2^31 are among them."""
    con = duckdb.connect()
    above = set()
    for ours, theirs in pairs:
        meta = pq.ParquetFile(ours).metadata
        assert meta.num_row_groups == 1
        group = meta.row_group(0)
        for i in range(group.num_columns):
            column = group.column(i)
            name = column.path_in_schema
            if "." in name:                 # the SACK lists: no statistics
                continue
            lo, hi, nulls = con.execute(
                f'SELECT min("{name}"), max("{name}"), count(*) - count("{name}") '
                f"FROM {_read(theirs)}").fetchone()
            stats = column.statistics
            assert stats.null_count == nulls, (ours.name, name)
            if lo is None:
                assert not stats.has_min_max, (ours.name, name)
                continue
            assert (stats.min, stats.max) == (lo, hi), (ours.name, name)
            if hi >= 2**31 and column.physical_type == "INT32":
                above.add(name)
    assert above, "no unsigned column above 2^31: the unsigned order is not tested"


def test_filters_on_the_extremes_keep_their_rows(pairs):
    """DuckDB skips a file by its statistics: a filter at each column's
    minimum and maximum finds the rows it finds in DuckDB's own file."""
    con = duckdb.connect()
    for ours, theirs in pairs[:6]:
        names = [n for n, t, *_ in con.execute(f"DESCRIBE SELECT * FROM {_read(theirs)}")
                 .fetchall() if not t.endswith("[]")]
        for name in names:
            lo, hi = con.execute(f'SELECT min("{name}"), max("{name}") '
                                 f"FROM {_read(theirs)}").fetchone()
            if lo is None:
                continue
            for where in (f'"{name}" <= {lo}', f'"{name}" >= {hi}', f'"{name}" = {hi}'):
                counts = [con.execute(f"SELECT count(*) FROM {_read(p)} WHERE {where}")
                          .fetchone()[0] for p in (ours, theirs)]
                assert counts[0] == counts[1] > 0, (ours.name, where)


def test_never_over_a_file_nor_through_a_link(tmp_path):
    scanner = _pcapscan.Scanner(str(FIXTURES / "iperf_4flows.pcap"), packets=True)
    _, batch = scanner.step()
    kept = tmp_path / "kept"
    kept.write_text("mine")
    link = tmp_path / "link.parquet"
    os.symlink(kept, link)
    for path in (kept, link):
        with pytest.raises(FileExistsError):
            batch.write_parquet(str(path), segments.CREATED_BY)
    assert kept.read_text() == "mine"
    scanner.close()
