"""A testbed of network namespaces: namespaces named for the run
(`<prefix>-<tag>-<role>`), the veth links between them with their addresses
and routes, the processes started inside them, and the removal of all of it
on close (also after Ctrl-C or a failure). The dumbbell of `tcpvar run`
(topology.py), the fixtures' and the benchmarks' captures and the tests all
build on it.

    with Testbed() as bed:
        bed.node("a"); bed.node("r", forward=True); bed.node("b")
        bed.link("a", "eth0", ["10.0.1.2/24"], "r", "a", ["10.0.1.1/24"])
        ...
        bed.up()                       # namespaces, links, addresses, routes
        srv = traffic.iperf_server(bed, "b", 5201)
"""
from __future__ import annotations

import secrets
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tcpvar import signals
from tcpvar.errors import TestbedError
from tcpvar.progress import Progress, Reporter

from . import nsctl, owners
from .netns import Processes, delete_namespaces, existing_namespaces, run, run_batch

# offloads that merge or split segments: off, the captures show the packets of
# the emulated wire and the qdiscs queue real packets, not super-packets
OFFLOADS = ("tso", "gso", "gro", "lro")
LINKS_PER_BATCH = 200


def new_tag() -> str:
    return secrets.token_hex(3)


def run_script(main) -> None:
    """Exit with what @main() returns; Ctrl-C, SIGTERM and SIGHUP unwind its
    testbeds and end it with status 130 (the scripts of fixtures/ and bench/)."""
    signals.unwind_on_signals()
    try:
        sys.exit(main())
    except KeyboardInterrupt as exc:
        print(f"interrupted: {exc}", file=sys.stderr)
        sys.exit(130)


@dataclass
class _Node:
    ns: str
    sysctls: dict[str, str]
    commands: list[str] = field(default_factory=lambda: ["link set lo up"])  # ip, inside
    devs: list[str] = field(default_factory=list)


