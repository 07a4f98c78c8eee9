#!/usr/bin/env python3
"""Time tcpvar against tcptrace, tshark and a plain libpcap read loop on big captures.

    python3 bench/run.py                          # bench/work/bulk.pcap and bench/work/many.pcap
    python3 bench/run.py bench/work/bulk.pcap --repeat 5 --no-tshark
    python3 bench/run.py some.pcap --profile mytrace --results /tmp/RESULTS.md

Every measurement is one child process, run sequentially (never two at once), with
its wall time (perf_counter from start to exit), CPU time and peak RSS (GNU
/usr/bin/time's %M when installed, else ru_maxrss from os.wait4).  Per capture:

  tcpvar        tcpvar analyze --db <fresh db> -q --force FILE          (packets table stored)
  tcpvar-stats  tcpvar analyze --stats-only --db <fresh db> -q FILE
  tcpvar-again  tcpvar analyze --db <db> -q --force FILE, the db as that command left it
  tcptrace      tcptrace -l -r -n FILE
  tshark        tshark -n -q -z conv,tcp -r FILE                        (once; --no-tshark skips it)
  libpcap loop  tcpdump -r FILE -w /dev/null 'tcp port 1'

Standard output of every tool goes to /dev/null; standard error is kept and shown
if a tool fails.  Each tool runs --repeat times (tshark once) in rounds (round 1:
every tool once, round 2: every tool again, ...); the table shows the median.
Without --repeat, a capture gets as many rounds as fit in 15 s of runs, from 3
to 11 (the first round's time decides): 5 to 11 for the short profiles, 3 for bulk.
The file is read once beforehand, so every tool reads from the page cache.
Each tcpvar run gets a new, empty DuckDB file in a temporary folder under the
work folder (removed afterwards); after the first end-to-end run the store is
queried (untimed) to check that it holds every TCP packet and connection.

Results go to bench/RESULTS.md: one section per capture profile (the sidecar
<capture>.json written by make_capture.py names it, else the file name), newest
first; a new run of a profile replaces that profile's previous section.
"""
from __future__ import annotations

import argparse
import compileall
import datetime as dt
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from tcpvar.capture.testbed import run_script

HERE = Path(__file__).resolve().parent
DEFAULT_WORK = HERE / "work"
# the profiles run without arguments, in this order: make_capture.py's, and a
# small capture of the repository for the fixed cost of a process
PROFILES = ("bulk", "many", "oneway", "lossy", "short", "million")
SMALL = HERE.parent / "fixtures" / "pcaps" / "iperf_4flows.pcap"
# rows timed against a store that already holds the capture, as a user's
# second command finds it (each round runs the command once untimed first)
AGAIN = ("tcpvar-again",)
# rounds per capture without --repeat: as many as fit in the budget, the
# first round's time being the measure (rounds_for())
MIN_ROUNDS, MAX_ROUNDS = 3, 11
ROUND_BUDGET_S = 15.0
DEFAULT_RESULTS = HERE / "RESULTS.md"

RESULTS_HEADER = """# tcpvar benchmark results

Written by `bench/run.py` (how to run it and how to read the numbers: [README.md](README.md)).
One section per capture profile, newest first; re-running a profile replaces its section.
Seconds are the median wall time of the runs; packets/s = packets in the file / seconds;
peak MB = peak resident set size of the process (GNU time %M, else ru_maxrss).
"""


