#!/usr/bin/env python3
"""Record large benchmark captures of real iperf3 traffic between two network namespaces.

    python3 bench/make_capture.py                 # both profiles -> bench/work/{bulk,many}.pcap
    python3 bench/make_capture.py bulk            # only one
    python3 bench/make_capture.py bulk --seconds 20 --flow-rate 60
    python3 bench/make_capture.py many --runs 2000 --parallel 6 --run-bytes 2400K

Profiles
  bulk  one iperf3 client with -P 12 (12 parallel data flows + the control connection)
        for --seconds, each flow paced to --flow-rate Mbit/s; the defaults give
        about 5 million packets.
  many  --runs short iperf3 runs (-n --run-bytes each), --parallel of them at a time
        against as many iperf3 servers; each run is 2 TCP connections (control + data);
        the defaults give about 5 million packets (as many as bulk, so start-up
        weighs the same in both) in ~4,000 connections.

Topology (created and destroyed by this script; nothing leaves it):

    namespace tcpvar-bench-<tag>-client        namespace tcpvar-bench-<tag>-server
    eth0  198.18.0.1/24  ==================  eth0  198.18.0.2/24
    (tcpdump -s 96 here, the senders' side)

<tag> is unique to the run; the testbed of tcpvar (tcpvar.capture.testbed)
builds and removes the namespaces.  Offloads are off on both veths (ethtool -K tso gso gro lro off), so the
capture shows wire-sized segments, as a capture on a real NIC would.

The capture is written as <out>/<profile>.pcap (first to <profile>.pcap.part) with a
sidecar <profile>.json describing it (packets, bytes, tcpdump's drop counters,
iperf3 results) that bench/run.py puts into RESULTS.md.  tcpdump's
"packets dropped by kernel" must be 0: otherwise the script says so loudly and
exits with status 3 (the file is kept, and the drop count is in the sidecar).

Namespaces (and with them the veths) and every process this script started (by
PID) are removed on normal exit, on errors, on Ctrl-C, SIGTERM and SIGHUP.

Runs with tcpvar installed (.venv/bin/python).  Needs root, iproute2, ethtool, tcpdump, iperf3
(capinfos optional, for the packet count check).
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

from tcpvar.capture import traffic
from tcpvar.capture.testbed import Testbed, run_script
from tcpvar.errors import TestbedError

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "work"
PREFIX = "tcpvar-bench"
CLI4, SRV4 = "198.18.0.1", "198.18.0.2"
SNAPLEN = 96

# Defaults, tuned on the 2-core test machine (see README.md):
BULK_FLOWS = 12
BULK_SECONDS = 30          # x ~170 k packets/s  ->  ~5 M packets
BULK_FLOW_RATE = 160       # Mbit/s per flow (iperf3 -b), 12 x 160 = 1.92 Gbit/s
MANY_RUNS = 2000
MANY_PARALLEL = 6
MANY_RUN_BYTES = "2600K"   # ~2.5 k packets per run incl. its control connection
MANY_RUN_RATE = 150        # Mbit/s per run (iperf3 -b)
LOSSY_RATE = 500           # Mbit/s through the rate limit, unpaced flows
LOSSY_QUEUE_KB = 1000      # its queue: about 700 full segments (about 2% of them dropped)
SHORT_RUNS = 500           # x ~2.5 k packets -> ~1.2 M packets, 1,000 connections
ONEWAY_PACKETS = 600_000    # tcptrace slows down with the segments it keeps awaiting an ACK
MILLION = 1_000_000


def log(*a: object) -> None:
    print("[make_capture]", *a, file=sys.stderr, flush=True)


def run(args: list[str], check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run one command given as an argument list (never a shell string)."""
    cp = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    if check and cp.returncode != 0:
        raise RuntimeError(f"command failed ({cp.returncode}): {args}\n{cp.stdout}\n{cp.stderr}")
    return cp


