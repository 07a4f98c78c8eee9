"""A capture from someone else must not cause unbounded work or crash
(issue 31): the work its content drives is bounded, and what the bounds
changed is said. Each capture is crafted here, as an attacker would, and
read by the real `tcpvar analyze`; the truth is tshark's or a hand
computation (docs/analyze.md, "Limits")."""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tcpvar.analyzers import series
from tcpvar.ingest import reader
from tcpvar.store import Store

from conftest import ROOT, error_lines
from conftest import tcpvar_main as tcpvar

sys.path.insert(0, str(ROOT / "fixtures"))
import craft  # noqa: E402  (scapy: the packets are built as the fixtures are)

S = craft.S
MS = craft.MS
CLI, SRV = ("198.18.10.1", 40000), ("198.18.20.2", 5201)


@pytest.fixture
def db(tmp_path):
    return tmp_path / "t.duckdb"


def records(frames: list[tuple[int, bytes, int]]) -> bytes:
    """A classic pcap file (Ethernet, microseconds) of (time ns, bytes,
    length on the wire) records: the wire length is the record's to claim."""
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, craft.LINKTYPE_ETHERNET)]
    for ts, data, wire in frames:
        sec, frac = divmod(ts, S)
        out.append(struct.pack("<IIII", sec & 0xFFFFFFFF, frac // 1000, len(data), wire) + data)
    return b"".join(out)


def one_connection(v6: bool = False) -> craft.Conn:
    cap = craft.Capture("limits", "crafted for test_input_limits")
    if v6:
        return craft.Conn(cap, (craft.CLI6, CLI[1]), (craft.SRV6, SRV[1]), 1000, 5000, v6=True)
    return craft.Conn(cap, CLI, SRV, 1000, 5000)


def ip_len_zero(frame: bytes, v6: bool = False) -> bytes:
    """The frame with its IP length field left 0, as segmentation offload leaves it."""
    at = 14 + (4 if v6 else 2)
    return frame[:at] + b"\0\0" + frame[at + 2:]


def analyze(db: Path, path: Path, *args) -> tuple[subprocess.CompletedProcess, dict | None]:
    res = tcpvar("analyze", "--db", db, "--json", *args, path)
    return res, json.loads(res.stdout) if res.returncode == 0 else None


def one_error_line(res: subprocess.CompletedProcess) -> str:
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and error_lines(res.stderr) == lines, res.stderr
    assert "Traceback" not in res.stderr
    return lines[0]


# ---- IP length 0: the record's length stands in, at most 65,535 ----

def test_ip_length_zero_is_capped_and_counted(db, tmp_path):
    """Segments whose IP length field is 0 (TSO captures): a record that
    claims 4 GB on the wire makes its 10 captured bytes count 65,535 - 40,
    not 4.29 GB; one that claims its real length counts as tshark reads it."""
    c4, c6 = one_connection(), one_connection(v6=True)
    big = c4.data("c2s", 0, off=0, length=10, flags="PA", ack=0)
    real = c4.data("c2s", 1 * MS, off=65495, length=10, flags="PA", ack=0)
    plain = c4.data("c2s", 2 * MS, off=65505, length=10, flags="PA", ack=0)
    big6 = c6.data("c2s", 3 * MS, off=0, length=10, flags="PA", ack=0)
    path = tmp_path / "tso.pcap"
    path.write_bytes(records([
        (big.ts_ns, ip_len_zero(big.data), 0xFFFFFFFF),
        (real.ts_ns, ip_len_zero(real.data), len(real.data)),
        (plain.ts_ns, plain.data, len(plain.data)),
        (big6.ts_ns, ip_len_zero(big6.data, v6=True), 0xFFFFFFFF)]))

    res, doc = analyze(db, path)
    assert res.returncode == 0, res.stderr
    warning = doc["captures"][0]["warning"]
    assert warning.startswith("3 TCP segments have an IP length of 0 (segmentation offload)")
    assert "at most 65,535 bytes (2 records claim more)" in warning
    assert res.stderr.strip() == f"warning: {path}: {warning}"

    # tshark takes the record's length for the one that claims its real
    # length; the other two claim more than an IP length field can hold
    fields = subprocess.run(["tshark", "-r", path, "-T", "fields", "-e", "frame.len",
                             "-e", "tcp.len"], capture_output=True, text=True,
                            check=True).stdout.splitlines()
    assert [int(x) for x in fields[1].split("\t")] == [len(real.data), 10]
    assert int(fields[0].split("\t")[0]) > 65535 and int(fields[3].split("\t")[0]) > 65535
    # by hand: IPv4 total length min(2^32 - 1 - 14, 65,535) less 20 + 20 of
    # headers; IPv6 payload length min(2^32 - 1 - 14 - 40, 65,535) less 20
    with Store(db, read_only=True) as store:
        lens = store.con.execute("SELECT len FROM packets ORDER BY frame").fetchall()
    assert [n for (n,) in lens] == [65495, 10, 10, 65515]
    conns = {c["ip_version"]: c for c in doc["connections"]}
    assert conns[4]["a2b"]["data_bytes"] == 65495 + 10 + 10
    assert conns[6]["a2b"]["data_bytes"] == 65515


# ---- a file that shrinks while it is read ----

def one_flow(n: int) -> bytes:
    """A pcap of @n one-byte data segments of one connection (their
    checksums are not checked, only their sequence numbers change)."""
    template = one_connection().data("c2s", 0, off=0, length=1, flags="PA", ack=0).data
    seq_at = 14 + 20 + 4
    head, tail = template[:seq_at], template[seq_at + 4:]
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)]
    rec = struct.Struct("<IIII")
    for i in range(n):
        out.append(rec.pack(1_700_000_000 + i // 1_000_000, i % 1_000_000, len(template),
                            len(template)) + head + struct.pack(">I", 1001 + i) + tail)
    return b"".join(out)


