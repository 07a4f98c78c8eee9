"""The tcpvar command as users run it: help, exit statuses, one-line errors
for bad input, JSON/CSV contracts, the store's idempotency, query (figures: test_figures.py).
Most cases call the command in this process (conftest.tcpvar_main); the
smoke tests start it as a user does, `python -m tcpvar.cli`."""
from __future__ import annotations

import csv
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tcpvar.ingest import _pcapscan

import peers
from conftest import FIXTURES, error_lines, on_a_terminal, read_terminal, tcpvar_process
from conftest import tcpvar_main as tcpvar

BAD = FIXTURES / "bad"


@pytest.fixture
def db(tmp_path):
    return tmp_path / "t.duckdb"


@pytest.mark.parametrize("args", [[], ["analyze"], ["query"]])
def test_help_reads_well(args):
    res = tcpvar_process(*args, "--help")
    assert res.returncode == 0
    assert "Usage: tcpvar" in res.stdout
    assert "Examples" in res.stdout


def test_version():
    res = tcpvar_process("--version")
    assert res.returncode == 0 and res.stdout.startswith("tcpvar ")


def _entry_after(setup: str, *args: str) -> subprocess.CompletedProcess:
    """The tcpvar command (cli.start.entry) in a process of its own, after
    the Python of @setup has run in it."""
    code = f"import sys\n{setup}\nsys.argv = ['tcpvar', *{list(args)!r}]\n" \
           "from tcpvar.cli.start import entry\nentry()\n"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # as users run it
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=60)


def test_the_exit_runs_atexit_handlers_and_flushes_what_they_print():
    # entry() ends without Python's teardown (os._exit): what a normal
    # exit does that matters must still happen, in its order
    res = _entry_after("import atexit\n"
                       "atexit.register(lambda: print('handler ran', end=''))", "--version")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("tcpvar ") and res.stdout.endswith("handler ran")


def test_the_exit_waits_for_a_thread_still_running(tmp_path):
    done = tmp_path / "done"
    res = _entry_after("import threading, time, pathlib\n"
                       "threading.Thread(target=lambda: (time.sleep(0.5), "
                       f"pathlib.Path({str(done)!r}).write_text('x'))).start()",
                       "analyze", "--db", str(tmp_path / "t.duckdb"),
                       str(FIXTURES / "does-not-exist.pcap"))
    assert res.returncode == 3, res.stderr
    assert done.read_text() == "x"


def test_ctrl_c_as_the_command_is_imported(tmp_path):
    """A Ctrl-C while Python imports Click (here raised as Click's import
    begins): one line and exit 130, not a traceback."""
    res = _entry_after("class Stop:\n"
                       "    def find_spec(self, name, path=None, target=None):\n"
                       "        if name == 'click':\n"
                       "            raise KeyboardInterrupt\n"
                       "sys.meta_path.insert(0, Stop())",
                       "analyze", "--db", str(tmp_path / "t.duckdb"), str(FIXTURES / "vlan.pcap"))
    assert res.returncode == 130, res.stderr
    assert res.stderr == "tcpvar: error: interrupted\n"


@pytest.mark.parametrize("path, status, words", [
    (FIXTURES / "does-not-exist.pcap", 3, "no such file"),
    (FIXTURES, 3, "is a directory"),
    (BAD / "empty.pcap", 3, "empty file"),
    (BAD / "garbage.pcap", 3, "not a pcap or pcapng capture"),
    (BAD / "garbage.pcap.gz", 3, "not a pcap or pcapng capture"),   # was closed twice
    (BAD / "truncated_header.pcap", 3, "truncated capture header"),
    (BAD / "unknown_linktype.pcap", 3, "unsupported link type 147"),
    (BAD / "udp_only.pcap", 4, "no TCP segments in 5 frames"),
    (FIXTURES / "pcapng_mixed_linktypes.pcapng", 3, "different link types"),
])
def test_bad_input_one_line(path, status, words, db):
    res = tcpvar("analyze", "--db", db, path)
    assert res.returncode == status, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in res.stderr
    assert res.stdout == ""


