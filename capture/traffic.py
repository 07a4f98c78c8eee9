"""The programs a testbed runs: tcpdump captures and iperf3 servers and
clients, started in a Testbed's namespaces, each waited for until it is
really there (a capture listening, a server accepting)."""
from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from tcpvar.errors import TestbedError

from .netns import run
from .testbed import Testbed


def start_tcpdump(bed: Testbed, name: str, role: str, path: Path, args: list[str],
                  log: Path, timeout_s: float = 10) -> subprocess.Popen:
    """tcpdump writing @path in node @role, its stderr in @log; returns once
    it says it is listening, so no packet after that is missed. @args:
    interface, snap length, buffer and filter."""
    proc = bed.start(name, role, ["tcpdump", *args, "-Z", "root", "-w", str(path)],
                     stderr=log)
    deadline = time.monotonic() + timeout_s
    while "listening on" not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise TestbedError(f"tcpdump ({name}) did not start: "
                               f"{log.read_text(errors='replace').strip()[:200]}")
        time.sleep(0.05)
    return proc


def stop_tcpdump(bed: Testbed, proc: subprocess.Popen, log: Path,
                 settle_s: float = 1.0) -> dict:
    """Let the last packets arrive, end the capture, and return its counts."""
    time.sleep(settle_s)
    bed.procs.stop(proc, sig=signal.SIGINT, grace_s=120)
    return tcpdump_stats(log)


def tcpdump_stats(log: Path) -> dict:
    """tcpdump's closing counts from its stderr log (None where absent)."""
    text = log.read_text(errors="replace") if log.exists() else ""
    out = {}
    for key, what in (("captured", "captured"), ("received_by_filter", "received by filter"),
                      ("dropped_by_kernel", "dropped by kernel"),
                      ("dropped_by_interface", "dropped by interface")):
        m = re.search(rf"(\d+) packets? {what}", text)
        out[key] = int(m.group(1)) if m else None
    return out


def wait_listening(ns: str, port: int, proc: subprocess.Popen | None = None,
                   timeout_s: float = 10, udp: bool = False, what: str | None = None) -> None:
    """Until a socket in namespace @ns listens on TCP (or UDP) @port."""
    deadline = time.monotonic() + timeout_s
    while f":{port} " not in run(["ss", "-lunH" if udp else "-ltnH"], ns=ns, check=False) + " ":
        if (proc is not None and proc.poll() is not None) or time.monotonic() > deadline:
            raise TestbedError(f"{what or ('irtt' if udp else 'iperf3')} server on port "
                               f"{port} did not start")
        time.sleep(0.05)


def iperf_server(bed: Testbed, role: str, port: int, once: bool = True,
                 bind: str | None = None, report: Path | None = None,
                 log: Path | None = None, name: str | None = None) -> subprocess.Popen:
    """An iperf3 server in node @role, listening when this returns; with
    @report, its JSON report is written there."""
    args = ["iperf3", "-s", "-p", str(port), *(["-1"] if once else []),
            *(["-B", bind] if bind else []), *(["-J"] if report else [])]
    proc = bed.start(name or f"server{port}", role, args, stdout=report, stderr=log)
    wait_listening(bed.ns(role), port, proc)
    return proc


def iperf_client(bed: Testbed, role: str, dst: str, port: int, args: list[str],
                 report: Path | None = None, log: Path | None = None,
                 name: str | None = None) -> subprocess.Popen:
    """An iperf3 client in node @role with JSON output: into @report, or
    readable from the process (communicate()) when no @report is given."""
    pipe = report is None
    return bed.start(name or f"client{port}", role,
                     ["iperf3", "-c", dst, "-p", str(port), "-J", *args],
                     stdout=subprocess.PIPE if pipe else report,
                     stderr=subprocess.PIPE if pipe and log is None else log, text=pipe)


SHORT_MODULE = "tcpvar.capture.shortflows"
IRTT_PORT = 2112            # irtt's own
# Flent's VoIP test: 172-byte packets (a G.711 frame of 20 ms with its RTP header)
IRTT_LENGTH = 172


def latency_server(bed: Testbed, role: str, addr: str, log: Path) -> subprocess.Popen:
    """irtt's server in node @role on @addr, listening when this returns;
    any interval and length allowed (the client's are the run's)."""
    proc = bed.start("server-latency", role, ["irtt", "server", "-b", f"{addr}:{IRTT_PORT}",
                                              "-i", "0", "-d", "0", "-l", "0"], stderr=log)
    wait_listening(bed.ns(role), IRTT_PORT, proc, udp=True)
    return proc


def latency_client(bed: Testbed, role: str, tool: str, dst: str, interval_ms: float,
                   duration_s: float, out: Path, log: Path) -> subprocess.Popen:
    """The latency probe from node @role to @dst for @duration_s: irtt,
    writing its JSON into @out, or ping, its timestamped lines (-D), with
    each unanswered request named (-O)."""
    if tool == "irtt":
        args = ["irtt", "client", "-i", f"{interval_ms:g}ms", "-d", f"{duration_s:g}s",
                "-l", str(IRTT_LENGTH), "--wait=1s", "-Q", "-o", str(out),
                f"{dst}:{IRTT_PORT}"]
        return bed.start("latency", role, args, stderr=log)
    args = ["ping", "-n", "-D", "-O", "-i", f"{interval_ms / 1000:g}",
            "-w", f"{duration_s:g}", dst]
    return bed.start("latency", role, args, stdout=out, stderr=log)


def short_server(bed: Testbed, role: str, addr: str, port: int, log: Path,
                 name: str = "server-short") -> subprocess.Popen:
    """tcpvar's receiver of finite transfers (capture/shortflows.py: the
    short flows', or a finite flow's) in node @role on @addr:@port,
    listening when this returns."""
    proc = bed.start(name, role, [sys.executable, "-m", SHORT_MODULE, "server",
                                  "--addr", addr, "--port", str(port)], stderr=log)
    wait_listening(bed.ns(role), port, proc, timeout_s=60, what="finite-transfer")
    return proc


def short_client(bed: Testbed, role: str, dst: str, port: int, cc: str, origin_ns: int,
                 deadline_ns: int, plan: Path, out: Path, log: Path, sport: int | None = None,
                 name: str = "short") -> subprocess.Popen:
    """tcpvar's sender of finite transfers in node @role: those of @plan,
    each at @origin_ns + its time, until @deadline_ns; from port @sport
    (None: the kernel's choice)."""
    return bed.start(name, role, [sys.executable, "-m", SHORT_MODULE, "client",
                                  "--dst", dst, "--port", str(port), "--cc", cc,
                                  *(["--sport", str(sport)] if sport else []),
                                  "--origin-ns", str(origin_ns),
                                  "--deadline-ns", str(deadline_ns), "--plan", str(plan),
                                  "--out", str(out)], stderr=log)


def iperf_result(proc: subprocess.Popen, timeout_s: float) -> dict:
    """The JSON report of a piped iperf3 client; TestbedError when it failed."""
    out, err = proc.communicate(timeout=timeout_s)
    try:
        doc = json.loads(out)
    except ValueError:
        doc = {"error": (err or out or "")[-300:].strip()}
    if proc.returncode != 0 or "error" in doc:
        raise TestbedError(f"iperf3 client failed ({proc.returncode}): "
                           f"{doc.get('error', '')} {(err or '').strip()}".strip())
    return doc
