"""`tcpvar reproduce`: the papers' numbers as the seed files print them,
scales as a hand computation gives them, and the smoke scale of
callegari2011 run in the micro-VM, tcpvar's values checked against the run
folders (iperf3's JSON; goodputs from tshark's sequence numbers in the sender
capture)."""
from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

import tshark_truth as truth

from conftest import ROOT, tcpvar_main

SEEDS = ROOT.parent / "shared" / "seeds"
PAPERS = ROOT / "studies" / "papers"
# the paper's names of Table 1 -> Linux's
LINUX = {"Reno": "reno", "Vegas": "vegas", "Veno": "veno", "Westwood": "westwood",
         "BIC": "bic", "CUBIC": "cubic", "HSTCP": "highspeed", "Hybla": "hybla",
         "Scalable": "scalable", "Illinois": "illinois", "YeAH": "yeah", "HTCP": "htcp",
         "LP": "lp"}


def _number(text: str) -> int | float:
    text = re.sub(r"</?b>", "", text).replace(",", "")
    return float(text) if "." in text else int(text)


def rows_after(path: Path, line: int, labels: list[str]) -> dict[str, list]:
    """The rows of the table whose heading is on @line: for each label, the
    first line below it (before the next table) whose first cell, between
    '|' or tabs, is that label, and the numbers of its other cells."""
    out: dict[str, list] = {}
    for text in path.read_text().splitlines()[line:]:
        if re.match(r"\**Table \d+", text):
            break
        cells = [c.strip() for c in re.split(r"\t|\|", text.strip().strip("|"))]
        if cells[0] in labels and cells[0] not in out:
            out[cells[0]] = [_number(c) for c in cells[1:] if c]
    return out


@pytest.mark.parametrize("paper", ["callegari2011", "ngwa", "wbrto", "kinicki"])
def test_the_papers_numbers_are_the_seed_files(paper):
    """Every table's heading is on the line it names, and every row holds
    the numbers the seed file prints in that row (read here from the seed
    file itself: '|' or tab-separated cells, bold marks and thousands
    separators dropped; whole numbers stay whole)."""
    doc = tomllib.loads((PAPERS / f"{paper}.toml").read_text())
    seed = SEEDS / doc["seed"]
    lines = seed.read_text().splitlines()
    seed_name = {v: k for k, v in LINUX.items()} if paper == "callegari2011" else {}
    for t in doc["table"]:
        assert re.search(rf"Table {t['id']}\b", lines[t["seed_line"] - 1]), t["id"]
        labels = {seed_name.get(label, label): label for label in t["paper"]}
        printed = rows_after(seed, t["seed_line"], list(labels))
        assert set(printed) == set(labels), (t["id"], set(labels) - set(printed))
        for name, label in labels.items():
            assert t["paper"][label] == printed[name], (t["id"], label)
            assert [type(x) for x in t["paper"][label]] == [type(x) for x in printed[name]]


def test_callegari_has_every_table_and_variant():
    doc = tomllib.loads((PAPERS / "callegari2011.toml").read_text())
    assert [t["id"] for t in doc["table"]] == [str(n) for n in range(2, 12)]
    for t in doc["table"]:
        rows = set(LINUX.values()) - ({"reno"} if t["layout"] == "friendliness" else set())
        assert set(t["paper"]) == rows, t["id"]


def _dry(*args, cwd, paper="callegari2011"):
    r = tcpvar_main("reproduce", paper, *args, "--dry-run", "--json", cwd=cwd)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_smoke_plan(tmp_path):
    doc = _dry("--scale", "smoke", cwd=tmp_path)
    assert not (tmp_path / "tcpvar.duckdb").exists()
    assert doc["study"] == "callegari2011-smoke"
    assert [t["id"] for t in doc["tables"]] == ["2", "8", "10"]
    cells = [(r["cell"]["cc"], r["cell"].get("mode"), r["cell"]["bw"], r["cell"]["duration"])
             for r in doc["runs"]]
    assert cells == [("reno", None, "10mbit", 4.0), ("cubic", None, "10mbit", 4.0),
                     ("reno", "fairness", "10mbit", 4.0), ("cubic", "fairness", "10mbit", 4.0),
                     ("cubic", "friendliness", "10mbit", 4.0)]
    t2, t8, t10 = doc["tables"]
    assert [(r["row"], [c["paper"] for c in r["cells"]]) for r in t2["rows"]] == \
        [("reno", [51.00]), ("cubic", [49.39])]
    assert [c["paper"] for c in t8["rows"][1]["cells"]] == [213.72, 220.20, 0.99]
    assert [r["row"] for r in t10["rows"]] == ["cubic"]      # no Reno row in Table 10
    joined = " ".join(doc["scaling"])
    assert "1 Gbit/s → 10 Mbit/s" in joined and "300 s → 4 s" in joined
    assert "1 per cell (the paper: 10)" in joined


