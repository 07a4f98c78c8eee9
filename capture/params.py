"""The parameters of a run (`tcpvar run`), parsed and checked before
anything is set up, so bad input costs nothing and leaves nothing behind."""
from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field

from tcpvar.artefacts.checks import MAX_HOPS, MAX_LATENCY_SAMPLES, MAX_SCHEDULE_STEPS
from tcpvar.errors import UsageError

from . import aqm as aqms
from . import clock as clocks
from .shortflows import MAX_SHORT_FLOWS, MAX_SIZE
from .units import SIZE_UNITS, parse_rate, parse_size

MODES = ("single", "fairness", "friendliness")
REFERENCE_CC = "reno"      # the background flow of friendliness runs (the paper's)
# Table 1 of Callegari et al.: the 13 variants of Linux (HSTCP is `highspeed`)
PAPER_VARIANTS = ("bic", "cubic", "highspeed", "htcp", "hybla", "illinois", "lp", "reno",
                  "scalable", "vegas", "veno", "westwood", "yeah")
MTU = 1500
MAX_RTT_MS = 10_000.0
MAX_FLOWS = 256
TOPOLOGIES = ("dumbbell", "parking-lot")
# variants that ask for ECN on every connection whatever net.ipv4.tcp_ecn says
ECN_VARIANTS = ("dctcp",)
# the latency probes beside the flows (--latency) and their default
# interval: irtt's as Flent's VoIP test sends, ping's as its RRUL test does
LATENCY_INTERVAL_MS = {"irtt": 10.0, "ping": 200.0}
# runs one session or study plans at most (--repeat, a study's cells x
# repeat): 4 times the largest reproduction (callegari2011 full: 245 x 10),
# checked before any plan is made
MAX_RUNS = 10_000
# NGWA modes of Talau & Wille (Table 1): congestion window, smoothing (SE), flow division (FD)
NGWA_MODES = {1: (True, False, False), 2: (True, True, False), 3: (False, False, False),
              4: (False, True, False), 5: (True, False, True), 6: (True, True, True),
              7: (False, False, True), 8: (False, True, True)}
# WB-RTO weight scales (Psaras & Tsaoussidis) -> net.ipv4.tcp_wbrto_scale
WBRTO_SCALES = {"small": 0, "medium": 1, "wide": 2}

def parse_schedule(text: str) -> list[tuple[float, float]]:
    """'0:1gbit,60:500mbit,120:1gbit' -> [(0.0, 1e9), (60.0, 5e8), (120.0, 1e9)]."""
    if text.count(",") >= MAX_SCHEDULE_STEPS:      # counted before any step is read
        raise UsageError(f"bandwidth schedule of {text.count(',') + 1} steps: at most "
                         f"{MAX_SCHEDULE_STEPS}")
    steps = []
    for item in text.split(","):
        at, sep, rate = item.partition(":")
        try:
            t = float(at)
        except ValueError:
            t = -1.0
        if not sep or not 0 <= t < math.inf:      # nan fails both
            raise UsageError(f"cannot read bandwidth schedule step {item!r} "
                             f"(use TIME_S:RATE, e.g. 0:1gbit,60:500mbit)")
        steps.append((t, parse_rate(rate)))
    times = [t for t, _ in steps]
    if times != sorted(set(times)):
        raise UsageError("bandwidth schedule times must increase")
    if times[0] != 0:
        raise UsageError("bandwidth schedule must start at 0 (the rate the run starts with)")
    return steps


@dataclass(frozen=True)
class Buffer:
    """The bottleneck queue: a packet limit (pfifo) or a byte limit (bfifo)."""
    packets: int | None = None
    bytes: int | None = None
    bdp_multiple: float | None = None   # what the user asked for, when in BDPs

    def describe(self) -> str:
        if self.packets is not None:
            return f"{self.packets} packets"
        return f"{self.bytes} bytes"