def log(*a: object) -> None:
    print("[bench]", *a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# measuring one child process
# ---------------------------------------------------------------------------

def gnu_time() -> str | None:
    """/usr/bin/time if it is GNU time (its -f %M is the child's own peak RSS in KiB)."""
    for cand in ("/usr/bin/time",):
        if os.access(cand, os.X_OK):
            try:
                cp = subprocess.run([cand, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                continue
            if "GNU" in cp.stdout:
                return cand
    return None


TIME = gnu_time()


def measure(args: list[str], timeout: float | None, stdout: str = os.devnull) -> dict:
    """Run args as one child process: wall time, CPU time and peak RSS.

    Wall time is perf_counter around start..wait4.  Peak RSS and CPU time come from
    GNU time's -f "%M %U %S" when /usr/bin/time is installed, else from os.wait4's
    rusage.  (A child forked from this Python process inherits its ~20 MB resident
    set until exec, and ru_maxrss keeps that high-water mark, so wait4 alone puts a
    floor of ~20 MB under small tools; GNU time forks the tool from a ~2 MB process.)
    The child runs in its own session so a timeout or Ctrl-C can kill it and
    everything it started, and nothing else. Its standard output goes to
    @stdout (discarded by default).
    """
    with open(stdout, "wb") as devnull, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile("r", prefix="time-", suffix=".txt") as tf:
        argv = ([TIME, "-f", "%M %U %S", "-o", tf.name] + args) if TIME else args
        timed_out = threading.Event()

        def kill_group(pid: int) -> None:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

        t0 = time.perf_counter()
        p = subprocess.Popen(argv, stdout=devnull, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)

        lock, exited = threading.Lock(), threading.Event()

        def on_timeout() -> None:
            with lock:                     # never signal a pid that has been reaped
                if not exited.is_set():
                    timed_out.set()
                    kill_group(p.pid)
        timer = threading.Timer(timeout, on_timeout) if timeout else None
        if timer:
            timer.start()
        try:
            os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)   # exited, not yet reaped
            t1 = time.perf_counter()
            with lock:
                exited.set()
            _, status, ru = os.wait4(p.pid, 0)
        except BaseException:              # Ctrl-C / SIGTERM: take the child down with us
            with lock:
                if not exited.is_set():
                    kill_group(p.pid)
            try:
                os.wait4(p.pid, 0)
            except ChildProcessError:
                pass
            p.returncode = -9
            raise
        finally:
            if timer:
                timer.cancel()
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read().decode(errors="replace")
        maxrss, cpu = ru.ru_maxrss, ru.ru_utime + ru.ru_stime
        if TIME:
            m = re.search(r"^(\d+) ([\d.]+) ([\d.]+)\s*$", tf.read(), re.M)
            if m:
                maxrss, cpu = int(m.group(1)), float(m.group(2)) + float(m.group(3))
            else:                          # killed before GNU time could write its line
                maxrss = None
    return {"seconds": t1 - t0, "cpu": cpu, "maxrss_kb": maxrss,
            "rc": p.returncode, "timed_out": timed_out.is_set(), "stderr": stderr[-3000:]}


# ---------------------------------------------------------------------------
# facts about the machine, the tools and the capture (untimed)
# ---------------------------------------------------------------------------

def out_of(args: list[str], timeout: float = 900) -> str:
    try:
        cp = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            timeout=timeout, stdin=subprocess.DEVNULL)
        return cp.stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"<{e}>"


def machine() -> dict:
    cpu = "?"
    try:
        for ln in Path("/proc/cpuinfo").read_text().splitlines():
            if ln.startswith("model name"):
                cpu = ln.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = "?"
    try:
        m = re.search(r"MemTotal:\s+(\d+) kB", Path("/proc/meminfo").read_text())
        mem_gb = f"{int(m.group(1)) / 1024 / 1024:.0f} GB" if m else "?"
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu": cpu, "kernel": platform.release(), "mem": mem_gb,
            "os": _os_name(), "python": platform.python_version()}


def _os_name() -> str:
    try:
        m = re.search(r'^PRETTY_NAME="?([^"\n]*)', Path("/etc/os-release").read_text(), re.M)
        return m.group(1) if m else "?"
    except OSError:
        return "?"


def tool_versions(tcpvar: list[str]) -> dict:
    v = {}
    v["tcpvar"] = out_of([sys.executable, "-c", "import tcpvar; print(tcpvar.__version__)"]).strip() or "?"
    m = re.search(r"version (\S+)", out_of(["tcptrace", "-v"]))
    v["tcptrace"] = m.group(1) if m else "?"
    m = re.search(r"TShark \(Wireshark\) (\S+)", out_of(["tshark", "--version"]))
    v["tshark"] = m.group(1) if m else "?"
    t = out_of(["tcpdump", "--version"])
    m1, m2 = re.search(r"tcpdump version (\S+)", t), re.search(r"libpcap version (\S+)", t)
    v["tcpdump"] = m1.group(1) if m1 else "?"
    v["libpcap"] = m2.group(1) if m2 else "?"
    return v


