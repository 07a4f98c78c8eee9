"""`tcpvar run` in the micro-VM (vm backend): Debian's stock kernel booted
with virtme-ng, netem delay on the path, every variant of the paper; and the
patched kernel of kernel-patches/ with NGWA and WB-RTO switched on."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

import tshark_truth as truth
from tcpvar.capture.params import MTU, PAPER_VARIANTS

from run_helpers import (
    assert_nothing_left,
    close,
    interrupted_run,
    processes_mentioning,
    run_passed,
    side_by_side,
    tcpvar_run,
)

BW = 20e6     # well below what the emulated CPU forwards, so the bottleneck is the queue


def cached_release() -> str:
    """The release of the Debian kernel package unpacked in the cache
    (kernels/debian-RELEASE/boot/vmlinuz-RELEASE): whatever linux-image-amd64
    pointed to when it was fetched, not a release pinned here."""
    from tcpvar.resources import cache_dir
    images = sorted((cache_dir() / "kernels").glob("debian-*/boot/vmlinuz-*"))
    assert len(images) == 1, images
    return images[0].name[len("vmlinuz-"):]


@pytest.fixture(scope="module")
def started(tmp_path_factory):
    """The runs whose tests only read what they left, started together at
    the first such test, two at a time (side_by_side): name -> Future of
    (folder, (exit status, JSON document, stderr))."""
    with side_by_side(
            tmp_path_factory,
            # the README's main job, shortened, on the vm backend
            main_job=lambda tmp: tcpvar_run(tmp, "--backend", "vm", "--cc", "cubic",
                                            "--rtt", 100, "--duration", 20, "--bw", "20mbit"),
            # 12 s: the 13 iperf3 clients start one after another in the
            # guest, and on a busy host the last began 5.7 s after the first
            # (6 s flows then overlapped for 0.3 s)
            variants=lambda tmp: tcpvar_run(tmp, "--backend", "vm",
                                            "--cc", ",".join(PAPER_VARIANTS), "--rtt", 20,
                                            "--bw", "40mbit", "--duration", 12),
            fairness=lambda tmp: tcpvar_run(tmp, "--backend", "vm", "--cc", "reno",
                                            "--mode", "fairness", "--rtt", 40, "--bw", "20mbit",
                                            "--duration", 20),
            friendliness=lambda tmp: tcpvar_run(tmp, "--backend", "vm", "--cc", "vegas",
                                                "--mode", "friendliness", "--rtt", 40,
                                                "--bw", "20mbit", "--duration", 20),
            jitter=lambda tmp: tcpvar_run(tmp, "--backend", "vm", "--cc", "cubic", "--rtt", 40,
                                          "--jitter", 10, "--bw", "5mbit", "--buffer", "3000",
                                          "--duration", 6),
            # NGWA mode 5 (congestion window, flow division) and WB-RTO
            # together on the patched kernel users boot (the release flavour;
            # the debug one is tests/test_kernel.py's campaign): two Reno
            # flows through a 100-packet ngwa queue
            ngwa_wbrto=lambda tmp: tcpvar_run(tmp, "--cc", "reno", "--mode", "fairness",
                                              "--ngwa", 5, "--wbrto", "medium",
                                              "--kernel", "patched", "--bw", "10mbit",
                                              "--rtt", 20, "--buffer", 100, "--duration", 10),
    ) as runs:
        yield runs


@pytest.fixture(scope="module")
def main_job(started):
    return run_passed(started["main_job"])[1]


def test_the_vm_runs_debians_kernel(main_job):
    assert main_job["backend"] == "vm"
    (run,) = main_job["runs"]
    assert run["kernel"] == cached_release()       # the guest's uname -r


def test_base_rtt_is_what_was_asked(main_job):
    (run,) = main_job["runs"]
    (flow,) = run["flows"]
    # the handshake and the first segments see the empty queue: the base RTT
    assert 90 <= flow["rtt_min_ms"] <= 110
    assert 90 <= flow["srtt_min_ms_probe"] <= 110


def test_throughput_respects_the_bottleneck(main_job):
    (run,) = main_job["runs"]
    (flow,) = run["flows"]
    tp = flow["throughput_bps"]
    assert tp["pcap"] <= 1.05 * BW and tp["iperf3"] <= 1.05 * BW
    assert tp["pcap"] >= 0.5 * BW
    assert close(tp["iperf3"], tp["pcap"], 0.05)


def test_probe_and_artefacts(main_job):
    (run,) = main_job["runs"]
    assert run["probe_events"] > 1000
    # counted, never silent: the eBPF hook's recursion guard skips an event
    # that fires in a softirq nested in its own run on one CPU (46 of 41,202,
    # 0.11 %, in a CI run; docs/probe.md). 1/200 (was 1/1000, commit 7cd85f9):
    # under TCG the bottleneck sends in bursts of up to 10 ms, so the nesting
    # follows the emulation's pace; 4.5 times the figure measured
    assert run["probe_lost"] is not None and run["probe_lost"] <= run["probe_events"] / 200
    assert run["flows"][0]["cwnd_max"] > 10
    manifest = json.loads((Path(run["dir"]) / "manifest.json").read_text())
    assert manifest["backend"] == "vm" and manifest["status"] == "complete"
    assert manifest["sysctls"]["net.ipv4.tcp_congestion_control"]
    assert_nothing_left(run)
    assert not processes_mentioning(f"tcpvar-{manifest['tag'][:-1]}")   # the VM is gone


def test_every_variant_of_the_paper_runs(started):
    """One boot, one flow per variant, all through the same bottleneck."""
    (run,) = run_passed(started["variants"])[1]["runs"]
    assert [f["cc"] for f in run["flows"]] == list(PAPER_VARIANTS)
    for f in run["flows"]:
        report = json.loads((Path(run["dir"]) / f"iperf-{f['flow']}.json").read_text())
        assert report["end"]["sender_tcp_congestion"] == f["cc"]
        assert f["throughput_bps"]["pcap"] > 0 and f["probe_events"] > 0
    # while all 13 send, the bottleneck is kept busy, as tshark counts its
    # capture: 33.7 Mbit/s of payload of at most 38.3; with a one-packet
    # HTB bucket the guest's late timers held it to 16.2
    manifest = json.loads((Path(run["dir"]) / "manifest.json").read_text())
    cap = truth.read(Path(run["dir"]) / "bottleneck.pcap")
    segs = [cap.segments[(f["src_addr"], f["src_port"])] for f in manifest["flows"]]
    lo, hi = max(s[0][0] for s in segs), min(s[-1][0] for s in segs)
    carried = sum(n for s in segs for t, _, n in s if lo <= t < hi)
    assert hi - lo > 10**9
    assert 8 * carried / ((hi - lo) / 1e9) > 0.75 * 40e6 * (MTU - 52) / (MTU + 14)


def test_fairness_of_two_reno_flows(started):
    (run,) = run_passed(started["fairness"])[1]["runs"]
    assert [f["role"] for f in run["flows"]] == ["background", "test"]
    assert run["flows"][1]["start_s"] == 2.0
    j = run["jain"]
    assert abs(j["iperf3"] - j["pcap"]) < 0.03
    # per second of the sender capture, by hand from tshark's sequence numbers
    manifest = json.loads((Path(run["dir"]) / "manifest.json").read_text())
    want = truth.interval_jain(truth.read(Path(run["dir"]) / "sender.pcap"),
                               [(f["src_addr"], f["src_port"]) for f in manifest["flows"]],
                               10**9)
    assert [(i["t_s"], i["jain"]) for i in j["intervals"]] == \
        [(float(b), pytest.approx(v, rel=1e-9)) for b, v in want.items()]
    assert j["intervals_min"] == pytest.approx(min(want.values()), rel=1e-9)
    assert j["intervals_mean"] == pytest.approx(sum(want.values()) / len(want), rel=1e-9)


def test_friendliness_of_vegas_against_reno(started):
    (run,) = run_passed(started["friendliness"])[1]["runs"]
    assert [f["cc"] for f in run["flows"]] == ["reno", "vegas"]
    (fr,) = run["friendliness"]
    assert close(fr["iperf3"]["ratio"], fr["pcap"]["ratio"], 0.1)
    # Vegas backs off when Reno fills the queue (the paper's Table 10)
    assert fr["pcap"]["ratio"] < 1


def test_jitter_varies_the_delay_and_keeps_the_order(started):
    """--jitter 10 on a 40 ms path: netem on the delay router says so (with
    the rate that keeps the order); the time from a segment leaving the
    bottleneck (bottleneck.pcap) to the ACK of its end coming back (sender.pcap,
    same router, raw sequence numbers via tshark) goes below the 40 ms of
    netem, which only a shorter forward delay allows; and with no packet
    dropped anywhere the receiver seldom saw a hole (an ACK with a SACK
    block): at most 5 % of the data segments. Without --jitter the same run
    had no such time below 40.4 ms (p10-p90 40.6-42.8 ms); with it 13 and
    17 % of them were below 40 ms, and 6 % in a CI run (the test wants more
    than 1 %). Without the rate, netem's jitter
    reorders: SACK blocks in 1843 ACKs for 2658 segments (69 %); with it, in
    0, 0, 8 and 26 ACKs for 2491-2750 segments in four runs (a few packets
    still arrive out of order, without a retransmission)."""
    (run,) = run_passed(started["jitter"])[1]["runs"]
    run_dir = Path(run["dir"])
    tc = (run_dir / "tc-stats.txt").read_text()
    assert "delay 20ms  10ms" in tc or "delay 20ms 10ms" in tc, tc
    assert "rate 100Gbit" in tc, tc
    assert run["bottleneck"]["drops"] == 0
    (flow,) = json.loads((run_dir / "manifest.json").read_text())["flows"]

    def fields(pcap: str, display_filter: str, *names: str) -> list[list[str]]:
        out = subprocess.run(
            ["tshark", "-r", str(run_dir / pcap), "-Y", display_filter, "-T", "fields",
             *(x for n in names for x in ("-e", n))],
            capture_output=True, text=True, check=True).stdout
        return [line.split("\t") for line in out.splitlines()]

    left = {}
    for t, seq, length in fields("bottleneck.pcap",
                                 f"tcp.srcport == {flow['src_port']} && tcp.len > 0",
                                 "frame.time_epoch", "tcp.seq_raw", "tcp.len"):
        left.setdefault((int(seq) + int(length)) % 2**32, float(t))
    back = [(float(t) - left.pop(int(ack))) * 1000
            for t, ack in fields("sender.pcap", f"tcp.dstport == {flow['src_port']}",
                                 "frame.time_epoch", "tcp.ack_raw") if int(ack) in left]
    below = [ms for ms in back if ms < 40]
    # 1 %, not 5 %: with --jitter 13 and 17 % of the times were below 40 ms
    # alone, 6 % in a CI run (commit 1cc5534); without it none below 40.4 ms
    assert len(back) > 500 and len(below) > 0.01 * len(back), (len(below), len(back))
    # the data flow's ACKs only (iperf3's control connection ends with a
    # keep-alive and its D-SACK)
    def count(display_filter: str) -> int:
        return len(fields("sender.pcap", display_filter, "frame.number"))

    segments = count(f"tcp.srcport == {flow['src_port']} && tcp.len > 0")
    sacks = count(f"tcp.dstport == {flow['src_port']} && tcp.options.sack_le")
    # 5 %, not 1 %: netem with a rate keeps each packet behind the last one it
    # queued, yet 0, 0, 8 and 26 of 2491-2750 segments (up to 1.0 %) still came
    # with a hole, without a drop or a retransmission; the source of that
    # little reordering is not found. Without the rate: 69 %
    assert segments > 1000 and sacks <= 0.05 * segments, (sacks, segments)


def test_a_vm_that_does_not_boot_in_time(tmp_path):
    rc, doc, err = tcpvar_run(tmp_path, "--backend", "vm", "--cc", "cubic", "--duration", 5,
                              "--boot-timeout", 1)
    assert rc == 8, err
    assert "did not boot within 1 s" in err and len(err.strip().splitlines()) == 1
    assert not processes_mentioning(str(tmp_path))


def test_qemu_that_cannot_start_is_named(tmp_path):
    empty = tmp_path / "empty-bzImage"
    empty.touch()
    rc, doc, err = tcpvar_run(tmp_path, "--backend", "vm", "--kernel", empty, "--rtt", 10,
                              "--boot-timeout", 60)
    assert rc == 8, err
    line, = err.strip().splitlines()
    assert "the micro-VM exited (status" in line and "before it reported" in line
    assert f"could not load kernel '{empty}'" in line      # QEMU's own words
    assert not processes_mentioning(str(tmp_path))


def test_a_guest_that_exits_before_reporting(tmp_path):
    """A guest whose program fails is reported with its own words, not as a
    boot that timed out."""
    from tcpvar.capture import vm
    from tcpvar.capture.kernels import stock_kernel

    args = vm.vng_args(stock_kernel().image, ["sh", "-c", "echo guest broke >&2; exit 3"],
                       kvm=False, name=f"tcpvar-test-{tmp_path.name[-6:]}")
    guest, ready, why = vm.boot(args, tmp_path / "console.log", 120, tmp_path.name[-6:])
    assert guest is None and ready is None
    assert why.startswith("exited (status 3) before it reported"), why
    assert why.endswith("guest broke"), why


def test_a_missing_vm_tool_stops_before_any_boot(tmp_path):
    """A PATH with the testbed's tools and QEMU, but not `file`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("ip", "tc", "iperf3", "tcpdump", "ss",
                 "qemu-system-x86_64", "busybox"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    proc = subprocess.run([sys.executable, "-m", "tcpvar.cli", "run", "-q", "--backend", "vm",
                           "--out", str(tmp_path / "runs"), "--db", str(tmp_path / "t.duckdb")],
                          capture_output=True, text=True, env={"PATH": str(bin_dir)})
    assert proc.returncode == 8
    assert proc.stderr.strip() == ("tcpvar: error: file is not installed, needed by the "
                                   "micro-VM (apt-get install file, or run ./bootstrap.sh)")
    assert not (tmp_path / "runs").exists()


