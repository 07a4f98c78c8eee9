"""What a tcpvar killed with SIGKILL leaves (namespaces, the processes in
them) is found by the next `tcpvar doctor` or `tcpvar run`, identified as
its own by the owner file (capture/owners.py), and removed; a testbed whose
owner still runs is left alone."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from run_helpers import namespaces

OWNER = """
import subprocess, sys, time
from tcpvar.capture.testbed import Testbed, line, run_script

def main():
    with Testbed("tcpvar-ownertest") as bed:
        line(bed, ["a", "b"])
        bed.up(offloads=None)
        bed.procs.start("sleep", ["sleep", "600"], ns=bed.ns("a"))
        print(bed.prefix, flush=True)
        time.sleep(600)

run_script(main)
"""


@pytest.fixture
def env(tmp_path):
    return {**os.environ, "TCPVAR_OWNERS_DIR": str(tmp_path / "owners")}


def _owner(env) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True,
                            env=env)
    return proc, proc.stdout.readline().strip()


def _namespaces(prefix: str) -> list[str]:
    return sorted(n for n in namespaces() if n.startswith(prefix))


def _pids(ns: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _ended(pid: int, wait_s: float = 10) -> bool:
    """Whether @pid is gone within @wait_s (a SIGKILL takes a moment)."""
    deadline = time.monotonic() + wait_s
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not _alive(pid)


def test_doctor_removes_what_a_killed_run_left(env):
    proc, prefix = _owner(env)
    names = _namespaces(prefix)
    assert names == [f"{prefix}-a", f"{prefix}-b"]
    (sleeper,) = _pids(f"{prefix}-a")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert _namespaces(prefix) == names and _alive(sleeper)     # left behind
    res = subprocess.run([sys.executable, "-m", "tcpvar.cli", "doctor"], capture_output=True,
                         text=True, env=env, timeout=300)
    assert f"removed what a killed tcpvar (PID {proc.pid}) left: 2 namespaces, 1 processes" \
        in res.stderr, res.stderr
    assert _namespaces(prefix) == []
    assert _ended(sleeper)
    assert not list(Path(env["TCPVAR_OWNERS_DIR"]).glob("*.json"))


def test_a_running_owner_is_left_alone(env):
    from tcpvar.capture import owners

    proc, prefix = _owner(env)
    try:
        old, owners.ROOT = owners.ROOT, Path(env["TCPVAR_OWNERS_DIR"])
        try:
            assert owners.reap() == []
        finally:
            owners.ROOT = old
        assert len(_namespaces(prefix)) == 2
    finally:
        proc.send_signal(signal.SIGTERM)       # unwinds: it removes its own testbed
        proc.wait(timeout=60)
    assert _namespaces(prefix) == []
    assert not list(Path(env["TCPVAR_OWNERS_DIR"]).glob("*.json"))


UNRECORDED = """
import os, subprocess, sys, time
from tcpvar.capture import owners

owners.claim("tcpvar-marktest")
# started, but the owner is killed before add_process() records the PID
sleeper = subprocess.Popen(["sleep", "600"], start_new_session=True,
                           env=owners.marked("tcpvar-marktest", dict(os.environ)))
print(sleeper.pid, flush=True)
time.sleep(600)
"""


def test_doctor_finds_an_unrecorded_process_by_its_mark(env):
    """A process the killed owner started but never recorded carries the
    owner's mark in its environment, and is ended by it."""
    owner = subprocess.Popen([sys.executable, "-c", UNRECORDED], stdout=subprocess.PIPE,
                             text=True, env=env)
    sleeper = int(owner.stdout.readline())
    unmarked = subprocess.Popen(["sleep", "600"], start_new_session=True)   # not the owner's
    try:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        assert _alive(sleeper)
        res = subprocess.run([sys.executable, "-m", "tcpvar.cli", "doctor"],
                             capture_output=True, text=True, env=env, timeout=300)
        assert f"removed what a killed tcpvar (PID {owner.pid}) left: 0 namespaces, " \
               f"1 processes" in res.stderr, res.stderr
        assert _ended(sleeper) and unmarked.poll() is None
    finally:
        unmarked.kill()
        unmarked.wait()
        if _alive(sleeper):
            os.kill(sleeper, signal.SIGKILL)