def capture_facts(path: Path) -> dict:
    facts: dict = {"file": path.name, "bytes": path.stat().st_size}
    side = path.with_suffix(".json")
    if side.exists():
        try:
            facts["sidecar"] = json.loads(side.read_text())
        except ValueError:
            pass
    # packet count and duration: capinfos if present, else tcptrace's "packets seen"
    if shutil.which("capinfos"):
        t = out_of(["capinfos", "-M", "-c", "-u", str(path)])
        m = re.search(r"Number of packets:\s+(\d+)", t)
        if m:
            facts["packets"], facts["packets_from"] = int(m.group(1)), "capinfos"
        m = re.search(r"Capture duration:\s+([\d.]+) seconds", t)
        if m:
            facts["duration_s"] = float(m.group(1))
    t = out_of(["tcptrace", "-n", str(path)])     # also warms the page cache
    m = re.search(r"(\d+) packets seen, (\d+) TCP packets traced", t)
    if m:
        facts.setdefault("packets", int(m.group(1)))
        facts.setdefault("packets_from", "tcptrace")
        facts["tcp_packets_tcptrace"] = int(m.group(2))
    facts["connections_tcptrace"] = len(re.findall(r"^\s*\d+: \S+ - \S+ \(", t, re.M))
    if "packets" not in facts:
        raise RuntimeError(f"cannot count the packets in {path}: {t[-500:]}")
    return facts


def warm_cache(path: Path) -> None:
    with open(path, "rb") as f:
        while f.read(1 << 22):
            pass


def check_store(tcpvar: list[str], db: Path) -> dict:
    sql = ("SELECT (SELECT count(*) FROM packets) AS packet_rows, "
           "(SELECT count(*) FROM connections) AS connections, "
           "frames, tcp_packets FROM captures")
    t = out_of(tcpvar + ["query", "--db", str(db), "--json", sql])
    try:
        row = json.loads(t)[0]
    except (ValueError, IndexError, KeyError):
        return {"error": t[-500:]}
    row["db_bytes"] = sum(f.stat().st_size for f in store_files(db))
    return row


def store_files(db: Path) -> list[Path]:
    """The files of a tcpvar store: the DuckDB file, its WAL, its packets' segments."""
    segments = db.with_name(db.name + ".packets").rglob("*")
    return [f for f in (db, db.with_name(db.name + ".wal"), *segments) if f.is_file()]


def remove_store(db: Path) -> None:
    for f in store_files(db):
        f.unlink()
    shutil.rmtree(db.with_name(db.name + ".packets"), ignore_errors=True)


# ---------------------------------------------------------------------------
# one capture
# ---------------------------------------------------------------------------

def find_tcpvar(opt: str | None) -> list[str]:
    if opt:
        return [opt]
    # the command bootstrap.sh installs: the native front end, which hands
    # what it does not do to the console script
    native = HERE.parent / "cli" / "native" / "tcpvar"
    if native.exists():
        return [str(native)]
    # the console script next to this interpreter (skips pyenv's shell-script shim)
    sib = Path(sys.executable).parent / "tcpvar"
    if sib.exists():
        return [str(sib)]
    w = shutil.which("tcpvar")
    if not w:
        raise SystemExit("tcpvar not found (pip install -e . or --tcpvar PATH)")
    return [w]


def compile_checkout() -> None:
    """The checkout's modules byte-compiled, as Python leaves them after a
    module's first import: a module edited since, or PYTHONDONTWRITEBYTECODE,
    would put compiling (about 30 ms) into every timed tcpvar run."""
    if not compileall.compile_dir(HERE.parent, quiet=1, rx=re.compile(r"/\.(venv|git)/")):
        raise SystemExit("byte-compiling the checkout failed")


