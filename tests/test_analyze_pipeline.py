"""What pipelines/analyze.py decides for `tcpvar analyze`: the error policy
per file and the JSON it assembles, held to tshark's counts."""
from __future__ import annotations

import json
import subprocess

from conftest import FIXTURES, error_lines, tcpvar_main

BAD = FIXTURES / "bad"


def _tshark(path, *fields) -> list[str]:
    args = [a for f in fields for a in ("-e", f)]
    return subprocess.run(["tshark", "-n", "-r", str(path), "-T", "fields", *args],
                          capture_output=True, text=True, check=True).stdout.splitlines()


def test_one_failing_file_is_the_commands_error(tmp_path):
    """Alone, a file's error is the command's: one line, its status, and
    nothing on stdout (no JSON of zero captures)."""
    res = tcpvar_main("analyze", "--db", tmp_path / "s.duckdb", "--json", BAD / "empty.pcap")
    assert res.returncode == 3
    assert res.stdout == ""
    assert len(error_lines(res.stderr)) == 1 and "empty file" in res.stderr


def test_json_gathers_each_capture_and_its_connections(tmp_path):
    files = [FIXTURES / "ngwa_flows.pcap", FIXTURES / "vlan.pcap"]     # the first: not all TCP
    res = tcpvar_main("analyze", "--db", tmp_path / "s.duckdb", "--json", "-j", 1, *files)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    frames = [len(_tshark(f, "frame.number")) for f in files]
    streams = [len(set(_tshark(f, "tcp.stream")) - {""}) for f in files]
    assert [c["frames"] for c in doc["captures"]] == frames
    assert all("connections" not in c for c in doc["captures"])
    per_capture = [sum(c["capture"] == cap["path"] for c in doc["connections"])
                   for cap in doc["captures"]]
    assert per_capture == streams
    assert doc["summary"]["captures_read"] == 2 and doc["summary"]["packets"] == sum(frames)


def test_the_tables_rows_are_the_conn_stats_views(store, analyzed):
    """The printed table reads its rows by sql/connection_brief.sql, which
    computes from the tables what the conn_stats view computes: on every
    capture of ours and the shared collection, its columns are connections.sql's
    endpoints and SUMMARY_STATS, in that query's order, with the same values."""
    from tcpvar.analyzers.connections import ENDS, SUMMARY_STATS
    from tcpvar.analyzers.sqlfiles import sql

    from conftest import OWN_CAPTURES, SHARED_CAPTURES

    analyzed(OWN_CAPTURES[0])           # every capture into the session's store
    ids = [r[0] for r in store.con.execute("SELECT capture_id FROM captures").fetchall()]
    assert len(ids) >= len(OWN_CAPTURES + SHARED_CAPTURES) // 2
    rows = 0
    for capture_id in ids:
        params = {"capture_id": capture_id, "first_conn": 1, "last_conn": 2**31}
        full = store.con.execute(sql("connections"), params)
        names = [d[0] for d in full.description]
        every = full.fetchall()
        brief = store.con.execute(sql("connection_brief"), params)
        kept = [d[0] for d in brief.description]
        assert kept == [n for n in names if n in {*ENDS, *SUMMARY_STATS}]
        assert brief.fetchall() == [tuple(r[names.index(n)] for n in kept) for r in every]
        rows += len(every)
    assert rows > 500                   # 680 today: the comparison is not vacuous
