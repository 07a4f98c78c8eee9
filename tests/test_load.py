"""`tcpvar load`: run folders into a store, with the summary `tcpvar run`
prints; a folder stored once only; and the folders of a run whose storing
failed are named and load afterwards. Real netns runs without delay (the
host has no netem)."""
from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import duckdb
import pytest

from tcpvar.errors import ExitStatus, VmError
from tcpvar.pipelines.load import store_written

from conftest import tcpvar_main as tcpvar
from run_helpers import tcpvar_run

RUN = ("--backend", "netns", "--cc", "cubic", "--rtt", 0, "--buffer", 60, "--duration", 3,
       "--bw", "20mbit")
# the run's place in its store, not what its folder holds
STORE_IDS = {"run_id", "sender_capture", "bottleneck_capture"}


def load_json(db: Path, *dirs) -> tuple[int, dict | None, str]:
    res = tcpvar("load", "-q", "--json", "--db", db, *dirs)
    return res.returncode, json.loads(res.stdout) if res.stdout.strip() else None, res.stderr


def quiet(event) -> None:
    pass


def rows(db: Path, table: str) -> int:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


@pytest.fixture(scope="module")
def run_a(tmp_path_factory):
    """One run stored by `tcpvar run --json` into its store: (tmp, run document)."""
    tmp = tmp_path_factory.mktemp("load")
    rc, doc, err = tcpvar_run(tmp, *RUN)
    assert rc == 0, err
    (run,) = doc["runs"]
    assert run["status"] == "complete"
    return tmp, run


def test_load_gives_the_summary_run_gave(run_a, tmp_path):
    _, run = run_a
    rc, doc, err = load_json(tmp_path / "b.duckdb", run["dir"])
    assert rc == 0, err
    (loaded,) = doc["runs"]
    assert loaded["flows"] == run["flows"]          # throughput, rexmits, RTT, probe...
    assert loaded["flows"][0]["throughput_bps"]["pcap"] > 0
    assert loaded["flows"][0]["probe_events"] > 0
    assert {k: v for k, v in loaded.items() if k not in STORE_IDS} == \
        {k: v for k, v in run.items() if k not in STORE_IDS}


def test_loading_again_adds_nothing(run_a, tmp_path):
    _, run = run_a
    db = tmp_path / "b.duckdb"
    first = load_json(db, run["dir"])
    assert first[0] == 0, first[2]
    counts = {t: rows(db, t) for t in ("runs", "flows", "captures", "probe_events",
                                       "iperf_intervals", "qdisc_stats")}
    assert counts["runs"] == counts["flows"] == 1 and counts["captures"] == 2
    rc, doc, err = load_json(db, run["dir"])
    assert rc == 0 and doc == first[1]
    assert err.strip() == (f"{run['dir']}: already in the store as run "
                           f"{doc['runs'][0]['run_id']}; not loaded again")
    assert {t: rows(db, t) for t in counts} == counts


def test_text_output_is_the_one_of_run(tmp_path):
    """Piped, `tcpvar run` prints plain text; `tcpvar load` of its folder
    into another store prints the same lines (but the run's number)."""
    res = tcpvar("run", "-q", "--out", tmp_path / "runs", "--db", tmp_path / "a.duckdb", *RUN)
    assert res.returncode == 0, res.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    loaded = tcpvar("load", "-q", "--db", tmp_path / "b.duckdb", run_dir)
    assert loaded.returncode == 0 and loaded.stderr == ""

    def lines(text: str) -> list[str]:
        return [re.sub(r"^run \d+ \(", "run N (", ln) for ln in text.splitlines()]

    assert lines(loaded.stdout) == lines(res.stdout)
    assert len(lines(res.stdout)) >= 5 and f"artefacts: {run_dir}" in res.stdout


