"""Flows whose connection comes late or never (netns backend): a run of
three flows where the test blackholes flows 2 and 3 at the bottleneck
router before they start and lets flow 3 through a few seconds later. The
run completes; flow 2 is recorded as never connected and flow 3 as cut at
its planned end, by iperf3's own reports and by tshark on the capture."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from tshark_truth import count, fields

from run_helpers import assert_nothing_left, namespaces, run_command

DURATION_S = 22
GAP_S = 1.0
# flow 3 starts at 2 s for 20 s: its planned end is at 22 s, its deadline at
# 37 s (runner.END_GRACE_S later, with no added delay). The test spaces its
# SYN retries by doubling (tcp_syn_linear_timeouts=0 in its namespace; the
# kernel's linear first four, 1 s apart, give up by 20 s): 3, 5, 9, 17, 33
# s. Let through at 20 s, it connects at 33 s and would run 20 s more, past
# its deadline.
LET_THROUGH_S = 20.0


def _manifest(runs: Path) -> dict | None:
    for path in runs.glob("*/manifest.json"):
        try:
            return json.loads(path.read_text())
        except ValueError:          # being written
            return None
    return None


def _rl(runs: Path) -> str | None:
    m = _manifest(runs)
    if not m:
        return None
    ns = f"tcpvar-{m['tag']}-rl"
    return ns if ns in namespaces() else None


def _route(ns: str, verb: str, addr: str) -> None:
    subprocess.run(["ip", "-n", ns, "route", verb, "blackhole", f"{addr}/32"], check=True)


@pytest.fixture(scope="module")
def late_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("late")
    runs = tmp / "runs"
    proc = subprocess.Popen(run_command(tmp, ["--backend", "netns", "--cc", "cubic,cubic,cubic",
                                           "--rtt", 0, "--bw", "20mbit", "--buffer", 60,
                                           "--duration", DURATION_S, "--start-gap", GAP_S]),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while (rl := _rl(runs)) is None:
            assert time.monotonic() < deadline and proc.poll() is None, "no testbed"
            time.sleep(0.02)
        m = _manifest(runs)
        blocked = {f["flow"]: f["dst_addr"] for f in m["flows"] if f["flow"] in (2, 3)}
        for addr in blocked.values():
            _route(rl, "add", addr)
        subprocess.run(["ip", "netns", "exec", rl.removesuffix("rl") + "s3", "sysctl", "-q",
                        "-w", "net.ipv4.tcp_syn_linear_timeouts=0"], check=True)
        while not (m := _manifest(runs)) or "started_ns" not in m:
            assert time.monotonic() < deadline and proc.poll() is None, "flows never began"
            time.sleep(0.05)
        time.sleep(max(0.0, m["started_ns"] / 1e9 + LET_THROUGH_S - time.time()))
        _route(rl, "del", blocked[3])
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    (run,) = json.loads(out)["runs"]
    return tmp, run, _manifest(runs)


def _report(run: dict, flow: int, server: bool = False) -> dict:
    name = f"iperf-{flow}{'-server' if server else ''}.json"
    return json.loads((Path(run["dir"]) / name).read_text())


def test_the_run_completes_with_each_flows_outcome(late_run):
    _, run, manifest = late_run
    assert run["status"] == "complete"
    assert [f["outcome"] for f in run["flows"]] == ["complete", "never connected", "cut"]
    assert [f["outcome"] for f in manifest["flows"]] == ["complete", "never connected", "cut"]
    assert_nothing_left(run)


def test_iperf3_reports_agree(late_run):
    """iperf3's own reports: flow 2 never connected, flow 3 connected and was
    interrupted, flow 1 ended by itself."""
    _, run, _ = late_run
    assert "error" not in _report(run, 1)
    assert _report(run, 2)["start"]["connected"] == []
    three = _report(run, 3)
    assert three["start"]["connected"] and "interrupt" in three["error"]


def test_captures_agree(late_run):
    """tshark on the sender capture: flow 2 sent SYNs that were never
    answered; flow 3 was answered seconds late and stopped sending before
    iperf3's own end (its connection plus the test's duration)."""
    _, run, manifest = late_run
    pcap = Path(run["dir"]) / "sender.pcap"
    flows = {f["flow"]: f for f in manifest["flows"]}
    two = f"tcp.dstport == {flows[2]['dst_port']}"
    assert count(pcap, f"{two} && tcp.flags.syn == 1") >= 2
    assert count(pcap, f"tcp.srcport == {flows[2]['dst_port']}") == 0
    assert count(pcap, f"{two} && tcp.len > 0") == 0
    port = flows[3]["dst_port"]
    syns = fields(pcap, f"tcp.dstport == {port} && tcp.flags.syn == 1 && tcp.flags.ack == 0",
                  "frame.time_epoch", "tcp.stream")
    answers = fields(pcap, f"tcp.srcport == {port} && tcp.flags.syn == 1 && tcp.flags.ack == 1",
                     "frame.time_epoch", "tcp.stream")
    answered = float(answers[0][0])
    assert answered - float(syns[0][0]) > 3      # its SYNs were retried until the route came
    data = fields(pcap, f"tcp.dstport == {port} && tcp.len > 0", "frame.time_epoch")
    last = float(data[-1][0])
    planned_end = manifest["started_ns"] / 1e9 + flows[3]["start_s"] + flows[3]["duration_s"]
    assert planned_end < answered < last < answered + flows[3]["duration_s"]


def test_the_store_counts_what_the_receiver_got(late_run):
    """The store holds each flow's outcome, and for the cut flow the
    bytes its iperf3 server received (the client, interrupted, never
    heard them)."""
    tmp, run, _ = late_run
    con = duckdb.connect(str(tmp / "t.duckdb"), read_only=True)
    rows = dict(con.execute("SELECT flow, outcome FROM flows WHERE run_id = ? ORDER BY flow",
                            [run["run_id"]]).fetchall())
    assert rows == {1: "complete", 2: "never connected", 3: "cut"}
    (got,) = con.execute("SELECT bytes_received FROM flows WHERE run_id = ? AND flow = 3",
                         [run["run_id"]]).fetchone()
    assert got == _report(run, 3, server=True)["end"]["sum_received"]["bytes"] > 0
    (none,) = con.execute("SELECT coalesce(bytes_received, 0) FROM flows WHERE run_id = ? "
                          "AND flow = 2", [run["run_id"]]).fetchone()
    assert none == 0


def test_a_clients_clock_starts_at_its_first_socket():
    """A flow's deadline (and the later flows' start) counts from its
    client's first socket, not from the start of its process (slow on a busy
    host): a process seen before and after it opens one. The sockets of `ip`,
    which every client is until `ip netns exec` execs it, do not count."""
    from tcpvar.capture.runner import _has_socket

    code = ("import socket, sys, time\n"
            "sys.stdin.readline()\n"
            "s = socket.socket()\n"
            "print('open', flush=True)\n"
            "sys.stdin.readline()\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    ip = subprocess.Popen(["ip", "monitor", "link"], stdout=subprocess.DEVNULL)
    try:
        assert not _has_socket(proc.pid)
        proc.stdin.write("\n")
        proc.stdin.flush()
        assert proc.stdout.readline() == "open\n"
        assert _has_socket(proc.pid)
        fds = Path(f"/proc/{ip.pid}/fd")
        while not any(os.readlink(f).startswith("socket:") for f in fds.iterdir()):
            time.sleep(0.01)        # ip's netlink socket, open
        assert not _has_socket(ip.pid)
    finally:
        for p in (proc, ip):
            p.kill()
            p.wait()
    assert not _has_socket(proc.pid)


def _written(tmp_path, doc) -> Path:
    path = tmp_path / "iperf.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("doc, returncode, ended, want", [
    # iperf3 3.12's reports, as it writes them in each case
    ({"start": {"connected": [{}], "test_start": {"duration": 60}},
      "end": {"sum_sent": {"seconds": 60.0002}}}, 0, False, "complete"),
    ({"start": {"connected": [{}], "test_start": {"duration": 60}},
      "end": {"sum_sent": {"seconds": 60.0002}},
      "error": "interrupt - the client has terminated"}, 1, True, "complete"),
    ({"start": {"connected": [{}], "test_start": {"duration": 60}},
      "end": {"sum_sent": {"seconds": 29.1}},
      "error": "interrupt - the client has terminated"}, 1, True, "cut"),
    ({"start": {"connected": []}, "end": {},
      "error": "interrupt - the client has terminated"}, 1, True, "never connected"),
    ({"start": {"connected": []}, "end": {},
      "error": "unable to connect to server: Connection timed out"}, 1, False,
     "never connected"),
    ({"start": {"connected": []}, "end": {},
      "error": "unable to set TCP_CONGESTION: Supplied congestion control algorithm not "
               "supported on this host"}, 1, False, "failed"),
])
def test_outcome_of_each_report(tmp_path, doc, returncode, ended, want):
    from tcpvar.capture.runner import outcome

    assert outcome(_written(tmp_path, doc), returncode, ended) == want
