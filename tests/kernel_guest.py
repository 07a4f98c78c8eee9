"""Runs inside the micro-VM booted on the patched kernel (tests/test_kernel.py):
builds a small testbed of network namespaces, runs the cases named on the
command line and writes what it saw as JSON (with captures, tcp_probe traces
and tc samples) into OUT. The host side checks it all.

    python3 kernel_guest.py OUT TC CASE [CASE...]

TC is the patched tc (it knows the ngwa qdisc). Every namespace, qdisc and
process lives inside the VM. Standard library only, and tests/kernel_frames.py.
"""
from __future__ import annotations

import contextlib
import ctypes
import itertools
import json
import os
import random
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import kernel_frames as kf

OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".")
TC = sys.argv[2] if len(sys.argv) > 2 else "tc"
TRACEFS = Path("/sys/kernel/tracing")
PORT = kf.PORT
NAMESPACES = ("snd", "r1", "r2", "rcv")
RESULTS: dict = {}
UNSET = 0xFFFFFFFF


def sh(*args, check=True, timeout=180) -> str:
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args))}: {done.stderr.strip()}")
    return done.stdout


def ns(name, *args, check=True, timeout=180) -> str:
    return sh("ip", "netns", "exec", name, *args, check=check, timeout=timeout)


_LIBC = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000


@contextlib.contextmanager
def inside(name: str):
    """This thread in network namespace @name: sockets made here stay in it,
    /proc/sys/net and /proc/thread-self/net are its. Python started in a
    namespace costs seconds under TCG; a thread that moves costs nothing."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    there = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        if _LIBC.setns(there, CLONE_NEWNET):
            raise OSError(ctypes.get_errno(), f"setns {name}")
        yield
    finally:
        _LIBC.setns(home, CLONE_NEWNET)
        os.close(home)
        os.close(there)


def sysctls(name, **values):
    with inside(name):
        for k, v in values.items():
            Path(f"/proc/sys/net/ipv4/{k}").write_text(f"{v}\n")


def read_sysctl(name, key) -> str:
    with inside(name):
        return Path("/proc/sys", *key.split(".")).read_text().strip()


# --- the testbed: snd -- r1 -- r2 -- rcv -------------------------------------

def batch(prog: list[str], lines: list[str], check=True) -> None:
    """Many ip or tc commands in one process (`-batch -`): under TCG a
    process costs a good part of a second."""
    done = subprocess.run([*prog, "-batch", "-"], input="\n".join(lines) + "\n",
                          capture_output=True, text=True, timeout=180)
    if check and done.returncode:
        raise RuntimeError(f"{' '.join(prog)} -batch: {done.stderr.strip()[:300]}")


def teardown():
    batch(["ip", "-force"], [f"netns del {n}" for n in NAMESPACES], check=False)


LINKS = (("snd", "eth0", "10.0.1.1", "r1", "eth0", "10.0.1.254"),
         ("r1", "eth1", "10.0.2.1", "r2", "eth0", "10.0.2.2"),
         ("r2", "eth1", "10.0.3.254", "rcv", "eth0", "10.0.3.1"))
ROUTES = {"snd": ["route add default via 10.0.1.254"],
          "rcv": ["route add default via 10.0.3.254"],
          "r1": ["route add 10.0.3.0/24 via 10.0.2.2", "route add 10.0.4.0/24 via 10.0.2.2"],
          "r2": ["route add blackhole 10.0.4.0/24", "route add 10.0.1.0/24 via 10.0.2.1"]}
ROUTES6 = {"snd": ["route add ::/0 via fd00:1::254"], "rcv": ["route add ::/0 via fd00:3::254"],
           "r1": ["route add fd00:3::/64 via fd00:2::2"],
           "r2": ["route add fd00:1::/64 via fd00:2::1"]}


def testbed(rate="10mbit", delay_ms=10, r1_limit=60000, r2_limit=45000, r1_qdisc="ngwa",
            r1_args="nofd", r2_ngwa=True, offloads=False, ipv6=False, shaper="tbf",
            r2_stab="", narrow_mtu=0):
    """snd (10.0.1.1) -> r1 -> r2 -> rcv (10.0.3.1). r1's egress to r2 is the
    bottleneck: TBF (burst 3000 bytes) or HTB (@shaper) at @rate with a
    child queue (@r1_qdisc, ngwa with @r1_args, or bfifo) of @r1_limit
    bytes; r2's egress to rcv has an ngwa queue of @r2_limit bytes (at the
    same rate, so it rarely fills), with the size table @r2_stab (tc's
    words) if given. netem delays the ACKs by @delay_ms on rcv's egress. r2
    drops 10.0.4.0/24 (a sink for spoofed traffic). Offloads are off unless
    @offloads (then GRO is on at every hop too); @ipv6 adds fd00:N::/64
    addresses and routes; @narrow_mtu, the MTU of r2's egress to rcv
    (a narrower hop after the bottleneck)."""
    teardown()
    batch(["ip"], [f"netns add {n}" for n in NAMESPACES] +
          [f"link add {ai} netns {a} type veth peer name {bi} netns {b}"
           for a, ai, _, b, bi, _ in LINKS])
    ip = {n: ["link set lo up"] for n in NAMESPACES}
    shell = {n: [] for n in NAMESPACES}
    feats = "tso on gso on gro on" if offloads else "tso off gso off gro off"
    for net, (a, ai, aa, b, bi, ba) in enumerate(LINKS, 1):
        for n, dev, addr in ((a, ai, aa), (b, bi, ba)):
            ip[n] += [f"addr add {addr}/24 dev {dev}", f"link set {dev} up"]
            if ipv6:
                ip[n].append(f"addr add fd00:{net}::{addr.split('.')[-1]}/64 dev {dev} nodad")
            shell[n].append(f"ethtool -K {dev} {feats} >/dev/null 2>&1 || true")
    if narrow_mtu:
        ip["r2"].append(f"link set eth1 mtu {narrow_mtu}")
    for n in NAMESPACES:
        batch(["ip", "-n", n], ip[n] + ROUTES[n] + (ROUTES6[n] if ipv6 else []))
    for r in ("r1", "r2"):
        shell[r] += ["sysctl -qw net.ipv4.ip_forward=1",
                     "sysctl -qw net.ipv6.conf.all.forwarding=1"]
    for n in NAMESPACES:
        ns(n, "sh", "-ec", "\n".join(shell[n]))
    r1 = ([f"qdisc add dev eth1 root handle 1: tbf rate {rate} burst 3000 limit 3000"]
          if shaper == "tbf" else
          ["qdisc add dev eth1 root handle 1: htb default 1",
           f"class add dev eth1 parent 1: classid 1:1 htb rate {rate}"])
    r1.append(f"qdisc add dev eth1 parent 1:1 handle 10: {r1_qdisc} limit {r1_limit} "
              f"{r1_args if r1_qdisc == 'ngwa' else ''}")
    batch([TC, "-n", "r1"], r1)
    if r2_ngwa:
        batch([TC, "-n", "r2"], [f"qdisc add dev eth1 root {r2_stab} ngwa limit {r2_limit}"])
    batch([TC, "-n", "rcv"], [f"qdisc add dev eth0 root netem delay {delay_ms}ms"])


def r1_queue(qdisc="ngwa", limit=60000, args="nofd"):
    """A new queue under r1's shaper (new counters, new flow table: replacing
    a queue of the same kind would only change its parameters)."""
    batch([TC, "-n", "r1"], ["qdisc del dev eth1 parent 1:1 handle 10:",
                             f"qdisc add dev eth1 parent 1:1 handle 10: {qdisc} "
                             f"limit {limit} {args if qdisc == 'ngwa' else ''}"])


MODES = {1: (True, False, False), 2: (True, True, False), 3: (False, False, False),
         4: (False, True, False), 5: (True, False, True), 6: (True, True, True),
         7: (False, False, True), 8: (False, True, True)}


def ngwa_mode(mode: int, who=("snd", "rcv")) -> bool:
    """The paper's Table 1: mode -> (congestion window, smoothing, flow division)."""
    cw, se, fd = MODES[mode]
    for n in who:
        sysctls(n, tcp_ngwa=1, tcp_ngwa_cwnd=int(cw), tcp_ngwa_smooth=int(se),
                tcp_congestion_control="reno")
    return fd


# --- tools ----------------------------------------------------------------------

