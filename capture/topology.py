"""The dumbbell of Callegari et al. (Fig. 2) in network namespaces:

    s1 ─┐                                         ┌─ d1
    s2 ─┼─ rl ══ bottleneck ══ rd ── delay ── rr ─┼─ d2
    sN ─┘   (rate + queue)        (netem)         └─ dN

Sender i (namespace s<i>) sends to receiver i (d<i>). The bottleneck queue
(HTB or TBF rate over a pfifo/bfifo) sits on rl's link to rd; rd delays each
direction by RTT/2 and drops with --loss on the forward path. Keeping delay
and queue on separate routers means netem's queue holds the packets in flight
and the bottleneck queue holds exactly --buffer. Every namespace of a run is
named `tcpvar-<tag>-...`; destroy() removes them all, which also removes
their links and qdiscs.
"""
from __future__ import annotations

import secrets
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from .netns import run, run_batch
from .params import MTU, Buffer

# Addresses: RFC 2544 benchmarking ranges, senders 198.18.<i>.2, receivers 198.19.<i>.2.
# offloads that merge or split segments would make the pcaps show other
# packets than those on the emulated wire, and the qdiscs queue super-packets
OFFLOADS = ("tso", "gso", "gro", "lro")
FRAME = MTU + 14              # a full packet on the emulated Ethernet links
# the testbed is IPv4: without IPv6, no router solicitations or MLD reports
# share the bottleneck queue with the flows (its drops are the flows' drops)
NO_IPV6 = {"net.ipv6.conf.all.disable_ipv6": "1", "net.ipv6.conf.default.disable_ipv6": "1"}


def new_tag() -> str:
    return secrets.token_hex(3)


