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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TCPVAR = [sys.executable, "-m", "tcpvar.cli"]
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL)
TOOLS = ("iperf3", "tcpdump", "vng", "qemu-system-x86_64")
PATH = ["--rtt", "20", "--bw", "20mbit", "-q"]
ANALYZE = (["analyze", "-q", "--force", str(ROOT / "fixtures" / "pcaps" / "iperf_wrap.pcap.gz")],
           6.0)


def commands(backend: str) -> dict[str, tuple[list[str], float]]:
    """name: (arguments, seconds it takes: the signal comes within them)."""
    boot = 25.0 if backend == "vm" else 0.0      # a micro-VM boots, builds, tears down
    on = ["--backend", backend, *PATH]
    return {"run": (["run", "--cc", "cubic", "--duration", "5", *on], 14.0 + boot),
            "sweep": (["sweep", "--name", "interrupts", "--cc", "reno,cubic", "--duration",
                       "4", *on], 22.0 + 2 * boot),
            "analyze": ANALYZE}


def namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def tool_pids() -> set[int]:
    pids = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if (d / "comm").read_text().strip() in TOOLS:
                    pids.add(int(d.name))
            except OSError:
                pass
    return pids


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


def one_round(k: int, rng: random.Random, work: Path, backend: str) -> dict:
    table = commands(backend)
    name = rng.choice(sorted(table))
    args, span = table[name]
    sig = rng.choice(SIGNALS)
    delay = round(rng.uniform(0.2, span), 2)
    db = "store.duckdb"
    out = f"runs{k}"
    extra = ["--db", db] + (["--out", out] if name != "analyze" else [])
    ns_before, tools_before = namespaces(), tool_pids()
    started = time.monotonic()
    proc = subprocess.Popen([*TCPVAR, *args, *extra], cwd=work, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        proc.wait(delay)
        sent = False                    # it finished first
    except subprocess.TimeoutExpired:
        proc.send_signal(sig)
        sent = True
    try:
        _, err = proc.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        return {"round": k, "command": name, "signal": sig.name, "at_s": delay,
                "problems": ["did not exit within 180 s of the signal"]}
    took = time.monotonic() - started
    problems = []
    want = (-9 if sig == signal.SIGKILL else 130) if sent else 0
    if proc.returncode != want:
        problems.append(f"exit status {proc.returncode}, not {want}: {err.strip()[-300:]}")
    if sent and sig == signal.SIGKILL:
        tcpvar("doctor", work=work)     # it removes what the killed tcpvar left
    time.sleep(0.5)                     # processes ended by the cleanup are reaped
    left_ns = namespaces() - ns_before
    left_tools = tool_pids() - tools_before
    if left_ns:
        problems.append(f"namespaces left: {', '.join(sorted(left_ns))}")
    if left_tools:
        problems.append(f"processes left: {sorted(left_tools)}")
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
            "at_s": delay, "took_s": round(took, 1), "status": proc.returncode,
            "folders": len(folders), "problems": problems}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--backend", choices=("netns", "vm"), default="netns",
                    help="where run and sweep run (vm: interrupts during boot too)")
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 30)
    print(f"seed {seed}, {a.rounds} rounds, backend {a.backend}", flush=True)
    rng = random.Random(seed)
    rows = []
    with tempfile.TemporaryDirectory(prefix="tcpvar-interrupts-") as tmp:
        for k in range(1, a.rounds + 1):
            r = one_round(k, rng, Path(tmp), a.backend)
            rows.append(r)
            print(f"{k:3d} {r['command']:8s} {r['signal']:8s} at {r['at_s']:5.2f} s  "
                  f"status {r.get('status')}  folders {r.get('folders', 0)}  "
                  + ("clean" if not r["problems"] else "; ".join(r["problems"])), flush=True)
    clean = sum(not r["problems"] for r in rows)
    signalled = sum(r["signal"] != "-" for r in rows)
    print(f"\n{clean}/{len(rows)} clean ({signalled} interrupted, the others finished "
          f"first), seed {seed}")
    return 0 if clean == len(rows) else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
