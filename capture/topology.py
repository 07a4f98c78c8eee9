"""The dumbbell of Callegari et al. (Fig. 2) in network namespaces:

    s1 ─┐                                         ┌─ d1
    s2 ─┼─ rl ══ bottleneck ══ rd ── delay ── rr ─┼─ d2
    sN ─┘   (rate + queue)        (netem)         └─ dN

Sender i (namespace s<i>) sends to receiver i (d<i>); a reverse flow's
sender is d<i> and its receiver s<i>. The bottleneck queue (HTB or TBF rate
over the queue of --aqm) sits on rl's link to rd; the reverse bottleneck,
when the run has one, on rr's link to rd. rd delays each direction by RTT/2
and drops with --loss on the forward path. Keeping delay and queue on
separate routers means netem's queue holds the packets in flight and the
bottleneck queue holds exactly --buffer.

A parking lot of N hops puts N bottlenecks in a row, hop k's on the link
from its router (rl, then p1 .. p<N-1>) to the next, each the dumbbell's:

    s1 ─ rl ══ hop 1 ══ p1 ══ hop 2 ══ p2 ── rd ── delay ── rr ─ d1
         │              │ │            │
         sx1        dx1 ┘ sx2      dx2 ┘

The first flows cross every hop; a cross flow of hop k (sx, dx: its s<i>
and d<i>) enters at hop k's router and leaves at the next, and has its
whole RTT on its own receiver's links. Every namespace of a run is named
`tcpvar-<tag>-...` (a testbed.Testbed); close() removes them all, with
their links, qdiscs and processes.
"""
from __future__ import annotations

import json
from pathlib import Path

from tcpvar.artefacts import run_folder as layout
from tcpvar.progress import Reporter

from . import aqm as aqms
from .aqm import FRAME
from .netns import run
from .params import MTU, RunParams
from .testbed import Testbed

# Addresses: RFC 2544 benchmarking ranges, senders in 198.18/16, receivers in
# 198.19/16, each host on a /30 of its own with its router (host_addr); the
# routers' links in 198.18.0/24.
# the testbed is IPv4: without IPv6, no router solicitations or MLD reports
# share the bottleneck queue with the flows (its drops are the flows' drops)
NO_IPV6 = {"net.ipv6.conf.all.disable_ipv6": "1", "net.ipv6.conf.default.disable_ipv6": "1"}


