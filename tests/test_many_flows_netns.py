"""More flows than ports below the client offset (49) and than the hook's
old port list (32), on the host kernel: 64 CUBIC flows, the last 8 the
other way. Truth: iperf3's reports, tshark on the captures and the
recorder's own file."""
from __future__ import annotations

import csv
import json
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from run_helpers import tcpvar_run

FLOWS, REVERSE = 64, 8


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("many")
    rc, doc, err = tcpvar_run(tmp, "--backend", "netns", "--cc", "cubic", "--flows", FLOWS,
                              "--reverse", REVERSE, "--rtt", 0, "--bw", "20mbit",
                              # a queue for 64 initial windows: with 200 packets,
                              # the slow starts at once overflowed it, and a flow
                              # whose first segments were lost on RTOs backed off
                              # to seconds had sent nothing in 10 s (a CI run)
                              "--buffer", 1000, "--duration", 10)
    assert rc == 0, err
    (run,) = doc["runs"]
    return run


def test_every_flow_ran_where_the_manifest_says(many):
    run_dir = Path(many["dir"])
    m = json.loads((run_dir / "manifest.json").read_text())
    assert len(m["flows"]) == FLOWS
    seen = set()
    for f in m["flows"]:
        report = json.loads((run_dir / f"iperf-{f['flow']}.json").read_text())
        (conn,) = report["start"]["connected"]
        ends = ((conn["local_host"], conn["local_port"]),
                (conn["remote_host"], conn["remote_port"]))
        assert ends == ((f["src_addr"], f["src_port"]), (f["dst_addr"], f["dst_port"]))
        assert report["end"]["sum_received"]["bytes"] > 0
        seen |= set(ends)
    assert len(seen) == 2 * FLOWS          # no address and port twice
    assert [f["direction"] for f in m["flows"]].count("reverse") == REVERSE


def test_the_probe_records_every_flow(many):
    """The hook's filter holds all 64 servers' ports: each sender socket's
    events are there, about one per ACK it received in the established
    state (tshark's count of the ACKs entering its first router; the probe
    counts what it lost). The SYN-ACK and RSTs do not reach
    tcp_rcv_established: counted, a flow starved to a few segments had 7
    ACKs and 3 events (a CI run). Fewer events than ACKs remain where the
    kernel merged pure ACKs queued in a busy socket's backlog
    (tcp_add_backlog): a burst of 15 in a flow's first 2 ms gave one."""
    run_dir = Path(many["dir"])
    with open(run_dir / "tcp_probe.csv", newline="") as f:
        events = Counter((r["saddr"], int(r["sport"])) for r in csv.DictReader(f))
    acks_established = "tcp.len == 0 && tcp.flags.syn == 0 && tcp.flags.reset == 0"
    out = subprocess.run(["tshark", "-r", str(run_dir / "sender.pcap"), "-Y", acks_established,
                          "-T", "fields", "-e", "ip.dst", "-e", "tcp.dstport"],
                         capture_output=True, text=True, check=True).stdout
    acks = Counter((a, int(p)) for a, p in (line.split("\t") for line in out.splitlines()))
    m = json.loads((run_dir / "manifest.json").read_text())
    for f in m["flows"]:
        sender = (f["src_addr"], f["src_port"])
        assert 0.5 * acks[sender] < events[sender] <= acks[sender] + 5, (f["flow"], sender)
    assert many["probe_events"] == sum(events.values())


def test_jain_is_over_the_flows_of_each_bottleneck(many):
    """Jain's index by hand over iperf3's own rates (its reports'
    sum_received): the summary's is the forward flows', and the reverse
    flows' is their own; all 64 together would be neither."""
    run_dir = Path(many["dir"])
    m = json.loads((run_dir / "manifest.json").read_text())
    rates: dict[str, list[float]] = {"forward": [], "reverse": []}
    for f in m["flows"]:
        report = json.loads((run_dir / f"iperf-{f['flow']}.json").read_text())
        rates[f["direction"]].append(report["end"]["sum_received"]["bits_per_second"])

    def jain(xs):
        return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))

    assert many["jain"]["iperf3"] == pytest.approx(jain(rates["forward"]), rel=1e-9)
    assert many["jain_reverse"]["iperf3"] == pytest.approx(jain(rates["reverse"]), rel=1e-9)
    assert jain(rates["forward"] + rates["reverse"]) != pytest.approx(many["jain"]["iperf3"])