def test_ctrl_c_stops_the_vm_and_keeps_the_capture(tmp_path):
    rc, doc, err = interrupted_run(tmp_path, "--backend", "vm", "--cc", "cubic", "--rtt", 20,
                                   "--bw", "20mbit", "--duration", 120)
    assert rc == 130, err
    (run,) = doc["runs"]
    assert run["status"] == "interrupted" and run["backend"] == "vm"
    assert run["flows"][0]["throughput_bps"]["pcap"] > 0
    assert not processes_mentioning(str(tmp_path))     # no vng, no QEMU


def test_a_variant_the_booted_kernel_lacks(tmp_path):
    """A kernel given by path is only known once it runs: the guest refuses."""
    from tcpvar.capture.kernels import stock_kernel

    image = stock_kernel().image
    rc, doc, err = tcpvar_run(tmp_path, "--backend", "vm", "--kernel", image, "--cc", "nosuchcc",
                              "--rtt", 10)
    assert rc == 7, err
    line, = err.strip().splitlines()
    assert "in the micro-VM" in line and "no congestion control 'nosuchcc'" in line
    assert "cubic" in line     # the list of those it has
    assert not processes_mentioning(str(tmp_path))
    # no empty run folder either (the VM's console log stays, for a look)
    assert not [d for d in (tmp_path / "runs").iterdir() if d.is_dir()]


