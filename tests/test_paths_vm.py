"""The paths of today in the micro-VM (Debian's kernel, virtual time): an
AQM at the bottleneck, ECN, and a different RTT per flow. Every figure is
held to an independent truth: the qdisc the kernel reports (`tc -s -j`,
kept in the run folder), tshark's reading of the captures (RTT samples,
the IP ECN field, TCP's ECE flag) and a percentile computed here."""
from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from tshark_truth import count, fields

from conftest import tcpvar_main, tcpvar_process
from run_helpers import netem_delays, queues, run_passed, side_by_side, tcpvar_run

pytestmark = pytest.mark.slow

# flows of 10 s at 10 Mbit/s: the CPU of the emulated hosts is far from
# the limit, so the queue is what holds the flows back
PATH = ("--bw", "10mbit", "--duration", 10)


def rtt_samples(run_dir: Path, flow: dict) -> list[float]:
    """tshark's RTT samples (ms) of a flow's data, at the ACKs back to its
    sender, in the sender capture."""
    rows = fields(run_dir / "sender.pcap",
                  f"tcp.srcport == {flow['dst_port']} && tcp.dstport == {flow['src_port']} "
                  f"&& tcp.analysis.ack_rtt", "tcp.analysis.ack_rtt")
    return [1e3 * float(r[0]) for r in rows]


def p95(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=20, method="inclusive")[-1]


@pytest.fixture(scope="module")
def started(tmp_path_factory):
    """The runs of this file, started together at its first test, two at a
    time (side_by_side): name -> Future of (folder, what the command gave)."""
    with side_by_side(
            tmp_path_factory,
            # two CUBIC flows at 20 and 80 ms through a 10-BDP buffer,
            # drop-tail, fq_codel and RED: one boot, three runs
            aqm=lambda tmp: tcpvar_process(
                "sweep", "--name", "aqm", "--aqm", "bfifo,fq_codel,red", "--cc", "cubic+cubic",
                "--rtt", "20+80", "--buffer", "10bdp", *PATH, "--backend", "vm", "--json", "-q",
                "--db", tmp / "t.duckdb", "--out", tmp / "runs", cwd=tmp, timeout=1800),
            # DCTCP (ECN on, as the kernel always has it) and CUBIC with ECN
            # asked for, through CoDel, which marks
            ecn=lambda tmp: tcpvar_run(
                tmp, "--backend", "vm", "--cc", "dctcp,cubic", "--ecn", "on", "--aqm", "codel",
                "--rtt", 20, "--buffer", "2bdp", *PATH),
            # a CUBIC flow at 20 ms, and one at 60 ms the other way through a
            # 5 Mbit/s reverse bottleneck; CoDel marks both ways
            reverse=lambda tmp: tcpvar_run(
                tmp, "--backend", "vm", "--cc", "cubic,cubic", "--reverse", 1, "--rtt", "20,60",
                "--bw-reverse", "5mbit", "--aqm", "codel", "--ecn", "on", "--buffer", "2bdp",
                *PATH),
            # two hops: a CUBIC flow at 30 ms through both, cross flows at
            # 20 ms (hop 1) and 60 ms (hop 2)
            parking=lambda tmp: tcpvar_run(
                tmp, "--backend", "vm", "--cc", "cubic", "--topology", "parking-lot",
                "--hops", 2, "--rtt", "30,20,60", *PATH),
    ) as runs:
        yield runs


def the_run(started, name: str):
    """(folder, the one run) of the started `tcpvar run` @name, which must have passed."""
    tmp, doc = run_passed(started[name])
    (run,) = doc["runs"]
    return tmp, run


@pytest.fixture(scope="module")
def aqm_study(started):
    tmp, r = started["aqm"].result()
    assert r.returncode == 0, r.stderr
    runs = json.loads(r.stdout)["runs"]
    assert [x["status"] for x in runs] == ["complete"] * 3
    return tmp, {x["cell"]["aqm"]: Path(x["dir"]) for x in runs}


