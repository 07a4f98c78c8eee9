"""`tcpvar compare --layout` and `--plot` on a small study of real runs
(netns, no delay: 2 variants x 2 modes x 2 repeats of 2 s), every number
held to a hand computation from the run folders: iperf3's own JSON for the
rates, tshark's sequence numbers for Jain's index, and the mean with its
95 % interval (Student's t from a printed table) computed here."""
from __future__ import annotations

import json
import math
import re
import statistics
from pathlib import Path

import pytest

import significance_truth as sig_truth
import tshark_truth as truth

from conftest import tcpvar_main

pytestmark = pytest.mark.slow

T975 = {1: 12.7062, 2: 4.3027, 3: 3.1824}   # printed t tables (4 decimals), 97.5 % quantile by df


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("layouts")
    r = tcpvar_main("sweep", "--name", "grid", "--cc", "cubic,reno", "--mode", "single,fairness",
                    "--rtt", 0, "--bw", "10mbit", "--repeat", 2, "--duration", 2,
                    "--backend", "netns", "--json", "-q", cwd=tmp)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert len(doc["runs"]) == 8 and all(x["status"] == "complete" for x in doc["runs"])
    return tmp, doc


def _by_hand(run_dir: Path) -> dict:
    """One run's numbers from its folder: iperf3's received rate per flow
    (its JSON), and Jain's index over the flows' goodputs (data sent once
    over first to last data segment, tshark's sequence numbers)."""
    m = json.loads((run_dir / "manifest.json").read_text())
    rates = [json.loads((run_dir / f"iperf-{i}.json").read_text())
             ["end"]["sum_received"]["bits_per_second"] / 1e6
             for i in range(1, len(m["flows"]) + 1)]
    out = {"key": (m["flows"][0]["cc"], m["params"]["mode"]), "iperf3_mbps": sum(rates)}
    if len(rates) > 1:
        cap = truth.read(run_dir / "sender.pcap")
        x = [8 * truth.sent_once(cap.segments[(f["src_addr"], f["src_port"])])
             / cap.data_s((f["src_addr"], f["src_port"])) for f in m["flows"]]
        out.update(background_mbps=rates[0], test_mbps=statistics.mean(rates[1:]),
                   jain=sum(x) ** 2 / (len(x) * sum(v * v for v in x)))
    return out


def _groups(doc: dict) -> dict[tuple, dict[str, tuple[float, float]]]:
    """Per (cc, mode): each metric's mean and 95 % half-interval, by hand."""
    runs: dict[tuple, list[dict]] = {}
    for r in doc["runs"]:
        one = _by_hand(Path(r["dir"]))
        runs.setdefault(one["key"], []).append(one)
    out = {}
    for key, xs in runs.items():
        out[key] = {}
        for metric in ("iperf3_mbps", "background_mbps", "test_mbps", "jain"):
            vs = [x[metric] for x in xs if metric in x]
            if vs:
                half = T975[len(vs) - 1] * statistics.stdev(vs) / math.sqrt(len(vs))
                out[key][metric] = (statistics.mean(vs), half)
    return out


def _cells(markdown: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in markdown.splitlines()[2:]]


def test_variants_layout_by_hand(study):
    tmp, doc = study
    want = _groups(doc)
    r = tcpvar_main("compare", "--study", "grid", "--by", "cc,mode", "--layout", "variants",
                    "--markdown", cwd=tmp)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "| cc: iperf3 Mbit/s | mode fairness | mode single |"
    rows = {row[0]: row[1:] for row in _cells(r.stdout)}
    assert set(rows) == {"cubic", "reno"}
    for cc, cells in rows.items():
        for mode, cell in zip(("fairness", "single"), cells):
            mean, half = want[(cc, mode)]["iperf3_mbps"]
            assert cell == f"{mean:.2f} ± {half:.2f}", (cc, mode)