def bench_capture(path: Path, a: argparse.Namespace, tcpvar: list[str], tmp_root: Path) -> dict:
    log(f"{path}: counting packets and connections (untimed) ...")
    facts = capture_facts(path)
    log(f"{path.name}: {facts['packets']:,} packets, {facts['bytes']/1e6:,.1f} MB, "
        f"{facts['connections_tcptrace']} connections (tcptrace)")
    warm_cache(path)
    f = str(path)

    def tcpvar_cmd(stats_only: bool, db: Path) -> list[str]:
        if stats_only:
            return tcpvar + ["analyze", "--stats-only", "--db", str(db), "-q", f]
        return tcpvar + ["analyze", "--db", str(db), "-q", "--force", f]

    tools = [  # key, label, argv builder (gets the DB path)
        ("tcpvar", "tcpvar analyze (packets stored)", lambda db: tcpvar_cmd(False, db)),
        ("tcpvar-stats", "tcpvar analyze --stats-only", lambda db: tcpvar_cmd(True, db)),
        ("tcpvar-again", "tcpvar analyze (packets stored), into a store that has the capture",
         lambda db: tcpvar_cmd(False, db)),
        ("tcptrace", "tcptrace -l -r -n", lambda db: ["tcptrace", "-l", "-r", "-n", f]),
        ("tshark", "tshark -n -q -z conv,tcp", lambda db: ["tshark", "-n", "-q", "-z", "conv,tcp", "-r", f]),
        ("libpcap", "tcpdump -r (libpcap read loop)",
         lambda db: ["tcpdump", "-r", f, "-w", os.devnull, "tcp port 1"]),
    ]
    if a.no_tshark:
        tools = [t for t in tools if t[0] != "tshark"]
    runs: dict[str, list[dict]] = {k: [] for k, _, _ in tools}
    failed: dict[str, dict] = {}
    store: dict = {}
    rounds = a.repeat or MIN_ROUNDS        # without --repeat: set after the first round
    rnd = 0
    while rnd < rounds:
        started = time.perf_counter()
        for key, label, build in tools:
            if key in failed or (key == "tshark" and rnd > 0):
                continue
            tmpd = Path(tempfile.mkdtemp(prefix="db-", dir=tmp_root))
            db = tmpd / "bench.duckdb"
            argv = build(db)
            shown = " ".join(argv)
            log(f"round {rnd + 1}/{rounds}: {shown}")
            try:
                if key in AGAIN:            # the store as the same command left it (untimed)
                    measure(argv, a.timeout)
                r = measure(argv, a.timeout)
                if r["rc"] != 0:
                    why = "timed out" if r["timed_out"] else f"exit status {r['rc']}"
                    mb = "?" if r["maxrss_kb"] is None else f"{r['maxrss_kb']/1024:.0f}"
                    log(f"  FAILED ({why}) after {r['seconds']:.1f} s, peak {mb} MB:\n"
                        + r["stderr"][-1500:])
                    failed[key] = {**r, "why": why}
                    continue
                log(f"  {r['seconds']:.2f} s, CPU {r['cpu']:.2f} s, peak {r['maxrss_kb']/1024:.0f} MB")
                if key == "tcpvar" and not store:
                    store = check_store(tcpvar, db)
                    log(f"  store: {store}")
                runs[key].append(r)
            finally:
                if not a.keep_db:
                    shutil.rmtree(tmpd, ignore_errors=True)
        if rnd == 0 and not a.repeat:
            rounds = rounds_for(time.perf_counter() - started - tshark_s(runs))
        rnd += 1
    return {"path": str(path), "facts": facts, "tools": tools, "runs": runs, "failed": failed, "store": store,
            "when": dt.datetime.now().astimezone(), "repeat": rounds}


def tshark_s(runs: dict[str, list[dict]]) -> float:
    """The seconds of tshark's one run (the first round's), if any."""
    return sum(r["seconds"] for r in runs.get("tshark", []))