SCAN_CUT = textwrap.dedent("""
    import os, sys
    from tcpvar.ingest import _pcapscan

    path, cut = sys.argv[1], int(sys.argv[2])
    scanner = _pcapscan.Scanner(path, batch_rows=1000)
    assert scanner.step()[0] == "more"
    os.truncate(path, cut)
    try:
        while scanner.step()[0] == "more":
            pass
    except _pcapscan.ScanError as exc:
        print(exc)
""")


@pytest.mark.parametrize("cut", ["page", "record"])
def test_scanner_reports_a_file_cut_short(tmp_path, cut):
    """The file is cut after the scanner's first batch: to 100 kB, pages
    before where it reads (SIGBUS in the mapping), or three records before
    its end, inside the page it will read last (no SIGBUS: the bytes past
    the end read as zeros; the size is checked at the end). In a process of
    its own: a Bus error would end it, not the tests."""
    path = tmp_path / "shrinks.pcap"
    path.write_bytes(one_flow(20_000))
    size = 100_000 if cut == "page" else path.stat().st_size - 3 * (16 + 55)
    res = subprocess.run([sys.executable, "-c", SCAN_CUT, str(path), str(size)],
                         capture_output=True, text=True, timeout=300)
    assert (res.returncode, res.stderr) == (0, "")
    assert res.stdout == "the file was cut short while it was read (is it still being written?)\n"


CUTTING = textwrap.dedent("""
    import os, sys
    from tcpvar.cli.main import main
    from tcpvar.ingest import reader

    opened = reader._open_scanner

    class Cutting:
        '''The scanner, the file cut to 1 MB after its first batch.'''
        def __init__(self, scanner, path):
            self.scanner, self.path, self.steps = scanner, path, 0
        def step(self):
            out = self.scanner.step()
            self.steps += 1
            if self.steps == 1:
                os.truncate(self.path, 1 << 20)
            return out
        def __getattr__(self, name):
            return getattr(self.scanner, name)

    def cutting(path, options):
        scanner, feed = opened(path, options)
        return Cutting(scanner, path), feed

    reader._open_scanner = cutting
    sys.exit(main(sys.argv[1:]))
""")


