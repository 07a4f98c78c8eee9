"""The run folder (docs/run.md): what one run of `tcpvar run` leaves on
disk, written by capture/runner.py (on the host or in the micro-VM) and read
by ingest/run.py. Its name, its files and its manifest are defined here
only.

  manifest.json            parameters, kernel, sysctls, tools, seed, times, status
  sender.pcap              headers of every TCP packet entering the first router
                           (what the senders sent, and the ACKs that came back);
                           a reverse flow's at its own first router, rr
  bottleneck.pcap          headers of what left the bottleneck queue (a reverse
                           flow's: the reverse bottleneck's; in a parking lot,
                           each flow's last hop's)
  hop<k>.pcap              a parking lot's: what left hop k's queue
  hop<k>-in.pcap           and what entered hop k's router (k > 1; hop 1's is
                           sender.pcap, which holds each flow where it enters
                           its first hop)
  <name>.tcpdump.log       each capture's tcpdump messages and closing counts
  tcp_probe.csv/.json      tcp_probe events of the flows (probe_record.py)
  iperf-<flow>.json        iperf3 client report (sender side), .err its messages
  iperf-<flow>-server.json iperf3 server report (receiver side), .err likewise
  tc-stats.txt/.json       `tc -s` of the bottleneck and delay routers at the end
  progress.jsonl           the live samples shown while it ran
  .stop                    made by the host to end a run in the VM early
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from tcpvar import safe_write
from tcpvar.errors import InputError

from . import checks

MANIFEST = "manifest.json"
CAPTURES = ("sender", "bottleneck")       # the pcaps, by name
TC_STATS_TEXT = "tc-stats.txt"
TC_STATS_JSON = "tc-stats.json"
PROGRESS = "progress.jsonl"
STOP_FILE = ".stop"
REPORT = "report.html"                    # written once the run is stored
FIGURES = "figures"                       # its figures, KIND.png

# what each flow of a manifest needs to be loaded
FLOW_KEYS = ("flow", "role", "cc", "src_addr", "src_port", "dst_addr", "dst_port", "start_s",
             "duration_s", "rtt_ms", "ecn", "direction", "hop", "outcome", "rate_bps",
             "size_bytes")
assert set(FLOW_KEYS) == set(checks.FLOW)     # with their types


def pcap(name: str) -> str:
    return f"{name}.pcap"


def hop_capture(hop: int, arrivals: bool = False) -> str:
    """The name of a parking lot's capture of hop @hop: what left its queue,
    or what entered its router."""
    return f"hop{hop}{'-in' if arrivals else ''}"


def hop_router(hop: int) -> str:
    """The router whose link to the next holds hop @hop's queue: rl, then a
    parking lot's p1, p2 .. (its hop k leads to p<k>)."""
    return "rl" if hop == 1 else f"p{hop - 1}"


def tcpdump_log(name: str) -> str:
    return f"{name}.tcpdump.log"


def iperf_report(flow: int, server: bool = False) -> str:
    return f"iperf-{flow}{'-server' if server else ''}.json"


def latency_report(tool: str) -> str:
    """The latency probe's own output (--latency): irtt's JSON, ping's text."""
    return {"irtt": "latency-irtt.json", "ping": "latency-ping.txt"}[tool]


LATENCY_LOG = "latency.err"
BACKLOG = "backlog.jsonl"                 # the bottleneck's `tc -s` every 100 ms
SHORT_PLAN = "short-plan.json"            # --short: the transfers' arrivals, [t_s, bytes]
SHORT = "short.jsonl"                     # and each transfer's end, a line as it ends
SHORT_LOG = "short.err"


def finite_record(flow: int) -> str:
    """A finite flow's (--size) record: its sender's line, as short.jsonl's."""
    return f"flow-{flow}.jsonl"


def finite_plan(flow: int) -> str:
    return f"flow-{flow}-plan.json"
SHORT_PORT = 34999                        # the short flows' server, below every run's iperf3 ports


def iperf_log(flow: int, server: bool = False) -> str:
    return f"iperf-{flow}{'-server' if server else ''}.err"


def folder_name(mode: str, ccs: list[str], tag: str, number: int) -> str:
    """<time>-<mode>-<variants>-<tag>-r<number>, unique to the run: its number
    in its session (a run's repetition; the k-th run of a study's session)."""
    ccs = list(dict.fromkeys(ccs))
    variants = "-".join(ccs) if len(ccs) <= 3 else f"{len(ccs)}variants"
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{mode}-{variants}-{tag}-r{number}"


def write_manifest(run_dir: Path, manifest: dict) -> None:
    """Atomically: a reader never sees half a manifest (nor a symlink planted
    in the folder gets it)."""
    safe_write.write_text(Path(run_dir) / MANIFEST, json.dumps(manifest, indent=1))


def read_manifest(run_dir: Path) -> dict:
    """The run folder's manifest; InputError (one line) when there is none or
    it is not one tcpvar wrote: every field tcpvar uses is checked for its
    type here (checks.py), so what reads a manifest can trust it."""
    run_dir = Path(run_dir)
    path = run_dir / MANIFEST
    if not run_dir.is_dir():
        raise InputError(f"{run_dir}: " + ("not a folder" if run_dir.exists()
                                            else "no such folder"))
    if not path.exists():
        raise InputError(f"{run_dir}: not a tcpvar run folder (no {MANIFEST})")
    return checks.check_manifest(path, checks.read_json(path))