class VethPair:
    """Two namespaces joined by one veth pair (a capture.testbed.Testbed);
    processes stop being started once it closes (the `many` workers)."""

    def __init__(self, work: Path) -> None:
        self.bed = Testbed(PREFIX)
        self.work = work
        self.closing = threading.Event()

    def __enter__(self) -> "VethPair":
        bed = self.bed
        try:
            bed.node("client")
            bed.node("server")
            bed.link("client", "eth0", [CLI4 + "/24"], "server", "eth0", [SRV4 + "/24"])
            log(f"namespaces {bed.ns('client')}, {bed.ns('server')}")
            bed.up(offloads=False)
            for role in ("client", "server"):
                self._check_offloads(role)
        except BaseException:
            bed.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.closing.set()
        self.bed.close()

    def _check_offloads(self, role: str) -> None:
        feats = self.bed.run(role, ["ethtool", "-k", "eth0"])
        for feat in ("tcp-segmentation-offload", "generic-segmentation-offload",
                     "generic-receive-offload", "large-receive-offload"):
            m = re.search(rf"^{feat}: (\S+)", feats, re.M)
            if m and m.group(1) != "off":
                raise RuntimeError(f"{role}: {feat} is still {m.group(1)}")

    # ---- traffic ------------------------------------------------------------
    def iperf_server(self, port: int, once: bool) -> None:
        traffic.iperf_server(self.bed, "server", port, once=once, bind=SRV4)

    def iperf_client(self, port: int, extra: list[str]) -> subprocess.Popen:
        if self.closing.is_set():
            raise RuntimeError("shutting down")
        return traffic.iperf_client(self.bed, "client", SRV4, port, extra)

    def tcpdump(self, path: Path, buffer_kib: int) -> tuple[subprocess.Popen, Path]:
        # no --immediate-mode: at >100 k packets/s the TPACKET_V3 block batching is what keeps up
        log_path = self.work / f"{path.name.split('.')[0]}.tcpdump.log"
        return traffic.start_tcpdump(self.bed, "tcpdump", "client", path,
                                     ["-i", "eth0", "-s", str(SNAPLEN), "-B", str(buffer_kib)],
                                     log_path), log_path

    def stop_tcpdump(self, capture: tuple[subprocess.Popen, Path]) -> dict:
        proc, log_path = capture
        stats = traffic.stop_tcpdump(self.bed, proc, log_path)
        stats["stderr"] = log_path.read_text(errors="replace").strip()
        if stats["captured"] is None or stats["dropped_by_kernel"] is None:
            raise RuntimeError(f"cannot read tcpdump's statistics: {stats['stderr']!r}")
        return stats


def iperf_result(p: subprocess.Popen, timeout: float) -> dict:
    try:
        res = traffic.iperf_result(p, timeout)
    except TestbedError as exc:
        raise RuntimeError(str(exc)) from None
    s = res["end"]["sum_sent"]
    return {"bytes": s["bytes"], "mbit_s": round(s["bits_per_second"] / 1e6, 1),
            "retransmits": s.get("retransmits"), "seconds": round(s["seconds"], 3)}


# ---------------------------------------------------------------------------
# profiles
# ---------------------------------------------------------------------------

def profile_bulk(net: VethPair, out: Path, a: argparse.Namespace) -> dict:
    net.iperf_server(5201, once=True)
    td = net.tcpdump(out, a.buffer_kib)
    t0 = time.time()
    cl = net.iperf_client(5201, ["-P", str(a.flows), "-t", str(a.seconds), "-b", f"{a.flow_rate}M"])
    res = iperf_result(cl, a.seconds + 60)
    elapsed = time.time() - t0
    stats = net.stop_tcpdump(td)
    log(f"bulk: {a.flows} flows x {a.flow_rate} Mbit/s for {a.seconds} s: {res['bytes']/1e9:.2f} GB sent, "
        f"{res['mbit_s']} Mbit/s, {res['retransmits']} retransmits")
    return {"description": f"iperf3 -P {a.flows} -t {a.seconds} -b {a.flow_rate}M "
                           f"({a.flows} data flows + 1 control connection)",
            "expected_connections": a.flows + 1, "traffic_seconds": round(elapsed, 1),
            "iperf3": res, "tcpdump": stats,
            "params": {"flows": a.flows, "seconds": a.seconds, "flow_rate_mbit": a.flow_rate}}