def test_table_read_in_batches(db, tmp_path, monkeypatch):
    """The table of connections DuckDB lays out is read from the store a
    batch at a time: with one connection a batch, the same lines, field for
    field, as when they are read at once, under one heading (columns widen
    where a later batch needs it)."""
    from tcpvar.analyzers import connections
    from tcpvar.cli import analyze

    capture = FIXTURES / "iperf_4flows.pcap"
    monkeypatch.setattr(analyze, "LAID_OUT_HERE", 0)
    whole = tcpvar("analyze", "--db", db, capture)
    monkeypatch.setattr(connections, "BATCH", 1)
    batched = tcpvar("analyze", "--db", tmp_path / "other.duckdb", capture)
    assert whole.returncode == batched.returncode == 0
    def fields(text: str) -> list[list[str]]:       # the rule under the heading aside
        return [line.split() for line in text.splitlines() if not line.startswith("-")]
    assert fields(batched.stdout) == fields(whole.stdout)
    assert batched.stdout.count(" TCP connections") == 1
    assert len(whole.stdout.splitlines()) == 4 + 3 * 6 - 1


def _si(value: float, unit: str) -> str:
    """3 significant digits with an SI prefix, worked here as the table's
    heading promises: 1234567 B -> '1.23 MB'."""
    for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


@pytest.mark.parametrize("laid_out_here", [500, 0], ids=["python", "duckdb"])
@pytest.mark.parametrize("name", ["iperf_4flows.pcap", "iperf_ipv6.pcap"])
def test_table_agrees_with_tcptrace(name, laid_out_here, db, monkeypatch):
    """The plain-text table (piped) against `tcptrace -l -r -n`, per
    connection and direction: endpoints, packets, data packets and bytes,
    unique bytes, retransmitted packets and bytes, out-of-order packets, RTT
    samples and average (tcptrace: sum / (n + .0001), %.1f), and goodput
    (tcptrace's throughput in bytes/s, %.0f: within its rounding and the
    table's 3 digits). Laid out in Python (a few connections) and by DuckDB
    (many)."""
    from tcpvar.cli import analyze

    monkeypatch.setattr(analyze, "LAID_OUT_HERE", laid_out_here)
    capture = FIXTURES / name
    res = tcpvar("analyze", "--db", db, capture)
    assert res.returncode == 0, res.stderr
    rows = [re.split(r"\s{2,}", line.strip()) for line in res.stdout.splitlines()[4:] if line]
    theirs = peers.tcptrace(str(capture))
    assert len(rows) == 2 * len(theirs)
    for k, conn in enumerate(theirs):
        for d, (src, dst) in enumerate([("a", "b"), ("b", "a")]):
            row = rows[2 * k + d][1 - d:] if d == 0 else rows[2 * k + d]
            t = conn["a2b" if d == 0 else "b2a"]
            ends = [peers.endpoint(e) for e in row[0].split(" → ")]
            assert ends == [conn[src], conn[dst]]
            n = peers.number
            assert row[1:4] == [t["total packets"], t["actual data pkts"],
                                _si(n(t["actual data bytes"]), "B")]
            assert row[4:7] == [_si(n(t["unique bytes sent"]), "B"), t["rexmt data pkts"],
                                _si(n(t["rexmt data bytes"]), "B")]
            assert row[7] == t["outoforder pkts"]
            avg, samples = re.fullmatch(r"(\S+) \((\d+)\)", row[10]).groups()
            assert samples == t["RTT samples"]
            if int(samples):
                exact = n(t["RTT avg"]) * (int(samples) + .0001) / int(samples)
                assert abs(float(avg) - exact) <= 0.05 + 1e-3
            value, unit = row[12].split()
            goodput = float(value) * {"bit/s": 1, "kbit/s": 1e3, "Mbit/s": 1e6}[unit]
            assert abs(goodput - 8 * n(t["throughput"])) <= 0.005 * goodput + 4


def test_table_on_a_terminal(db):
    """On a terminal the table is Rich's, at its natural width in an
    80-column terminal: every connection and direction on one line, its
    endpoints and its packets as `tcptrace -l -r -n` counts them."""
    capture = FIXTURES / "iperf_4flows.pcap"
    status, out, err = on_a_terminal("analyze", "--db", db, capture)
    assert status == 0, err
    text = re.sub(r"\x1b\[[0-9;]*m", "", out)     # the terminal's colours
    assert "━━" in text and "…" not in text
    theirs = peers.tcptrace(str(capture))
    for conn in theirs:
        for src, dst, d in (("a", "b", "a2b"), ("b", "a", "b2a")):
            line = next(line for line in text.splitlines()
                        if (ends := re.search(r"(\S+:\d+) → (\S+:\d+)", line))
                        and [peers.endpoint(e) for e in ends.groups()] == [conn[src], conn[dst]])
            cells = re.split(r"\s{2,}", line.strip())
            packets = cells[cells.index(next(c for c in cells if " → " in c)) + 1]
            assert packets == conn[d]["total packets"]


