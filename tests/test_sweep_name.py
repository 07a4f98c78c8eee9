"""`tcpvar sweep` without --name: a real netns study at tiny scale gets a
generated name, printed as one line on stderr, and the store (read with
DuckDB directly) and the run folders' manifests hold its runs under that
name; the same command resumes the study, other values name another."""
from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pytest

from conftest import tcpvar_main

TINY = ("--rtt", 0, "--buffer", 60, "--duration", 3, "--bw", "20mbit", "--backend", "netns")
PRINTED = re.compile(r"sweep: study named (\S+) \(give --name to choose one\)")


def _printed_name(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.startswith("sweep: study named")]
    assert len(lines) == 1, stderr
    m = PRINTED.fullmatch(lines[0])
    assert m, lines[0]
    return m.group(1)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sweep-name")
    args = ("sweep", "--cc", "reno,cubic", *TINY, "--repeat", 2,
            "--db", tmp / "s.duckdb", "--out", tmp / "runs")
    r = tcpvar_main(*args, "-q", cwd=tmp)
    assert r.returncode == 0, r.stderr
    return tmp, args, r


def test_name_is_printed_and_usable(study):
    _, _, r = study
    name = _printed_name(r.stderr)
    # usable as a --study value and a file name: no spaces, quotes or slashes;
    # the values sorted, in the options' order, whole words up to 40
    # characters (duration3 would pass 40), then the repeats and a digest
    assert re.fullmatch(r"[a-z0-9][a-z0-9._-]{0,79}", name), name
    assert re.fullmatch(r"cubic-reno-rtt0-bw20mbit-buffer60-r2-[0-9a-f]{6}", name), name


def test_store_holds_the_runs_under_it(study):
    tmp, _, r = study
    name = _printed_name(r.stderr)
    con = duckdb.connect(str(tmp / "s.duckdb"), read_only=True)
    rows = con.execute("SELECT r.study, r.status, r.repetition, f.cc, r.dir FROM runs r "
                       "JOIN flows f USING (run_id) WHERE f.role = 'test' "
                       "ORDER BY f.cc, r.repetition").fetchall()
    con.close()
    assert [(s, st, rep, cc) for s, st, rep, cc, _ in rows] == [
        (name, "complete", 1, "cubic"), (name, "complete", 2, "cubic"),
        (name, "complete", 1, "reno"), (name, "complete", 2, "reno")]
    # each run folder's own manifest says the same study and variant
    for _, _, _, cc, run_dir in rows:
        manifest = json.loads((Path(run_dir) / "manifest.json").read_text())
        assert manifest["study"]["name"] == name, run_dir
        assert [f["cc"] for f in manifest["flows"]] == [cc], run_dir


def test_same_command_resumes_under_the_same_name(study):
    tmp, args, r = study
    again = tcpvar_main(*args, "--json", "-q", cwd=tmp)
    assert again.returncode == 0, again.stderr
    assert _printed_name(again.stderr) == _printed_name(r.stderr)
    runs = json.loads(again.stdout)["runs"]
    assert len(runs) == 4 and all(e["skipped"] for e in runs)


def test_options_in_another_order_name_the_same_study(study, tmp_path):
    _, _, r = study
    again = tcpvar_main("sweep", "--bw", "20mbit", "--duration", 3, "--cc", "cubic,reno",
                        "--buffer", 60, "--rtt", 0, "--backend", "netns", "--repeat", 2,
                        "--dry-run", "--db", tmp_path / "s.duckdb", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert _printed_name(again.stderr) == _printed_name(r.stderr)


def test_other_values_name_another_study(tmp_path):
    r = tcpvar_main("sweep", "--cc", "reno,cubic", *TINY, "--repeat", 3, "--dry-run",
                    "--db", tmp_path / "s.duckdb", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert re.fullmatch(r"cubic-reno-rtt0-bw20mbit-buffer60-r3-[0-9a-f]{6}",
                        _printed_name(r.stderr))