@dataclass
class Dumbbell:
    tag: str
    flows: int
    namespaces: list[str] = field(default_factory=list)

    def ns(self, role: str) -> str:
        return f"tcpvar-{self.tag}-{role}"

    def sender(self, i: int) -> str:
        return self.ns(f"s{i}")

    def receiver(self, i: int) -> str:
        return self.ns(f"d{i}")

    @staticmethod
    def sender_addr(i: int) -> str:
        return f"198.18.{i}.2"

    @staticmethod
    def receiver_addr(i: int) -> str:
        return f"198.19.{i}.2"

    # -- building --------------------------------------------------------
    def create(self, sysctls: dict[str, str], progress=None) -> None:
        """Namespaces, links, addresses, routes, host sysctls; no qdiscs yet.
        Commands go in batches, one process per namespace and step: in an
        emulated VM every process start costs a noticeable fraction of a second."""
        rl, rd, rr = self.ns("rl"), self.ns("rd"), self.ns("rr")
        n = self.flows
        hosts = [self.sender(i) for i in range(1, n + 1)] + \
                [self.receiver(i) for i in range(1, n + 1)]
        names = [rl, rd, rr] + hosts
        # namespace name -> ip commands to run inside it; dev lists for ethtool
        inside: dict[str, list[str]] = {name: ["link set lo up"] for name in names}
        devs: dict[str, list[str]] = {name: [] for name in names}
        links = []

        def link(ns_a, dev_a, addr_a, ns_b, dev_b, addr_b):
            links.append(f"link add {dev_a} netns {ns_a} mtu {MTU} type veth "
                         f"peer name {dev_b} netns {ns_b} mtu {MTU}")
            for ns, dev, addr in ((ns_a, dev_a, addr_a), (ns_b, dev_b, addr_b)):
                inside[ns] += [f"addr add {addr} dev {dev}", f"link set {dev} up"]
                devs[ns].append(dev)

        link(rl, "right", "198.18.0.1/30", rd, "left", "198.18.0.2/30")
        link(rd, "right", "198.18.0.5/30", rr, "left", "198.18.0.6/30")
        for i in range(1, n + 1):
            link(rl, f"s{i}", f"198.18.{i}.1/24", self.sender(i), "eth0",
                 f"{self.sender_addr(i)}/24")
            link(rr, f"d{i}", f"198.19.{i}.1/24", self.receiver(i), "eth0",
                 f"{self.receiver_addr(i)}/24")
            inside[self.sender(i)].append(f"route add default via 198.18.{i}.1")
            inside[self.receiver(i)].append(f"route add default via 198.19.{i}.1")
        inside[rl].append("route add 198.19.0.0/16 via 198.18.0.2")
        inside[rd] += ["route add 198.19.0.0/16 via 198.18.0.6",
                       "route add 198.18.0.0/16 via 198.18.0.1"]
        inside[rr].append("route add 198.18.0.0/16 via 198.18.0.5")

        for name in names:
            run(["ip", "netns", "add", name])
            self.namespaces.append(name)
        run_batch(["ip"], links)
        quiet = NO_IPV6 if Path("/proc/sys/net/ipv6").exists() else {}
        for k, name in enumerate(names):
            if progress:
                progress({"phase": f"building the dumbbell ({k + 1}/{len(names)} hosts)"})
            # before the links come up, so no IPv6 chatter ever enters the queues
            settings = {**quiet, **(sysctls if name in hosts else {"net.ipv4.ip_forward": "1"})}
            run(["sysctl", "-qw", *(f"{key}={v}" for key, v in settings.items())], ns=name)
            run_batch(["ip", "-n", name], inside[name])
            # every offload off on every link of the namespace, in one process
            off = " ".join(f"{o} off" for o in OFFLOADS)
            run(["sh", "-c", f'for d; do ethtool -K "$d" {off} 2>/dev/null; done; true',
                 "sh", *devs[name]], ns=name)

    # -- path emulation --------------------------------------------------
    def shape(self, shaper: str, rate_bps: float, buffer: Buffer, rtt_ms: float,
              loss_pct: float, netem_limit: int, ngwa: bool | None = None) -> None:
        """The bottleneck queue on rl, the delay and loss on rd. With @ngwa
        (True: flow division) the queue is the patched kernel's byte-limited
        ngwa qdisc, which writes its free space into the NGWA option."""
        rl, rd = self.ns("rl"), self.ns("rd")
        if shaper == "tbf":
            run(["tc", "qdisc", "add", "dev", "right", "root", "handle", "1:", "tbf",
                 *self._tbf_args(rate_bps)], ns=rl)
            parent = "1:1"
        else:
            run(["tc", "qdisc", "add", "dev", "right", "root", "handle", "1:", "htb",
                 "default", "1"], ns=rl)
            run(["tc", "class", "add", "dev", "right", "parent", "1:", "classid", "1:1",
                 "htb", *self._htb_args(rate_bps)], ns=rl)
            parent = "1:1"
        if ngwa is not None:
            fifo = ["ngwa", "limit", str(queue_bytes(buffer)), *(["fd"] if ngwa else [])]
        elif buffer.packets is not None:
            fifo = ["pfifo", "limit", str(buffer.packets)]
        else:
            fifo = ["bfifo", "limit", str(buffer.bytes)]
        run(["tc", "qdisc", "add", "dev", "right", "parent", parent, "handle", "10:", *fifo],
            ns=rl)
        if rtt_ms > 0 or loss_pct > 0:
            half_us = str(int(round(rtt_ms * 500))) + "us"
            fwd = ["netem", "delay", half_us, "limit", str(netem_limit)]
            if loss_pct > 0:
                fwd += ["loss", f"{loss_pct:g}%"]
            run(["tc", "qdisc", "add", "dev", "right", "root", *fwd], ns=rd)
            run(["tc", "qdisc", "add", "dev", "left", "root", "netem", "delay", half_us,
                 "limit", str(netem_limit)], ns=rd)

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
        rate = f"{int(rate_bps)}bit"
        return ["rate", rate, "ceil", rate, "quantum", str(FRAME)]

    @staticmethod
    def _tbf_args(rate_bps: float) -> list[str]:
        # a bucket of 10 ms at the rate (at least two packets) keeps TBF
        # accurate whatever the kernel's HZ
        burst = max(int(rate_bps / 8 / 100), 2 * FRAME)
        return ["rate", f"{int(rate_bps)}bit", "burst", str(burst), "limit", str(4 * burst)]

    def qdisc_stats(self) -> str:
        """`tc -s` of the bottleneck and the delay routers, as text."""
        parts = []
        for ns, devs in ((self.ns("rl"), ["right"]), (self.ns("rd"), ["right", "left"])):
            for dev in devs:
                for what in (["qdisc"], ["class"]):
                    out = run(["tc", "-s", *what, "show", "dev", dev], ns=ns, check=False)
                    if out.strip():
                        parts.append(f"# {ns} {dev} {what[0]}\n{out}")
        return "\n".join(parts)

    def qdisc_stats_json(self) -> list[dict]:
        import json

        out = []
        for ns, dev in ((self.ns("rl"), "right"), (self.ns("rd"), "right"),
                        (self.ns("rd"), "left")):
            text = run(["tc", "-s", "-j", "qdisc", "show", "dev", dev], ns=ns, check=False)
            try:
                for q in json.loads(text or "[]"):
                    out.append({"router": ns.rsplit("-", 1)[1], "dev": dev, **q})
            except ValueError:
                pass
        return out

    # -- tearing down ----------------------------------------------------
    def destroy(self) -> list[str]:
        """Remove every namespace of the run; the ones that would not go."""
        left = []
        for name in reversed(self.namespaces):
            proc = subprocess.run(["ip", "netns", "del", name], capture_output=True)
            if proc.returncode != 0 and name in existing_namespaces():
                left.append(name)
        self.namespaces = [n for n in self.namespaces if n in left]
        return left


def queue_bytes(buffer: Buffer) -> int:
    """The byte limit of a queue given in packets (full frames) or bytes."""
    return buffer.bytes if buffer.bytes is not None else buffer.packets * FRAME


def existing_namespaces(prefix: str = "tcpvar-") -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines()
            if line.strip() and line.split()[0].startswith(prefix)]
