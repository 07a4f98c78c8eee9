"""Running commands and processes inside network namespaces, and ending
exactly the processes tcpvar started (by PID, never by name)."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from tcpvar import tools
from tcpvar.errors import TestbedError

# what the testbed runs, on either backend (the micro-VM runs the host's
# programs over its read-only view of the host's files); sysctls and offloads
# are written by tcpvar itself (nsctl.py)
TESTBED_TOOLS = ("ip", "tc", "iperf3", "tcpdump", "ss")


def need_root() -> None:
    if os.geteuid() != 0:
        raise TestbedError("tcpvar run needs root (network namespaces and qdiscs): "
                           "run it with sudo")


def need_tools(*names: str) -> None:
    for name in names:
        if tools.find(name) is None:
            raise TestbedError(tools.not_installed(name))


def run(args: list[str], ns: str | None = None, check: bool = True) -> str:
    """Run a setup command (in namespace @ns); its stdout, or TestbedError
    naming the command and its first line of complaint."""
    full = (["ip", "netns", "exec", ns] if ns else []) + args
    proc = subprocess.run(full, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if check and proc.returncode != 0:
        why = (proc.stderr.strip() or proc.stdout.strip() or f"exit {proc.returncode}")
        raise TestbedError(f"`{' '.join(args)}`{' in ' + ns if ns else ''} failed: "
                           f"{why.splitlines()[0]}")
    return proc.stdout


def run_batch(prefix: list[str], commands: list[str]) -> None:
    """Many ip commands in one process (`ip -batch -`); the failing line is named."""
    if not commands:
        return
    proc = subprocess.run([*prefix, "-batch", "-"], input="\n".join(commands) + "\n",
                          capture_output=True, text=True)
    if proc.returncode != 0:
        why = (proc.stderr.strip() or f"exit {proc.returncode}").splitlines()
        raise TestbedError(f"`{' '.join(prefix)}` batch failed: {why[0]}")


def existing_namespaces(prefix: str = "tcpvar-") -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines()
            if line.strip() and line.split()[0].startswith(prefix)]


def delete_namespaces(names: list[str]) -> None:
    """One process for all; -force goes on past a namespace already gone."""
    subprocess.run(["ip", "-force", "-batch", "-"], capture_output=True, text=True,
                   input="".join(f"netns del {n}\n" for n in names))


class Processes:
    """The processes of one run. stop() ends them gently, then for good."""

    def __init__(self, on_start=None, env: dict | None = None) -> None:
        self.procs: list[tuple[str, subprocess.Popen]] = []
        self.on_start = on_start        # told each new process's PID
        self.env = env or {}            # added to this process's environment

    def start(self, name: str, args: list[str], ns: str | None = None,
              stdout=None, stderr=None, text: bool = False,
              stdin=subprocess.DEVNULL) -> subprocess.Popen:
        """@stdout, @stderr: a Path to write to, subprocess.PIPE, or None;
        @stdin: subprocess.PIPE to write to the process."""
        # `ip netns exec` execs the command, so the PID is the tool's own
        full = (["ip", "netns", "exec", ns] if ns else []) + args
        out, err = _sink(stdout), _sink(stderr)
        try:
            proc = subprocess.Popen(full, stdin=stdin, stdout=out, stderr=err,
                                    text=text, start_new_session=True,
                                    env={**os.environ, **self.env})
        finally:
            for f in (out, err):
                if hasattr(f, "close"):
                    f.close()
        self.procs.append((name, proc))
        if self.on_start:
            self.on_start(proc.pid)
        return proc

    def stop(self, proc: subprocess.Popen, sig=signal.SIGTERM, grace_s: float = 5.0) -> int | None:
        if proc.poll() is None:
            with _ignore_gone():
                proc.send_signal(sig)
            try:
                proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                with _ignore_gone():
                    proc.kill()
                proc.wait()
        return proc.returncode

    def stop_all(self, grace_s: float = 3.0, names: set[str] | None = None) -> None:
        """SIGTERM to every process still running (of @names, if given),
        SIGKILL to those that stay past @grace_s."""
        live = [p for name, p in self.procs
                if p.poll() is None and (names is None or name in names)]
        for p in live:
            with _ignore_gone():
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for p in live:
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with _ignore_gone():
                    p.kill()
                p.wait()


def _sink(where):
    if where is None:
        return subprocess.DEVNULL
    return open(where, "wb") if isinstance(where, Path) else where


class _ignore_gone:
    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        return exc_type is ProcessLookupError
