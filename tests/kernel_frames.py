"""Hostile IPv4 frames for the patched kernel's tests (tests/kernel_guest.py):
what a network may send a router's ngwa qdisc and a receiver's TCP: bad
header lengths, short and cut frames, option lengths 0-40, truncated,
doubled and post-EOL NGWA options, fragments, other protocols, TCP segments
with any flags. Standard library only: it runs inside the micro-VM.

Every builder takes a random.Random, so that a seed gives the same frames.
"""
from __future__ import annotations

import random
import socket
import struct

NGWA = 33
PORT = 5201                 # the guest's servers listen here
EOL, NOP = 0, 1


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def ether(dst_mac: bytes, src_mac: bytes, payload: bytes, ethertype: int = 0x0800) -> bytes:
    return dst_mac + src_mac + struct.pack("!H", ethertype) + payload


def ipv4(src: str, dst: str, payload: bytes, options: bytes = b"", proto: int = 6,
         ihl: int | None = None, total: int | None = None, frag: int = 0,
         ident: int = 0x1234, good_sum: bool = True) -> bytes:
    """An IPv4 header (options padded to 4 bytes with EOL) and @payload;
    @ihl and @total, when given, are written as they are, right or wrong."""
    opts = options + bytes(-len(options) % 4)
    hl = 5 + len(opts) // 4 if ihl is None else ihl
    tot = 20 + len(opts) + len(payload) if total is None else total
    hdr = struct.pack("!BBHHHBBH4s4s", 0x40 | (hl & 0xF), 0, tot & 0xFFFF, ident, frag, 64,
                      proto, 0, socket.inet_aton(src), socket.inet_aton(dst)) + opts
    if good_sum:
        hdr = hdr[:10] + struct.pack("!H", checksum(hdr)) + hdr[12:]
    return hdr + payload


def tcp(sport: int, dport: int, seq: int, ack: int, flags: int, data: bytes = b"",
        window: int = 65535) -> bytes:
    """A TCP segment without options; its checksum is left to be wrong on
    purpose only when the caller asks for garbage (routers do not check it,
    receivers drop it after IPv4's option parsing has run)."""
    return struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF,
                       5 << 4, flags, window, 0, 0) + data


def tcp_checksummed(src: str, dst: str, segment: bytes) -> bytes:
    pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 6,
                                                                        len(segment))
    csum = checksum(pseudo + segment)
    return segment[:16] + struct.pack("!H", csum) + segment[18:]


def ngwa(value: int, length: int = 6, kind: int = NGWA) -> bytes:
    body = value.to_bytes(4, "big")
    if length >= 6:
        return bytes([kind, length]) + body + bytes(length - 6)
    return bytes([kind, length]) + body[:max(0, length - 2)]


def hostile_options(rng: random.Random) -> tuple[str, bytes]:
    """(kind, options bytes) of one hostile IPv4 options area (≤ 40 bytes)."""
    kind = rng.choice(("length", "truncated", "doubled", "post_eol", "random", "valid"))
    value = rng.choice((0, 1, 1448, 30000, 0xFFFFFFFF, rng.getrandbits(32)))
    if kind == "length":                     # the NGWA option with any length 0..40
        n = rng.randint(0, 40)
        return kind, (bytes([NGWA, n]) + bytes(max(0, n - 2)))[:40]
    if kind == "truncated":                  # it runs past the options area
        return kind, bytes([NOP] * rng.randint(0, 3)) + bytes([NGWA, 6]) + bytes(rng.randint(0, 2))
    if kind == "doubled":
        return kind, ngwa(value) + bytes([NOP, NOP]) + ngwa(rng.getrandbits(32))
    if kind == "post_eol":                   # after the end of the list
        return kind, bytes([EOL, NOP, NOP, NOP]) + ngwa(value) + bytes([EOL, EOL])
    if kind == "random":
        return kind, bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 40)))
    return kind, ngwa(value) + bytes([EOL, EOL])