@pytest.fixture(scope="module")
def ngwa_wbrto(started):
    return run_passed(started["ngwa_wbrto"])


def test_ngwa_and_wbrto_boot_the_patched_kernel(ngwa_wbrto):
    _, doc = ngwa_wbrto
    assert doc["backend"] == "vm" and "--ngwa needs the patched kernel" in doc["reason"]
    (run,) = doc["runs"]
    assert run["kernel"].endswith("-tcpvar+") and run["probe_source"] == "tracefs-ext"
    assert (run["params"]["ngwa_mode"], run["params"]["wbrto"]) == (5, "medium")
    sysctls = json.loads((Path(run["dir"]) / "manifest.json").read_text())["sysctls"]
    assert {k.rsplit(".", 1)[1]: " ".join(sysctls[k].split()) for k in sysctls
            if "ngwa" in k or "wbrto" in k} \
        == {"tcp_ngwa": "1", "tcp_ngwa_cwnd": "1", "tcp_ngwa_smooth": "0",
            "tcp_ngwa_alpha": "300", "tcp_ngwa_hold_ms": "1000", "tcp_ngwa_option": "33",
            "tcp_wbrto": "1", "tcp_wbrto_scale": "1", "tcp_wbrto_unit_ms": "1000",
            "tcp_wbrto_awnd_gain": "2000", "tcp_wbrto_thresholds": "5 10 30",
            "tcp_wbrto_cutoffs": "500 750", "tcp_wbrto_weights": "100 50 30 20"}
    assert_nothing_left(run)


