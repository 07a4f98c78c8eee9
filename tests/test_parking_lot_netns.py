"""A parking lot on the host kernel (netns backend): three 10 Mbit/s hops in
a row, one Reno flow through all of them and one cross flow entering and
leaving at each hop. Truth: tc's own counters of every hop, iperf3's
reports and tshark on the hops' captures."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import tshark_truth
from tshark_truth import count, fields

from run_helpers import close, queues, tcpvar_run

BW, HOPS, BUFFER = 10e6, 3, 40
ROUTERS = ("rl", "p1", "p2")        # hop k's queue is on the k-th


@pytest.fixture(scope="module")
def parking_lot(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("parking")
    rc, doc, err = tcpvar_run(tmp, "--backend", "netns", "--cc", "reno", "--topology",
                              "parking-lot", "--hops", HOPS, "--rtt", 0, "--bw", "10mbit",
                              "--buffer", BUFFER, "--duration", 6)
    assert rc == 0, err
    (run,) = doc["runs"]
    return tmp, run


def data_senders(path: Path) -> set[str]:
    """The source addresses of the data segments in @path (tshark): each
    flow's host, its iperf3 control connection's too."""
    return {src for src, in fields(path, "tcp.len > 0", "ip.src")}


def port(endpoint: str) -> int:
    return int(endpoint.rsplit(":", 1)[1])


def host(endpoint: str) -> str:
    return endpoint.rsplit(":", 1)[0]


def test_each_hop_has_the_queue_asked_for(parking_lot):
    """Every hop's router has the rate limiter and the pfifo of --buffer
    (tc's own words in tc-stats.txt), and the summary names them."""
    _, run = parking_lot
    run_dir = Path(run["dir"])
    q = queues(run_dir)
    assert set(q) == set(ROUTERS)
    assert all(x["kind"] == "pfifo" and x["options"]["limit"] == BUFFER for x in q.values())
    text = (run_dir / "tc-stats.txt").read_text()
    for router in ROUTERS:
        assert f"-{router} right class" in text
    assert [(h["hop"], h["router"], h["queue"]["qdisc"]) for h in run["hops"]] == \
        [(k + 1, r, "pfifo") for k, r in enumerate(ROUTERS)]


def test_the_flows_are_the_parking_lots(parking_lot):
    """Flow 1 crosses every hop; flows 2-4 are the cross flows of hops 1-3,
    each seen in its own hop's capture only; the flow through every hop
    carries less than each cross flow, which shares one queue with it.
    Each flow's capture rate is what tshark sees it send once over its
    first to last data segment. iperf3 counts what arrived: within 5 % for
    the cross flows, but flow 1 can be starved to a few percent of the
    link, and then the segments still in flight when its test ends are
    more than 5 % of its bytes (282 against 298 kbit/s in one CI run), so
    for it only what arrived is at most what was sent."""
    _, run = parking_lot
    run_dir = Path(run["dir"])
    main, *cross = run["flows"]
    assert [f["hop"] for f in run["flows"]] == [None, 1, 2, 3]
    for k, f in enumerate(cross, start=1):
        assert data_senders(run_dir / f"hop{k}.pcap") == {host(main["src"]), host(f["src"])}
    for f in cross:
        assert main["throughput_bps"]["iperf3"] < f["throughput_bps"]["iperf3"] <= BW
        tp = f["throughput_bps"]
        assert close(tp["iperf3"], tp["pcap"], 0.05), tp
    cap = tshark_truth.read(run_dir / "sender.pcap")
    sent = {}
    for f in run["flows"]:
        sender = (host(f["src"]), port(f["src"]))
        sent[f["flow"]] = tshark_truth.sent_once(cap.segments[sender])
        assert f["throughput_bps"]["pcap"] == pytest.approx(
            8 * sent[f["flow"]] / cap.data_s(sender), rel=1e-6), f
    report = json.loads((run_dir / "iperf-1.json").read_text())
    assert report["end"]["sum_received"]["bytes"] <= sent[main["flow"]]


def test_each_hop_sent_and_dropped_what_its_captures_show(parking_lot):
    """Per hop, the packets that left its queue (hop<k>.pcap) are those tc
    counts as sent, and the data of its flows that entered its router
    (sender.pcap at hop 1, hop<k>-in.pcap beyond) and never left are tc's
    drops there: nothing but TCP passes the queues (the neighbours are
    permanent, so no ARP does)."""
    _, run = parking_lot
    run_dir = Path(run["dir"])
    q = queues(run_dir)
    main, *cross = run["flows"]
    for k, router in enumerate(ROUTERS, start=1):
        left = run_dir / f"hop{k}.pcap"
        entered = run_dir / ("sender.pcap" if k == 1 else f"hop{k}-in.pcap")
        assert count(left, "tcp") == q[router]["packets"]
        # what the hosts of its flows sent, the iperf3 control connections' too
        through = f"ip.src == {host(main['src'])} || ip.src == {host(cross[k - 1]['src'])}"
        lost = count(entered, through) - count(left, through)
        assert lost == q[router]["drops"] > 0, (k, lost, q[router]["drops"])


def test_each_flow_is_in_sender_and_bottleneck_once(parking_lot):
    """sender.pcap holds each flow where its data enter its first hop and
    bottleneck.pcap where they leave its last, as many data segments as
    those hops' own captures."""
    _, run = parking_lot
    run_dir = Path(run["dir"])
    for f in run["flows"]:
        data = f"tcp.srcport == {port(f['src'])} && tcp.len > 0"
        first, last = (1, HOPS) if f["hop"] is None else (f["hop"], f["hop"])
        entered = run_dir / ("sender.pcap" if first == 1 else f"hop{first}-in.pcap")
        assert count(run_dir / "sender.pcap", data) == count(entered, data) > 0
        assert count(run_dir / "bottleneck.pcap", data) == \
            count(run_dir / f"hop{last}.pcap", data) > 0


def test_every_hop_is_checked_at_its_rate(parking_lot):
    """The fidelity check measures each hop's queue from its own captures:
    HTB's rate at every hop."""
    _, run = parking_lot
    b = run["fidelity"]["bottleneck"]
    assert b["status"] == "pass", b
    assert sorted({s["hop"] for s in b["steps"]}) == [1, 2, 3]
    for s in b["steps"]:
        assert s["status"] == "pass" and close(s["bps"], BW, 0.03), s


def test_a_sweep_over_hops_is_grouped_by_them(tmp_path):
    """`tcpvar sweep --hops 2,3` runs a parking lot of each size, and
    `compare --by hops` groups them: the drops are every hop's (tc's own
    counters in the run folder, summed), the utilisation the first hop's
    (its flows fill it, and no more than it), the rates of the flow through
    every hop and of the cross flows iperf3's own (the client's report of
    what its receiver counted)."""
    from conftest import tcpvar_main

    r = tcpvar_main("sweep", "--name", "lot", "--cc", "reno", "--topology", "parking-lot",
                    "--hops", "2,3", "--rtt", 0, "--bw", "10mbit", "--buffer", BUFFER,
                    "--duration", 4, "--backend", "netns", "--json", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    folders = {run["cell"]["hops"]: Path(run["dir"]) for run in json.loads(r.stdout)["runs"]}
    r = tcpvar_main("compare", "--study", "lot", "--by", "hops", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    groups = {g["key"]["hops"]: g for g in json.loads(r.stdout)["groups"]}
    assert set(groups) == set(folders) == {2, 3}
    for hops, g in groups.items():
        hop_queues = queues(folders[hops])
        assert len(hop_queues) == hops
        assert g["n"] == 1 and g["mean"]["bottleneck_drops"] == \
            sum(q["drops"] for q in hop_queues.values())
        assert 80 < g["mean"]["utilization_pct"] <= 101, g["mean"]
        rates = [json.loads((folders[hops] / f"iperf-{i}.json").read_text())
                 ["end"]["sum_received"]["bits_per_second"] / 1e6 for i in range(1, hops + 2)]
        assert g["mean"]["through_mbps"] == pytest.approx(rates[0], rel=1e-9)
        assert g["mean"]["cross_mbps"] == pytest.approx(sum(rates[1:]) / hops, rel=1e-9)
        assert rates[0] < min(rates[1:])


def test_the_hops_survive_export_and_merge(parking_lot, tmp_path):
    """`export --run` takes a parking lot's hop captures with it, and
    `merge` into a store that holds another capture (so every id moves)
    keeps each hop pointing at its own files."""
    from conftest import tcpvar_main

    tmp, run = parking_lot
    out, db = tmp_path / "out", tmp_path / "m.duckdb"
    r = tcpvar_main("export", "--parquet", out, "--run", run["run_id"], "--db",
                    tmp / "t.duckdb")
    assert r.returncode == 0, r.stderr
    fixture = Path(__file__).parent.parent / "fixtures" / "pcaps" / "iperf_4flows.pcap"
    assert tcpvar_main("analyze", "-q", "--db", db, fixture).returncode == 0
    r = tcpvar_main("merge", out, "--db", db)
    assert r.returncode == 0, r.stderr
    import duckdb
    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute("SELECT h.hop, h.router, a.path, d.path FROM hops h "
                       "JOIN captures a ON a.capture_id = h.arrivals_capture "
                       "JOIN captures d ON d.capture_id = h.departures_capture "
                       "ORDER BY h.hop").fetchall()
    assert [(hop, router, Path(a).name, Path(d).name) for hop, router, a, d in rows] == [
        (1, "rl", "sender.pcap", "hop1.pcap"), (2, "p1", "hop2-in.pcap", "hop2.pcap"),
        (3, "p2", "hop3-in.pcap", "hop3.pcap")]
