"""Per connection and direction, tcpvar agrees with `tcptrace -l -r -n` run
on the same capture (and, in test_vs_tshark.py, with tshark's conversation
counts). Where tcpvar differs on purpose, KNOWN lists the capture and why;
docs/analysis.md explains each difference in full."""
from __future__ import annotations

import functools
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

import peers
import shapes
from conftest import OWN_CAPTURES, ROOT, SHARED, SHARED_CAPTURES, SHARED_FOUND, capture_id

# How a tcpvar figure is held to tcptrace's line for it: check(ours, theirs,
# context) -> bool. Exact wherever the two define the figure alike; where
# tcptrace prints a figure rounded or computes it its own way, the check
# applies that rounding or way to tcpvar's figure (tcptrace 6.6.7's output.c
# and rexmit.c).


FIN, RST, ACK = 1, 4, 16    # TCP flags (docs/schema.md, packets.flags)
DUPACK = 4                  # the duplicate-ACK bit of packets.ev


def exact(ours, theirs, _ctx) -> bool:
    return ours == theirs


def printed_ms(ours, theirs, _ctx) -> bool:
    """Milliseconds printed with one decimal (%8.1f)."""
    return abs(ours - theirs) <= 0.05 + 1e-9


def segment_avg(ours, theirs, ctx) -> bool:
    """(int)(data bytes / (data packets + .001))"""
    n = ctx.mine["data_packets"]
    return int(ours * n / (n + .001)) == theirs


def rtt_avg(ours, theirs, ctx) -> bool:
    """Average(): sum / (n + .0001), printed %8.1f."""
    n = ctx.mine["rtt_samples"]
    return printed_ms(ours * n / (n + .0001), theirs, ctx)


def rtt_stdev(ours, theirs, ctx) -> bool:
    """Stdev(): the sample standard deviation, but 0 for two samples or fewer."""
    return printed_ms(ours if ctx.mine["rtt_samples"] > 2 else 0, theirs, ctx)


def rtt_min(ours, theirs, ctx) -> bool:
    """tcptrace's minimum takes 0 for "none yet": after a sample of 0 µs the
    next sample becomes the minimum whatever its size. A sample is 0 where
    the ACK has the time stamp of the data it acknowledges (coarse clocks:
    tcptrace__zwnd.dmp ticks in 10 ms, psc.fddi in 1/1024 s; a receiver's own
    capture: pcapplusplus__example.pcap). Where tcpvar's minimum is 0, the
    sender's least sample after the last 0 in tshark's tcp.analysis.ack_rtt
    must be tcptrace's minimum."""
    if ours != 0 or not ctx.mine["rtt_samples"]:
        return printed_ms(ours, theirs, ctx)
    after = ctx.ack_rtts()
    if 0 not in after:                  # tshark has no sample of 0 µs either
        return False
    while 0 in after:
        after = after[after.index(0) + 1:]
    return printed_ms(min(after, default=0) / 1000, theirs, ctx)


def throughput(ours, theirs, ctx) -> bool:
    """Unique bytes over the connection's elapsed time, printed %8.0f, from
    microsecond timestamps: tcpvar's goodput / 8, the elapsed time ±1 µs."""
    duration, unique = ctx.conn["duration_s"], ctx.mine["unique_bytes"]
    low, high = unique / (duration + 1e-6), unique / max(duration - 1e-6, 1e-9)
    return (abs(ours / 8 * duration - unique) <= 1e-6 * unique
            and low - 0.5 <= theirs <= high + 0.5)


def xmit_time(ours, theirs, ctx) -> bool:
    """First to last data segment, seconds printed %7.3f."""
    span = (ctx.mine["data_last_ns"] - ctx.mine["data_first_ns"]) / 1e9 \
        if ctx.mine["data_packets"] else 0
    return abs(span - theirs) <= 0.0005 + 1e-6


def dupacks(ours, theirs, ctx) -> bool:
    """tcptrace also counts a FIN or SYN that repeats the previous ACK;
    tcpvar follows RFC 5681 and does not. So tcptrace's count may exceed
    tcpvar's by at most the FINs and SYNs of the side sending the ACKs."""
    return 0 <= theirs - ours <= ctx.acker["fin"] + ctx.acker["syn"]