def test_ngwa_queue_writes_its_free_space(ngwa_wbrto):
    tmp, doc = ngwa_wbrto
    (run,) = doc["runs"]
    b = run["bottleneck"]
    limit = 100 * 1514
    assert (b["qdisc"], b["limit"]) == ("ngwa", limit)
    # every data packet left with the option lowered or inserted by the queue
    assert b["counters"]["lowered"] + b["counters"]["inserted"] >= b["sent_packets"] * 0.95
    # the window never exceeds the free space, so the queue never overflows
    assert b["drops"] == 0
    con = duckdb.connect(str(tmp / "t.duckdb"), read_only=True)
    (top,) = con.execute("SELECT max(ngwa_window) FROM packets WHERE capture_id = ? AND len > 0",
                         [run["bottleneck_capture"]]).fetchone()
    assert top <= 0.98 * limit
    for f in run["flows"]:
        w = f["ngwa_window_bytes"]
        assert w["packets"] > 1000
        # flow division: the two flows (and iperf3's control connections) share it
        assert w["min"] <= w["median"] < 0.98 * limit / 2


def test_wbrto_draws_rtos_in_their_interval(ngwa_wbrto):
    tmp, doc = ngwa_wbrto
    (run,) = doc["runs"]
    con = duckdb.connect(str(tmp / "t.duckdb"), read_only=True)
    rows = con.execute(
        "SELECT e.flow, e.rto_us, e.srtt_us, e.wbrto_c10, e.wbrto_a10 FROM probe_events e "
        "JOIN flows f USING (run_id, flow) WHERE e.run_id = ? AND e.sport = f.src_port "
        "AND e.backoff = 0 AND e.srtt_us > 0", [run["run_id"]]).fetchall()
    assert len(rows) > 500
    rtos: dict[int, set] = {}
    for flow, rto, srtt, c10, a10 in rows:
        assert c10 in (10, 15, 20) and a10 in (20, 30, 50, 100)
        # (srtt, c * a_i * 1 s], to a jiffy (HZ 250); never below rto_min
        assert srtt < rto <= c10 * a10 * 10_000 + 4000
        assert rto >= 200_000 - 4000
        rtos.setdefault(flow, set()).add(rto)
    # drawn anew at each computation, so far from one value per flow
    assert all(len(v) > 20 for v in rtos.values()) and len(rtos) == 2


