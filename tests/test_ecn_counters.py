"""The ECN counters of the one-pass analysis (dir_counters: ect_packets,
ce_packets, ece_packets, cwr_packets) against tshark's reading of the same
capture: a connection over IPv4 and one over IPv6, every ECN codepoint of
the IP header (IPv4's TOS byte, IPv6's traffic class) and TCP's ECE and CWR
flags, in both directions."""
from __future__ import annotations

import struct
import subprocess
from collections import Counter
from pathlib import Path

import duckdb

from conftest import tcpvar_main

SYN, ACK, PSH, ECE, CWR = 0x02, 0x10, 0x08, 0x40, 0x80


def _tcp(sport: int, dport: int, seq: int, ack: int, flags: int, payload: int) -> bytes:
    return struct.pack("!HHIIBBHHH", sport, dport, seq, ack, 5 << 4, flags, 65535, 0, 0) \
        + bytes(payload)


def _ipv4(src: str, dst: str, ecn: int, tcp: bytes) -> bytes:
    head = struct.pack("!BBHHHBBH4s4s", 0x45, ecn, 20 + len(tcp), 1, 0x4000, 64, 6, 0,
                       bytes(map(int, src.split("."))), bytes(map(int, dst.split("."))))
    return b"\x00" * 12 + b"\x08\x00" + head + tcp


def _ipv6(src: int, dst: int, ecn: int, tcp: bytes) -> bytes:
    first = (6 << 28) | (ecn << 20)          # traffic class' low bits: ECN
    head = struct.pack("!IHBB", first, len(tcp), 6, 64) \
        + b"\x20\x01\x0d\xb8" + bytes(11) + bytes([src]) \
        + b"\x20\x01\x0d\xb8" + bytes(11) + bytes([dst])
    return b"\x00" * 12 + b"\x86\xdd" + head + tcp


def _connection(ip, a, b) -> list[bytes]:
    """An ECN handshake, data of every codepoint one way, ECE echoes and a
    CWR answer: (sender seq, receiver seq) advance as a real transfer's."""
    out = [ip(a, b, 0, _tcp(1000, 80, 0, 0, SYN | ECE | CWR, 0)),
           ip(b, a, 0, _tcp(80, 1000, 0, 1, SYN | ACK | ECE, 0)),
           ip(a, b, 0, _tcp(1000, 80, 1, 1, ACK, 0))]
    seq = 1
    for i, ecn in enumerate((2, 2, 3, 2, 1, 3, 2, 2)):
        flags = ACK | PSH | (CWR if i == 4 else 0)
        out.append(ip(a, b, ecn, _tcp(1000, 80, seq, 1, flags, 100)))
        seq += 100
        echo = ECE if i in (2, 3, 5) else 0        # the receiver echoes CE until CWR
        out.append(ip(b, a, 0 if i % 2 else 2, _tcp(80, 1000, 1, seq, ACK | echo, 0)))
    return out


def _write_pcap(path: Path, frames: list[bytes]) -> None:
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, frame in enumerate(frames):
            f.write(struct.pack("<IIII", 1_700_000_000, 1000 * i, len(frame), len(frame)))
            f.write(frame)


def _tshark(path: Path) -> Counter:
    """(IP version, source port, what) -> packets, as tshark reads the capture."""
    rows = subprocess.run(
        ["tshark", "-r", str(path), "-T", "fields", "-E", "occurrence=f", "-e", "tcp.srcport",
         "-e", "ip.dsfield.ecn", "-e", "ipv6.tclass.ecn", "-e", "tcp.flags.ece",
         "-e", "tcp.flags.cwr", "-e", "ip.version"],
        capture_output=True, text=True, check=True).stdout.splitlines()
    out: Counter = Counter()
    for line in rows:
        sport, ecn4, ecn6, ece, cwr, version = line.split("\t")
        ecn = int(ecn4 or ecn6, 0)
        v, port = version or "6", int(sport)
        out[v, port, "ect"] += ecn in (1, 2)
        out[v, port, "ce"] += ecn == 3
        out[v, port, "ece"] += ece in ("1", "True")
        out[v, port, "cwr"] += cwr in ("1", "True")
    return out


def test_ecn_counters_are_tsharks(tmp_path):
    pcap = tmp_path / "ecn.pcap"
    _write_pcap(pcap, _connection(_ipv4, "10.0.0.1", "10.0.0.2") + _connection(_ipv6, 1, 2))
    truth = _tshark(pcap)
    assert truth["4", 1000, "ce"] == 2 and truth["4", 80, "ect"] == 4     # the capture is as meant
    db = tmp_path / "t.duckdb"
    r = tcpvar_main("analyze", pcap, "--db", db, "--json", "-q")
    assert r.returncode == 0, r.stderr
    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute(
        "SELECT c.ip_version, if(d.dir = 0, c.a_port, c.b_port), d.ect_packets, d.ce_packets, "
        "d.ece_packets, d.cwr_packets FROM dir_counters d JOIN connections c "
        "USING (capture_id, conn)").fetchall()
    assert len(rows) == 4
    for version, port, *counts in rows:
        want = [truth[str(version), port, k] for k in ("ect", "ce", "ece", "cwr")]
        assert counts == want, (version, port)
