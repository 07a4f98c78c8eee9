"""The patched kernel of kernel-patches/, built for real and booted in the
micro-VM (virtme-ng over QEMU, TCG): the extended tcp:tcp_probe, NGWA on the
endpoints and in the ngwa qdisc, WB-RTO, and malformed NGWA options.

The kernel is built once per session (cached by build.sh: a second session
only looks it up); the guest side is tests/kernel_guest.py, which writes
what it saw into a folder shared with the VM. Few boots: each runs several
cases.
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from tcpvar.analysis import AnalyzeOptions, analyze_capture
from tcpvar.capture import vm
from tcpvar.capture.kernel_build import cached, patched_kernel, patched_tc, run_build
from tcpvar.errors import KernelBuildError
from tcpvar.store import Store

GUEST = Path(__file__).resolve().parent / "kernel_guest.py"
UNSET = 0xFFFFFFFF
BOOT_TIMEOUT_S = 1500

# the fields the extended tracepoint adds, by the names docs/probe.md maps
NEW_FIELDS = ["rttvar", "rto", "packets_out", "retrans_out", "lost_out", "sacked_out",
              "ca_state", "retransmits", "backoff", "delivered", "total_retrans",
              "pacing_rate", "ngwa_window", "wbrto_max_cwnd", "wbrto_awnd", "wbrto_c10",
              "wbrto_a10"]
STOCK_FIELDS = ["saddr", "daddr", "sport", "dport", "family", "mark", "data_len", "snd_nxt",
                "snd_una", "snd_cwnd", "ssthresh", "snd_wnd", "srtt", "rcv_wnd",
                "sock_cookie"]
VARIANTS = ["reno", "cubic", "bic", "htcp", "highspeed", "hybla", "illinois", "lp",
            "scalable", "vegas", "veno", "westwood", "yeah", "bbr", "cdg", "dctcp", "nv"]


@pytest.fixture(scope="session")
def kernel():
    """(bzImage, tc): built once, then found in the cache."""
    return patched_kernel(build=True), patched_tc(build=True)


def boot(kernel, out: Path, *cases: str, env: dict | None = None) -> dict:
    """Boot the patched kernel, run the guest cases, return their results."""
    image, tc = kernel
    out.mkdir(parents=True, exist_ok=True)
    # tcp_probe enabled at boot: switching tracepoints on and off at run time
    # patches kernel text, which TCG with two vCPUs now and then turns into an
    # oops (int3 in text_poke_bp) whatever the kernel (kernel_guest.Probe)
    guest = [sys.executable, str(GUEST), str(out), str(tc), *cases]
    if env:
        guest = ["env", *(f"{k}={v}" for k, v in env.items()), *guest]
    cmd = vm.vng_args(image, guest, kvm=False, name=f"tcpvar-test-{out.name[-12:]}",
                      rw_dir=out, append=["trace_event=tcp:tcp_probe"])
    results = out / "results.json"
    for _attempt in range(2):
        # a boot that never reaches the guest script (QEMU or virtme-ng failing
        # to start, seen with other VMs starting at the same moment) is tried
        # once more; a guest that ran and failed is not
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=BOOT_TIMEOUT_S,
                              check=False, stdin=subprocess.DEVNULL, env=vm.guest_env(cmd))
        if results.is_file() or (out / "started").is_file():
            break
    assert results.is_file(), f"the guest wrote no results:\n{done.stdout[-3000:]}\n" \
                              f"{done.stderr[-3000:]}"
    doc = json.loads(results.read_text())
    assert not doc.get("errors"), doc.get("errors")
    return doc


@pytest.fixture(scope="session")
def guest_basic(kernel, tmp_path_factory):
    return boot(kernel, tmp_path_factory.mktemp("basic"), "basic", "malformed")


@pytest.fixture(scope="session")
def guest_ngwa(kernel, tmp_path_factory):
    out = tmp_path_factory.mktemp("ngwa")
    doc = boot(kernel, out, "ngwa", "insert", "fd", "modes")
    doc["out"] = out
    return doc


@pytest.fixture(scope="session")
def guest_wbrto(kernel, tmp_path_factory):
    return boot(kernel, tmp_path_factory.mktemp("wbrto"), "wbrto")


@pytest.fixture(scope="session")
def kstore(tmp_path_factory):
    s = Store(tmp_path_factory.mktemp("kstore") / "tcpvar.duckdb")
    yield s
    s.close()


def ngwa_rows(store, pcap: Path) -> list[tuple]:
    """(t_s, ngwa_window, peer_win) of the packets carrying the option from the
    sender (10.0.1.1) towards the receiver, from tcpvar's own analysis of the
    capture (the receiver's own data, on iperf3's control connection, carries
    the option unset: no ngwa queue on its way)."""
    doc = analyze_capture(store, str(pcap), AnalyzeOptions())
    return store.con.execute(
        "SELECT n.t_s, n.ngwa_window, n.peer_win FROM ngwa_windows n "
        "JOIN connections c USING (capture_id, conn) WHERE n.capture_id = $1 "
        "AND (n.dir = 0) = (c.a_addr = '10.0.1.1') ORDER BY n.t_s",
        [doc["capture_id"]]).fetchall()


# --- build ---------------------------------------------------------------------

def test_build_is_cached(kernel):
    image, tc = kernel
    assert image.is_file() and image.stat().st_size > 1_000_000
    assert os.access(tc, os.X_OK)
    stages = []
    assert run_build("kernel", lambda event: stages.append(event.phase)) == image
    assert stages and stages[0].startswith("cached:")
    assert cached("tc") == tc


def test_series_passes_checkpatch(tmp_path):
    """scripts/checkpatch.pl --strict of the pinned source, in a kernel tree
    (it learns the tree's CamelCase types from include/): nothing to report.
    The subtrees the series does not touch are left out of the unpacking."""
    skip = ("arch", "drivers", "Documentation", "fs", "sound", "tools")
    subprocess.run(["tar", "-xJf", "/usr/src/linux-source-6.1.tar.xz", "-C", str(tmp_path),
                    *(f"--exclude=linux-source-6.1/{d}/*" for d in skip)], check=True)
    tree = tmp_path / "linux-source-6.1"
    patches = sorted((Path(__file__).resolve().parent.parent / "kernel-patches" / "patches")
                     .glob("*.patch"))
    assert len(patches) == 5 and patches[0].name.startswith("0000-cover-letter")
    for patch in patches:
        done = subprocess.run(["perl", "scripts/checkpatch.pl", "--strict", str(patch)],
                              cwd=tree, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stdout[-2000:]
        assert "has no obvious style problems and is ready for submission" in done.stdout


def test_cli_kernel_path(kernel):
    done = subprocess.run([sys.executable, "-m", "tcpvar.cli", "kernel", "path"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert str(kernel[0]) in done.stdout and str(kernel[1]) in done.stdout


def test_errors_are_one_line(tmp_path):
    def run(*args, **env):
        done = subprocess.run([sys.executable, "-m", "tcpvar.cli", "kernel", *args],
                              capture_output=True, text=True, check=False,
                              env={**os.environ, **env})
        return done.returncode, done.stderr.strip().splitlines()

    status, err = run("build", "-j", "0")
    assert status == 2 and "--jobs" in err[-1]
    status, err = run("path", TCPVAR_CACHE=str(tmp_path / "empty"))
    assert status == 8 and err == ["tcpvar: error: not built yet: kernel, tc "
                                   "(run `tcpvar kernel build`)"]
    # a pin that is not the installed linux-source-6.1: build.sh stops at once
    patches = tmp_path / "kernel-patches"
    shutil.copytree(Path(__file__).resolve().parent.parent / "kernel-patches", patches)
    (patches / "VERSION").write_text("6.1.0-0\n")
    status, err = run("build", "--no-tc", TCPVAR_KERNEL_PATCHES=str(patches),
                      TCPVAR_CACHE=str(tmp_path / "cache"))
    assert status == 8 and len(err) == 1 and "pins 6.1.0-0" in err[0], err


def test_patched_kernel_without_build(tmp_path, monkeypatch):
    monkeypatch.setenv("TCPVAR_CACHE", str(tmp_path))
    with pytest.raises(KernelBuildError, match="run `tcpvar kernel build`"):
        patched_kernel(build=False)
    with pytest.raises(KernelBuildError, match="run `tcpvar kernel build`"):
        patched_tc(build=False)


# --- extended tcp_probe, variants, BTF, sysctls --------------------------------

def test_tracepoint_format_lists_new_fields(guest_basic):
    b = guest_basic["basic"]
    fields = b["format_fields"]
    for name in STOCK_FIELDS + NEW_FIELDS:
        assert name in fields, name
    # existing fields first and in their order; the new ones appended
    stock_pos = [fields.index(n) for n in STOCK_FIELDS]
    assert stock_pos == sorted(stock_pos)
    assert max(stock_pos) < min(fields.index(n) for n in NEW_FIELDS)
    for name in NEW_FIELDS:
        assert f" {name}=" in b["print_fmt"], name


def test_kernel_has_what_tcpvar_needs(guest_basic):
    b = guest_basic["basic"]
    assert b["release"].startswith("6.1.192-tcpvar")
    assert set(VARIANTS) <= set(b["available_cc"])
    assert b["btf"]
    assert b["sysctls"] == {"tcp_ngwa": "0", "tcp_ngwa_cwnd": "1", "tcp_ngwa_smooth": "0",
                            "tcp_ngwa_alpha": "300", "tcp_wbrto": "0",
                            "tcp_wbrto_scale": "1", "tcp_wbrto_unit_ms": "1000"}


def test_tc_configures_the_ngwa_qdisc(guest_basic):
    shown = guest_basic["basic"]["tc_show"]
    assert "qdisc ngwa" in shown and "limit 50Kb" in shown and " fd" in shown
    assert "lowered 0 inserted 0" in shown
    status, message = guest_basic["basic"]["tc_bad_limit"]
    assert status != 0 and "limit" in message


def test_extended_probe_ingested(guest_ngwa, kstore, tmp_path):
    """The recorder's conversion and the probe_events loader take every field
    of the extended tracepoint (source tracefs-ext, docs/probe.md)."""
    from tcpvar.artefacts.probe_record import NAMES
    from tcpvar.capture.probe import convert_trace
    from tcpvar.ingest.probe import load_probe

    csv_path = tmp_path / "tcp_probe.csv"
    events = convert_trace(guest_ngwa["out"] / "ngwa_probe.trace", csv_path, 0, [])
    assert events > 200
    rows = [line.split(",") for line in csv_path.read_text().splitlines()[1:]]
    assert all(len(r) == len(NAMES) and all(v != "" for v in r) for r in rows)
    assert load_probe(kstore, 4242, csv_path) == events
    got = kstore.con.execute(
        "SELECT count(*), max(rto_us), max(rttvar_us), max(ngwa_window), "
        "max(packets_out), max(delivered) FROM probe_events WHERE run_id = 4242").fetchone()
    assert got[0] == events and all(v > 0 for v in got[1:]), got


# --- robustness ----------------------------------------------------------------

def test_malformed_options_ignored_and_counted(guest_basic):
    m = guest_basic["malformed"]
    assert m["alive"]
    # every malformed packet is counted once; the good one is not
    assert m["bad_counted"] == sum(m["sent"].values())
    for splat in ("WARNING:", "BUG:", "Oops", "general protection", "Call Trace"):
        assert splat not in m["dmesg_new"], m["dmesg_new"]


# --- NGWA ----------------------------------------------------------------------

def test_ngwa_values_bounded_by_the_queues(guest_ngwa, kstore):
    out = guest_ngwa["out"]
    mid = ngwa_rows(kstore, out / "ngwa_r1_out.pcap")     # after r1 (60000 bytes)
    rcv = ngwa_rows(kstore, out / "ngwa_rcv.pcap")        # after r2 (45000 bytes)
    assert len(mid) > 200 and len(rcv) > 200
    mid_w = [w for _, w, _ in mid]
    rcv_w = [w for _, w, _ in rcv]
    # written by r1 on every data packet: never above its queue's size
    assert UNSET not in mid_w and max(mid_w) <= 60000
    assert max(mid_w) > 45000            # r1 had more room than r2's whole queue
    # after r2 the smaller of the two survives: never above r2's queue, and
    # r1's lower values still come through
    assert UNSET not in rcv_w and max(rcv_w) <= 45000
    assert min(rcv_w) < 45000
    assert "lowered 0 " not in guest_ngwa["ngwa"]["r1_stats"]


def test_receiver_window_clamped_to_ngwa(guest_ngwa, kstore):
    """Every window the receiver advertised stays within the NGWA window it
    held when it built that ACK (mode 1: the value of the last data segment it
    processed), beyond the floor of two segments and the window-scale unit.
    From the receiver's capture, where segments are taken in the order the
    stack processes them: the value in force is that of a data segment from
    the one the ACK acknowledges up to the ACK itself."""
    doc = analyze_capture(kstore, str(guest_ngwa["out"] / "ngwa_rcv.pcap"), AnalyzeOptions())
    rows = kstore.con.execute(
        "SELECT p.dir = CASE WHEN c.a_addr = '10.0.1.1' THEN 0 ELSE 1 END, p.seq + p.len, "
        "p.len, p.ack, p.win, p.flags, p.ngwa_window FROM packets p "
        "JOIN connections c USING (capture_id, conn) WHERE p.capture_id = $1 AND p.conn = "
        "(SELECT conn FROM connections WHERE capture_id = $1 ORDER BY packets DESC LIMIT 1) "
        "ORDER BY p.frame", [doc["capture_id"]]).fetchall()
    values: list[int] = []                  # NGWA windows of the data, as they arrived
    ending: dict[int, int] = {}             # sequence end -> its last segment's index
    checked = 0
    for from_sender, end, length, ack, win, flags, ngwa in rows:
        if from_sender:
            if length and ngwa not in (None, UNSET):
                ending[end] = len(values)
                values.append(ngwa)
            continue
        if flags & 2 or ack not in ending:
            continue                        # the SYN-ACK, or nothing NGWA yet
        in_force = values[ending[ack]:]
        assert win <= max(max(in_force), 2 * 1448) + 128, (ack, win, in_force)
        checked += 1
    assert checked > 100
    assert guest_ngwa["ngwa"]["netstat_rcv"]["TcpExtNGWARcvOption"] > 100


def test_router_inserts_the_option(guest_ngwa, kstore):
    ins = guest_ngwa["insert"]
    assert "inserted 0 " not in ins["r1_stats"]
    rows = ngwa_rows(kstore, guest_ngwa["out"] / "insert_rcv.pcap")
    assert len(rows) > 100 and max(w for _, w, _ in rows) <= 60000


def test_flow_division_halves_the_window(guest_ngwa, kstore):
    fd = guest_ngwa["fd"]
    one = [w for _, w, _ in ngwa_rows(kstore, guest_ngwa["out"] / "fd_1.pcap")]
    two = [w for _, w, _ in ngwa_rows(kstore, guest_ngwa["out"] / "fd_2.pcap")]
    assert max(one) <= 0.98 * 60000 and max(two) <= 0.98 * 60000
    # once both flows are counted (all but the first packets), at most half
    assert sorted(two)[int(0.9 * len(two))] <= 0.98 * 60000 / 2 + 1
    # with two flows the values are about half those of one flow
    ratio = statistics.median(two) / statistics.median(one)
    assert 0.3 < ratio < 0.7, (statistics.median(one), statistics.median(two))
    assert all(b > 0 for b in fd["2"]["bytes"]) and len(fd["2"]["bytes"]) == 2


def test_mode_table(guest_ngwa):
    modes = guest_ngwa["modes"]
    for mode, (cw, se, fd) in {1: (1, 0, 0), 2: (1, 1, 0), 3: (0, 0, 0), 4: (0, 1, 0),
                               5: (1, 0, 1), 6: (1, 1, 1), 7: (0, 0, 1),
                               8: (0, 1, 1)}.items():
        m = modes[str(mode)]
        assert m["sysctls"] == {"tcp_ngwa": "1", "tcp_ngwa_cwnd": str(cw),
                                "tcp_ngwa_smooth": str(se)}, mode
        assert m["rcv_smooth"] == str(se)
        ngwa_line = next(ln for ln in m["r1_stats"].splitlines() if "qdisc ngwa" in ln)
        assert ngwa_line.rstrip().endswith(" fd") == bool(fd), m["r1_stats"]
        assert all(s["bytes"] > 0 for s in m["iperf"]["streams"]), mode
        assert m["rcv_ngwa"], mode
        if cw:
            # the congestion window limits what is in flight (beyond it only
            # for the moment a loss cuts cwnd below what is out)
            assert m["snd_over_cwnd"] <= 0.01 * m["snd_events"], mode
        else:
            # without it, the sender fills the advertised window at once
            assert m["snd_over_cwnd"] > 0, mode


# --- WB-RTO --------------------------------------------------------------------

def test_wbrto_rto_in_its_interval_and_varies(guest_wbrto):
    on = guest_wbrto["wbrto"]["1"]
    unit_us = int(on["unit_ms"]) * 1000
    ev = [e for e in on["probe_snd"] if e["srtt"] and e["wbrto_c10"]]
    assert len(ev) > 100
    rtos_by_flow: dict[str, set] = {}
    for e in ev:
        if e["backoff"]:
            continue                   # a backed-off RTO is doubled on purpose
        top = e["wbrto_c10"] * e["wbrto_a10"] * unit_us // 100
        assert e["wbrto_c10"] in (10, 15, 20) and e["wbrto_a10"] in (20, 30, 50, 100)
        # (srtt, c * a_i * unit], rounded up to a jiffy; never below rto_min
        assert e["rto"] > e["srtt"] and e["rto"] >= 200000 - 4000, e
        assert e["rto"] <= min(top, 120_000_000) + 4000, e
        rtos_by_flow.setdefault(e["src"], set()).add(e["rto"])
    # random at each computation: most flows see many values, and they differ
    # from flow to flow
    assert len(rtos_by_flow) >= 2
    assert sum(len(v) > 1 for v in rtos_by_flow.values()) >= len(rtos_by_flow) / 2
    assert len(set().union(*rtos_by_flow.values())) > 20
    assert len({min(v) for v in rtos_by_flow.values()}) > 1


def test_wbrto_off_is_stock(guest_wbrto):
    off = guest_wbrto["wbrto"]["0"]
    ev = [e for e in off["probe_snd"] if e["srtt"]]
    assert len(ev) > 100
    for e in ev:
        assert (e["wbrto_max_cwnd"], e["wbrto_awnd"], e["wbrto_c10"], e["wbrto_a10"]) == \
            (0, 0, 0, 0)
        if not e["backoff"]:
            # stock: srtt + max(4 * mdev, rto_min), within a jiffy (HZ 250)
            assert e["rto"] >= e["srtt"] + 200000 - 4000, e
            assert e["rto"] < 3_000_000, e
