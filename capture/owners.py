"""What each tcpvar process owns on this host, so that what a killed one left
can be found and removed by the next: a file per testbed or micro-VM under
/run/tcpvar/owners (a tmpfs, empty after a reboot) names the owner (its PID
and start time, which a reused PID does not share), the namespaces it made
and the processes it started.

    claim(tag, namespaces=[...])   # before making them
    Popen(..., env=marked(tag, env))  # each process started outside them carries
    add_process(tag, proc.pid)     # the owner's mark, and is recorded
    release(tag)                   # all removed: forget it
    reap()                         # remove what dead owners left

The mark (TCPVAR_OWNER=tag in the environment, which children inherit)
finds a process whose owner was killed before it could record the PID.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .netns import delete_namespaces, existing_namespaces

ROOT = Path(os.environ.get("TCPVAR_OWNERS_DIR", "/run/tcpvar/owners"))
MARK = "TCPVAR_OWNER"


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat
    field 22), or None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def _path(tag: str) -> Path:
    return ROOT / f"{tag}.json"


def _read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _write(tag: str, doc: dict) -> None:
    """Best effort: a host where /run cannot be written loses only the
    cleanup after a SIGKILL, not the run."""
    try:
        ROOT.mkdir(parents=True, exist_ok=True)
        tmp = _path(tag).with_suffix(".tmp")
        tmp.write_text(json.dumps(doc))
        tmp.replace(_path(tag))         # never a half-written file
    except OSError:
        pass


def claim(tag: str, namespaces: list[str] = ()) -> None:
    """This process owns @tag's testbed: @namespaces (added to those it has)."""
    doc = _read(_path(tag)) or {"pid": os.getpid(), "start": _start_time(os.getpid()),
                                "namespaces": [], "processes": []}
    doc["namespaces"] += [n for n in namespaces if n not in doc["namespaces"]]
    _write(tag, doc)


def add_process(tag: str, pid: int) -> None:
    """A process this one started for @tag, to end if this one dies first."""
    doc = _read(_path(tag))
    if doc is not None:
        doc["processes"].append([pid, _start_time(pid)])
        _write(tag, doc)


def marked(tag: str, env: dict) -> dict:
    """@env with @tag's mark."""
    return {**env, MARK: tag}


def release(tag: str) -> None:
    try:
        _path(tag).unlink(missing_ok=True)
    except OSError:
        pass


@dataclass
class Reaped:
    tag: str
    pid: int
    namespaces: list[str]
    processes: int

    def __str__(self) -> str:
        return (f"removed what a killed tcpvar (PID {self.pid}) left: "
                f"{len(self.namespaces)} namespaces, {self.processes} processes")


def reap() -> list[Reaped]:
    """Remove what owners that are no longer running left: their processes
    (the ones they started, those carrying their mark, and any inside their
    namespaces), then their namespaces. Owners still running are left alone."""
    out = []
    for path in sorted(ROOT.glob("*.json")) if ROOT.is_dir() else []:
        doc = _read(path)
        if doc is None or _start_time(doc["pid"]) == doc["start"]:
            continue                    # being written, or its owner is alive
        started = [pid for pid, start in doc["processes"] if _start_time(pid) == start]
        pids = set(started + _marked_pids(path.stem) +
                   [pid for ns in doc["namespaces"] for pid in _pids_in(ns)])
        for pid in pids:
            _kill(pid, group=pid in started)
        live = set(existing_namespaces(""))
        gone = [ns for ns in doc["namespaces"] if ns in live]
        if gone:
            delete_namespaces(gone)
        path.unlink(missing_ok=True)
        out.append(Reaped(path.stem, doc["pid"], gone, len(pids)))
    return out


def _kill(pid: int, group: bool) -> None:
    """SIGKILL to @pid, or to its process group when it leads one (tcpvar
    starts its tools in sessions of their own: QEMU under vng, for one)."""
    try:
        if group and os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _marked_pids(tag: str) -> list[int]:
    """The processes whose environment carries @tag's mark."""
    mark = f"{MARK}={tag}".encode()
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                env = (d / "environ").read_bytes().split(b"\0")
            except OSError:             # gone, or not ours to read
                continue
            if mark in env:
                out.append(int(d.name))
    return out


def _pids_in(ns: str) -> list[int]:
    res = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
    return [int(p) for p in res.stdout.split()] if res.returncode == 0 else []