# ---------------------------------------------------------------------------
# figures of a run (`tcpvar plot KIND run:N`), held to the run's artefacts
# ---------------------------------------------------------------------------

def _plot(run: dict, kind: str, out: Path) -> dict:
    from conftest import tcpvar_main

    db = Path(run["dir"]).parents[1] / "t.duckdb"
    res = tcpvar_main("plot", kind, f"run:{run['run_id']}", "--db", db, "-q", "-o", out,
                      "--json")
    assert res.returncode == 0, res.stderr
    assert out.stat().st_size > 10000
    return json.loads(res.stdout)


def _frame_times(pcap: Path, sport: int) -> list[float]:
    """tshark's times (s since the capture's first frame) of the packets a port sent."""
    out = subprocess.run(["tshark", "-n", "-r", str(pcap), "-Y", f"tcp.srcport == {sport}",
                          "-T", "fields", "-e", "frame.time_relative"],
                         capture_output=True, text=True, check=True).stdout
    return [float(x) for x in out.split()]


def test_every_figure_of_a_run(main_job, tmp_path):
    from tcpvar.analyzers.figures import KINDS

    (run,) = main_job["runs"]
    (flow,) = run["flows"]
    docs = {kind: _plot(run, kind, tmp_path / f"{kind}.png") for kind in KINDS}
    for doc in docs.values():
        assert "cubic, RTT 100 ms, 20 Mbit/s, loss 0 %" in doc["title"]
    # cwnd: the sending socket's events only (tcp_probe.csv, local port = the flow's source)
    import csv

    with open(Path(run["dir"]) / "tcp_probe.csv") as f:
        sender = [r for r in csv.DictReader(f) if int(r["sport"]) == int(flow["src"].split(":")[1])]
    (cwnd,) = docs["cwnd"]["senders"]
    assert cwnd["label"] == "flow 1 cubic (test)"
    assert max(hi for _, _, hi in cwnd["cwnd"]) == max(int(r["snd_cwnd"]) for r in sender)
    # one time axis: the sender's first probe event is a segment arriving,
    # which the sender capture shows from the receiver within a few ms
    first = cwnd["cwnd"][0][0]
    arrivals = _frame_times(Path(run["dir"]) / "sender.pcap", int(flow["dst"].split(":")[1]))
    column = docs["cwnd"]["column_ns"] / 1e9
    assert min(abs(t - first) for t in arrivals) <= column + 0.005
    # throughput: the figure's goodput adds up to the bytes iperf3 received
    tput = docs["throughput"]
    (f,) = tput["senders"]
    got = sum(bps * tput["bin_s"] / 8 for _, bps in f["goodput"])
    assert close(got, flow["throughput_bps"]["iperf3"] * flow["duration_s"] / 8, 0.1)
    assert tput["rate"] == [[0.0, BW]] and tput["bin_s"] >= 0.1     # RTT 100 ms
    assert min(lo for _, lo, _ in docs["rtt"]["senders"][0]["samples"]) >= 90
    assert docs["rto"]["senders"][0]["source"] == "tcp_probe"
    assert min(lo for _, lo, _ in docs["rto"]["senders"][0]["rto"]) >= 200


