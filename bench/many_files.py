#!/usr/bin/env python3
"""Time `tcpvar analyze` over many captures at once, beside tcptrace.

    .venv/bin/python bench/many_files.py                      # bench/work/bulk.pcap in 8 parts
    .venv/bin/python bench/many_files.py some.pcap --parts 16 --repeat 5

The capture is cut into --parts files of equal packet counts (`editcap -c`),
then, round by round (never two measurements at once), each of:

  tcpvar -j 1        tcpvar analyze --db <fresh db> -q -j 1 PART...     (one worker)
  tcpvar -j N        tcpvar analyze --db <fresh db> -q -j N PART...     (N = cores)
  stats-only -j 1/N  the same with --stats-only
  tcptrace           tcptrace -l -r -n PART, one process per part, one after the other
  tcptrace ×N        the same, N at a time (xargs -P N)

Packets/s is the parts' packets over the wall time of all of them. After the
first tcpvar run the store is checked (untimed): one complete capture per part
and every packet stored. The section "many files" of bench/RESULTS.md is
replaced with the medians.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import run as bench  # bench/run.py: measuring, machine facts, RESULTS.md sections


def split(capture: Path, parts: int, folder: Path) -> list[Path]:
    """@capture cut into @parts files of equal packet counts."""
    frames = int(bench.out_of(["capinfos", "-Mc", str(capture)]).split()[-1])
    per = -(-frames // parts)
    subprocess.run(["editcap", "-F", "pcap", "-c", str(per), str(capture),
                    str(folder / "part.pcap")], check=True)
    return sorted(folder.glob("part_*.pcap"))


def commands(tcpvar: list[str], files: list[Path], cores: int, work: Path) -> dict:
    """name -> a function giving the argv of one measurement (a new store each time)."""
    names = [str(f) for f in files]
    listing = work / "parts.txt"
    listing.write_text("\n".join(names) + "\n")

    def analyze(jobs: int, *extra: str):
        def argv(db: Path) -> list[str]:
            return [*tcpvar, "analyze", "--db", str(db), "-q", "-j", str(jobs), *extra, *names]
        return argv

    return {
        "tcpvar -j 1": analyze(1),
        f"tcpvar -j {cores}": analyze(cores),
        "stats-only -j 1": analyze(1, "--stats-only"),
        f"stats-only -j {cores}": analyze(cores, "--stats-only"),
        "tcptrace": lambda db: ["xargs", "-a", str(listing), "-n", "1", "-P", "1",
                                "tcptrace", "-l", "-r", "-n"],
        f"tcptrace ×{cores}": lambda db: ["xargs", "-a", str(listing), "-n", "1",
                                          "-P", str(cores), "tcptrace", "-l", "-r", "-n"],
    }


def check_store(tcpvar: list[str], db: Path, files: list[Path], packets: int) -> None:
    out = bench.out_of([*tcpvar, "query", "--db", str(db), "--json",
                        "SELECT count(*) AS captures, sum(frames) AS frames, "
                        "(SELECT count(*) FROM packets) AS rows FROM captures WHERE complete"])
    got = json.loads(out)[0]
    want = {"captures": len(files), "frames": packets}
    if {k: got[k] for k in want} != want:
        raise SystemExit(f"the store does not hold every part: {got}, expected {want}")


def section(capture: Path, files: list[Path], packets: int, results: dict, cores: int,
            mach: dict) -> str:
    base = statistics.median(results["tcptrace"])
    lines = [f"## many files: {capture.name} in {len(files)} parts",
             "",
             f"{packets:,} packets in {len(files)} files; {mach['nproc']} cores, {mach['cpu']}. "
             f"Median of {len(results['tcptrace'])} rounds; packets/s over all files.",
             "",
             "| command | seconds | packets/s | vs tcptrace | vs tcptrace ×" f"{cores} |",
             "|---|---:|---:|---:|---:|"]
    para = statistics.median(results[f"tcptrace ×{cores}"])
    for name, runs in results.items():
        s = statistics.median(runs)
        lines.append(f"| `{name}` | {s:.2f} | {bench.fmt_int(packets / s)} | "
                     f"{base / s:.2f}× | {para / s:.2f}× |")
    return "\n".join(lines) + "\n\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture", nargs="?", default=str(bench.DEFAULT_WORK / "bulk.pcap"))
    ap.add_argument("--parts", type=int, default=8, help="files to cut it into (default 8)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds, median reported (default 3)")
    ap.add_argument("--work", default=str(bench.DEFAULT_WORK), help="work folder")
    ap.add_argument("--results", default=str(bench.DEFAULT_RESULTS))
    a = ap.parse_args()
    capture = Path(a.capture)
    if not capture.is_file():
        raise SystemExit(f"{capture}: no such capture (bench/make_capture.py records it)")
    tcpvar = bench.find_tcpvar(None)
    cores = len(os.sched_getaffinity(0))
    Path(a.work).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-many-", dir=a.work) as tmp:
        work = Path(tmp)
        files = split(capture, a.parts, work)
        packets = int(bench.out_of(["capinfos", "-Mc", str(capture)]).split()[-1])
        for f in files:
            bench.warm_cache(f)
        todo = commands(tcpvar, files, cores, work)
        results: dict[str, list[float]] = {name: [] for name in todo}
        for round_no in range(a.repeat):
            for name, argv in todo.items():
                db = work / f"r{round_no}.duckdb"
                m = bench.measure(argv(db), timeout=3600)
                if m["rc"] != 0:
                    raise SystemExit(f"{name} failed ({m['rc']}): {m['stderr'][-500:]}")
                if round_no == 0 and name == "tcpvar -j 1":
                    check_store(tcpvar, db, files, packets)
                bench.remove_store(db)
                results[name].append(m["seconds"])
                bench.log(f"round {round_no + 1}: {name}: {m['seconds']:.2f} s")
        text = section(capture, files, packets, results, cores, bench.machine())
    bench.write_results(Path(a.results), "many-files", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
