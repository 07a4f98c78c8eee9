"""`tcpvar sweep` and `tcpvar compare`: a small study in the micro-VM (2
variants x 2 RTTs x 2 repeats of short runs), checked against the run
folders' own artefacts (iperf3's JSON, the kernel's total_retrans in the
tcp_probe record and tshark's reading of what came after it) and Student's
t from the printed table; and the study's definition (options, files, bad
input) without running it."""
from __future__ import annotations

import csv
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from conftest import tcpvar_main, tcpvar_process
from run_helpers import socket_retransmissions

GRID = ("--name", "grid", "--cc", "cubic,reno", "--rtt", "20,40", "--repeat", 2,
        "--duration", 3, "--bw", "10mbit", "--backend", "vm")
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 9: 2.262, 29: 2.045}  # printed t tables


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sweep")
    r = tcpvar_main("sweep", *GRID, "--json", "-q", cwd=tmp)
    assert r.returncode == 0, r.stderr
    return tmp, json.loads(r.stdout)


def _folder_truth(run_dir: Path) -> dict:
    """What the run folder itself says: iperf3's rate (as its receiver
    counted the bytes), and the retransmissions of the sending socket
    (tcp_probe's final total_retrans and tshark's after it)."""
    m = json.loads((run_dir / "manifest.json").read_text())
    (flow,) = m["flows"]
    iperf = json.loads((run_dir / "iperf-1.json").read_text())
    retrans = socket_retransmissions(run_dir, flow["src_port"])
    return {"cc": flow["cc"], "rtt": m["params"]["rtt_ms"],
            "iperf3_mbps": iperf["end"]["sum_received"]["bits_per_second"] / 1e6,
            "retransmissions": retrans}


def test_every_run_is_stored(study):
    tmp, doc = study
    runs = doc["runs"]
    assert len(runs) == 8 and not any(r["skipped"] for r in runs)
    assert all(r["status"] == "complete" for r in runs), runs
    cells = {(r["cell"]["cc"], r["cell"]["rtt"], r["repetition"]) for r in runs}
    assert cells == {(cc, rtt, rep) for cc in ("cubic", "reno") for rtt in (20.0, 40.0)
                     for rep in (1, 2)}
    con = duckdb.connect(str(tmp / "tcpvar.duckdb"), read_only=True)
    stored = con.execute("SELECT run_id, dir, cell, repetition, status FROM runs "
                         "WHERE study = 'grid' ORDER BY run_id").fetchall()
    assert sorted(r["run_id"] for r in runs) == [s[0] for s in stored]
    assert len({(s[2], s[3]) for s in stored}) == 8
    for r in runs:
        truth = _folder_truth(Path(r["dir"]))
        assert (truth["cc"], truth["rtt"]) == (r["cell"]["cc"], r["cell"]["rtt"])


def test_compare_means_and_cis(study):
    tmp, doc = study
    r = tcpvar_main("compare", "--study", "grid", "--by", "cc,rtt", "--json", cwd=tmp)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    truth: dict[tuple, list[dict]] = {}
    for run in doc["runs"]:
        t = _folder_truth(Path(run["dir"]))
        truth.setdefault((t["cc"], t["rtt"]), []).append(t)
    assert len(out["groups"]) == 4
    for g in out["groups"]:
        members = truth[(g["key"]["cc"], g["key"]["rtt"])]
        assert g["n"] == len(members) == 2
        for metric in ("iperf3_mbps", "retransmissions"):
            xs = [m[metric] for m in members]
            mean = sum(xs) / len(xs)
            half = T975[len(xs) - 1] * statistics.stdev(xs) / math.sqrt(len(xs))
            assert g["mean"][metric] == pytest.approx(mean, rel=1e-9), metric
            assert g["ci95"][metric] == pytest.approx(half, rel=1e-4, abs=1e-9), metric


