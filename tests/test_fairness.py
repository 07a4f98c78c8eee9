"""Jain's index and friendliness: hand-computed cases from the paper's
tables, and the per-interval index computed in SQL checked against the same
formula applied to the stored throughput series."""
from __future__ import annotations

import math

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


def test_fairness_of_four_real_flows(store, analyzed):
    doc = analyzed(FIXTURES / "iperf_4flows.pcap", fairness=True)
    result = doc["fairness"]
    # iperf3's two control connections carry a few hundred bytes: not flows
    assert len(result["flows"]) == 4
    assert {f["conn"] for f in result["flows"]} <= {c["id"] for c in doc["connections"]}
    assert result["jain"] == pytest.approx(
        fairness.jain(f["goodput_bps"] for f in result["flows"]))
    # per interval: the SQL result equals the formula on the stored series
    con, cid = store.con, doc["capture_id"]
    chosen = [(f["conn"], f["dir"]) for f in result["flows"]]
    assert result["intervals"]
    for interval in result["intervals"]:
        xs = []
        for conn, direction in chosen:
            row = con.execute("SELECT goodput_bps FROM throughput WHERE capture_id = $1 AND "
                              "conn = $2 AND dir = $3 AND bin = $4",
                              [cid, conn, direction, interval["bin"]]).fetchone()
            xs.append(row[0] if row else 0.0)
        assert interval["jain"] == pytest.approx(fairness.jain(xs))
    assert 0 < result["jain_intervals_min"] <= result["jain_intervals_mean"] <= 1


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
    doc = analyzed(FIXTURES / "iperf_4flows.pcap", fairness=True)
    flows = doc["fairness"]["flows"]
    result = fairness.fairness(store.con, doc["capture_id"], doc["connections"],
                               pair=(flows[0]["conn"], flows[1]["conn"]))
    expected = fairness.friendliness(flows[0]["goodput_bps"], flows[1]["goodput_bps"])
    assert result["friendliness"]["ratio"] == pytest.approx(expected["ratio"])
