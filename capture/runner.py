"""One run on the kernel this process runs on: build the dumbbell,
start the iperf3 flows on schedule, capture, and write every artefact into
the run folder (tcpvar.artefacts.run_folder). The same code runs on the
host (netns backend) and inside the micro-VM (vm backend).
"""
from __future__ import annotations

import contextlib
import json
import os
import platform
import random
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from tcpvar import __version__
from tcpvar.artefacts import run_folder as layout
from tcpvar.errors import TcpvarError, TestbedError
from tcpvar.progress import Progress, Reporter, ignore

from . import clock as clocks
from . import nsctl, shortflows, traffic
from .backlog import BacklogSampler
from .cpu import CpuMeter
from .kernels import loaded_variants
from .netns import TESTBED_TOOLS, need_root, need_tools, run
from .params import MTU, Flow, RunParams
from .probe.recorder import port_runs
from .testbed import OFFLOADS
from .topology import Dumbbell, bottleneck_queue

REVERSE = "-reverse"          # a capture's part taken at rr, of the reverse flows
SNAPLEN = 128                 # Ethernet/SLL2 + IPv4 with options + TCP with options
TCPDUMP_BUFFER_KIB = 16384
RECORDED_SYSCTLS = (
    "net.ipv4.tcp_congestion_control", "net.ipv4.tcp_available_congestion_control",
    "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.ipv4.tcp_sack",
    "net.ipv4.tcp_timestamps", "net.ipv4.tcp_window_scaling", "net.ipv4.tcp_ecn",
    "net.ipv4.tcp_no_metrics_save", "net.ipv4.tcp_frto", "net.ipv4.tcp_early_retrans",
    "net.ipv4.tcp_recovery", "net.ipv4.tcp_slow_start_after_idle", "net.core.default_qdisc",
    # the patched kernel's (none on other kernels)
    "net.ipv4.tcp_ngwa", "net.ipv4.tcp_ngwa_cwnd", "net.ipv4.tcp_ngwa_smooth",
    "net.ipv4.tcp_ngwa_alpha", "net.ipv4.tcp_ngwa_hold_ms", "net.ipv4.tcp_ngwa_option",
    "net.ipv4.tcp_wbrto", "net.ipv4.tcp_wbrto_scale", "net.ipv4.tcp_wbrto_unit_ms",
    "net.ipv4.tcp_wbrto_awnd_gain", "net.ipv4.tcp_wbrto_thresholds",
    "net.ipv4.tcp_wbrto_cutoffs", "net.ipv4.tcp_wbrto_weights",
)
SAMPLED_PER_S = 4             # flows whose `ss -ti` the live display reads each second
SETTLE_S = 1.0                # time for the last ACKs to come back before captures stop
CAPTURE_STOP_S = 120.0        # for the captures to write out their last packets and end
# while a run stops (the guest saving a tcp_probe trace and captures of tens
# of MB through 9p under TCG can take minutes), the phase is reported again
# this often, so that the host knows the guest is alive (vm.SILENCE_S)
STOPPING_REPORT_S = 10.0
# iperf3 times its test from its connection, so a client whose SYNs were
# lost runs late, and one that never connects retries for two minutes. A
# client still running this long (plus the round trips of its set-up and
# results exchange) after its flow's duration, counted from when it opened
# its first socket, is ended with SIGINT, on which iperf3 reports what it
# has: its flow is `cut` (unless its test had run its whole duration), and
# one that never connected carries nothing. Neither fails the run
# (outcome()). Counted from the socket, not from the start of the
# process: a busy host is slow to start one (in the micro-VM the program
# is read from the host's share, and the guest's clock skips ahead while
# it waits), which must not decide a flow's outcome. The grace covers
# the SYNs a start's burst loses (a 64-flow run's slowest client began its
# test 5.4 s after its socket: 1 + 2 + 4 s of RTOs lost on its two
# connections are 7 s) and a results exchange queued behind a full
# bottleneck; a client interrupted in that exchange has no receiver figures.
END_GRACE_S = 15.0
END_GRACE_RTTS = 10
LATENCY_GRACE_S = 5.0         # the latency probe, timed by itself, past the flows' end
STARTUP_S = 120.0             # a client that never opens a socket: its deadline's start
KILL_AFTER_S = 10.0           # a client that ignores SIGINT gets SIGKILL this much later
STOP_LOOK_S = 1.0             # how often the flows' loop looks for the host's stop file
# a run's artefacts go to the micro-VM's memory while its flows run when
# they fit there (2 GB, shared with the flows' socket buffers): about this
# many bytes per full-size packet the path could carry (two capture records
# of the packet and of its ACK, a tcp_probe line), at most this many bytes
RECORD_BYTES = 300
WORKSPACE_BYTES = 768 << 20