@pytest.mark.parametrize("manifest, words", [
    (None, "not a tcpvar run folder (no manifest.json)"),
    ("{\"flows\": [", "manifest.json: not valid JSON"),
    ("[1, 2]", "not the manifest of a tcpvar run"),
    ("{\"params\": {}, \"flows\": [{\"flow\": 1}]}", "not the manifest of a tcpvar run"),
])
def test_not_a_run_folder_one_line(tmp_path, manifest, words):
    folder = tmp_path / "folder"
    folder.mkdir()
    if manifest is not None:
        (folder / "manifest.json").write_text(manifest)
    res = tcpvar("load", "--db", tmp_path / "t.duckdb", folder)
    assert res.returncode == ExitStatus.BAD_INPUT
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith(f"tcpvar: error: {folder}") and words in line, line
    assert res.stdout == "" and not (tmp_path / "t.duckdb").exists()


def test_good_folder_beside_a_bad_one_still_loads(run_a, tmp_path):
    _, run = run_a
    db = tmp_path / "b.duckdb"
    rc, doc, err = load_json(db, tmp_path / "missing", run["dir"])
    assert rc == ExitStatus.BAD_INPUT
    assert err.strip() == f"tcpvar: error: {tmp_path / 'missing'}: no such folder"
    assert [r["dir"] for r in doc["runs"]] == [run["dir"]]
    assert rows(db, "runs") == 1


def test_a_run_that_never_finished_loads_as_incomplete(run_a, tmp_path):
    """The folder of a run whose host or guest went away keeps the manifest
    written when it started (status running): a copy of a real run's folder
    with that manifest."""
    _, run = run_a
    folder = tmp_path / "unfinished"
    shutil.copytree(run["dir"], folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest.update(status="running", error=None, ended_ns=None)
    (folder / "manifest.json").write_text(json.dumps(manifest))
    db = tmp_path / "b.duckdb"
    rc, doc, err = load_json(db, folder)
    assert rc == 0, err
    assert err.strip() == (f"warning: {folder}: the run is incomplete (its manifest says "
                           f"running: it never finished); loaded what is there")
    (loaded,) = doc["runs"]
    assert loaded["status"] == "running" and loaded["flows"] == run["flows"]
    res = tcpvar("load", "-q", "--db", db, folder)      # its summary, printed again
    assert res.stdout.splitlines()[0].endswith(" — INCOMPLETE")


def test_store_failure_after_the_run_names_the_folder(tmp_path):
    """The run completes, the store cannot be opened (a file that is not a
    DuckDB database): the error names the folder and the command that stores
    it; that command gives the run's summary."""
    junk = tmp_path / "junk.duckdb"
    junk.write_text("not a database\n")
    res = tcpvar("run", "-q", "--json", "--out", tmp_path / "runs", "--db", junk, *RUN)
    assert res.returncode == ExitStatus.STORE and res.stdout == ""
    (line,) = res.stderr.strip().splitlines()
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert line.startswith(f"tcpvar: error: cannot open store {junk}")
    assert f"the run folder is complete but was not stored: {run_dir}; " \
           f"load it with `tcpvar load {run_dir}`" in line
    command = shlex.split(re.search(r"`tcpvar (load [^`]+)`", line).group(1))
    rc, doc, err = load_json(tmp_path / "good.duckdb", *command[1:])
    assert rc == 0, err
    (run,) = doc["runs"]
    assert run["dir"] == str(run_dir) and run["status"] == "complete"
    assert run["flows"][0]["throughput_bps"]["iperf3"] > 0


def test_guest_failure_still_stores_what_was_written(run_a, tmp_path):
    """What `tcpvar run` does when the micro-VM fails after a run wrote its
    folder: the folder is stored, and the error says so (same status)."""
    _, run = run_a
    folder = tmp_path / "written"
    shutil.copytree(run["dir"], folder)
    db = tmp_path / "b.duckdb"
    with pytest.raises(VmError) as caught:
        store_written(str(db), [str(folder)], VmError("the micro-VM said nothing"), quiet)
    assert str(caught.value) == (f"the micro-VM said nothing; what the runs wrote is stored: "
                                 f"run 1 from {folder} (complete)")
    assert rows(db, "runs") == 1
    with pytest.raises(VmError) as caught:      # and when the store cannot take it either
        store_written(str(tmp_path), [str(folder)], VmError("the micro-VM said nothing"),
                       quiet)
    assert str(caught.value).startswith("the micro-VM said nothing; the run folder is "
                                        "complete but was not stored (store ")
    assert str(caught.value).endswith(f"load it with `tcpvar load {folder}`")