def triple_dupacks(ours, theirs, ctx) -> bool:
    """tcptrace starts a run of duplicates again at any ACK that is not one,
    also one that leaves the ACK number where it was (a window update);
    RFC 5681, and tcpvar, only at one that moves it. And it counts a FIN
    that repeats the ACK and window. Both rules are applied to the duplicate
    ACKs tcpvar marked in the store: tcptrace's must give tcptrace's count,
    and tcpvar's count differs from tcptrace's by what the rules give apart
    (0 in most directions, where tcpvar's is tcptrace's own)."""
    theirs_way = ours_way = run_t = run_o = 0
    last, last_ack = None, None
    for ev, flags, ack, win, length, _ in ctx.acks():
        if ev & DUPACK or (flags & FIN and not length and last == (ack, win)):
            run_t += 1
            theirs_way += run_t == 3
        elif flags & ACK:
            run_t = 0
        if ev & DUPACK:
            run_o += 1
            ours_way += run_o == 3
        elif flags & ACK and not flags & RST and ack != last_ack:
            run_o, last_ack = 0, ack
        if flags & ACK:
            last = (ack, win)
    return theirs_way == theirs and ours == theirs - (theirs_way - ours_way)


def window_scale(ours, theirs, ctx) -> bool:
    """tcpvar's is the shift in effect; tcptrace shows the offered one until
    a segment after the SYNs shows that scaling is off: alike once both
    SYNs were seen."""
    return not ctx.conn["handshake"] or ours == theirs


def syn_fin(ours, theirs, ctx) -> bool:
    """"SYN/FIN pkts sent: 1/1", of which peers.number reads the SYNs."""
    return ours == theirs and f"{ctx.mine['syn']}/{ctx.mine['fin']}" == ctx.line


# tcptrace line -> (tcpvar field, check)
FIELDS = {
    "total packets": ("packets", exact),
    "ack pkts sent": ("ack_packets", exact),
    "pure acks sent": ("pure_acks", exact),
    "sack pkts sent": ("sack_packets", exact),
    "dsack pkts sent": ("dsack_packets", exact),
    "max sack blks/ack": ("max_sack_blocks", exact),
    "unique bytes sent": ("unique_bytes", exact),
    "actual data pkts": ("data_packets", exact),
    "actual data bytes": ("data_bytes", exact),
    "rexmt data pkts": ("retransmitted_packets", exact),
    "rexmt data bytes": ("retransmitted_bytes", exact),
    "zwnd probe pkts": ("zero_window_probes", exact),
    "zwnd probe bytes": ("zero_window_probe_bytes", exact),
    "outoforder pkts": ("out_of_order_packets", exact),
    "pushed data pkts": ("pushed_packets", exact),
    "SYN/FIN pkts sent": ("syn", syn_fin),
    "adv wind scale": ("window_scale", window_scale),
    "urgent data pkts": ("urgent_packets", exact),
    "mss requested": ("mss_requested", exact),
    "max segm size": ("segment_max", exact),
    "min segm size": ("segment_min", exact),
    "avg segm size": ("segment_avg", segment_avg),
    "max win adv": ("window_max", exact),
    "min win adv": ("window_min", exact),
    "zero win adv": ("zero_window_adverts", exact),
    "ttl stream length": ("stream_bytes", exact),
    "missed data": ("missed_bytes", exact),
    "truncated packets": ("truncated_packets", exact),
    "data xmit time": ("data_packets", xmit_time),
    "throughput": ("goodput_bps", throughput),
    "RTT samples": ("rtt_samples", exact),
    "RTT min": ("rtt_min_ms", rtt_min),
    "RTT max": ("rtt_max_ms", printed_ms),
    "RTT avg": ("rtt_avg_ms", rtt_avg),
    "RTT stdev": ("rtt_stdev_ms", rtt_stdev),
    "RTT from 3WHS": ("rtt_3whs_ms", printed_ms),
    "duplicate acks": ("duplicate_acks", dupacks),
    "triple dupacks": ("triple_dupacks", triple_dupacks),
}
# Not compared: "avg win adv" (tcptrace divides by a count of its own,
# docs/analysis.md) and "sacks sent" (tcptrace counts it apart from its ACK
# handling, one more than its own "sack pkts sent" on iperf_bulk_loss.pcap;
# that one is compared).