class Interrupted(TcpvarError):
    """The run was asked to stop early (Ctrl-C or the stop file)."""


@dataclass
class FlowEndpoints:
    flow: Flow
    src: str
    sport: int
    dst: str
    dport: int

    @property
    def client(self) -> str:
        """The node of its sender, the iperf3 client (a reverse flow's is d<i>)."""
        return f"{'d' if self.flow.reverse else 's'}{self.flow.flow}"

    @property
    def server(self) -> str:
        return f"{'s' if self.flow.reverse else 'd'}{self.flow.flow}"


def endpoints(flow: Flow, base: int, span: int) -> FlowEndpoints:
    """Flow @flow's addresses and ports: the client's port base+span+i, the
    server's base+i, unique to the flow in either role."""
    i = flow.flow
    client, server = Dumbbell.sender_addr(i), Dumbbell.receiver_addr(i)
    if flow.reverse:
        client, server = server, client
    return FlowEndpoints(flow, client, base + span + i, server, base + i)


def port_span(flows: int) -> int:
    """How far a run's client ports lie above its servers' (base+i): 50
    up to 49 flows, as before runs had more, else 300."""
    return 50 if flows < 50 else 300


def port_base(seed: int, tag: str, flows: int) -> int:
    """Ports unique to the run (tests may run beside each other and the
    probe filter selects by port): its servers' and clients' side by side
    (the probe's filter takes runs of ports as ranges)."""
    return 20000 + random.Random(f"{seed}-{tag}").randrange(0, 20000, 2 * port_span(flows))


def host_sysctls(params: RunParams) -> dict[str, str]:
    """Fresh hosts that remember nothing between runs, and socket buffers
    large enough that the window never caps the flow below the path."""
    queue = params.buffer.bytes or (params.buffer.packets or 0) * MTU
    top = int(max(6 << 20, 4 * (params.peak_bps * max(params.max_rtt_ms, 1) / 8000 + queue)))
    return {"net.ipv4.tcp_no_metrics_save": "1",
            "net.ipv4.tcp_rmem": f"4096 131072 {top}",
            "net.ipv4.tcp_wmem": f"4096 16384 {top}",
            **params.mechanism_sysctls()}