def test_small_scale_shrinks_the_schedule(tmp_path):
    """Table 5 (1 Gbit/s, 500 Mbit/s from 60 s, 1 Gbit/s from 120 s, 180 s)
    at small (1 Gbit/s → 20 Mbit/s, runs of at most 20 s): the steps at
    60/180 and 120/180 of 20 s, i.e. 6.67 and 13.33 s."""
    doc = _dry("--scale", "small", "--table", "5", cwd=tmp_path)
    schedules = {r["cell"]["bw_schedule"] for r in doc["runs"]}
    assert schedules == {"0:20mbit,6.66667:10mbit,13.3333:20mbit"}
    assert len(doc["runs"]) == 13 * 3
    (t5,) = doc["tables"]
    assert t5["measures"] == ["interval 1", "interval 2", "interval 3", "mean"]


def test_small_scale_shares_the_short_tables_runs(tmp_path):
    """At small every run lasts at most 20 s, so a 5-minute table and its
    20-second twin are the same cells (2 and 3, 8 and 9, 10 and 11): 13
    variants in 7 kinds of run (Table 10's Reno row is not run), 3 repeats."""
    doc = _dry("--scale", "small", cwd=tmp_path)
    assert len(doc["runs"]) == (13 * 7 - 1) * 3
    assert {r["cell"]["duration"] for r in doc["runs"]} == {20.0}
    assert [t["id"] for t in doc["tables"]] == [str(i) for i in range(2, 12)]


def test_mixed_runs_and_capped_flows(tmp_path):
    """Kinicki's 20 flows each of three variants at the smoke scale's 6
    flows: 20 x 6 // 60 = 2 of each, in the order given; the WB-RTO runs'
    150 flows capped at 8; rows Linux cannot run are shown, not run."""
    doc = _dry("--scale", "smoke", cwd=tmp_path, paper="kinicki")
    (run,) = doc["runs"]
    assert run["variants"] == ["cubic", "cubic", "bic", "bic", "reno", "reno"]
    assert run["cell"]["bw"] == "10mbit" and run["cell"]["duration"] == 10.0
    (t,) = doc["tables"]
    assert [(r["row"], r["skip"]) for r in t["rows"]][2] == ("CTCP",
                                                             "Compound TCP is not in Linux")
    assert "flows: 60 → 6" in " ".join(doc["scaling"])
    doc = _dry("--scale", "smoke", cwd=tmp_path, paper="wbrto")
    assert [(r["cell"]["flows"], r["cell"].get("wbrto")) for r in doc["runs"]] == \
        [(8, None), (8, "medium")]


def test_bad_input_is_one_line(tmp_path):
    for args, words in ((("nosuch",), "no reproduction 'nosuch' (one of callegari2011"),
                        (("callegari2011", "--table", "12"), "--table 12: callegari2011 has "
                                                             "tables 2, 3")):
        r = tcpvar_main("reproduce", *args, "--dry-run", cwd=tmp_path)
        assert r.returncode == 2 and words in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr


# --- the smoke scale, run -----------------------------------------------------

@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("reproduce")
    r = tcpvar_main("reproduce", "callegari2011", "--scale", "smoke", "--backend", "vm",
                    "--json", "-q", cwd=tmp)
    assert r.returncode == 0, r.stderr
    return tmp, json.loads(r.stdout)


def _iperf_mbps(run_dir: Path, flow: int) -> float:
    """iperf3's receiver rate: the client's report, or its server's when the
    runner interrupted the client before the results exchange (docs/run.md)."""
    doc = json.loads((run_dir / f"iperf-{flow}.json").read_text())
    if "error" in doc:
        doc = json.loads((run_dir / f"iperf-{flow}-server.json").read_text())
    return doc["end"]["sum_received"]["bits_per_second"] / 1e6