# capture -> {tcpvar field: reason}: deliberate differences (docs/analysis.md)
KNOWN = {
    "zeek__tcp__window-scale-range.pcap": {
        "window_scale": "tcpvar clamps a shift of 255 to 14; tcptrace ignores the option",
        "window_max": "tcpvar clamps a window-scale shift of 255 to 14 (RFC 7323); "
                      "tcptrace ignores the option",
        "window_min": "same: windows are scaled by 2^14 in tcpvar",
    },
    "ipv6_ext.pcap": {
        "*": "tcptrace counts IPv6 extension-header bytes as TCP payload",
    },
    "vlan.pcap": {
        "connections": "tcptrace skips frames with two VLAN tags (802.1ad QinQ)",
    },
    "pcapplusplus__example2.pcap": {
        "rtt_samples": "one ACK after a resent SYN-ACK: tcptrace samples it",
        "rtt_avg_ms": "follows from the sample above",
        "rtt_stdev_ms": "follows from the sample above",
    },
    "seq_wrap.pcap": {
        "dsack_packets": "tcptrace compares SACK edges with the ACK as plain unsigned numbers, "
                         "so after the wrap of the sequence space it takes 5 ordinary SACKs "
                         "for D-SACKs; craft.py's ground truth has 1 (test_crafted)",
    },
}
# captures tcptrace cannot read at all, and what tcpvar does instead
UNREADABLE_BY_TCPTRACE = {
    "suricata__detect-ipopts.pcap": "link type 228 (raw IPv4)",
    "sll2.pcap": "link type 276 (Linux SLL2)",
}


# tcptrace's missed data is its stream length (the FIN's sequence number
# less the SYN's, less one) less its unique bytes; in a direction that sent
# a RST it takes the highest number seen instead of the FIN's (output.c),
# which puts its count one byte off either way (2^64 - 1 for -1). tcpvar
# counts the gaps in what the capture saw, RST or not: compared only in
# directions without a RST, as is the stream length.
AFTER_RST = {"missed_bytes", "stream_bytes"}


@dataclass
class Context:
    """What a check may need beside the two figures."""
    conn: dict                  # tcpvar's connection
    mine: dict                  # its direction being compared
    acker: dict                 # the other direction, sending the ACKs
    acks: Callable[[], list[tuple]]    # the ACKs' stored packets (_acks)
    ack_rtts: Callable[[], list[int]]  # tshark's RTT samples at the ACKs (_tshark_ack_rtts)
    line: str = ""              # tcptrace's text for the figure


def _match(conns, a, b):
    """Our connection for tcptrace's endpoints a, b (first unmatched one)."""
    for c in conns:
        if not c.get("_matched") and peers.endpoint(c["a"]) == a and peers.endpoint(c["b"]) == b:
            c["_matched"] = True
            return c
    return None


# no TCP at all (tested as bad input), or mixed link types (libpcap refuses them)
NOT_ANALYSABLE = {"tcptrace__ipfrags.dmp", "pcapplusplus__many_interfaces-1.pcapng"}
CAPTURES = [p for p in OWN_CAPTURES + SHARED_CAPTURES
            if p.name not in UNREADABLE_BY_TCPTRACE and p.name not in NOT_ANALYSABLE]


def test_third_party_captures_present():
    """The whole shared collection is compared, not only the copies in
    fixtures/pcaps/thirdparty/: every capture its manifest lists is there
    (a checkout beside it finds it at ../shared/pcaps, as CI's does)."""
    assert SHARED_FOUND, (f"{SHARED} is missing: set TCPVAR_SHARED_PCAPS to the shared "
                          f"third-party captures")
    listed = [line.split("\t", 1)[0] for line in
              (SHARED / "MANIFEST.tsv").read_text().splitlines()[1:] if line.strip()]
    found = {p.name for p in SHARED_CAPTURES}
    assert len(listed) >= 20 and not [name for name in listed if name not in found]


@pytest.mark.parametrize("path", CAPTURES, ids=capture_id)
def test_agrees_with_tcptrace(path, analyzed, store, tmp_path):
    source = path
    if path.suffix == ".gz":            # tcptrace reads it too, but through libz: keep it plain
        import gzip
        source = tmp_path / path.stem
        source.write_bytes(gzip.decompress(path.read_bytes()))
    agrees(path, source, analyzed, store)


