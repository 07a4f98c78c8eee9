"""Running `tcpvar run` from the tests, and what a finished run should have
left (and not left) behind."""
from __future__ import annotations

import contextlib
import csv
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

ARTEFACTS = ("manifest.json", "sender.pcap", "bottleneck.pcap", "tcp_probe.csv",
             "tcp_probe.json", "tc-stats.txt", "tc-stats.json", "progress.jsonl")


def run_command(tmp_path: Path, args) -> list[str]:
    """The command line of `tcpvar run --json` into @tmp_path's runs and store."""
    return [sys.executable, "-m", "tcpvar.cli", "run", "--json", "-q", "--out",
            str(tmp_path / "runs"), "--db", str(tmp_path / "t.duckdb"), *map(str, args)]


def tool_on_path(folder: Path, name: str, script: str) -> dict:
    """This process's environment with @script, an executable @name in
    @folder/bin, first on PATH: a real tool wrapped to behave as on a busy
    host."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(exist_ok=True)
    tool = bin_dir / name
    tool.write_text(script)
    tool.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def tcpvar_run(tmp_path: Path, *args, timeout: float = 900, env: dict | None = None):
    """(exit status, JSON document or None, stderr) of `tcpvar run --json`,
    in @env (None: this process's)."""
    proc = subprocess.run(run_command(tmp_path, args), capture_output=True, text=True,
                          timeout=timeout, env=env)
    doc = json.loads(proc.stdout) if proc.stdout.strip() else None
    return proc.returncode, doc, proc.stderr


@contextlib.contextmanager
def side_by_side(tmp_path_factory, **jobs):
    """Start each of @jobs (name=function of a new folder) in a thread, two
    at a time (one per host core), and yield name -> Future of (folder, its
    result); on leaving, wait for those that started. For micro-VM runs on
    virtual time, whose results do not depend on how busy the host is
    (test_clock): running them together changes how long a module takes,
    not what it sees."""
    folders = {name: tmp_path_factory.mktemp(name) for name in jobs}
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures: dict[str, Future] = {
            name: pool.submit(lambda job=job, folder=folders[name]: (folder, job(folder)))
            for name, job in jobs.items()}
        try:
            yield futures
        finally:
            for future in futures.values():
                future.cancel()


def run_passed(future: Future) -> tuple[Path, dict]:
    """(folder, JSON document) of a side_by_side tcpvar_run, which must have exited 0."""
    folder, (rc, doc, err) = future.result()
    assert rc == 0, err
    return folder, doc


def interrupted_run(tmp_path: Path, *args, samples: int = 3, wait_s: float = 300,
                    sig: int = signal.SIGINT):
    """`tcpvar run --json` stopped with @sig once its flows have run for
    @samples seconds: (exit status, JSON document or None, stderr)."""
    proc = subprocess.Popen(run_command(tmp_path, args), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + wait_s
    started = None
    while time.monotonic() < deadline:
        found = list((tmp_path / "runs").glob("*/progress.jsonl"))
        if found and len(found[0].read_text().splitlines()) >= samples:
            break
        # on virtual time the samples stay in the guest's memory until the
        # run ends; the manifest in the run folder says when the flows began
        if started is None and any('"started_ns"' in m.read_text(errors="replace")
                                   for m in (tmp_path / "runs").glob("*/manifest.json")):
            started = time.monotonic()
        if started is not None and time.monotonic() - started >= 2 * samples:
            break
        time.sleep(0.2)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    return proc.returncode, json.loads(out) if out.strip() else None, err


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


def processes_inside(folder: Path) -> list[str]:
    """PIDs of live processes whose working directory lies in @folder."""
    found = []
    for cwd in Path("/proc").glob("[0-9]*/cwd"):
        try:
            if Path(os.readlink(cwd)).is_relative_to(folder):
                found.append(cwd.parent.name)
        except OSError:
            continue
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


def queues(run_dir: Path) -> dict[str, dict]:
    """The bottleneck queues of a run folder (under the rate limiter), as
    the kernel reported them at the end, by router."""
    out: dict[str, dict] = {}
    for q in json.loads((run_dir / "tc-stats.json").read_text()):
        if q.get("parent") == "1:1":
            assert q["router"] not in out, f"two bottleneck queues on {q['router']}"
            out[q["router"]] = q
    return out


def netem_delays(run_dir: Path) -> dict[tuple[str, str], float]:
    """netem's delay (ms) on each (router or host, device) of a run folder."""
    return {(q["router"], q["dev"]): 1e3 * q["options"]["delay"]["delay"]
            for q in json.loads((run_dir / "tc-stats.json").read_text())
            if q["kind"] == "netem"}


def socket_retransmissions(run_dir: Path, sport: int) -> int:
    """The retransmissions of the socket sending from @sport, from the run
    folder: tcp_probe's last total_retrans, plus what tshark sees it
    retransmit in sender.pcap after that event. The tracepoint fires on an
    ACK before the ACK is processed, so the retransmissions that ACK
    triggers, or any after the last ACK (a flow the receiver reset, a
    sender already closing), never show in tcp_probe."""
    from tshark_truth import count
    with open(run_dir / "tcp_probe.csv") as f:
        events = [(int(r["ts_ns"]), int(r["total_retrans"])) for r in csv.DictReader(f)
                  if int(r["sport"]) == sport]
    last_ns = max(t for t, _ in events)
    secs, ns = divmod(last_ns, 10**9)
    later = count(run_dir / "sender.pcap",
                  f"tcp.srcport == {sport} && tcp.analysis.retransmission "
                  f"&& frame.time_epoch > {secs}.{ns:09d}")
    return max(n for _, n in events) + later


def close(a: float, b: float, rel: float) -> bool:
    return abs(a - b) <= rel * max(abs(a), abs(b))