def test_fairness_layout_by_hand(study):
    """Connection 1 and 2 are iperf3's rates of the first flow and of the
    second; Jain's index is tshark's goodputs'."""
    tmp, doc = study
    want = _groups(doc)
    r = tcpvar_main("compare", "--study", "grid", "--by", "cc,mode", "--layout", "fairness",
                    "--markdown", cwd=tmp)
    assert r.returncode == 0, r.stderr
    seen = 0
    for cc, mode, n, first, second, jain in _cells(r.stdout):
        assert n == "2"
        if mode == "single":
            assert (first, second, jain) == ("—", "—", "—")
            continue
        g = want[(cc, mode)]
        assert first == "{:.2f} ± {:.2f}".format(*g["background_mbps"]), (cc, first)
        assert second == "{:.2f} ± {:.2f}".format(*g["test_mbps"]), (cc, second)
        assert jain == "{:.3f} ± {:.3f}".format(*g["jain"]), (cc, jain)
        seen += 1
    assert seen == 2


def test_plot_draws_each_runs_numbers(study):
    """--plot draws per run its iperf3 rate (and delay) and per group the
    mean with its interval: the document it draws holds iperf3's rates of
    each run, and the figure's legend counts the runs of each group."""
    tmp, doc = study
    rates = {r["run_id"]: _by_hand(Path(r["dir"]))["iperf3_mbps"] for r in doc["runs"]}
    want = _groups(doc)
    r = tcpvar_main("compare", "--study", "grid", "--by", "cc,mode", "--json", cwd=tmp)
    assert r.returncode == 0, r.stderr
    for g in json.loads(r.stdout)["groups"]:
        assert g["values"]["iperf3_mbps"] == [pytest.approx(rates[i], rel=1e-9) for i in g["runs"]]
        mean, half = want[(g["key"]["cc"], g["key"]["mode"])]["iperf3_mbps"]
        assert (g["mean"]["iperf3_mbps"], g["ci95"]["iperf3_mbps"]) == \
            (pytest.approx(mean, rel=1e-9), pytest.approx(half, rel=1e-3))   # t to 3 decimals
    r = tcpvar_main("compare", "--study", "grid", "--by", "cc,mode", "--plot", "delay.svg",
                    cwd=tmp)
    assert r.returncode == 0, r.stderr
    legend = set(re.findall(r"<!-- ((?:cubic|reno), mode \w+ \(n=\d\)) -->",
                            (tmp / "delay.svg").read_text()))
    assert legend == {f"{cc}, mode {mode} (n=2)" for cc in ("cubic", "reno")
                      for mode in ("single", "fairness")}


def test_test_by_hand(study):
    """--test by cc on iperf3's rates: each group's rates from its runs' own
    JSON, the p-value of the test chosen computed here (Welch's by its
    formula and Student's density, or U counted pair by pair and its exact
    p over every ranking), Holm's over the one pair the same, and the text
    table's row."""
    tmp, doc = study
    rates: dict[str, list[float]] = {}
    for r in doc["runs"]:
        one = _by_hand(Path(r["dir"]))
        rates.setdefault(one["key"][0], []).append(one["iperf3_mbps"])
    r = tcpvar_main("compare", "--study", "grid", "--by", "cc", "--test", "--json", cwd=tmp)
    assert r.returncode == 0, r.stderr
    tests = json.loads(r.stdout)["tests"]
    assert tests["metric"] == "iperf3_mbps"
    (pair,) = tests["pairs"]
    a, b = rates[pair["a"]["cc"]], rates[pair["b"]["cc"]]
    assert pair["n"] == [4, 4]
    if pair["test"] == "welch":
        _, _, p = sig_truth.welch(a, b)
    else:
        assert pair["test"] == "mann-whitney"
        assert pair["statistic"] == sig_truth.u_statistic(a, b)
        p = sig_truth.u_exact_p(a, b)
    assert pair["p"] == pytest.approx(p, abs=1e-6)
    assert pair["p_holm"] == pair["p"] and pair["differ"] == (p < 0.05)
    assert pair["difference"] == pytest.approx(statistics.mean(b) - statistics.mean(a))
    r = tcpvar_main("compare", "--study", "grid", "--by", "cc", "--test", cwd=tmp)
    assert r.returncode == 0, r.stderr
    row = next(line.split() for line in r.stdout.splitlines() if "4/4" in line.split())
    assert row[:5] == ["cc", pair["a"]["cc"], "cc", pair["b"]["cc"], "4/4"]
    assert f"{p:.3g}" in row
    assert "Holm" in r.stdout or "Holm" in r.stderr