# analyze with its progress on a pseudo-terminal, the bar's delay set first
BAR_AFTER = """
import sys
from tcpvar.cli import start
from tcpvar.report import terminal
import rich.progress    # as a long command has it by the time its bar starts
terminal.BAR_AFTER_S = float(sys.argv[1])
sys.exit(start.run(sys.argv[2:]))
"""


def progress_on_a_terminal(after_s: float, *args) -> str:
    """What `tcpvar analyze ARGS` writes to stderr on a pseudo-terminal,
    its bar shown after @after_s."""
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", BAR_AFTER, str(after_s), "analyze",
                             *map(str, args)], stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    err = read_terminal(master)
    assert proc.wait(timeout=120) == 0, err
    return err.decode()


def test_a_progress_bar_only_for_work_that_lasts(tmp_path):
    """A capture read in less than the bar's delay shows no bar on the
    terminal (and its command never imports Rich's display); with no
    delay, the bar shows the file being read, and goes when done."""
    capture = FIXTURES / "iperf_4flows.pcap"
    # a delay no run of this capture comes near, however busy the machine
    assert "reading" not in progress_on_a_terminal(5, "--db", tmp_path / "a.duckdb", capture)
    shown = progress_on_a_terminal(0, "--db", tmp_path / "b.duckdb", capture)
    assert "reading" in shown, shown


@pytest.mark.parametrize("name", ["iperf_ipv6.pcap", "iperf_bulk_loss.pcap"])
def test_table_laid_out_alike_in_python_and_duckdb(name, db, tmp_path, monkeypatch):
    """The plain table is the same text, byte for byte, whether Python lays
    it out (up to LAID_OUT_HERE connections) or DuckDB does; also for a
    store whose counts are missing (NULL, somebody's store): '-'."""
    import duckdb

    from tcpvar.cli import analyze

    capture = FIXTURES / name
    other = tmp_path / "other.duckdb"
    texts = []
    for store, laid_out_here in ((db, 500), (other, 0)):
        monkeypatch.setattr(analyze, "LAID_OUT_HERE", laid_out_here)
        res = tcpvar("analyze", "--db", store, capture)
        with duckdb.connect(str(store)) as con:
            con.execute("UPDATE dir_counters SET packets = NULL, rto_events = NULL "
                        "WHERE conn = 1 AND dir = 0")
        again = tcpvar("analyze", "--db", store, capture)      # read back from the store
        assert res.returncode == again.returncode == 0
        texts.append((res.stdout, again.stdout))
    (here, here_nulls), (there, there_nulls) = texts
    assert " → " in here and here == there
    assert here_nulls != here and here_nulls == there_nulls
    assert re.search(r"^1  \S+ → \S+  +- ", here_nulls, re.M)
    assert re.search(r"  -/\d+  ", here_nulls)


def test_bad_input_keeps_what_is_stored(db):
    assert tcpvar_process("analyze", "--db", db, "-q", FIXTURES / "sll.pcap").returncode == 0
    res = tcpvar_process("analyze", "--db", db, BAD / "garbage.pcap")
    assert res.returncode == 3 and len(res.stderr.strip().splitlines()) == 1
    res = tcpvar_process("query", "--db", db, "--csv", "SELECT count(*) AS n FROM captures")
    assert res.stdout.splitlines() == ["n", "1"]


def test_several_files_report_each_failure(db):
    res = tcpvar("analyze", "--db", db, "--json", FIXTURES / "sll.pcap", BAD / "empty.pcap")
    assert res.returncode == 3
    assert len(json.loads(res.stdout)["captures"]) == 1
    assert "empty file" in res.stderr


