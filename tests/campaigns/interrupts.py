#!/usr/bin/env python3
"""Interrupt tcpvar at random moments and check that nothing is left and
nothing is lost: a campaign of minutes, run outside CI (docs/reliability.md).

Each round starts one of `tcpvar run`, `tcpvar sweep` (two runs) or
`tcpvar analyze` (a 182,000-packet capture) and, at a random moment of its
life (building the testbed, sending, stopping, loading), sends the tcpvar
process SIGINT, SIGTERM, SIGHUP or SIGKILL, as a user or `kill` would. After
a SIGKILL it runs `tcpvar doctor`, which removes what a killed tcpvar left.
Then a round is clean when:

- the exit status is 130 (or 0 if the command had already finished; -9 after SIGKILL);
- no network namespace and no iperf3, tcpdump, vng or QEMU process of the round is left;
- the store opens and holds no capture left half loaded (after a SIGKILL, the
  next writer drops it), and the job can be finished: every run folder the
  round wrote loads with `tcpvar load`, the capture analyses again.

    .venv/bin/python tests/campaigns/interrupts.py                 # 20 rounds, a new seed
    .venv/bin/python tests/campaigns/interrupts.py --seed 7 --rounds 40
    .venv/bin/python tests/campaigns/interrupts.py --backend vm     # boots, in the micro-VM
"""
from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TCPVAR = [sys.executable, "-m", "tcpvar.cli"]
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL)
TOOLS = ("iperf3", "tcpdump", "vng", "qemu-system-x86_64")
ANALYZE = ["analyze", "-q", "--force", str(ROOT / "fixtures" / "pcaps" / "iperf_wrap.pcap.gz")]


def commands(backend: str) -> dict[str, list[str]]:
    """name: arguments. The host here may lack netem: the netns backend then
    shapes the rate only, the micro-VM's kernel adds the delay."""
    path = ["--bw", "20mbit", "--rtt", "20" if backend == "vm" else "0"]
    on = ["--backend", backend, *path]
    return {"run": ["run", "--cc", "cubic", "--duration", "5", *on],
            "sweep": ["sweep", "--cc", "reno,cubic", "--duration", "4", *on],
            "analyze": ANALYZE}


def namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def tool_pids() -> dict[int, str]:
    """PID -> name of the live processes of TOOLS (the kernel keeps 15
    characters of a name: QEMU is "qemu-system-x86")."""
    names = {t[:15] for t in TOOLS}
    pids = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                comm = (d / "comm").read_text().strip()
            except OSError:
                continue
            if comm in names:
                pids[int(d.name)] = comm
    return pids


def tools_left(before: dict[int, str], wait_s: float = 10) -> dict[int, str]:
    """The tools started since @before that are still there after @wait_s:
    a killed QEMU takes a moment to give back its guest's memory."""
    deadline = time.monotonic() + wait_s
    while True:
        left = {pid: name for pid, name in tool_pids().items() if pid not in before}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def tcpvar(*args: str, work: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([*TCPVAR, *args], cwd=work, capture_output=True, text=True,
                          timeout=timeout)


def store_problems(work: Path, db: str) -> list[str]:
    """The store opens for reading and holds no capture half loaded (a
    writer drops those when it opens; a reader must not meet one after a
    clean interrupt)."""
    if not (work / db).exists():
        return []
    res = tcpvar("query", "--db", db, "--csv",
                 "SELECT count(*) AS n FROM captures WHERE NOT complete", work=work)
    if res.returncode != 0:
        return [f"the store does not open: {res.stderr.strip()}"]
    return [] if res.stdout.split()[-1] == "0" else ["a capture is left half loaded"]


def extra_args(name: str, k: int) -> list[str]:
    """Round k's store and folders; a sweep's own name, since a sweep run
    again under a name resumes it."""
    own = {"run": ["--out", f"runs{k}"],
           "sweep": ["--out", f"runs{k}", "--name", f"interrupts{k}"]}
    return ["--db", "store.duckdb", *own.get(name, [])]


def calibrate(table: dict[str, list[str]], work: Path) -> dict[str, float]:
    """How long each command takes uninterrupted: the signals come within it.
    Each must succeed first, or the campaign would test nothing."""
    took = {}
    for name, args in table.items():
        t0 = time.monotonic()
        res = tcpvar(*args, *extra_args(name, 0), work=work)
        if res.returncode != 0:
            sys.exit(f"interrupts: {name} fails uninterrupted (exit {res.returncode}): "
                     f"{res.stderr.strip()[-300:]}")
        took[name] = time.monotonic() - t0
    return took


class Phases:
    """The phase lines a command prints on stderr off a terminal
    ("  12.3 s  booting the micro-VM"), read as they come."""

    def __init__(self, stream):
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream) -> None:
        for line in stream:
            self.lines.append(line.rstrip())

    def now(self) -> str:
        """The phase the command is in: its latest line, less the time."""
        last = self.lines[-1].strip() if self.lines else "starting"
        head, _, rest = last.partition(" s  ")
        return rest if rest and head.replace(".", "").isdigit() else last

    def text(self) -> str:
        self.thread.join(timeout=10)
        return "\n".join(self.lines)


