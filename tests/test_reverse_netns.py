"""Reverse and asymmetric traffic on the host kernel (netns backend): a
forward Reno flow at 10 Mbit/s against a reverse CUBIC flow through a
5 Mbit/s reverse bottleneck, where the forward flow's ACKs queue behind
the reverse flow's data. Truth: tc's own counters, iperf3's reports and
tshark on the captures."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tshark_truth import count

from run_helpers import close, queues, socket_retransmissions, tcpvar_run

BW, BW_REVERSE = 10e6, 5e6


@pytest.fixture(scope="module")
def reverse_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("reverse")
    rc, doc, err = tcpvar_run(tmp, "--backend", "netns", "--cc", "reno,cubic", "--reverse", 1,
                              "--rtt", 0, "--bw", "10mbit", "--bw-reverse", "5mbit",
                              "--buffer", 40, "--duration", 6)
    assert rc == 0, err
    (run,) = doc["runs"]
    return tmp, run


def test_the_reverse_flow_sends_from_the_receivers_side(reverse_run):
    """iperf3's own report says where each client sent from and to, and how
    fast; the summary names the direction."""
    _, run = reverse_run
    run_dir = Path(run["dir"])
    assert [f["direction"] for f in run["flows"]] == ["forward", "reverse"]
    for f in run["flows"]:
        report = json.loads((run_dir / f"iperf-{f['flow']}.json").read_text())
        (conn,) = report["start"]["connected"]
        assert f"{conn['local_host']}:{conn['local_port']}" == f["src"]
        assert f"{conn['remote_host']}:{conn['remote_port']}" == f["dst"]
    fwd, rev = run["flows"]
    assert fwd["src"].startswith("198.18.") and rev["src"].startswith("198.19.")
    # each at most its own bottleneck's rate, and the reverse one kept busy
    assert fwd["throughput_bps"]["iperf3"] <= BW
    assert 0.7 * BW_REVERSE < rev["throughput_bps"]["iperf3"] <= BW_REVERSE
    for f in run["flows"]:
        tp = f["throughput_bps"]
        assert close(tp["iperf3"], tp["pcap"], 0.05), tp
    assert run["reverse_bottleneck"]["qdisc"] == "pfifo"


def test_each_bottleneck_sent_what_its_capture_holds(reverse_run):
    """bottleneck.pcap holds what left either queue: toward the receivers
    (198.19/16) the forward queue's, toward the senders (198.18/16) the
    reverse queue's, packet for packet as tc counted them (the neighbours
    are permanent, so no ARP passes). The reverse flow's data that entered
    rr (its sender capture) and never left are among the reverse queue's
    drops, beside forward ACKs it dropped."""
    _, run = reverse_run
    run_dir = Path(run["dir"])
    q = queues(run_dir)
    assert set(q) == {"rl", "rr"}
    pcap = run_dir / "bottleneck.pcap"
    assert count(pcap, "ip.dst == 198.19.0.0/16") == q["rl"]["packets"]
    assert count(pcap, "ip.dst == 198.18.0.0/16") == q["rr"]["packets"]
    rev = run["flows"][1]
    port = rev["dst"].rsplit(":", 1)[1]
    data = f"tcp.dstport == {port} && tcp.len > 0"
    lost = count(run_dir / "sender.pcap", data) - count(pcap, data)
    assert 0 < lost <= q["rr"]["drops"], (lost, q["rr"]["drops"])
    assert run["reverse_bottleneck"]["drops"] == q["rr"]["drops"]


def test_every_flow_is_captured_once_at_its_sender(reverse_run):
    """Merged, the sender capture holds each flow once: its retransmissions
    are its socket's (tcp_probe's, and tshark's after tcp_probe's last
    event), as in a forward-only run; a flow seen twice would have every
    segment counted again."""
    _, run = reverse_run
    for f in run["flows"]:
        truth = socket_retransmissions(Path(run["dir"]), int(f["src"].rsplit(":", 1)[1]))
        assert f["retransmitted_packets"] == truth > 0, (f, truth)


def test_each_bottleneck_is_checked_at_its_own_rate(reverse_run):
    """The fidelity check measures each queue from its own departures,
    though the bottleneck capture holds both and ACKs share each: HTB's
    rate, as asked, the forward one's at --bw and the reverse one's at
    --bw-reverse."""
    _, run = reverse_run
    b = run["fidelity"]["bottleneck"]
    assert b["status"] == "pass", b
    steps = {s["queue"]: s for s in b["steps"]}
    assert set(steps) == {"forward", "reverse"}
    for queue, asked in (("forward", BW), ("reverse", BW_REVERSE)):
        s = steps[queue]
        assert s["asked_bps"] == asked and s["status"] == "pass", s
        assert close(s["bps"], asked, 0.03), s
