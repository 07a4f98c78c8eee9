"""The throughput series `tcpvar analyze` sums during its scan
(ingest/native/series.c) is the one the store sums from the stored packets
(analyzers/sql/throughput_sums.sql), row for row, on every capture: also
where timestamps go backwards, where the scan's sums give way to the
packets'."""
from __future__ import annotations

import pytest

from tcpvar.analyzers.series import build_throughput
from tcpvar.ingest import _pcapscan
from test_vs_tcptrace import NOT_ANALYSABLE

from conftest import OWN_CAPTURES, SHARED_CAPTURES, capture_id


@pytest.mark.parametrize("path", [p for p in OWN_CAPTURES + SHARED_CAPTURES
                                  if p.name not in NOT_ANALYSABLE], ids=capture_id)
def test_scan_sums_equal_the_packets_sums(analyzed, store, path):
    doc = analyzed(path)
    con = store.con
    query = "SELECT * EXCLUDE (capture_id) FROM throughput WHERE capture_id = $1 ORDER BY ALL"
    from_scan = con.execute(query, [doc["capture_id"]]).fetchall()
    # the interval of the capture's latest analysis: another test may have
    # analysed the same capture again with its own --interval
    (interval_ms,) = con.execute("SELECT interval_ms FROM captures WHERE capture_id = $1",
                                 [doc["capture_id"]]).fetchone()
    with store.transaction():
        con.execute("UPDATE captures SET interval_ms = NULL WHERE capture_id = $1",
                    [doc["capture_id"]])
        build_throughput(con, doc["capture_id"], interval_ms)
        from_packets = con.execute(query, [doc["capture_id"]]).fetchall()
    assert from_scan == from_packets
    assert from_packets or not any(c["a2b"]["data_bytes"] or c["b2a"]["data_bytes"]
                                   for c in doc["connections"])


def test_no_sums_when_time_goes_back(tmp_path):
    """A record older than the first: the scan's sums are dropped (its
    intervals would start too late) and the series comes from the packets."""
    import struct

    from conftest import FIXTURES

    data = (FIXTURES / "sack_recovery.pcap").read_bytes()
    sec = struct.unpack_from("<I", data, 24)[0]
    last = len(data)
    off = 24
    while off < len(data):                 # the last record
        last = off
        off += 16 + struct.unpack_from("<I", data, off + 8)[0]
    moved = bytearray(data)
    struct.pack_into("<I", moved, last, sec - 1)
    path = tmp_path / "back.pcap"
    path.write_bytes(bytes(moved))
    scanner = _pcapscan.Scanner(str(path), packets=False, interval_ms=100.0)
    while scanner.step()[0] == "more":
        pass
    assert scanner.series() is None
    assert _pcapscan.Scanner(str(FIXTURES / "sack_recovery.pcap"), packets=False,
                             interval_ms=100.0).series() is not None
