#!/usr/bin/env python3
"""Which of the native front end's two threads holds up `tcpvar analyze`:
the scanner, or the main thread loading DuckDB's engine and the store.

    .venv/bin/python bench/critical_path.py bench/work/oneway.pcap
    .venv/bin/python bench/critical_path.py FILE --rounds 9 --packets   # packets stored too

Each round runs `tcpvar analyze [--stats-only] -q --db NEW FILE` under
`perf record -F 10000` (cpu-clock samples, so the times are those of a
sampled run, a tenth or so above a plain one) and reads the samples'
threads and times back with `perf script`. Per round it prints when the
command ended, when the scanner thread (the thread with most samples after
the main one) ran, and the spans of more than 2 ms in which the main thread
took no sample. "Waits" is the span in which the scan ended: the main
thread blocked until the scanner was done (0 ms: the main thread was the
later one; on a capture scanned in a few ms the span can be another wait
that the scan's end falls into). Run it on a quiet host: on a busy one
the main thread is preempted every few ms, and the gaps are the host's.
Needs perf (linux-perf) and the native front end on PATH as `tcpvar`.
"""
from __future__ import annotations

import argparse
import collections
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

GAP_S = 0.002


def samples(data: Path) -> dict[int, list[float]]:
    """Sample times (s, from the first sample) of each thread."""
    out = subprocess.run(["perf", "script", "-i", str(data), "-F", "tid,time"],
                         capture_output=True, text=True, check=True).stdout
    by: dict[int, list[float]] = collections.defaultdict(list)
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2:
            by[int(parts[0])].append(float(parts[1].rstrip(":")))
    t0 = min(t[0] for t in by.values())
    return {tid: [x - t0 for x in t] for tid, t in by.items()}


def one_round(tcpvar: str, capture: Path, stats_only: bool, tmp: Path) -> dict:
    db, data = tmp / "cp.duckdb", tmp / "perf.data"
    for p in (db, tmp / "cp.duckdb.wal"):
        p.unlink(missing_ok=True)
    shutil.rmtree(tmp / "cp.duckdb.packets", ignore_errors=True)
    cmd = [tcpvar, "analyze", *(["--stats-only"] if stats_only else []), "-q", "--db", str(db),
           str(capture)]
    subprocess.run(["perf", "record", "-q", "-F", "10000", "-o", str(data), "--", *cmd],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    by = samples(data)
    main = min(by, key=lambda tid: by[tid][0])
    scan = max((t for tid, t in by.items() if tid != main), key=len, default=[0.0])
    ms = by[main]
    gaps = [(a, b) for a, b in zip(ms, ms[1:]) if b - a > GAP_S]
    # the main thread's wait: the gap it leaves as the scan ends
    wait = next((b - a for a, b in gaps if a <= scan[-1] <= b + GAP_S), 0.0)
    return {"end": ms[-1], "scan_from": scan[0], "scan_to": scan[-1], "wait": wait, "gaps": gaps}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("capture", type=Path)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--packets", action="store_true", help="store the packets (no --stats-only)")
    ap.add_argument("--tcpvar", default="tcpvar",
                    help="the command to run (default: tcpvar on PATH)")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="tcpvar-critical-") as tmp:
        for _ in range(a.rounds):
            r = one_round(a.tcpvar, a.capture, not a.packets, Path(tmp))
            rows.append(r)
            spans = " ".join(f"{x * 1e3:.0f}-{y * 1e3:.0f}" for x, y in r["gaps"])
            print(f"end {r['end'] * 1e3:6.1f} ms | scan {r['scan_from'] * 1e3:5.1f}-"
                  f"{r['scan_to'] * 1e3:6.1f} ms | main thread waits {r['wait'] * 1e3:5.1f} ms"
                  f" | main's gaps > 2 ms: {spans}", flush=True)
    print(f"median: end {statistics.median(r['end'] for r in rows) * 1e3:.1f} ms, scan ends "
          f"{statistics.median(r['scan_to'] for r in rows) * 1e3:.1f} ms, main thread waits "
          f"{statistics.median(r['wait'] for r in rows) * 1e3:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
