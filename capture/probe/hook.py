"""The eBPF hook hooks/tcp_probe_ext: built once per source tree and machine
into the cache, the loader found there by the hash of its sources."""
from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tcpvar.resources import cache_dir, source_dir

HOOK_DIR = source_dir("hooks") / "tcp_probe_ext"
HOOK_SOURCES = ("Makefile", "tcp_probe_ext.h", "tcp_probe_ext.bpf.c", "tcp_probe_ext.c")
TOOL_NAME = "tcp_probe_ext"
BTF = Path("/sys/kernel/btf/vmlinux")
# the filter's sizes in the hook (TPE_MAX_PORTS, TPE_MAX_ADDRS in
# tcp_probe_ext.h); the tracefs recorders keep to them too
MAX_PORTS = 1024
MAX_ADDRS = 8


@dataclass
class HookBuild:
    """What prepare() found: the loader's path, or why there is none."""

    tool: Path | None
    reason: str
    built: bool = False


def _hook_key() -> str:
    h = hashlib.sha256(platform.machine().encode())
    for name in HOOK_SOURCES:
        h.update(name.encode() + b"\0" + (HOOK_DIR / name).read_bytes())
    return h.hexdigest()[:16]


def _sources_installed() -> bool:
    return all((HOOK_DIR / n).is_file() for n in HOOK_SOURCES)


def tool_path() -> Path | None:
    """The cached loader for these sources, if built (TCPVAR_PROBE_TOOL overrides)."""
    env = os.environ.get("TCPVAR_PROBE_TOOL")
    if env:
        return Path(env) if os.access(env, os.X_OK) else None
    if not _sources_installed():
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
    if not _sources_installed():
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
