"""Jain's index and friendliness: hand-computed cases from the paper's
tables, and on a real capture of four iperf3 flows, the whole-run and
per-interval index and a pair's friendliness recomputed by hand from
tshark's sequence numbers."""
from __future__ import annotations

import bisect
import math
import subprocess

import pytest

from tcpvar.analyzers import fairness

from conftest import FIXTURES


def test_jain_table8_reno():
    # Callegari et al. Table 8: Reno, 234.63 and 211.2 Mbit/s -> J = 0.99
    j = fairness.jain([234.63, 211.2])
    assert j == pytest.approx((234.63 + 211.2) ** 2 / (2 * (234.63**2 + 211.2**2)))
    assert j == pytest.approx(0.99725, abs=1e-5)
    assert math.floor(j * 100) / 100 == 0.99          # the paper truncates to 2 digits


def test_jain_table8_vegas_and_limits():
    assert fairness.jain([303.44, 165.40]) == pytest.approx(0.920, abs=5e-4)
    assert fairness.jain([100, 100, 100]) == 1.0
    assert fairness.jain([100, 0]) == 0.5               # 1/n when one flow starves
    assert fairness.jain([]) is None
    assert fairness.jain([0, 0]) is None


def test_friendliness_table10():
    # YeAH: Reno 216.17, YeAH 220.10 Mbit/s: "a difference of about 2%"
    yeah = fairness.friendliness(220.10, 216.17)
    assert yeah["ratio"] == pytest.approx(220.10 / 216.17)
    assert yeah["percent_difference"] == pytest.approx(1.818, abs=1e-3)
    # Vegas: Reno 583.38, Vegas 43.42: "a difference of about 1300%"
    vegas = fairness.friendliness(43.42, 583.38)
    assert vegas["ratio"] == pytest.approx(0.07443, abs=1e-5)
    assert vegas["percent_difference"] == pytest.approx(1243.6, abs=0.1)


def _tshark_segments(path):
    """tshark's view of a capture: its first record's time (ns); per
    (source address, source port) the data segments as (time ns, relative
    sequence number, payload bytes) in capture order; and per sender the
    time from its connection's first packet to its last, either direction
    (seconds)."""
    out = subprocess.run(["tshark", "-r", str(path), "-T", "fields", "-e", "frame.time_epoch",
                          "-e", "ip.src", "-e", "tcp.srcport", "-e", "ip.dst", "-e",
                          "tcp.dstport", "-e", "tcp.seq", "-e", "tcp.len"],
                         capture_output=True, text=True, check=True).stdout
    first, by_sender, span = None, {}, {}
    for line in out.splitlines():
        t, src, sport, dst, dport, seq, n = line.split("\t")
        secs, _, frac = t.partition(".")
        ns = int(secs) * 10**9 + int(frac.ljust(9, "0")[:9])
        first = ns if first is None else first
        if not sport:               # not TCP over IPv4
            continue
        conn = frozenset({(src, int(sport)), (dst, int(dport))})
        lo, hi = span.get(conn, (ns, ns))
        span[conn] = (min(lo, ns), max(hi, ns))
        if n and int(n) > 0:
            by_sender.setdefault((src, int(sport)), []).append((ns, int(seq), int(n)))
    duration = {}
    for k in by_sender:
        lo, hi = next(v for c, v in span.items() if k in c)
        duration[k] = (hi - lo) / 1e9
    return first, by_sender, duration


def _new_data(segs):
    """Each segment with whether it carries only bytes never sent before
    (a segment overlapping earlier ones is a retransmission, whole)."""
    starts, ends = [], []           # disjoint ranges sent so far, sorted
    for t, seq, n in segs:
        i = bisect.bisect_right(starts, seq)
        fresh = (i == 0 or ends[i - 1] <= seq) and (i == len(starts) or starts[i] >= seq + n)
        lo, hi, j = seq, seq + n, i
        if i and ends[i - 1] >= seq:            # merge with the range before
            i -= 1
            lo = starts[i]
        while j < len(starts) and starts[j] <= hi:
            hi = max(hi, ends[j])
            j += 1
        starts[i:j], ends[i:j] = [lo], [max(hi, ends[i] if i < j else hi)]
        yield t, seq, n, fresh