class Run:
    """One run: `execute()` returns the manifest it wrote."""

    def __init__(self, params: RunParams, out_dir: Path, tag: str, repetition: int = 1,
                 backend: str = "netns", progress=None, study: dict | None = None,
                 clock: dict | None = None, tools: dict | None = None):
        self.params = params
        self.tools = tools              # the tools' versions, when the host asked them
        # the host's own clock (netns), else what the micro-VM runs on
        self.clock = dict(clock) if clock else {**clocks.describe("real"), "dilation": 1.0}
        self.study = study              # a study's run: its name, cell, index of n
        self.dir = Path(out_dir)
        # where the artefacts are written while the flows run (_workspace)
        self.work = self.dir
        self.tag = tag
        self.repetition = repetition
        self.backend = backend
        self.progress: Reporter = progress or ignore
        self.net = Dumbbell(tag, params.flows, params.hops,
                            {f.flow: f.hop for f in params.flow_plan() if f.hop})
        self.procs = self.net.procs
        base = port_base(params.seed + repetition, tag, params.flows)
        self.flows = [endpoints(f, base, port_span(params.flows)) for f in params.flow_plan()]
        self.manifest: dict = {}
        self.recorder = None
        self.captures: list[str] = []       # the tcpdumps started, by capture name
        self.softnet0: int | None = None

    # -- the whole run -----------------------------------------------------
    def execute(self) -> dict:
        need_root()
        need_tools(*TESTBED_TOOLS,
                   *(["mergecap"] if self.params.reverse or self.params.hops > 1 else []),
                   *([self.params.latency] if self.params.latency else []))
        load_variants(self.params.needed_ccs())
        check_mechanisms(self.params)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.work = self._workspace()
        self.clock["workspace"] = "run folder" if self.work == self.dir else "guest memory"
        self.manifest = self._manifest_head()
        self._write_manifest()
        status, error = "complete", None
        try:
            self._setup()
            self._flows()
            time.sleep(SETTLE_S)
        except (KeyboardInterrupt, Interrupted) as exc:
            status, error = "interrupted", str(exc) or "interrupted by the user"
        except TcpvarError as exc:
            status, error = "failed", str(exc)
        except Exception as exc:
            status, error = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            try:
                self._teardown()
                self._merge_captures()
            except TestbedError as exc:     # what was captured stays
                if status == "complete":
                    status, error = "failed", str(exc)
            finally:
                self._gather()
            self.manifest.update(status=status, error=error, ended_ns=time.time_ns())
            self._write_manifest()
        return self.manifest

    def _setup(self) -> None:
        p = self.params
        if self.backend == "vm":
            _widen_backlog()
        self._phase("building the " + ("dumbbell" if p.hops == 1 else "parking lot"))
        self.net.create(host_sysctls(p), self.progress, own_sysctls={
            fe.client: {"net.ipv4.tcp_ecn": "1"} for fe in self.flows if fe.flow.ecn})
        bdp_pkts = p.bw_bps * p.mean_rtt_ms / 8000 / MTU
        netem_limit = int(max(1000, 4 * p.fastest_bps * p.max_rtt_ms / 8000 / MTU + 1000))
        self.net.shape(p.shaper, p.bw_bps, bottleneck_queue(p), p.rtt_ms, p.loss_pct,
                       netem_limit, jitter_ms=p.jitter_ms)
        if p.reverse_bottleneck:
            self.net.shape_reverse(p.shaper, p.reverse_bps,
                                   bottleneck_queue(p, p.reverse_bps))
        # a cross flow passes no shared delay: its whole RTT is its own
        self.net.delay_flows({fe.flow.flow: fe.flow.rtt_ms - (0 if fe.flow.hop else p.rtt_ms)
                              for fe in self.flows},
                             netem_limit,
                             frozenset(fe.flow.flow for fe in self.flows if fe.flow.reverse))
        self.manifest["topology"] = {
            "namespaces": list(self.net.namespaces), "bdp_packets": round(bdp_pkts, 1),
            "netem_limit": netem_limit, "offloads_off": list(OFFLOADS),
            "mtu": MTU, "netdev_max_backlog": int(BACKLOG_SYSCTL.read_text())}
        self.manifest["sysctls"] = self._sysctls()
        self.softnet0 = softnet_dropped()
        self._phase("starting captures")
        for fe in self.flows:
            f = fe.flow.flow
            if fe.flow.size:
                traffic.short_server(self.net, fe.server, fe.dst, fe.dport,
                                     self.work / layout.iperf_log(f, server=True),
                                     name=f"server{f}")
                continue
            traffic.iperf_server(self.net, fe.server, fe.dport, name=f"server{f}",
                                 report=self.work / layout.iperf_report(f, server=True),
                                 log=self.work / layout.iperf_log(f, server=True))
        if p.latency == "irtt":
            first = self.flows[0]
            traffic.latency_server(self.net, first.server, first.dst,
                                   self.work / layout.LATENCY_LOG)
        if p.short:
            traffic.short_server(self.net, "d1", Dumbbell.receiver_addr(1), layout.SHORT_PORT,
                                 self.work / layout.SHORT_LOG)
        self._start_captures()
        self._start_probe()

    def _start_captures(self) -> None:
        """sender.pcap at rl, what enters it; bottleneck.pcap on rl's link
        to rd, what leaves the queue. With reverse flows, parts of both are
        taken at rr and merged into them at the end (_merge_captures): the
        reverse flows' sender side (what enters rr of them; rl's sender
        capture leaves them out, as it would see them a second time), and
        what leaves the reverse bottleneck (every packet passes one of the
        two bottlenecks, once). Each flow is then seen where its data enter
        and leave its bottleneck, as a forward flow is. A parking lot's hop
        k has captures of its own, what leaves its queue (hop<k>.pcap) and,
        beyond hop 1 (whose is sender.pcap), what enters its router
        (hop<k>-in.pcap); sender.pcap and bottleneck.pcap are cut from them
        at the end (_parking_lot_captures)."""
        theirs = _port_filter(fe.dport for fe in self.flows if fe.flow.reverse)
        plan = [("sender", "rl", ["-i", "any", "-Q", "in"], f"not ({theirs})" if theirs else None)]
        if self.params.hops > 1:
            for hop in range(1, self.params.hops + 1):
                router = layout.hop_router(hop)
                plan.append((layout.hop_capture(hop), router, ["-i", "right", "-Q", "out"], None))
                if hop > 1:
                    plan.append((layout.hop_capture(hop, arrivals=True), router,
                                 ["-i", "any", "-Q", "in"], None))
        else:
            plan.append(("bottleneck", "rl", ["-i", "right", "-Q", "out"], None))
        if theirs:
            plan += [("sender" + REVERSE, "rr", ["-i", "any", "-Q", "in"], f"({theirs})"),
                     ("bottleneck" + REVERSE, "rr", ["-i", "left", "-Q", "out"], None)]
        for name, role, where, only in plan:
            traffic.start_tcpdump(self.net, name, role, self.work / layout.pcap(name),
                                  [*where, "-n", "-s", str(SNAPLEN), "-B",
                                   str(TCPDUMP_BUFFER_KIB), f"tcp and {only}" if only else "tcp"],
                                  log=self.work / layout.tcpdump_log(name))
        self.captures = [name for name, *_ in plan]

    def _merge_captures(self) -> None:
        """Each capture's reverse part into it, in time order (mergecap);
        a part that cannot be merged stays beside it, named in the
        manifest's error."""
        if self.params.hops > 1:
            self._parking_lot_captures()
        for name in layout.CAPTURES:
            part = self.work / layout.pcap(name + REVERSE)
            if part.exists():
                _merge(self.work / layout.pcap(name), [self.work / layout.pcap(name),
                                                      part])
                part.unlink()

    def _parking_lot_captures(self) -> None:
        """A parking lot's sender.pcap and bottleneck.pcap, each flow once in
        each, where its data enter its first hop and leave its last: the
        cross flows of hop k from hop<k>-in.pcap (beyond hop 1) and
        hop<k>.pcap, the flows through every hop from sender.pcap and the
        last hop's capture. The hops' own captures stay."""
        hops = self.params.hops
        senders, leaving = [self.work / layout.pcap("sender")], []
        for hop in range(1, hops + 1):
            ports = _port_filter(fe.dport for fe in self.flows if fe.flow.hop == hop)
            departed = self.work / layout.pcap(layout.hop_capture(hop))
            if hop == hops:
                leaving.append(departed)
            elif ports:
                leaving.append(_cut(departed, ports))
            if hop > 1 and ports:
                senders.append(_cut(self.work / layout.pcap(layout.hop_capture(hop, True)), ports))
        for name, parts in (("sender", senders), ("bottleneck", leaving)):
            _merge(self.work / layout.pcap(name), parts)
            for part in parts:
                if part.name.startswith("."):
                    part.unlink()

    def _start_probe(self) -> None:
        from . import probe

        ports = [fe.dport for fe in self.flows]
        self.recorder = probe.open_probe(self.work, ports, own_tracing=self.backend == "vm")
        self.recorder.start()
        self.manifest["probe"] = {"source": self.recorder.source,
                                  "reason": getattr(self.recorder, "reason", None)}

    # -- the flows ---------------------------------------------------------
    def _flows(self) -> None:
        p = self.params
        self._phase("running")
        self.manifest["started_ns"] = t0_ns = time.time_ns()
        self._write_manifest()
        t0 = time.monotonic()
        pending = list(self.flows)
        clients: dict[int, subprocess.Popen] = {}
        plan = {fe.flow.flow: fe.flow for fe in self.flows}
        deadlines: dict[int, float] = {}    # flow: when its client must have ended
        waiting: set[int] = set()           # flows whose client has no socket yet
        ended: dict[int, float] = {}    # flow: when its client was sent SIGINT
        steps = list(p.schedule[1:])
        next_look = 0.0
        first = None        # when the first flow's client began connecting
        stop = threading.Event()
        cpu = CpuMeter()
        sampler = threading.Thread(target=self._sampler, args=(t0, clients, stop, cpu),
                                   daemon=True)
        sampler.start()
        backlog = None
        try:
            latency = self._start_latency()
            short = self._start_short(t0_ns)
            backlog = BacklogSampler(self.net, "rl", "right", self.work / layout.BACKLOG)
            while pending or any(c.poll() is None for c in clients.values()):
                now = time.monotonic() - t0
                while pending and _due(pending[0].flow, first, now):
                    fe = pending.pop(0)
                    clients[fe.flow.flow] = self._start_client(fe)
                    deadlines[fe.flow.flow] = _deadline(fe.flow, now + STARTUP_S)
                    waiting.add(fe.flow.flow)
                for f in [f for f in waiting if clients[f].poll() is not None
                          or _has_socket(clients[f].pid)]:
                    deadlines[f] = _deadline(plan[f], now)
                    waiting.discard(f)
                    if f == self.flows[0].flow.flow:
                        first = now
                while steps and steps[0][0] <= now:
                    at, rate = steps.pop(0)
                    self.net.set_rate(p.shaper, rate)
                    self.manifest.setdefault("schedule_applied", []).append(
                        {"t_s": round(now, 3), "bw_bps": rate})
                if now >= next_look:        # the run folder may be on the host's share
                    next_look = now + STOP_LOOK_S
                    if (self.dir / layout.STOP_FILE).exists():
                        raise Interrupted("stopped from the host")
                for f, client in clients.items():
                    if client.poll() is None and now > deadlines[f]:
                        if f not in ended:
                            ended[f] = now
                            client.send_signal(signal.SIGINT)
                        elif now > ended[f] + KILL_AFTER_S:
                            client.kill()
                time.sleep(0.05)
            if latency is not None:
                self._end_latency(latency)
            if short is not None:
                self._end_short(short)
        finally:
            if backlog is not None:
                backlog.stop()
            stop.set()
            sampler.join()
            self.manifest["cpu"] = cpu.summary()
            self.manifest["flows_ended_ns"] = time.time_ns()
            self.manifest["t0_ns"] = t0_ns
        for entry in self.manifest["flows"]:
            f = entry["flow"]
            entry["outcome"] = finite_outcome(self.work / layout.finite_record(f)) \
                if plan[f].size else outcome(self.work / layout.iperf_report(f),
                                             clients[f].returncode, f in ended)
            if entry["outcome"] == "failed":
                err = (self.work / layout.iperf_log(f)).read_text(errors="replace").strip()
                raise TestbedError(f"flow {f} failed: {err[:200] or 'see its JSON'}")

    def _start_latency(self) -> subprocess.Popen | None:
        """The latency probe (--latency) from the first flow's sender to its
        receiver, for the run's duration."""
        p = self.params
        if p.latency is None:
            return None
        first = self.flows[0]
        return traffic.latency_client(self.net, first.client, p.latency, first.dst,
                                      p.latency_interval_ms, p.duration_s,
                                      self.work / layout.latency_report(p.latency),
                                      self.work / layout.LATENCY_LOG)

    def _end_latency(self, proc: subprocess.Popen) -> None:
        """The latency probe ends by itself with the run; if not (a host
        slow to start it), SIGINT, on which irtt and ping write what they
        have."""
        try:
            proc.wait(timeout=LATENCY_GRACE_S)
        except subprocess.TimeoutExpired:
            self.procs.stop(proc, sig=signal.SIGINT, grace_s=KILL_AFTER_S)
        self.manifest["latency"] = {"tool": self.params.latency, "exit": proc.returncode}

    def _start_short(self, t0_ns: int) -> tuple[subprocess.Popen, float, int] | None:
        """The short flows' client (--short) in s1, its arrivals counted from
        the flows' start @t0_ns; with the time it must have ended by and its
        transfers."""
        p = self.params
        if not p.short:
            return None
        first = p.flow_plan()[0]
        arrivals = shortflows.plan(p.short, p.duration_s, p.seed + self.repetition)
        (self.work / layout.SHORT_PLAN).write_text(json.dumps(arrivals))
        deadline_s = p.duration_s + END_GRACE_S + END_GRACE_RTTS * first.rtt_ms / 1e3
        proc = traffic.short_client(self.net, "s1", Dumbbell.receiver_addr(1),
                                    layout.SHORT_PORT, first.cc, t0_ns,
                                    t0_ns + int(deadline_s * 1e9),
                                    self.work / layout.SHORT_PLAN, self.work / layout.SHORT,
                                    self.work / layout.SHORT_LOG)
        return proc, time.monotonic() + deadline_s, len(arrivals)

    def _end_short(self, short: tuple[subprocess.Popen, float, int]) -> None:
        """The short flows' client ends by itself once every transfer has
        ended, or at its deadline, when it cuts those still running."""
        proc, deadline, transfers = short
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()) + KILL_AFTER_S)
        except subprocess.TimeoutExpired:
            self.procs.stop(proc, sig=signal.SIGINT, grace_s=KILL_AFTER_S)
        self.manifest["short"] = {"transfers": transfers, "exit": proc.returncode}

    def _start_client(self, fe: FlowEndpoints) -> subprocess.Popen:
        f, seconds = fe.flow.flow, max(1, round(fe.flow.duration_s))
        if fe.flow.size:        # a finite flow: one transfer of tcpvar's own sender, now
            plan = self.work / layout.finite_plan(f)
            plan.write_text(json.dumps([[0, fe.flow.size]]))
            now = time.time_ns()
            return traffic.short_client(
                self.net, fe.client, fe.dst, fe.dport, fe.flow.cc, now,
                now + int(_deadline(fe.flow, STARTUP_S) * 1e9), plan,
                self.work / layout.finite_record(f), self.work / layout.iperf_log(f),
                sport=fe.sport, name=f"client{f}")
        return traffic.iperf_client(
            self.net, fe.client, fe.dst, fe.dport,
            ["--cport", str(fe.sport), "-t", str(seconds), "-i", "1", "-C", fe.flow.cc,
             *(["-b", f"{fe.flow.rate_bps:.0f}"] if fe.flow.rate_bps else [])],
            report=self.work / layout.iperf_report(f), log=self.work / layout.iperf_log(f),
            name=f"client{f}")

    def _sampler(self, t0: float, clients: dict, stop: threading.Event, cpu: CpuMeter) -> None:
        """Once a second, a sample for the live display and progress.jsonl;
        in its own thread, as `ss` in N namespaces can take longer than the
        flows' start schedule may wait."""
        last: dict[int, tuple[float, int]] = {}     # flow: (time, bytes acked)
        shown: dict[int, dict] = {}                 # flow: its last sample's values
        tick = 0
        with open(self.work / layout.PROGRESS, "w") as samples:
            while not stop.wait(1.0):
                cpu.sample()
                sample = self._sample(time.monotonic() - t0, dict(clients), last, shown, tick)
                tick += 1
                samples.write(json.dumps(sample) + "\n")
                samples.flush()
                self.progress(Progress("running", sample["elapsed_s"], sample["total_s"],
                                       "s", data=sample))

    def _sample(self, now: float, clients: dict, last: dict, shown: dict, tick: int) -> dict:
        """Throughput, cwnd and RTT from `ss -ti` in the senders of
        SAMPLED_PER_S flows, the next ones in turn each second (a process
        costs about 0.2 s of the VM's CPU, which the flows need); a flow
        not sampled this time keeps the values of its last sample."""
        flows = []
        n = len(self.flows)
        turn = {(tick * SAMPLED_PER_S + k) % n for k in range(min(SAMPLED_PER_S, n))}
        for i, fe in enumerate(self.flows):
            f = fe.flow.flow
            info = {"flow": f, "cc": fe.flow.cc, "bps": None, "cwnd": None, "rtt_ms": None,
                    "running": f in clients and clients[f].poll() is None}
            if info["running"] and i not in turn:
                info.update(shown.get(f, {}))
            elif info["running"]:
                text = run(["ss", "-tinH", "state", "established", "sport", "=",
                            f":{fe.sport}"], ns=self.net.ns(fe.client), check=False)
                acked = _ss_field(text, r"bytes_acked:(\d+)")
                if acked is not None:
                    prev = last.get(f)
                    if prev:
                        info["bps"] = (acked - prev[1]) * 8 / max(now - prev[0], 1e-3)
                    last[f] = (now, int(acked))
                info["cwnd"] = _ss_field(text, r"\bcwnd:(\d+)")
                info["rtt_ms"] = _ss_field(text, r"\brtt:([0-9.]+)/")
                shown[f] = {k: info[k] for k in ("bps", "cwnd", "rtt_ms")}
            flows.append(info)
        return {"phase": "running", "elapsed_s": round(now, 2),
                "total_s": self.params.duration_s, "repetition": self.repetition,
                "flows": flows}

    def _workspace(self) -> Path:
        """The folder the artefacts are written to while the flows run: the
        run folder, but on virtual time the guest's memory, moved into the
        run folder after the flows (_gather). A write through the host's
        share makes its writer wait for the host: a guest with nothing else
        to run then skips ahead in time, by as much as the host was slow,
        and the flows' timing would follow the host's load."""
        p = self.params
        packets = p.peak_bps / 8 / MTU * p.duration_s
        if self.clock.get("kind") != "virtual" or packets * RECORD_BYTES > WORKSPACE_BYTES:
            return self.dir
        return Path(tempfile.mkdtemp(prefix=f"tcpvar-{self.tag}-"))

    def _gather(self) -> None:
        """The artefacts written in the workspace into the run folder."""
        if self.work == self.dir:
            return
        self._phase("copying the artefacts out")
        for item in sorted(self.work.iterdir()):
            shutil.move(item, self.dir / item.name)
        self.work.rmdir()

    # -- ending --------------------------------------------------------------
    def _teardown(self) -> None:
        alive = threading.Event()
        reporter = threading.Thread(target=self._keep_reporting, args=("stopping", alive),
                                    daemon=True)
        reporter.start()
        try:
            self._stop_everything()
        finally:
            alive.set()
            reporter.join()

    def _keep_reporting(self, phase: str, done: threading.Event) -> None:
        self._phase(phase)
        while not done.wait(STOPPING_REPORT_S):
            self._phase(phase)

    def _stop_everything(self) -> None:
        for name, proc in self.procs.procs:
            if name.startswith("client") or name.startswith("server"):
                self.procs.stop(proc, grace_s=3)
        # tcpdump writes out what it holds as it exits: in a starved
        # micro-VM that outlasted the testbed's 3 s, and SIGKILL then cut a
        # capture in the middle of a packet
        self.procs.stop_all(grace_s=CAPTURE_STOP_S, names=set(self.captures))
        if self.recorder is not None:
            try:
                stats = self.recorder.stop()
                self.manifest["probe"].update(events=stats.events, lost=stats.lost)
            except TcpvarError as exc:
                self.manifest["probe"]["error"] = str(exc)
        try:
            if self.net.namespaces:
                (self.work / layout.TC_STATS_TEXT).write_text(self.net.qdisc_stats())
                (self.work / layout.TC_STATS_JSON).write_text(
                    json.dumps(self.net.qdisc_stats_json(), indent=1))
        finally:
            left = self.net.close()
            self.manifest["capture_drops"] = self._tcpdump_drops()
            if self.softnet0 is not None:
                self.manifest["softnet_dropped"] = softnet_dropped() - self.softnet0
            if left:
                self.manifest["left_behind"] = left

    def _tcpdump_drops(self) -> dict:
        """Each capture's drops, its reverse part's with them."""
        out = {}
        for part in self.captures:
            log = self.work / layout.tcpdump_log(part)
            if not log.exists():
                continue
            name, n = part.removesuffix(REVERSE), traffic.tcpdump_stats(log)["dropped_by_kernel"]
            # None: a part that never said
            out[name] = None if None in (n, out.get(name, 0)) else out.get(name, 0) + n
        return out

    # -- bookkeeping -----------------------------------------------------------
    def _phase(self, phase: str) -> None:
        data = {"repetition": self.repetition}
        if self.study:
            data["study"] = self.study
        self.progress(Progress(phase, data=data))

    def _manifest_head(self) -> dict:
        return {
            "tcpvar_version": __version__, "tag": self.tag, "backend": self.backend,
            "repetition": self.repetition, "params": self.params.to_json(),
            "seed": self.params.seed, "kernel": platform.release(),
            "kernel_version": platform.version(), "hostname": platform.node(),
            "created_ns": time.time_ns(), "status": "running",
            "flows": [{"flow": fe.flow.flow, "cc": fe.flow.cc, "role": fe.flow.role,
                       "start_s": fe.flow.start_s, "duration_s": fe.flow.duration_s,
                       "rtt_ms": fe.flow.rtt_ms, "ecn": fe.flow.ecn,
                       "direction": fe.flow.direction, "hop": fe.flow.hop,
                       "rate_bps": fe.flow.rate_bps, "size_bytes": fe.flow.size,
                       "src_addr": fe.src, "src_port": fe.sport,
                       "dst_addr": fe.dst, "dst_port": fe.dport} for fe in self.flows],
            "tools": self.tools or tool_versions(), "clock": self.clock,
            **({"study": {k: self.study[k] for k in ("name", "cell")}} if self.study else {}),
        }

    def _sysctls(self) -> dict:
        return nsctl.read_sysctls(self.net.sender(1), RECORDED_SYSCTLS)

    def _write_manifest(self) -> None:
        layout.write_manifest(self.dir, self.manifest)