def profile_many(net: VethPair, out: Path, a: argparse.Namespace) -> dict:
    ports = [5201 + i for i in range(a.parallel)]
    for port in ports:
        net.iperf_server(port, once=False)
    td = net.tcpdump(out, a.buffer_kib)
    jobs = list(range(a.runs))
    jobs_lock = threading.Lock()
    results: list[dict] = []
    failures: list[str] = []

    def worker(port: int) -> None:
        while not net.closing.is_set():
            with jobs_lock:
                if not jobs:
                    return
                jobs.pop()
            for attempt in range(3):
                try:
                    cl = net.iperf_client(port, ["-n", a.run_bytes, "-b", f"{a.run_rate}M"])
                    r = iperf_result(cl, 120)
                    with jobs_lock:
                        results.append(r)
                    break
                except Exception as e:  # noqa: BLE001  (server busy, shutting down, ...)
                    if net.closing.is_set():
                        return
                    if attempt == 2:
                        with jobs_lock:
                            failures.append(str(e))
                    time.sleep(0.3)

    t0 = time.time()
    threads = [threading.Thread(target=worker, args=(port,), daemon=True) for port in ports]
    for t in threads:
        t.start()
    last = t0
    for t in threads:
        while t.is_alive():
            t.join(timeout=0.5)    # short joins so Ctrl-C gets through
            if time.time() - last > 10:
                last = time.time()
                log(f"many: {len(results)}/{a.runs} runs done")
    elapsed = time.time() - t0
    stats = net.stop_tcpdump(td)
    if failures:
        log(f"many: {len(failures)} runs failed, first: {failures[0]}")
    total = sum(r["bytes"] for r in results)
    log(f"many: {len(results)} runs of {a.run_bytes} in {elapsed:.1f} s ({a.parallel} at a time), "
        f"{total/1e9:.2f} GB, {sum(r['retransmits'] or 0 for r in results)} retransmits")
    return {"description": f"{len(results)} iperf3 runs -n {a.run_bytes} -b {a.run_rate}M, {a.parallel} at a time "
                           f"(each run: 1 control + 1 data connection)",
            "expected_connections": 2 * len(results), "traffic_seconds": round(elapsed, 1),
            "iperf3": {"runs_ok": len(results), "runs_failed": len(failures), "bytes": total,
                       "retransmits": sum(r["retransmits"] or 0 for r in results)},
            "tcpdump": stats,
            "params": {"runs": a.runs, "parallel": a.parallel, "run_bytes": a.run_bytes,
                       "run_rate_mbit": a.run_rate}}


def profile_lossy(net: VethPair, out: Path, a: argparse.Namespace) -> dict:
    """bulk's flows, unpaced, through a rate limit with a short queue on the
    senders' side: the capture (after the queue, as on the wire) holds the
    retransmissions of every segment the queue dropped."""
    net.bed.run("client", ["tc", "qdisc", "replace", "dev", "eth0", "root", "tbf",
                           "rate", f"{a.lossy_rate}mbit", "burst", "32kb",
                           "limit", f"{a.lossy_queue_kb}kb"])
    net.iperf_server(5201, once=True)
    td = net.tcpdump(out, a.buffer_kib)
    t0 = time.time()
    cl = net.iperf_client(5201, ["-P", str(a.flows), "-t", str(a.seconds)])
    res = iperf_result(cl, a.seconds + 60)
    elapsed = time.time() - t0
    stats = net.stop_tcpdump(td)
    qdisc = net.bed.run("client", ["tc", "-s", "qdisc", "show", "dev", "eth0"])
    m = re.search(r"dropped (\d+)", qdisc)
    drops = int(m.group(1)) if m else None
    log(f"lossy: {a.flows} flows through {a.lossy_rate} Mbit/s, {a.lossy_queue_kb} kB queue for "
        f"{a.seconds} s: {res['mbit_s']} Mbit/s, {res['retransmits']} retransmits, "
        f"{drops} queue drops")
    return {"description": f"iperf3 -P {a.flows} -t {a.seconds} through tbf rate "
                           f"{a.lossy_rate}mbit limit {a.lossy_queue_kb}kb on the senders' side "
                           f"({drops} drops at the queue, {res['retransmits']} retransmits)",
            "expected_connections": a.flows + 1, "traffic_seconds": round(elapsed, 1),
            "iperf3": res, "tcpdump": stats, "queue_drops": drops,
            "params": {"flows": a.flows, "seconds": a.seconds, "rate_mbit": a.lossy_rate,
                       "queue_kb": a.lossy_queue_kb}}


def profile_short(net: VethPair, out: Path, a: argparse.Namespace) -> dict:
    """many's traffic at a quarter of its runs: about a million packets in
    1,000 connections, where the fixed cost of a process still weighs."""
    return profile_many(net, out, argparse.Namespace(**{**vars(a), "runs": a.short_runs}))


PROFILES = {"bulk": profile_bulk, "many": profile_many, "lossy": profile_lossy,
            "short": profile_short}
# made from other captures or written out, without namespaces or root
DERIVED = {"oneway", "million"}


