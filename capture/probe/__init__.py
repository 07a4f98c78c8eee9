"""tcp_probe recorders: the events of the flows under study, from the
extended tracepoint of tcpvar's kernel patches (`tracefs-ext`), from the eBPF
hook hooks/tcp_probe_ext on stock kernels (`bpf`), or from the stock
tracepoint (`tracefs`). All three write the same artefact, the tcp_probe
record of artefacts/probe_record.py: out_dir/tcp_probe.csv and .json.

This module chooses the source; the others do one thing each: hook.py builds
and caches the eBPF hook, tracefs.py and bpf.py are the recorders (on the
base of recorder.py), trace_text.py turns tracepoint lines into the record.

    probe.prepare()                        # build/cache the hook (host side)
    rec = probe.open_probe(out_dir, [5201])
    rec.start(); ...; stats = rec.stop()   # ProbeStats(source, events, lost)
"""
from __future__ import annotations

import ipaddress
import os
from pathlib import Path

from tcpvar.artefacts.probe_record import CSV_NAME, JSON_NAME
from tcpvar.capture.probe.bpf import BpfRecorder
from tcpvar.capture.probe.hook import (
    BTF,
    HOOK_DIR,
    HOOK_SOURCES,
    MAX_ADDRS,
    MAX_PORTS,
    HookBuild,
    prepare,
    tool_path,
)
from tcpvar.capture.probe.recorder import ProbeStats, Recorder
from tcpvar.capture.probe.trace_text import convert_trace
from tcpvar.capture.probe.tracefs import (
    TRACEFS_MOUNTS,
    TracefsRecorder,
    convert_pending,
    has_extended_tracepoint,
    tracefs_root,
)
from tcpvar.errors import ProbeError

SOURCES = ("tracefs-ext", "bpf", "tracefs")
PREFER = ("auto",) + SOURCES

__all__ = ["BTF", "CSV_NAME", "HOOK_DIR", "HOOK_SOURCES", "JSON_NAME", "MAX_ADDRS",
           "MAX_PORTS", "PREFER", "SOURCES", "TRACEFS_MOUNTS", "BpfRecorder", "HookBuild",
           "ProbeStats", "Recorder", "TracefsRecorder", "convert_pending", "convert_trace",
           "filter_problem", "has_extended_tracepoint", "need_root", "open_probe", "prepare",
           "tool_path", "tracefs_root"]


def filter_problem(ports: list[int], addrs: list[str]) -> str | None:
    """Why this socket filter cannot be recorded, in one line, or None: the
    limits are the eBPF hook's, kept by every source alike."""
    for p in ports:
        if not 0 < int(p) < 65536:
            return f"bad port {p}"
    if len(ports) > MAX_PORTS:
        return f"at most {MAX_PORTS} ports"
    for a in addrs:
        try:
            ipaddress.ip_address(a)
        except ValueError:
            return f"bad address {a!r}: not an IPv4 or IPv6 address"
    if len(addrs) > MAX_ADDRS:
        return f"at most {MAX_ADDRS} addresses"
    return None


def need_root() -> None:
    if os.geteuid() != 0:
        raise ProbeError("recording tcp_probe events needs root")


def open_probe(out_dir: Path, ports: list[int], prefer: str = "auto",
               addrs: list[str] | None = None, cookie: int | None = None,
               own_tracing: bool = False) -> Recorder:
    """A recorder for the events of sockets whose local or remote port is in
    `ports` (and address in `addrs`, and cookie `cookie`, when given): the
    extended tracepoint when the kernel has it, else the eBPF hook when the
    kernel has BPF and BTF and the hook is built, else the stock tracepoint.
    `rec.source` says which was chosen and `rec.reason` why, in one line.
    A `prefer` that cannot be served raises ProbeError. `own_tracing`: the
    kernel's tracing is all tcpvar's (a micro-VM guest), so a tracepoint on
    since boot is recorded from the top-level buffer (TracefsRecorder), and
    the trace is left for the host to convert (convert_pending)."""
    if prefer not in PREFER:
        raise ProbeError(f"unknown probe source {prefer!r} (one of {', '.join(PREFER)})")
    problem = filter_problem(ports, addrs or [])
    if problem:
        raise ProbeError(problem)
    need_root()
    root = tracefs_root()
    extended = has_extended_tracepoint(root)
    boot_enabled = own_tracing and _read(root / "events" / "tcp" / "tcp_probe" / "enable") == "1"
    kw = {"addrs": addrs, "cookie": cookie}
    tracefs_kw = {**kw, "boot_enabled": boot_enabled, "defer": own_tracing}
    if prefer == "tracefs-ext" and not extended:
        raise ProbeError("this kernel's tcp:tcp_probe has no extended fields (it is not "
                         "built from kernel-patches/)")
    if prefer in ("auto", "tracefs-ext") and extended:
        return TracefsRecorder(out_dir, ports, extended=True,
                               reason="the kernel's tcp:tcp_probe has the extended fields",
                               **tracefs_kw)
    if prefer == "tracefs":
        return TracefsRecorder(out_dir, ports, reason="stock tcp:tcp_probe, as asked",
                               **tracefs_kw)
    why_not = _bpf_unavailable()
    rec = None
    if why_not is None:
        rec = BpfRecorder(out_dir, ports, tool=tool_path(), **kw)
        try:
            found = rec.check()
        except ProbeError as exc:
            why_not = str(exc)
        else:
            rec.reason = (f"stock tcp:tcp_probe lacks the extended fields; eBPF hook "
                          f"attached to {found.get('attach', '?')}/tcp_probe "
                          f"(HZ {found.get('hz', '?')})")
            return rec
    if prefer == "bpf":
        raise ProbeError(f"the eBPF hook cannot be used: {why_not}")
    return TracefsRecorder(out_dir, ports, **tracefs_kw,
                           reason=f"stock tcp:tcp_probe (no rto, rttvar or loss state): "
                                  f"{why_not}")


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _bpf_unavailable() -> str | None:
    if not BTF.exists():
        return f"the kernel has no BTF ({BTF})"
    if not Path("/proc/sys/kernel/unprivileged_bpf_disabled").exists():
        return "the kernel has no BPF system call"
    if os.geteuid() != 0:
        return "loading eBPF programs needs root"
    if tool_path() is None:
        built = prepare()
        if built.tool is None:
            return built.reason
    return None
