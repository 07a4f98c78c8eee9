"""The eBPF hook's cost and capacity: iperf3 between network namespaces at
native veth speed (no bottleneck), run side by side without a recorder, with
the eBPF hook (hooks/tcp_probe_ext) and with the stock tracepoint through
tracefs, alternating, several times each. Reports throughput medians and
their ratios to the run without a recorder, and the events per second each
recorder kept with the events it lost. Root; Python standard library and
tcpvar.

    sudo python3 bench/probe_bench.py                 # ~2 minutes
    sudo python3 bench/probe_bench.py --seconds 5 --repeat 3 --json bench/work/probe.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tcpvar.capture import probe, traffic
from tcpvar.capture.testbed import Testbed, line

PORT = 5201
MODES = ("none", "bpf", "tracefs")


def one_run(bed: Testbed, receiver: str, mode: str, seconds: float, parallel: int,
            work: Path) -> dict:
    rec = None
    if mode != "none":
        rec = probe.open_probe(work / f"{mode}-{time.monotonic_ns()}", [PORT], prefer=mode)
        rec.start()
    try:
        traffic.iperf_server(bed, "d", PORT)
        client = traffic.iperf_client(bed, "s", receiver, PORT,
                                      ["-t", str(seconds), "-P", str(parallel)])
        doc = traffic.iperf_result(client, seconds + 60)
    finally:
        stats = rec.stop() if rec else None
    bps = doc["end"]["sum_received"]["bits_per_second"]
    res = {"mode": mode, "bps": bps}
    if stats:
        res.update(events=stats.events, lost=stats.lost,
                   events_per_s=stats.events / seconds,
                   ringbuf_full=stats.detail.get("ringbuf_full"),
                   recursion_misses=stats.detail.get("recursion_misses"))
        for f in (rec.csv_path, rec.json_path):
            f.unlink(missing_ok=True)
    return res


def profile(name: str, offload: bool, parallel: int, seconds: float, repeat: int,
            work: Path) -> dict:
    runs = {m: [] for m in MODES}
    with Testbed() as bed:
        _, receiver = line(bed, ["s", "r", "d"])      # sender, router, receiver
        bed.up(offloads=None if offload else False)
        one_run(bed, receiver, "none", 1, parallel, work)           # warm-up
        for _ in range(repeat):
            for mode in MODES:
                runs[mode].append(one_run(bed, receiver, mode, seconds, parallel, work))
    base = statistics.median(r["bps"] for r in runs["none"])
    out = {"profile": name, "offload": offload, "parallel": parallel, "seconds": seconds,
           "repeat": repeat, "none_bps": base}
    for mode in ("bpf", "tracefs"):
        rs = runs[mode]
        med = statistics.median(r["bps"] for r in rs)
        clean = [r["events_per_s"] for r in rs if r["lost"] == 0]
        out[mode] = {"bps": med, "ratio": med / base,
                     "events_per_s": statistics.median(r["events_per_s"] for r in rs),
                     "events_per_s_max_clean": max(clean) if clean else 0,
                     "lost": sum(r["lost"] for r in rs),
                     "lost_runs": sum(1 for r in rs if r["lost"]),
                     "ringbuf_full": sum(r.get("ringbuf_full") or 0 for r in rs),
                     "recursion_misses": sum(r.get("recursion_misses") or 0 for r in rs),
                     "runs": rs}
    out["none_runs"] = runs["none"]
    return out


def table(results: list[dict]) -> str:
    lines = ["| profile | no recorder | eBPF hook | ratio | hook events/s | best events/s with "
             "0 lost | hook lost (runs; ring buffer / recursion) | stock tracefs | ratio "
             "| tracefs events/s | tracefs lost |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        b, t = r["bpf"], r["tracefs"]
        lines.append(
            f"| {r['profile']} | {r['none_bps'] / 1e9:.2f} Gbit/s | {b['bps'] / 1e9:.2f} Gbit/s "
            f"| {b['ratio']:.2f} | {b['events_per_s']:,.0f} | {b['events_per_s_max_clean']:,.0f} "
            f"| {b['lost']} ({b['lost_runs']} of {r['repeat']}; {b['ringbuf_full']} / "
            f"{b['recursion_misses']}) | {t['bps'] / 1e9:.2f} Gbit/s | {t['ratio']:.2f} "
            f"| {t['events_per_s']:,.0f} | {t['lost']:,} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path, help="write the results here as well")
    args = ap.parse_args()
    built = probe.prepare()
    if built.tool is None:
        print(f"probe_bench: the eBPF hook is not available: {built.reason}", file=sys.stderr)
        return 1
    profiles = [("veth, offloads on (native), 1 flow", True, 1),
                ("veth, offloads off, 1 flow", False, 1),
                ("veth, offloads off, 4 flows", False, 4)]
    results = []
    with tempfile.TemporaryDirectory(prefix="tcpvar-probe-bench-") as work:
        for name, offload, parallel in profiles:
            print(f"{name} ...", file=sys.stderr)
            results.append(profile(name, offload, parallel, args.seconds, args.repeat,
                                   Path(work)))
    print(table(results))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
