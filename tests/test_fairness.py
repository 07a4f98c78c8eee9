"""Jain's index and friendliness: hand-computed cases from the paper's
tables, and on a real capture of four iperf3 flows, the whole-run and
per-interval index and a pair's friendliness recomputed by hand from
tshark's sequence numbers."""
from __future__ import annotations

import math

import pytest

import tshark_truth as truth
from tcpvar.analyzers import fairness

import peers
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


def _sender_of(flow: dict) -> truth.Sender:
    host, _, port = flow["sender"].rpartition(":")
    return host.strip("[]"), int(port)


def test_fairness_of_four_real_flows(analyzed):
    """Jain's index over the four iperf3 flows, whole and per 100 ms
    interval, as tshark's sequence numbers give them: goodput = sequence
    space covered over the connection's first to last packet; per interval,
    the bytes of the segments that send nothing twice (tcpvar's series)."""
    path = FIXTURES / "iperf_4flows.pcap"
    result = analyzed(path, fairness=True)["fairness"]
    cap = truth.read(path)
    # iperf3's two control connections carry a few hundred bytes: not flows
    bulk = [k for k, v in cap.segments.items() if sum(n for _, _, n in v) > 10**6]
    assert len(bulk) == 4
    assert sorted(_sender_of(f) for f in result["flows"]) == sorted(bulk)
    goodput = {k: 8 * truth.sent_once(cap.segments[k]) / cap.elapsed_s(k) for k in bulk}
    for f in result["flows"]:
        assert f["goodput_bps"] == pytest.approx(goodput[_sender_of(f)], rel=1e-9)
    assert result["jain"] == pytest.approx(truth.jain(goodput.values()), rel=1e-9)

    want = truth.interval_jain(cap, bulk, 100_000_000)
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
    cap = truth.read(path)
    rate = [8 * truth.sent_once(cap.segments[_sender_of(f)]) / cap.elapsed_s(_sender_of(f))
            for f in flows[:2]]
    assert result["friendliness"]["ratio"] == pytest.approx(rate[0] / rate[1], rel=1e-9)
    assert result["friendliness"]["percent_difference"] == pytest.approx(
        abs(rate[0] - rate[1]) / min(rate) * 100, rel=1e-9)


def _flow_key(conn: dict, flow: dict) -> tuple[truth.Sender, truth.Sender]:
    ends = [conn["a"], conn["b"]] if flow["dir"] == 0 else [conn["b"], conn["a"]]
    return tuple(peers.endpoint(e) for e in ends)


@pytest.mark.parametrize("name, interval_ms, pair", [
    ("iperf_4flows.pcap", 100, (4, 3)),     # a bulk flow and iperf3's control connection
    ("iperf_4flows.pcap", 100, (4, 2)),     # two bulk flows
    ("vlan.pcap", 1, (2, 1)),               # two transfers, one after the other
])
def test_warns_of_flows_apart(analyzed, name, interval_ms, pair):
    """--pair warns when the flows send together in fewer than half of the
    intervals in which the less active one sends, and --fairness when no
    interval has every flow sending; tshark's data segments are the truth."""
    path = FIXTURES / name
    doc = analyzed(path, fairness=True, interval_ms=interval_ms, conns=pair, pair=pair)
    conns = {c["id"]: c for c in doc["connections"]}
    by_conn = {f["conn"]: f for f in doc["fairness"]["flows"]}
    sends = truth.data_bins(path, int(interval_ms * 1e6))
    a, b = (sends[_flow_key(conns[i], by_conn[i])] for i in pair)
    together, fewer = len(a & b), min(len(a), len(b))
    warnings = doc["fairness"]["warnings"]
    apart = [w for w in warnings if "send data together" in w]
    if together < fewer / 2:
        assert apart == [f"connections {pair[0]} and {pair[1]} send data together in "
                         f"{together} of the {fewer} intervals in which the less active one "
                         f"sends: their friendliness compares different periods"]
    else:
        assert not apart
    assert any("no interval has every chosen flow" in w for w in warnings) == \
        (max(min(a), min(b)) > min(max(a), max(b)))