def test_analyze_a_file_cut_short(db, tmp_path):
    """`tcpvar analyze` in a process of its own, the file cut short as it
    reads it (after its first batch of 131,072 segments): one line, exit
    status 3, nothing stored; not a Bus error (135)."""
    path = tmp_path / "shrinks.pcap"
    path.write_bytes(one_flow(reader.BATCH_ROWS + 10_000))
    res = subprocess.run([sys.executable, "-c", CUTTING, "analyze", "--db", str(db), str(path)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 3, (res.returncode, res.stderr)
    assert one_error_line(res) == (f"tcpvar: error: {path}: the file was cut short while it "
                                   f"was read (is it still being written?)")
    with Store(db, read_only=True) as store:
        assert store.con.execute("SELECT count(*) FROM captures").fetchone() == (0,)


# ---- connections per capture ----

def syn_flood(n: int) -> bytes:
    """@n SYNs, each from its own address and port: @n connections."""
    template = one_connection().seg("c2s", 0, "S", off=-1).data
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)]
    rec = struct.Struct("<IIII")
    for i in range(n):
        frame = bytearray(template)
        frame[26:30] = struct.pack(">I", 0x0A000000 + (i >> 16))       # IPv4 source
        frame[34:36] = struct.pack(">H", i & 0xFFFF)                    # TCP source port
        out.append(rec.pack(1_700_000_000, i, len(frame), len(frame)) + frame)
    return b"".join(out)


def test_connections_beyond_the_limit(db, tmp_path, monkeypatch):
    """TCPVAR_MAX_CONNECTIONS=50: 50 connections are read, 51 refused with
    one line that names the limit and how to raise it."""
    monkeypatch.setenv("TCPVAR_MAX_CONNECTIONS", "50")
    fifty, more = tmp_path / "fifty.pcap", tmp_path / "more.pcap"
    fifty.write_bytes(syn_flood(50))
    more.write_bytes(syn_flood(51))
    res, doc = analyze(db, fifty)
    assert res.returncode == 0, res.stderr
    assert len(doc["connections"]) == 50
    res, _ = analyze(db, more)
    assert res.returncode == 3
    line = one_error_line(res)
    assert f"{more}: more than 50 TCP connections open at once (the connection limit)" in line
    assert "TCPVAR_MAX_CONNECTIONS=N raises the limit to N" in line


def test_connection_limit_default(db, tmp_path, monkeypatch):
    """Without TCPVAR_MAX_CONNECTIONS the limit is 100,000: one more SYN
    than that is refused, after the scanner held 100,000 connections."""
    monkeypatch.delenv("TCPVAR_MAX_CONNECTIONS", raising=False)
    assert reader.ScanOptions().max_connections == reader.MAX_CONNECTIONS == 100_000
    path = tmp_path / "flood.pcap"
    path.write_bytes(syn_flood(100_001))
    res, _ = analyze(db, path, "--stats-only")
    assert res.returncode == 3
    assert "more than 100000 TCP connections" in one_error_line(res)


@pytest.mark.parametrize("value", ["0", "-5", "many", "5000000000"])
def test_connection_limit_must_be_a_count(db, tmp_path, monkeypatch, value):
    monkeypatch.setenv("TCPVAR_MAX_CONNECTIONS", value)
    path = tmp_path / "two.pcap"
    path.write_bytes(syn_flood(2))
    res = tcpvar("analyze", "--db", db, path)
    assert res.returncode == 2
    assert f"TCPVAR_MAX_CONNECTIONS={value}: not a number of connections" in one_error_line(res)


MEMORY = textwrap.dedent("""
    import sys
    from tcpvar.ingest import _pcapscan

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096

    before = rss()
    scanner = _pcapscan.Scanner(sys.argv[1], packets=False, batch_rows=1 << 20)
    while scanner.step()[0] == "more":
        pass
    print(rss() - before)
""")


def test_memory_per_connection(tmp_path):
    """A SYN-only connection costs the scanner less than 1.9 kB: 1.66 kB, from
    2.4 kB before its gaps (512 bytes) and outstanding segments (528) were
    allocated as they are needed, from small."""
    path = tmp_path / "flood.pcap"
    path.write_bytes(syn_flood(100_000))
    res = subprocess.run([sys.executable, "-c", MEMORY, str(path)], capture_output=True,
                         text=True, check=True, timeout=300)
    assert int(res.stdout) / 100_000 < 1900


PEAK = textwrap.dedent("""
    import resource, sys
    from tcpvar.cli.main import main

    status = main(sys.argv[1:])
    print(status, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
""")