@pytest.mark.parametrize("kind", ["cdf", "box"])
def test_spread_across_runs(study, kind):
    """--plot-kind cdf and box draw --metric across each group's runs: a
    CDF or box per group, labelled with its key and its number of runs."""
    tmp, _ = study
    r = tcpvar_main("compare", "--study", "grid", "--by", "cc", "--metric", "jain", "--plot",
                    f"{kind}.svg", "--plot-kind", kind, cwd=tmp)
    assert r.returncode == 0, r.stderr
    svg = (tmp / f"{kind}.svg").read_text()
    # Jain's index: the fairness runs only, two of each variant
    assert "Jain across runs" in svg
    for cc in ("cubic", "reno"):
        assert (f"{cc} (n=2)" if kind == "cdf" else f"{cc}") in svg
    assert kind == "cdf" or svg.count("(n=2)") == 2


def test_study_report_by_hand(study):
    """`tcpvar report --study`: by default grouped by the keys the study
    swept, each chosen metric tested and drawn; with --by cc the test of
    iperf3's rates is the hand computation's."""
    tmp, doc = study
    r = tcpvar_main("report", "--study", "grid", "-o", "grid.html", cwd=tmp)
    assert r.returncode == 0, r.stderr
    page = (tmp / "grid.html").read_text()
    assert not re.search(r'(src|href)="(?!data:)', page)      # nothing from the network
    assert "<dt>grouped by</dt><dd>cc, mode</dd>" in page
    assert "<dt>runs</dt><dd>8 complete of 8</dd>" in page
    # the metrics these runs have among the defaults: each tested and drawn
    tested = re.findall(r"<h3>([^<]+): does a pair differ\?</h3>", page)
    assert tested == ["iperf3 Mbit/s", "Jain", "RTT p95 ms", "queueing p95 ms"]
    assert page.count("<img ") == len(tested)
    rates: dict[str, list[float]] = {}
    for run in doc["runs"]:
        one = _by_hand(Path(run["dir"]))
        rates.setdefault(one["key"][0], []).append(one["iperf3_mbps"])
    r = tcpvar_main("report", "--study", "grid", "--by", "cc", "--metric", "iperf3_mbps",
                    "-o", "cc.html", cwd=tmp)
    assert r.returncode == 0, r.stderr
    page = (tmp / "cc.html").read_text()
    (row,) = re.findall(r"<tr><td>cc (\w+)</td><td>cc (\w+)</td><td>4/4</td><td>([\w-]+)</td>"
                        r"<td>([^<]+)</td>", page)
    a, b = rates[row[0]], rates[row[1]]
    p = sig_truth.welch(a, b)[2] if row[2] == "welch" else sig_truth.u_exact_p(a, b)
    assert row[3] == f"{p:.3g}"
    assert page.count("<img ") == 1


def test_study_report_needs_one_subject(study):
    tmp, _ = study
    r = tcpvar_main("report", "--study", "grid", "run:1", cwd=tmp)
    assert r.returncode == 2 and "not both" in r.stderr
    r = tcpvar_main("report", "--study", "nosuch", cwd=tmp)
    assert r.returncode != 0 and "no run of study 'nosuch'" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