def parse_buffer(text: str, rate_bps: float, rtt_ms: float) -> Buffer:
    """'100' or '100p' packets, '64kb' bytes, 'bdp' or '0.5bdp' bandwidth-delay products."""
    t = text.strip().lower()
    m = re.fullmatch(r"([0-9]*\.?[0-9]+)?\s*bdp", t)
    if m:
        k = float(m.group(1) or 1)
        # at least 2 full packets, so a zero-RTT path still queues something
        size = max(int(k * rate_bps * rtt_ms / 8000), 2 * MTU)
        return Buffer(bytes=size, bdp_multiple=k)
    m = re.fullmatch(r"([0-9]+)\s*(p|pkts?|packets?)?", t)
    if m:
        n = int(m.group(1))
        if n < 1:
            raise UsageError("buffer must hold at least 1 packet")
        return Buffer(packets=n)
    m = re.fullmatch(r"([0-9]*\.?[0-9]+)\s*([a-z]+)", t)
    if m and m.group(2) in SIZE_UNITS:
        size = int(float(m.group(1)) * SIZE_UNITS[m.group(2)])
        if size < MTU:
            raise UsageError(f"buffer {text!r} is smaller than one packet ({MTU} bytes)")
        return Buffer(bytes=size)
    raise UsageError(f"cannot read buffer {text!r} (use packets: 100, bytes: 64kb, "
                     f"or bandwidth-delay products: bdp, 2bdp)")


@dataclass
class Flow:
    flow: int                  # 1..N in order of start
    cc: str
    role: str                  # 'background' or 'test'
    start_s: float
    duration_s: float
    rtt_ms: float              # its path's base RTT
    ecn: bool                  # its sender asks for ECN
    reverse: bool = False      # it sends from d<i> to s<i>, through the reverse bottleneck
    hop: int | None = None     # a parking lot's cross flow through this hop only; None: all
    rate_bps: float | None = None   # its sender's rate (iperf3 -b); None: as fast as TCP goes
    size: int | None = None    # a finite flow's bytes (--size); None: it runs its duration

    @property
    def direction(self) -> str:
        return "reverse" if self.reverse else "forward"