def test_table_of_many_connections_in_flat_memory(tmp_path):
    """The table of 200,000 connections (a SYN flood) is read from the store
    and printed a batch at a time: every connection is printed, and the
    process peaks below 1 GB (1.2 GB when the whole table was read back
    first; about 800 MB of it is the scanner's and DuckDB's)."""
    path = tmp_path / "flood.pcap"
    path.write_bytes(syn_flood(200_000))
    res = subprocess.run([sys.executable, "-c", PEAK, "analyze", "--stats-only", "-q",
                          "--db", str(tmp_path / "t.duckdb"), str(path)],
                         env={**os.environ, "TCPVAR_MAX_CONNECTIONS": "200000"},
                         capture_output=True, text=True, check=True, timeout=300)
    status, peak_kb = map(int, res.stderr.split()[-2:])
    assert status == 0
    assert res.stdout.startswith(f"{path}: 200000 TCP connections\n")
    assert sum(line[:10].strip().isdigit() for line in res.stdout.splitlines()) == 200_000
    assert peak_kb < 1_000_000


# ---- the throughput series ----

def series_rows(db: Path) -> list[tuple]:
    with Store(db, read_only=True) as store:
        return store.con.execute("SELECT conn, dir, bin, t_s, packets, bytes FROM throughput "
                                 "ORDER BY ALL").fetchall()


def stored_warning(db: Path) -> str:
    with Store(db, read_only=True) as store:
        return store.con.execute("SELECT warning FROM captures").fetchone()[0]


def data_at(cap: list[craft.Frame], conn: craft.Conn, times_ns: list[int]) -> None:
    for k, t in enumerate(times_ns):
        cap.append(conn.data("c2s", t, off=k, length=1, flags="PA", ack=0))


def test_segments_years_apart(db, tmp_path):
    """Two 1-byte segments 10^7 s apart: a dense series would be 10^8 rows
    at 100 ms (6.3 GB, then a DuckDB error); the series keeps the two
    intervals with data and the empty one beside each, by hand bins 0, 1,
    10^8 - 1 and 10^8, and the capture's warning says so."""
    conn = one_connection()
    frames: list[craft.Frame] = []
    data_at(frames, conn, [0, 10**7 * S])
    path = tmp_path / "apart.pcap"
    path.write_bytes(craft.pcap_bytes(frames, craft.LINKTYPE_ETHERNET))
    assert path.stat().st_size < 200
    res, doc = analyze(db, path)
    assert res.returncode == 0, res.stderr
    assert series_rows(db) == [(1, 0, 0, 0.0, 1, 1), (1, 0, 1, 0.1, 0, 0),
                               (1, 0, 10**8 - 1, 9999999.9, 0, 0),
                               (1, 0, 10**8, 10**7, 1, 1)]
    assert stored_warning(db) == (
        "throughput series: 1 direction keeps only the intervals with data and the empty "
        "one on each side (connection 1 a2b spans 100,000,001 intervals of 100 ms; dense "
        "series stop at 1,000,000 intervals per direction and 2,000,000 empty ones per "
        "capture)")
    assert doc["captures"][0]["warning"] == stored_warning(db)       # and printed


def test_fairness_of_segments_years_apart(db, tmp_path):
    """Two connections sending one byte each at 0 and 10^7 s: Jain's index
    per interval is taken over the intervals the sparse series holds, not a
    grid of the whole span (2 x 10^8 rows). Both send alike: 1 where they
    send, by hand; the empty intervals have no index."""
    frames: list[craft.Frame] = []
    cap = craft.Capture("limits", "crafted for test_input_limits")
    for port in (40000, 40001):
        data_at(frames, craft.Conn(cap, (CLI[0], port), SRV, 1000, 5000), [0, 10**7 * S])
    path = tmp_path / "apart2.pcap"
    path.write_bytes(craft.pcap_bytes(sorted(frames, key=lambda f: f.ts_ns),
                                      craft.LINKTYPE_ETHERNET))
    res, doc = analyze(db, path, "--fairness")
    assert res.returncode == 0, res.stderr
    fairness = doc["captures"][0]["fairness"]
    assert (fairness["jain_intervals_mean"], fairness["jain_intervals_min"]) == (1.0, 1.0)


