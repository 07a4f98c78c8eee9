"""Captures of the shapes that cost the flow analysis most, written here
byte for byte, headers only (snaplen 54): a one-way capture (the data
direction of a bulk flow, no ACKs), a flow resending segment after segment
while ACKs come in, and a hole filled after a resend.
tests/test_vs_tcptrace.py holds tcpvar to tcptrace on each."""
from __future__ import annotations

import struct
from pathlib import Path

MSS = 1448
SNAPLEN = 54
A, B = bytes([198, 18, 10, 1]), bytes([198, 18, 20, 2])
SYN, ACK = 0x02, 0x10


def _checksum(b: bytes) -> int:
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def _frame(up: bool, seq: int, ack: int, flags: int, length: int, ipid: int) -> tuple[bytes, int]:
    """(the captured bytes, the length on the wire) of one segment."""
    src, dst, sport, dport = (A, B, 40000, 5201) if up else (B, A, 5201, 40000)
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF,
                      5 << 4, flags, 65535, 0, 0)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40 + length, ipid & 0xFFFF, 0, 64, 6, 0,
                     src, dst)
    ip = ip[:10] + struct.pack("!H", _checksum(ip)) + ip[12:]
    eth = b"\x02\x00\x5e\x20\x00\x02\x02\x00\x5e\x10\x00\x01\x08\x00"
    return eth + ip + tcp, 54 + length


class Writer:
    """A pcap of one connection (microseconds), its segments appended in
    time order; sequence numbers relative to ISN 0."""

    def __init__(self, path: Path):
        self.f = open(path, "wb")
        self.f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, SNAPLEN, 1))
        self.us = 1_700_000_000 * 10**6
        self.ipid = 0

    def seg(self, dt_us: int, up: bool, seq: int, ack: int, flags: int = ACK, length: int = 0):
        self.us += dt_us
        self.ipid += 1
        data, wire = _frame(up, seq, ack, flags, length, self.ipid)
        self.f.write(struct.pack("<IIII", self.us // 10**6, self.us % 10**6, len(data), wire)
                     + data)

    def data(self, dt_us: int, n: int) -> None:
        """The @n-th full segment from A (1 is the first after the SYN)."""
        self.seg(dt_us, True, 1 + (n - 1) * MSS, 1, length=MSS)

    def ack(self, dt_us: int, n: int) -> None:
        """B acknowledges the first @n segments."""
        self.seg(dt_us, False, 1, 1 + n * MSS)

    def handshake(self) -> None:
        self.seg(0, True, 0, 0, SYN)
        self.seg(1000, False, 0, 1, SYN | ACK)
        self.seg(1000, True, 1, 1)

    def close(self) -> None:
        self.f.close()


def one_way(path: Path, segments: int = 70_000) -> None:
    """The data direction alone: more segments than tcpvar keeps awaiting
    their ACK (65,536), some sent again, among them ones it forgot."""
    w = Writer(path)
    w.seg(0, True, 0, 0, SYN)
    for n in range(1, segments + 1):
        w.data(10, n)
        if n % 997 == 0:
            w.data(10, n - 500 if n < 66_000 else n - 66_000)
    w.close()


def resending(path: Path, rounds: int = 2, window: int = 20_000, resent: int = 3_000) -> None:
    """Windows of @window segments; then, while the ACKs of the first half
    come in, the segments after them sent again one by one (each a
    retransmission that all later outstanding segments see); then the
    cumulative ACK of the window."""
    w = Writer(path)
    w.handshake()
    base = 0
    for _ in range(rounds):
        for n in range(base + 1, base + window + 1):
            w.data(10, n)
        half = window // 2
        for k in range(resent):
            if k % 2 == 0 and k // 2 < half:
                w.ack(20, base + k + 2)
            w.data(10, base + half + 1 + k)
        w.ack(50_000, base + window)
        base += window
    w.close()


def fill_after_resend(path: Path) -> None:
    """Segment 3 is missing from the capture; 2 is sent again (a resend
    below the hole); then 3 arrives, sent once, and the ACKs come."""
    w = Writer(path)
    w.handshake()
    for n in (1, 2, 4, 5, 6, 7, 8):
        w.data(100, n)
    w.data(100, 2)
    w.data(100, 3)
    w.ack(20_000, 3)
    w.ack(1_000, 5)
    w.ack(1_000, 8)
    w.close()


SHAPES = {"one_way": one_way, "resending": resending, "fill_after_resend": fill_after_resend}
