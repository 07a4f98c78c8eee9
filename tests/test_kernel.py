"""The patched kernel of kernel-patches/, built for real with its sanitizers
(KASAN, UBSAN, lockdep, kmemleak: the debug flavour) and booted in the
micro-VM (virtme-ng over QEMU, TCG): the extended tcp:tcp_probe, NGWA on
the endpoints and in the ngwa qdisc, WB-RTO, and hostile traffic.

The kernel is built once per session (cached by build.sh: a second session
only looks it up); the guest side is tests/kernel_guest.py, which writes
what it saw into a folder shared with the VM. The checks here hold it to
independent truths: tshark's reading of the captures (with the NGWA
dissector for the option's value), `tc -s`, the stock RTO computed from
each tcp_probe event, and the papers' equations computed by hand. Few
boots: each runs several cases, and each boot's kernel log must hold no
sanitizer report.
"""
from __future__ import annotations

import bisect
import collections
import errno
import json
import math
import os
import re
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kernel_frames as kf
from probe_scenario import stock_rto_matches
from tcpvar.artefacts.probe_record import TRACEPOINT_RENAMES
from tcpvar.capture import vm
from tcpvar.capture.kernel_build import cached, patched_kernel, patched_tc, run_build
from tcpvar.errors import KernelBuildError
from tcpvar.store import Store

from conftest import error_lines
from run_helpers import processes_inside, processes_mentioning

ROOT = Path(__file__).resolve().parent.parent
GUEST = Path(__file__).resolve().parent / "kernel_guest.py"
DISSECTOR = ROOT / "dissectors" / "ngwa.lua"
UNSET = 0xFFFFFFFF
BOOT_TIMEOUT_S = 2400
MSS = 1448                       # 1500 - IPv4 - TCP - timestamps
# the kernel's own words for a crash, on the console
KERNEL_REPORT = re.compile(r"Kernel panic|BUG:|Oops|general protection|KASAN:|UBSAN:|"
                           r"Out of memory|Call Trace:")
WIRE = 1514                      # a full frame, Ethernet header included

# the fields the extended tracepoint adds, by the names docs/probe.md maps
NEW_FIELDS = ["rttvar", "rto", "rto_var", "packets_out", "retrans_out", "lost_out", "sacked_out",
              "ca_state", "retransmits", "backoff", "delivered", "total_retrans",
              "pacing_rate", "ngwa_window", "wbrto_cwnd", "wbrto_max_cwnd", "wbrto_awnd",
              "wbrto_c10", "wbrto_a10"]
STOCK_FIELDS = ["saddr", "daddr", "sport", "dport", "family", "mark", "data_len", "snd_nxt",
                "snd_una", "snd_cwnd", "ssthresh", "snd_wnd", "srtt", "rcv_wnd",
                "sock_cookie"]
VARIANTS = ["reno", "cubic", "bic", "htcp", "highspeed", "hybla", "illinois", "lp",
            "scalable", "vegas", "veno", "westwood", "yeah", "bbr", "cdg", "dctcp", "nv"]
# what the sanitizers and the kernel print when something is wrong
SPLATS = ("BUG:", "WARNING:", "KASAN", "UBSAN", "Oops", "general protection",
          "Call Trace", "possible circular locking", "inconsistent lock state",
          "suspicious RCU usage", "possible recursive locking", "unreferenced object")
SANITIZERS = ("CONFIG_KASAN=y", "CONFIG_UBSAN=y", "CONFIG_PROVE_LOCKING=y",
              "CONFIG_DEBUG_KMEMLEAK=y")


# What the tests saw, for kernel-patches/README.md's table of claims:
# kernel-patches/claims.py runs this file with TCPVAR_KERNEL_SEEN naming a
# file, and writes the figures the tests report here into the table.
SEEN: dict[str, list[str]] = {}


def saw(request, text: str) -> None:
    """@text is what this test saw (said once its assertions held)."""
    spec = getattr(request.node, "callspec", None)
    SEEN.setdefault(request.node.originalname, []).append(
        f"{spec.id}: {text}" if spec else text)


@pytest.fixture(scope="module", autouse=True)
def _seen_file():
    yield
    if path := os.environ.get("TCPVAR_KERNEL_SEEN"):
        Path(path).write_text(json.dumps(SEEN, indent=1) + "\n")


@pytest.fixture(scope="session")
def kernel():
    """(bzImage, tc) of the debug flavour: built once, then found in the cache."""
    return patched_kernel(build=True, debug=True), patched_tc(build=True)