def test_truncated_last_packet_is_reported_and_the_rest_analysed(db):
    res = tcpvar("analyze", "--db", db, "--json", FIXTURES / "truncated_last.pcap")
    assert res.returncode == 0
    assert "warning" in res.stderr and "ends inside a record" in res.stderr
    doc = json.loads(res.stdout)
    assert doc["captures"][0]["truncated"] and doc["captures"][0]["frames"] == 10
    assert sum(c["a2b"]["packets"] + c["b2a"]["packets"] for c in doc["connections"]) == 10


def test_json_contract(db):
    res = tcpvar("analyze", "--db", db, "--json", FIXTURES / "iperf_ipv6.pcap")
    doc = json.loads(res.stdout)
    conn = max(doc["connections"], key=lambda c: c["a2b"]["data_bytes"])
    assert conn["a"].startswith("[2001:db8:1::2]:") and conn["b"] == "[2001:db8:2::2]:5201"
    for direction in ("a2b", "b2a"):
        for key in ("packets", "data_packets", "data_bytes", "unique_bytes",
                    "retransmitted_packets", "retransmitted_bytes", "rtt_samples",
                    "rtt_avg_ms", "throughput_bps"):
            assert key in conn[direction]
    assert conn["a2b"]["retransmitted_packets"] > 0 and conn["a2b"]["throughput_bps"] > 1e6


def _csv_cell(value) -> str:
    """How the CSV writes a JSON value: null empty, numbers as Python prints them."""
    return "" if value is None else str(value)


def test_csv_is_the_json_and_tcptrace(db, tmp_path):
    """`analyze --csv`: one row per connection and direction, each cell the
    value `analyze --json` gives (a store of its own), and the figures
    tcptrace prints alike are tcptrace's."""
    from test_vs_tcptrace import FIELDS, exact, printed_ms

    path = FIXTURES / "iperf_4flows.pcap"
    res = tcpvar("analyze", "--db", db, "--csv", path)
    assert res.returncode == 0, res.stderr
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    doc = json.loads(tcpvar("analyze", "--db", tmp_path / "j.duckdb", "--json", path).stdout)
    assert len(rows) == 12                    # 6 connections x 2 directions
    assert {r["direction"] for r in rows} == {"a2b", "b2a"}
    conns = {c["id"]: c for c in doc["connections"]}
    assert sorted((int(r["conn"]), r["direction"]) for r in rows) == \
        [(n, d) for n in sorted(conns) for d in ("a2b", "b2a")]
    for row in rows:
        conn = conns[int(row["conn"])]
        stats = conn[row["direction"]]
        assert list(row) == ["capture", "conn", "a", "b", "direction", *stats]
        assert (row["capture"], row["a"], row["b"]) == (str(path), conn["a"], conn["b"])
        assert {k: row[k] for k in stats} == {k: _csv_cell(v) for k, v in stats.items()}
    # tcptrace's figures for the same directions, read from the CSV's cells
    by_ends = {(peers.endpoint(r["a"]), peers.endpoint(r["b"]), r["direction"]): r
               for r in rows}
    compared = nonzero = 0
    for t in peers.tcptrace(str(path)):
        for direction in ("a2b", "b2a"):
            row = by_ends[(t["a"], t["b"], direction)]
            for label, (field, check) in FIELDS.items():
                theirs = peers.number(t[direction].get(label, ""))
                if check not in (exact, printed_ms) or theirs is None:
                    continue
                assert check(float(row[field] or 0), theirs, None), (label, row[field], theirs)
                compared += 1
                nonzero += theirs != 0
    assert compared >= 12 * 25 and nonzero >= 12 * 5


def test_reanalysis_is_idempotent(db):
    path = FIXTURES / "iperf_4flows.pcap"
    first = json.loads(tcpvar("analyze", "--db", db, "--json", path).stdout)
    again = json.loads(tcpvar("analyze", "--db", db, "--json", path).stdout)
    forced = json.loads(tcpvar("analyze", "--db", db, "--json", "--force", path).stdout)
    assert again["captures"][0]["reused"] and not forced["captures"][0]["reused"]
    other = json.loads(tcpvar("analyze", "--db", db, "--json", "--rto-min", "100", path).stdout)
    assert not other["captures"][0]["reused"]            # other options: read again
    forced = json.loads(tcpvar("analyze", "--db", db, "--json", "--force", path).stdout)
    assert first["connections"] == again["connections"]
    strip = [{k: v for k, v in c.items()} for c in forced["connections"]]
    assert strip == first["connections"]
    res = tcpvar("query", "--db", db, "--json",
                 "SELECT (SELECT count(*) FROM captures) AS captures, "
                 "(SELECT count(*) FROM packets) AS packets, "
                 "(SELECT count(*) FROM connections) AS conns")
    counts = json.loads(res.stdout)[0]
    tshark_tcp = subprocess.run(["tshark", "-r", str(path), "-Y", "tcp", "-T", "fields",
                                 "-e", "frame.number"], capture_output=True, text=True)
    assert counts == {"captures": 1, "packets": len(tshark_tcp.stdout.split()), "conns": 6}


