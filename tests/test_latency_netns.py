"""Latency under load (`tcpvar run --latency`, netns backend): a bulk flow
through a 100-packet queue at 20 Mbit/s with irtt, then with ping, beside
it. The store holds what irtt's own JSON and ping's own lines say, sample
by sample; the summary's and compare's percentiles are the test's own over
those samples; the delays are bounded by what the queue can hold."""
from __future__ import annotations

import json
import re
import shutil
import statistics
from pathlib import Path

import duckdb
import pytest

from tcpvar.errors import ExitStatus

from conftest import error_lines, tcpvar_main
from run_helpers import assert_nothing_left, tcpvar_run

pytestmark = pytest.mark.slow

BW, BUFFER, WIRE = 20e6, 100, 1514
# a request waits at most for a full queue to drain (the host adds no delay)
QUEUE_MS = BUFFER * WIRE * 8 / BW * 1e3
IRTT_LOST = {"false": None, "true": "unknown", "true_up": "up", "true_down": "down"}
REPLY = re.compile(r"\[(\d+\.\d+)\] \d+ bytes from [^ ]+: icmp_seq=(\d+) ttl=\d+ time=([0-9.]+) ms")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("latency")
    out = {}
    for tool, interval in (("irtt", None), ("ping", 50)):
        rc, doc, err = tcpvar_run(tmp, "--backend", "netns", "--cc", "cubic", "--rtt", 0,
                                  "--bw", "20mbit", "--buffer", BUFFER, "--duration", 5,
                                  "--latency", tool,
                                  *(["--latency-interval", interval] if interval else []))
        assert rc == 0, err
        (out[tool],) = doc["runs"]
    return tmp, out


def _stored(tmp: Path, run_id: int) -> list[tuple]:
    con = duckdb.connect(str(tmp / "t.duckdb"), read_only=True)
    return con.execute("SELECT tool, seq, sent_ns, rtt_us, up_us, down_us, lost FROM latency "
                       "WHERE run_id = ? ORDER BY seq", [run_id]).fetchall()


def _p(xs: list[float], q: int) -> float:
    """The q-th percentile, linear between the ordered values (R's type 7)."""
    return statistics.quantiles(xs, n=100, method="inclusive")[q - 1]


def test_irtt_samples_are_irtts_own(runs):
    tmp, r = runs
    doc = json.loads((Path(r["irtt"]["dir"]) / "latency-irtt.json").read_text())
    want = [("irtt", t["seqno"], t["timestamps"]["client"]["send"].get("wall"),
             *(t["delay"][k] / 1e3 if k in t["delay"] else None
               for k in ("rtt", "send", "receive")), IRTT_LOST[t["lost"]])
            for t in doc["round_trips"]]
    assert len(want) > 400                      # 5 s at 10 ms
    assert _stored(tmp, r["irtt"]["run_id"]) == want
    assert_nothing_left(r["irtt"])


def test_ping_samples_are_pings_own(runs):
    """Every reply's time as ping printed it; as many answered as ping's own
    count of received packets."""
    tmp, r = runs
    text = (Path(r["ping"]["dir"]) / "latency-ping.txt").read_text()
    replies = {int(m[2]): float(m[3]) for m in REPLY.finditer(text)}
    received = int(re.search(r"(\d+) received", text)[1])
    rows = _stored(tmp, r["ping"]["run_id"])
    answered = {seq: rtt / 1e3 for _, seq, _, rtt, _, _, lost in rows if lost is None}
    assert len(answered) == received == len(replies) > 50
    assert answered == pytest.approx(replies, abs=1e-9)


def test_percentiles_and_the_queues_bound(runs):
    """The summary's percentiles over the answered round trips; under load
    they sit in the queue, which holds at most QUEUE_MS of data."""
    tmp, r = runs
    for tool in ("irtt", "ping"):
        lat = r[tool]["latency"]
        rtts = [row[3] / 1e3 for row in _stored(tmp, r[tool]["run_id"]) if row[3] is not None]
        assert lat["samples"] == len(_stored(tmp, r[tool]["run_id"]))
        for q in (50, 95, 99):
            assert lat[f"rtt_p{q}_ms"] == pytest.approx(_p(rtts, q), rel=1e-9), (tool, q)
        # the median, not the tail: on the host's own clock a busy host's
        # scheduling delays a few requests beyond the queue's (seen: p99 84 ms
        # with two micro-VMs running beside the test)
        assert 10 < lat["rtt_p50_ms"] < QUEUE_MS + 5, (tool, lat)
    irtt = r["irtt"]["latency"]
    # the queue is on the way there: irtt's one-way delays say so
    assert irtt["up_p50_ms"] > 10 > irtt["down_p50_ms"]