class Testbed:
    """Namespaces, links and processes of one run; close() removes them all
    (deleting a namespace removes its links and qdiscs) and ends exactly the
    processes it started, by PID."""

    def __init__(self, prefix: str = "tcpvar", tag: str | None = None):
        self.tag = tag or new_tag()
        self.prefix = f"{prefix}-{self.tag}"
        self.namespaces: list[str] = []      # created, in order
        self.procs = Processes(on_start=lambda pid: owners.add_process(self.tag, pid),
                               env={owners.MARK: self.tag})
        self._nodes: dict[str, _Node] = {}
        self._links: list[str] = []

    def ns(self, role: str) -> str:
        return f"{self.prefix}-{role}"

    # -- the plan -----------------------------------------------------------
    def node(self, role: str, forward: bool = False,
             sysctls: dict[str, str] | None = None) -> str:
        """A namespace to create; a router (@forward) forwards IPv4 and IPv6."""
        settings = dict(sysctls or {})
        if forward:
            settings["net.ipv4.ip_forward"] = "1"
            if Path("/proc/sys/net/ipv6").exists():
                settings["net.ipv6.conf.all.forwarding"] = "1"
        self._nodes[role] = _Node(self.ns(role), settings)
        return self.ns(role)

    def link(self, a: str, dev_a: str, addrs_a: list[str], b: str, dev_b: str,
             addrs_b: list[str], mtu: int | None = None) -> None:
        """A veth pair between nodes @a and @b, with their addresses
        (IPv6 ones without duplicate address detection) and each end's
        neighbour entries for the other end, permanent: no ARP or neighbour
        discovery ever waits in a queue, and a queue's counters count the
        traffic of the captures only."""
        k = len(self._links)
        mac = [f"02:74:76:{k >> 8 & 0xff:02x}:{k & 0xff:02x}:{end:02x}" for end in (1, 2)]
        mtu_arg = f" mtu {mtu}" if mtu else ""
        self._links.append(f"link add name {dev_a} address {mac[0]} netns {self.ns(a)}{mtu_arg} "
                           f"type veth peer name {dev_b} address {mac[1]} netns {self.ns(b)}"
                           f"{mtu_arg}")
        ends = ((a, dev_a, addrs_a, addrs_b, mac[1]), (b, dev_b, addrs_b, addrs_a, mac[0]))
        for role, dev, addrs, peer_addrs, peer_mac in ends:
            node = self._nodes[role]
            node.commands += [f"addr add {addr} dev {dev}" + (" nodad" if ":" in addr else "")
                              for addr in addrs]
            node.commands.append(f"link set dev {dev} up")
            node.commands += [f"neigh replace {addr.split('/')[0]} lladdr {peer_mac} dev {dev} "
                              "nud permanent" for addr in peer_addrs]
            node.devs.append(dev)

    def route(self, role: str, dest: str, via: str) -> None:
        """@dest ("default", "::/0" or a prefix) through @via, in node @role."""
        self._nodes[role].commands.append(f"route add {dest} via {via}")

    # -- building -----------------------------------------------------------
    def up(self, offloads: bool | None = False, progress: Reporter | None = None,
           phase: str = "building the testbed") -> None:
        """Create what the plan holds, telling @progress the nodes done under
        @phase. @offloads False turns TSO, GSO, GRO and LRO off on every
        link, True turns them on, None leaves the kernel's defaults.
        Commands go in batches, one process per namespace, and sysctls and
        offloads are written from this process (nsctl): in an emulated VM
        every process start costs about 0.2 s."""
        planned = [node.ns for node in self._nodes.values()]
        if taken := set(planned) & set(existing_namespaces(self.prefix)):
            raise TestbedError(f"network namespace {min(taken)} exists already")
        owners.claim(self.tag, planned)     # if this process dies, the next tcpvar removes them
        try:
            run_batch(["ip"], [f"netns add {ns}" for ns in planned])
        finally:        # those made before a failure are ours to remove
            made = set(existing_namespaces(self.prefix))
            self.namespaces += [ns for ns in planned if ns in made]
        # `ip` keeps each namespace it names open until it exits: two per
        # link, so a batch stays below the common limit of 1024 open files
        for k in range(0, len(self._links), LINKS_PER_BATCH):
            run_batch(["ip"], self._links[k:k + LINKS_PER_BATCH])
        for k, node in enumerate(self._nodes.values()):
            if progress:
                progress(Progress(phase, k + 1, len(self._nodes), "nodes"))
            # before the links come up, so e.g. no IPv6 chatter ever enters a queue
            if node.sysctls:
                nsctl.write_sysctls(node.ns, node.sysctls)
            run_batch(["ip", "-n", node.ns], node.commands)
            if offloads is not None and node.devs:
                nsctl.set_offloads(node.ns, node.devs, offloads)

    # -- processes ----------------------------------------------------------
    def start(self, name: str, role: str, args: list[str], stdout=None, stderr=None,
              text: bool = False, stdin=subprocess.DEVNULL) -> subprocess.Popen:
        """A process in node @role's namespace; stdout/stderr: a Path to
        write to, subprocess.PIPE, or None for nothing; stdin: PIPE to
        write to it."""
        return self.procs.start(name, args, ns=self.ns(role), stdout=stdout, stderr=stderr,
                                text=text, stdin=stdin)

    def run(self, role: str, args: list[str], check: bool = True) -> str:
        """A command in node @role's namespace; its stdout."""
        return run(args, ns=self.ns(role), check=check)

    # -- tearing down ---------------------------------------------------------
    def close(self) -> list[str]:
        """End the processes, remove the namespaces; the namespaces that
        would not go."""
        with signals.held():     # a cleanup half done is worse than a late Ctrl-C
            self.procs.stop_all()
            delete_namespaces(list(reversed(self.namespaces)))
            still = set(existing_namespaces(self.prefix))
            self.namespaces = [n for n in self.namespaces if n in still]
            if not self.namespaces:
                owners.release(self.tag)
            return list(self.namespaces)

    def __enter__(self) -> "Testbed":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def line(bed: Testbed, roles: list[str], prefix: str = "198.18", ipv6: bool = False,
         sysctls: dict[str, str] | None = None) -> tuple[str, str]:
    """Plan a line of nodes, hosts at both ends and routers between. Link k
    joins roles[k] (<prefix>.<k+1>.1/24) to roles[k+1] (<prefix>.<k+1>.2/24),
    each end's device named after the node at its other end; with @ipv6
    also 2001:db8:<k+1>::1 and ::2/64. @sysctls go to the two hosts.
    Returns the IPv4 addresses of the first and the last host."""
    last = len(roles) - 1

    def addr(link: int, end: int, v6: bool = False) -> str:
        return f"2001:db8:{link + 1}::{end}" if v6 else f"{prefix}.{link + 1}.{end}"

    for k, role in enumerate(roles):
        bed.node(role, forward=0 < k < last, sysctls=sysctls if k in (0, last) else None)
    for k in range(last):
        a, b = roles[k], roles[k + 1]
        bed.link(a, b, [addr(k, 1) + "/24", *[addr(k, 1, True) + "/64"] * ipv6],
                 b, a, [addr(k, 2) + "/24", *[addr(k, 2, True) + "/64"] * ipv6])
    for v6 in (False, True)[:1 + ipv6]:
        bed.route(roles[0], "::/0" if v6 else "default", addr(0, 2, v6))
        bed.route(roles[last], "::/0" if v6 else "default", addr(last - 1, 1, v6))
        for k in range(1, last):              # a router: the links beyond its neighbours
            for j in range(last):
                if j < k - 1 or j > k:
                    via = addr(k - 1, 1, v6) if j < k else addr(k, 2, v6)
                    net = f"2001:db8:{j + 1}::/64" if v6 else f"{prefix}.{j + 1}.0/24"
                    bed.route(roles[k], net, via)
    return addr(0, 1), addr(last - 1, 2)
