"""Recording from the tcp:tcp_probe tracepoint through tracefs: the stock
fields, or all of them with the extended tracepoint of kernel-patches/."""
from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import time
from pathlib import Path

from tcpvar import safe_write
from tcpvar.artefacts import run_folder as layout
from tcpvar.capture.probe.recorder import CSV_NAME, JSON_NAME, ProbeStats, Recorder, port_filter
from tcpvar.capture.probe.trace_text import convert_trace
from tcpvar.errors import InputError, ProbeError

TRACE_NAME = "tcp_probe.trace"    # the raw trace a deferred recorder leaves
TRACEFS_MOUNTS = (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing"))


def tracefs_root() -> Path:
    """The tracefs mount holding tcp:tcp_probe, mounting it if needed."""
    try:
        return _tracefs_root()
    except PermissionError:
        raise ProbeError("recording tcp_probe events needs root (tracefs is not "
                         "readable)") from None


def _tracefs_root() -> Path:
    for root in TRACEFS_MOUNTS:
        if (root / "events" / "tcp" / "tcp_probe").is_dir():
            return root
    root = TRACEFS_MOUNTS[0]
    if root.is_dir() and not (root / "events").exists():
        subprocess.run(["mount", "-t", "tracefs", "nodev", str(root)],
                       capture_output=True, check=False)
        if (root / "events" / "tcp" / "tcp_probe").is_dir():
            return root
    if root.is_dir() and (root / "events").is_dir():
        raise ProbeError("this kernel has no tcp:tcp_probe tracepoint")
    raise ProbeError("tracefs is not available (cannot mount it on /sys/kernel/tracing; "
                     "are you root?)")


def tracepoint_fields(root: Path) -> list[str]:
    text = (root / "events" / "tcp" / "tcp_probe" / "format").read_text()
    names = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("field:") and ";" in line:
            decl = line[len("field:"):line.index(";")]
            names.append(decl.split()[-1].split("[")[0])
    return names


def has_extended_tracepoint(root: Path | None = None) -> bool:
    try:
        return "rto" in tracepoint_fields(root or tracefs_root())
    except (ProbeError, OSError):
        return False


_instance_seq = itertools.count(1)


def mono_to_realtime_ns() -> int:
    """CLOCK_REALTIME - CLOCK_MONOTONIC, from the tightest of a few readings."""
    best = None
    for _ in range(8):
        a = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        r = time.clock_gettime_ns(time.CLOCK_REALTIME)
        b = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        if best is None or b - a < best[0]:
            best = (b - a, r - (a + (b - a) // 2))
    return best[1]


class TracefsRecorder(Recorder):
    """The tracepoint through a tracefs instance of our own: mono clock,
    a filter on the ports, trace_pipe copied to a file by a `cat` child (so the
    ring buffer never waits for Python), overruns counted per CPU.

    With @boot_enabled (a micro-VM booted with trace_event=tcp:tcp_probe,
    whose tracing is all tcpvar's) it uses the top-level buffer instead and
    starts and stops with tracing_on: enabling the event, or a second
    instance of it, would patch kernel text, which under QEMU's TCG now and
    then oopses the guest.

    With @defer (a micro-VM guest) the trace's text stays as it is, named in
    tcp_probe.json, for the host to convert (convert_pending): Python runs
    some thirty times slower under TCG, and a minute of four flows is 40 s
    of conversion there."""

    BUFFER_KB = 8192   # per CPU

    def __init__(self, *args, extended: bool = False, boot_enabled: bool = False,
                 defer: bool = False, **kw):
        super().__init__(*args, **kw)
        self.defer = defer
        self.source = "tracefs-ext" if extended else "tracefs"
        self.boot_enabled = boot_enabled
        self.instance: Path | None = None
        self.cat: subprocess.Popen | None = None
        self.raw_path = self.out_dir / TRACE_NAME
        self.offset_ns = 0

    def start(self) -> None:
        if self.started:
            return
        self.out_dir.mkdir(parents=True, exist_ok=True)
        inst = self.instance = self._instance()
        try:
            ev = inst / "events" / "tcp" / "tcp_probe"
            (inst / "tracing_on").write_text("0")
            (inst / "trace_clock").write_text("mono")
            (inst / "buffer_size_kb").write_text(str(self.BUFFER_KB))
            (ev / "filter").write_text(port_filter(self.ports, self.cookie))
            (inst / "trace").write_text("")     # what an earlier run left
            self.offset_ns = mono_to_realtime_ns()
            with open(self.raw_path, "wb") as raw:
                # its own session: a Ctrl-C meant for tcpvar must not stop it early
                self.cat = subprocess.Popen(["cat", str(inst / "trace_pipe")], stdout=raw,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
            if not self.boot_enabled:
                (ev / "enable").write_text("1")
            (inst / "tracing_on").write_text("1")
            self.started_ns = time.time_ns()
        except BaseException as exc:
            self._teardown()
            if isinstance(exc, OSError):
                raise ProbeError(f"cannot set up tracing in {inst}: {exc.strerror}") from None
            raise
        self.started = True

    def _instance(self) -> Path:
        root = tracefs_root()
        if self.boot_enabled:
            return root
        name = f"tcpvar-{os.getpid()}-{next(_instance_seq)}-{time.monotonic_ns() % 10**6}"
        inst = root / "instances" / name
        try:
            inst.mkdir()
        except OSError as exc:
            raise ProbeError(f"cannot create the tracefs instance {inst}: "
                             f"{exc.strerror} (tcp_probe needs root)") from None
        return inst

    def _pause(self) -> None:
        """No more events into the buffer."""
        if self.boot_enabled:
            (self.instance / "tracing_on").write_text("0")
        else:
            (self.instance / "events" / "tcp" / "tcp_probe" / "enable").write_text("0")

    def _overruns(self) -> int:
        lost = 0
        for stats in (self.instance / "per_cpu").glob("cpu*/stats"):
            for line in stats.read_text().splitlines():
                key, _, val = line.partition(":")
                if key.strip() in ("overrun", "dropped events"):
                    lost += int(val.strip() or 0)
        return lost

    def _entries_left(self) -> int:
        left = 0
        for stats in (self.instance / "per_cpu").glob("cpu*/stats"):
            for line in stats.read_text().splitlines():
                key, _, val = line.partition(":")
                if key.strip() == "entries":
                    left += int(val.strip() or 0)
        return left

    def _teardown(self) -> None:
        if self.instance is not None:
            try:
                (self.instance / "tracing_on").write_text("0")
                self._pause()
            except OSError:
                pass
        if self.cat is not None:
            if self.cat.poll() is None:
                self.cat.send_signal(signal.SIGTERM)
                try:
                    self.cat.wait(5)
                except subprocess.TimeoutExpired:
                    self.cat.kill()
                    self.cat.wait()
            self.cat = None
        if self.instance is not None and not self.boot_enabled:
            for _ in range(50):
                try:
                    self.instance.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)
            self.instance = None

    def stop(self) -> ProbeStats:
        if self.stats is not None:
            return self.stats
        try:
            self._pause()
            self.stopped_ns = time.time_ns()
            deadline = time.monotonic() + 10
            while self._entries_left() and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.1)   # what cat read is written
            lost = self._overruns()
        finally:
            self._teardown()
            self.started = False
        detail = {"clock": "mono", "offset_ns": self.offset_ns}
        if self.defer:
            events = None
            detail["trace"] = self.raw_path.name
        else:
            events = convert_trace(self.raw_path, self.csv_path, self.offset_ns, self.addrs)
            self.raw_path.unlink(missing_ok=True)
        self.stats = ProbeStats(self.source, events, lost, detail)
        self._write_json(self.stats)
        return self.stats


def convert_pending(out_dir: Path) -> int | None:
    """Convert the trace a recorder left for later (tcp_probe.json names it)
    into tcp_probe.csv, and put the events into tcp_probe.json and the run's
    manifest; the events, or None when nothing was pending. The folder may be
    someone else's: the trace must be the file a recorder leaves (TRACE_NAME,
    no symlink), and what is written replaces files, never writes through
    them (InputError otherwise)."""
    json_path = out_dir / JSON_NAME
    try:
        doc = json.loads(json_path.read_text())
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or not doc.get("trace"):
        return None
    if doc["trace"] != TRACE_NAME:
        raise InputError(f"{json_path}: names the trace {doc['trace']!r}; a recorder "
                         f"leaves only {TRACE_NAME}")
    raw = out_dir / TRACE_NAME
    if not safe_write.is_regular_file(raw):
        return None
    offset_ns, addrs = doc.get("offset_ns"), (doc.get("filter") or {}).get("addrs")
    if not isinstance(offset_ns, int) or not (isinstance(addrs, list)
                                              and all(isinstance(a, str) for a in addrs)):
        raise InputError(f"{json_path}: a pending trace without its offset_ns or filter.addrs")
    events = convert_trace(raw, out_dir / CSV_NAME, offset_ns, addrs)
    doc["events"] = events
    del doc["trace"]
    safe_write.write_text(json_path, json.dumps(doc, indent=1) + "\n")
    raw.unlink()
    if (out_dir / layout.MANIFEST).is_file():
        manifest = layout.read_manifest(out_dir)
        manifest.setdefault("probe", {})["events"] = events
        layout.write_manifest(out_dir, manifest)
    return events