def _due(flow: Flow, first: float | None, now: float) -> bool:
    """Whether @flow starts now: a later flow start_s after the first
    flow's client began connecting (at @first), not after the run's clock,
    as a client's start can take a second or two in a busy micro-VM."""
    if flow.start_s <= 0:
        return True
    return first is not None and now >= first + flow.start_s


def _deadline(flow: Flow, began: float) -> float:
    """When a client that began trying to connect at @began must have ended."""
    return began + flow.duration_s + END_GRACE_S + END_GRACE_RTTS * flow.rtt_ms / 1e3


def _has_socket(pid: int) -> bool:
    """Whether process @pid has a socket open: an iperf3 client that has
    begun connecting. Until it execs the client the process is `ip netns
    exec`, whose own netlink sockets do not count."""
    try:
        with open(f"/proc/{pid}/comm") as f:
            if f.read().strip() == "ip":
                return False
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:         # ended
        return False
    for fd in fds:
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                return True
    return False


def outcome(report: Path, returncode: int, ended: bool) -> str:
    """How a flow's iperf3 client ended (checks.OUTCOMES): `complete`, by
    itself, or ended by the runner (@ended) once its test had run its
    whole duration (in a guest whose CPU is saturated the results exchange
    of a hundred clients takes a while, and their data were all sent);
    `cut`, ended by the runner before that; `never connected`, its
    connection refused, timed out or ended before it was set up; `failed`
    for any other error, which fails the run."""
    try:
        doc = json.loads(report.read_text(errors="replace"))
    except (OSError, ValueError):
        doc = {}
    doc = doc if isinstance(doc, dict) else {}
    start = doc.get("start") if isinstance(doc.get("start"), dict) else None
    # a client killed before it wrote its report may have connected
    unconnected = start is not None and not start.get("connected")
    if returncode == 0 and not ended:
        return "complete"
    if unconnected and (ended or "unable to connect" in str(doc.get("error"))):
        return "never connected"
    if not ended:
        return "failed"
    asked = ((start or {}).get("test_start") or {}).get("duration")
    sent = ((doc.get("end") or {}).get("sum_sent") or {}).get("seconds")
    done = all(isinstance(v, (int, float)) for v in (asked, sent)) and sent >= 0.99 * asked
    return "complete" if done else "cut"


