"""Running `tcpvar run` from the tests, and what a finished run should have
left (and not left) behind."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ARTEFACTS = ("manifest.json", "sender.pcap", "bottleneck.pcap", "tcp_probe.csv",
             "tcp_probe.json", "tc-stats.txt", "tc-stats.json", "progress.jsonl")


def tcpvar_run(tmp_path: Path, *args, timeout: float = 900):
    """(exit status, JSON document or None, stderr) of `tcpvar run --json`."""
    proc = subprocess.run(
        [sys.executable, "-m", "tcpvar.cli", "run", "--json", "-q", "--out",
         str(tmp_path / "runs"), "--db", str(tmp_path / "t.duckdb"), *map(str, args)],
        capture_output=True, text=True, timeout=timeout)
    doc = json.loads(proc.stdout) if proc.stdout.strip() else None
    return proc.returncode, doc, proc.stderr


def namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def processes_mentioning(text: str) -> list[str]:
    """Command lines of live processes that contain @text (a run's folder or port)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        line = " ".join(a.decode(errors="replace") for a in args)
        if text in line and "pytest" not in line:
            found.append(line)
    return found


def assert_nothing_left(run: dict) -> None:
    """No namespace of the run, and no process writing into its folder or
    serving its ports."""
    manifest = json.loads((Path(run["dir"]) / "manifest.json").read_text())
    tag = manifest["tag"]
    assert not {n for n in namespaces() if n.startswith(f"tcpvar-{tag}-")}
    assert not manifest.get("left_behind")
    assert not processes_mentioning(run["dir"])
    for f in manifest["flows"]:
        assert not processes_mentioning(f"-p {f['dst_port']} ")


def close(a: float, b: float, rel: float) -> bool:
    return abs(a - b) <= rel * max(abs(a), abs(b))