def _goodputs(run_dir: Path) -> list[float]:
    """Each flow's data sent once per second of its transfer (its first
    to its last data segment), from tshark's sequence numbers."""
    cap = truth.read(run_dir / "sender.pcap")
    flows = json.loads((run_dir / "manifest.json").read_text())["flows"]
    senders = [(f["src_addr"], f["src_port"]) for f in flows]
    return [8 * truth.sent_once(cap.segments[s]) / cap.data_s(s) for s in senders]


def test_smoke_puts_tcpvar_beside_the_paper(smoke):
    tmp, doc = smoke
    assert all(r["status"] == "complete" for r in doc["runs"]), doc["runs"]
    by_cell = {(r["cell"]["cc"], r["cell"].get("mode")): Path(r["dir"]) for r in doc["runs"]}
    paper = tomllib.loads((PAPERS / "callegari2011.toml").read_text())
    printed = {t["id"]: t["paper"] for t in paper["table"]}
    seen = 0
    for t in doc["tables"]:
        mode = {"throughput": None}.get(t["layout"], t["layout"])
        for row in t["rows"]:
            run_dir = by_cell[(row["row"], mode)]
            for i, c in enumerate(row["cells"]):
                assert c["paper"] == printed[t["id"]][row["row"]][i]
                got = c["tcpvar"]
                assert got["n"] == 1 and got["ci95"] is None and len(c["runs"]) == 1
                if c["metric"] == "iperf3_mbps":
                    truth = _iperf_mbps(run_dir, 1)
                elif c["metric"] == "background_mbps":
                    truth = _iperf_mbps(run_dir, 1)
                elif c["metric"] == "test_mbps":
                    truth = _iperf_mbps(run_dir, 2)
                else:
                    x = _goodputs(run_dir)
                    truth = sum(x) ** 2 / (len(x) * sum(v * v for v in x))
                    # the bytes sent once over the first to last data segment, as tcpvar's
                    # goodput: on a stored smoke run both gave 0.9992292776033121 and
                    # 0.8959923566792481 to the last digit; 1e-9 is summation order
                    assert got["mean"] == pytest.approx(truth, rel=1e-9), (t["id"], row)
                    seen += 1
                    continue
                assert got["mean"] == pytest.approx(truth, rel=1e-9), (t["id"], row, c)
                seen += 1
    assert seen == 2 + 2 * 3 + 2      # Table 2: 2 cells; Table 8: 2 x 3; Table 10: 2


def test_system_goodput_and_utilisation_span_all_flows(smoke):
    """Per run, as tshark sees the sender capture: the data all flows sent
    once (system goodput), and all data (utilisation, over the bottleneck
    rate), each over the time from the first data segment of any flow to
    the last: a sum of the flows' own rates would count twice the time
    only one of them sends."""
    tmp, doc = smoke
    for run in doc["runs"]:
        manifest = json.loads((Path(run["dir"]) / "manifest.json").read_text())
        cap = truth.read(Path(run["dir"]) / "sender.pcap")
        flows = [cap.segments[(f["src_addr"], f["src_port"])] for f in manifest["flows"]]
        segs = [s for flow in flows for s in flow]
        span = (max(t for t, _, _ in segs) - min(t for t, _, _ in segs)) / 1e9
        once = sum(truth.sent_once(flow) for flow in flows)
        sent = sum(n for _, _, n in segs)
        bw = manifest["params"]["bw_bps"]
        r = tcpvar_main("compare", "--run", run["run_id"], "--by", "cc", "--json", cwd=tmp)
        assert r.returncode == 0, r.stderr
        (group,) = json.loads(r.stdout)["groups"]
        assert group["mean"]["system_goodput_mbps"] == pytest.approx(8 * once / span / 1e6,
                                                                     rel=1e-6), run["cell"]
        assert group["mean"]["utilization_pct"] == pytest.approx(100 * 8 * sent / span / bw,
                                                                 rel=1e-6), run["cell"]


def test_smoke_resumes_and_renders(smoke):
    tmp, doc = smoke
    r = tcpvar_main("reproduce", "callegari2011", "--scale", "smoke", "--markdown", cwd=tmp)
    assert r.returncode == 0, r.stderr
    assert "| reno | 51.00 |" in r.stdout and "#### Table 8: Fairness, 5 min" in r.stdout
    again = _dry("--scale", "smoke", cwd=tmp)
    assert all(x["skipped"] for x in again["runs"])
    assert again["tables"] == doc["tables"]