def finite_outcome(record: Path) -> str:
    """How a finite flow (--size) ended, by its sender's own record: a
    sender ended before it wrote one was still sending (`cut`)."""
    try:
        line = record.read_text(errors="replace").strip()
        said = json.loads(line).get("outcome") if line else "cut"
    except (OSError, ValueError, AttributeError):
        said = "cut"
    return said if said in ("complete", "cut", "never connected") else "failed"


# a packet a veth hands on waits in the receiving CPU's backlog, 1000
# packets by default; in the micro-VM's one vCPU a slow-start burst at a
# gigabit overflows it, a loss no real path of the dumbbell has
GUEST_BACKLOG = 100_000
BACKLOG_SYSCTL = Path("/proc/sys/net/core/netdev_max_backlog")
SOFTNET_STAT = Path("/proc/net/softnet_stat")


def _widen_backlog() -> None:
    """The guest's backlog wide enough (a global sysctl: the guest is tcpvar's)."""
    BACKLOG_SYSCTL.write_text(str(GUEST_BACKLOG))


def softnet_dropped() -> int:
    """Packets the kernel dropped from full CPU backlogs, since boot (all CPUs)."""
    return sum(int(line.split()[1], 16) for line in SOFTNET_STAT.read_text().splitlines())


def load_variants(ccs: list[str]) -> None:
    """Load the variants' modules (a kernel with modules, such as Debian's).
    The host's and a known guest kernel's offer was checked before the run
    (backend.netns_gaps, session.check_variants); what is left to fail here
    is a module that does not load, or a kernel given by path, whose offer
    is known only once it runs."""
    for cc in sorted(set(ccs) - loaded_variants()):
        subprocess.run(["modprobe", "-q", f"tcp_{cc}"], capture_output=True)
    loaded = loaded_variants()
    missing = [cc for cc in ccs if cc not in loaded]
    if missing:
        raise TestbedError(f"kernel {platform.release()} has no congestion control "
                           f"{missing[0]!r} (available: {' '.join(sorted(loaded))})")


