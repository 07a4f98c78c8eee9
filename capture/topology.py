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
bottleneck queue holds exactly --buffer. Every namespace of a run is
named `tcpvar-<tag>-...` (a testbed.Testbed); close() removes them all, with
their links, qdiscs and processes.
"""
from __future__ import annotations

import json
from pathlib import Path

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
    def __init__(self, tag: str, flows: int):
        super().__init__("tcpvar", tag)
        self.flows = flows
        self.own_delay: list[tuple[str, str]] = []  # (role, dev) of each flow's own delay
        self.reverse = False                # a reverse bottleneck (shape_reverse)

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
        for r in ("rl", "rd", "rr"):
            self.node(r, forward=True, sysctls=quiet)
        n = self.flows
        own = own_sysctls or {}
        for side in "sd":
            for i in range(1, n + 1):
                self.node(f"{side}{i}", sysctls={**quiet, **sysctls, **own.get(f"{side}{i}", {})})
        self.link("rl", "right", ["198.18.0.1/30"], "rd", "left", ["198.18.0.2/30"], mtu=MTU)
        self.link("rd", "right", ["198.18.0.5/30"], "rr", "left", ["198.18.0.6/30"], mtu=MTU)
        for i in range(1, n + 1):
            for router, host, net in (("rl", f"s{i}", "198.18"), ("rr", f"d{i}", "198.19")):
                gateway = host_addr(net, i, router=True)
                self.link(router, host, [f"{gateway}/30"], host, "eth0",
                          [f"{host_addr(net, i)}/30"], mtu=MTU)
                self.route(host, "default", gateway)
        self.route("rl", "198.19.0.0/16", "198.18.0.2")
        self.route("rd", "198.19.0.0/16", "198.18.0.6")
        self.route("rd", "198.18.0.0/16", "198.18.0.1")
        self.route("rr", "198.18.0.0/16", "198.18.0.5")
        self.up(offloads=False, progress=progress, phase="building the dumbbell")

    # -- path emulation --------------------------------------------------
    def shape(self, shaper: str, rate_bps: float, queue: list[str], rtt_ms: float,
              loss_pct: float, netem_limit: int, jitter_ms: float = 0.0) -> None:
        """The bottleneck queue on rl (@queue: its `tc qdisc` kind and
        options, bottleneck_queue()), the delay, jitter and loss on rd."""
        rd = self.ns("rd")
        self._bottleneck(self.ns("rl"), "right", shaper, rate_bps, queue)
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
        """Flow i's own path: @extra_ms[i] more RTT than the shared delay,
        half on the last router's link to its receiver (the data), half on
        the receiver's link back (its ACKs): past its bottleneck, so the
        queue stays the only one that fills, and beyond its sender's capture
        (rl's, or rr's for a flow in @reverse), which sees the whole RTT."""
        for i, ms in extra_ms.items():
            if ms <= 0:
                continue
            router, host = ("rl", f"s{i}") if i in reverse else ("rr", f"d{i}")
            self.own_delay += [(router, host), (host, "eth0")]
            half = ["netem", "delay", str(int(round(ms * 500))) + "us", "limit",
                    str(netem_limit)]
            for role, dev in self.own_delay[-2:]:
                run(["tc", "qdisc", "add", "dev", dev, "root", *half], ns=self.ns(role))

    def set_rate(self, shaper: str, rate_bps: float) -> None:
        """A step of --bw-schedule: change the bottleneck rate in place (the
        queued packets stay)."""
        rl = self.ns("rl")
        if shaper == "tbf":
            run(["tc", "qdisc", "change", "dev", "right", "root", "handle", "1:", "tbf",
                 *self._tbf_args(rate_bps)], ns=rl)
        else:
            run(["tc", "class", "change", "dev", "right", "parent", "1:", "classid", "1:1",
                 "htb", *self._htb_args(rate_bps)], ns=rl)

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
        bottleneck's, the delay's, the reverse bottleneck's, and each flow's
        own delay (delay_flows)."""
        links = [(self.ns("rl"), "right"), (self.ns("rd"), "right"), (self.ns("rd"), "left")]
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