def test_stats_only_gives_the_same_statistics(db, tmp_path):
    path = FIXTURES / "iperf_bulk_loss.pcap"
    full = json.loads(tcpvar("analyze", "--db", db, "--json", path).stdout)
    lean = json.loads(tcpvar("analyze", "--db", tmp_path / "s.duckdb", "--json",
                             "--stats-only", path).stdout)
    assert lean["connections"] == full["connections"]
    res = tcpvar("query", "--db", tmp_path / "s.duckdb", "--csv", "SELECT count(*) FROM packets")
    assert res.stdout.splitlines()[1] == "0"


def test_query_formats_and_errors(db):
    tcpvar("analyze", "--db", db, "-q", FIXTURES / "rto_vs_fast.pcap")
    res = tcpvar("query", "--db", db, "--csv",
                 "SELECT kind, backoff FROM rto_timeline ORDER BY ts_ns")
    assert res.stdout.splitlines() == ["kind,backoff", "timeout,0", "timeout,1", "fast,0"]
    res = tcpvar("query", "--db", db, "SELECT nope FROM packets")
    assert res.returncode == 5 and len(res.stderr.strip().splitlines()) == 1
    res = tcpvar("query", "--db", db.parent / "missing.duckdb", "SELECT 1")
    assert res.returncode == 5 and "no such database" in res.stderr


def test_fairness_and_pair_printed(db):
    res = tcpvar("analyze", "--db", db, "--fairness", "--pair", "5:2",
                 FIXTURES / "iperf_4flows.pcap")
    assert res.returncode == 0
    assert "Jain's index over 4 flows" in res.stdout
    assert "friendliness of flow 5 against flow 2" in res.stdout
    res = tcpvar("analyze", "--db", db, "--pair", "9:2", FIXTURES / "iperf_4flows.pcap")
    assert res.returncode == 2 and "no connection 9" in res.stderr


def test_interrupted_load_leaves_nothing(tmp_path):
    """Ctrl-C in the middle of a load: the capture's rows are removed, what was
    stored before stays."""
    from tcpvar.ingest.capture import ingest
    from tcpvar.store import Store

    with Store(tmp_path / "i.duckdb") as store:
        ingest(store, FIXTURES / "sll.pcap")

        def interrupt(event):
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            ingest(store, FIXTURES / "iperf_bulk_loss.pcap", progress=interrupt)
        counts = store.con.execute(
            "SELECT (SELECT count(*) FROM captures), (SELECT count(DISTINCT capture_id) "
            "FROM packets), (SELECT count(*) FROM captures WHERE NOT complete)").fetchone()
    assert counts == (1, 1, 0)


def test_sigint_on_the_last_batch_is_not_lost(tmp_path):
    """A real SIGINT while the last batch is stored (it used to be forgotten
    there: the command went on and exited 0): the load stops and its rows
    go."""
    from tcpvar.ingest.capture import ingest
    from tcpvar.store import Store

    path = FIXTURES / "iperf_bulk_loss.pcap"
    size = path.stat().st_size
    sent = []

    def interrupt(event):
        if not sent and event.done == size:
            sent.append(event.done)
            os.kill(os.getpid(), signal.SIGINT)

    with Store(tmp_path / "i.duckdb") as store:
        with pytest.raises(KeyboardInterrupt):
            ingest(store, path, progress=interrupt)
        counts = store.con.execute(
            "SELECT (SELECT count(*) FROM captures), (SELECT count(*) FROM packets)").fetchone()
    assert sent and counts == (0, 0)