def as_from_a_terminal() -> None:
    """The command's signals as a terminal leaves them: the campaign may run
    under nohup or in the background, where SIGHUP or SIGINT is ignored,
    and tcpvar keeps a signal ignored at its start."""
    for sig in SIGNALS[:3]:
        signal.signal(sig, signal.SIG_DFL)


def one_round(k: int, rng: random.Random, work: Path, table: dict[str, list[str]],
              took: dict[str, float]) -> dict:
    name = rng.choice(sorted(table))
    args = table[name]
    sig = rng.choice(SIGNALS)
    delay = round(rng.uniform(0.1, 0.95 * took[name]), 2)
    db = "store.duckdb"
    out = f"runs{k}"
    ns_before, tools_before = namespaces(), tool_pids()
    started = time.monotonic()
    proc = subprocess.Popen([*TCPVAR, *args, *extra_args(name, k)], cwd=work,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=as_from_a_terminal)
    phases = Phases(proc.stderr)
    phase = "finished"
    try:
        proc.wait(delay)
        sent = False                    # it finished first
    except subprocess.TimeoutExpired:
        phase = phases.now()
        proc.send_signal(sig)
        sent = True
    try:
        proc.wait(timeout=180)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return {"round": k, "command": name, "signal": sig.name, "at_s": delay,
                "phase": phase, "problems": ["did not exit within 180 s of the signal"]}
    took_s = time.monotonic() - started
    err = phases.text()
    problems = []
    want = (-9 if sig == signal.SIGKILL else 130) if sent else 0
    if proc.returncode != want:
        problems.append(f"exit status {proc.returncode}, not {want}: {err.strip()[-300:]}")
    if sent and sig == signal.SIGKILL:
        tcpvar("doctor", work=work)     # it removes what the killed tcpvar left
    left_ns = namespaces() - ns_before
    left_tools = tools_left(tools_before)
    if left_ns:
        problems.append(f"namespaces left: {', '.join(sorted(left_ns))}")
    if left_tools:
        problems.append("processes left: " + ", ".join(
            f"{name} (PID {pid})" for pid, name in sorted(left_tools.items())))
    killed = sent and sig == signal.SIGKILL
    if not killed:                      # a SIGKILL leaves a half load to the next writer
        problems += store_problems(work, db)
    folders = sorted(p for p in (work / out).glob("*") if (p / "manifest.json").exists()) \
        if name != "analyze" else []
    # then finish the job: load the run folders, or analyse the capture again
    res = tcpvar("load", "-q", "--db", db, *map(str, folders), work=work) if folders else \
        tcpvar(*[x for x in args if x != "--force"], "--db", db, work=work) \
        if name == "analyze" else None
    if res is not None and res.returncode != 0:
        problems.append(f"finishing: exit {res.returncode}: {res.stderr.strip()[-300:]}")
    problems += store_problems(work, db)
    return {"round": k, "command": name, "signal": sig.name if sent else "-",
            "at_s": delay, "phase": phase, "took_s": round(took_s, 1),
            "status": proc.returncode, "folders": len(folders), "problems": problems}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=20, help="interruptions to deliver")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--backend", choices=("netns", "vm"), default="netns",
                    help="where run and sweep run (vm: interrupts during boot too)")
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 30)
    print(f"seed {seed}, {a.rounds} interruptions, backend {a.backend}", flush=True)
    rng = random.Random(seed)
    table = commands(a.backend)
    rows = []
    with tempfile.TemporaryDirectory(prefix="tcpvar-interrupts-") as tmp:
        took = calibrate(table, Path(tmp))
        print("uninterrupted: " + ", ".join(f"{n} {t:.1f} s" for n, t in took.items()),
              flush=True)
        k = 0
        # a round whose command ends before its moment interrupts nothing:
        # rounds go on until enough have (and at most three times as many)
        while sum(r["signal"] != "-" for r in rows) < a.rounds and k < 3 * a.rounds:
            k += 1
            r = one_round(k, rng, Path(tmp), table, took)
            rows.append(r)
            print(f"{k:3d} {r['command']:8s} {r['signal']:8s} at {r['at_s']:5.2f} s  "
                  f"{r['phase'][:40]:40s}  status {r.get('status')}  "
                  f"folders {r.get('folders', 0)}  "
                  + ("clean" if not r["problems"] else "; ".join(r["problems"])), flush=True)
    clean = sum(not r["problems"] for r in rows)
    signalled = [r for r in rows if r["signal"] != "-"]
    clean_signalled = sum(not r["problems"] for r in signalled)
    print(f"\n{clean_signalled}/{len(signalled)} interruptions clean "
          f"({clean}/{len(rows)} rounds, {len(rows) - len(signalled)} finished before their "
          f"moment), seed {seed}")
    return 0 if clean == len(rows) and len(signalled) >= a.rounds else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