class Capture:
    """tcpdump of one interface of one namespace (headers only)."""

    def __init__(self, name, iface, path, filt="tcp", snaplen=128, out_only=False):
        self.path = path
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", name, "tcpdump", "-i", iface, "-s", str(snaplen), "-U",
             *(["-Q", "out"] if out_only else []),
             "--immediate-mode", "-n", "-B", "8192", "-w", str(path), *([filt] if filt else [])],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE)
        line = self.proc.stderr.readline()     # "listening on" once it captures
        if b"listening" not in line:
            raise RuntimeError(f"tcpdump: {line!r}")

    def stop(self) -> str:
        # tcpdump drops what it has not read yet when signalled, and under a
        # debug kernel it can lag the traffic by seconds: wait until its file
        # (written packet by packet, -U) has not grown for 2 s: with half a
        # second as the test, one run's capture ended 18 s before its flow
        size, still, end = -1, 0, time.monotonic() + 120
        while time.monotonic() < end and still < 4:
            now = self.path.stat().st_size
            still = still + 1 if now == size else 0
            size = now
            time.sleep(0.5)
        self.proc.send_signal(signal.SIGINT)
        _, err = self.proc.communicate(timeout=60)
        return err.decode(errors="replace")


class Probe:
    """tcp:tcp_probe events of port PORT, from the top-level trace buffer.

    The event is enabled on the kernel command line (trace_event=tcp:tcp_probe,
    tests/test_kernel.py): enabling a tracepoint at run time patches kernel
    text, which under TCG with two vCPUs now and then ends in an oops. Starting
    and stopping is tracing_on and a filter, which patch nothing."""

    def __init__(self):
        if not (TRACEFS / "events").is_dir():
            sh("mount", "-t", "tracefs", "nodev", str(TRACEFS), check=False)
        ev = TRACEFS / "events" / "tcp" / "tcp_probe"
        if (ev / "enable").read_text().strip() != "1":
            raise RuntimeError("tcp:tcp_probe is not enabled: boot with "
                               "trace_event=tcp:tcp_probe")
        (TRACEFS / "tracing_on").write_text("0")
        (TRACEFS / "buffer_size_kb").write_text("16384")
        (ev / "filter").write_text(f"sport == {PORT} || dport == {PORT}")
        (TRACEFS / "trace").write_text("")
        (TRACEFS / "tracing_on").write_text("1")

    def stop(self, raw: Path | None = None) -> list[dict]:
        (TRACEFS / "tracing_on").write_text("0")
        text = (TRACEFS / "trace").read_text()
        if raw is not None:
            raw.write_text(text)
        return parse_probe(text)


FIELD = re.compile(r"(\w+)=(\S+)")


def parse_probe(text: str) -> list[dict]:
    events = []
    for line in text.splitlines():
        if line.startswith("#") or "tcp_probe:" not in line:
            continue
        ts = float(line.split("tcp_probe:")[0].split()[-1].rstrip(":"))
        ev = {"t": ts}
        for k, v in FIELD.findall(line.split("tcp_probe:", 1)[1]):
            ev[k] = v if k in ("family", "src", "dest", "sock_cookie") else int(v, 0)
        events.append(ev)
    return events


