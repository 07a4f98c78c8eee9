#!/usr/bin/env python3
"""What the testbed of `tcpvar run` sustains: the netns backend on the host
kernel and the vm backend (micro-VM) at 100 ms RTT, with the bottleneck set
far above what either can carry, so the figure is the path's own ceiling;
the VM's boot time; and the tcp_probe events recorded and lost at those rates.
Writes the "Testbed" section of RESULTS.md. Needs root.

    sudo python3 bench/testbed.py [--duration S] [--results FILE]
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BEGIN, END = "<!-- testbed:begin -->", "<!-- testbed:end -->"

CASES = [  # label, tcpvar run arguments
    ("netns, host kernel, no delay, 1 flow", ["--backend", "netns", "--rtt", "0",
                                             "--bw", "20gbit", "--buffer", "1000"]),
    ("netns, host kernel, no delay, 4 flows", ["--backend", "netns", "--rtt", "0",
                                              "--bw", "20gbit", "--buffer", "1000",
                                              "--flows", "4"]),
    ("vm (TCG), 100 ms RTT, 1 flow", ["--backend", "vm", "--rtt", "100", "--bw", "1gbit",
                                      "--buffer", "bdp"]),
    ("vm (TCG), 100 ms RTT, bottleneck 20 Mbit/s", ["--backend", "vm", "--rtt", "100",
                                                    "--bw", "20mbit", "--buffer", "bdp"]),
]


def run_case(args: list[str], duration: float, work: Path) -> dict:
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "tcpvar.cli", "run", "--json", "--cc", "cubic",
                           "--duration", str(duration), "--out", str(work / "runs"),
                           "--db", str(work / "bench.duckdb"), *args],
                          capture_output=True, text=True)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1]}
    (run,) = json.loads(proc.stdout)["runs"]
    times = {m.group(2): float(m.group(1))
             for m in re.finditer(r"^\s*([0-9.]+) s\s+(.+)$", proc.stderr, re.M)}
    boot = next((t for phase, t in times.items() if phase.startswith("building the dumbbell")),
                None)
    booting = next((t for phase, t in times.items() if phase.startswith("booting")), None)
    total = sum(f["throughput_bps"]["pcap"] or 0 for f in run["flows"])
    return {"throughput_bps": total,
            "iperf3_bps": sum(f["throughput_bps"]["iperf3"] or 0 for f in run["flows"]),
            "rtt_min_ms": min(f["rtt_min_ms"] or 0 for f in run["flows"]),
            "boot_s": boot - booting if boot is not None and booting is not None else None,
            "probe": run["probe_source"], "events": run["probe_events"],
            "lost": run["probe_lost"], "events_per_s": (run["probe_events"] or 0) / duration,
            "wall_s": wall}


def table(results: list[tuple[str, dict]], duration: float) -> str:
    host = subprocess.run(["uname", "-r"], capture_output=True, text=True).stdout.strip()
    lines = [f"`sudo python3 bench/testbed.py` — CUBIC, {duration:g} s runs, "
             f"{time.strftime('%Y-%m-%d')}, host kernel {host}, 2 cores.",
             "",
             "| case | throughput (pcap) | iperf3 | min RTT | VM boot | tcp_probe | events "
             "| lost | events/s | wall |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for label, r in results:
        if "error" in r:
            lines.append(f"| {label} | failed: {r['error']} |||||||||")
            continue
        boot = f"{r['boot_s']:.1f} s" if r["boot_s"] is not None else "—"
        lines.append(f"| {label} | {r['throughput_bps'] / 1e6:.1f} Mbit/s | "
                     f"{r['iperf3_bps'] / 1e6:.1f} Mbit/s | {r['rtt_min_ms']:.1f} ms | {boot} | "
                     f"{r['probe']} | {r['events']} | {r['lost']} | {r['events_per_s']:.0f} | "
                     f"{r['wall_s']:.0f} s |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=20)
    ap.add_argument("--results", type=Path, default=HERE / "RESULTS.md")
    opts = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="tcpvar-testbed-") as tmp:
        for label, args in CASES:
            print(f"{label} ...", file=sys.stderr, flush=True)
            results.append((label, run_case(args, opts.duration, Path(tmp))))
            print(f"  {results[-1][1]}", file=sys.stderr, flush=True)
    section = f"{BEGIN}\n{table(results, opts.duration)}\n{END}"
    text = opts.results.read_text() if opts.results.exists() else ""
    if BEGIN in text:
        text = text[:text.index(BEGIN)] + section + text[text.index(END) + len(END):]
    else:
        text += f"\n## Testbed (`tcpvar run`)\n\n{section}\n"
    opts.results.write_text(text)
    print(table(results, opts.duration))
    return 1 if any("error" in r for _, r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
