"""tcp_probe recorders: the events of the flows under study, from the
extended tracepoint of tcpvar's kernel patches (`tracefs-ext`), from the eBPF
hook hooks/tcp_probe_ext on stock kernels (`bpf`), or from the stock
tracepoint (`tracefs`). All three write the same artefact (docs/probe.md):
out_dir/tcp_probe.csv and out_dir/tcp_probe.json.

    probe.prepare()                        # build/cache the hook (host side)
    rec = probe.open_probe(out_dir, [5201])
    rec.start(); ...; stats = rec.stop()   # ProbeStats(source, events, lost)
"""
from __future__ import annotations

import hashlib
import ipaddress
import itertools
import json
import os
import platform
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tcpvar.errors import ProbeError
from tcpvar.resources import cache_dir, source_dir

SOURCES = ("tracefs-ext", "bpf", "tracefs")
PREFER = ("auto",) + SOURCES

# the artefact's columns, in order (docs/probe.md)
COLUMNS = (
    "ts_ns", "cookie", "saddr", "sport", "daddr", "dport", "data_len", "snd_nxt", "snd_una",
    "snd_cwnd", "ssthresh", "snd_wnd", "rcv_wnd", "srtt_us", "rttvar_us", "rto_us",
    "packets_out", "retrans_out", "lost_out", "sacked_out", "ca_state", "retransmits",
    "backoff", "delivered", "total_retrans", "pacing_rate", "wbrto_max_cwnd", "wbrto_awnd",
    "wbrto_c10", "wbrto_a10", "ngwa_window",
)
CSV_NAME = "tcp_probe.csv"
JSON_NAME = "tcp_probe.json"
# extended tracepoint fields named differently from their column
FIELD_TO_COLUMN = {"srtt": "srtt_us", "rttvar": "rttvar_us", "rto": "rto_us",
                   "sock_cookie": "cookie"}
HEX_FIELDS = {"sock_cookie", "snd_nxt", "snd_una"}