class Dumbbell(Testbed):
    def __init__(self, tag: str, flows: int, hops: int = 1,
                 cross: dict[int, int] | None = None):
        super().__init__("tcpvar", tag)
        self.flows = flows
        self.hops = hops
        self.cross = dict(cross or {})      # a cross flow: the hop it crosses alone
        self.own_delay: list[tuple[str, str]] = []  # (role, dev) of each flow's own delay
        self.reverse = False                # a reverse bottleneck (shape_reverse)

    @property
    def routers(self) -> list[str]:
        """The routers in a row, link k joining the k-th to the next: the
        dumbbell's rl, rd, rr; a parking lot's hops' (rl, p1 ..) and the
        last hop's far end (p<N>) before rd."""
        hops = [layout.hop_router(hop) for hop in range(1, self.hops + 1)]
        return [*hops, *([f"p{self.hops}"] if self.hops > 1 else []), "rd", "rr"]

    def attached(self, i: int) -> tuple[str, str]:
        """The routers host s<i> and host d<i> hang from."""
        hop = self.cross.get(i)
        return ("rl", "rr") if hop is None else (layout.hop_router(hop), self.routers[hop])

    def sender(self, i: int) -> str:
        return self.ns(f"s{i}")

    @staticmethod
    def sender_addr(i: int) -> str:
        return host_addr("198.18", i)

    @staticmethod
    def receiver_addr(i: int) -> str:
        return host_addr("198.19", i)

    # -- building --------------------------------------------------------
    def create(self, sysctls: dict[str, str], progress: Reporter | None = None,
               own_sysctls: dict[str, dict[str, str]] | None = None) -> None:
        """Namespaces, links, addresses, routes, host sysctls (and host
        s<i>'s or d<i>'s own, @own_sysctls["s1"]), offloads off; no qdiscs
        yet."""
        quiet = NO_IPV6 if Path("/proc/sys/net/ipv6").exists() else {}
        routers = self.routers
        for r in routers:
            self.node(r, forward=True, sysctls=quiet)
        n = self.flows
        own = own_sysctls or {}
        for side in "sd":
            for i in range(1, n + 1):
                self.node(f"{side}{i}", sysctls={**quiet, **sysctls, **own.get(f"{side}{i}", {})})
        # link k in 198.18.0.<4k>/30; senders (198.18/16) to the left, receivers to the right
        for k, (a, b) in enumerate(zip(routers, routers[1:])):
            near, far = f"198.18.0.{4 * k + 1}", f"198.18.0.{4 * k + 2}"
            self.link(a, "right", [f"{near}/30"], b, "left", [f"{far}/30"], mtu=MTU)
            self.route(a, "198.19.0.0/16", far)
            self.route(b, "198.18.0.0/16", near)
        for i in range(1, n + 1):
            for router, host, net in zip(self.attached(i), (f"s{i}", f"d{i}"),
                                         ("198.18", "198.19")):
                gateway = host_addr(net, i, router=True)
                self.link(router, host, [f"{gateway}/30"], host, "eth0",
                          [f"{host_addr(net, i)}/30"], mtu=MTU)
                self.route(host, "default", gateway)
        self.up(offloads=False, progress=progress,
                phase="building the " + ("dumbbell" if self.hops == 1 else "parking lot"))

    # -- path emulation --------------------------------------------------
    def shape(self, shaper: str, rate_bps: float, queue: list[str], rtt_ms: float,
              loss_pct: float, netem_limit: int, jitter_ms: float = 0.0) -> None:
        """The bottleneck queue on rl, and on each hop's router of a parking
        lot (@queue: its `tc qdisc` kind and options, bottleneck_queue()),
        the delay, jitter and loss on rd."""
        rd = self.ns("rd")
        for hop in range(1, self.hops + 1):
            self._bottleneck(self.ns(layout.hop_router(hop)), "right", shaper, rate_bps, queue)
        if rtt_ms > 0 or loss_pct > 0:
            half_us = str(int(round(rtt_ms * 500))) + "us"
            fwd = ["netem", "delay", half_us, "limit", str(netem_limit)]
            if jitter_ms > 0:
                # netem's jitter alone reorders packets (each leaves at its own
                # time); with a rate, a packet never leaves before the one
                # ahead of it, as on a real link. The rate is far above any
                # bottleneck, so it only keeps the order.
                fwd[3:3] = [str(int(round(jitter_ms * 1000))) + "us"]
                fwd += ["rate", "100gbit"]
            if loss_pct > 0:
                fwd += ["loss", f"{loss_pct:g}%"]
            run(["tc", "qdisc", "add", "dev", "right", "root", *fwd], ns=rd)
            run(["tc", "qdisc", "add", "dev", "left", "root", "netem", "delay", half_us,
                 "limit", str(netem_limit)], ns=rd)

    def shape_reverse(self, shaper: str, rate_bps: float, queue: list[str]) -> None:
        """The reverse bottleneck: @queue under a rate limit on rr's link to
        rd, before the delay, as the forward one is."""
        self.reverse = True
        self._bottleneck(self.ns("rr"), "left", shaper, rate_bps, queue)

    @classmethod
    def _bottleneck(cls, ns: str, dev: str, shaper: str, rate_bps: float,
                    queue: list[str]) -> None:
        if shaper == "tbf":
            run(["tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "tbf",
                 *cls._tbf_args(rate_bps)], ns=ns)
        else:
            run(["tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb",
                 "default", "1"], ns=ns)
            run(["tc", "class", "add", "dev", dev, "parent", "1:", "classid", "1:1",
                 "htb", *cls._htb_args(rate_bps)], ns=ns)
        run(["tc", "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", *queue], ns=ns)

    def delay_flows(self, extra_ms: dict[int, float], netem_limit: int,
                    reverse: frozenset[int] = frozenset()) -> None:
        """Flow i's own path: @extra_ms[i] more RTT than the shared delay (a
        cross flow's whole RTT), half on the last router's link to its
        receiver (the data), half on the receiver's link back (its ACKs):
        past its bottleneck, so the queue stays the only one that fills,
        and beyond its sender's capture (rl's, or rr's for a flow in
        @reverse), which sees the whole RTT."""
        for i, ms in extra_ms.items():
            if ms <= 0:
                continue
            router, host = ("rl", f"s{i}") if i in reverse else (self.attached(i)[1], f"d{i}")
            self.own_delay += [(router, host), (host, "eth0")]
            half = ["netem", "delay", str(int(round(ms * 500))) + "us", "limit",
                    str(netem_limit)]
            for role, dev in self.own_delay[-2:]:
                run(["tc", "qdisc", "add", "dev", dev, "root", *half], ns=self.ns(role))

    def set_rate(self, shaper: str, rate_bps: float) -> None:
        """A step of --bw-schedule: change the bottleneck rate in place (the
        queued packets stay), every hop's in a parking lot."""
        for hop in range(1, self.hops + 1):
            ns = self.ns(layout.hop_router(hop))
            if shaper == "tbf":
                run(["tc", "qdisc", "change", "dev", "right", "root", "handle", "1:", "tbf",
                     *self._tbf_args(rate_bps)], ns=ns)
            else:
                run(["tc", "class", "change", "dev", "right", "parent", "1:", "classid", "1:1",
                     "htb", *self._htb_args(rate_bps)], ns=ns)

    @staticmethod
    def _htb_args(rate_bps: float) -> list[str]:
        rate, burst = f"{int(rate_bps)}bit", str(_bucket(rate_bps))
        return ["rate", rate, "ceil", rate, "burst", burst, "cburst", burst,
                "quantum", str(FRAME)]

    @staticmethod
    def _tbf_args(rate_bps: float) -> list[str]:
        burst = _bucket(rate_bps)
        return ["rate", f"{int(rate_bps)}bit", "burst", str(burst), "limit", str(4 * burst)]

    def _stats_links(self) -> list[tuple[str, str]]:
        """(namespace, device) of every link with a qdisc of the path: the
        bottleneck's (each hop's), the delay's, the reverse bottleneck's,
        and each flow's own delay (delay_flows)."""
        links = [(self.ns(layout.hop_router(hop)), "right") for hop in range(1, self.hops + 1)]
        links += [(self.ns("rd"), "right"), (self.ns("rd"), "left")]
        if self.reverse:
            links.append((self.ns("rr"), "left"))
        return links + [(self.ns(role), dev) for role, dev in self.own_delay]

    def qdisc_stats(self) -> str:
        """`tc -s` of the path's qdiscs and classes, as text."""
        parts = []
        for ns, dev in self._stats_links():
            for what in ("qdisc", "class"):
                out = run(["tc", "-s", what, "show", "dev", dev], ns=ns, check=False)
                if out.strip():
                    parts.append(f"# {ns} {dev} {what}\n{out}")
        return "\n".join(parts)

    def qdisc_stats_json(self) -> list[dict]:
        """`tc -s -j qdisc` of the same links, each qdisc with its router
        (the namespace's role) and device."""
        out = []
        for ns, dev in self._stats_links():
            text = run(["tc", "-s", "-j", "qdisc", "show", "dev", dev], ns=ns, check=False)
            try:
                for q in json.loads(text or "[]"):
                    out.append({"router": ns.rsplit("-", 1)[1], "dev": dev, **q})
            except ValueError:
                pass
        return out


