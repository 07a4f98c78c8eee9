#!/usr/bin/env python3
"""Time `tcpvar spark` in local mode: the per-core rate that docs/scale.md
scales to a cluster.

    .venv/bin/python bench/spark.py                       # bulk.pcap and many.pcap, 8 parts each
    .venv/bin/python bench/spark.py a.pcap b.pcap --parts 4 --repeat 3

Each capture is cut into --parts files (`editcap -c`, as bench/many_files.py
does), and, round by round, all the parts are analysed by

  spark local[1]     tcpvar spark --master local[1] -q --json --out DIR PART...
  spark local[N]     the same on N = all cores
  analyze -j N       tcpvar analyze -q -j N PART... (the same work without Spark)

Reported: wall time with Spark's start-up, packets/s over all the parts, and
the per-core rate of the tasks themselves (packets ÷ the sum of the tasks'
own seconds, from the job's JSON): what one executor core analyses once the
cluster is up. The "spark" section of bench/RESULTS.md is replaced.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import many_files
import run as bench  # bench/run.py: measuring, machine facts, RESULTS.md sections


def measure_spark(tcpvar: list[str], master: str, files: list[Path], out: Path) -> dict:
    argv = [*tcpvar, "spark", "--master", master, "-q", "--json", "--out", str(out),
            *map(str, files)]
    with tempfile.NamedTemporaryFile("r", suffix=".json") as doc:
        m = bench.measure(argv, timeout=3600, stdout=doc.name)
        if m["rc"] != 0:
            raise SystemExit(f"{master} failed ({m['rc']}): {m['stderr'][-800:]}")
        result = json.load(doc)
    shutil.rmtree(out)
    tasks = sum(c["seconds"] for c in result["captures"])
    return {**m, "packets": result["summary"]["packets"], "task_seconds": tasks}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("captures", nargs="*", help="default: bench/work/bulk.pcap and many.pcap")
    ap.add_argument("--parts", type=int, default=8, help="files each capture is cut into")
    ap.add_argument("--repeat", type=int, default=3, help="rounds, median reported")
    ap.add_argument("--work", default=str(bench.DEFAULT_WORK))
    ap.add_argument("--results", default=str(bench.DEFAULT_RESULTS))
    a = ap.parse_args()
    captures = [Path(c) for c in a.captures] or [bench.DEFAULT_WORK / f"{p}.pcap"
                                                  for p in ("bulk", "many")]
    for c in captures:
        if not c.is_file():
            raise SystemExit(f"{c}: no such capture (bench/make_capture.py records it)")
    tcpvar = bench.find_tcpvar(None)
    cores = len(os.sched_getaffinity(0))
    Path(a.work).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-spark-", dir=a.work) as tmp:
        work = Path(tmp)
        files = []
        for c in captures:
            (work / c.stem).mkdir()
            files += many_files.split(c, a.parts, work / c.stem)
        for f in files:
            bench.warm_cache(f)
        runs: dict[str, list[dict]] = {"local[1]": [], f"local[{cores}]": [], "analyze": []}
        for round_no in range(a.repeat):
            for master in ("local[1]", f"local[{cores}]"):
                runs[master].append(measure_spark(tcpvar, master, files, work / "out"))
                bench.log(f"round {round_no + 1}: {master}: {runs[master][-1]['seconds']:.1f} s")
            db = work / "a.duckdb"
            m = bench.measure([*tcpvar, "analyze", "-q", "-j", str(cores), "--db", str(db),
                               *map(str, files)], timeout=3600)
            if m["rc"] != 0:
                raise SystemExit(f"analyze failed ({m['rc']}): {m['stderr'][-800:]}")
            bench.remove_store(db)
            runs["analyze"].append(m)
        packets = runs["local[1]"][0]["packets"]
        text = section(captures, len(files), packets, runs, cores, bench.machine())
    bench.write_results(Path(a.results), "spark", text)
    print(text)
    return 0


def section(captures: list[Path], parts: int, packets: int, runs: dict, cores: int,
            mach: dict) -> str:
    lines = [f"## spark: {' + '.join(c.name for c in captures)} in {parts} parts",
             "",
             f"{packets:,} packets in {parts} files; {mach['nproc']} cores, {mach['cpu']}, "
             f"{mach['mem']} RAM. Median of {len(runs['analyze'])} rounds. Wall time from the "
             f"command's start (Spark's start-up included); per-core rate = packets ÷ the "
             f"sum of the tasks' own seconds.",
             "",
             "| command | seconds | packets/s | peak MB (driver) | per-core rate, packets/s |",
             "|---|---:|---:|---:|---:|"]
    for name, rs in runs.items():
        s = statistics.median(r["seconds"] for r in rs)
        mb = max(r["maxrss_kb"] or 0 for r in rs) / 1024
        per_core = (f"{bench.fmt_int(packets / statistics.median(r['task_seconds'] for r in rs))}"
                    if name != "analyze" else "")
        label = f"`tcpvar spark --master {name}`" if name != "analyze" else \
            f"`tcpvar analyze -j {cores}` (no Spark)"
        lines.append(f"| {label} | {s:.1f} | {bench.fmt_int(packets / s)} | {mb:,.0f} | "
                     f"{per_core} |")
    return "\n".join(lines) + "\n\n"


if __name__ == "__main__":
    sys.exit(main())