def _covered_bytes(segs) -> int:
    total, end = 0, None
    for _, seq, n in sorted(segs, key=lambda s: s[1]):
        start = seq if end is None else max(seq, end)
        total += max(0, seq + n - start)
        end = seq + n if end is None else max(end, seq + n)
    return total


def _hand_jain(xs) -> float:
    xs = list(xs)
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))


def _sender_of(flow: dict) -> tuple:
    host, _, port = flow["sender"].rpartition(":")
    return host.strip("[]"), int(port)


def test_fairness_of_four_real_flows(analyzed):
    """Jain's index over the four iperf3 flows, whole and per 100 ms
    interval, as tshark's sequence numbers give them: goodput = sequence
    space covered over the connection's first to last packet; per interval,
    the bytes of the segments that send nothing twice (tcpvar's series)."""
    path = FIXTURES / "iperf_4flows.pcap"
    doc = analyzed(path, fairness=True)
    result = doc["fairness"]
    first, by_sender, duration = _tshark_segments(path)
    # iperf3's two control connections carry a few hundred bytes: not flows
    bulk = {k: v for k, v in by_sender.items() if sum(n for _, _, n in v) > 10**6}
    assert len(bulk) == 4
    assert sorted(_sender_of(f) for f in result["flows"]) == sorted(bulk)
    goodput = {k: 8 * _covered_bytes(v) / duration[k] for k, v in bulk.items()}
    for f in result["flows"]:
        assert f["goodput_bps"] == pytest.approx(goodput[_sender_of(f)], rel=1e-9)
    assert result["jain"] == pytest.approx(_hand_jain(goodput.values()), rel=1e-9)

    bin_ns = 100_000_000
    bins = {k: {} for k in bulk}
    for k, segs in bulk.items():
        for t, _, n, fresh in _new_data(segs):
            b = (t - first) // bin_ns
            bins[k][b] = bins[k].get(b, 0) + (n if fresh else 0)
    # the intervals every flow sent data in, from the latest start to the earliest end
    lo = max(min(v) for v in bins.values())
    hi = min(max(v) for v in bins.values())
    want = {b: _hand_jain(8 * bins[k].get(b, 0) / 0.1 for k in bulk) for b in range(lo, hi + 1)}
    got = {i["bin"]: i["jain"] for i in result["intervals"]}
    assert got.keys() == want.keys() and len(got) > 10
    for b in want:
        assert got[b] == pytest.approx(want[b], rel=1e-9), b
    values = list(want.values())
    assert result["jain_intervals_min"] == pytest.approx(min(values), rel=1e-9)
    assert result["jain_intervals_mean"] == pytest.approx(sum(values) / len(values), rel=1e-9)


def test_throughput_series_adds_up(store, analyzed):
    """The series' bytes sum to the connection's data bytes, per direction."""
    doc = analyzed(FIXTURES / "iperf_4flows.pcap", fairness=True)
    for conn in doc["connections"]:
        for d, direction in enumerate(("a2b", "b2a")):
            total = store.con.execute(
                "SELECT coalesce(sum(bytes), 0) FROM throughput WHERE capture_id = $1 "
                "AND conn = $2 AND dir = $3", [doc["capture_id"], conn["id"], d]).fetchone()[0]
            assert total == conn[direction]["data_bytes"]


def test_pair_friendliness(store, analyzed):
    """--pair A:B: A's goodput over B's, from tshark's sequence numbers."""
    path = FIXTURES / "iperf_4flows.pcap"
    doc = analyzed(path, fairness=True)
    flows = doc["fairness"]["flows"]
    result = fairness.fairness(store.con, doc["capture_id"], doc["connections"],
                               pair=(flows[0]["conn"], flows[1]["conn"]))
    _, by_sender, duration = _tshark_segments(path)
    rate = [8 * _covered_bytes(by_sender[_sender_of(f)]) / duration[_sender_of(f)]
            for f in flows[:2]]
    assert result["friendliness"]["ratio"] == pytest.approx(rate[0] / rate[1], rel=1e-9)
    assert result["friendliness"]["percent_difference"] == pytest.approx(
        abs(rate[0] - rate[1]) / min(rate) * 100, rel=1e-9)