def test_the_queue_is_the_one_asked_for(aqm_study):
    _, dirs = aqm_study
    # 10 BDP at the flows' mean RTT (50 ms) and 10 Mbit/s: 625,000 bytes,
    # 412 full frames for the queue that counts packets
    fifo, fq = queues(dirs["bfifo"])["rl"], queues(dirs["fq_codel"])["rl"]
    assert (fifo["kind"], fifo["options"]["limit"]) == ("bfifo", 625000)
    assert (fq["kind"], fq["options"]["limit"]) == ("fq_codel", 625000 // 1514)
    assert fq["options"]["target"] == 4999 and fq["options"]["ecn"] is True    # tc's defaults
    # RED's thresholds where --aqm-params leaves them: min a sixth of the
    # limit, max three times min (tc -j does not print max_p); it drops
    # before the queue is full ("early"), which a drop-tail queue never does
    red = queues(dirs["red"])["rl"]
    assert red["kind"] == "red"
    assert (red["options"]["limit"], red["options"]["min"], red["options"]["max"]) == \
        (625000, 625000 // 6, 3 * (625000 // 6))
    assert red["early"] > 0 and red["pdrop"] + red["other"] < red["early"]


def test_each_flow_has_its_own_rtt(aqm_study):
    """The kernel delays each flow's path as asked: netem's delays (tc) add
    up to its RTT, and its smallest RTT sample (tshark's) is within 10 % of
    it where a queue does not hold it. Under fq_codel a new flow's packets
    skip the queue; behind the drop-tail queue the 80 ms flow's handshake
    waits behind the 20 ms flow's slow start (35 ms more in one run), so
    there only the 20 ms flow is held to 10 %, and no flow is faster than
    its path."""
    _, dirs = aqm_study
    for aqm, run_dir in dirs.items():
        m = json.loads((run_dir / "manifest.json").read_text())
        delays = netem_delays(run_dir)
        for flow, asked in zip(m["flows"], (20, 80)):
            i = flow["flow"]
            own = delays.get(("rr", f"d{i}"), 0) + delays.get((f"d{i}", "eth0"), 0)
            assert delays[("rd", "right")] + delays[("rd", "left")] + own == \
                pytest.approx(asked), (aqm, i)
            assert flow["rtt_ms"] == asked
            low = min(rtt_samples(run_dir, flow))
            assert low >= 0.98 * asked, (aqm, i, low)
            if aqm == "fq_codel" or asked == 20:
                assert low <= 1.1 * asked, (aqm, i, low)


def test_fq_codel_keeps_the_delay_down(aqm_study):
    """With a 10-BDP buffer the drop-tail queue fills and every packet
    waits; fq_codel keeps the 95th percentile of the RTT below half of
    drop-tail's. Compare prints the two side by side, with the percentile
    tshark's samples give."""
    tmp, dirs = aqm_study
    tails = {}
    for aqm, run_dir in dirs.items():
        if aqm == "red":
            continue
        m = json.loads((run_dir / "manifest.json").read_text())
        tails[aqm] = p95([x for f in m["flows"] for x in rtt_samples(run_dir, f)])
    assert tails["fq_codel"] < 0.5 * tails["bfifo"], tails
    r = tcpvar_main("compare", "--study", "aqm", "--by", "aqm", "--json",
                    "--db", tmp / "t.duckdb", cwd=tmp)
    assert r.returncode == 0, r.stderr
    groups = {g["key"]["aqm"]: g for g in json.loads(r.stdout)["groups"]}
    for aqm, tail in tails.items():
        # tcpvar's percentile is over every sample of the run, interpolated
        # as DuckDB's quantile_cont; tshark's samples are the same
        assert groups[aqm]["mean"]["rtt_p95_ms"] == pytest.approx(tail, rel=0.02), aqm
    r = tcpvar_main("compare", "--study", "aqm", "--by", "aqm", "--db", tmp / "t.duckdb",
                    cwd=tmp)
    assert "RTT p95 ms" in r.stdout and "bfifo" in r.stdout and "fq_codel" in r.stdout


@pytest.fixture(scope="module")
def ecn_run(started):
    return the_run(started, "ecn")


def test_codel_marks_and_the_capture_sees_the_marks(ecn_run):
    """CoDel's own count of ECN marks, the CE-marked packets tshark finds in
    the bottleneck capture (taken after the queue), and tcpvar's count agree;
    a packet the capture's buffer lost is the only excuse. Per flow, tshark's
    count on the flow's ports is the summary's (the rest, a packet or two,
    is the iperf3 control connections', ECN-capable too)."""
    tmp, run = ecn_run
    run_dir = Path(run["dir"])
    q = queues(run_dir)["rl"]
    assert q["kind"] == "codel" and q["options"]["ecn"] is True
    marks = q["ecn_mark"]
    assert marks > 20, "the queue never marked: nothing was tested"
    ports = fields(run_dir / "bottleneck.pcap", "ip.dsfield.ecn == 3", "tcp.srcport",
                   "tcp.dstport")
    seen = len(ports)
    lost = run["fidelity"]["capture"]["drops"] or 0
    assert marks - lost <= seen <= marks
    for f in run["flows"]:
        src, dst = (x.rsplit(":", 1)[1] for x in (f["src"], f["dst"]))
        assert f["ecn"]["ce_packets"] == ports.count([src, dst]) > 0, f["cc"]
    assert run["bottleneck"]["counters"]["ecn_mark"] == marks
    r = tcpvar_main("compare", "--run", run["run_id"], "--by", "aqm", "--json",
                    "--db", tmp / "t.duckdb", cwd=tmp)
    (g,) = json.loads(r.stdout)["groups"]
    assert (g["mean"]["bottleneck_marks"], g["mean"]["ce_packets"]) == (marks, seen)


def test_each_sender_hears_its_marks(ecn_run):
    """Per flow: the ACKs carrying ECE in the sender capture (tshark's count)
    are tcpvar's, and each sender answered with CWR."""
    _, run = ecn_run
    run_dir = Path(run["dir"])
    m = json.loads((run_dir / "manifest.json").read_text())
    for flow, summary in zip(m["flows"], run["flows"]):
        assert flow["ecn"] is True and summary["ecn"]["asked"] is True
        ece = fields(run_dir / "sender.pcap",
                     f"tcp.srcport == {flow['dst_port']} && tcp.dstport == {flow['src_port']} "
                     f"&& tcp.flags.ece == 1", "frame.number")
        assert summary["ecn"]["ece_packets"] == len(ece) > 1, flow["cc"]
        assert summary["ecn"]["cwr_packets"] > 0, flow["cc"]


@pytest.fixture(scope="module")
def reverse_run(started):
    return the_run(started, "reverse")


def test_a_reverse_flow_has_its_own_rtt(reverse_run):
    """A reverse flow's own delay lies beyond its sender's capture (on rl's
    link to s<i> and back), so the capture at rr sees its whole RTT, as
    rl's sees a forward flow's; netem's delays (tc) add up to it."""
    _, run = reverse_run
    run_dir = Path(run["dir"])
    m = json.loads((run_dir / "manifest.json").read_text())
    delays = netem_delays(run_dir)
    shared = delays[("rd", "right")] + delays[("rd", "left")]
    assert shared + delays[("rl", "s2")] + delays[("s2", "eth0")] == pytest.approx(60)
    for flow, asked in zip(m["flows"], (20, 60)):
        low = min(rtt_samples(run_dir, flow))
        assert 0.98 * asked <= low <= 1.1 * asked, (flow["direction"], low)


def test_the_reverse_queue_marks_the_reverse_data(reverse_run):
    """Each CoDel counts its own marks; bottleneck.pcap holds what left
    both, so the CE-marked packets toward the senders' side (tshark) are
    the reverse queue's marks, and the reverse flow's in tcpvar's summary."""
    _, run = reverse_run
    run_dir = Path(run["dir"])
    q = queues(run_dir)
    assert q["rr"]["kind"] == "codel" and q["rr"]["options"]["ecn"] is True
    lost = run["fidelity"]["capture"]["drops"] or 0
    for router, net, flow in (("rl", "198.19", run["flows"][0]),
                              ("rr", "198.18", run["flows"][1])):
        marks = q[router]["ecn_mark"]
        seen = count(run_dir / "bottleneck.pcap", f"ip.dsfield.ecn == 3 && ip.dst == {net}.0.0/16")
        assert marks > 5 and marks - lost <= seen <= marks, (router, marks, seen)
        assert flow["ecn"]["ce_packets"] == seen, router
    assert run["reverse_bottleneck"]["counters"]["ecn_mark"] == q["rr"]["ecn_mark"]


@pytest.fixture(scope="module")
def parking_lot(started):
    return the_run(started, "parking")


def test_each_flow_of_the_parking_lot_has_its_own_rtt(parking_lot):
    """The flow through every hop is delayed on rd (the smallest RTT asked,
    the rest on its receiver's links at rr), a cross flow wholly on its
    receiver's links at the router after its hop: netem's delays, as tc
    reports them, add up to each flow's RTT, and each flow's smallest RTT
    sample (tshark's, in the sender capture) is within 10 % of its own."""
    _, run = parking_lot
    run_dir = Path(run["dir"])
    m = json.loads((run_dir / "manifest.json").read_text())
    delays = netem_delays(run_dir)
    assert delays[("rd", "right")] + delays[("rd", "left")] + delays[("rr", "d1")] + \
        delays[("d1", "eth0")] == pytest.approx(30)
    for i, router, asked in ((2, "p1", 20), (3, "p2", 60)):
        assert delays[(router, f"d{i}")] + delays[(f"d{i}", "eth0")] == pytest.approx(asked)
    for flow, asked in zip(m["flows"], (30, 20, 60)):
        assert flow["rtt_ms"] == asked
        low = min(rtt_samples(run_dir, flow))
        assert 0.98 * asked <= low <= 1.1 * asked, (flow["flow"], low)
    assert run["fidelity"]["rtt"]["status"] == "pass"
    assert [h["queue"]["qdisc"] for h in run["hops"]] == ["bfifo", "bfifo"]