@dataclass
class RunParams:
    ccs: list[str]
    rtt_ms: float = 100.0
    loss_pct: float = 0.0
    jitter_ms: float = 0.0              # the forward delay varies by +- this, in order
    bw_bps: float = 20e6
    buffer: Buffer = field(default_factory=lambda: Buffer(packets=100))
    buffer_text: str = "bdp"
    duration_s: float = 20.0
    flows: int = 1
    mode: str = "single"
    start_gap_s: float = 0.0
    schedule: list[tuple[float, float]] = field(default_factory=list)
    repeat: int = 1
    seed: int = 0
    shaper: str = "htb"
    ngwa_mode: int | None = None       # 1-8, or None: no NGWA (patched kernel only)
    wbrto: str | None = None           # a WBRTO_SCALES key, or None: the stock RTO
    wbrto_unit_ms: int = 1000
    clock: str = "auto"                # the micro-VM's clock (capture/clock.py)
    aqm: str | None = None             # the bottleneck queue; None: pfifo/bfifo by --buffer
    aqm_params: dict = field(default_factory=dict)     # its --aqm-params (capture/aqm.py)
    ecn: list[bool] = field(default_factory=list)      # per flow; [] none asks for ECN
    flow_rtts_ms: list[float] = field(default_factory=list)   # per flow; [] all rtt_ms
    reverse: int = 0                   # the last N flows send the other way
    bw_reverse_bps: float | None = None     # the reverse bottleneck's rate; None: --bw
    topology: str = "dumbbell"         # or "parking-lot": `hops` bottlenecks in a row
    hops: int = 1
    cross: int = 0                     # a parking lot's cross flows per hop, the last ones
    latency: str | None = None         # irtt or ping from s1 to d1 beside the flows
    flow_rates_bps: list = field(default_factory=list)     # per flow, None unlimited; [] all
    latency_interval_ms: float | None = None
    # short flows beside the long ones, from s1 to d1: {"per_s", "bytes"} per class
    short: list = field(default_factory=list)
    flow_sizes: list = field(default_factory=list)     # per flow, None unlimited; [] all

    def cross_hop(self, i: int) -> int | None:
        """The hop flow @i (0-based) crosses alone, if it is a cross flow:
        the last hops x cross flows, `cross` to a hop, hop 1's first."""
        first = self.flows - self.hops * self.cross
        return None if i < first or not self.cross else (i - first) // self.cross + 1

    @property
    def reverse_bottleneck(self) -> bool:
        """Whether the path has a rate limit and queue the other way too."""
        return self.reverse > 0 or self.bw_reverse_bps is not None

    @property
    def reverse_bps(self) -> float:
        return self.bw_reverse_bps or self.bw_bps

    @property
    def queue(self) -> str:
        """The bottleneck queue's qdisc."""
        if self.ngwa_mode is not None:
            return "ngwa"
        return self.aqm or ("pfifo" if self.buffer.packets is not None else "bfifo")

    @property
    def max_rtt_ms(self) -> float:
        return max(self.flow_rtts_ms or [self.rtt_ms])

    @property
    def mean_rtt_ms(self) -> float:
        """The flows' mean base RTT, at which --buffer counts BDPs."""
        rtts = self.flow_rtts_ms or [self.rtt_ms]
        return sum(rtts) / len(rtts)

    def flow_plan(self) -> list[Flow]:
        """Who runs what and when: later flows start start_gap_s apart and all
        end with the run, so the first (background) flow runs longest."""
        out = []
        for i in range(self.flows):
            if self.mode == "friendliness":
                cc = REFERENCE_CC if i == 0 else self.ccs[min(i - 1, len(self.ccs) - 1)]
            else:
                cc = self.ccs[i] if len(self.ccs) > 1 else self.ccs[0]
            start = i * self.start_gap_s
            role = "background" if self.mode != "single" and i == 0 else "test"
            rtt = self.flow_rtts_ms[i] if self.flow_rtts_ms else self.rtt_ms
            out.append(Flow(i + 1, cc, role, start, self.duration_s - start, rtt,
                            bool(self.ecn) and self.ecn[i], i >= self.flows - self.reverse,
                            self.cross_hop(i),
                            self.flow_rates_bps[i] if self.flow_rates_bps else None,
                            self.flow_sizes[i] if self.flow_sizes else None))
        return out

    @property
    def peak_bps(self) -> float:
        """The largest rate the bottleneck will have (queues are sized for it)."""
        return max([self.bw_bps] + [r for _, r in self.schedule])

    @property
    def fastest_bps(self) -> float:
        """The largest rate of either direction (the delay's queue holds what
        it carries in flight)."""
        return max(self.peak_bps, self.reverse_bps if self.reverse_bottleneck else 0)

    @property
    def needs_patched_kernel(self) -> bool:
        return self.ngwa_mode is not None or self.wbrto is not None

    def mechanism_sysctls(self) -> dict[str, str]:
        """The patched kernel's sysctls for --ngwa and --wbrto, set on every
        host (kernel-patches/README.md: each end reads its own)."""
        out = {}
        if self.ngwa_mode is not None:
            cw, se, _ = NGWA_MODES[self.ngwa_mode]
            out.update({"net.ipv4.tcp_ngwa": "1", "net.ipv4.tcp_ngwa_cwnd": str(int(cw)),
                        "net.ipv4.tcp_ngwa_smooth": str(int(se))})
        if self.wbrto is not None:
            out.update({"net.ipv4.tcp_wbrto": "1",
                        "net.ipv4.tcp_wbrto_scale": str(WBRTO_SCALES[self.wbrto]),
                        "net.ipv4.tcp_wbrto_unit_ms": str(self.wbrto_unit_ms)})
        return out

    @property
    def ngwa_flow_division(self) -> bool:
        return self.ngwa_mode is not None and NGWA_MODES[self.ngwa_mode][2]

    def needed_ccs(self) -> list[str]:
        return sorted({f.cc for f in self.flow_plan()})

    def to_json(self) -> dict:
        d = asdict(self)
        d["buffer"] = {"text": self.buffer_text, "packets": self.buffer.packets,
                       "bytes": self.buffer.bytes}
        d.pop("buffer_text")
        d["schedule"] = [{"t_s": t, "bw_bps": r} for t, r in self.schedule]
        return d

    @classmethod
    def from_json(cls, d: dict) -> RunParams:
        d = dict(d)
        buf = d.pop("buffer")
        d["buffer"] = Buffer(packets=buf["packets"], bytes=buf["bytes"])
        d["buffer_text"] = buf["text"]
        d["schedule"] = [(s["t_s"], s["bw_bps"]) for s in d["schedule"]]
        d.setdefault("jitter_ms", 0.0)      # runs stored before --jitter
        d.setdefault("clock", "auto")       # and before --clock
        d.setdefault("reverse", 0)          # and before --reverse
        d.setdefault("bw_reverse_bps", None)
        d.setdefault("topology", "dumbbell")    # and before the parking lot
        d.setdefault("hops", 1)
        d.setdefault("cross", 0)
        d.setdefault("latency", None)       # and before --latency
        d.setdefault("latency_interval_ms", None)
        d.setdefault("flow_rates_bps", [])     # and before --rate
        d.setdefault("short", [])              # and before --short
        d.setdefault("flow_sizes", [])         # and before --size
        return cls(**d)


