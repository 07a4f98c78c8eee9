"""tcp_probe recording on this host: the eBPF hook (hooks/tcp_probe_ext)
against the stock tracepoint and `ss`, the probe ingest and views, and
`tcpvar probe`. Real namespaces, iperf3, tracefs and BPF; needs root."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import probe_scenario as ps
from tcpvar.analyzers.probe import rto_stats, timeouts
from tcpvar.artefacts import probe_record
from tcpvar.capture import probe
from tcpvar.errors import InputError, ProbeError
from tcpvar.ingest.probe import load_probe
from tcpvar.store import Store

pytestmark = pytest.mark.slow


def _tracefs_instances() -> set[str]:
    return {p.name for p in (probe.tracefs_root() / "instances").iterdir()
            if p.name.startswith("tcpvar-")}


def _our_netns() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.startswith("tcpvar-")}


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    """The probe scenario once: the hook and the stock tracepoint side by side."""
    before_inst, before_ns = _tracefs_instances(), _our_netns()
    out = tmp_path_factory.mktemp("probe")
    res = ps.run(out)
    res["out"] = out
    res["leftover_instances"] = _tracefs_instances() - before_inst
    res["leftover_netns"] = _our_netns() - before_ns
    return res


def test_hook_builds_and_loads():
    built = probe.prepare()
    assert built.tool is not None, built.reason
    assert probe.prepare().tool == built.tool          # cached: same loader
    for attach in ("tp_btf", "raw_tp"):
        res = subprocess.run([str(built.tool), "--check", "--attach", attach, "--port", "5201"],
                             capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        # the HZ the hook converts jiffies with is the kernel's own
        assert json.loads(res.stdout) == {"attach": attach, "hz": ps.kernel_hz()}


def test_hook_takes_a_port_per_flow():
    """tcpvar runs up to 256 flows, and a run filters its probe by their
    ports: the hook loads with its limit (1024, a bitmap in the program)
    and refuses one more in one line."""
    built = probe.prepare()
    ports = [str(p) for p in range(30000, 30000 + probe.MAX_PORTS + 1)]
    args = [str(built.tool), "--check", "--attach", "tp_btf"]
    ok = subprocess.run([*args, *(x for p in ports[:-1] for x in ("--port", p))],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    refused = subprocess.run([*args, *(x for p in ports for x in ("--port", p))],
                             capture_output=True, text=True)
    assert refused.returncode == 2 and "at most 1024 ports" in refused.stderr, refused.stderr
    with pytest.raises(ProbeError, match="at most 1024 ports"):
        probe.open_probe(Path("."), list(range(30000, 30000 + probe.MAX_PORTS + 1)))


def test_auto_prefers_the_hook_here(tmp_path):
    rec = probe.open_probe(tmp_path, [5201])
    assert rec.source == "bpf"
    assert "tp_btf/tcp_probe" in rec.reason


def test_nothing_lost(scenario):
    """At these rates the ring buffer keeps up and nothing recurses; what the
    kernel skipped without a miss shows as unseen segments (docs/probe.md)."""
    hook = scenario["hook"]
    assert hook["ringbuf_full"] == 0
    assert hook["recursion_misses"] == 0
    assert hook["lost"] == hook["unseen"] <= 0.01 * hook["events"]
    assert scenario["stock"]["lost"] == 0
    assert hook["events"] == hook["submitted"] > 1000


def test_hook_matches_stock_tracepoint(scenario):
    """Same socket, same sequence numbers, same time (within µs): the same
    cwnd, ssthresh, srtt, windows and addresses."""
    same = scenario["same_events"]
    assert same["mismatched"] == 0, same["examples"]
    assert same["hook_only"] == 0
    assert same["paired"] == scenario["hook"]["events"]
    # the kernel now and then runs the tracepoint's trace event but not the
    # BPF program (docs/probe.md): each such event is counted in unseen
    assert same["stock_only"] <= scenario["hook"]["unseen"]


def test_rto_and_rttvar_agree_with_ss(scenario):
    ss = scenario["ss"]
    assert ss["samples"] >= 5
    assert ss["rto_ok"] == ss["samples"], ss["examples"]
    assert ss["rttvar_ok"] == ss["samples"], ss["examples"]
    assert ss["srtt_ok"] == ss["samples"], ss["examples"]


def test_rto_is_the_stock_one_of_srtt_and_rto_var(scenario):
    """Wherever the timer has not backed off, the RTO the hook read is what
    the stock tcp_set_rto() computes from the srtt and rto_var it read."""
    stock = scenario["stock_rto"]
    assert stock["events"] > 1000
    assert stock["same"] == stock["events"], stock["examples"]


def test_timeouts_show_loss_state(scenario):
    loss = scenario["loss"]
    assert loss["loss_events"] >= 1
    assert loss["max_backoff"] >= 1 and loss["max_retransmits"] >= 1
    assert loss["total_retrans"] > 0
    units = scenario["units"]
    assert units["rto_min_us"] >= 200_000        # Linux's minimum RTO, in µs
    assert units["rto_us_whole_jiffies"]         # in jiffies of the kernel's HZ


def test_ingest_and_rto_views(scenario, tmp_path):
    out, flow = scenario["out"], scenario["data_flow"]
    with Store(tmp_path / "t.duckdb") as store:
        n = load_probe(store, 7, out / "bpf" / probe.CSV_NAME,
                       [(1, flow["saddr"], flow["sport"], flow["daddr"], flow["dport"])])
        assert n == scenario["hook"]["events"]
        by_flow = dict(store.con.execute(
            "SELECT flow, count(DISTINCT cookie) FROM probe_events GROUP BY flow").fetchall())
        # the sender's socket and the receiver's (the other orientation) are flow 1
        assert by_flow[1] == 2
        stats = rto_stats(store, 7, senders_only=True)
        sender = next(s for s in stats if s["cookie"] == scenario["data_cookie"])
        assert sender["flow"] == 1 and sender["timeouts"] >= 1 and sender["max_backoff"] >= 1
        assert sender["rto_max_ms"] >= 2 * sender["rto_min_ms"]
        assert sender["retransmissions"] == scenario["loss"]["total_retrans"] - min(
            int(r["total_retrans"]) for r in ps.read_csv(out / "bpf" / probe.CSV_NAME)
            if int(r["cookie"]) == scenario["data_cookie"])
        tos = [t for t in timeouts(store, 7) if t["cookie"] == scenario["data_cookie"]]
        assert tos, "the blackhole must show as a stay in Loss"
        first = tos[0]
        assert first["flow"] == 1 and first["max_backoff"] >= 1 and first["timeouts"] >= 1
        assert first["silence_ms"] >= 1000               # the path was cut for 1.5 s
        assert first["retransmissions"] >= 1
        assert first["rto_ms"] >= 400                     # backed off at least once
        # the stock tracepoint's record loads too, without the extended columns
        m = load_probe(store, 8, out / "tracefs" / probe.CSV_NAME, [])
        assert m == scenario["stock"]["events"]
        assert store.con.execute("SELECT count(rto_us), count(snd_cwnd) FROM probe_events "
                                 "WHERE run_id = 8").fetchone() == (0, m)


@pytest.mark.parametrize("missing", [["rto_var_us"], ["rto_var_us", "wbrto_cwnd"]])
def test_older_records_load(scenario, tmp_path, missing):
    """A record written before a column was added (probe_record.ADDED)
    loads, every event with it, the missing column empty."""
    rows = ps.read_csv(scenario["out"] / "bpf" / probe.CSV_NAME)
    names = [c for c in probe_record.NAMES if c not in missing]
    path = tmp_path / probe.CSV_NAME
    path.write_text(",".join(names) + "\n" + "".join(
        ",".join(r[c] for c in names) + "\n" for r in rows))
    with Store(tmp_path / "t.duckdb") as store:
        assert load_probe(store, 1, path, []) == len(rows)
        got = store.con.execute("SELECT count(rto_var_us), sum(srtt_us) FROM probe_events"
                                ).fetchone()
    assert got == (0, sum(int(r["srtt_us"]) for r in rows))


def test_cleanup(scenario):
    assert not scenario["leftover_instances"]
    assert not scenario["leftover_netns"]
    assert not (scenario["out"] / "tracefs" / "tcp_probe.trace").exists()
    doc = json.loads((scenario["out"] / "bpf" / probe.JSON_NAME).read_text())
    assert doc["source"] == "bpf" and doc["filter"]["ports"] == [ps.PORT]


def test_load_probe_bad_input(tmp_path):
    with Store(tmp_path / "t.duckdb") as store:
        with pytest.raises(InputError, match="no such probe record"):
            load_probe(store, 1, tmp_path / "missing.csv", [])
        bad = tmp_path / "bad.csv"
        bad.write_text("a,b\n1,2\n")
        with pytest.raises(InputError, match="not a tcp_probe record"):
            load_probe(store, 1, bad, [])
        broken = tmp_path / "broken.csv"
        broken.write_text(probe_record.header() + "x," * 30 + "y\n")
        with pytest.raises(InputError, match="cannot load"):
            load_probe(store, 1, broken, [])


def test_open_probe_refusals(tmp_path):
    with pytest.raises(ProbeError, match="unknown probe source"):
        probe.open_probe(tmp_path, [1], prefer="perf")
    with pytest.raises(ProbeError, match="no extended fields"):
        probe.open_probe(tmp_path, [1], prefer="tracefs-ext")
    with pytest.raises(ProbeError, match="bad port"):
        probe.open_probe(tmp_path, [70000])


def test_falls_back_to_stock_tracepoint(tmp_path, monkeypatch):
    """Without a usable hook, auto takes the stock tracepoint and says why."""
    monkeypatch.setenv("TCPVAR_PROBE_TOOL", str(tmp_path / "no-such-tool"))
    rec = probe.open_probe(tmp_path, [5201])
    assert rec.source == "tracefs"
    assert "TCPVAR_PROBE_TOOL" in rec.reason
    with pytest.raises(ProbeError, match="eBPF hook cannot be used"):
        probe.open_probe(tmp_path, [5201], prefer="bpf")


def _tcpvar(*args, **kw):
    return subprocess.run([sys.executable, "-m", "tcpvar.cli", *args], capture_output=True,
                          text=True, **kw)


def test_cli_probe_records_into_store(tmp_path):
    port = 5301
    with ps.Dumbbell(rate=None) as net, ps.iperf_server(net, port):
        cli = subprocess.Popen([sys.executable, "-m", "tcpvar.cli", "probe", "--port", str(port),
                                "--duration", "4", "--dir", str(tmp_path / "p"), "--db",
                                str(tmp_path / "t.duckdb"), "--json"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first = cli.stderr.readline()          # said once recording has begun
        assert first.startswith("recording tcp_probe events from bpf"), first
        client = ps.iperf_client(net, 1.5, port=port)
        client.communicate(timeout=60)
        out, err = cli.communicate(timeout=60)
    assert cli.returncode == 0, err
    doc = json.loads(out)
    s = doc["session"]
    assert s["source"] == "bpf" and s["events"] == s["loaded"] > 100
    assert s["lost"] <= s["events"] / 1000      # unseen segments (docs/probe.md)
    assert s["status"] == "complete"
    assert any(r["dport"] == port and r["events"] > 100 for r in doc["sockets"])
    q = _tcpvar("query", "--db", str(tmp_path / "t.duckdb"), "--json",
                "SELECT kind, probe_source, probe_events FROM runs")
    assert json.loads(q.stdout) == [{"kind": "probe", "probe_source": "bpf",
                                     "probe_events": s["events"]}]
    assert (tmp_path / "p" / "tcp_probe.csv").exists()


def test_cli_probe_bad_input(tmp_path):
    cases = [
        (["--source", "tracefs-ext", "--duration", "1"], 9, "no extended fields"),
        (["--addr", "bogus", "--duration", "1"], 2, "not an IPv4 or IPv6 address"),
        (["--port", "0"], 2, "--port"),
        (["--duration", "-1"], 2, "--duration"),
        (["--dir", str(tmp_path / "file"), "--duration", "1"], 2, "is a file"),
        (["--db", str(tmp_path), "--duration", "1"], 5, "is a directory"),
    ]
    (tmp_path / "file").write_text("x")
    for args, status, text in cases:
        args = args if "--db" in args else args + ["--db", str(tmp_path / "t.duckdb")]
        res = _tcpvar("probe", *args, cwd=tmp_path)
        assert res.returncode == status, (args, res.stderr)
        assert text in res.stderr, (args, res.stderr)
        assert "Traceback" not in res.stderr
        if status != 2:
            assert len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_cli_probe_not_root():
    """Everything imported first, then privileges dropped, as for a user."""
    tmp_path = Path(tempfile.mkdtemp(prefix="tcpvar-probe-", dir="/tmp"))
    os.chmod(tmp_path, 0o777)
    code = ("import os, sys\n"
            "import tcpvar.cli.main as m, tcpvar.cli.probe, tcpvar.pipelines.probe, "
            "tcpvar.capture.probe, tcpvar.store, tcpvar.report.tabular, tcpvar.report.tables, "
            "tcpvar.analyzers.probe, tcpvar.ingest.probe, rich.console, rich.measure, duckdb\n"
            "os.setgid(65534); os.setuid(65534)\n"
            f"sys.exit(m.main(['probe', '--duration', '1', '--db', '{tmp_path}/t.duckdb', "
            f"'--dir', '{tmp_path}/p']))\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path)
    shutil.rmtree(tmp_path)
    assert res.returncode == 9, res.stderr
    assert "root" in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