@pytest.fixture(scope="module")
def shaped(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("shapes")
    for name, write in shapes.SHAPES.items():
        write(folder / f"{name}.pcap")
    return folder


@pytest.mark.parametrize("shape", list(shapes.SHAPES))
def test_costly_shapes_agree_with_tcptrace(shape, shaped, analyzed, store):
    """One-way, resending and a hole filled after a resend (tests/shapes.py):
    the shapes whose outstanding segments tcpvar's analysis keeps apart."""
    path = shaped / f"{shape}.pcap"
    agrees(path, path, analyzed, store)


def test_retired_connections_agree_with_tcptrace(tmp_path):
    """Beyond ScanOptions.retire_above live connections, those that ended a
    second ago retire: their rows are stored while the scan goes on, their
    state freed. 400 short exchanges of 14 ms, one every 5 ms (2 s), each
    closed by a FIN each way, with retire_above=2: 175 retire, none before
    its last ACK, and every field agrees with tcptrace as it does when none
    do."""
    sys.path.insert(0, str(ROOT / "fixtures"))
    import craft  # (scapy: the packets are built as the fixtures are)

    from tcpvar.ingest import _pcapscan
    from tcpvar.ingest.reader import ScanOptions
    from tcpvar.pipelines.analyze import AnalyzeOptions, analyze_capture
    from tcpvar.store import Store

    cap = craft.Capture("retired", "short exchanges for test_vs_tcptrace")
    for k in range(400):
        conn = craft.Conn(cap, ("198.18.10.1", 30000 + k), ("198.18.20.2", 80),
                          1000 + 7 * k, 5000 + 11 * k)
        craft.short_exchange(conn, k * 5 * craft.MS)
    cap.finalize()
    path = tmp_path / "retired.pcap"
    path.write_bytes(cap.file_bytes())
    scanner = _pcapscan.Scanner(str(path), packets=False, batch_rows=64, retire_above=2)
    retired = 0
    while True:
        status, _ = scanner.step()
        gone = scanner.gone()
        retired += gone[0].rows if gone else 0
        if status != "more":
            break
    # the scanner looks every 125 ms of capture time from the third SYN on
    # (10 ms): the last look before the last packet (2.009 s), at 1.885 s,
    # retires those silent for 1 s, the exchanges started before 0.885 s
    # less their 14.4 ms (by hand, 175)
    assert 170 <= retired <= 180
    with Store(tmp_path / "t.duckdb") as store:
        options = AnalyzeOptions(scan=ScanOptions(retire_above=2))
        agrees(path, path, lambda p: analyze_capture(store, str(p), options), store)


def agrees(path: Path, source: Path, analyzed, store) -> None:
    """tcpvar's analysis of @path against tcptrace's of @source (the same
    packets), field by field (FIELDS, except what KNOWN says)."""
    theirs = peers.tcptrace(str(source))
    doc = analyzed(path)
    ours = [dict(c) for c in doc["connections"]]
    known = KNOWN.get(path.name, {})
    fields = FIELDS
    if "*" in known:                    # only the packet counts are comparable
        fields = {"total packets": FIELDS["total packets"]}
    if "connections" in known:
        assert len(ours) > len(theirs), known["connections"]
    else:
        assert len(ours) == len(theirs), "number of connections"
    problems, compared = [], 0
    for i, t in enumerate(theirs, 1):
        c = _match(ours, t["a"], t["b"])
        assert c is not None, f"tcptrace connection {i} {t['a']} -> {t['b']} not found"
        for direction, other in (("a2b", "b2a"), ("b2a", "a2b")):
            ctx = Context(c, c[direction], c[other],
                          lambda o=other, n=c["id"]: _acks(store, doc["capture_id"], n, o),
                          lambda c=c, o=other, d=direction: _tshark_ack_rtts(
                              source, c[o[0]], c[d[0]]))
            for label, (field, check) in fields.items():
                ctx.line = t[direction].get(label, "").strip()
                value = peers.number(ctx.line)
                if value is None or field in known or \
                        (field in AFTER_RST and c[direction]["rst"]):
                    continue
                mine = c[direction][field] or 0
                compared += 1
                if not check(mine, value, ctx):
                    problems.append(f"conn {i} {direction} {label!r}: tcpvar {field} {mine}, "
                                    f"tcptrace {ctx.line}")
    assert not problems, "\n".join(problems)
    assert compared >= len(theirs) * (2 if "*" in known else 60)


def _acks(store, capture_id: int, conn: int, acker: str) -> list[tuple]:
    """The packets of a direction's ACKs in order: ev, flags, ack, win, len
    and the RTT sample of the other direction's data each gave (µs)."""
    return store.con.execute(
        "SELECT ev, flags, ack, win, len, rtt_us FROM packets WHERE capture_id = $1 "
        "AND conn = $2 AND dir = $3 ORDER BY frame",
        [capture_id, conn, int(acker == "b2a")]).fetchall()


def _tshark_ack_rtts(path, acker: str, sender: str) -> list[int]:
    """tshark's RTT samples (µs) at the ACKs @acker sent to @sender, in order
    (both 'addr:port'; connections reusing the 4-tuple come together)."""
    return list(_tshark_rtts_by_ends(str(path)).get(
        (peers.endpoint(acker), peers.endpoint(sender)), []))


@functools.cache
def _tshark_rtts_by_ends(path: str) -> dict[tuple, list[int]]:
    """Every ACK's RTT sample by tshark, per (acker, sender). An ACK that
    acknowledges a segment has tcp.analysis.acks_frame; tshark leaves out
    its ack_rtt when that is 0 (frame 426 of pcapplusplus__example.pcap)."""
    out = subprocess.run(
        ["tshark", "-n", "-r", path, "-Y", "tcp.analysis.acks_frame", "-T", "fields",
         "-e", "ip.src", "-e", "ipv6.src", "-e", "tcp.srcport", "-e", "ip.dst",
         "-e", "ipv6.dst", "-e", "tcp.dstport", "-e", "tcp.analysis.ack_rtt"],
        capture_output=True, text=True, check=True).stdout
    rtts: dict[tuple, list[int]] = {}
    for line in out.splitlines():
        src4, src6, sport, dst4, dst6, dport, rtt = line.split("\t")
        # the innermost header of a tunnel is the last
        ends = (peers.endpoint(f"[{(src4 or src6).split(',')[-1]}]:{sport}"),
                peers.endpoint(f"[{(dst4 or dst6).split(',')[-1]}]:{dport}"))
        rtts.setdefault(ends, []).append(round(float(rtt or 0) * 1e6))
    return rtts


_COPIES = re.compile(r"connection (\d+) (a2b|b2a): (\d+) segments? repeats?")
_OPTIONS = re.compile(r"(\d+) TCP segments? ha(?:s|ve) (?:its|their) options cut short")


@pytest.mark.parametrize("path", CAPTURES, ids=capture_id)
def test_warns_where_tcptrace_does(path, analyzed, tmp_path):
    """The capture's warning names tcptrace's hardware duplicates, per
    connection and direction, and as many segments with options cut short
    as `tcptrace -w` reports."""
    source = path
    if path.suffix == ".gz":
        import gzip
        source = tmp_path / path.stem
        source.write_bytes(gzip.decompress(path.read_bytes()))
    doc = analyzed(path)
    warning = doc["warning"] or ""
    copies = {(int(c), d): int(n) for c, d, n in _COPIES.findall(warning)}
    expected = {}
    ours = [dict(c) for c in doc["connections"]]
    for t in peers.tcptrace(str(source)):
        c = _match(ours, t["a"], t["b"])
        for direction in ("a2b", "b2a"):
            n = peers.number(t[direction].get("hardware dups", "0"))
            if c and n:
                expected[(c["id"], direction)] = int(n)
    if "connections" not in KNOWN.get(path.name, {}):
        assert copies == expected
    options = _OPTIONS.search(warning)
    assert (int(options.group(1)) if options else 0) == \
        peers.tcptrace_option_warnings(str(source))


@pytest.mark.parametrize("name", sorted(UNREADABLE_BY_TCPTRACE))
def test_reads_what_tcptrace_cannot(name, analyzed):
    path = next(p for p in OWN_CAPTURES + SHARED_CAPTURES if p.name == name)
    doc = analyzed(path)
    assert doc["connections"], UNREADABLE_BY_TCPTRACE[name]
    assert all(c["a2b"]["packets"] + c["b2a"]["packets"] > 0 for c in doc["connections"])
