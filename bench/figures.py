#!/usr/bin/env python3
"""Time `tcpvar plot` on a large capture, every kind, next to tcptrace's
graphs of the same capture, and write the results to bench/RESULTS.md.

    .venv/bin/python bench/figures.py                      # bench/work/bulk.pcap
    .venv/bin/python bench/figures.py other.pcap --repeat 5

The capture is analysed once into a fresh store (timed too, as the cost a
first figure pays); each figure is then one `tcpvar plot KIND CAPTURE`
process, start-up included, against the analysed store. The peers draw
nothing either: tcptrace -S (time-sequence) and -T (throughput) write
xplot files for every connection, the data a viewer would then draw.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import run as bench  # bench/run.py: measuring, machine facts, RESULTS.md sections

HERE = Path(__file__).resolve().parent
KINDS = ("tsg", "cwnd", "throughput", "rtt", "rto", "fairness", "ngwa", "window")
AIM_S = 3.0


def median_run(args: list[str], repeat: int, cwd: Path | None = None) -> dict:
    runs = []
    for _ in range(repeat):
        r = bench.measure(args if cwd is None else ["env", "-C", str(cwd), *args], timeout=600)
        if r["rc"] != 0:
            raise SystemExit(f"{' '.join(args)} failed ({r['rc']}): {r['stderr'][-500:]}")
        runs.append(r)
    return {"seconds": statistics.median(r["seconds"] for r in runs),
            "maxrss_kb": max(r["maxrss_kb"] or 0 for r in runs)}


def section(capture: Path, facts: dict, analyze: dict, figures: dict, peers: dict,
            mach: dict) -> str:
    slowest = max(figures.values(), key=lambda r: r["seconds"])
    lines = [f"## Figures: {capture.name}", "",
             f"{facts.get('packets', '?')} packets, {facts.get('connections_tcptrace', '?')} "
             f"connections; {mach.get('cpu', '?')}. Median wall time of `tcpvar plot KIND "
             f"{capture.name} -o x.png` (a new process each time, store analysed before), "
             f"peak RSS; the aim is {AIM_S:g} s for any kind.", "",
             f"Analysing it first (`tcpvar analyze -q`): {analyze['seconds']:.2f} s, "
             f"{analyze['maxrss_kb'] / 1024:.0f} MB.", "",
             "| figure | seconds | peak MB | vs tcptrace -S | vs tcptrace -T |",
             "|---|---:|---:|---:|---:|"]
    for kind, r in figures.items():
        lines.append(f"| `{kind}` | {r['seconds']:.2f} | {r['maxrss_kb'] / 1024:.0f} | "
                     f"{peers['-S']['seconds'] / r['seconds']:.2f}× | "
                     f"{peers['-T']['seconds'] / r['seconds']:.2f}× |")
    for flag, r in peers.items():
        lines.append(f"| tcptrace {flag} (all connections, xplot files) | {r['seconds']:.2f} | "
                     f"{r['maxrss_kb'] / 1024:.0f} | | |")
    met = "met" if slowest["seconds"] <= AIM_S else "not met"
    lines += ["", f"Slowest kind {slowest['seconds']:.2f} s: the {AIM_S:g} s aim is {met}. "
              "Ratios above 1× mean tcpvar drew its figure faster than tcptrace wrote its "
              "graphs. Each figure shows the capture's bulk senders as `tcpvar plot` chooses "
              "them by default: `tsg` one, `cwnd` a panel for each of the first 8, the other "
              "kinds all of them in one panel.", ""]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture", nargs="?", default=str(HERE / "work" / "bulk.pcap"))
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure (median)")
    ap.add_argument("--results", default=str(bench.DEFAULT_RESULTS))
    a = ap.parse_args()
    capture = Path(a.capture).resolve()
    if not capture.is_file():
        print(f"figures.py: no capture {capture} (make it with bench/make_capture.py bulk)",
              file=sys.stderr)
        return 2
    tcpvar = bench.find_tcpvar(None)
    with tempfile.TemporaryDirectory(prefix="bench-figures-") as tmp:
        work = Path(tmp)
        db = work / "t.duckdb"
        bench.warm_cache(capture)
        bench.log("analysing", capture)
        analyze = median_run([*tcpvar, "analyze", "-q", "--db", str(db), str(capture)], 1)
        figures = {}
        for kind in KINDS:
            bench.log("plot", kind)
            figures[kind] = median_run([*tcpvar, "plot", kind, str(capture), "-q", "--db",
                                        str(db), "-o", str(work / f"{kind}.png")], a.repeat)
        peers = {flag: median_run(["tcptrace", flag, "-n", str(capture)], a.repeat, cwd=work)
                 for flag in ("-S", "-T")}
        facts = bench.capture_facts(capture)
    text = section(capture, facts, analyze, figures, peers, bench.machine())
    bench.write_results(Path(a.results), f"figures-{capture.stem}", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
