"""The throughput series `tcpvar analyze` stores holds, per connection,
direction and interval, the data segments and bytes tshark sees in that
interval, on every capture. The series the scan sums
(ingest/native/series.c) is the one the store sums from the stored packets
(analyzers/sql/throughput_sums.sql), row for row: also where timestamps go
backwards, where the scan's sums give way to the packets'."""
from __future__ import annotations

import subprocess
from collections import Counter

import pytest

from tcpvar.analyzers.series import build_throughput
from tcpvar.ingest import _pcapscan
from test_vs_tcptrace import NOT_ANALYSABLE

import peers
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


# capture -> why tshark's per-interval bytes differ from the packets'
TSHARK_DIFFERS = {
    "suricata__detect-ipopts.pcap": "tshark keys source-routed packets on the route's final "
                                    "address (test_vs_tshark.py)",
    "suricata__detect-ipopts.rawip.pcap": "the same capture relabelled as raw IP",
}


def _last(field: str) -> str:
    """A field's innermost value: a tunnel's inner header comes last."""
    return field.split(",")[-1]


def _tshark_bins(path, interval_ns: int) -> tuple[Counter, Counter]:
    """Data segments and payload bytes per (sender, receiver, interval) by
    tshark: interval k holds [first record + k x width, + width). An IPv4
    segment counts the bytes its IP length gives, as sent: where the snap
    length cut it short, tshark's tcp.len counts only those captured."""
    proc = subprocess.run(
        # without sequence analysis and reassembly, which these fields do not need: twice as fast
        ["tshark", "-n", "-r", str(path), "-o", "tcp.analyze_sequence_numbers:FALSE",
         "-o", "tcp.desegment_tcp_streams:FALSE", "-T", "fields", "-e", "frame.time_epoch",
         "-e", "ip.src", "-e", "ipv6.src", "-e", "tcp.srcport", "-e", "ip.dst",
         "-e", "ipv6.dst", "-e", "tcp.dstport", "-e", "tcp.len", "-e", "ip.len",
         "-e", "ip.hdr_len", "-e", "tcp.hdr_len"],
        capture_output=True, text=True, check=False)
    # a capture whose last record is cut short: tshark reads the rest, then fails
    assert proc.returncode == 0 or "cut short in the middle of a packet" in proc.stderr, \
        proc.stderr
    packets, octets = Counter(), Counter()
    first = None
    for line in proc.stdout.splitlines():
        t, src4, src6, sport, dst4, dst6, dport, n, iplen, iphdr, tcphdr = line.split("\t")
        secs, _, frac = t.partition(".")
        ns = int(secs) * 10**9 + int(frac.ljust(9, "0")[:9])
        first = ns if first is None else first
        if not sport:
            continue
        n = int(_last(n) or 0)
        if src4 and tcphdr:
            n = int(_last(iplen)) - int(_last(iphdr)) - int(_last(tcphdr))
        if n <= 0:
            continue
        key = (peers.endpoint(f"[{_last(src4 or src6)}]:{_last(sport)}"),
               peers.endpoint(f"[{_last(dst4 or dst6)}]:{_last(dport)}"),
               (ns - first) // interval_ns)
        packets[key] += 1
        octets[key] += n
    return packets, octets


@pytest.mark.parametrize("path", [p for p in OWN_CAPTURES + SHARED_CAPTURES
                                  if p.name not in NOT_ANALYSABLE and
                                  p.name not in TSHARK_DIFFERS], ids=capture_id)
def test_series_holds_tshark_bytes_per_interval(analyzed, store, path):
    """Every interval's data segments and bytes are tshark's, and its rates
    are 8 x bytes over the interval's width."""
    _holds_tshark_bins(store, analyzed(path), path)


# captures with stalls (timeouts, a zero window) and several connections
SPARSE = ["iperf_4flows.pcap", "iperf_bulk_loss.pcap", "iperf_rto.pcap", "rto_vs_fast.pcap",
          "zero_window.pcap"]


@pytest.mark.parametrize("name", SPARSE)
def test_sparse_series_holds_tshark_bytes_per_interval(tmp_path, monkeypatch, name):
    """With every direction over the span a dense series may have, each
    keeps only its intervals with data and the empty one on each side: the
    intervals with data hold tshark's segments and bytes as a dense series
    does, and every empty interval kept lies beside one with data."""
    from tcpvar.analyzers import series
    from tcpvar.pipelines.analyze import AnalyzeOptions, analyze_capture
    from tcpvar.store import Store

    from conftest import FIXTURES

    monkeypatch.setattr(series, "MAX_SPAN", 1)
    path = FIXTURES / name
    with Store(tmp_path / "s.duckdb") as store:
        doc = analyze_capture(store, str(path), AnalyzeOptions())
        assert " only the intervals with data and the empty one" in doc["warning"]
        _holds_tshark_bins(store, doc, path)
        rows = store.con.execute("SELECT conn, dir, bin, packets FROM throughput").fetchall()
    data = {(c, d, b) for c, d, b, n in rows if n}
    empty = [(c, d, b) for c, d, b, n in rows if not n]
    assert empty and all((c, d, b - 1) in data or (c, d, b + 1) in data for c, d, b in empty)


def _holds_tshark_bins(store, doc: dict, path) -> None:
    (interval_ms,) = store.con.execute("SELECT interval_ms FROM captures WHERE capture_id = $1",
                                       [doc["capture_id"]]).fetchone()
    want_packets, want_bytes = _tshark_bins(path, round(interval_ms * 1e6))   # tshark reads .gz
    ends = {c["id"]: (peers.endpoint(c["a"]), peers.endpoint(c["b"]))
            for c in doc["connections"]}
    packets, octets = Counter(), Counter()
    width_s = interval_ms / 1e3
    for conn, direction, bin_, n, nbytes, unique, bps, goodput in store.con.execute(
            "SELECT conn, dir, bin, packets, bytes, unique_bytes, bps, goodput_bps "
            "FROM throughput WHERE capture_id = $1", [doc["capture_id"]]).fetchall():
        a, b = ends[conn]
        key = (a, b, bin_) if direction == 0 else (b, a, bin_)
        packets[key] += n                   # connections reusing a 4-tuple come together
        octets[key] += nbytes
        assert bps == pytest.approx(8 * nbytes / width_s, rel=1e-12)
        assert goodput == pytest.approx(8 * unique / width_s, rel=1e-12) and unique <= nbytes
    assert +octets == want_bytes and +packets == want_packets


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