@pytest.fixture(scope="session")
def kernel_config(kernel) -> str:
    """The configuration the image was built with (build.sh keeps it beside)."""
    return (kernel[0].parent / "config").read_text()


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
    # the kernel's messages go to the console too: a guest that dies says why
    cmd = vm.vng_args(image, guest, kvm=False, name=f"tcpvar-test-{out.name[-12:]}",
                      rw_dir=out, append=["trace_event=tcp:tcp_probe"], kernel_log=True)
    results, console = out / "results.json", out / "console.log"
    for attempt in range(2):
        # Tried once more: a boot that never reaches the guest script (QEMU or
        # virtme-ng failing to start, seen with other VMs starting at the same
        # moment), and a guest that died with no word from the kernel (one
        # endpoints boot in six ended at the start of a case, before the
        # kernel's messages were on the console). A guest that failed, or a
        # kernel that reported, is not. The console goes to a file, so a
        # guest that hangs still says where (the cases it finished).
        with console.open("w") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=vm.guest_env(cmd))
            try:
                proc.wait(timeout=BOOT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                pytest.fail(f"the guest ran over {BOOT_TIMEOUT_S} s:\n"
                            f"{console.read_text(errors='replace')[-3000:]}")
        text = console.read_text(errors="replace")
        if results.is_file() or KERNEL_REPORT.search(text):
            break
        if attempt == 0:
            console.rename(out / "console-1.log")
            (out / "started").unlink(missing_ok=True)
    assert results.is_file(), f"the guest wrote no results:\n{text[-3000:]}"
    doc = Guest(json.loads(results.read_text()))
    doc["out"] = out
    return doc


class Guest(dict):
    """The guest's results: a case that raised is an assertion with its error
    where a test reads it, and leaves the other cases of the boot their
    checks."""

    def __getitem__(self, case):
        error = self.get("errors", {}).get(case)
        assert error is None, f"the guest's {case} case failed: {error}"
        return super().__getitem__(case)


# Two boots, each about 100 s of boot and kmemleak scan under the sanitizers
@pytest.fixture(scope="session")
def guest_endpoints(kernel, tmp_path_factory):
    return boot(kernel, tmp_path_factory.mktemp("endpoints"), "basic", "malformed", "smooth",
                "age", "finwait", "l2tp", "ngwa", "insert", "pmtu", "gso", "scaling",
                "backlog", "fd", "modes", "wbrto")


@pytest.fixture(scope="session")
def guest_traffic(kernel, tmp_path_factory):
    return boot(kernel, tmp_path_factory.mktemp("traffic"), "spoof", "flood", "hostile",
                "offload")


@pytest.fixture(scope="session")
def guest_basic(guest_endpoints):
    return guest_endpoints


@pytest.fixture(scope="session")
def guest_ngwa(guest_endpoints):
    return guest_endpoints


@pytest.fixture(scope="session")
def guest_wbrto(guest_endpoints):
    return guest_endpoints


@pytest.fixture(scope="session")
def guest_hostile(guest_traffic):
    return guest_traffic


@pytest.fixture(scope="session")
def guest_offload(guest_traffic):
    return guest_traffic


@pytest.fixture(scope="session")
def kstore(tmp_path_factory):
    s = Store(tmp_path_factory.mktemp("kstore") / "tcpvar.duckdb")
    yield s
    s.close()


def tshark(pcap: Path, *fields: str, filt: str = "") -> list[list[str]]:
    """tshark's fields of each frame (the NGWA dissector loaded for ngwa.*)."""
    args = ["tshark", "-r", str(pcap), "-X", f"lua_script:{DISSECTOR}", "-T", "fields",
            "-E", "occurrence=f"]
    if filt:
        args += ["-Y", filt]
    for f in fields:
        args += ["-e", f]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    return [line.split("\t") for line in out.splitlines()]


def ngwa_values(pcap: Path, src: str = "10.0.1.1") -> list[tuple[float, int]]:
    """(time, NGWA window) of the data segments @src sent, as tshark reads them."""
    rows = tshark(pcap, "frame.time_epoch", "ngwa.window",
                  filt=f"ip.src == {src} && tcp.len > 0 && ngwa.window")
    return [(float(t), int(w)) for t, w in rows]


def xstats(qdiscs: list[dict]) -> dict:
    """The ngwa qdisc of a `tc -s -j` sample."""
    return next(q for q in qdiscs if q.get("kind") == "ngwa")


def counters(stats_text: str) -> dict[str, int]:
    """The ngwa qdisc's own counters from `tc -s` text."""
    text = stats_text.split("qdisc ngwa", 1)[1]
    return {k: int(v) for k, v in re.findall(
        r"\b(flows|halfopen|lowered|inserted|nofit|malformed|refused|expired|closed|"
        r"rejected|evicted|df) (\d+)", text)}


# --- build ---------------------------------------------------------------------

def test_build_is_cached():
    """The flavour tcpvar runs boot (the debug one is the claims campaign's)."""
    image, tc = patched_kernel(build=True), patched_tc(build=True)
    assert image.is_file() and image.stat().st_size > 1_000_000
    assert os.access(tc, os.X_OK)
    stages = []
    assert run_build("kernel", lambda event: stages.append(event.phase)) == image
    assert stages and stages[0].startswith("cached:")
    assert cached("tc") == tc


def test_debug_kernel_carries_the_sanitizers(kernel_config, guest_basic):
    for option in SANITIZERS:
        assert option in kernel_config.splitlines(), option
    dmesg = guest_basic["health"]["dmesg"]
    assert "KernelAddressSanitizer initialized" in dmesg
    assert "Lock dependency validator" in dmesg
    assert guest_basic["health"]["kmemleak"]


def test_series_passes_the_bots_checks():
    """kernel-patches/check.sh, as netdev's bots check a series: each patch
    applied in turn and built with W=1 in a modular configuration (IPv6,
    the ngwa qdisc, L2TP and congestion controls as modules), modpost
    included; no new gcc or sparse warning in the files it touches;
    checkpatch --strict clean with spdxcheck.py running, cover letter
    included. The result is cached by the hash of the series and the
    script, so a new series is checked again."""
    patches = sorted((ROOT / "kernel-patches" / "patches").glob("*.patch"))
    assert len(patches) == 5 and patches[0].name.startswith("0000-cover-letter")
    assert re.search(r"^base-commit: [0-9a-f]{40}$", patches[0].read_text(), re.M)
    done = subprocess.run(["sh", str(ROOT / "kernel-patches" / "check.sh")],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    said = done.stdout.splitlines()
    for patch in patches[1:]:
        assert f"{patch.stem}: builds with W=1, modules and modpost; no new gcc or sparse " \
               f"warning; checkpatch clean" in said, said
    assert said[-1].startswith("checked: 4 patches on linux-source-6.1 "), said


def test_cli_kernel_path():
    # the release flavour: the debug one is built by the claims campaign only
    # (asking for it here cost an empty cache's CI a 21-minute build)
    image, tc = patched_kernel(build=True), patched_tc(build=True)
    done = subprocess.run([sys.executable, "-m", "tcpvar.cli", "kernel", "path"],
                          capture_output=True, text=True, check=False)
    lines = done.stdout.splitlines()
    assert f"kernel: {image}" in lines and f"tc: {tc}" in lines, (done.stdout, done.stderr)


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
    shutil.copytree(ROOT / "kernel-patches", patches)
    (patches / "VERSION").write_text("6.1.0-0\n")
    status, err = run("build", "--no-tc", TCPVAR_KERNEL_PATCHES=str(patches),
                      TCPVAR_CACHE=str(tmp_path / "cache"))
    assert status == 8 and len(err) == 1 and "pins 6.1.0-0" in err[0], err


def test_an_interrupted_build_leaves_nothing(tmp_path):
    """Ctrl-C while make compiles: tcpvar exits 130 with one line, and no
    make, compiler or git of the build is left, nor its half-built tree."""
    proc = subprocess.Popen([sys.executable, "-m", "tcpvar.cli", "kernel", "build", "--no-tc"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TCPVAR_CACHE": str(tmp_path)},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        for line in proc.stderr:                 # stage lines, then make's own
            if "building bzImage" in line:
                break
        logs = list((tmp_path / "kernel").glob("work-*/make.log"))
        deadline = time.monotonic() + 300
        while " CC " not in logs[0].read_text() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert " CC " in logs[0].read_text()    # compilers are running
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert error_lines(err) == ["tcpvar: error: interrupted; the store keeps what was "
                                "complete before"]
    assert not processes_mentioning(str(tmp_path))
    assert not processes_inside(tmp_path)        # git's detached gc, say
    assert sorted(p.name for p in (tmp_path / "kernel").iterdir()) == ["kernel.lock"]


def test_patched_kernel_without_build(tmp_path, monkeypatch):
    monkeypatch.setenv("TCPVAR_CACHE", str(tmp_path))
    for debug in (False, True):
        with pytest.raises(KernelBuildError, match="run `tcpvar kernel build"):
            patched_kernel(build=False, debug=debug)
    with pytest.raises(KernelBuildError, match="run `tcpvar kernel build`"):
        patched_tc(build=False)


# --- the kernel log of every boot ------------------------------------------------

# IPv4 registers before any code of the series can run: its TCP, IP and
# qdisc code all comes later (inet_init, then the qdiscs' initcalls)
INET_UP = "NET: Registered PF_INET protocol family"


@pytest.mark.campaign
@pytest.mark.parametrize("booted", ["guest_endpoints", "guest_traffic"])
def test_sanitizers_report_nothing(booted, request):
    """KASAN, UBSAN, lockdep and the kernel itself said nothing from the
    moment IPv4 registered, whatever code they name, and a kmemleak scan
    after the cases found no leak."""
    health = request.getfixturevalue(booted)["health"]
    early, mark, log = health["dmesg"].partition(INET_UP)
    log = log if mark else early        # a ring buffer that wrapped: all of it
    for splat in SPLATS:
        assert splat not in log, log[max(0, log.index(splat) - 2000):][:6000]
    # Before it, QEMU's TCG now and then draws a report from early boot
    # (one KASAN report in handle_edge_irq at 1.4 s, while the IO-APIC
    # timer was checked, on 2026-11-24): the series cannot be in it, and
    # its cause (TCG's timer emulation or KASAN's) is not found
    assert health["kmemleak"] and not health["leaks"].strip(), health["leaks"][:3000]
    saw(request, f"no report in {len(health['dmesg'].splitlines())} lines of kernel log, "
                 "no leak")


# --- extended tcp_probe, variants, BTF, sysctls --------------------------------

def test_tracepoint_format_lists_new_fields(guest_basic, request):
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
    saw(request, f"{len(STOCK_FIELDS)} stock fields, then {len(NEW_FIELDS)} new ones")


def test_kernel_has_what_tcpvar_needs(guest_basic):
    b = guest_basic["basic"]
    assert b["release"].startswith("6.1.192-tcpvar")
    assert set(VARIANTS) <= set(b["available_cc"])
    assert b["btf"]
    assert b["sysctls"] == {
        "tcp_ngwa": "0", "tcp_ngwa_cwnd": "1", "tcp_ngwa_smooth": "0", "tcp_ngwa_alpha": "300",
        "tcp_ngwa_hold_ms": "1000", "tcp_ngwa_option": "33", "tcp_wbrto": "0",
        "tcp_wbrto_scale": "1", "tcp_wbrto_unit_ms": "1000", "tcp_wbrto_awnd_gain": "2000",
        "tcp_wbrto_thresholds": "5 10 30", "tcp_wbrto_cutoffs": "500 750",
        "tcp_wbrto_weights": "100 50 30 20"}


def test_sysctls_take_what_the_papers_allow(guest_basic, request):
    """Option types other than 33 and RFC 4727's, thresholds and cut-offs
    out of order, weights that grow, values out of range: refused, the old
    value kept; the others taken."""
    got = {(key, value): (status, after)
           for key, value, status, after in guest_basic["basic"]["knob_writes"]}
    refused = [("tcp_ngwa_option", "34"), ("tcp_ngwa_option", "161"),
               ("tcp_wbrto_thresholds", "10 5 30"), ("tcp_wbrto_cutoffs", "800 700"),
               ("tcp_wbrto_weights", "10 20 30 40"), ("tcp_wbrto_weights", "300 30 20 10"),
               ("tcp_wbrto_scale", "4"), ("tcp_ngwa_hold_ms", "60001"),
               ("tcp_wbrto_awnd_gain", "0")]
    for key, value in refused:
        status, after = got[(key, value)]
        assert status != 0 and after != value, (key, value, after)
    for key, value in [("tcp_ngwa_option", "94"), ("tcp_ngwa_option", "222"),
                       ("tcp_wbrto_thresholds", "3 6 12"), ("tcp_wbrto_cutoffs", "400 800"),
                       ("tcp_wbrto_weights", "40 30 20 10")]:
        assert got[(key, value)] == (0, value), (key, value)
    saw(request, f"{len(refused)} writes refused, 5 taken")


def test_switches_are_root_s_to_turn_on(guest_basic, request):
    """tcp_ngwa and tcp_wbrto turn on static branches of the whole host: a
    process without CAP_NET_ADMIN in the initial user namespace (root of a
    user namespace, or here root without the capability) may not be the
    first to turn them on in its network namespace, and may once root did,
    as it may always turn them off."""
    u = guest_basic["basic"]["uncapped"]
    assert all(status != 0 for status in u["before"].values()), u
    assert all(status == 0 for status in u["after"].values()), u
    assert all(status == 0 for status in u["off"].values()), u
    saw(request, f"refused before, taken after, for {', '.join(u['before'])}")


def test_tc_configures_the_ngwa_qdisc(guest_basic):
    shown = guest_basic["basic"]["tc_show"]
    assert "qdisc ngwa" in shown and "limit 50Kb" in shown and " fd" in shown
    assert "flows 100" in shown and "timeout 2s" in shown and "option 33" in shown
    assert counters(shown) == {k: 0 for k in ("flows", "halfopen", "lowered", "inserted",
                                              "nofit", "malformed", "refused", "expired",
                                              "closed", "rejected", "evicted", "df")}
    writes = {args: (status, shown) for args, status, _, shown in
              guest_basic["basic"]["tc_writes"]}
    assert writes["option 94"][0] == 0 and "option 94" in writes["option 94"][1]
    for bad in ("option 34", "flows 0", "flows 20000", "timeout 0", "limit 0"):
        assert writes[bad][0] != 0, bad


def test_extended_probe_ingested(guest_ngwa, kstore, tmp_path, request):
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
    saw(request, f"{events} events, every column filled")


def test_malformed_options_ignored_and_counted(guest_basic, request):
    """Every malformed packet IPv4 takes in is counted once, the good one
    not; a socket's own malformed options are refused, and not counted."""
    m = guest_basic["malformed"]
    assert m["bad_counted"] == sum(m["sent"].values())
    assert m["setsockopt_refused"] == errno.EINVAL and m["setsockopt_counted"] == 0, m
    saw(request, f"{m['bad_counted']} of {sum(m['sent'].values())} counted "
                 f"({len(m['sent'])} kinds)")


# --- NGWA: the receiver ------------------------------------------------------------

def malformed(item: str) -> bool:
    """An item of an option_sender() spec that sends a malformed option."""
    return item.startswith(("len", "twice"))


def expected_windows(spec: list[str], smooth: bool, alpha: int) -> list[int]:
    """The window a receiver keeps before each segment of @spec arrives (what
    its tcp_probe event shows): eq. (4) of the NGWA paper in thousandths, from
    the first value; an unset value releases it (0); a segment without the
    option, or with a malformed one, keeps it."""
    shown, w, seen = [], 0, False
    for item in spec:
        shown.append(w if seen else 0)
        if item == "none" or malformed(item):
            continue                    # kept: a router may not have fitted it
        if item == "unset":
            seen = False
            continue
        v = int(item)
        w = (w * (1000 - alpha) + v * alpha) // 1000 if (seen and smooth) else v
        seen = True
    return shown


def test_smoothing_follows_eq4(guest_basic, request):
    """A known sequence of values, one per segment: the window the receiver
    keeps is eq. (4)'s, to the byte, with alpha 0.3 and 0.7, and each value
    as it comes without smoothing; unset values release it, segments
    without the option keep it."""
    for label in ("a300", "a700", "plain"):
        run = guest_basic["smooth"][label]
        spec = run["spec"]
        assert run["data_len"] == [100] * len(spec), label
        assert run["ngwa_window"] == expected_windows(spec, run["smooth"], run["alpha"]), label
        valued = [s for s in spec if s not in ("unset", "none")]
        assert run["received"] == len(valued)
        # released: each unset value while one was kept
        kept, releases = False, 0
        for item in spec:
            releases += item == "unset" and kept
            kept = item != "unset" and (kept or item != "none")
        assert run["released"] == releases
    saw(request, f"{len(spec)} segments per run, {len(valued)} values, {releases} releases")


def test_malformed_options_on_a_connection_change_nothing(guest_basic, request):
    """On an established connection, options of lengths 8, 4 and 12 and the
    option twice, with values that would lower the window or release it,
    between well-formed ones: the window kept does not move, each such
    segment is counted once in NGWABadOption, none in NGWARcvOption."""
    run = guest_basic["smooth"]["malformed"]
    spec = run["spec"]
    bad = [s for s in spec if malformed(s)]
    assert run["data_len"] == [100] * len(spec)
    assert run["ngwa_window"] == expected_windows(spec, False, 0)
    assert run["bad"] == len(bad) and run["received"] == 2 and run["released"] == 0, run
    saw(request, f"{len(bad)} malformed among {len(spec)} segments: the window kept "
                 f"{run['ngwa_window'][1:]}")


def rcv_windows(pcap: Path) -> list[tuple[str, int, int, int]]:
    """(flags, ack, window in bytes, shift) of the receiver's segments, the
    window scaled by the shift its SYN-ACK announced."""
    rows = tshark(pcap, "tcp.flags", "tcp.ack_raw", "tcp.window_size_value",
                  "tcp.options.wscale.shift", filt="ip.src == 10.0.3.1")
    shift, out = 0, []
    for flags, ack, win, ws in rows:
        if int(flags, 16) & 0x02:
            shift = int(ws or 0)
            continue
        out.append((flags, int(ack), int(win) << shift, shift))
    return out


def test_value_ages_out(guest_basic, request):
    """Held at NGWA 3000 for 300 kB, the receiver offers about 3000 bytes;
    3 s later, with no new value, its next segment offers its whole buffer
    when values hold 1 s, and still 3000 when they hold for ever."""
    age = guest_basic["age"]
    floor = max(age["1000"]["value"], 2 * MSS)
    for hold, aged in (("1000", True), ("0", False)):
        rows = rcv_windows(guest_basic["out"] / f"age_{hold}.pcap")
        # the reply, the receiver's one segment with data; the ACKs before it
        # (after it, the ACK of the sender's FIN may come alone)
        at = next(i for i, (flags, *_) in enumerate(rows) if int(flags, 16) & 0x08)
        acks = [w for flags, _, w, _ in rows[:at] if int(flags, 16) == 0x10]
        unit = 1 << rows[0][3]
        assert acks[-1] <= floor + unit, (hold, acks[-5:])        # held at the value
        reply = rows[at][2]
        if aged:
            assert reply > 4 * (floor + unit), (hold, reply)
            assert age[hold]["released"] == 1
        else:
            assert reply <= floor + unit, (hold, reply)
            assert age[hold]["released"] == 0
    saw(request, "1 release after 1 s, none when held for ever")


def test_a_half_closed_receiver_clamps_too(guest_basic, request):
    """A receiver in FIN_WAIT (it closed its side before the data came) held
    at NGWA 3000 offers about 3000 bytes, as an established one does."""
    value = guest_basic["finwait"]["value"]
    rows = rcv_windows(guest_basic["out"] / "finwait.pcap")
    fin = next(i for i, (flags, _, _, _) in enumerate(rows) if int(flags, 16) & 0x01)
    acks = [w for flags, _, w, _ in rows[fin + 1:] if int(flags, 16) == 0x10]
    unit = 1 << rows[0][3]
    late = acks[len(acks) // 2:]
    assert len(acks) > 50 and max(late) <= max(value, 2 * MSS) + unit, (len(acks), late[-5:])
    saw(request, f"{len(acks)} ACKs after its FIN, the last half at most {max(late)} B")


def test_l2tp_outer_headers_get_no_option(guest_basic, request):
    """An NGWA connection through an L2TPv3 pseudowire: its segments carry
    the option, the tunnel's UDP packets around them none, and the data
    arrives."""
    lt, out = guest_basic["l2tp"], guest_basic["out"]
    assert lt["received"] == lt["sent"], lt
    inner = tshark(out / "l2tp_inner.pcap", "ngwa.window", filt="tcp.len > 0 && ngwa")
    outer = tshark(out / "l2tp_outer.pcap", "ip.hdr_len", filt="udp.port == 1701")
    assert len(inner) > 100 and len(outer) > 100
    assert {h for (h,) in outer} == {"20"}, {h for (h,) in outer}
    saw(request, f"{len(inner)} inner segments with the option, {len(outer)} UDP packets "
                 "without")


def test_receiver_window_never_shrinks_nor_passes_the_value(guest_ngwa, request):
    """From the receiver's capture: the right edge it offers (ACK + window)
    never moves back (RFC 7323), and when it moves on, the window stays within
    an NGWA value the stack can have taken last, or the floor of two segments.
    Those are the values of the data captured before the ACK from the segment
    it acknowledges on, and of any earlier segment the previous ACK had not
    acknowledged: two CPUs take the receiver's packets, so a segment captured
    just before another can reach TCP after it (seen: 41156 B taken after
    38347 B, captured 8 us apart)."""
    rows = tshark(guest_ngwa["out"] / "ngwa_rcv.pcap", "ip.src", "tcp.srcport",
                  "tcp.dstport", "tcp.flags", "tcp.seq_raw", "tcp.len", "tcp.ack_raw",
                  "tcp.window_size_value", "tcp.options.wscale.shift", "ngwa.window")
    ports = [r[1] for r in rows if r[0] == "10.0.1.1"]
    data_port = max(set(ports), key=ports.count)           # the data connection
    data: list[tuple[int, int]] = []        # (sequence end, NGWA value), as captured
    ending: dict[int, int] = {}             # sequence end -> its segment's index
    shift, right, last_ack, checked, bounded = 0, None, None, 0, 0
    for src, sport, dport, flags, seq, length, ack, win, ws, ngwa in rows:
        if src == "10.0.1.1" and sport == data_port:
            if int(length) and ngwa and int(ngwa) != UNSET:
                end = (int(seq) + int(length)) % 2**32
                ending[end] = len(data)
                data.append((end, int(ngwa)))
            continue
        if src != "10.0.3.1" or dport != data_port:
            continue
        if int(flags, 16) & 0x02:
            shift = int(ws or 0)
            continue
        if int(flags, 16) & 0x04 or not int(flags, 16) & 0x10:
            continue                        # a RST (iperf3's end) offers no window
        ack, offered = int(ack), int(win) << shift
        edge = (ack + offered) % 2**32
        if right is not None:
            assert (edge - right) % 2**32 < 2**31, ("the window shrank", ack, offered)
            if edge != right and ack in ending:
                unit = 1 << shift
                kept = -(-((right - ack) % 2**32) // unit) * unit    # ALIGN(cur_win)
                first = ending[ack]
                late = [v for end, v in data[:first] if 0 < (end - last_ack) % 2**32 < 2**31]
                in_force = max([v for _, v in data[first:]] + late + [2 * MSS])
                assert offered <= max(kept, in_force), (ack, offered, kept, in_force)
                bounded += offered > kept
                checked += 1
        right, last_ack = edge, ack
    assert checked > 100 and bounded > 50, (checked, bounded)
    assert guest_ngwa["ngwa"]["netstat_rcv"]["TcpExtNGWARcvOption"] > 100
    saw(request, f"{checked} ACKs moving the edge, {bounded} of them held by a value")


def values_by_segment(pcap: Path) -> dict[int, int]:
    """The NGWA value of each data segment the sender sent once, by its
    sequence number (retransmitted ones left out)."""
    rows = tshark(pcap, "tcp.seq_raw", "ngwa.window",
                  filt="ip.src == 10.0.1.1 && tcp.len > 0 && ngwa.window")
    seen = collections.Counter(seq for seq, _ in rows)
    return {int(seq): int(w) for seq, w in rows if seen[seq] == 1}


def test_ngwa_values_bounded_by_the_queues(guest_ngwa, request):
    out = guest_ngwa["out"]
    mid = [w for _, w in ngwa_values(out / "ngwa_r1_out.pcap")]      # after r1 (60000 B)
    rcv = [w for _, w in ngwa_values(out / "ngwa_rcv.pcap")]         # after r2 (45000 B)
    assert len(mid) > 200 and len(rcv) > 200
    # written by r1 on every data packet: never above its queue's size
    assert UNSET not in mid and max(mid) <= 60000
    assert max(mid) > 45000              # r1 had more room than r2's whole queue
    # after r2 the smaller of the two survives: never above r2's queue, and
    # r1's lower values still come through
    assert UNSET not in rcv and max(rcv) <= 45000 and min(rcv) < 45000
    assert counters(guest_ngwa["ngwa"]["r1_stats"])["lowered"] > 0
    # segment by segment, r2 never raises what r1 wrote
    at_r1, at_rcv = (values_by_segment(out / f) for f in ("ngwa_r1_out.pcap", "ngwa_rcv.pcap"))
    both = at_r1.keys() & at_rcv.keys()
    assert len(both) > 200 and all(at_rcv[seq] <= at_r1[seq] for seq in both)
    kept = sum(at_rcv[seq] == at_r1[seq] for seq in both)
    saw(request, f"{len(rcv)} values; max {max(mid)} after r1 (60000 B), {max(rcv)} after r2 "
                 f"(45000 B); {kept} of {len(both)} segments kept r1's value")


def test_router_inserts_the_option_into_data_only(guest_ngwa, request):
    """A sender without NGWA nor DF: its data segments reach the receiver
    with the option and a value; its SYNs, pure ACKs and FINs without data
    without it."""
    ins = guest_ngwa["insert"]["nodf"]
    c = counters(ins["r1_stats"])
    assert c["inserted"] > 100 and c["df"] == 0, c
    pcap = guest_ngwa["out"] / "insert_nodf.pcap"
    rows = ngwa_values(pcap)
    assert len(rows) > 100 and max(w for _, w in rows) <= 60000
    bare = tshark(pcap, "tcp.flags", "ngwa.window", filt="ip.src == 10.0.1.1 && tcp.len == 0")
    assert len(bare) >= 10 and any(int(f, 16) & 0x02 for f, _ in bare), bare[:5]
    assert [r for r in bare if r[1]] == [], bare[:5]
    saw(request, f"{c['inserted']} inserted; {len(bare)} segments without data, none given it")


def test_df_segments_are_not_grown(guest_ngwa, request):
    """With DF set the routers insert nothing: the sender sized its packets
    for the path, and they count what they left alone."""
    df = guest_ngwa["insert"]["df"]
    c = counters(df["r1_stats"])
    assert c["inserted"] == 0 and c["df"] > 100, c
    assert all(st["bytes"] > 0 for st in df["iperf"]["streams"])
    assert not tshark(guest_ngwa["out"] / "insert_df.pcap", "frame.number",
                      filt="ip.src == 10.0.1.1 && ngwa")
    saw(request, f"0 inserted, {c['df']} left alone")


def test_a_narrower_hop_with_df_is_no_black_hole(guest_ngwa, request):
    """A hop after r1 with MTU 1400: with DF the sender finds the path MTU
    and the 2 MB arrive, in packets of at most 1400 bytes that r1 did not
    grow; without DF r1 inserts the option, r2 fragments, and they arrive
    too."""
    pm, out = guest_ngwa["pmtu"], guest_ngwa["out"]
    df, nodf = pm["df"], pm["nodf"]
    assert df["received"] == df["sent"], df
    c = counters(df["r1_stats"])
    assert c["inserted"] == 0 and c["df"] > 1000, c
    sizes = [int(n) for (n,) in tshark(out / "pmtu_df.pcap", "ip.len",
                                       filt="ip.src == 10.0.1.1 && tcp.len > 0")]
    assert len(sizes) > 1000 and max(sizes) == 1400, max(sizes)
    assert nodf["received"] == nodf["sent"], nodf
    assert counters(nodf["r1_stats"])["inserted"] > 1000
    # the option is in the first fragment of each segment
    firsts = tshark(out / "pmtu_nodf.pcap", "ngwa.window",
                    filt="ip.src == 10.0.1.1 && ip.flags.mf == 1 && ngwa.window")
    assert len(firsts) > 1000
    saw(request, f"2 MB with DF in {df['took_s']} s, {c['df']} left alone; without DF in "
                 f"{nodf['took_s']} s, {len(firsts)} first fragments with the option")


def frames(pcap: Path) -> list[tuple[int, int]]:
    """(frame length, TCP payload or 0) of every frame."""
    return [(int(n), int(t or 0)) for n, t in tshark(pcap, "frame.len", "tcp.len")]


@pytest.mark.parametrize("shaper", ["tbf", "htb"])
def test_shapers_are_charged_what_leaves(guest_ngwa, shaper, request):
    """GRO at r1 merged wire-sized segments into packets TBF admits whole
    (2 segments of 1428 bytes: 2988 bytes with their headers, within its
    burst of 3000), which ngwa gave the option: the transfer never stalls,
    and the shaper and ngwa counted the bytes and packets r1 sent, frame
    for frame, and hold nothing once it ends."""
    g, out = guest_ngwa["gso"][shaper], guest_ngwa["out"]
    assert g["intervals"] and min(g["intervals"]) > 0, g["intervals"]
    assert all("0 packets dropped by kernel" in t for t in g["tcpdump"]), g["tcpdump"]
    merged = [(n, t) for n, t in frames(out / f"gso_{shaper}_in.pcap") if t > MSS]
    assert any(n + 66 <= 3000 for n, _ in merged), merged[:5]
    sent = frames(out / f"gso_{shaper}_out.pcap")
    assert max(n for n, _ in sent) <= WIRE
    # every data segment that left got the option (a count that depends on
    # no rate: the host's load sets how many there are)
    data = sum(1 for _, t in sent if t)
    assert data > 100 and counters(g["r1_stats"])["inserted"] == data
    for kind in (shaper, "ngwa"):
        b4 = next(q for q in g["before"] if q["kind"] == kind)
        now = next(q for q in g["after"] if q["kind"] == kind)
        assert now["bytes"] - b4["bytes"] == sum(n for n, _ in sent), kind
        assert now["packets"] - b4["packets"] == len(sent), kind
        assert now["backlog"] == 0 and now["qlen"] == 0, now
    saw(request, f"{len(merged)} GRO packets in, {len(sent)} frames and "
                 f"{sum(n for n, _ in sent)} B out, as counted")


def test_value_is_the_free_space_at_the_payload_share(guest_ngwa, request):
    """Segments of 1 to 1440 bytes, each alone in r1's queue: the value r1
    wrote is its whole limit times the segment's payload over its length
    on the wire, to the byte."""
    sc = guest_ngwa["scaling"]
    rows = tshark(guest_ngwa["out"] / "scaling.pcap", "frame.len", "tcp.len", "ngwa.window",
                  filt="ip.src == 10.0.1.1 && tcp.len > 0")
    got = [(int(t), int(w), sc["limit"] * int(t) // int(n)) for n, t, w in rows]
    assert sorted({t for t, _, _ in got}) == sorted(set(sc["sizes"])), got
    assert [g for g in got if g[1] != g[2]] == []
    saw(request, f"{len(got)} of {len(got)} values exact, {min(w for _, w, _ in got)} to "
                 f"{max(w for _, w, _ in got)} B")


def test_value_never_above_the_free_space(guest_ngwa, request):
    """r2's size table counts each packet 1400 bytes shorter than it is, so
    that its payload share is above 1: the values after r2 stay within its
    queue, and r2 wrote them."""
    sc = guest_ngwa["scaling"]
    values = [w for _, w in ngwa_values(guest_ngwa["out"] / "stab_rcv.pcap")]
    assert len(values) > 100 and max(values) <= sc["r2_limit"]
    assert counters(sc["r2_stats"])["lowered"] > 100
    saw(request, f"{len(values)} values, max {max(values)} B")


# --- NGWA: the queue -----------------------------------------------------------------

def fifo(pcap_in: Path, pcap_out: Path):
    """The packets that entered r1's queue and those that left it, matched by
    (source port, IP id): [(time in, time out or None, wire bytes, TCP
    payload, NGWA value when out)] in the FIFO's order."""
    fields = ("frame.time_epoch", "tcp.srcport", "ip.id", "frame.len", "tcp.len",
              "ngwa.window")
    out = {(p, i): (float(t), int(w or 0)) for t, p, i, _, _, w in tshark(pcap_out, *fields)}
    return [(float(t), out.get((p, i), (None,))[0], int(n), int(payload),
             out.get((p, i), (None, None))[1])
            for t, p, i, n, payload, _ in tshark(pcap_in, *fields)]


def test_value_follows_the_backlog(guest_ngwa, request):
    """Each value r1 wrote is its free space once the packet left, in bytes of
    payload at that packet's payload share: (limit - backlog) * payload /
    wire bytes, the backlog rebuilt from the captures where packets entered
    and left r1 (a FIFO: the packets behind it that had entered). `tc -s`
    samples of the backlog agree with the rebuilt one. A queue that wrote a
    constant would fail both."""
    b = guest_ngwa["backlog"]
    limit, out = b["limit"], guest_ngwa["out"]
    pkts = fifo(out / "backlog_in.pcap", out / "backlog_out.pcap")
    kept = [p for p in pkts if p[1] is not None]        # the others were dropped
    assert len(kept) > 1000
    ins = [p[0] for p in kept]
    horizon = ins[-1] - 0.2                 # what entered later, ingress may lack
    errors, values = [], []
    for k, (_, t_out, wire, payload, value) in enumerate(kept):
        if not payload or t_out > horizon:
            continue
        later = kept[k + 1:bisect.bisect_left(ins, t_out, lo=k + 1)]
        backlog = sum(p[2] for p in later)
        want = (limit - min(limit, backlog)) * payload // wire
        errors.append(abs(value - want))
        values.append(value)
    errors.sort()
    # most values are exact to the byte (the payload share included, which
    # a median error of 0 pins); the others are off by whole packets whose
    # order at the two capture points (time stamps taken on either side of
    # the queue) differs from the queue's
    assert statistics.median(errors) == 0, errors[len(errors) // 2:][:20]
    assert errors[int(0.95 * len(errors))] <= 2 * MSS, errors[-20:]
    assert min(values) < 0.5 * limit and max(values) > 0.8 * limit * MSS / WIRE

    def rebuilt(t):
        return sum(p[2] for p in kept if p[0] < t < p[1])

    samples = json.loads((out / "backlog_tc.json").read_text())
    agree = busy = 0
    for s in samples:
        q = xstats(s["qdiscs"])
        grid = [s["t0"] + (s["t1"] - s["t0"]) * i / 8 for i in range(9)]
        lo, hi = min(map(rebuilt, grid)), max(map(rebuilt, grid))
        busy += q["backlog"] > 4 * WIRE
        agree += lo - WIRE <= q["backlog"] <= hi + WIRE
    assert busy > 20 and agree >= 0.9 * len(samples), (agree, len(samples))
    saw(request, f"{len(errors)} values, median error {statistics.median(errors):.0f} B, "
                 f"95th percentile {errors[int(0.95 * len(errors))]} B; "
                 f"{agree} of {len(samples)} tc samples agree")


def ngwa_over_time(samples) -> list[tuple[float, dict]]:
    """(mid-time, the ngwa qdisc) of each `tc -s -j` sample that shows one
    (while a queue is replaced, a sample shows its parent alone)."""
    return [((s["t0"] + s["t1"]) / 2, xstats(s["qdiscs"])) for s in samples
            if any(q.get("kind") == "ngwa" for q in s["qdiscs"])]


def flows_over_time(samples) -> list[tuple[float, int]]:
    return [(t, x["flows"]) for t, x in ngwa_over_time(samples)]


def test_flow_division_counts_live_flows(guest_ngwa, request):
    """tc's count of flows is the number of flows sending while they send, 0
    once their FINs crossed r1; a flow whose link went down (nothing of it
    crosses r1 again) is forgotten after the timeout."""
    fd = guest_ngwa["fd"]
    for n in ("1", "2"):
        series = flows_over_time(fd[n]["samples"])
        begun = next(t for t, f in series if f)
        during = [f for t, f in series if begun <= t < fd[n]["ended"] - 0.5]
        assert statistics.median(during) == int(n) and max(during) == int(n), series
        assert [f for t, f in series if t > fd[n]["ended"] + 0.3] == \
            [0] * sum(1 for t, _ in series if t > fd[n]["ended"] + 0.3), series
        c = counters(fd[n]["r1_stats"])
        assert c["closed"] == int(n) and c["expired"] == 0 and c["refused"] == 0
    gone = fd["vanished"]
    series = flows_over_time(gone["samples"])
    before = [f for t, f in series if t < gone["down"]]
    after = [f for t, f in series if t > gone["down"] + gone["timeout_s"] + 0.4]
    assert before[-1] == 1 and after and set(after) == {0}, series
    c = counters(gone["r1_stats"])
    assert c["expired"] >= 1 and c["closed"] == 0
    saw(request, f"1 and 2 flows counted, closed 1 and 2; expired {c['expired']}")


def test_retransmissions_after_a_fin_do_not_count_the_flow(guest_ngwa, request):
    """Data that crosses r1 again after the flow's FIN (r2 dropped it the
    first time) does not count the flow anew: tc's count is 1 while it
    sends, 0 from its FIN on, through the retransmissions and after."""
    fin = guest_ngwa["fd"]["fin"]
    assert fin["received"] == 112_000, fin["received"]
    rows = tshark(guest_ngwa["out"] / "fd_fin.pcap", "frame.time_epoch", "tcp.flags.fin",
                  "tcp.len", filt="ip.src == 10.0.1.1")
    fin_at = min(float(t) for t, f, _ in rows if f in ("1", "True"))
    again = [float(t) for t, _, n in rows if float(t) > fin_at and int(n)]
    assert len(again) >= 2, "no data crossed r1 after the FIN: the case did not happen"
    series = [(s["t0"], s["t1"], xstats(s["qdiscs"])["flows"]) for s in fin["samples"]]
    assert 1 in {f for _, t1, f in series if t1 < fin_at}, series
    after = [f for t0, _, f in series if t0 > fin_at]
    assert after and set(after) == {0}, series
    assert counters(fin["r1_stats"])["closed"] == 1
    saw(request, f"{len(again)} data segments after the FIN, over {again[-1] - fin_at:.1f} s; "
                 f"{len(after)} tc samples from the FIN on, all 0 flows")


def test_flow_division_halves_the_window(guest_ngwa, request):
    one = [w for _, w in ngwa_values(guest_ngwa["out"] / "fd_1.pcap")]
    two = [w for _, w in ngwa_values(guest_ngwa["out"] / "fd_2.pcap")]
    assert max(one) <= 0.98 * 60000 and max(two) <= 0.98 * 60000
    # once both flows are counted (all but the first packets), at most half
    assert sorted(two)[int(0.9 * len(two))] <= 0.98 * 60000 / 2 + 1
    # with two flows the values are about half those of one flow
    ratio = statistics.median(two) / statistics.median(one)
    assert 0.3 < ratio < 0.7, (statistics.median(one), statistics.median(two))
    assert all(b > 0 for b in guest_ngwa["fd"]["2"]["bytes"])
    saw(request, f"medians {statistics.median(one):.0f} and {statistics.median(two):.0f} B "
                 f"({ratio:.2f})")


def in_flight(ev: dict) -> int:
    """Segments in the network, as tcp_packets_in_flight() counts them: the
    ones cwnd bounds."""
    return ev["packets_out"] - ev["sacked_out"] - ev["lost_out"] + ev["retrans_out"]


def p90(values) -> float:
    return sorted(values)[int(0.9 * len(values))]


def test_mode_table(guest_ngwa, request):
    """Every mode of Table 1 behaves as its columns say, two flows each.
    CW: with a congestion window the sender keeps within it; without one it
    goes beyond it, fills the window the receiver offers, and cwnd, which no
    longer limits, grows no further than twice what was ever in flight. FD:
    the receivers' values stay within half the queue, and without it go
    beyond. SE: the receiver's window moves in smaller steps than in the
    same mode without smoothing."""
    modes = guest_ngwa["modes"]
    # mode: (CW, FD); SE is on in the even modes, each the twin of the one before
    table = {1: (1, 0), 2: (1, 0), 3: (0, 0), 4: (0, 0), 5: (1, 1), 6: (1, 1), 7: (0, 1),
             8: (0, 1)}
    fill, steps = {}, {}
    for mode, (cw, fd) in table.items():
        m = modes[str(mode)]
        assert all(s["bytes"] > 0 for s in m["iperf"]["streams"]), mode
        values = m["rcv_ngwa"]
        assert len(values) > 100, mode
        half = 0.98 * 60000 / 2
        if fd:
            assert p90(values) <= half + 1, (mode, p90(values))
        else:
            assert max(values) > half, (mode, max(values))
        steps[mode] = p90([abs(b - a) for a, b in zip(values, values[1:]) if b != a])
        over = sum(1 for e in m["snd"] if in_flight(e) > e["snd_cwnd"])
        if cw:
            assert over <= 0.01 * len(m["snd"]), (mode, over)
            continue
        # stock Reno goes beyond cwnd for an event or two entering recovery;
        # without cwnd, 2 % to 38 % of the events were beyond it in the run
        # of 2026-11-26 (the modes with FD the least: their window is half)
        assert over >= 0.01 * len(m["snd"]), (mode, over, len(m["snd"]))
        ev = [e for e in m["snd"] if e["snd_wnd"] > 4 * MSS and e["ca_state"] == 0]
        fill[mode] = statistics.median(in_flight(e) * MSS / e["snd_wnd"] for e in ev)
        assert fill[mode] >= 0.8, (mode, fill[mode])
        assert max(e["snd_cwnd"] for e in m["snd"]) <= \
            2 * max(e["packets_out"] for e in m["snd"]) + 10, mode
    # eq. (4) with alpha 0.3 moves the window by 0.3 of each change: its
    # steps were 0.36 to 0.52 of the same mode's without smoothing
    for plain, smooth in ((1, 2), (3, 4), (5, 6), (7, 8)):
        assert steps[smooth] < 0.75 * steps[plain], (plain, smooth, steps)
    saw(request, "modes 1-8; without cwnd the offered window filled to "
                 + ", ".join(f"{v:.2f}" for v in fill.values())
                 + "; smoothed steps " + ", ".join(f"{steps[s] / steps[p]:.2f}"
                                                  for p, s in ((1, 2), (3, 4), (5, 6), (7, 8)))
                 + " of the plain ones")


# --- NGWA under attack ----------------------------------------------------------------

def test_spoofed_flood_no_longer_starves_once_the_timeout_passed(guest_hostile, request):
    """A real flow through `ngwa fd`; 2000 forged flows (a SYN, then a
    segment of data in sequence) are counted and starve it (the window
    divided by 2001); 20,000 spoofed SYNs are never counted (4096 half-open
    places, the oldest evicted); once the timeout (60 s) has passed without
    a packet of theirs, the forged flows are forgotten and the real flow's
    window is back."""
    sp = guest_hostile["spoof"]
    marks, limit = sp["marks"], sp["limit"]
    values = ngwa_values(guest_hostile["out"] / "spoof.pcap")
    series = ngwa_over_time(sp["samples"])

    def phase(lo, hi):
        return [w for t, w in values if lo <= t < hi]

    base = statistics.median(phase(marks["start"] + 2, marks["completed"]))
    starved = phase(marks["completed"] + 1.5, marks["syns"])
    recovered = phase(marks["end"] - 2, marks["end"])
    assert base > 0.5 * limit * MSS / WIRE
    assert max(x["flows"] for t, x in series if marks["completed"] + 1 < t < marks["syns"]) \
        >= 1500
    assert statistics.median(starved) < 0.01 * base, (base, starved[:20])
    last = [x["flows"] for t, x in series if marks["end"] - 1 < t < marks["end"]]
    assert last and last == [1] * len(last), last      # then the real flow ends too
    assert marks["back"] and recovered, \
        f"the real flow did not move again within {marks['end'] - marks['flood_end']:.0f} s"
    assert statistics.median(recovered) > 0.5 * base, (base, recovered[:20])
    final = counters(sp["r1_stats"])
    # each of the 22,000 forged flows was evicted or expired; a flood that
    # outlasts the timeout (it took 120 s in a full suite's run, 50 s
    # alone) frees the places of its first half-opens, so evictions alone
    # need not reach 20,000 - 4096. The real flow may have expired once
    # too: starved, its probes back off past the timeout (seen in a run of
    # 2026-11-28); it counts again at its next data
    assert 22000 <= final["evicted"] + final["expired"] <= 22001, final
    assert final["refused"] == 0 and final["evicted"] > 0 and final["expired"] >= 2000, final
    assert max(x["halfopen"] for _, x in series) <= 4096          # the quota
    assert max(x["flows"] for _, x in series) <= 2001 + 1
    saw(request, f"2000 forged flows counted, the value from {base:.0f} B down to "
                 f"{statistics.median(starved):.0f} B; 20,000 SYNs: {final['evicted']} evicted, "
                 f"at most {max(x['halfopen'] for _, x in series)} half-open; after the "
                 f"timeout 1 flow and {statistics.median(recovered):.0f} B")


def test_flow_division_survives_a_syn_flood(guest_hostile, request):
    """A SYN flood at the default timeout keeps `ngwa fd flows 256`'s
    half-open places full: the flow sending from before it stays counted,
    forged SYNs on its 4-tuple notwithstanding; a flow opened during the
    flood is counted; a new queue counts both without seeing them open; no
    forged SYN is ever counted."""
    fl = guest_hostile["flood"]
    marks = fl["marks"]
    series = ngwa_over_time(fl["samples"])

    def flows(lo, hi):
        return [x["flows"] for t, x in series if lo < t < hi]

    sent = fl["sent"][0]
    # 125 a second with a kernel build beside the guest, 400 alone: either
    # outruns the half-open places (256 in 5 s), which `full` checks
    assert sent["syns"] > 2000 and sent["on_real"] > 100, sent
    assert all(n > 0 for n in fl["received"]), fl["received"]
    assert max(x["halfopen"] for _, x in series) == 256
    assert max(x["flows"] + x["halfopen"] for _, x in series) <= 2 * 256
    full = [x["halfopen"] for t, x in series if marks["flood"] + 3 < t < marks["replacing"]]
    assert statistics.median(full) == 256, full
    assert set(flows(marks["flood"], marks["second"])) == {1}, series
    assert set(flows(marks["second"] + 2, marks["replacing"])) == {2}, series
    assert set(flows(marks["replaced"] + 2, marks["flood_end"])) == {2}, series
    c = counters(fl["r1_stats"])
    assert c["evicted"] > 1000 and c["refused"] == 0, c
    saw(request, f"{sent['syns']} SYNs in 45 s, {sent['on_real']} on the real flow's "
                 f"4-tuple; {c['evicted']} evicted; 1, then 2 flows counted throughout")


# What r1's queue leaves alone as malformed, from RFC 791's rules for the
# options and the NGWA option's own (exactly one, of 6 bytes): the truth the
# hostile case's counts are held to, frame by frame

def header_len(ip: bytes) -> int:
    """The length of @ip's IPv4 header, or 0: shorter than 20 bytes, of
    another version, or an IHL below 5."""
    return (ip[0] & 0xF) * 4 if len(ip) >= 20 and ip[0] >> 4 == 4 and ip[0] & 0xF >= 5 else 0


def option_list(ip: bytes, hlen: int) -> list[tuple[int, int]] | None:
    """(type, length) of the options of an IPv4 header of @hlen bytes, up to
    the end of the list; None if one is shorter than 2 bytes or runs past
    the header."""
    found, off = [], 20
    while off < hlen and ip[off] != kf.EOL:
        if ip[off] == kf.NOP:
            off += 1
            continue
        if off + 2 > hlen or ip[off + 1] < 2 or off + ip[off + 1] > hlen:
            return None
        found.append((ip[off], ip[off + 1]))
        off += ip[off + 1]
    return found


def queue_finds_malformed(ip: bytes) -> bool:
    """Whether the queue reads @ip (its IPv4 packet as the queue gets it) as
    TCP, unfragmented or the first fragment, with both headers whole, and
    finds its options malformed or its NGWA option other than one of 6 B."""
    hlen = header_len(ip)
    if not hlen or ip[9] != 6 or struct.unpack("!H", ip[6:8])[0] & 0x1FFF:
        return False
    if len(ip) < hlen + 20 or ip[hlen + 12] >> 4 < 5 or len(ip) < hlen + (ip[hlen + 12] >> 4) * 4:
        return False
    options = option_list(ip, hlen)
    return options is None or [n for t, n in options if t == kf.NGWA] not in ([], [6])


def forwarded(ip: bytes) -> bytes | None:
    """@ip as IPv4 input forwards it (cut to its total length), or None:
    a header that is short, of another version, with a wrong checksum or
    length, or options that break RFC 791's rules."""
    hlen = header_len(ip)
    if not hlen:
        return None
    total = struct.unpack("!H", ip[2:4])[0]
    if len(ip) < hlen or kf.checksum(ip[:hlen]) or not hlen <= total <= len(ip):
        return None
    return ip[:total] if option_list(ip, hlen) is not None else None


def expected_malformed(plan: dict) -> tuple[int, int]:
    """(routed and copies, handed to the queue): how many frames of the
    hostile case r1's queue should count as malformed."""
    (n_routed, seed_routed), (n_copies, seed_copies), (n_qdisc, seed_qdisc) = (
        plan["routed"], plan["copies"], plan["qdisc"])
    zero = bytes(6)
    routed = [forwarded(frame[14:]) for _, frame in
              kf.routed_frames(seed_routed, n_routed, zero, zero, kf.PORT)]
    # a copy's segment: the connection's data, whatever its bytes
    segment = kf.tcp(40000, kf.PORT, 1, 1, 0x18, bytes(1000))
    copies = [forwarded(kf.ipv4("10.0.1.1", "10.0.3.1", segment, opts))
              for opts, _ in kf.copy_options(seed_copies, n_copies)]
    garbage = kf.garbage_frames(seed_qdisc, n_qdisc, zero, zero)
    return (sum(1 for ip in routed + copies if ip and queue_finds_malformed(ip)),
            sum(1 for frame in garbage if queue_finds_malformed(frame[14:])))


def test_hostile_frames_cross_without_harm(guest_hostile, request):
    """Over 100,000 hostile frames crossed r1's ngwa queue (routed, handed to
    it directly, and copies in window of a real connection's segments); the
    queue counted as malformed exactly the frames RFC 791 and the NGWA
    option's rules say; the routers and the receiver counted the malformed
    options; a transfer after them is one flow with its whole window."""
    h = guest_hostile["hostile"]
    routed = h["sent"]["routed"]
    total = sum(routed.values()) + h["sent"]["qdisc"]["sent"] + h["sent"]["copies"]["sent"]
    assert total >= 100_000, h["sent"]
    cats = {k.split(":")[0] for k in routed}
    assert cats >= {"options", "bad_ihl", "short", "cut", "fragment", "non_tcp", "tcp_flags"}
    kinds = {k.split(":")[1] for k in routed}
    assert kinds >= {"length", "truncated", "doubled", "post_eol", "random", "valid"}
    # every frame sent, so that the truth counts the frames that were
    assert not any(k.startswith("refused") for k in routed) and not h["sent"]["qdisc"]["refused"]
    assert h["sent"]["copies"]["sent"] == h["plan"]["copies"][0]
    r1, r1_routed = counters(h["stats_after_flood"]["r1"]), counters(h["stats_routed"])
    want_routed, want_qdisc = expected_malformed(h["plan"])
    # routed frames a full input backlog dropped (veth's tx drops) never got there
    assert want_routed - h["snd_tx_dropped"] <= r1_routed["malformed"] <= want_routed, \
        (r1_routed["malformed"], want_routed, h["snd_tx_dropped"])
    assert r1["malformed"] - r1_routed["malformed"] == want_qdisc, (r1, r1_routed, want_qdisc)
    assert r1["lowered"] > 0
    assert h["netstat"]["rcv"]["TcpExtNGWABadOption"] > 1000
    assert h["netstat"]["r1"]["TcpExtNGWABadOption"] > 1000
    assert h["after_bytes"][0] > 0
    during = [xstats(s["qdiscs"])["flows"] for s in h["after_samples"]]
    assert statistics.median(during) == 1, during
    values = [w for _, w in ngwa_values(guest_hostile["out"] / "hostile_after.pcap")]
    assert statistics.median(values) > 0.5 * h["limit"] * MSS / WIRE
    saw(request, f"{total:,} frames in {h['took_s']:.0f} s; r1 left {r1['malformed']:,} "
                 f"malformed alone ({r1_routed['malformed']:,} forwarded, of {want_routed:,} "
                 f"due; {r1['malformed'] - r1_routed['malformed']:,} handed to it, of "
                 f"{want_qdisc:,}); TcpExtNGWABadOption " + ", ".join(
                     f"{h['netstat'][n]['TcpExtNGWABadOption']:,} at {n}"
                     for n in ("r1", "r2", "rcv"))
                 + f"; then 1 flow, median value {statistics.median(values):.0f} B")


# --- NGWA with offloads and IPv6 -------------------------------------------------------

def test_ngwa_with_tso_gso_and_gro(guest_offload, request):
    """With TSO, GSO and GRO on at every hop: NGWA's transfer and one whose
    options r1 inserts both move, values are lowered and reach the
    receiver within the queue. (test_shapers_are_charged_what_leaves
    checks the GSO packets themselves.)"""
    tso = guest_offload["offload"]["tso"]
    assert all(s["bytes"] > 0 for s in tso["iperf"]["streams"])
    assert all(s["bytes"] > 0 for s in tso["inserted_iperf"]["streams"])
    c = counters(tso["r1_stats"])
    assert c["lowered"] > 0 and c["inserted"] > 0
    assert tso["received_options"] > 100
    pcap = guest_offload["out"] / "offload_rcv.pcap"
    values = [w for _, w in ngwa_values(pcap)]
    assert values and max(values) <= 60000
    # Both transfers' data segments, the sender's TSO packets cut by its
    # GSO or by r1's queue, each arrive with the option: the sender's, or
    # in the second (DF off, -M 1200: every segment fits) the one r1 wrote
    data = tshark(pcap, "ngwa.window", filt=f"ip.src == 10.0.1.1 && tcp.dstport == {kf.PORT} "
                                            "&& tcp.len > 0")
    bare = sum(1 for (w,) in data if not w)
    assert len(data) > 1000 and bare == 0, (len(data), bare, c)
    saw(request, f"{c['lowered']} lowered, {c['inserted']} inserted, values up to "
                 f"{max(values)} B; {len(data) - bare} of {len(data)} data segments with "
                 "the option")


def test_gro_does_not_merge_ngwa_segments(guest_offload, request):
    """With GRO on at the receiver and wire-sized segments from the sender,
    segments without options are merged (above one MSS), NGWA's are not."""
    out = guest_offload["out"]
    plain = [int(n) for (n,) in tshark(out / "gro_plain.pcap", "tcp.len",
                                       filt="ip.src == 10.0.1.1")]
    ngwa = [int(n) for (n,) in tshark(out / "gro_ngwa.pcap", "tcp.len",
                                      filt="ip.src == 10.0.1.1")]
    assert max(plain) > MSS
    assert ngwa and max(ngwa) <= MSS
    saw(request, f"plain: {sum(n > MSS for n in plain)} of {len(plain)} frames merged, up to "
                 f"{max(plain)} B; NGWA: {len(ngwa)} frames, none above {max(ngwa)} B")


def test_ipv6_beside_ngwa_unharmed(guest_offload, request):
    """An IPv6 connection while NGWA is on, and an IPv6 socket with a
    v4-mapped peer (its segments IPv4, with NGWA): data flows, nothing is
    fragmented."""
    tso = guest_offload["offload"]["tso"]
    assert all(n > 0 for n in tso["v6_received"]) and len(tso["v6_received"]) == 2
    assert len(tso["mapped_sent"]) == 1 and tso["mapped_sent"][0] > 0
    pcap = guest_offload["out"] / "offload_rcv.pcap"
    assert not tshark(pcap, "frame.number", filt="ipv6.fragment || ipv6.nxt == 44 || "
                                                 "ip.flags.mf == 1 || ip.frag_offset > 0")
    sizes = [int(n) for (n,) in tshark(pcap, "tcp.len", filt="ipv6.src && tcp.len > 0")]
    assert max(sizes) > 1024
    # the v4-mapped socket's segments carry its own option: DF is set, so
    # r1 would not have inserted one
    mapped = tshark(pcap, "ngwa.window", "ip.flags.df",
                    filt=f"ip.src == 10.0.1.1 && tcp.dstport == {kf.PORT + 1} && tcp.len > 0")
    assert mapped and all(w and df in ("1", "True") for w, df in mapped), mapped[:5]
    saw(request, f"{sum(tso['v6_received']) / 1e6:.1f} MB over IPv6, "
                 f"{tso['mapped_sent'][0] / 1e6:.1f} MB v4-mapped, no fragment")


# --- WB-RTO --------------------------------------------------------------------

def knob(values: dict, name: str) -> list[int]:
    return [int(v) for v in values[name].split()]


WEIGHTS = {0: [50, 30, 20, 15], 1: [100, 50, 30, 20], 2: [200, 100, 50, 30]}


def draw(cwnd: int, max_cwnd: int, awnd: float, knobs: dict) -> tuple[int, int, int]:
    """(c, a_i in tenths, the RTO's upper bound in µs) of eq. (4), eq. (5)
    and the namespace's knobs."""
    cut = knob(knobs, "tcp_wbrto_cutoffs")
    c = 10 if 1000 * cwnd < cut[0] * max_cwnd else 15 if 1000 * cwnd < cut[1] * max_cwnd else 20
    i = sum(1 for t in knob(knobs, "tcp_wbrto_thresholds") if awnd >= t)
    scale = int(knobs["tcp_wbrto_scale"])
    a = (WEIGHTS.get(scale) or knob(knobs, "tcp_wbrto_weights"))[i]
    return c, a, c * a * int(knobs["tcp_wbrto_unit_ms"]) * 10


DRAW = ("rto", "wbrto_cwnd", "wbrto_max_cwnd", "wbrto_awnd", "wbrto_c10", "wbrto_a10")


def replayed_draws(events: list[dict], gain: int) -> list[tuple[dict, int, int, float]]:
    """(event, cwnd, max_cwnd, awnd) of each RTO drawn, the last three
    computed here from the stream of events alone, not from what the event
    says the draw used.

    An event comes before its ACK is processed. That ACK draws the RTO, if
    it samples an RTT, with the cwnd the event shows; then it moves awnd
    towards cwnd by (1 - g) per segment it delivered (the next event's
    delivered minus this one's): ns-2's average, from half the initial
    window, which the SYN's delivery moved first. An ACK that takes the
    flow back to Open set cwnd before awnd moved (to ssthresh, or back by
    an undo): for it, the cwnd of the next event. The next event shows the
    draw. max_cwnd is the largest cwnd drawn with since the last timeout (a
    flow entering Loss, or its retransmits going up, between two events)."""
    g = 1 - gain / 1e6
    draws, flows = [], {}
    for e in events:
        if e["src"] not in flows:
            iw = e["snd_cwnd"]
            flows[e["src"]] = {"prev": e, "max": 0,
                               "awnd": iw + (iw / 2 - iw) * g ** e["delivered"]}
            continue
        f = flows[e["src"]]
        prev, f["prev"] = f["prev"], e
        cwnd = prev["snd_cwnd"]
        if any(e[k] != prev[k] for k in DRAW) and not e["backoff"]:
            f["max"] = max(f["max"], cwnd)
            draws.append((e, cwnd, f["max"], f["awnd"]))
        towards = e["snd_cwnd"] if prev["ca_state"] != 0 == e["ca_state"] else cwnd
        f["awnd"] = towards + (f["awnd"] - towards) * g ** (e["delivered"] - prev["delivered"])
        if e["ca_state"] == 4 != prev["ca_state"] or e["retransmits"] > prev["retransmits"]:
            f["max"] = 0
    return draws


@pytest.mark.parametrize("label", ["medium", "custom"])
def test_wbrto_rto_in_its_interval(guest_wbrto, label, request):
    """Every RTO WB-RTO drew (no backoff) used the cwnd, max_cwnd and awnd
    replayed from the events (replayed_draws), has the c and a_i of eq. (4)
    and (5) for them, and lies in (srtt, c * a_i * unit] at the clock's
    resolution, never below rto_min; the draws differ from flow to flow and
    from one to the next."""
    run = guest_wbrto["wbrto"][label]
    knobs = run["knobs"]
    draws = [d for d in replayed_draws(run["probe_snd"], int(knobs["tcp_wbrto_awnd_gain"]))
             if d[0]["srtt"] and d[0]["wbrto_c10"]]
    assert len(draws) > 200
    by_flow: dict[str, set] = {}
    for e, cwnd, max_cwnd, awnd in draws:
        # The kernel's awnd is fixed-point, shown floored. The replay fell
        # at most 0.052 below it and rose at most 0.016 above floor + 1 in
        # four runs: it counts every segment delivered between two events,
        # and the kernel's paths for old ACKs carrying SACKs and for
        # D-SACKs on an empty queue count delivery without moving awnd
        # (likely the rest; the events do not say which path an ACK took).
        # Allowed 0.1. With the gain applied once per ACK instead of once
        # per segment it fell 0.17 below (the custom run)
        assert e["wbrto_awnd"] - 0.1 <= awnd < e["wbrto_awnd"] + 1.1, (e, awnd)
        assert (e["wbrto_cwnd"], e["wbrto_max_cwnd"]) == (cwnd, max_cwnd), (e, cwnd, max_cwnd)
        # within 0.1 of a threshold either side's a_i is right
        sides = {draw(cwnd, max_cwnd, x, knobs) for x in (awnd - 0.1, awnd + 0.1)}
        match = [d for d in sides if d[:2] == (e["wbrto_c10"], e["wbrto_a10"])]
        assert match, (e, sides)
        top = match[0][2]
        lo = max(e["srtt"], 200_000)
        top = min(top, 120_000_000)
        if top > lo:
            assert lo < e["rto"] <= top + 1000, e
        else:
            assert lo <= e["rto"] <= lo + 1000, e
        by_flow.setdefault(e["src"], set()).add(e["rto"])
    assert len(by_flow) >= 6 and sum(len(v) > 1 for v in by_flow.values()) >= len(by_flow) / 2
    assert len({min(v) for v in by_flow.values()}) > 1
    saw(request, f"{len(draws)} draws replayed")


def test_wbrto_rto_uniform(guest_wbrto, request):
    """Where the RTO is drawn, (rto - lo) / (top - lo) is uniform on (0, 1]:
    Kolmogorov-Smirnov at the 1 % level, over both runs' draws.

    A draw is made while an ACK is processed and shows in the next event of
    the flow, the next ACK; a timeout before that ACK doubles the RTO and
    the event shows a backoff instead. So short draws would be seen less
    often after long gaps: only draws whose next ACK came before `lo`, the
    least any draw can be, are counted, and those are seen whatever their
    value."""
    u = []
    for label in ("medium", "custom"):
        run = guest_wbrto["wbrto"][label]
        prev: dict[str, dict] = {}
        for e in run["probe_snd"]:
            before, prev[e["src"]] = prev.get(e["src"]), e
            if before is None or before["rto"] == e["rto"]:
                continue                 # the draw this event shows was seen before
            if not (e["srtt"] and e["wbrto_c10"]) or e["backoff"]:
                continue
            _, _, top = draw(e["wbrto_cwnd"], e["wbrto_max_cwnd"], e["wbrto_awnd"],
                              run["knobs"])
            lo, top = max(e["srtt"], 200_000), min(top, 120_000_000)
            if top - lo < 100_000 or (e["t"] - before["t"]) * 1e6 >= lo:
                continue                 # no room to draw in, or it could have fired first
            u.append((e["rto"] - lo) / (top - lo))
    u.sort()
    n = len(u)
    d = max(max((i + 1) / n - x, x - i / n) for i, x in enumerate(u))
    assert n > 200 and d < 1.63 / math.sqrt(n), (n, d)
    saw(request, f"D {d:.3f} (n {n}), bound {1.63 / math.sqrt(n):.3f}")


def stock_share(events: list[dict], hz: int) -> tuple[int, int]:
    """(events with an RTT estimate and no backoff, those whose RTO is what
    the stock tcp_set_rto() computes from the same event's srtt and rto_var):
    stock_rto_matches over the tracepoint's fields under their column names."""
    renamed = [{TRACEPOINT_RENAMES.get(k, k): v for k, v in e.items()} for e in events]
    found = stock_rto_matches(renamed, hz)
    return found["events"], found["same"]


def test_wbrto_off_is_stock_bit_for_bit(guest_wbrto, kernel_config, request):
    """With tcp_wbrto=0 every RTO the senders held is, to the jiffy, what the
    stock code computes from their own srtt and rttvar_us (the tracepoint's
    rto_var, read from the socket beside the RTO); with WB-RTO on, hardly
    any is. Events after a timeout (backoff) are left out: there the RTO is
    the stock one doubled at each timeout."""
    hz = int(re.search(r"^CONFIG_HZ=(\d+)$", kernel_config, re.M).group(1))
    n, same = stock_share(guest_wbrto["wbrto"]["off"]["probe_snd"], hz)
    assert n > 500 and same == n, (n, same)
    n_on, same_on = stock_share(guest_wbrto["wbrto"]["medium"]["probe_snd"], hz)
    assert n_on > 500 and same_on < 0.05 * n_on, (n_on, same_on)
    off = [e for e in guest_wbrto["wbrto"]["off"]["probe_snd"] if e["srtt"]]
    assert off and all(e["wbrto_c10"] == 0 and e["wbrto_cwnd"] == 0 for e in off)
    saw(request, f"off: {same} of {n} sender events stock; medium: {same_on} of {n_on}")