def test_ngwa_figures(ngwa_wbrto, tmp_path):
    _, doc = ngwa_wbrto
    (run,) = doc["runs"]
    ngwa = _plot(run, "ngwa", tmp_path / "ngwa.svg")
    assert ngwa["empty"] is None and all(f["ngwa"] for f in ngwa["senders"])
    fair = _plot(run, "fairness", tmp_path / "fairness.pdf")
    # per bin, by hand from tshark's sequence numbers of the sender capture
    manifest = json.loads((Path(run["dir"]) / "manifest.json").read_text())
    cap = truth.read(Path(run["dir"]) / "sender.pcap")
    senders = [(f["src_addr"], f["src_port"]) for f in manifest["flows"]]
    want = truth.interval_jain(cap, senders, round(fair["bin_s"] * 1e9))
    assert fair["jain"] == [[pytest.approx(b * fair["bin_s"]), pytest.approx(j, rel=1e-9)]
                            for b, j in want.items()]
    # the second flow starts later (2 s after the run's clock, about 1 s after
    # the first flow's first segment): Jain's index only where both sent
    second = (min(t for t, _, _ in cap.segments[senders[1]]) - cap.first_ns) / 1e9
    assert second > 0.5 and fair["jain"][0][0] >= second - fair["bin_s"], second


def test_a_run_leaves_its_figures_and_report(main_job, tmp_path):
    from browser import open_page

    (run,) = main_job["runs"]
    folder = Path(run["dir"])
    assert run["report"] == str(folder / "report.html")
    kinds = sorted(p.stem for p in (folder / "figures").glob("*.png"))
    assert kinds == sorted(["throughput", "cwnd", "rtt", "rto", "tsg", "window", "queue"])
    text = (folder / "report.html").read_text()
    assert run["name"] in text and cached_release() in text and "iperf 3." in text
    console, figures = open_page(folder / "report.html", tmp_path)
    assert console == [] and figures == "7/7"
