"""Per connection and direction, tcpvar agrees with `tcptrace -l -r -n` run
on the same capture (and, in test_vs_tshark.py, with tshark's conversation
counts). Where tcpvar differs on purpose, KNOWN lists the capture and why;
docs/analysis.md explains each difference in full."""
from __future__ import annotations

import re
import warnings

import pytest

import peers
from conftest import OWN_CAPTURES, SHARED, SHARED_CAPTURES, SHARED_FOUND, capture_id

# tcptrace line -> (tcpvar field, tolerance: absolute, relative)
EXACT = (0, 0.0)
FIELDS = {
    "total packets": ("packets", EXACT),
    "actual data pkts": ("data_packets", EXACT),
    "actual data bytes": ("data_bytes", EXACT),
    "unique bytes sent": ("unique_bytes", EXACT),
    "rexmt data pkts": ("retransmitted_packets", EXACT),
    "rexmt data bytes": ("retransmitted_bytes", EXACT),
    "outoforder pkts": ("out_of_order_packets", EXACT),
    "missed data": ("missed_bytes", EXACT),
    "pure acks sent": ("pure_acks", EXACT),
    "sack pkts sent": ("sack_packets", EXACT),
    "zero win adv": ("zero_window_adverts", EXACT),
    "zwnd probe pkts": ("zero_window_probes", EXACT),
    "max win adv": ("window_max", EXACT),
    "min win adv": ("window_min", EXACT),
    "duplicate acks": ("duplicate_acks", None),        # see _dupacks_agree
    "RTT samples": ("rtt_samples", (1, 0.01)),
    # tcptrace prints 0.1 ms resolution and divides by n + 0.0001
    "RTT avg": ("rtt_avg_ms", (0.15, 0.01)),
}

# capture -> {tcpvar field: reason}: deliberate differences (docs/analysis.md)
KNOWN = {
    "zeek__tcp__window-scale-range.pcap": {
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
# directions without a RST.


def _dupacks_agree(ours: int, theirs: float, acker: dict) -> bool:
    """tcptrace also counts a FIN or SYN that repeats the previous ACK and
    window; tcpvar follows RFC 5681 and does not. So tcptrace's count may
    exceed tcpvar's by at most the FINs and SYNs of the side sending the ACKs."""
    return 0 <= theirs - ours <= acker["fin"] + acker["syn"]


def _close(ours, theirs, tol) -> bool:
    absolute, relative = tol
    return abs(ours - theirs) <= max(absolute, relative * abs(theirs))


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
    assert len(SHARED_CAPTURES) >= 20
    if not SHARED_FOUND:
        warnings.warn(f"only the copied third-party captures were compared: {SHARED} is "
                      f"missing (set TCPVAR_SHARED_PCAPS to the whole collection)", stacklevel=1)


@pytest.mark.parametrize("path", CAPTURES, ids=capture_id)
def test_agrees_with_tcptrace(path, analyzed, tmp_path):
    source = path
    if path.suffix == ".gz":            # tcptrace reads it too, but through libz: keep it plain
        import gzip
        source = tmp_path / path.stem
        source.write_bytes(gzip.decompress(path.read_bytes()))
    theirs = peers.tcptrace(str(source))
    ours = [dict(c) for c in analyzed(path)["connections"]]
    known = KNOWN.get(path.name, {})
    fields = FIELDS
    if "*" in known:                    # only the packet counts are comparable
        fields = {"total packets": FIELDS["total packets"]}
    if "connections" in known:
        assert len(ours) > len(theirs), known["connections"]
    else:
        assert len(ours) == len(theirs), "number of connections"
    problems = []
    for i, t in enumerate(theirs, 1):
        c = _match(ours, t["a"], t["b"])
        assert c is not None, f"tcptrace connection {i} {t['a']} -> {t['b']} not found"
        for direction in ("a2b", "b2a"):
            for label, (field, tol) in fields.items():
                value = peers.number(t[direction].get(label, ""))
                if value is None or field in known:
                    continue
                mine = c[direction][field] or 0
                if field == "missed_bytes" and c[direction]["rst"]:
                    continue    # tcptrace's stream then ends at a RST's number (above)
                if field == "duplicate_acks":   # counted for the sender, sent by the other side
                    ok = _dupacks_agree(mine, value, c["b2a" if direction == "a2b" else "a2b"])
                else:
                    ok = _close(mine, value, tol)
                if not ok:
                    problems.append(
                        f"conn {i} {direction} {field}: tcpvar {mine}, tcptrace {value}")
    assert not problems, "\n".join(problems)


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