class TcSampler:
    """`tc -s -j qdisc show` of one device, sampled in a thread by one tc
    reading its commands from a pipe (a process each would take a second
    under TCG): each sample is (time before, time after, the qdiscs as tc
    printed them)."""

    def __init__(self, name, dev, period=0.05):
        self.command = f"qdisc show dev {dev}\n"
        self.tc = subprocess.Popen(["stdbuf", "-oL", TC, "-n", name, "-s", "-j", "-batch", "-"],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.period, self.samples, self.halt = period, [], threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        # the first sample before any traffic: tc's start takes a second
        # under TCG, and many on a busy host, longer than a 4 s flow
        deadline = time.monotonic() + 120
        while not self.samples and time.monotonic() < deadline:
            time.sleep(0.05)

    def _run(self):
        while not self.halt.is_set():
            t0 = time.time()
            self.tc.stdin.write(self.command)
            self.tc.stdin.flush()
            line = self.tc.stdout.readline()
            self.samples.append({"t0": t0, "t1": time.time(), "qdiscs": json.loads(line)})
            self.halt.wait(self.period)

    def stop(self) -> list[dict]:
        self.halt.set()
        self.thread.join(timeout=60)
        self.tc.stdin.close()
        self.tc.wait(timeout=30)
        return self.samples


def tc_json(name, dev) -> list[dict]:
    return json.loads(sh(TC, "-n", name, "-s", "-j", "qdisc", "show", "dev", dev))


def ngwa_of(qdiscs: list[dict]) -> dict:
    return next(q for q in qdiscs if q.get("kind") == "ngwa")


def wait_listening(name="rcv", port=PORT, timeout=60.0):
    """Until a socket in @name listens on @port (state 0A in /proc/net/tcp*)."""
    end = time.monotonic() + timeout
    want = f":{port:04X} "
    while time.monotonic() < end:
        with inside(name):
            tables = [Path(f"/proc/thread-self/net/{t}").read_text() for t in ("tcp", "tcp6")]
        if any(want in line and line.split()[3] == "0A"
               for table in tables for line in table.splitlines()[1:]):
            return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on port {port} in {name}")


def iperf(seconds=4, parallel=1, extra=()):
    """An iperf3 run snd -> rcv; its JSON document."""
    server = subprocess.Popen(["ip", "netns", "exec", "rcv", "iperf3", "-s", "-1",
                               "-p", str(PORT)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    wait_listening()
    try:
        out = ns("snd", "iperf3", "-c", "10.0.3.1", "-p", PORT, "-t", seconds,
                 "-P", parallel, "-J", *extra, timeout=seconds * 6 + 120)
    finally:
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    return json.loads(out)


def iperf_summary(doc) -> dict:
    if "streams" not in doc.get("end", {}):
        raise RuntimeError(f"iperf3: {doc.get('error', 'no result')}")
    return {"streams": [{"bytes": s["sender"]["bytes"],
                         "retransmits": s["sender"].get("retransmits", 0)}
                        for s in doc["end"]["streams"]]}


def qdisc_stats(name, dev) -> str:
    return sh(TC, "-n", name, "-s", "qdisc", "show", "dev", dev)


def netstat(name=None) -> dict:
    with inside(name) if name else contextlib.nullcontext():
        text = Path("/proc/thread-self/net/netstat").read_text()
    lines = text.splitlines()
    values = {}
    for head, vals in zip(lines[::2], lines[1::2]):
        prefix = head.split(":")[0]
        for k, v in zip(head.split()[1:], vals.split()[1:]):
            values[prefix + k] = int(v)
    return values


# --- traffic made in this process, its sockets in the namespaces ----------------

def in_thread(fn, *args) -> threading.Thread:
    t = threading.Thread(target=fn, args=args, daemon=True)
    t.start()
    return t


class Sink:
    """A server in @name accepting @flows connections and draining them;
    result() is the bytes of each, once all have closed."""

    def __init__(self, flows=1, port=PORT, family=socket.AF_INET, name="rcv"):
        with inside(name):
            self.srv = socket.socket(family, socket.SOCK_STREAM)
        self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.srv.bind(("::" if family == socket.AF_INET6 else "0.0.0.0", port))
        self.srv.listen(flows)
        self.got = [0] * flows
        self.thread = in_thread(self._serve, flows)

    def _serve(self, flows):
        drains = []
        for i in range(flows):
            conn, _ = self.srv.accept()
            drains.append(in_thread(self._drain, i, conn))
        for t in drains:
            t.join()
        self.srv.close()

    def _drain(self, i, conn):
        try:
            while data := conn.recv(1 << 16):
                self.got[i] += len(data)
        except ConnectionResetError:
            pass
        conn.close()

    def result(self, timeout=300.0) -> list[int]:
        self.thread.join(timeout)
        return self.got


def connect(dst: str, port: int = PORT, name: str = "snd") -> socket.socket:
    family = socket.AF_INET6 if ":" in dst else socket.AF_INET
    with inside(name):
        c = socket.socket(family, socket.SOCK_STREAM)
    c.connect((dst, port))
    return c


def pump(seconds: float, dst="10.0.3.1", port=PORT, stop: threading.Event | None = None):
    """A connection sending as fast as it can for @seconds, or until @stop.
    @stop shuts the socket down, which wakes a send blocked on a shut window
    or a link that is down (case_fd's waited a minute for its join)."""
    c, buf = connect(dst, port), b"\0" * (1 << 16)
    if stop is not None:
        in_thread(_shut_on, stop, c)
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end and not (stop and stop.is_set()):
            c.sendall(buf)
    except OSError:
        pass                              # its path went down, or @stop, on purpose
    c.close()


def send_until(c: socket.socket, stop: threading.Event) -> None:
    """Send on @c as fast as it can until @stop."""
    in_thread(_shut_on, stop, c)
    try:
        while not stop.is_set():
            c.sendall(b"\0" * (1 << 16))
    except OSError:
        pass                              # @stop shut it down
    c.close()


def transfer(nbytes: int, timeout: float, port: int, maxseg: int = 0) -> dict:
    """@nbytes from snd to rcv over one connection (its MSS @maxseg if
    given), closed once sent: the bytes received within @timeout s."""
    sink = Sink(1, port)
    with inside("snd"):
        c = socket.socket()
    if maxseg:
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, maxseg)
    c.settimeout(timeout)
    t0 = time.monotonic()
    try:
        c.connect(("10.0.3.1", port))
        c.sendall(b"t" * nbytes)
    except OSError:
        pass                              # stalled: the bytes received tell
    c.close()
    got = sink.result(timeout=max(1.0, timeout - (time.monotonic() - t0)))[0]
    return {"sent": nbytes, "received": got, "took_s": round(time.monotonic() - t0, 1)}


def sized_sender(sizes, port: int) -> None:
    """One segment of each of @sizes bytes (NODELAY), each once the one
    before was acknowledged: the queues are empty when each crosses them."""
    c = connect("10.0.3.1", port)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for n in sizes:
        c.sendall(b"s" * n)
        wait_acked(c)
        time.sleep(0.05)
    c.close()


def _shut_on(stop: threading.Event, c: socket.socket) -> None:
    stop.wait()
    try:
        c.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass                              # closed already: the pump ran its time


def bulk(seconds=4, flows=1) -> list[int]:
    """Plain TCP bulk flows snd -> rcv (no control connection, unlike
    iperf3): bytes received per flow."""
    sink = Sink(flows)
    pumps = [in_thread(pump, seconds) for _ in range(flows)]
    for t in pumps:
        t.join()
    return sink.result()


def _unacked(sock) -> int:
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    return struct.unpack_from("I", info, 24)[0]      # tcpi_unacked


def wait_acked(sock, timeout: float = 10.0) -> None:
    """Until all @sock sent is acknowledged, or @timeout s passed."""
    end = time.monotonic() + timeout
    while _unacked(sock) and time.monotonic() < end:
        time.sleep(0.005)


def ngwa_ip_options(value: int) -> bytes:
    return bytes([33, 6]) + value.to_bytes(4, "big") + b"\0\0"


def spec_options(item: str) -> bytes:
    """The IPv4 options of one item of an option_sender() spec."""
    if item == "none":
        return b""
    if item.startswith("len"):              # a malformed length, the value after it
        length, value = item[3:].split(":")
        return kf.ngwa(int(value), int(length))
    if item.startswith("twice:"):           # two well-formed options
        return kf.ngwa(int(item[6:])) * 2
    return ngwa_ip_options(UNSET if item == "unset" else int(item))


def option_sender(spec: str):
    """One 100-byte segment per item of @spec (comma-separated: a value,
    'unset', 'none' for no option, 'lenN:value' for an option of length N,
    'twice:value' for the option twice), the options set on the socket with
    IP_OPTIONS; each waits for its ACK before the next."""
    c = connect("10.0.3.1")
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for item in spec.split(","):
        opts = spec_options(item)
        c.setsockopt(socket.IPPROTO_IP, socket.IP_OPTIONS, opts)
        c.sendall(b"v" * 100)
        wait_acked(c)
    time.sleep(0.3)
    c.close()


def listener(port: int) -> socket.socket:
    """A socket of rcv's listening on @port for one connection."""
    with inside("rcv"):
        srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(1)
    return srv


def reply_sink(size: int, wait: float):
    """Accept one connection, read @size bytes, wait @wait seconds and send
    one byte back: the window of that byte is built after the wait."""
    srv = listener(PORT)

    def serve():
        conn, _ = srv.accept()
        got = 0
        while got < size:
            got += len(conn.recv(1 << 16))
        time.sleep(wait)
        conn.sendall(b"r")
        while conn.recv(1 << 16):
            pass
        srv.close()

    return in_thread(serve)


def reply_source(size: int, value: int):
    """@size bytes, every segment with NGWA @value; then wait for the reply."""
    c = connect("10.0.3.1")
    c.setsockopt(socket.IPPROTO_IP, socket.IP_OPTIONS, ngwa_ip_options(value))
    c.sendall(b"v" * size)
    c.settimeout(60)
    c.recv(1)
    c.close()


def mapped(seconds: float, port: int) -> int:
    """An AF_INET6 socket connected to the receiver's v4-mapped address (it
    gets NGWA), sending for @seconds: the bytes sent. (Linux 6.1 cannot
    move such a socket to an IPv6 peer: after connect(AF_UNSPEC) its
    af_ops stay mapped, and a connect to an IPv6 address sends IPv4 SYNs.)"""
    with inside("snd"):
        c = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    c.connect(("::ffff:10.0.3.1", port))
    n, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        n += c.send(b"m" * 65536)
    c.close()
    return n


def packet_socket(name: str, dev: str) -> socket.socket:
    with inside(name):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        s.bind((dev, 0))
    return s


def tx_dropped(name: str, dev: str) -> int:
    """Frames @dev dropped on the way out (a veth's: its peer's input
    backlog was full)."""
    link = json.loads(sh("ip", "-n", name, "-s", "-j", "link", "show", "dev", dev))
    return link[0]["stats64"]["tx"]["dropped"]


def mac(name: str, dev: str) -> bytes:
    # a packet socket's address, not sysfs: /sys shows the devices of the
    # namespace that mounted it, not those of the namespace entered
    with packet_socket(name, dev) as s:
        return s.getsockname()[4]


def hostile_routed(count: int, seed: int) -> dict:
    """@count hostile frames from snd's eth0 to r1 (IPv4 input, forwarding,
    the ngwa qdisc, r2, then rcv's TCP or r2's blackhole), by category."""
    sock = packet_socket("snd", "eth0")
    counts: dict = {}
    for cat, frame in kf.routed_frames(seed, count, mac("r1", "eth0"), mac("snd", "eth0"),
                                       PORT):
        try:
            sock.send(frame)
        except OSError:
            cat = "refused_by_packet_socket"
        counts[cat] = counts.get(cat, 0) + 1
    sock.close()
    return counts


def hostile_qdisc(count: int, seed: int) -> dict:
    """@count frames of garbage handed to r1's eth1, straight into its ngwa
    qdisc (a packet socket's frames take the qdisc, not IPv4's checks)."""
    sock = packet_socket("r1", "eth1")
    refused = []
    for i, frame in enumerate(kf.garbage_frames(seed, count, mac("r2", "eth0"),
                                                mac("r1", "eth1"))):
        try:
            sock.send(frame)
        except OSError:
            refused.append(i)
    sock.close()
    return {"sent": count - len(refused), "refused": refused}


def hostile_copies(count: int, seed: int) -> dict:
    """@count copies of the data segments a real connection (port PORT) sends
    from snd, in window for the receiver, with hostile IPv4 options in place
    of their own."""
    options = kf.copy_options(seed, count)
    with inside("snd"):
        # ETH_P_ALL: the frames a host sends reach only such sockets
        rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
        rx.bind(("eth0", 0))
    rx.settimeout(30)            # the real connection stalled: an error, not a hang
    end = time.monotonic() + 600
    tx = packet_socket("snd", "eth0")
    sent = 0
    while sent < count:
        if time.monotonic() > end:
            raise TimeoutError(f"{sent} of {count} copies in 600 s")
        frame, addr = rx.recvfrom(2048)
        if addr[2] != socket.PACKET_OUTGOING or len(frame) < 54:
            continue
        ip = frame[14:]
        ihl = (ip[0] & 0xF) * 4
        if ip[9] != 6 or struct.unpack("!H", ip[ihl + 2:ihl + 4])[0] != PORT:
            continue
        segment = ip[ihl:struct.unpack("!H", ip[2:4])[0]]
        # data of the established connection only: a copy of its SYN with a
        # bad option draws an ICMP parameter problem that fails the connect
        if len(segment) <= (segment[12] >> 4) * 4 or segment[13] & 0x02:
            continue
        # cut to leave room for 40 bytes of options within the MTU, the
        # checksum made right again: the copy stays in window for TCP
        segment = kf.tcp_checksummed("10.0.1.1", "10.0.3.1",
                                     segment[:16] + b"\0\0" + segment[18:1440])
        for opts, ident in itertools.islice(options, 8):
            tx.send(frame[:14] + kf.ipv4("10.0.1.1", "10.0.3.1", segment, opts, ident=ident))
            sent += 1
    rx.close()
    tx.close()
    return {"sent": sent}


def spoof(count: int, completed: int, seed: int) -> dict:
    """@count SYNs from spoofed sources in 10.0.1.0/24 to 10.0.4.0/24 (r2
    drops them); the first @completed followed by a segment of data with the
    sequence number next to the SYN's (a flow sending data in sequence)."""
    rng, sock = random.Random(seed), packet_socket("snd", "eth0")
    macs = (mac("r1", "eth0"), mac("snd", "eth0"))
    for i in range(count):
        src, dst = f"10.0.1.{rng.randint(2, 250)}", f"10.0.4.{rng.randint(1, 254)}"
        sport, dport, seq = rng.randint(1024, 65535), rng.randint(1, 65535), rng.getrandbits(32)
        sock.send(kf.syn(src, dst, sport, dport, seq, macs))
        if i < completed:
            sock.send(kf.syn(src, dst, sport, dport, seq + 1, macs, flags=0x18,
                             data=b"x"))
    sock.close()
    return {"syns": count, "completed": completed}


def flood(seconds: float, seed: int, real: tuple, every: int = 20) -> dict:
    """Spoofed SYNs from 10.0.1.0/24 to 10.0.4.0/24 (r2 drops them) for
    @seconds, as fast as this process sends them; every @every-th, one more
    on the 4-tuple @real (source, port, destination, port) of a real flow."""
    rng, sock = random.Random(seed), packet_socket("snd", "eth0")
    macs = (mac("r1", "eth0"), mac("snd", "eth0"))
    syns = on_real = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sock.send(kf.syn(f"10.0.1.{rng.randint(2, 250)}", f"10.0.4.{rng.randint(1, 254)}",
                         rng.randint(1024, 65535), rng.randint(1, 65535), rng.getrandbits(32),
                         macs))
        syns += 1
        if syns % every == 0:
            sock.send(kf.syn(real[0], real[2], real[1], real[3], rng.getrandbits(32), macs))
            on_real += 1
    sock.close()
    return {"syns": syns, "on_real": on_real}


# --- cases ----------------------------------------------------------------------

KNOBS = ("tcp_ngwa", "tcp_ngwa_cwnd", "tcp_ngwa_smooth", "tcp_ngwa_alpha", "tcp_ngwa_hold_ms",
         "tcp_ngwa_option", "tcp_wbrto", "tcp_wbrto_scale", "tcp_wbrto_unit_ms",
         "tcp_wbrto_awnd_gain", "tcp_wbrto_thresholds", "tcp_wbrto_cutoffs",
         "tcp_wbrto_weights")
# (sysctl, value written) in a namespace of their own: refused or taken
KNOB_WRITES = (("tcp_ngwa_option", "34"), ("tcp_ngwa_option", "161"),
               ("tcp_ngwa_option", "94"), ("tcp_ngwa_option", "222"),
               ("tcp_wbrto_thresholds", "10 5 30"), ("tcp_wbrto_thresholds", "3 6 12"),
               ("tcp_wbrto_cutoffs", "800 700"), ("tcp_wbrto_cutoffs", "400 800"),
               ("tcp_wbrto_weights", "10 20 30 40"), ("tcp_wbrto_weights", "40 30 20 10"),
               ("tcp_wbrto_weights", "300 30 20 10"), ("tcp_wbrto_scale", "4"),
               ("tcp_ngwa_hold_ms", "60001"), ("tcp_wbrto_awnd_gain", "0"))
TC_WRITES = ("option 94", "option 34", "flows 0", "flows 20000", "timeout 0", "limit 0")


def uncapped_write(key: str, value: str) -> int:
    """Write @value to net.ipv4.@key in a new network namespace as root
    without CAP_NET_ADMIN in the initial user namespace, as the root of a
    user namespace is (tcpvar's kernel has no user namespaces; the check is
    the same capable()): the exit status (0 done)."""
    return subprocess.run(["unshare", "--net", "setpriv", "--bounding-set=-net_admin",
                           "--inh-caps=-net_admin", "sh", "-c",
                           f"echo {value} > /proc/sys/net/ipv4/{key}"],
                          capture_output=True, text=True, timeout=120).returncode


SWITCHES = ("tcp_ngwa", "tcp_wbrto")


def case_basic():
    """The tracepoint's format, the sysctls (defaults, refused values), the
    variants, BTF, the qdisc's parameters in tc; NGWA's and WB-RTO's
    switches written without CAP_NET_ADMIN before and after root turned
    them on in a namespace of its own (the first case of its boot: nothing
    turned them on before)."""
    uncapped = {"before": {k: uncapped_write(k, "1") for k in SWITCHES}}
    if not (TRACEFS / "events").is_dir():
        sh("mount", "-t", "tracefs", "nodev", str(TRACEFS), check=False)
    fmt = (TRACEFS / "events" / "tcp" / "tcp_probe" / "format").read_text()
    names = re.findall(r"field:[^;]*?\b(\w+)(?:\[[^\]]*\])?;", fmt)
    defaults = {k: " ".join(Path(f"/proc/sys/net/ipv4/{k}").read_text().split())
                for k in KNOBS}
    sh("ip", "netns", "add", "knobs")
    writes = []
    for key, value in KNOB_WRITES:
        with inside("knobs"):
            path = Path(f"/proc/sys/net/ipv4/{key}")
            try:
                path.write_text(value + "\n")
                status = 0
            except OSError as exc:
                status = exc.errno
            writes.append([key, value, status, " ".join(path.read_text().split())])
    with inside("knobs"):
        for k in SWITCHES:
            Path(f"/proc/sys/net/ipv4/{k}").write_text("1\n")
    sh("ip", "netns", "del", "knobs")
    uncapped["after"] = {k: uncapped_write(k, "1") for k in SWITCHES}
    uncapped["off"] = {k: uncapped_write(k, "0") for k in SWITCHES}
    sh("ip", "link", "add", "d0", "type", "dummy")
    sh(TC, "qdisc", "add", "dev", "d0", "root", "ngwa", "limit", "50kb", "fd", "flows", "100",
       "timeout", "2s")
    shown = sh(TC, "-s", "qdisc", "show", "dev", "d0")
    tc_writes = []
    for args in TC_WRITES:
        done = subprocess.run([TC, "qdisc", "change", "dev", "d0", "root", "ngwa",
                               *args.split()], capture_output=True, text=True)
        tc_writes.append([args, done.returncode, done.stderr.strip(),
                          sh(TC, "qdisc", "show", "dev", "d0").strip()])
    sh("ip", "link", "del", "d0")
    RESULTS["basic"] = {
        "format_fields": names,
        "print_fmt": fmt.split("print fmt:", 1)[1].strip(),
        "sysctls": defaults,
        "knob_writes": writes,
        "available_cc": Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .read_text().split(),
        "btf": Path("/sys/kernel/btf/vmlinux").is_file(),
        "release": os.uname().release,
        "tc_show": shown,
        "tc_writes": tc_writes,
        "uncapped": uncapped,
    }


def case_malformed():
    """Malformed NGWA options from a raw socket to 127.0.0.1: each one
    counted once in TcpExtNGWABadOption, the well-formed one not."""
    good = kf.ngwa(1000)
    cases = {
        **{f"len{n}": bytes([33, n]) + b"\x00" * (n - 2) for n in (2, 3, 4, 5, 7, 8, 12)},
        "truncated": bytes([1, 1, 33, 6]),
        "truncated_type_only": bytes([1, 1, 1, 33]),
        "length_past_header": bytes([33, 40, 0, 0]),
        "repeated": good + bytes([1, 1]) + good,
        "len0": bytes([33, 0, 0, 0]),
        "len1": bytes([33, 1, 0, 0]),
    }
    syn = kf.tcp(40000, 9, 1, 0, 0x02)
    sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    before = netstat()
    for opt in cases.values():
        for _ in range(3):
            sock.sendto(kf.ipv4("127.0.0.1", "127.0.0.1", syn, opt), ("127.0.0.1", 0))
    sock.sendto(kf.ipv4("127.0.0.1", "127.0.0.1", syn, good), ("127.0.0.1", 0))
    sock.close()
    time.sleep(0.5)
    counted = netstat().get("TcpExtNGWABadOption", -1) - before.get("TcpExtNGWABadOption", 0)
    # a socket's own options that run past their end: refused, not counted
    s = socket.socket()
    try:
        s.setsockopt(socket.IPPROTO_IP, socket.IP_OPTIONS, bytes([33, 40, 0, 0]))
        refused = 0
    except OSError as exc:
        refused = exc.errno
    s.close()
    RESULTS["malformed"] = {
        "sent": {name: 3 for name in cases},
        "bad_counted": counted,
        "setsockopt_refused": refused,
        "setsockopt_counted": netstat().get("TcpExtNGWABadOption", -1)
        - before.get("TcpExtNGWABadOption", 0) - counted,
    }


# the NGWA values a sender sets, segment by segment, for the receiver's eq. (4):
# 'unset' and 'none' (no option) release the receiver's window; 0 is the
# value that, kept for ever, held a connection at the floor
SMOOTH_SPEC = ("40000,20000,60000,1000,30000,unset,50000,10000,none,5000,0,25000,unset,"
               "45000,3000,3000,70000,65535,none")
# malformed options on an established connection, between well-formed ones:
# lengths 8, 4 and 12, and the option twice, with values that would lower
# the window or release it
MALFORMED_SPEC = ("40000,len8:5000,twice:5000,len4:5000,len12:5000,len8:4294967295,30000,"
                  "twice:4294967295,len8:1000,none")


def case_smooth():
    """A known sequence of NGWA values (set with IP_OPTIONS on the sender),
    received with and without smoothing: the receiver's window, event by
    event from tcp_probe, and its releases."""
    out = {}
    testbed(r1_qdisc="bfifo", r2_ngwa=False)
    for label, smooth, alpha, spec in (("a300", 1, 300, SMOOTH_SPEC),
                                       ("a700", 1, 700, SMOOTH_SPEC),
                                       ("plain", 0, 300, SMOOTH_SPEC),
                                       ("malformed", 0, 300, MALFORMED_SPEC)):
        sysctls("rcv", tcp_ngwa=1, tcp_ngwa_smooth=smooth, tcp_ngwa_alpha=alpha,
                tcp_ngwa_hold_ms=0)
        before = netstat("rcv")
        sink = Sink()
        probe = Probe()
        option_sender(spec)
        sink.result()
        events = probe.stop()
        after = netstat("rcv")
        rcv = [e for e in events if e["src"].endswith(f":{PORT}") and e["data_len"] > 0]
        out[label] = {
            "smooth": smooth, "alpha": alpha, "spec": spec.split(","),
            "ngwa_window": [e["ngwa_window"] for e in rcv],
            "data_len": [e["data_len"] for e in rcv],
            "released": after["TcpExtNGWARelease"] - before["TcpExtNGWARelease"],
            "received": after["TcpExtNGWARcvOption"] - before["TcpExtNGWARcvOption"],
            "bad": after["TcpExtNGWABadOption"] - before["TcpExtNGWABadOption"],
        }
    teardown()
    RESULTS["smooth"] = out


def case_age():
    """A sender holds the receiver at NGWA 3000 for 300 kB, then the receiver
    waits 3 s and sends a byte: with tcp_ngwa_hold_ms 1000 the value has aged
    out by then, with 0 it holds."""
    out = {}
    testbed(r1_qdisc="bfifo", r2_ngwa=False)
    for hold in (1000, 0):
        sysctls("rcv", tcp_ngwa=1, tcp_ngwa_hold_ms=hold)
        before = netstat("rcv")
        cap = Capture("rcv", "eth0", OUT / f"age_{hold}.pcap")
        sink = reply_sink(300000, 3.0)
        reply_source(300000, 3000)
        sink.join(timeout=120)
        cap.stop()
        after = netstat("rcv")
        out[str(hold)] = {"released": after["TcpExtNGWARelease"] - before["TcpExtNGWARelease"],
                          "mss": 1448, "value": 3000}
    teardown()
    RESULTS["age"] = out


def half_closed_sink(size: int, port: int):
    """Accept one connection, close its sending side at once (the receiver
    in FIN_WAIT from then on), then read @size bytes."""
    srv = listener(port)

    def serve():
        conn, _ = srv.accept()
        conn.shutdown(socket.SHUT_WR)
        got = 0
        while got < size and (data := conn.recv(1 << 16)):
            got += len(data)
        conn.close()
        srv.close()

    return in_thread(serve)


def case_finwait():
    """A receiver that closed its side first reads 300 kB whose segments
    carry NGWA 3000 (IP_OPTIONS on the sender)."""
    testbed(r1_qdisc="bfifo", r2_ngwa=False)
    sysctls("rcv", tcp_ngwa=1)
    cap = Capture("rcv", "eth0", OUT / "finwait.pcap")
    sink = half_closed_sink(300000, PORT + 3)
    c = connect("10.0.3.1", PORT + 3)
    c.setsockopt(socket.IPPROTO_IP, socket.IP_OPTIONS, ngwa_ip_options(3000))
    c.sendall(b"f" * 300000)
    sink.join(timeout=120)
    c.close()
    cap.stop()
    RESULTS["finwait"] = {"value": 3000}
    teardown()


L2TP = ("la", "lb")


def case_l2tp():
    """An NGWA sender's connection through an L2TPv3 pseudowire over UDP
    (la 10.9.1.1 -> lb 10.9.1.2, the tunnel between 10.9.0.1 and 10.9.0.2):
    the inner segments carry the option, the tunnel's UDP packets none."""
    batch(["ip", "-force"], [f"netns del {n}" for n in L2TP], check=False)
    batch(["ip"], [f"netns add {n}" for n in L2TP] +
          ["link add va netns la type veth peer name vb netns lb"])
    for n, me, peer, dev, tid, sid in (("la", 1, 2, "va", 1, 1), ("lb", 2, 1, "vb", 2, 2)):
        batch(["ip", "-n", n], [
            "link set lo up", f"addr add 10.9.0.{me}/24 dev {dev}", f"link set {dev} up",
            f"l2tp add tunnel tunnel_id {tid} peer_tunnel_id {3 - tid} encap udp "
            f"local 10.9.0.{me} remote 10.9.0.{peer} udp_sport 1701 udp_dport 1701",
            f"l2tp add session name l2tpeth0 tunnel_id {tid} session_id {sid} "
            f"peer_session_id {3 - sid}",
            f"addr add 10.9.1.{me}/24 dev l2tpeth0", "link set l2tpeth0 up"])
    sysctls("la", tcp_ngwa=1)
    outer = Capture("la", "va", OUT / "l2tp_outer.pcap", filt="udp", snaplen=96)
    inner = Capture("la", "l2tpeth0", OUT / "l2tp_inner.pcap", filt="tcp", snaplen=96)
    sink = Sink(1, PORT, name="lb")
    c = connect("10.9.1.2", PORT, name="la")
    c.sendall(b"l" * 500000)
    c.close()
    got = sink.result(timeout=120)[0]
    outer.stop()
    inner.stop()
    batch(["ip", "-force"], [f"netns del {n}" for n in L2TP], check=False)
    RESULTS["l2tp"] = {"sent": 500000, "received": got}


def case_ngwa():
    """Two routers, one flow, NGWA mode 1 (CW on, no SE, no FD)."""
    testbed(r1_limit=60000, r2_limit=45000)
    ngwa_mode(1)
    cap_mid = Capture("r2", "eth0", OUT / "ngwa_r1_out.pcap")
    cap_rcv = Capture("rcv", "eth0", OUT / "ngwa_rcv.pcap")
    probe = Probe()
    doc = iperf(seconds=5)
    events = probe.stop(OUT / "ngwa_probe.trace")
    cap_mid.stop()
    cap_rcv.stop()
    RESULTS["ngwa"] = {
        "iperf": iperf_summary(doc),
        "r1_stats": qdisc_stats("r1", "eth1"),
        "r2_stats": qdisc_stats("r2", "eth1"),
        "probe_rcv": [e for e in events if e.get("src", "").endswith(f":{PORT}")],
        "netstat_rcv": netstat("rcv"),
    }
    teardown()


def case_insert():
    """A sender without NGWA, its segments small: without DF
    (ip_no_pmtu_disc) the routers insert the option into its data segments;
    with DF they grow nothing."""
    testbed(r1_limit=60000, r2_limit=200000)
    sysctls("rcv", tcp_ngwa=1)
    out = {}
    for label, no_pmtu_disc in (("nodf", 1), ("df", 0)):
        sysctls("snd", ip_no_pmtu_disc=no_pmtu_disc)
        r1_queue()
        cap = Capture("rcv", "eth0", OUT / f"insert_{label}.pcap")
        doc = iperf(seconds=3, extra=("-M", "1200"))
        cap.stop()
        out[label] = {"iperf": iperf_summary(doc), "r1_stats": qdisc_stats("r1", "eth1")}
    RESULTS["insert"] = out
    teardown()


def case_pmtu():
    """A hop after the bottleneck narrower than it (r2's egress, MTU 1400),
    a sender without NGWA, the receiver with it: 2 MB with DF (the sender
    finds the path MTU), then without DF at an MSS whose segments r1 grows
    and r2 fragments."""
    testbed(r1_limit=60000, r2_ngwa=False, narrow_mtu=1400)
    sysctls("rcv", tcp_ngwa=1)
    out = {}
    for i, (label, no_pmtu_disc, maxseg) in enumerate((("df", 0, 0), ("nodf", 1, 1380))):
        sysctls("snd", ip_no_pmtu_disc=no_pmtu_disc)
        r1_queue()
        cap = Capture("rcv", "eth0", OUT / f"pmtu_{label}.pcap", filt="ip")
        out[label] = transfer(2_000_000, 120, PORT + 10 + i, maxseg)
        cap.stop()
        out[label]["r1_stats"] = qdisc_stats("r1", "eth1")
    RESULTS["pmtu"] = out
    teardown()


def case_gso():
    """GRO at r1 merges the sender's wire-sized segments (MSS 1440: two of
    them make a packet of 2988 bytes, within TBF's burst of 3000), which
    r1's ngwa gives the option (the sender has neither NGWA nor DF); under
    TBF, then under HTB. r1's egress is captured whole, its ingress too,
    and its qdiscs' counters read before and after (IPv6 off on r1: nothing
    but the test's traffic crosses)."""
    out = {}
    for shaper in ("tbf", "htb"):
        testbed(rate="10mbit", offloads=True, shaper=shaper, r2_ngwa=False)
        ns("r1", "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
           "net.ipv6.conf.eth1.disable_ipv6=1")
        ns("snd", "ethtool", "-K", "eth0", "tso", "off", "gso", "off")
        sysctls("snd", ip_no_pmtu_disc=1)
        sysctls("rcv", tcp_ngwa=1)
        egress = Capture("r1", "eth1", OUT / f"gso_{shaper}_out.pcap", filt="", snaplen=96,
                         out_only=True)
        ingress = Capture("r1", "eth0", OUT / f"gso_{shaper}_in.pcap",
                          filt="tcp and src host 10.0.1.1", snaplen=96)
        before = tc_json("r1", "eth1")
        doc = iperf(seconds=5, extra=("-M", "1440"))
        time.sleep(2)                       # the queues drain
        after = tc_json("r1", "eth1")
        out[shaper] = {"intervals": [i["sum"]["bytes"] for i in doc["intervals"]],
                       "before": before, "after": after,
                       "tcpdump": [egress.stop(), ingress.stop()],
                       "r1_stats": qdisc_stats("r1", "eth1")}
        teardown()
    RESULTS["gso"] = out


SCALED_SIZES = (1, 10, 100, 300, 536, 1000, 1200, 1440) * 3


def case_scaling():
    """NGWA on the endpoints. Segments of several sizes, one at a time (the
    queue empty when each leaves r1), captured after r1. Then r2's queue
    with a size table that makes each packet 1400 bytes shorter than it is
    (its length below its payload), bulk traffic captured at the receiver."""
    testbed(r1_limit=60000, r2_limit=45000, r2_stab="stab overhead -1400")
    ngwa_mode(1)
    sink = Sink(1, PORT + 2)
    cap = Capture("r2", "eth0", OUT / "scaling.pcap")
    sized_sender(SCALED_SIZES, PORT + 2)
    sink.result(timeout=60)
    cap.stop()
    cap = Capture("rcv", "eth0", OUT / "stab_rcv.pcap")
    doc = iperf(seconds=3)
    cap.stop()
    RESULTS["scaling"] = {"limit": 60000, "r2_limit": 45000, "sizes": SCALED_SIZES,
                          "iperf": iperf_summary(doc), "r2_stats": qdisc_stats("r2", "eth1")}
    teardown()


def case_backlog():
    """Two flows through r1's ngwa queue (no flow division), captured where
    they enter r1 and where they leave it, and its `tc -s` statistics sampled
    meanwhile: the host rebuilds the queue's backlog from both captures and
    holds each value written to it and to tc's samples."""
    # 2 Mbit/s for 10 s: the debug kernel under TCG drives about 3 Mbit/s
    # (2.9 in a full suite's run), so at 10 Mbit/s the queue seldom built
    testbed(rate="2mbit", r1_limit=60000, r2_ngwa=False)
    ngwa_mode(1)
    filt = "tcp and src host 10.0.1.1"
    cap_in = Capture("r1", "eth0", OUT / "backlog_in.pcap", filt=filt)
    cap_out = Capture("r1", "eth1", OUT / "backlog_out.pcap", filt=filt)
    sampler = TcSampler("r1", "eth1", period=0.02)
    doc = iperf(seconds=10, parallel=2)
    samples = sampler.stop()
    drops = [cap_in.stop(), cap_out.stop()]
    (OUT / "backlog_tc.json").write_text(json.dumps(samples))
    RESULTS["backlog"] = {"iperf": iperf_summary(doc), "limit": 60000,
                          "stats": qdisc_stats("r1", "eth1"), "tcpdump": drops}
    teardown()


def case_fd():
    """Flow division: one flow, then two, through r1 with fd (mode 5); the
    flows tc counts meanwhile and after they close; a flow retransmitting
    after its FIN; then a flow whose link goes down, so that no FIN or RST
    crosses r1 (timeout 2 s)."""
    out = {}
    testbed(r1_limit=60000, r2_ngwa=False, r1_args="fd")
    ngwa_mode(5)
    for flows in (1, 2):
        r1_queue(args="fd")
        cap = Capture("r2", "eth0", OUT / f"fd_{flows}.pcap")
        sampler = TcSampler("r1", "eth1", period=0.2)
        got = bulk(seconds=4, flows=flows)
        ended = time.time()
        time.sleep(1.0)
        out[flows] = {"bytes": got, "ended": ended, "samples": sampler.stop(),
                      "r1_stats": qdisc_stats("r1", "eth1")}
        cap.stop()
    out["fin"] = retransmitted_after_fin()
    r1_queue(args="fd timeout 2s")
    Sink()                  # it goes with the namespaces
    stop = threading.Event()
    source = in_thread(pump, 600, "10.0.3.1", PORT, stop)
    sampler = TcSampler("r1", "eth1", period=0.2)
    end = time.monotonic() + 120             # until the flow counts, then 2 s more
    while time.monotonic() < end and not (
            sampler.samples and ngwa_of(sampler.samples[-1]["qdiscs"])["flows"]):
        time.sleep(0.2)
    time.sleep(2)
    sh("ip", "-n", "snd", "link", "set", "eth0", "down")
    down = time.time()      # once ip returned: under TCG it takes up to a second
    time.sleep(4)
    out["vanished"] = {"down": down, "timeout_s": 2.0, "samples": sampler.stop(),
                       "r1_stats": qdisc_stats("r1", "eth1")}
    stop.set()
    teardown()              # the sender's socket, on a link that is down, goes with it
    source.join(timeout=60)
    RESULTS["fd"] = out


def retransmitted_after_fin() -> dict:
    """One flow whose data crosses r1 again after its FIN did: 100 kB that
    r2 lets through (the flow counts), then, while r2 drops the sender's
    packets of 256 B or more, 12 kB (within the initial window, so all of
    it leaves before the FIN) and the FIN, alone and small, which reaches
    rcv; the data follows as retransmissions once r2 lets it through."""
    r1_queue(args="fd")
    sink = Sink()
    cap = Capture("r1", "eth1", OUT / "fd_fin.pcap", out_only=True)
    sampler = TcSampler("r1", "eth1", period=0.2)
    c = connect("10.0.3.1")
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    c.sendall(b"f" * 100_000)
    wait_acked(c, 60)
    batch([TC, "-n", "r2"], [
        "qdisc add dev eth0 ingress",
        # IPv4 total length below 256: the FIN passes
        "filter add dev eth0 parent ffff: prio 1 protocol ip u32 "
        "match ip src 10.0.1.1/32 match u16 0 0xff00 at 2 action pass",
        "filter add dev eth0 parent ffff: prio 2 protocol ip u32 "
        "match ip src 10.0.1.1/32 action drop"])
    c.sendall(b"f" * 12_000)
    c.shutdown(socket.SHUT_WR)
    time.sleep(1.0)
    batch([TC, "-n", "r2"], ["qdisc del dev eth0 ingress"])
    received = sink.result(timeout=120)[0]
    c.close()
    time.sleep(3.0)         # within the timeout (5 s) after the last packet
    out = {"received": received, "samples": sampler.stop(),
           "r1_stats": qdisc_stats("r1", "eth1")}
    cap.stop()
    return out


def case_modes():
    """Every mode of Table 1 for a short two-flow run: the sysctls, the
    qdisc, and the sender's tcp_probe events (in flight, cwnd, send window)."""
    out = {}
    testbed(r1_limit=60000, r2_ngwa=False)
    for mode in range(1, 9):
        r1_queue(args="fd" if MODES[mode][2] else "nofd")
        ngwa_mode(mode)
        probe = Probe()
        doc = iperf(seconds=3, parallel=2)
        events = probe.stop()
        snd = [e for e in events if e.get("dest", "").endswith(f":{PORT}")]
        rcv = [e for e in events if e.get("src", "").endswith(f":{PORT}")]
        keep = ("src", "snd_cwnd", "snd_wnd", "packets_out", "sacked_out", "lost_out",
                "retrans_out", "ca_state")
        out[mode] = {
            "iperf": iperf_summary(doc),
            "sysctls": {k: read_sysctl("snd", f"net.ipv4.{k}")
                        for k in ("tcp_ngwa", "tcp_ngwa_cwnd", "tcp_ngwa_smooth")},
            "rcv_smooth": read_sysctl("rcv", "net.ipv4.tcp_ngwa_smooth"),
            "r1_stats": qdisc_stats("r1", "eth1"),
            "snd": [{k: e[k] for k in keep} for e in snd][-6000:],
            "rcv_ngwa": [e["ngwa_window"] for e in rcv if e.get("ngwa_window")][:400],
        }
    teardown()
    RESULTS["modes"] = out


# WB-RTO off, on with the paper's medium scale, and on with every constant the
# paper leaves open set otherwise
WBRTO_RUNS = {
    "off": {"tcp_wbrto": 0},
    "medium": {"tcp_wbrto": 1},
    "custom": {"tcp_wbrto": 1, "tcp_wbrto_scale": 3, "tcp_wbrto_weights": "40 30 20 10",
               "tcp_wbrto_thresholds": "3 6 12", "tcp_wbrto_cutoffs": "400 800",
               "tcp_wbrto_unit_ms": 500, "tcp_wbrto_awnd_gain": 20000},
}
WBRTO_KNOBS = ("tcp_wbrto", "tcp_wbrto_scale", "tcp_wbrto_unit_ms", "tcp_wbrto_thresholds",
               "tcp_wbrto_cutoffs", "tcp_wbrto_weights", "tcp_wbrto_awnd_gain")


def case_wbrto():
    """Many Reno flows over a small bottleneck, WB-RTO off and on: the
    senders' tcp_probe events, with the RTO's inputs and the RTO itself."""
    out = {}
    testbed(rate="1mbit", delay_ms=20, r1_qdisc="bfifo", r1_limit=15000, r2_ngwa=False)
    for label, knobs in WBRTO_RUNS.items():
        for n in ("snd", "rcv"):
            ns(n, "sysctl", "-qw", "net.ipv4.tcp_congestion_control=reno",
               *(f"net.ipv4.{k}={v}" for k, v in knobs.items()))
        probe = Probe()
        doc = iperf(seconds=int(os.environ.get("WBRTO_SECONDS", "12")),
                    parallel=int(os.environ.get("WBRTO_FLOWS", "12")))
        events = probe.stop()
        snd = [e for e in events if e.get("dest", "").endswith(f":{PORT}")]
        keep = ("t", "src", "srtt", "rttvar", "rto", "rto_var", "snd_cwnd", "wbrto_cwnd",
                "wbrto_max_cwnd", "wbrto_awnd", "wbrto_c10", "wbrto_a10", "retransmits",
                "backoff", "total_retrans", "delivered", "ca_state")
        out[label] = {"iperf": iperf_summary(doc),
                      "knobs": {k: " ".join(read_sysctl("snd", f"net.ipv4.{k}").split())
                                for k in WBRTO_KNOBS},
                      "probe_snd": [{k: e[k] for k in keep} for e in snd]}
    teardown()
    RESULTS["wbrto"] = out


def case_spoof():
    """A real flow through r1's `ngwa fd`, then 2000 forged openings
    completed by a forged ACK, then 20,000 spoofed SYNs, then the timeout:
    the values the real flow's segments carry after r1 and tc's counters all
    along. The timeout is 60 s, not the default 5 s: this process sends
    about 400 forged frames a second under TCG, and the table must fill."""
    timeout = 60
    testbed(r1_limit=60000, r2_ngwa=False, r1_args=f"fd timeout {timeout}s")
    for n in ("snd", "rcv"):
        sysctls(n, tcp_ngwa=1, tcp_congestion_control="reno")
    cap = Capture("r2", "eth0", OUT / "spoof.pcap", filt="tcp and dst host 10.0.3.1")
    sampler = TcSampler("r1", "eth1", period=0.25)
    sink, stop = Sink(), threading.Event()
    source = in_thread(pump, 900, "10.0.3.1", PORT, stop)
    marks = {"start": time.time()}
    time.sleep(5)
    marks["completed"] = time.time()
    base_rate = sink.got[0] / (marks["completed"] - marks["start"])
    sent = [spoof(2000, 2000, 7)]
    marks["syns"] = time.time()
    sent.append(spoof(20000, 0, 8))
    marks["flood_end"] = time.time()
    time.sleep(timeout + 3)
    marks["back"] = recovered(sink, base_rate)
    marks["end"] = time.time()
    stop.set()
    source.join(timeout=60)
    sink.result(timeout=60)
    samples = sampler.stop()
    cap.stop()
    RESULTS["spoof"] = {"marks": marks, "sent": sent, "samples": samples,
                        "r1_stats": qdisc_stats("r1", "eth1"), "limit": 60000,
                        "timeout_s": timeout}
    teardown()


def case_flood():
    """Flow division under a SYN flood that outlasts the default timeout
    (5 s): r1's `ngwa fd flows 256`, spoofed SYNs as fast as this process
    sends them (about 400 a second under TCG, so its 256 half-open places
    stay full), and forged SYNs on the 4-tuple of a real flow that sends
    from before the flood; a second flow opens during it; then r1's queue
    is replaced while both send (neither's opening crosses the new one)."""
    testbed(r1_limit=60000, r2_ngwa=False, r1_args="fd flows 256")
    for n in ("snd", "rcv"):
        sysctls(n, tcp_ngwa=1, tcp_congestion_control="reno")
    sinks, stop, sent = [Sink(1, PORT), Sink(1, PORT + 1)], threading.Event(), []
    sampler = TcSampler("r1", "eth1", period=0.25)
    first = connect("10.0.3.1", PORT)
    real = ("10.0.1.1", first.getsockname()[1], "10.0.3.1", PORT)
    senders = [in_thread(send_until, first, stop)]
    time.sleep(4)
    marks = {"flood": time.time()}
    flooding = in_thread(lambda: sent.append(flood(45, 11, real)))
    time.sleep(12)
    marks["second"] = time.time()
    senders.append(in_thread(send_until, connect("10.0.3.1", PORT + 1), stop))
    time.sleep(12)
    # the new queue shows between the two marks: tc takes seconds under TCG
    marks["replacing"] = time.time()
    r1_queue(args="fd flows 256")
    marks["replaced"] = time.time()
    flooding.join(timeout=120)
    marks["flood_end"] = time.time()
    stop.set()
    for t in senders:
        t.join(timeout=60)
    got = [s.result(timeout=60)[0] for s in sinks]
    RESULTS["flood"] = {"marks": marks, "sent": sent, "received": got,
                        "samples": sampler.stop(), "r1_stats": qdisc_stats("r1", "eth1")}
    teardown()


def recovered(sink: Sink, rate: float, within: float = 150.0) -> bool:
    """Until the sink's flow moves again at half @rate over 2 s (True), or
    @within s (False). A sender starved to a window of a few bytes probes
    on a backed-off timer, capped at TCP_RTO_MAX (120 s): it may first hear
    of the freed window that long after the table emptied, so @within is
    longer than the cap."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        before = sink.got[0]
        time.sleep(2)
        if sink.got[0] - before >= rate:
            return True
    return False


# (count, seed) of each kind of hostile frame
HOSTILE = {"copies": (10000, 3), "routed": (60000, 1), "qdisc": (32000, 2)}


def case_hostile():
    """Over 100,000 hostile frames: from snd through r1's IPv4 input, its
    `ngwa fd` queue and r2 to rcv's TCP (or r2's blackhole); garbage handed
    straight to r1's ngwa queue; copies of a real NGWA connection's segments,
    in window, with hostile options. Then a real transfer through the same
    queue, and the counters of every hop."""
    testbed(rate="100mbit", r1_limit=60000, r1_args="fd timeout 2s")
    for n in ("snd", "rcv"):
        sysctls(n, tcp_ngwa=1, tcp_congestion_control="reno")
    before = {n: netstat(n) for n in NAMESPACES}
    sink, stop = Sink(), threading.Event()
    source = in_thread(pump, 900, "10.0.3.1", PORT, stop)
    t0 = time.time()
    dropped = tx_dropped("snd", "eth0")
    sent = {"copies": hostile_copies(*HOSTILE["copies"]),
            "routed": hostile_routed(*HOSTILE["routed"])}
    # what r1 forwarded apart from what is handed to its queue directly
    stats_routed = qdisc_stats("r1", "eth1")
    dropped = tx_dropped("snd", "eth0") - dropped
    sent["qdisc"] = hostile_qdisc(*HOSTILE["qdisc"])
    took = time.time() - t0
    stop.set()
    source.join(timeout=60)
    sink.result(timeout=60)
    stats_after_flood = {n: qdisc_stats(n, "eth1") for n in ("r1", "r2")}
    time.sleep(3)                     # the hostile flows' entries time out
    cap = Capture("r2", "eth0", OUT / "hostile_after.pcap", filt="tcp and dst host 10.0.3.1")
    sampler = TcSampler("r1", "eth1", period=0.25)
    got = bulk(seconds=4, flows=1)
    samples = sampler.stop()
    cap.stop()
    RESULTS["hostile"] = {
        "sent": sent, "took_s": took, "limit": 60000, "after_bytes": got,
        "after_samples": samples, "stats_after_flood": stats_after_flood,
        "plan": HOSTILE, "stats_routed": stats_routed, "snd_tx_dropped": dropped,
        "netstat": {n: {k: v - before[n].get(k, 0) for k, v in netstat(n).items()
                        if k.startswith("TcpExtNGWA") or k.startswith("IpExt")}
                    for n in NAMESPACES}}
    teardown()


def case_offload():
    """NGWA with TSO, GSO and GRO on at every hop, IPv6 connections beside it,
    and an IPv6 socket with a v4-mapped peer; then GRO alone (the
    sender's segments wire-sized), with NGWA and without it."""
    out = {}
    testbed(rate="50mbit", offloads=True, ipv6=True)
    ngwa_mode(1)
    before = netstat("rcv")
    cap = Capture("rcv", "eth0", OUT / "offload_rcv.pcap", filt="tcp or ip6", snaplen=200)
    v6 = Sink(2, PORT + 1, socket.AF_INET6)
    v6_source = in_thread(pump, 5, "fd00:3::1", PORT + 1)
    mapped_sent: list = []
    mapped_thread = in_thread(lambda: mapped_sent.append(mapped(2, PORT + 1)))
    doc = iperf(seconds=5)
    # the sender's option gone, r1 inserts it (DF off: a DF packet is not grown)
    sysctls("snd", tcp_ngwa=0, ip_no_pmtu_disc=1)
    inserted = iperf(seconds=3, extra=("-M", "1200"))
    mapped_thread.join(timeout=120)
    v6_source.join(timeout=120)
    v6_bytes = v6.result(timeout=120)
    cap.stop()
    out["tso"] = {"iperf": iperf_summary(doc), "inserted_iperf": iperf_summary(inserted),
                  "mapped_sent": mapped_sent, "v6_received": v6_bytes,
                  "r1_stats": qdisc_stats("r1", "eth1"),
                  "received_options": netstat("rcv")["TcpExtNGWARcvOption"]
                  - before["TcpExtNGWARcvOption"]}
    teardown()
    for label, ngwa in (("gro_ngwa", True), ("gro_plain", False)):
        testbed(rate="50mbit", offloads=True, r1_qdisc="ngwa" if ngwa else "bfifo",
                r2_ngwa=ngwa)
        ns("snd", "ethtool", "-K", "eth0", "tso", "off", "gso", "off")
        if ngwa:
            ngwa_mode(1)
        # GRO merges what arrives in one poll: the sender's bursts at r1,
        # before the shaper spaces them out
        cap = Capture("r1", "eth0", OUT / f"{label}.pcap", filt="tcp", snaplen=100)
        out[label] = {"iperf": iperf_summary(iperf(seconds=3))}
        cap.stop()
        teardown()
    RESULTS["offload"] = out


CASES = {"basic": case_basic, "malformed": case_malformed, "smooth": case_smooth,
         "age": case_age, "finwait": case_finwait, "l2tp": case_l2tp, "ngwa": case_ngwa,
         "insert": case_insert, "pmtu": case_pmtu,
         "gso": case_gso, "scaling": case_scaling, "backlog": case_backlog, "fd": case_fd,
         "modes": case_modes, "wbrto": case_wbrto, "spoof": case_spoof, "flood": case_flood,
         "hostile": case_hostile, "offload": case_offload}


def kernel_health() -> dict:
    """The kernel log and a kmemleak scan, once the cases have run."""
    leaks = ""
    if not Path("/sys/kernel/debug/kmemleak").exists():
        sh("mount", "-t", "debugfs", "nodev", "/sys/kernel/debug", check=False)
    kmemleak = Path("/sys/kernel/debug/kmemleak")
    if kmemleak.exists():
        kmemleak.write_text("scan")
        time.sleep(5)
        kmemleak.write_text("scan")
        leaks = kmemleak.read_text()
    return {"dmesg": sh("dmesg"), "kmemleak": kmemleak.exists(), "leaks": leaks}


START_MARK = "tcpvar: kernel_guest starts"


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "started").write_text("")
    try:                    # the host checks the log from here on (boot: see the test)
        Path("/dev/kmsg").write_text(START_MARK + "\n")
    except OSError:
        pass                # then the whole log is checked
    for name in sys.argv[3:]:
        print(f"kernel_guest: {name} starts", flush=True)
        t0 = time.monotonic()
        try:
            CASES[name]()
        except Exception as exc:  # report it to the host, keep going
            RESULTS.setdefault("errors", {})[name] = f"{type(exc).__name__}: {exc}"
            print(f"kernel_guest: {name}: {type(exc).__name__}: {exc}", flush=True)
            teardown()
        RESULTS.setdefault("took_s", {})[name] = round(time.monotonic() - t0, 1)
        print(f"kernel_guest: {name} took {RESULTS['took_s'][name]} s", flush=True)
    RESULTS["health"] = kernel_health()
    (OUT / "results.json").write_text(json.dumps(RESULTS))


if __name__ == "__main__":
    main()
