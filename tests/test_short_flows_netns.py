"""Short flows beside a long one (--short, netns backend): two size
classes of Poisson arrivals; and a finite flow beside a long one (--size).
Truth: tshark on the sender capture, each transfer's first SYN to the
first ACK of its last byte, and percentiles worked by hand from those."""
from __future__ import annotations

import json
import math
from pathlib import Path

import duckdb
import pytest

from tshark_truth import fields

from conftest import tcpvar_main
from run_helpers import tcpvar_run

CLASSES = {50_000: 5.0, 500_000: 1.0}      # bytes: arrivals a second
PORT = 34999                               # artefacts/run_folder.py SHORT_PORT


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("short")
    rc, doc, err = tcpvar_run(tmp, "--backend", "netns", "--cc", "cubic", "--rtt", 0,
                              "--bw", "20mbit", "--buffer", 60, "--duration", 8,
                              "--short", ",".join(f"{r:g}:{n}b" for n, r in CLASSES.items()))
    assert rc == 0, err
    (run,) = doc["runs"]
    return tmp, run


def _ns(text: str) -> int:
    secs, _, frac = text.partition(".")
    return int(secs) * 10**9 + int(frac.ljust(9, "0")[:9])


def _tshark_fcts(pcap: Path, sizes: dict[int, int], port: int = PORT) -> dict[int, float]:
    """Per client port (of @sizes, to server @port): its first SYN to the
    first ACK from the server whose relative acknowledgement number covers
    its last byte (size + 1), in ms."""
    syn, acked = {}, {}
    for t, sport, dport, is_syn, is_ack, ack in fields(
            pcap, f"tcp.port == {port}", "frame.time_epoch", "tcp.srcport", "tcp.dstport",
            "tcp.flags.syn", "tcp.flags.ack", "tcp.ack"):
        sport, dport = int(sport), int(dport)
        if dport == port and sport in sizes and is_syn in ("1", "True") and sport not in syn:
            syn[sport] = _ns(t)
        if sport == port and dport in sizes and is_ack in ("1", "True") \
                and dport not in acked and int(ack) >= sizes[dport] + 1:
            acked[dport] = _ns(t)
    return {p: (acked[p] - syn[p]) / 1e6 for p in acked}