def rounds_for(round_s: float) -> int:
    """Rounds for a capture whose first round (tshark's run aside) took
    @round_s: as many as ROUND_BUDGET_S holds, from MIN_ROUNDS to
    MAX_ROUNDS. A sub-second run moves by a fifth with the host's load, a
    median of 3 by about as much; more rounds steady the short profiles'
    medians at little cost."""
    return max(MIN_ROUNDS, min(MAX_ROUNDS, int(ROUND_BUDGET_S // max(round_s, 1e-3))))


# ---------------------------------------------------------------------------
# RESULTS.md
# ---------------------------------------------------------------------------

def fmt_int(n: float) -> str:
    return f"{n:,.0f}"


def ratio(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:.2f}×" if x < 10 else f"{x:.1f}×"


def section(profile: str, res: dict, mach: dict, vers: dict) -> str:
    fx = res["facts"]
    side = fx.get("sidecar", {})
    npk = fx["packets"]
    med: dict[str, dict] = {}
    for key, rs in res["runs"].items():
        if rs:
            med[key] = {"seconds": statistics.median(r["seconds"] for r in rs),
                        "cpu": statistics.median(r["cpu"] for r in rs),
                        "mb": max(r["maxrss_kb"] for r in rs) / 1024,
                        "all": [r["seconds"] for r in rs]}
    L: list[str] = []
    when = res["when"].strftime("%Y-%m-%d %H:%M %Z")
    L.append(f"## {profile} — {when}")
    L.append("")
    L.append(f"- **Machine:** {mach['nproc']} CPUs, {mach['cpu']}, {mach['mem']} RAM; Linux {mach['kernel']} "
             f"({mach['os']}); Python {mach['python']}")
    L.append(f"- **Tools:** tcpvar {vers['tcpvar']}, tcptrace {vers['tcptrace']}, tshark {vers['tshark']}, "
             f"tcpdump {vers['tcpdump']} / libpcap {vers['libpcap']}")
    cap = (f"`{fx['file']}`: {fmt_int(npk)} packets ({fx['packets_from']}), {fx['bytes']/1e6:,.1f} MB, "
           f"{fx['connections_tcptrace']} TCP connections (tcptrace)")
    if "duration_s" in fx:
        cap += f", {fx['duration_s']:.1f} s of traffic"
    L.append(f"- **Capture:** {cap}")
    if side:
        td = side.get("tcpdump", {})
        extra = f"snaplen {side.get('snaplen', '?')}, recorded {side.get('created', '?')}"
        if td:
            extra += f", tcpdump dropped by kernel: {td.get('dropped_by_kernel')}"
        L.append(f"  - {side.get('description', '')}; {extra}")
    L.append(f"- **Runs:** median of {res['repeat']} (tshark: 1), sequential, page cache warm")
    L.append("")
    L.append("| tool | seconds | runs (s) | CPU s | packets/s | peak MB |")
    L.append("|---|---:|---|---:|---:|---:|")
    for key, label, _ in res["tools"]:
        if key in med:
            m = med[key]
            L.append(f"| {label} | {m['seconds']:.2f} | {' / '.join(f'{s:.2f}' for s in m['all'])} | "
                     f"{m['cpu']:.2f} | {fmt_int(npk / m['seconds'])} | {m['mb']:,.0f} |")
        elif key in res["failed"]:
            fr = res["failed"][key]
            mb = "?" if fr["maxrss_kb"] is None else f"{fr['maxrss_kb']/1024:,.0f}"
            L.append(f"| {label} | **FAILED** | {fr['why']} after {fr['seconds']:.1f} s | {fr['cpu']:.2f} | – | "
                     f"{mb} |")
    L.append("")
    # ratios
    refs = [k for k in ("tcptrace", "tshark") if k in med]
    labels = {"tcpvar": "end to end (packets stored)", "tcpvar-stats": "--stats-only",
              "tcpvar-again": "end to end, into a store that has it"}
    subj = [k for k in labels if k in med]
    if refs and subj:
        hdr = ["tcpvar mode"]
        for r in refs:
            hdr += [f"speed vs {r}", f"memory vs {r}"]
        if "libpcap" in med:
            hdr.append("speed vs libpcap loop")
        L.append("Ratios (speed = packets/s of tcpvar ÷ packets/s of the other tool, above 1× = tcpvar faster; "
                 "memory = peak MB of tcpvar ÷ peak MB of the other tool, below 1× = tcpvar smaller):")
        L.append("")
        L.append("| " + " | ".join(hdr) + " |")
        L.append("|---|" + "---:|" * (len(hdr) - 1))
        for s in subj:
            row = [labels[s]]
            for r in refs:
                row += [ratio(med[r]["seconds"] / med[s]["seconds"]), ratio(med[s]["mb"] / med[r]["mb"])]
            if "libpcap" in med:
                row.append(ratio(med["libpcap"]["seconds"] / med[s]["seconds"]))
            L.append("| " + " | ".join(row) + " |")
        L.append("")
    st = res["store"]
    if st and "error" not in st:
        ok = (st["packet_rows"] == fx.get("tcp_packets_tcptrace", st["packet_rows"])
              and st["connections"] == fx["connections_tcptrace"])
        L.append(f"Store check (end-to-end run): {fmt_int(st['packet_rows'])} packet rows, "
                 f"{st['connections']} connections, {fmt_int(st['frames'])} frames read, "
                 f"DuckDB file {st['db_bytes']/1e6:,.0f} MB "
                 f"({'matches' if ok else 'DIFFERS from'} tcptrace: "
                 f"{fmt_int(fx.get('tcp_packets_tcptrace', 0))} TCP packets, {fx['connections_tcptrace']} connections).")
        L.append("")
    elif st:
        L.append(f"Store check failed: `{st['error'][:300]}`")
        L.append("")
    for key, fr in res["failed"].items():
        tail = "\n".join(fr["stderr"].strip().splitlines()[-12:])
        L.append(f"`{key}` failed ({fr['why']}) after {fr['seconds']:.1f} s; end of its stderr:")
        L.append("")
        L.append("```")
        L.append(tail or "(empty)")
        L.append("```")
        L.append("")
    L.append("Commands (FILE = the capture, DB = a new empty file each run; for "
             f"{', '.join(AGAIN)}, the store the same command, run once untimed, left):")
    L.append("")
    for key, label, build in res["tools"]:
        argv = build(Path("DB"))
        argv = ["tcpvar" if a.endswith("/tcpvar") else a for a in argv]
        argv = ["FILE" if a == res["path"] else a for a in argv]
        argv = [f"'{a}'" if " " in a else a for a in argv]
        L.append(f"- {key}: `{' '.join(argv)}`")
    return "\n".join(L) + "\n"


def medians(res: dict) -> dict[str, dict]:
    """Per tool: median seconds and the largest peak MB of its runs."""
    return {key: {"seconds": statistics.median(r["seconds"] for r in rs),
                  "mb": max(r["maxrss_kb"] for r in rs) / 1024}
            for key, rs in res["runs"].items() if rs}


def summary(done: list[tuple[str, dict]]) -> str:
    """One table over the profiles of this run: the issue's aims side by side."""
    when = max(res["when"] for _, res in done).strftime("%Y-%m-%d %H:%M %Z")
    L = [f"## Summary of one run — {when}", "",
         "Each profile's section below has its runs; ratios are tcptrace's seconds over "
         "tcpvar's (above 1× = tcpvar faster), peak MB is the process's.", "",
         "| profile | packets | connections | end to end s | --stats-only s | tcptrace s "
         "| end to end vs tcptrace | --stats-only vs tcptrace | peak MB tcpvar / tcptrace |",
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for profile, res in done:
        med, fx = medians(res), res["facts"]

        def sec(key: str) -> str:
            return f"{med[key]['seconds']:.2f}" if key in med else "failed"

        def vs(key: str) -> str:
            if key in med and "tcptrace" in med:
                return ratio(med["tcptrace"]["seconds"] / med[key]["seconds"])
            return "–"
        mb = " / ".join(f"{med[k]['mb']:,.0f}" if k in med else "–" for k in ("tcpvar", "tcptrace"))
        L.append(f"| {profile} | {fmt_int(fx['packets'])} | {fmt_int(fx['connections_tcptrace'])} | "
                 f"{sec('tcpvar')} | {sec('tcpvar-stats')} | {sec('tcptrace')} | {vs('tcpvar')} | "
                 f"{vs('tcpvar-stats')} | {mb} |")
    return "\n".join(L) + "\n"


def write_results(path: Path, profile: str, text: str) -> None:
    start, end = f"<!-- bench:{profile} -->", f"<!-- /bench:{profile} -->"
    body = path.read_text() if path.exists() else RESULTS_HEADER
    body = re.sub(re.escape(start) + r".*?" + re.escape(end) + r"\n*", "", body, flags=re.S)
    if "<!-- bench:" in body:
        i = body.index("<!-- bench:")
        head, rest = body[:i], body[i:]
    else:
        head, rest = body.rstrip("\n") + "\n\n", ""
    path.write_text(head + f"{start}\n{text}{end}\n\n" + rest.rstrip("\n") + ("\n" if rest else ""))


# ---------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("captures", nargs="*", help="pcap files (default: every profile in bench/work/ "
                                                "and the small fixtures/pcaps/iperf_4flows.pcap)")
    ap.add_argument("--repeat", type=int,
                    help="runs per tool, median reported (default: 3 to 11, as many as fit in 15 s "
                         "of runs; tshark 1)")
    ap.add_argument("--no-tshark", action="store_true", help="skip tshark (slow on big captures)")
    ap.add_argument("--work", default=str(DEFAULT_WORK), help="work folder for temporary DuckDB files")
    ap.add_argument("--results", default=str(DEFAULT_RESULTS), help="results file (default bench/RESULTS.md)")
    ap.add_argument("--profile", help="section name in RESULTS.md (one capture only; default: from the "
                                      "sidecar .json, else the file name)")
    ap.add_argument("--tcpvar", help="tcpvar executable (default: the one next to this Python)")
    ap.add_argument("--timeout", type=float, default=3600, help="kill a measured run after this many seconds")
    ap.add_argument("--keep-db", action="store_true", help="keep the DuckDB files (in the work folder)")
    a = ap.parse_args()
    if a.repeat is not None and a.repeat < 1:
        ap.error("--repeat must be at least 1")
    caps = [Path(c) for c in a.captures] or [
        p for p in [DEFAULT_WORK / f"{name}.pcap" for name in PROFILES] + [SMALL] if p.exists()]
    if not caps:
        ap.error("no captures given and none in bench/work/ (make them with bench/make_capture.py)")
    for c in caps:
        if not c.exists():
            ap.error(f"no such file: {c}")
    if a.profile and len(caps) > 1:
        ap.error("--profile needs exactly one capture")
    for tool in ("tcptrace", "tcpdump") + (() if a.no_tshark else ("tshark",)):
        if not shutil.which(tool):
            ap.error(f"{tool} not found")

    tcpvar = find_tcpvar(a.tcpvar)
    compile_checkout()
    mach, vers = machine(), tool_versions(tcpvar)
    log(f"machine: {mach}; tools: {vers}")
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    rc = 0
    tmp_root = Path(tempfile.mkdtemp(prefix="bench-tmp-", dir=work))
    done: list[tuple[str, dict]] = []
    try:
        for c in caps:
            res = bench_capture(c.resolve(), a, tcpvar, tmp_root)
            side = res["facts"].get("sidecar", {})
            profile = a.profile or side.get("profile") or ("small" if c.resolve() == SMALL.resolve() else c.stem)
            text = section(profile, res, mach, vers)
            write_results(Path(a.results), profile, text)
            print(text, flush=True)
            done.append((profile, res))
            if res["failed"]:
                rc = 1
        if len(done) > 1:
            text = summary(done)
            write_results(Path(a.results), "summary", text)
            print(text, flush=True)
    finally:
        if a.keep_db:
            log(f"DuckDB files kept in {tmp_root}")
        else:
            shutil.rmtree(tmp_root, ignore_errors=True)
    log(f"results written to {a.results}")
    return rc


if __name__ == "__main__":
    run_script(main)