def derive_oneway(out: Path, a: argparse.Namespace) -> dict:
    """The data direction of the bulk capture alone (no ACKs), as a capture
    on one side of an asymmetric route or with a filter on the data has it."""
    bulk = Path(a.out) / "bulk.pcap"
    if not bulk.exists():
        raise RuntimeError(f"{bulk} is missing: make the bulk profile first")
    run(["tcpdump", "-r", str(bulk), "-c", str(a.oneway_packets), "-w", str(out),
         f"src host {CLI4}"], timeout=900)
    return {"description": f"the first {a.oneway_packets:,} packets of bulk.pcap from {CLI4} "
                           f"(the senders' data, no ACKs): tcpdump -r bulk.pcap -c "
                           f"{a.oneway_packets} 'src host {CLI4}'",
            "params": {"from": "bulk.pcap", "filter": f"src host {CLI4}",
                       "packets": a.oneway_packets}}


def _checksum(b: bytes) -> int:
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def derive_million(out: Path, a: argparse.Namespace) -> dict:
    """A million short connections, written out: each a SYN from a client of
    its own to 198.18.0.2:80 and the server's RST (the port is closed), one
    packet every 7 µs, as a scan or a flood answered by resets looks."""
    eth = bytes.fromhex("02005e200002" "02005e100001" "0800")
    us = 1_700_000_000 * 10**6
    with out.open("wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 54, 1))
        for i in range(a.connections):
            client = bytes([10, (i >> 16) & 255, (i >> 8) & 255, i & 255])
            port = 1024 + i % 60000
            for up, flags, seq, ack in ((True, 0x02, 1000, 0), (False, 0x14, 0, 1001)):
                src, dst, sport, dport = (client, bytes([198, 18, 0, 2]), port, 80) if up \
                    else (bytes([198, 18, 0, 2]), client, 80, port)
                ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40, i & 0xFFFF, 0x4000, 64, 6, 0,
                                 src, dst)
                ip = ip[:10] + struct.pack("!H", _checksum(ip)) + ip[12:]
                tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, 5 << 4, flags,
                                  0 if flags & 0x04 else 64240, 0, 0)
                us += 7
                f.write(struct.pack("<IIII", us // 10**6, us % 10**6, 54, 54) + eth + ip + tcp)
    return {"description": f"{a.connections:,} connections written out, each a SYN and the "
                           f"server's RST, 7 µs apart (a scan or a flood answered by resets)",
            "params": {"connections": a.connections}}


def derive(profile: str, a: argparse.Namespace) -> int:
    outdir = Path(a.out)
    outdir.mkdir(parents=True, exist_ok=True)
    final, part = outdir / f"{profile}.pcap", outdir / f"{profile}.pcap.part"
    log(f"writing profile {profile!r} into {final} ...")
    try:
        info = (derive_oneway if profile == "oneway" else derive_million)(part, a)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    os.replace(part, final)
    info.update({"profile": profile, "file": final.name, "size_bytes": final.stat().st_size,
                 "packets": capinfos_packets(final), "snaplen": 54 if profile == "million" else SNAPLEN,
                 "created": dt.datetime.now().astimezone().isoformat(timespec="seconds")})
    (outdir / f"{profile}.json").write_text(json.dumps(info, indent=2) + "\n")
    print(f"{profile}: {final}  {info['packets'] or 0:,} packets  {info['size_bytes']/1e6:,.1f} MB",
          flush=True)
    return 0


def capinfos_packets(path: Path) -> int | None:
    if not shutil.which("capinfos"):
        return None
    cp = run(["capinfos", "-M", "-c", str(path)], check=False, timeout=600)
    m = re.search(r"Number of packets:\s+(\d+)", cp.stdout)
    return int(m.group(1)) if m else None


def make(profile: str, a: argparse.Namespace) -> int:
    outdir = Path(a.out)
    outdir.mkdir(parents=True, exist_ok=True)
    final = outdir / f"{profile}.pcap"
    part = outdir / f"{profile}.pcap.part"
    part.unlink(missing_ok=True)
    log(f"capturing profile {profile!r} into {final} ...")
    try:
        with VethPair(outdir) as net:
            info = PROFILES[profile](net, part, a)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    os.replace(part, final)
    st = info["tcpdump"]
    info.update({"profile": profile, "file": final.name, "size_bytes": final.stat().st_size,
                 "packets": st["captured"], "snaplen": SNAPLEN,
                 "created": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
                 "kernel": os.uname().release})
    cnt = capinfos_packets(final)
    if cnt is not None:
        info["packets_capinfos"] = cnt
        if cnt != st["captured"]:
            log(f"warning: capinfos counts {cnt} packets, tcpdump said {st['captured']} captured")
    (outdir / f"{profile}.json").write_text(json.dumps(info, indent=2) + "\n")
    drops = st["dropped_by_kernel"] or 0
    print(f"{profile}: {final}  {info['packets']:,} packets  {info['size_bytes']/1e6:,.1f} MB  "
          f"({info['size_bytes']/max(info['packets'], 1):.0f} B/packet)  "
          f"dropped by kernel: {drops}"
          + (f", by interface: {st['dropped_by_interface']}" if st["dropped_by_interface"] else ""),
          flush=True)
    if drops:
        log(f"WARNING: tcpdump lost {drops} packets ({drops / max(st['received_by_filter'] or 1, 1):.2%}); "
            f"the capture is incomplete. Lower the rate (--flow-rate / --run-rate) or raise --buffer-kib.")
        return 3
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("profiles", nargs="*", metavar="PROFILE", help="bulk and/or many (default: both)")
    ap.add_argument("--out", default=str(DEFAULT_OUT), help="work folder (default: bench/work)")
    ap.add_argument("--buffer-kib", type=int, default=262144, help="tcpdump -B (default: 262144 = 256 MiB)")
    g = ap.add_argument_group("bulk")
    g.add_argument("--flows", type=int, default=BULK_FLOWS, help=f"iperf3 -P (default {BULK_FLOWS})")
    g.add_argument("--seconds", type=int, default=BULK_SECONDS, help=f"iperf3 -t (default {BULK_SECONDS})")
    g.add_argument("--flow-rate", type=int, default=BULK_FLOW_RATE,
                   help=f"Mbit/s per flow, iperf3 -b (default {BULK_FLOW_RATE})")
    g = ap.add_argument_group("many")
    g.add_argument("--runs", type=int, default=MANY_RUNS, help=f"iperf3 runs (default {MANY_RUNS})")
    g.add_argument("--parallel", type=int, default=MANY_PARALLEL,
                   help=f"runs at a time (default {MANY_PARALLEL})")
    g.add_argument("--run-bytes", default=MANY_RUN_BYTES, help=f"iperf3 -n per run (default {MANY_RUN_BYTES})")
    g.add_argument("--run-rate", type=int, default=MANY_RUN_RATE,
                   help=f"Mbit/s per run, iperf3 -b (default {MANY_RUN_RATE})")
    g = ap.add_argument_group("lossy (also --flows, --seconds)")
    g.add_argument("--lossy-rate", type=int, default=LOSSY_RATE,
                   help=f"Mbit/s of the rate limit (default {LOSSY_RATE})")
    g.add_argument("--lossy-queue-kb", type=int, default=LOSSY_QUEUE_KB,
                   help=f"its queue in kB (default {LOSSY_QUEUE_KB})")
    g = ap.add_argument_group("short (also the many options)")
    g.add_argument("--short-runs", type=int, default=SHORT_RUNS,
                   help=f"iperf3 runs (default {SHORT_RUNS})")
    g = ap.add_argument_group("oneway")
    g.add_argument("--oneway-packets", type=int, default=ONEWAY_PACKETS,
                   help=f"packets taken from bulk.pcap (default {ONEWAY_PACKETS:,})")
    g = ap.add_argument_group("million")
    g.add_argument("--connections", type=int, default=MILLION,
                   help=f"connections written (default {MILLION:,})")
    a = ap.parse_args()
    profiles = a.profiles or ["bulk", "many"]
    for p in profiles:
        if p not in PROFILES and p not in DERIVED:
            ap.error(f"unknown profile {p!r} (choose from {', '.join([*PROFILES, *DERIVED])})")
    recorded = [p for p in profiles if p in PROFILES]
    if recorded and os.geteuid() != 0:
        print("must run as root (network namespaces, tcpdump)", file=sys.stderr)
        return 2
    for tool in ("ip", "ethtool", "tcpdump", "iperf3", "ss") if recorded else ("tcpdump",):
        if not shutil.which(tool):
            print(f"missing tool: {tool}", file=sys.stderr)
            return 2

    rc = 0
    for p in profiles:
        rc = max(rc, make(p, a) if p in PROFILES else derive(p, a))
    return rc


if __name__ == "__main__":
    run_script(main)