def per_flow(option: str, text: str, flows: int, read) -> list:
    """A value for every flow, or one per flow: 'cubic' or 'cubic,reno'."""
    items = [t.strip() for t in str(text).split(",") if t.strip()]
    if not items:
        raise UsageError(f"{option}: no value given")
    if len(items) not in (1, flows):
        raise UsageError(f"{option} lists {len(items)} values for {flows} flows "
                         f"(give one, or one per flow)")
    values = [read(t) for t in items]
    return values * flows if len(values) == 1 else values


def _rtt(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise UsageError(f"--rtt {text!r}: not a time in ms") from None
    if not 0 <= v <= MAX_RTT_MS:        # nan too
        raise UsageError(f"RTT {v:g} ms is outside 0..{MAX_RTT_MS:g} ms")
    return v


def _ecn(text: str) -> bool:
    if text.lower() not in ("on", "off"):
        raise UsageError(f"--ecn {text!r}: on or off")
    return text.lower() == "on"


def make_params(*, cc: str, rtt_ms: float | str, loss_pct: float, bw: str, buffer: str,
                jitter_ms: float = 0.0,
                duration_s: float, flows: int | None, mode: str, start_gap_s: float | None,
                schedule: str | None, repeat: int, seed: int, shaper: str = "htb",
                ngwa: int | None = None, wbrto: str | None = None,
                wbrto_unit_ms: int = 1000, clock: str = "auto", aqm: str | None = None,
                aqm_params: str | None = None, ecn: str | None = None, reverse: int = 0,
                bw_reverse: str | None = None, topology: str = "dumbbell",
                hops: int | None = None, cross: int | None = None,
                latency: str | None = None,
                latency_interval_ms: float | None = None,
                rate: str | None = None, short: str | None = None,
                size: str | None = None) -> RunParams:
    """Check every option against the others; raise UsageError on the first problem."""
    ccs = [c.strip().lower() for c in cc.split(",") if c.strip()]
    if not ccs or any(not re.fullmatch(r"[a-z0-9_]{1,15}", c) for c in ccs):
        raise UsageError(f"cannot read --cc {cc!r} "
                         f"(a variant such as cubic, or a list: cubic,reno)")
    if not 0 <= loss_pct <= 100:
        raise UsageError(f"loss {loss_pct:g}% is outside 0..100")
    if not 0 < duration_s <= 24 * 3600:
        raise UsageError(f"duration {duration_s:g} s must be above 0 and at most a day")
    if mode not in MODES:
        raise UsageError(f"unknown mode {mode!r} (one of {', '.join(MODES)})")
    hops, cross = _hops(topology, hops, cross)
    if flows is None:
        flows = max(len(ccs) + (mode == "friendliness"), 1 if mode == "single" else 2,
                    1 + hops * cross)
    if not 1 <= flows <= MAX_FLOWS:
        raise UsageError(f"--flows {flows}: tcpvar runs 1 to {MAX_FLOWS} flows")
    if mode != "single" and flows < 2:
        raise UsageError(f"{mode} needs at least 2 flows")
    if mode == "fairness" and len(set(ccs)) > 1:
        raise UsageError("fairness compares flows of one variant: give a single --cc")
    if mode == "single" and len(ccs) not in (1, flows):
        raise UsageError(f"--cc lists {len(ccs)} variants for {flows} flows "
                         f"(give one, or one per flow)")
    rtts = per_flow("--rtt", rtt_ms, flows, _rtt)
    base_rtt = min(rtts)
    if not 0 <= jitter_ms <= base_rtt / 2:
        raise UsageError(f"jitter {jitter_ms:g} ms is outside 0..{base_rtt / 2:g} ms "
                         f"(at most the one-way delay, half the RTT)")
    if start_gap_s is None:
        start_gap_s = 0.0 if mode == "single" else min(2.0, duration_s / (2 * flows))
    if not (start_gap_s >= 0 and start_gap_s * (flows - 1) < duration_s):   # nan too
        raise UsageError(f"--start-gap {start_gap_s:g} s leaves the last flow no time "
                         f"in a {duration_s:g} s run")
    if not 1 <= repeat <= MAX_RUNS:
        raise UsageError(f"--repeat {repeat}: 1 to {MAX_RUNS} (the runs a session may plan)")
    steps = parse_schedule(schedule) if schedule else []
    if steps and steps[-1][0] >= duration_s:
        raise UsageError(f"bandwidth schedule step at {steps[-1][0]:g} s is after "
                         f"the run's end ({duration_s:g} s)")
    if ngwa is not None and ngwa not in NGWA_MODES:
        raise UsageError(f"--ngwa {ngwa}: the NGWA modes are 1 to 8 (Table 1 of the paper)")
    if wbrto is not None and wbrto not in WBRTO_SCALES:
        raise UsageError(f"--wbrto {wbrto!r}: one of {', '.join(WBRTO_SCALES)}")
    if not 1 <= wbrto_unit_ms <= 60000:
        raise UsageError(f"--wbrto-unit {wbrto_unit_ms}: must be 1 to 60000 ms")
    clocks.check(clock)
    bw_bps = steps[0][1] if steps else parse_rate(bw)
    # the queue is sized for the largest rate the path will have, and the
    # flows' mean RTT (the evaluation suite's central RTT)
    peak = max([r for _, r in steps] or [bw_bps])
    params = RunParams(
        ccs=ccs, rtt_ms=base_rtt, loss_pct=loss_pct, jitter_ms=jitter_ms, bw_bps=bw_bps,
        buffer=parse_buffer(buffer, peak, sum(rtts) / len(rtts)), buffer_text=buffer,
        duration_s=duration_s, flows=flows, mode=mode, start_gap_s=start_gap_s,
        schedule=steps, repeat=repeat, seed=seed, shaper=shaper, ngwa_mode=ngwa, wbrto=wbrto,
        wbrto_unit_ms=wbrto_unit_ms, clock=clock,
        flow_rtts_ms=rtts if len(set(rtts)) > 1 else [], topology=topology, hops=hops,
        cross=cross)
    _cross_flows(params)
    _reverse(params, reverse, bw_reverse)
    _queue_and_ecn(params, aqm, aqm_params, ecn)
    _latency(params, latency, latency_interval_ms)
    if rate:        # per flow; 0 leaves one unlimited
        rates = per_flow("--rate", rate, params.flows,
                         lambda text: None if text.strip() == "0" else parse_rate(text))
        params.flow_rates_bps = rates if any(r is not None for r in rates) else []
    if short:
        params.short = parse_short(short, duration_s)
    if size:        # per flow; 0 leaves one running its duration
        _sizes(params, size)
    return params


def _sizes(params: RunParams, text: str) -> None:
    """--size into @params, checked: a finite flow is tcpvar's own sender,
    which does not pace."""
    def read(t: str) -> int | None:
        if t.strip() == "0":
            return None
        n = parse_size(t, "--size")
        if n > MAX_SIZE:
            raise UsageError(f"--size {t!r}: at most {MAX_SIZE >> 20} MiB a flow")
        return n

    sizes = per_flow("--size", text, params.flows, read)
    for i, n in enumerate(sizes):
        if n is not None and params.flow_rates_bps and params.flow_rates_bps[i] is not None:
            raise UsageError(f"--size and --rate on flow {i + 1}: a finite flow goes as fast "
                             f"as TCP lets it (give it rate 0)")
    params.flow_sizes = sizes if any(n is not None for n in sizes) else []


MAX_SHORT_RATE = 1000.0         # arrivals a second, per class


def parse_short(text: str, duration_s: float) -> list[dict]:
    """--short RATE:SIZE[,RATE:SIZE...]: per class, RATE transfers a second
    (a Poisson process) of SIZE bytes each."""
    classes = []
    for item in (t.strip() for t in text.split(",")):
        rate, sep, size = item.partition(":")
        try:
            per_s = float(rate) if sep else math.nan
        except ValueError:
            per_s = math.nan
        if not 0 < per_s <= MAX_SHORT_RATE:        # nan too
            raise UsageError(f"--short {item!r}: RATE:SIZE, RATE the transfers a second "
                             f"(above 0, at most {MAX_SHORT_RATE:g}), e.g. 2:100kb")
        n = parse_size(size, "--short")
        if n > MAX_SIZE:
            raise UsageError(f"--short {item!r}: at most {MAX_SIZE >> 20} MiB a transfer")
        if any(c["bytes"] == n for c in classes):
            raise UsageError(f"--short: two classes of {n} bytes (a class is its size)")
        classes.append({"per_s": per_s, "bytes": n})
    expected = sum(c["per_s"] for c in classes) * duration_s
    if expected > MAX_SHORT_FLOWS / 2:
        raise UsageError(f"--short {text!r}: about {expected:,.0f} transfers in "
                         f"{duration_s:g} s; at most {MAX_SHORT_FLOWS // 2:,} are expected "
                         f"of a run")
    return classes


def _latency(params: RunParams, tool: str | None, interval_ms: float | None) -> None:
    """--latency and --latency-interval into @params, checked."""
    if tool is None:
        if interval_ms is not None:
            raise UsageError("--latency-interval: give the probe with --latency irtt or ping")
        return
    if tool not in LATENCY_INTERVAL_MS:
        raise UsageError(f"--latency {tool!r}: one of {', '.join(LATENCY_INTERVAL_MS)}")
    interval_ms = LATENCY_INTERVAL_MS[tool] if interval_ms is None else interval_ms
    if not 1 <= interval_ms <= 1000:        # nan too
        raise UsageError(f"--latency-interval {interval_ms:g} ms: 1 to 1000 ms")
    if params.duration_s * 1000 / interval_ms > MAX_LATENCY_SAMPLES:
        raise UsageError(f"--latency-interval {interval_ms:g} ms: more than "
                         f"{MAX_LATENCY_SAMPLES:,} samples in a {params.duration_s:g} s run")
    params.latency, params.latency_interval_ms = tool, float(interval_ms)


def _hops(topology: str, hops: int | None, cross: int | None) -> tuple[int, int]:
    """--topology, --hops and --cross, checked: (hops, cross flows per hop)."""
    if topology not in TOPOLOGIES:
        raise UsageError(f"--topology {topology!r}: one of {', '.join(TOPOLOGIES)}")
    if topology == "dumbbell":
        if hops not in (None, 1) or cross:
            raise UsageError("--hops and --cross: for --topology parking-lot; the dumbbell "
                             "has one bottleneck")
        return 1, 0
    hops = 2 if hops is None else hops
    cross = 1 if cross is None else cross
    if not 2 <= hops <= MAX_HOPS:
        raise UsageError(f"--hops {hops}: a parking lot has 2 to {MAX_HOPS} bottlenecks")
    if not 1 <= cross <= MAX_FLOWS:
        raise UsageError(f"--cross {cross}: at least one cross flow per hop")
    return hops, cross


def _cross_flows(params: RunParams) -> None:
    """A parking lot keeps at least one flow through every hop."""
    if params.topology == "parking-lot" and params.flows <= params.hops * params.cross:
        raise UsageError(f"--flows {params.flows}: a parking lot of {params.hops} hops with "
                         f"{params.cross} cross flow(s) each needs at least "
                         f"{params.hops * params.cross + 1} flows (the first ones cross "
                         f"every hop)")


def _reverse(params: RunParams, reverse: int, bw_reverse: str | None) -> None:
    """--reverse and --bw-reverse into @params, checked."""
    if not 0 <= reverse <= params.flows:
        raise UsageError(f"--reverse {reverse}: 0 to the run's {params.flows} flows")
    params.reverse = reverse
    if bw_reverse is not None:
        params.bw_reverse_bps = parse_rate(bw_reverse)
    if params.reverse_bottleneck and params.ngwa_mode is not None:
        raise UsageError("--reverse and --bw-reverse: the ngwa qdisc is the forward "
                         "bottleneck's only; run NGWA one way")
    if params.reverse_bottleneck and params.topology != "dumbbell":
        raise UsageError("--reverse and --bw-reverse: the dumbbell's only; a parking lot's "
                         "flows all go one way")
    if params.ngwa_mode is not None and params.topology != "dumbbell":
        raise UsageError("--ngwa: the dumbbell's only (one ngwa qdisc)")


def _queue_and_ecn(params: RunParams, aqm: str | None, aqm_params: str | None,
                   ecn: str | None) -> None:
    """--aqm, --aqm-params and --ecn into @params, checked: ECN per flow
    (DCTCP's on, as the kernel always negotiates it for DCTCP), and the
    queue's tc arguments built once so that a wrong one stops here."""
    variants = [f.cc for f in params.flow_plan()]
    wanted = per_flow("--ecn", ecn, params.flows, _ecn) if ecn else \
        [cc in ECN_VARIANTS for cc in variants]
    for cc, on in zip(variants, wanted):
        if cc in ECN_VARIANTS and not on:
            raise UsageError(f"--ecn off: {cc} always negotiates ECN (the kernel's "
                             f"TCP_CONG_NEEDS_ECN)")
    params.ecn = wanted if any(wanted) else []
    if aqm is None:
        if aqm_params:
            raise UsageError("--aqm-params: give the queue they are for with --aqm")
        return
    if params.ngwa_mode is not None:
        raise UsageError("--aqm: with --ngwa the bottleneck queue is the ngwa qdisc")
    params.aqm = aqms.check_name(aqm)
    params.aqm_params = aqms.parse_params(params.aqm, aqm_params)
    aqms.tc_args(params.aqm, params.aqm_params, params.buffer.packets, params.buffer.bytes,
                 bool(params.ecn), params.peak_bps)