def host_addr(net: str, i: int, router: bool = False) -> str:
    """Host i's address in @net (198.18 or 198.19), or its router's: the
    i-th /30 from <net>.1.0, 64 to a /24, so 256 hosts fit in four."""
    k = i - 1
    return f"{net}.{1 + k // 64}.{4 * (k % 64) + (1 if router else 2)}"


def _bucket(rate_bps: float) -> int:
    """The shaper's bucket: 10 ms at the rate, at least two packets. tc's
    default for HTB is one packet (rate / psched's 1 GHz + MTU), which holds
    the rate only if every timer fires on time: under QEMU's TCG with 32
    flows it carried 12.5 of 20 Mbit/s, its queue full and dropping. With
    10 ms of credit a late timer is made up, whatever the kernel's HZ."""
    return max(int(rate_bps / 8 / 100), 2 * FRAME)


def bottleneck_queue(params: RunParams, rate_bps: float | None = None) -> list[str]:
    """The bottleneck queue's `tc qdisc` kind and options: the AQM of
    --aqm, the patched kernel's ngwa qdisc with --ngwa (it writes its free
    space into the NGWA option; `fd`: flow division), else a drop-tail
    pfifo or bfifo in --buffer's unit. @rate_bps: the rate above it, if
    not the forward bottleneck's (RED sizes its burst by it)."""
    b = params.buffer
    if params.ngwa_mode is not None:
        return ["ngwa", "limit", str(aqms.limit_value(aqms.AQMS["bfifo"], b.packets, b.bytes)),
                *(["fd"] if params.ngwa_flow_division else [])]
    return aqms.tc_args(params.queue, params.aqm_params, b.packets, b.bytes,
                        bool(params.ecn), rate_bps or params.peak_bps)