def check_mechanisms(params: RunParams) -> None:
    """--ngwa and --wbrto need the kernel of kernel-patches/ (its sysctls)."""
    for wanted, option, key in ((params.ngwa_mode, "--ngwa", "tcp_ngwa"),
                                (params.wbrto, "--wbrto", "tcp_wbrto")):
        if wanted is not None and not Path(f"/proc/sys/net/ipv4/{key}").exists():
            raise TestbedError(f"{option}: kernel {platform.release()} has no "
                               f"net.ipv4.{key} (boot the patched kernel: --kernel patched)")


def _port_filter(ports) -> str:
    """A tcpdump filter for packets to or from any of @ports ('' for none)."""
    return " or ".join(f"port {lo}" if lo == hi else f"portrange {lo}-{hi}"
                       for lo, hi in port_runs(list(ports)))


def _cut(pcap: Path, ports: str) -> Path:
    """The packets of @pcap to or from @ports, into a hidden file beside it."""
    out = pcap.with_name(f".{pcap.stem}.part.pcap")
    done = subprocess.run(["tcpdump", "-r", str(pcap), "-w", str(out), f"tcp and ({ports})"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        out.unlink(missing_ok=True)
        raise TestbedError(f"tcpdump could not read {pcap.name}: "
                           f"{done.stderr.strip()[:200]}")
    return out


def _merge(whole: Path, parts: list[Path]) -> None:
    """@parts merged in time order into @whole (mergecap), replacing it; on
    failure @whole and the parts stay as they were."""
    merged = whole.with_name(f".{whole.stem}.merged.pcap")
    done = subprocess.run(["mergecap", "-F", "pcap", "-w", str(merged), *map(str, parts)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        merged.unlink(missing_ok=True)
        raise TestbedError(f"mergecap could not merge {', '.join(p.name for p in parts)}: "
                           f"{done.stderr.strip()[:200]}")
    merged.replace(whole)


def _ss_field(text: str, pattern: str) -> float | None:
    m = re.search(pattern, text)
    return float(m.group(1)) if m else None


def tool_versions() -> dict:
    def first_line(args):
        try:
            p = subprocess.run(args, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        text = (p.stdout or p.stderr).strip()
        return text.splitlines()[0] if text else None

    return {"iperf3": first_line(["iperf3", "--version"]),
            "tcpdump": first_line(["tcpdump", "--version"]),
            "tc": first_line(["tc", "-V"]),
            "python": platform.python_version()}