def test_series_bounded_per_capture(db, tmp_path, monkeypatch):
    """With the limits at 100 intervals per direction and 150 empty ones per
    capture: directions spanning 10, 60, 90 and 120 intervals (one segment
    in the first and the last) are dense while their empty intervals add up
    to at most 150, counted from the fewest (8 + 58; 88 more would pass
    it), the 120 one is over 100: 10 + 60 + 4 + 4 rows. A sparse direction
    with a stall keeps zeros at its edges."""
    monkeypatch.setattr(series, "MAX_SPAN", 100)
    monkeypatch.setattr(series, "MAX_FILL", 150)
    cap = craft.Capture("limits", "crafted for test_input_limits")
    frames: list[craft.Frame] = []
    for k, span in enumerate([10, 60, 90, 120]):
        conn = craft.Conn(cap, (CLI[0], CLI[1] + k), SRV, 1000, 5000)
        data_at(frames, conn, [k * MS, (span - 1) * 100 * MS + k * MS])
    stall = craft.Conn(cap, (CLI[0], CLI[1] + 9), SRV, 1000, 5000)
    data_at(frames, stall, [t * 100 * MS + 5 * MS for t in (0, 1, 2, 50, 51, 109)])
    frames.sort(key=lambda f: f.ts_ns)
    path = tmp_path / "spans.pcap"
    path.write_bytes(craft.pcap_bytes(frames, craft.LINKTYPE_ETHERNET))

    res, doc = analyze(db, path)
    assert res.returncode == 0, res.stderr
    rows = series_rows(db)
    bins = {conn: [b for c, _, b, *_ in rows if c == conn] for conn in range(1, 6)}
    assert bins[1] == list(range(10)) and bins[2] == list(range(60))
    assert bins[3] == [0, 1, 88, 89] and bins[4] == [0, 1, 118, 119]
    assert bins[5] == [0, 1, 2, 3, 49, 50, 51, 52, 108, 109]
    assert sum(p for *_, p, _ in rows) == 2 * 4 + 6
    assert "3 directions keep only the intervals with data" in stored_warning(db)
    assert "(connection 4 a2b spans 120 intervals of 100 ms;" in stored_warning(db)


def test_series_of_ordinary_captures_are_dense(analyzed, store):
    """Where no limit is reached, every direction has every interval from
    its first data interval to its last, as before the limits."""
    from conftest import OWN_CAPTURES
    for path in OWN_CAPTURES:
        doc = analyzed(path)
        gaps = store.con.execute(
            "SELECT count(*) FROM (SELECT conn, dir FROM throughput WHERE capture_id = $1 "
            "GROUP BY ALL HAVING count(*) <> max(bin) - min(bin) + 1)",
            [doc["capture_id"]]).fetchone()[0]
        assert gaps == 0, path.name
        assert "throughput series" not in (doc["warning"] or "")


def test_series_past_the_bin_numbers(db, tmp_path):
    """At 1 ms, data 10^7 s after the first record is interval 10^10, past
    the series' INTEGER bins: it is left out and said, not a DuckDB error
    (a real capture, tcptrace's http.dmp, did that at 7 ms)."""
    conn = one_connection()
    frames: list[craft.Frame] = []
    data_at(frames, conn, [0, 10**7 * S])
    path = tmp_path / "far.pcap"
    path.write_bytes(craft.pcap_bytes(frames, craft.LINKTYPE_ETHERNET))
    res, _ = analyze(db, path, "--interval", "1")
    assert res.returncode == 0, res.stderr
    assert series_rows(db) == [(1, 0, 0, 0.0, 1, 1), (1, 0, 1, 0.001, 0, 0)]
    assert stored_warning(db).endswith(
        "; 1 intervals with data lie more than 2^31 intervals after the capture's start and "
        "are left out")


# ---- record times the store cannot hold ----

def test_record_times_before_1970(db, tmp_path):
    """A record 1 s before 1970 (a signed -1 in a classic pcap): left out and
    said, the others read; it was an internal error (a uint64 time that
    DuckDB's BIGINT could not take)."""
    conn = one_connection()
    first = conn.data("c2s", 0, off=0, length=10, flags="PA", ack=0)
    early = conn.data("c2s", 0, off=10, length=10, flags="PA", ack=0)
    path = tmp_path / "early.pcap"
    data = bytearray(records([(first.ts_ns, first.data, len(first.data)),
                              (0, early.data, len(early.data))]))
    struct.pack_into("<I", data, 24 + 16 + len(first.data), 0xFFFFFFFF)   # -1 s
    path.write_bytes(bytes(data))
    res, doc = analyze(db, path)
    assert res.returncode == 0, res.stderr
    assert doc["captures"][0]["frames"] == 2 and doc["captures"][0]["tcp_packets"] == 1
    assert doc["captures"][0]["warning"] == \
        "1 record has a time before 1970 or after 2262, left out"