def routed_frame(rng: random.Random, src: str, dsts: list[str], dst_mac: bytes,
                 src_mac: bytes, tcp_ports: tuple[int, int]) -> tuple[str, bytes]:
    """A frame a router's IPv4 input sees: (category, bytes). Most carry
    hostile options; some are malformed below the options."""
    dst = rng.choice(dsts)
    cat = rng.choice(("options", "options", "options", "bad_ihl", "short", "cut",
                      "fragment", "non_tcp", "tcp_flags"))
    kind, opts = hostile_options(rng)
    seg = tcp(rng.getrandbits(16) | 1024, tcp_ports[1] if rng.random() < 0.5
              else rng.getrandbits(16), rng.getrandbits(32), rng.getrandbits(32),
              rng.choice((0x02, 0x10, 0x18, 0x04, 0x11, 0x12, 0x3F, 0)),
              bytes(rng.randint(0, 200)))
    if cat == "options":
        pkt = ipv4(src, dst, seg, opts)
    elif cat == "bad_ihl":
        pkt = ipv4(src, dst, seg, opts, ihl=rng.choice((0, 1, 4, 15)))
    elif cat == "short":
        pkt = ipv4(src, dst, seg, opts)[:rng.randint(0, 24)]
    elif cat == "cut":                       # total length beyond the frame
        full = ipv4(src, dst, seg, opts)
        pkt = full[:max(20, len(full) - rng.randint(1, 40))]
        pkt = pkt[:2] + struct.pack("!H", len(full)) + pkt[4:]
    elif cat == "fragment":
        offset = rng.choice((0, 0, rng.randint(1, 800)))
        pkt = ipv4(src, dst, seg, opts, frag=(0x2000 if rng.random() < 0.7 else 0) | offset,
                   ident=rng.getrandbits(16))
    elif cat == "non_tcp":
        proto = rng.choice((17, 1, 47, 132, 255))
        pkt = ipv4(src, dst, bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 64))),
                   opts, proto=proto)
    else:
        pkt = ipv4(src, dst, tcp_checksummed(src, dst, seg), opts)
    return f"{cat}:{kind}", ether(dst_mac, src_mac, pkt)


def garbage_frame(rng: random.Random, dst_mac: bytes, src_mac: bytes, src: str,
                  dst: str) -> bytes:
    """A frame for a qdisc, handed straight to it (no IPv4 input on the way):
    an IPv4 ethertype over headers that are wrong in any way."""
    roll = rng.random()
    if roll < 0.3:                           # raw bytes
        body = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 120)))
    elif roll < 0.6:                         # a TCP header with any IHL and options
        kind, opts = hostile_options(rng)
        body = ipv4(src, dst, tcp(1, 2, 3, 4, 0x10), opts, ihl=rng.randint(0, 15),
                    total=rng.getrandbits(16), good_sum=rng.random() < 0.5)
    else:                                    # a valid-looking header cut anywhere
        kind, opts = hostile_options(rng)
        full = ipv4(src, dst, tcp(1, 2, 3, 4, 0x18, b"x" * 64), opts)
        body = full[:rng.randint(0, len(full))]
    return ether(dst_mac, src_mac, body)


# The hostile case's frames, from their seeds: the guest sends them, and
# test_kernel makes them again to count what r1's queue should find in them
POOL = 5000


def routed_frames(seed: int, count: int, dst_mac: bytes, src_mac: bytes, port: int):
    """(category, frame) of @count frames for r1's IPv4 input: a pool of
    POOL, then picks from it."""
    rng = random.Random(seed)
    pool = [routed_frame(rng, "10.0.1.1", ["10.0.3.1", "10.0.4.7"], dst_mac, src_mac,
                         (40000, port)) for _ in range(POOL)]
    for i in range(count):
        yield pool[i] if i < POOL else pool[rng.randrange(POOL)]


def garbage_frames(seed: int, count: int, dst_mac: bytes, src_mac: bytes):
    """@count frames for a queue: a pool of POOL, round and round."""
    rng = random.Random(seed)
    pool = [garbage_frame(rng, dst_mac, src_mac, "10.0.1.1", "10.0.4.9") for _ in range(POOL)]
    for i in range(count):
        yield pool[i % POOL]


def copy_options(seed: int, count: int):
    """(options, IPv4 identification) of @count copies of a connection's
    segments."""
    rng = random.Random(seed)
    for _ in range(count):
        _, opts = hostile_options(rng)
        yield opts[:40], rng.getrandbits(16)


def syn(src: str, dst: str, sport: int, dport: int, seq: int, mac: tuple[bytes, bytes],
        flags: int = 0x02, data: bytes = b"") -> bytes:
    return ether(mac[0], mac[1], ipv4(src, dst, tcp_checksummed(
        src, dst, tcp(sport, dport, seq, 0 if flags == 0x02 else 1, flags, data))))
