#!/usr/bin/env python3
"""Time the levers of `tcpvar analyze`: the same command with one choice of
its ingest changed at a time, beside tcptrace, on the benchmark captures.

    .venv/bin/python bench/levers.py                           # bulk and many, 3 rounds
    .venv/bin/python bench/levers.py --before /tmp/old/python  # and an earlier tcpvar

Each variant is `tcpvar analyze -q --force --db <fresh db> FILE` (or
`--stats-only`) in a child process of this Python, with a module constant
set before the command runs (no option of tcpvar's changes these):

  writers           ingest/writers.py WRITERS: threads writing packet segments
                    (default: one more than the cores)
  batch             ingest/reader.py BATCH_ROWS: packets per batch and segment
  parquet           store/segments.py WRITE: DuckDB's Parquet options
  read first        pipelines/analyze.py start_reading: the capture read while
                    the store opens (off: the store opens first)
  duckdb threads    DuckDB's threads (default: one per core)
  table stats       analyzers/connections.py: the printed table's rows read
                    by sql/connection_brief.sql (off: every statistic, by
                    sql/connections.sql, as JSON does)
  imports           cli/main.py: each command's module imported on use (the
                    variant imports them all first)

`--before PY` adds an earlier tcpvar, run by the Python PY of its own
environment. Rounds of every variant, median of the rounds; the "levers"
section of bench/RESULTS.md is replaced.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import run as bench  # bench/run.py: measuring, machine facts, RESULTS.md sections

RUN = "; import sys; from tcpvar.cli.main import entry; sys.argv[0] = 'tcpvar'; entry()"
DUCKDB_THREADS_1 = ("import duckdb; connect = duckdb.connect; duckdb.connect = lambda *a, **k: "
                    "(lambda c: (c.execute('SET threads = 1'), c)[1])(connect(*a, **k))")
VARIANTS = {  # name: (Python run before the command, stats-only)
    "packets stored": ("pass", False),
    "--stats-only": ("pass", True),
    "1 writer (not one more than the cores)":
        ("import tcpvar.ingest.writers as w; w.WRITERS = 1", False),
    "2 writers": ("import tcpvar.ingest.writers as w; w.WRITERS = 2", False),
    "batches of 512 Ki packets (not 128 Ki)":
        ("import tcpvar.ingest.reader as r; r.BATCH_ROWS = 1 << 19", False),
    "DuckDB's default Parquet options (zstd level 3, dictionaries)":
        ("import tcpvar.store.segments as s; s.WRITE = 'FORMAT parquet, COMPRESSION zstd'",
         False),
    "the store opened before reading starts":
        ("import tcpvar.pipelines.analyze as a; a.start_reading = lambda *x: None", False),
    "--stats-only, the store opened before reading starts":
        ("import tcpvar.pipelines.analyze as a; a.start_reading = lambda *x: None", True),
    "DuckDB on one thread": (DUCKDB_THREADS_1, False),
    "--stats-only, the table reads back every statistic (not only its 14)":
        ("import tcpvar.analyzers.connections as c; r = c._read; "
         "c._read = lambda con, i, brief, a, b: r(con, i, False, a, b)", True),
    "--stats-only, every command's module imported at start (not only analyze's)":
        ("import tcpvar.cli.main as m; [m.cli.get_command(None, n) for n in m.COMMANDS]",
         True),
}


def argv(python: str, setup: str, stats_only: bool, db: Path, capture: Path) -> list[str]:
    mode = ["--stats-only"] if stats_only else ["--force"]
    return [python, "-c", setup + RUN, "analyze", "-q", *mode, "--db", str(db), str(capture)]


def commands(capture: Path, before: str | None) -> dict:
    """name -> a function giving a measurement's argv (a new store each time)."""
    todo = {name: (lambda db, s=setup, o=stats: argv(sys.executable, s, o, db, capture))
            for name, (setup, stats) in VARIANTS.items()}
    if before:
        for stats in (False, True):
            todo["before: " + ("--stats-only" if stats else "packets stored")] = \
                (lambda db, o=stats: argv(before, "pass", o, db, capture))
    todo["tcptrace -l -r -n"] = lambda db: ["tcptrace", "-l", "-r", "-n", str(capture)]
    return todo


def measure(todo: dict, capture: Path, rounds: int, work: Path) -> dict[str, list[dict]]:
    runs: dict[str, list[dict]] = {name: [] for name in todo}
    for round_no in range(rounds):
        for name, build in todo.items():
            db = work / "levers.duckdb"
            m = bench.measure(build(db), timeout=3600)
            bench.remove_store(db)
            if m["rc"] != 0:
                raise SystemExit(f"{name} failed ({m['rc']}): {m['stderr'][-800:]}")
            runs[name].append(m)
            bench.log(f"{capture.name} round {round_no + 1}: {name}: {m['seconds']:.2f} s")
    return runs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("captures", nargs="*", help="default: bench/work/bulk.pcap and many.pcap")
    ap.add_argument("--repeat", type=int, default=3, help="rounds, median reported")
    ap.add_argument("--before", metavar="PY", help="the Python of an earlier tcpvar's environment")
    ap.add_argument("--work", default=str(bench.DEFAULT_WORK))
    ap.add_argument("--results", default=str(bench.DEFAULT_RESULTS))
    a = ap.parse_args()
    captures = [Path(c) for c in a.captures] or [bench.DEFAULT_WORK / f"{p}.pcap"
                                                  for p in ("bulk", "many")]
    table = {}
    Path(a.work).mkdir(parents=True, exist_ok=True)
    for capture in captures:
        if not capture.is_file():
            raise SystemExit(f"{capture}: no such capture (bench/make_capture.py records it)")
        bench.warm_cache(capture)
        with tempfile.TemporaryDirectory(prefix="bench-levers-", dir=a.work) as tmp:
            table[capture.name] = measure(commands(capture, a.before), capture, a.repeat,
                                          Path(tmp))
    text = section(table, a.repeat, bench.machine())
    bench.write_results(Path(a.results), "levers", text)
    print(text)
    return 0


def section(table: dict, rounds: int, mach: dict) -> str:
    names = list(next(iter(table.values())))
    lines = ["## levers: tcpvar analyze with one choice changed",
             "",
             f"{mach['nproc']} cores, {mach['cpu']}. Median of {rounds} rounds, each variant a "
             f"new process (`bench/levers.py`); speed = tcptrace's seconds ÷ the variant's.",
             "",
             "| variant | " + " | ".join(f"{c}: s (CPU s, peak MB) | {c}: vs tcptrace"
                                       for c in table) + " |",
             "|---|" + "---:|---:|" * len(table)]
    for name in names:
        cells = []
        for runs in table.values():
            rs = runs[name]
            s = statistics.median(r["seconds"] for r in rs)
            base = statistics.median(r["seconds"] for r in runs["tcptrace -l -r -n"])
            cpu = statistics.median(r["cpu"] for r in rs)
            mb = max(r["maxrss_kb"] for r in rs) / 1024
            cells += [f"{s:.2f} ({cpu:.2f}, {mb:,.0f})", f"{base / s:.2f}×"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n\n"


if __name__ == "__main__":
    sys.exit(main())