def test_resuming_does_nothing(study):
    tmp, doc = study
    before = sorted(p.name for p in (tmp / "runs").iterdir())
    r = tcpvar_main("sweep", *GRID, "--json", "-q", cwd=tmp)
    assert r.returncode == 0, r.stderr
    again = json.loads(r.stdout)
    assert all(x["skipped"] for x in again["runs"]) and again["sessions"] == []
    assert sorted(x["run_id"] for x in again["runs"]) == \
        sorted(x["run_id"] for x in doc["runs"])
    assert sorted(p.name for p in (tmp / "runs").iterdir()) == before
    con = duckdb.connect(str(tmp / "tcpvar.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 8


def test_a_killed_sweep_resumes_from_its_run_folders(tmp_path):
    """A sweep killed with SIGKILL after its first run finished, before its
    session stored anything: resumed, it stores that run's folder (the run
    is skipped, not run again) and runs only the other. The store then holds
    one run per cell, each from the folder that ran it."""
    env = {**os.environ, "TCPVAR_OWNERS_DIR": str(tmp_path / "owners")}
    args = ["sweep", "--name", "killed", "--cc", "cubic,reno", "--rtt", "0", "--duration", "3",
            "--backend", "netns", "--json", "-q"]
    proc = subprocess.Popen([sys.executable, "-m", "tcpvar.cli", *args], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    first = _first_complete(tmp_path / "runs", proc)
    proc.kill()
    proc.wait()
    with duckdb.connect(str(tmp_path / "tcpvar.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone() == (0,)   # none stored
    doctor = tcpvar_process("doctor", env=env)
    assert doctor.returncode == 0, doctor.stderr
    again = tcpvar_process(*args, cwd=tmp_path, env=env, timeout=600)
    assert again.returncode == 0, again.stderr
    runs = json.loads(again.stdout)["runs"]
    assert [r["skipped"] for r in runs] == [True, False]
    assert runs[0]["dir"] == str(first) and runs[1]["dir"] != str(first)
    assert all(r["status"] == "complete" for r in runs)
    con = duckdb.connect(str(tmp_path / "tcpvar.duckdb"), read_only=True)
    stored = con.execute("SELECT dir, cell, repetition FROM runs WHERE study = 'killed' "
                         "ORDER BY run_id").fetchall()
    assert [d for d, _, _ in stored] == [r["dir"] for r in runs]
    assert len({(c, rep) for _, c, rep in stored}) == 2
    first_cc = json.loads((first / "manifest.json").read_text())["params"]["ccs"]
    assert first_cc == [runs[0]["cell"]["cc"]]


def _first_complete(runs: Path, proc: subprocess.Popen, wait_s: float = 300) -> Path:
    """The first run folder under @runs whose manifest says complete."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and proc.poll() is None:
        for m in runs.glob("*/manifest.json"):
            try:
                if json.loads(m.read_text())["status"] == "complete":
                    return m.parent.resolve()
            except (ValueError, KeyError):
                pass                # being written
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("no run of the sweep finished")


def test_compare_tables(study):
    tmp, _ = study
    md = tcpvar_main("compare", "--study", "grid", "--by", "cc", "--markdown", cwd=tmp)
    lines = md.stdout.splitlines()
    assert lines[0].startswith("| cc | n | throughput Mbit/s")
    assert [ln.split(" | ")[1] for ln in lines[2:]] == ["4", "4"]
    rows = list(csv.DictReader(tcpvar_main("compare", "--study", "grid", "--by", "rtt",
                                           "--csv", cwd=tmp).stdout.splitlines()))
    assert [r["rtt"] for r in rows] == ["20.0", "40.0"] and {r["n"] for r in rows} == {"4"}


def _tcptrace_rtt_p95(run_dir: Path, tmp: Path) -> float:
    """The 95th percentile (linear between order statistics) of tcptrace's
    raw RTT samples (-Z, whole ms) of the flow's data direction. tcptrace
    does not read Linux cooked captures: the 20-byte SLL2 header is cut off
    first (editcap), leaving raw IP."""
    (flow,) = json.loads((run_dir / "manifest.json").read_text())["flows"]
    work = tmp / f"rtt-{run_dir.name}"
    work.mkdir()
    subprocess.run(["editcap", "-C", "20", "-T", "rawip", str(run_dir / "sender.pcap"),
                    "raw.pcap"], cwd=work, check=True, capture_output=True)
    out = subprocess.run(["tcptrace", "-Z", "-n", "raw.pcap"], cwd=work, check=True,
                         capture_output=True, text=True).stdout
    (pair,) = re.findall(rf":{flow['src_port']} - \S+ \((\w2\w)\)", out)
    xs = sorted(float(line.split()[1]) for line in (work / f"{pair}_rttraw.dat").open()
                if re.fullmatch(r"\d+ \d+(\.\d+)?", line.strip()))
    h = (len(xs) - 1) * 0.95
    lo = int(h)
    return xs[lo] + (xs[min(lo + 1, len(xs) - 1)] - xs[lo]) * (h - lo)


def test_layouts_and_the_delay_figure(study):
    """--layout variants holds each group's mean where its cc and rtt meet;
    the figure's delay axis (rtt_p95_ms) agrees with tcptrace's RTT samples."""
    tmp, doc = study
    out = json.loads(tcpvar_main("compare", "--study", "grid", "--by", "cc,rtt", "--json",
                                 cwd=tmp).stdout)
    md = tcpvar_main("compare", "--study", "grid", "--by", "cc,rtt", "--layout", "variants",
                     "--markdown", cwd=tmp).stdout.splitlines()
    assert md[0] == "| cc: iperf3 Mbit/s | rtt 20 | rtt 40 |"
    cells = {(ln.split(" | ")[0].strip("| "), col): ln.strip(" |").split(" | ")[i + 1]
             for ln in md[2:] for i, col in enumerate((20.0, 40.0))}
    for g in out["groups"]:
        mean, half = g["mean"]["iperf3_mbps"], g["ci95"]["iperf3_mbps"]
        assert cells[(g["key"]["cc"], g["key"]["rtt"])] == f"{mean:.2f} ± {half:.2f}"
    by_run = {r: x for g in out["groups"] for r, x in zip(g["runs"], g["values"]["rtt_p95_ms"])}
    for run in doc["runs"]:
        truth = _tcptrace_rtt_p95(Path(run["dir"]), tmp)
        assert by_run[run["run_id"]] == pytest.approx(truth, rel=0.03, abs=2.0), run["dir"]
    r = tcpvar_main("compare", "--study", "grid", "--by", "cc", "--plot", "delay.svg", cwd=tmp)
    assert r.returncode == 0, r.stderr
    svg = (tmp / "delay.svg").read_text()
    assert "throughput against delay" in svg and "cubic (n=4)" in svg and "reno (n=4)" in svg


def _plan(tmp, *args):
    r = tcpvar_main("sweep", *args, "--dry-run", "--json", "--db", tmp / "t.duckdb", cwd=tmp)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["runs"]


def test_plus_joins_flows_comma_makes_runs(tmp_path):
    runs = _plan(tmp_path, "--name", "s", "--cc", "cubic+reno,bbr", "--rtt", "20,40")
    assert [(r["cell"]["cc"], r["variants"]) for r in runs] == [
        ("cubic+reno", ["cubic", "reno"]), ("cubic+reno", ["cubic", "reno"]),
        ("bbr", ["bbr"]), ("bbr", ["bbr"])]
    assert not (tmp_path / "t.duckdb").exists()      # a dry run creates no store


def test_study_file_and_options(tmp_path):
    (tmp_path / "s.toml").write_text(
        'name = "filed"\nrepeat = 2\ncc = ["cubic", "reno+cubic"]\n'
        'bw_schedule = "0:10mbit,2:5mbit;0:10mbit"\nduration = 4\n')
    runs = _plan(tmp_path, "s.toml")
    assert len(runs) == 8
    assert [r["repetition"] for r in runs] == [1] * 4 + [2] * 4   # every cell, then again
    assert {r["cell"]["bw_schedule"] for r in runs} == {"0:10mbit,2:5mbit", "0:10mbit"}
    runs = _plan(tmp_path, "s.toml", "--cc", "bbr", "--repeat", 1)   # options override
    assert {r["cell"]["cc"] for r in runs} == {"bbr"} and len(runs) == 2


@pytest.mark.parametrize("text, args, message", [
    ("foo = 1\n", (), "unknown key 'foo'"),
    ("cc = [\n", (), "not a study file (TOML)"),
    ('cc = "cubic"\n', ("--rtt", "abc"), "rtt = 'abc': not a float"),
    ('cc = "cubic"\n', ("--loss", "5,200"),
     "cell cc=cubic loss=200.0: loss 200% is outside 0..100"),
])
def test_bad_study_is_one_line(tmp_path, text, args, message):
    path = tmp_path / "s.toml"
    path.write_text(text)
    r = tcpvar_main("sweep", path, *args, "--dry-run", cwd=tmp_path)
    assert r.returncode != 0 and message in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_options_without_a_name_get_one(tmp_path):
    # the real sweep under a generated name: tests/test_sweep_name.py
    r = tcpvar_main("sweep", "--cc", "cubic", "--dry-run", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert re.fullmatch(r"sweep: study named cubic-r1-[0-9a-f]{6} \(give --name to choose one\)",
                        r.stderr.splitlines()[0]), r.stderr


def test_compare_bad_input(tmp_path):
    r = tcpvar_main("compare", "--db", tmp_path / "none.duckdb", cwd=tmp_path)
    assert r.returncode != 0 and "no such database" in r.stderr
    assert not (tmp_path / "none.duckdb").exists()


def test_a_study_exported_and_merged(study, tmp_path):
    """`tcpvar export --parquet --study` writes the study's runs and their
    captures; merged into an empty store, `tcpvar compare` says of it what
    it says of the original."""
    tmp, _ = study
    r = tcpvar_main("export", "--parquet", tmp_path / "grid", "--study", "grid", cwd=tmp)
    assert r.returncode == 0, r.stderr
    runs = sorted(p.name for p in (tmp_path / "grid" / "runs").iterdir())
    assert runs == ["study=grid"]
    assert len(list((tmp_path / "grid" / "flows").iterdir())) == 8
    r = tcpvar_main("merge", tmp_path / "grid", "--db", tmp_path / "m.duckdb")
    assert r.returncode == 0 and "8 runs and 16 captures copied" in r.stderr, r.stderr
    by = ("compare", "--study", "grid", "--by", "cc,rtt", "--json")
    original = json.loads(tcpvar_main(*by, cwd=tmp).stdout)["groups"]
    merged = json.loads(tcpvar_main(*by, "--db", tmp_path / "m.duckdb").stdout)["groups"]
    # the same groups and statistics; the run ids are the merged store's own
    assert [(g["key"], g["n"]) for g in merged] == [(g["key"], g["n"]) for g in original]
    for m, o in zip(merged, original):
        for stat in ("mean", "ci95"):
            assert m[stat] == {k: v if v is None else pytest.approx(v, rel=1e-9)
                               for k, v in o[stat].items()}


def test_a_shard_pair_merged_equals_the_whole(tmp_path):
    """Two shards of one study, each in a store of its own, merged into a
    third: the third holds the whole plan, each run as its shard stored it;
    and merged from their Parquet exports, the same."""
    grid = ("--name", "halves", "--cc", "cubic,reno", "--rtt", 20, "--duration", 2,
            "--bw", "10mbit", "--backend", "vm", "--json", "-q")
    parts = []
    for i in (1, 2):
        r = tcpvar_main("sweep", *grid, "--shard", f"{i}/2", "--db", f"part{i}.duckdb",
                        cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        runs = json.loads(r.stdout)["runs"]
        assert [x["other_shard"] for x in runs] == [i == 2, i == 1]
        parts.append(f"part{i}.duckdb")
    r = tcpvar_main("merge", *parts, "--db", "whole.duckdb", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    plan = json.loads(tcpvar_main("sweep", *grid, "--dry-run", "--db", "whole.duckdb",
                                  cwd=tmp_path).stdout)["runs"]
    assert all(x["skipped"] for x in plan) and len(plan) == 2
    again = tcpvar_main("merge", *parts, "--db", "whole.duckdb", cwd=tmp_path)
    assert "0 runs and 0 captures copied" in again.stderr

    def table(db):
        con = duckdb.connect(str(tmp_path / db), read_only=True)
        return sorted(con.execute(
            "SELECT r.name, r.cell, r.repetition, f.cc, s.packets, s.unique_bytes "
            "FROM runs r JOIN flows f USING (run_id) "
            "JOIN conn_stats s ON s.capture_id = r.sender_capture AND s.conn = f.conn "
            "WHERE r.study = 'halves'").fetchall())

    assert table("whole.duckdb") == sorted(table(parts[0]) + table(parts[1]))
    assert len(table("whole.duckdb")) == 4      # two runs, both directions of each
    # the same through Parquet: each shard exported, the folders merged
    for i, part in enumerate(parts, 1):
        r = tcpvar_main("export", "--parquet", f"parquet{i}", "--db", part, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    r = tcpvar_main("merge", "parquet1", "parquet2", "--db", "whole2.duckdb", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert table("whole2.duckdb") == table("whole.duckdb")