def _quantile(xs: list[float], q: float) -> float:
    """Linear interpolation between the order statistics at (n - 1) q."""
    xs = sorted(xs)
    pos = (len(xs) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _records(run: dict) -> list[dict]:
    return [json.loads(line) for line in
            (Path(run["dir"]) / "short.jsonl").read_text().splitlines()]


def test_every_planned_transfer_ran(short_run):
    """The plan's arrivals, each a connection of its own that tshark sees
    open, carry its bytes and close."""
    _, run = short_run
    plan = json.loads((Path(run["dir"]) / "short-plan.json").read_text())
    recs = _records(run)
    assert sorted(r["id"] for r in recs) == list(range(1, len(plan) + 1))
    assert [(r["planned_s"], r["bytes"]) for r in sorted(recs, key=lambda r: r["id"])] == \
        [tuple(p) for p in plan]
    assert {n for _, n in plan} == set(CLASSES)
    # a Poisson count of mean 8 x (5 + 1) = 48 lies within 20..90 but once in 10^5
    assert 20 <= len(plan) <= 90
    assert all(r["outcome"] == "complete" and r["sent"] == r["bytes"] for r in recs)
    pcap = Path(run["dir"]) / "sender.pcap"
    syns = fields(pcap, f"tcp.dstport == {PORT} && tcp.flags.syn == 1 && tcp.flags.ack == 0",
                  "tcp.srcport")
    assert {int(p) for (p,) in syns} == {r["sport"] for r in recs}
    fins = fields(pcap, f"tcp.srcport == {PORT} && tcp.flags.fin == 1", "tcp.dstport")
    assert {int(p) for (p,) in fins} == {r["sport"] for r in recs}


def test_completion_times_are_tsharks(short_run):
    tmp, run = short_run
    recs = _records(run)
    truth = _tshark_fcts(Path(run["dir"]) / "sender.pcap", {r["sport"]: r["bytes"] for r in recs})
    con = duckdb.connect(str(tmp / "t.duckdb"), read_only=True)
    stored = dict(con.execute("SELECT sport, fct_ms FROM short_flows WHERE run_id = ?",
                              [run["run_id"]]).fetchall())
    con.close()
    assert len(truth) == len(recs)
    assert stored == pytest.approx(truth, abs=1e-6)
    # the client's own clock (connect() to the server's close) sees a bit more
    for r in recs:
        app_ms = (r["end_ns"] - r["start_ns"]) / 1e6
        assert truth[r["sport"]] <= app_ms + 0.5


def test_summary_percentiles_per_class(short_run):
    """The summary's percentiles of each class, from tshark's times by hand;
    compare's fct metrics are the smallest class's."""
    tmp, run = short_run
    recs = _records(run)
    truth = _tshark_fcts(Path(run["dir"]) / "sender.pcap", {r["sport"]: r["bytes"] for r in recs})
    classes = {c["bytes"]: c for c in run["short_flows"]}
    assert set(classes) == set(CLASSES)
    for size, c in classes.items():
        xs = [truth[r["sport"]] for r in recs if r["bytes"] == size]
        assert c["transfers"] == c["complete"] == c["measured"] == len(xs)
        for q, key in ((0.5, "fct_p50_ms"), (0.95, "fct_p95_ms"), (0.99, "fct_p99_ms")):
            assert c[key] == pytest.approx(_quantile(xs, q), abs=1e-6), (size, key)
        assert c["fct_max_ms"] == pytest.approx(max(xs), abs=1e-6)
    res = tcpvar_main("compare", "--db", tmp / "t.duckdb", "--run", run["run_id"], "--json")
    assert res.returncode == 0, res.stderr
    (group,) = json.loads(res.stdout)["groups"]
    mice = [truth[r["sport"]] for r in recs if r["bytes"] == min(CLASSES)]
    assert group["mean"]["fct_p95_ms"] == pytest.approx(_quantile(mice, 0.95), abs=1e-6)
    res = tcpvar_main("compare", "--db", tmp / "t.duckdb", "--run", run["run_id"], "--json",
                      "--fct-size", "500kb")
    assert res.returncode == 0, res.stderr
    (group,) = json.loads(res.stdout)["groups"]
    large = [truth[r["sport"]] for r in recs if r["bytes"] == 500_000]
    assert group["mean"]["fct_p50_ms"] == pytest.approx(_quantile(large, 0.5), abs=1e-6)


def test_the_summary_prints_each_class(short_run):
    tmp, run = short_run
    res = tcpvar_main("load", run["dir"], "--db", tmp / "t.duckdb")
    assert res.returncode == 0, res.stderr
    lines = [line for line in res.stdout.splitlines() if line.startswith("short flows of ")]
    assert [line.split(":")[0] for line in lines] == ["short flows of 50 kB",
                                                      "short flows of 500 kB"]
    assert all("completion time p50 " in line for line in lines)


@pytest.fixture(scope="module")
def finite_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("finite")
    rc, doc, err = tcpvar_run(tmp, "--backend", "netns", "--cc", "cubic", "--flows", 2,
                              "--rtt", 0, "--bw", "20mbit", "--buffer", 60, "--duration", 6,
                              "--size", "2mb,0")
    assert rc == 0, err
    (run,) = doc["runs"]
    return tmp, run


def test_a_finite_flow_carries_its_bytes_and_ends(finite_run):
    """Flow 1 sends 2 MB and ends, flow 2 runs its 6 s (iperf3's own
    report); by tshark, flow 1's data end at relative byte 2,000,000 and its
    completion time is its SYN to the first ACK of that byte."""
    _, run = finite_run
    one, two = run["flows"]
    assert one["size_bytes"] == 2_000_000 and two["size_bytes"] is None
    assert one["outcome"] == two["outcome"] == "complete"
    report = json.loads((Path(run["dir"]) / "iperf-2.json").read_text())
    assert report["end"]["sum_sent"]["seconds"] == pytest.approx(6, abs=0.1)
    assert not (Path(run["dir"]) / "iperf-1.json").exists()
    pcap = Path(run["dir"]) / "sender.pcap"
    sport, dport = (int(x.rsplit(":", 1)[1]) for x in (one["src"], one["dst"]))
    ends = fields(pcap, f"tcp.srcport == {sport} && tcp.dstport == {dport} && tcp.len > 0",
                  "tcp.seq", "tcp.len")
    assert max(int(s) + int(n) for s, n in ends) - 1 == 2_000_000
    truth = _tshark_fcts(pcap, {sport: 2_000_000}, port=dport)
    assert one["fct_ms"] == pytest.approx(truth[sport], abs=1e-6)
    assert run["jain"]["iperf3"] is None        # iperf3 never measured flow 1


def test_the_fct_figure_draws_tsharks_times(short_run):
    """`tcpvar plot fct`: each class's completion times, as tshark's, at
    their start on the run's axis."""
    tmp, run = short_run
    recs = _records(run)
    truth = _tshark_fcts(Path(run["dir"]) / "sender.pcap", {r["sport"]: r["bytes"] for r in recs})
    res = tcpvar_main("plot", "fct", f"run:{run['run_id']}", "--db", tmp / "t.duckdb", "--json",
                      "-q", "-o", tmp / "fct.png")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    for c in doc["classes"]:
        want = sorted(truth[r["sport"]] for r in recs if r["bytes"] == c["bytes"])
        assert sorted(ms for _, ms in c["fct"]) == pytest.approx(want, abs=1e-6)
        assert all(0 <= t <= 8 for t, _ in c["fct"]) and c["unfinished"] == []
    assert {c["bytes"] for c in doc["classes"]} == set(CLASSES)
    assert (Path(run["dir"]) / "figures" / "fct.png").exists()