def test_compare_by_latency_tool(runs):
    tmp, r = runs
    res = tcpvar_main("compare", "--db", tmp / "t.duckdb", "--by", "latency", "--json")
    assert res.returncode == 0, res.stderr
    groups = {g["key"]["latency"]: g for g in json.loads(res.stdout)["groups"]}
    for tool in ("irtt", "ping"):
        rows = _stored(tmp, r[tool]["run_id"])
        rtts = [row[3] / 1e3 for row in rows if row[3] is not None]
        assert groups[tool]["mean"]["latency_p50_ms"] == pytest.approx(_p(rtts, 50))
        lost = sum(row[6] is not None for row in rows)
        assert groups[tool]["mean"]["latency_loss_pct"] == pytest.approx(100 * lost / len(rows))


@pytest.mark.parametrize("name, text, words", [
    ("latency-irtt.json", '{"round_trips": [{"seqno": 1, "lost": "maybe\\u001b[2J"}]}',
     "round_trips[0]: not an irtt round trip"),
    ("latency-irtt.json", '{"round_trips": [{"seqno": -1.5, "lost": "false"}]}',
     "seqno or its send time is not a count"),
    ("latency-irtt.json", '{"round_trips": {}}', "no round_trips list"),
    ("latency-ping.txt", "\x1b[2Jnothing ping prints\n", "not ping's output"),
    ("backlog.jsonl", '{"t_ns": "soon", "qdiscs": []}\n{}\n',
     "line 1 is not a sample of the bottleneck's queue"),
    ("backlog.jsonl", "[[[\n{}\n", "line 1 is not JSON"),
])
def test_a_malformed_latency_file_is_one_line(runs, tmp_path, name, text, words):
    """A run folder's latency file and sampled backlog are untrusted: one
    line, exit 3 (bad input), the store unchanged."""
    _, r = runs
    folder = tmp_path / "theirs"
    shutil.copytree(r["irtt"]["dir"], folder)
    (folder / "latency-irtt.json").unlink()
    (folder / name).write_text(text)
    res = tcpvar_main("load", folder, "--db", tmp_path / "s.duckdb")
    assert res.returncode == ExitStatus.BAD_INPUT, res.stderr
    (line,) = error_lines(res.stderr)
    assert words in line and "\x1b" not in line
    assert not (tmp_path / "s.duckdb").exists() or "theirs" not in tcpvar_main(
        "query", "--db", tmp_path / "s.duckdb", "SELECT name FROM runs").stdout


def test_latency_figure_draws_irtts_round_trips(runs):
    """`tcpvar plot latency`: throughput above and, on the same axis, every
    round trip irtt measured at its send time (and its lost requests); the
    run folder's figures have it."""
    tmp, r = runs
    run = r["irtt"]
    res = tcpvar_main("plot", "latency", f"run:{run['run_id']}", "--db", tmp / "t.duckdb",
                      "--json", cwd=tmp)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    trips = json.loads((Path(run["dir"]) / "latency-irtt.json").read_text())["round_trips"]
    origin = doc["origin_ns"]
    shown = [(t["timestamps"]["client"]["send"]["wall"] - origin) / 1e9 for t in trips]
    answered = [(t_s, t["delay"]["rtt"] / 1e6) for t_s, t in zip(shown, trips)
                if t["lost"] == "false" and doc["from_s"] <= t_s <= doc["to_s"]]
    assert len(doc["rtt"]) == len(answered) > 400
    for (t, ms), (want_t, want_ms) in zip(doc["rtt"], answered):
        assert (t, ms) == (pytest.approx(want_t, abs=1e-9), pytest.approx(want_ms, abs=1e-9))
    assert len(doc["lost"]) == sum(t["lost"] != "false" and doc["from_s"] <= t_s <= doc["to_s"]
                                   for t_s, t in zip(shown, trips))
    assert doc["senders"] and doc["senders"][0]["goodput"]
    assert (Path(run["dir"]) / "figures" / "latency.png").stat().st_size > 10_000