def test_store_drops_a_killed_load(tmp_path):
    """A process killed while loading leaves an incomplete capture, or
    packet segments whose capture row was never written: the next writer
    removes both."""
    import duckdb

    from tcpvar.store import Store

    path = tmp_path / "k.duckdb"
    Store(path).close()
    con = duckdb.connect(str(path))
    con.execute("INSERT INTO captures (capture_id, path, complete) VALUES (7, '/x.pcap', false)")
    for capture_id in (7, 8):
        folder = tmp_path / "k.duckdb.packets" / f"capture_id={capture_id}"
        folder.mkdir()
        con.execute(f"COPY (SELECT 1::UINTEGER AS frame UNION ALL SELECT 2) "
                    f"TO '{folder}/part-0.parquet' (FORMAT parquet)")
    con.close()
    with Store(path) as store:
        assert store.con.execute("SELECT count(*) FROM packets").fetchone()[0] == 0
        assert store.con.execute("SELECT count(*) FROM captures").fetchone()[0] == 0


def _wait_until_reading(proc: subprocess.Popen, path: Path, timeout_s: float = 60) -> None:
    """Until @proc has @path open or mapped: it is reading the capture (the
    store is opened before), whatever the machine's speed."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, "it ended before it was seen reading"
        try:
            fds = [os.readlink(f) for f in Path(f"/proc/{proc.pid}/fd").iterdir()]
            maps = Path(f"/proc/{proc.pid}/maps").read_text()
        except OSError:             # a descriptor closed while listed
            continue
        if str(path) in fds or str(path) in maps:
            return
        time.sleep(0.005)
    raise AssertionError(f"{path} was not opened within {timeout_s} s")


def _big_capture(tmp_path: Path, copies: int, name: str = "big.pcap") -> Path:
    """iperf_bulk_loss.pcap @copies times over: a load that lasts long enough
    to be signalled while it reads."""
    big = tmp_path / name
    subprocess.run(["mergecap", "-a", "-F", "pcap", "-w", str(big)]
                   + [str(FIXTURES / "iperf_bulk_loss.pcap")] * copies, check=True)
    return big


def test_ctrl_c_during_a_real_load(tmp_path, db):
    """SIGINT while a 2-million-packet capture loads: exit status 130, one
    line, and the store holds exactly what it held before."""
    big = _big_capture(tmp_path, 100)
    assert tcpvar("analyze", "--db", db, "-q", FIXTURES / "sll.pcap").returncode == 0
    proc = subprocess.Popen([sys.executable, "-m", "tcpvar.cli", "analyze", "--db", str(db),
                             "-q", str(big)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    _wait_until_reading(proc, big)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130
    assert err.strip().splitlines() == [
        "tcpvar: error: interrupted; the store keeps what was complete before"]
    res = tcpvar("query", "--db", db, "--csv",
                 "SELECT (SELECT count(*) FROM captures) AS c, "
                 "(SELECT count(DISTINCT capture_id) FROM packets) AS p")
    assert res.stdout.splitlines()[1] == "1,1"


def test_many_files_at_once(tmp_path, db):
    """--jobs 2 over several files: each stored once as a capture of its own
    with capinfos' frame count, a bad one reported in one line beside them,
    and the summary's packets are capinfos' too."""
    files = [FIXTURES / "iperf_4flows.pcap", FIXTURES / "sll.pcap",
             FIXTURES / "iperf_wrap.pcap.gz", FIXTURES / "iperf_4flows.pcap", BAD / "garbage.pcap"]
    res = tcpvar("analyze", "--db", db, "--json", "--jobs", "2", *files)
    assert res.returncode == 3, res.stderr
    assert error_lines(res.stderr) == [
        f"tcpvar: error: {BAD / 'garbage.pcap'}: not a pcap or pcapng capture"]
    frames = {str(p.resolve()): int(subprocess.run(
        ["capinfos", "-Mc", str(p)], capture_output=True, text=True,
        check=True).stdout.split()[-1]) for p in files[:3]}
    doc = json.loads(res.stdout)
    assert [c["path"] for c in doc["captures"]] == [str(p.resolve()) for p in files[:4]]
    assert {c["path"]: c["frames"] for c in doc["captures"]} == frames
    assert doc["summary"] | {"seconds": 0, "packets_per_s": 0} == {
        "captures_read": 3, "packets": sum(frames.values()), "seconds": 0,
        "packets_per_s": 0, "workers": 2}
    stored = tcpvar("query", "--db", db, "--csv",
                    "SELECT path, frames FROM captures WHERE complete ORDER BY path")
    assert stored.stdout.splitlines()[1:] == [f"{p},{n}" for p, n in sorted(frames.items())]


def test_ctrl_c_stops_every_worker(tmp_path, db):
    """SIGINT while two workers each load a capture: exit status 130, one
    line, and the store holds what it held before, no rows of either."""
    bigs = [_big_capture(tmp_path, 60, name) for name in ("one.pcap", "two.pcap")]
    assert tcpvar("analyze", "--db", db, "-q", FIXTURES / "sll.pcap").returncode == 0
    proc = subprocess.Popen([sys.executable, "-m", "tcpvar.cli", "analyze", "--db", str(db),
                             "-q", "--jobs", "2", *map(str, bigs)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for big in bigs:
        _wait_until_reading(proc, big)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130
    assert err.strip().splitlines() == [
        "tcpvar: error: interrupted; the store keeps what was complete before"]
    res = tcpvar("query", "--db", db, "--csv",
                 "SELECT (SELECT count(*) FROM captures) AS c, "
                 "(SELECT count(DISTINCT capture_id) FROM packets) AS p")
    assert res.stdout.splitlines()[1] == "1,1"


@pytest.mark.parametrize("kw, error", [({"rto_min_ms": float("nan")}, ValueError),
                                       ({}, _pcapscan.ScanError)])
def test_scanner_owns_its_descriptor(kw, error):
    """The native Scanner closes the descriptor it is given also when it
    refuses the arguments or the stream, so no caller closes it twice (the
    fuzzer's module target ran out of descriptors on the first)."""
    fd = os.memfd_create("capture")
    os.write(fd, (BAD / "garbage.pcap").read_bytes())
    os.lseek(fd, 0, os.SEEK_SET)
    with pytest.raises(error):
        _pcapscan.Scanner("<fd>", fd=fd, **kw)
    with pytest.raises(OSError, match="Bad file descriptor"):
        os.fstat(fd)


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGINT])
def test_a_signal_ignored_at_start_stays_ignored(tmp_path, db, sig):
    """`nohup tcpvar sweep` must outlive its terminal, and a script's
    background job its Ctrl-C: a signal ignored when tcpvar starts is not
    taken up by its handlers. The load goes on and the capture is stored."""
    big = _big_capture(tmp_path, 20)
    frames = int(subprocess.run(["capinfos", "-Mc", str(big)], capture_output=True,
                                text=True, check=True).stdout.split()[-1])
    proc = subprocess.Popen([sys.executable, "-m", "tcpvar.cli", "analyze", "--db", str(db),
                             "-q", str(big)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(sig, signal.SIG_IGN))
    _wait_until_reading(proc, big)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    res = tcpvar("query", "--db", db, "--csv", "SELECT frames FROM captures WHERE complete")
    assert res.stdout.splitlines()[1:] == [str(frames)]


@pytest.mark.parametrize("args", [
    ["analyze", "--interval", "{}", FIXTURES / "sll.pcap"],
    ["analyze", "--rto-min", "{}", FIXTURES / "sll.pcap"],
    ["analyze", "--hw-dups", "{}", FIXTURES / "sll.pcap"],
    ["plot", "throughput", FIXTURES / "sll.pcap", "--from", "{}"],
    ["plot", "throughput", FIXTURES / "sll.pcap", "--bin", "{}"],
    ["probe", "--duration", "{}"],
    ["run", "--backend", "netns", "--mode", "fairness", "--start-gap", "{}"],
    ["run", "--backend", "netns", "--boot-timeout", "{}"],
    ["sweep", "--name", "s", "--dry-run", "--start-gap", "{}"],
    ["sweep", "--name", "s", "--dry-run", "--bw-schedule", "0:10mbit,{}:5mbit"],
    ["sweep", "--name", "s", "--dry-run", "--loss", "{}"],
])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_non_finite_numbers_are_refused(args, value, db):
    """nan passes every range check and inf overflows C's integers: both are
    refused in one line before anything runs."""
    res = tcpvar(*[str(a).format(value) for a in args], "--db", db)
    assert res.returncode == 2, res.stderr
    assert len(error_lines(res.stderr)) == 1 and "Traceback" not in res.stderr, res.stderr