HOOK_DIR = source_dir("hooks") / "tcp_probe_ext"
HOOK_SOURCES = ("Makefile", "tcp_probe_ext.h", "tcp_probe_ext.bpf.c", "tcp_probe_ext.c")
TOOL_NAME = "tcp_probe_ext"
BTF = Path("/sys/kernel/btf/vmlinux")
TRACEFS_MOUNTS = (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing"))
READY_TIMEOUT_S = 60        # loading under TCG emulation takes seconds
STOP_TIMEOUT_S = 30


@dataclass
class ProbeStats:
    source: str
    events: int
    lost: int
    detail: dict = field(default_factory=dict)


@dataclass
class HookBuild:
    """What prepare() found: the loader's path, or why there is none."""

    tool: Path | None
    reason: str
    built: bool = False


# ---------------------------------------------------------------- the hook build

def _hook_key() -> str:
    h = hashlib.sha256(platform.machine().encode())
    for name in HOOK_SOURCES:
        h.update(name.encode() + b"\0" + (HOOK_DIR / name).read_bytes())
    return h.hexdigest()[:16]


def tool_path() -> Path | None:
    """The cached loader for these sources, if built (TCPVAR_PROBE_TOOL overrides)."""
    env = os.environ.get("TCPVAR_PROBE_TOOL")
    if env:
        return Path(env) if os.access(env, os.X_OK) else None
    if not all((HOOK_DIR / n).is_file() for n in HOOK_SOURCES):
        return None
    tool = cache_dir() / "tcp_probe_ext" / _hook_key() / TOOL_NAME
    return tool if os.access(tool, os.X_OK) else None


def prepare() -> HookBuild:
    """Build hooks/tcp_probe_ext into the cache unless it is there already.
    Never raises because the hook cannot be built: the reason is returned
    and recording falls back to the stock tracepoint."""
    tool = tool_path()
    if tool:
        return HookBuild(tool, f"eBPF hook cached at {tool}")
    if os.environ.get("TCPVAR_PROBE_TOOL"):
        return HookBuild(None, "TCPVAR_PROBE_TOOL is not an executable")
    if not all((HOOK_DIR / n).is_file() for n in HOOK_SOURCES):
        return HookBuild(None, f"the hook's sources are not installed ({HOOK_DIR})")
    if not BTF.exists():
        return HookBuild(None, f"the kernel has no BTF ({BTF}), needed to build and load "
                               "the eBPF hook")
    missing = [t for t in ("make", "clang", "llvm-strip", "bpftool", "cc")
               if shutil.which(t) is None]
    if missing:
        return HookBuild(None, f"cannot build the eBPF hook: {', '.join(missing)} not "
                               "installed (bootstrap.sh installs them)")
    final = cache_dir() / "tcp_probe_ext" / _hook_key()
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix="build-", dir=final.parent))
    except OSError as exc:
        return HookBuild(None, f"cannot build the eBPF hook: {exc.strerror}: "
                               f"{exc.filename}")
    try:
        res = subprocess.run(["make", "-s", "-C", str(HOOK_DIR), f"OUTPUT={work}",
                              f"VMLINUX_BTF={BTF}"],
                             capture_output=True, text=True, timeout=600)
        if res.returncode != 0:
            lines = [ln for ln in (res.stderr + res.stdout).splitlines() if ln.strip()]
            why = lines[-1].strip() if lines else f"make exited {res.returncode}"
            return HookBuild(None, f"building the eBPF hook failed: {why}")
        try:
            work.rename(final)
        except OSError:
            if not os.access(final / TOOL_NAME, os.X_OK):   # another build won the race
                raise
        return HookBuild(final / TOOL_NAME, f"eBPF hook built at {final / TOOL_NAME}",
                         built=True)
    except (OSError, subprocess.SubprocessError) as exc:
        return HookBuild(None, f"building the eBPF hook failed: {exc}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------- tracefs

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


def _norm_addr(text: str) -> str:
    """IPv4 dotted; IPv4-mapped IPv6 (dual-stack sockets) as IPv4; IPv6 compressed."""
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if ":" not in text:
        return text
    try:
        a = ipaddress.IPv6Address(text)
    except ValueError:
        return text
    return str(a.ipv4_mapped) if a.ipv4_mapped else str(a)


def _port_filter(ports: list[int], cookie: int | None) -> str:
    parts = []
    if ports:
        parts.append("(" + " || ".join(f"sport == {p} || dport == {p}" for p in ports) + ")")
    if cookie:
        parts.append(f"sock_cookie == {cookie}")
    return " && ".join(parts) if parts else "0"


class Recorder:
    """Common to both kinds: the artefact's paths, the filter, the JSON."""

    source = ""

    def __init__(self, out_dir: Path, ports: list[int], addrs: list[str] | None = None,
                 cookie: int | None = None, reason: str = ""):
        self.out_dir = Path(out_dir)
        self.ports = [int(p) for p in ports]
        self.addrs = [_norm_addr(a) for a in (addrs or [])]
        self.cookie = cookie
        self.reason = reason
        self.csv_path = self.out_dir / CSV_NAME
        self.json_path = self.out_dir / JSON_NAME
        self.started = False
        self.stats: ProbeStats | None = None
        self.started_ns = self.stopped_ns = 0

    def filter_doc(self) -> dict:
        return {"ports": self.ports, "addrs": self.addrs, "cookie": self.cookie}

    def _write_json(self, stats: ProbeStats) -> None:
        doc = {"source": stats.source, "events": stats.events, "lost": stats.lost,
               "filter": self.filter_doc(), "reason": self.reason,
               "started_ns": self.started_ns, "stopped_ns": self.stopped_ns,
               **stats.detail}
        self.json_path.write_text(json.dumps(doc, indent=1) + "\n")

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        if self.started:
            self.stop()

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> ProbeStats:
        raise NotImplementedError


class TracefsRecorder(Recorder):
    """The tracepoint through a tracefs instance of our own: mono clock,
    a filter on the ports, trace_pipe copied to a file by a `cat` child (so the
    ring buffer never waits for Python), overruns counted per CPU.

    With @boot_enabled (a micro-VM booted with trace_event=tcp:tcp_probe,
    whose tracing is all tcpvar's) it uses the top-level buffer instead and
    starts and stops with tracing_on: enabling the event, or a second
    instance of it, would patch kernel text, which under QEMU's TCG now and
    then oopses the guest."""

    BUFFER_KB = 8192   # per CPU

    def __init__(self, *args, extended: bool = False, boot_enabled: bool = False, **kw):
        super().__init__(*args, **kw)
        self.source = "tracefs-ext" if extended else "tracefs"
        self.boot_enabled = boot_enabled
        self.instance: Path | None = None
        self.cat: subprocess.Popen | None = None
        self.raw_path = self.out_dir / "tcp_probe.trace"
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
            (ev / "filter").write_text(_port_filter(self.ports, self.cookie))
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
        events = convert_trace(self.raw_path, self.csv_path, self.offset_ns, self.addrs)
        self.raw_path.unlink(missing_ok=True)
        self.stats = ProbeStats(self.source, events, lost,
                                {"clock": "mono", "offset_ns": self.offset_ns})
        self._write_json(self.stats)
        return self.stats


def _parse_trace_line(line: str, offset_ns: int):
    """One trace_pipe line -> {column: text}, or None for other lines."""
    i = line.find(": tcp_probe: ")
    if i < 0:
        return None
    ts = line[line.rfind(" ", 0, i) + 1:i]
    sec, _, frac = ts.partition(".")
    ns = int(sec) * 1_000_000_000 + int(frac.ljust(9, "0")[:9]) + offset_ns
    row = {"ts_ns": str(ns)}
    for item in line[i + 13:].split():
        key, eq, val = item.partition("=")
        if not eq:
            continue
        if key == "src" or key == "dest":
            addr, _, port = val.rpartition(":")
            pre = "s" if key == "src" else "d"
            row[pre + "addr"] = _norm_addr(addr)
            row[pre + "port"] = port
        elif key in HEX_FIELDS:
            row[FIELD_TO_COLUMN.get(key, key)] = str(int(val, 16))
        else:
            row[FIELD_TO_COLUMN.get(key, key)] = val
    return row


def convert_trace(raw: Path, csv_path: Path, offset_ns: int, addrs: list[str]) -> int:
    """trace_pipe text -> tcp_probe.csv; returns the events written."""
    wanted = set(addrs)
    events = 0
    with open(raw, errors="replace") as src, open(csv_path, "w") as out:
        out.write(",".join(COLUMNS) + "\n")
        buf = []
        for line in src:
            row = _parse_trace_line(line, offset_ns)
            if row is None:
                continue
            if wanted and row.get("saddr") not in wanted and row.get("daddr") not in wanted:
                continue
            buf.append(",".join(row.get(c, "") for c in COLUMNS))
            events += 1
            if len(buf) >= 10000:
                out.write("\n".join(buf) + "\n")
                buf.clear()
        if buf:
            out.write("\n".join(buf) + "\n")
    return events


# ---------------------------------------------------------------- eBPF

class BpfRecorder(Recorder):
    """hooks/tcp_probe_ext: the loader writes the CSV itself."""

    source = "bpf"

    def __init__(self, *args, tool: Path, attach: str = "auto", **kw):
        super().__init__(*args, **kw)
        self.tool = Path(tool)
        self.attach = attach
        self.proc: subprocess.Popen | None = None
        self.ready: dict = {}
        self._err_lines: list[str] = []
        self._reader: threading.Thread | None = None

    def argv(self, *extra: str) -> list[str]:
        args = [str(self.tool), "--attach", self.attach]
        for p in self.ports:
            args += ["--port", str(p)]
        for a in self.addrs:
            args += ["--addr", a]
        if self.cookie:
            args += ["--cookie", str(self.cookie)]
        return args + list(extra)

    def check(self) -> dict:
        """Load and attach once without recording: can this kernel run it?"""
        try:
            res = subprocess.run(self.argv("--check"), capture_output=True, text=True,
                                 timeout=READY_TIMEOUT_S)
        except (OSError, subprocess.SubprocessError) as exc:
            raise ProbeError(f"the eBPF hook does not run: {exc}") from None
        if res.returncode != 0:
            raise ProbeError(_tool_error(res.stderr, res.returncode))
        return json.loads(res.stdout)

    def start(self) -> None:
        if self.started:
            return
        self.out_dir.mkdir(parents=True, exist_ok=True)
        try:
            self.proc = subprocess.Popen(self.argv("--output", str(self.csv_path)),
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.PIPE, text=True,
                                         start_new_session=True)
        except OSError as exc:
            raise ProbeError(f"cannot run the eBPF hook {self.tool}: {exc.strerror}") from None
        ready = threading.Event()

        def read_stderr():
            for line in self.proc.stderr:
                line = line.rstrip("\n")
                if line.startswith("READY "):
                    self.ready = json.loads(line[6:])
                    ready.set()
                else:
                    self._err_lines.append(line)
            ready.set()

        self._reader = threading.Thread(target=read_stderr, daemon=True)
        self._reader.start()
        if not ready.wait(READY_TIMEOUT_S) or not self.ready:
            self._kill()
            raise ProbeError(_tool_error("\n".join(self._err_lines), self.proc.returncode))
        self.started_ns = time.time_ns()
        self.started = True

    def _kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
        if self.proc:
            self.proc.wait()
        if self._reader:
            self._reader.join(5)

    def stop(self) -> ProbeStats:
        if self.stats is not None:
            return self.stats
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._kill()
        self._reader.join(5)
        self.stopped_ns = time.time_ns()
        self.started = False
        stats = next((json.loads(ln[6:]) for ln in self._err_lines if ln.startswith("STATS ")),
                     None)
        if stats is None:
            raise ProbeError(_tool_error("\n".join(self._err_lines), self.proc.returncode))
        detail = {k: v for k, v in stats.items() if k not in ("events", "lost")}
        detail["offset_ns"] = self.ready.get("offset_ns")
        self.stats = ProbeStats("bpf", int(stats["events"]), int(stats["lost"]), detail)
        self._write_json(self.stats)
        return self.stats


def _tool_error(stderr: str, status) -> str:
    lines = [ln for ln in (stderr or "").splitlines() if ln.strip()]
    errs = [ln for ln in lines if "error:" in ln]
    msg = (errs or lines or [f"exited with status {status}"])[-1]
    msg = msg.split("error: ", 1)[-1] if "error: " in msg else msg
    return f"the eBPF hook failed: {msg}"


# ---------------------------------------------------------------- choosing

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
    since boot is recorded from the top-level buffer (TracefsRecorder)."""
    if prefer not in PREFER:
        raise ProbeError(f"unknown probe source {prefer!r} (one of {', '.join(PREFER)})")
    for p in ports:
        if not 0 < int(p) < 65536:
            raise ProbeError(f"bad port {p}")
    if len(ports) > 16:
        raise ProbeError("at most 16 ports")
    for a in addrs or []:
        try:
            ipaddress.ip_address(a)
        except ValueError:
            raise ProbeError(f"bad address {a!r}") from None
    if len(addrs or []) > 8:
        raise ProbeError("at most 8 addresses")
    need_root()
    root = tracefs_root()
    extended = has_extended_tracepoint(root)
    boot_enabled = own_tracing and _read(root / "events" / "tcp" / "tcp_probe" / "enable") == "1"
    kw = {"addrs": addrs, "cookie": cookie}
    tracefs_kw = {**kw, "boot_enabled": boot_enabled}
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
