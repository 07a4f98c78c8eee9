"""Runs inside the micro-VM booted on the patched kernel (tests/test_kernel*.py
and kernel-patches/experiments): builds a small testbed of network
namespaces, runs the checks or experiments named on the command line and
writes what it saw as JSON (and captures, tcp_probe traces) into OUT.

    python3 kernel_guest.py OUT TC CASE [CASE...]

TC is the patched tc (it knows the ngwa qdisc). Every namespace, qdisc and
process lives inside the VM. Standard library only.
"""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

OUT = Path(sys.argv[1])
TC = sys.argv[2] if len(sys.argv) > 2 else "tc"
TRACEFS = Path("/sys/kernel/tracing")
PORT = 5201
NAMESPACES = ("snd", "r1", "r2", "rcv")
RESULTS: dict = {}


def sh(*args, check=True, timeout=120) -> str:
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args))}: {done.stderr.strip()}")
    return done.stdout


def ns(name, *args, check=True, timeout=120) -> str:
    return sh("ip", "netns", "exec", name, *args, check=check, timeout=timeout)


def sysctl(name, key, value):
    ns(name, "sysctl", "-q", "-w", f"{key}={value}")


def read_sysctl(name, key) -> str:
    return ns(name, "sysctl", "-n", key).strip()


# --- the testbed: snd -- r1 -- r2 -- rcv -------------------------------------

def teardown():
    for n in NAMESPACES:
        sh("ip", "netns", "del", n, check=False)


def testbed(rate="10mbit", delay_ms=10, r1_limit=60000, r2_limit=45000,
            r1_fd=False, r2_ngwa=True, r1_qdisc="ngwa"):
    """snd (10.0.1.1) -> r1 -> r2 -> rcv (10.0.3.1). r1's egress to r2 is the
    bottleneck: TBF at @rate with a child queue (@r1_qdisc: ngwa or bfifo) of
    @r1_limit bytes; r2's egress to rcv has an ngwa queue of @r2_limit bytes
    (at the same rate, so it rarely fills). netem delays the ACKs by
    @delay_ms on rcv's egress. One shell runs it all: process start-up is
    what costs under TCG."""
    teardown()
    cmds = [f"ip netns add {n}" for n in NAMESPACES]
    cmds += [f"ip -n {n} link set lo up" for n in NAMESPACES]
    links = [("snd", "eth0", "10.0.1.1/24", "r1", "eth0", "10.0.1.254/24"),
             ("r1", "eth1", "10.0.2.1/24", "r2", "eth0", "10.0.2.2/24"),
             ("r2", "eth1", "10.0.3.254/24", "rcv", "eth0", "10.0.3.1/24")]
    for a, ai, aa, b, bi, ba in links:
        cmds += [f"ip link add {ai} netns {a} type veth peer name {bi} netns {b}",
                 f"ip -n {a} addr add {aa} dev {ai}", f"ip -n {b} addr add {ba} dev {bi}",
                 f"ip -n {a} link set {ai} up", f"ip -n {b} link set {bi} up"]
    # one packet per segment from the sender, as on a real link
    cmds += ["ip netns exec snd ethtool -K eth0 tso off gso off >/dev/null 2>&1 || true",
             "ip -n snd route add default via 10.0.1.254",
             "ip -n rcv route add default via 10.0.3.254",
             "ip -n r1 route add 10.0.3.0/24 via 10.0.2.2",
             "ip -n r2 route add 10.0.1.0/24 via 10.0.2.1",
             "ip netns exec r1 sysctl -qw net.ipv4.ip_forward=1",
             "ip netns exec r2 sysctl -qw net.ipv4.ip_forward=1",
             f"{TC} -n r1 qdisc add dev eth1 root handle 1: tbf rate {rate} burst 3000 "
             f"limit 3000"]
    if r1_qdisc == "ngwa":
        cmds.append(f"{TC} -n r1 qdisc add dev eth1 parent 1:1 handle 10: ngwa "
                    f"limit {r1_limit} {'fd' if r1_fd else 'nofd'}")
    else:
        cmds.append(f"{TC} -n r1 qdisc add dev eth1 parent 1:1 handle 10: {r1_qdisc} "
                    f"limit {r1_limit}")
    if r2_ngwa:
        cmds.append(f"{TC} -n r2 qdisc add dev eth1 root ngwa limit {r2_limit}")
    cmds.append(f"{TC} -n rcv qdisc add dev eth0 root netem delay {delay_ms}ms")
    sh("sh", "-ec", "\n".join(cmds))


def sysctls(name, **values):
    ns(name, "sysctl", "-qw", *(f"net.ipv4.{k}={v}" for k, v in values.items()))


def ngwa_mode(mode: int, who=("snd", "rcv")):
    """The paper's Table 1: mode -> (congestion window, smoothing, flow division)."""
    cw, se, fd = MODES[mode]
    for n in who:
        sysctls(n, tcp_ngwa=1, tcp_ngwa_cwnd=int(cw), tcp_ngwa_smooth=int(se),
                tcp_congestion_control="reno")
    return fd


MODES = {1: (True, False, False), 2: (True, True, False), 3: (False, False, False),
         4: (False, True, False), 5: (True, False, True), 6: (True, True, True),
         7: (False, False, True), 8: (False, True, True)}


# --- tools ----------------------------------------------------------------------

class Capture:
    """tcpdump of the TCP headers on one interface of one namespace."""

    def __init__(self, name, iface, path):
        self.path = path
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", name, "tcpdump", "-i", iface, "-s", "120", "-U", "-n",
             "-w", str(path), "tcp"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # tcpdump says "listening on" once it captures
        line = self.proc.stderr.readline()
        if b"listening" not in line:
            raise RuntimeError(f"tcpdump: {line!r}")

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=30)


class Probe:
    """tcp:tcp_probe events of port PORT, from the top-level trace buffer.

    The event is enabled on the kernel command line (trace_event=tcp:tcp_probe,
    see tests/test_kernel.py), not here: enabling or disabling a tracepoint
    patches kernel text (text_poke_bp), and under QEMU TCG with two vCPUs a
    CPU running the site being patched now and then takes the int3 as an
    oops. Starting and stopping is tracing_on and a filter, which patch
    nothing."""

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


def in_flight(ev: dict) -> int:
    """Segments in the network, as tcp_packets_in_flight() counts them: the
    ones cwnd bounds. packets_out alone also counts segments SACKed or marked
    lost, so it exceeds cwnd throughout a recovery."""
    return ev["packets_out"] - ev["sacked_out"] - ev["lost_out"] + ev["retrans_out"]


def iperf(seconds=4, parallel=1, extra=()):
    """An iperf3 run snd -> rcv; its JSON document."""
    server = subprocess.Popen(["ip", "netns", "exec", "rcv", "iperf3", "-s", "-1",
                               "-p", str(PORT)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    wait_listening()
    try:
        out = ns("snd", "iperf3", "-c", "10.0.3.1", "-p", PORT, "-t", seconds,
                 "-P", parallel, "-J", *extra, timeout=seconds * 4 + 60)
    finally:
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    return json.loads(out)


def wait_listening(timeout=30.0):
    """Until something in rcv listens on PORT."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if f":{PORT}" in ns("rcv", "ss", "-Hltn", check=False):
            return
        time.sleep(0.2)
    raise RuntimeError(f"nothing listens on port {PORT} in rcv")


def bulk(seconds=4, flows=1) -> list[int]:
    """Plain TCP bulk flows snd -> rcv (no control connection, unlike
    iperf3): bytes received per flow."""
    sink = subprocess.Popen(["ip", "netns", "exec", "rcv", sys.executable, __file__, "--sink",
                             str(flows)], stdout=subprocess.PIPE, text=True)
    wait_listening()
    ns("snd", sys.executable, __file__, "--source", str(flows), str(seconds),
       timeout=seconds * 4 + 60)
    out, _ = sink.communicate(timeout=60)
    return json.loads(out)


def _sink(flows: int):
    import threading
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", PORT))
    srv.listen(flows)
    got = [0] * flows

    def drain(i, conn):
        while True:
            data = conn.recv(1 << 16)
            if not data:
                break
            got[i] += len(data)
        conn.close()

    threads = []
    for i in range(flows):
        conn, _ = srv.accept()
        t = threading.Thread(target=drain, args=(i, conn))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    print(json.dumps(got))


def _source(flows: int, seconds: float):
    import threading
    buf = b"\0" * (1 << 16)
    end = time.monotonic() + seconds

    def pump():
        c = socket.create_connection(("10.0.3.1", PORT))
        while time.monotonic() < end:
            c.sendall(buf)
        c.close()

    threads = [threading.Thread(target=pump) for _ in range(flows)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def iperf_summary(doc) -> dict:
    if "streams" not in doc.get("end", {}):
        raise RuntimeError(f"iperf3: {doc.get('error', 'no result')}")
    streams = []
    for s in doc["end"]["streams"]:
        snd = s["sender"]
        rcv = s.get("receiver", {})
        streams.append({"bytes": snd["bytes"], "retransmits": snd.get("retransmits", 0),
                        "rcv_bps": rcv.get("bits_per_second", 0.0)})
    return {"streams": streams}


def qdisc_stats(name, dev) -> str:
    return ns(name, TC, "-s", "qdisc", "show", "dev", dev)


def netstat(name=None) -> dict:
    text = (ns(name, "cat", "/proc/net/netstat") if name
            else Path("/proc/net/netstat").read_text())
    lines = text.splitlines()
    values = {}
    for head, vals in zip(lines[::2], lines[1::2]):
        prefix = head.split(":")[0]
        for k, v in zip(head.split()[1:], vals.split()[1:]):
            values[prefix + k] = int(v)
    return values


# --- cases ----------------------------------------------------------------------

def case_basic():
    """Tracepoint format, sysctl defaults, variants, BTF, the qdisc in tc."""
    if not (TRACEFS / "events").is_dir():
        sh("mount", "-t", "tracefs", "nodev", str(TRACEFS), check=False)
    fmt = (TRACEFS / "events" / "tcp" / "tcp_probe" / "format").read_text()
    names = re.findall(r"field:[^;]*?\b(\w+)(?:\[[^\]]*\])?;", fmt)
    sysctls = {k: Path(f"/proc/sys/net/ipv4/{k}").read_text().strip()
               for k in ("tcp_ngwa", "tcp_ngwa_cwnd", "tcp_ngwa_smooth", "tcp_ngwa_alpha",
                         "tcp_wbrto", "tcp_wbrto_scale", "tcp_wbrto_unit_ms")}
    sh("ip", "link", "add", "d0", "type", "dummy")
    sh(TC, "qdisc", "add", "dev", "d0", "root", "ngwa", "limit", "50kb", "fd")
    shown = sh(TC, "-s", "qdisc", "show", "dev", "d0")
    bad = subprocess.run([TC, "qdisc", "replace", "dev", "d0", "root", "ngwa", "limit", "0"],
                         capture_output=True, text=True, check=False)
    sh("ip", "link", "del", "d0")
    RESULTS["basic"] = {
        "format_fields": names,
        "print_fmt": fmt.split("print fmt:", 1)[1].strip(),
        "sysctls": sysctls,
        "available_cc": Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .read_text().split(),
        "btf": Path("/sys/kernel/btf/vmlinux").is_file(),
        "release": os.uname().release,
        "tc_show": shown,
        "tc_bad_limit": [bad.returncode, bad.stderr.strip()],
    }


def _ip_header(options: bytes, src="127.0.0.1", dst="127.0.0.1", payload=b"") -> bytes:
    ihl = 5 + (len(options) + 3) // 4
    options = options + b"\x00" * (ihl * 4 - 20 - len(options))
    total = ihl * 4 + len(payload)
    hdr = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, total, 0x1234, 0, 64,
                      socket.IPPROTO_TCP, 0, socket.inet_aton(src), socket.inet_aton(dst))
    hdr = hdr + options
    csum = _checksum(hdr)
    return hdr[:10] + struct.pack("!H", csum) + hdr[12:] + payload


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\x00"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def _tcp_syn(sport=40000, dport=9) -> bytes:
    # checksum left 0: these packets only have to reach IPv4 option parsing
    return struct.pack("!HHIIBBHHH", sport, dport, 1, 0, 5 << 4, 0x02, 1024, 0, 0)


def case_malformed():
    """Malformed NGWA options from a raw socket: ignored, counted, no splat."""
    good = bytes([33, 6]) + (1000).to_bytes(4, "big")
    cases = {
        # option 33 with lengths 2..5 and 7, 8, 12 that fit in the header
        **{f"len{n}": bytes([33, n]) + b"\x00" * (n - 2) for n in (2, 3, 4, 5, 7, 8, 12)},
        # length runs past the end of the options area (truncated)
        "truncated": bytes([1, 1, 33, 6]),
        "truncated_type_only": bytes([1, 1, 1, 33]),
        "length_past_header": bytes([33, 40, 0, 0]),
        # the right option twice
        "repeated": good + bytes([1, 1]) + good,
        "len0": bytes([33, 0, 0, 0]),
        "len1": bytes([33, 1, 0, 0]),
    }
    # ignored and counted, or (truncated) dropped by IPv4 as any bad option
    sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    before = netstat()
    dmesg_before = sh("dmesg")
    sent = {}
    for name, opt in cases.items():
        for _ in range(3):
            sock.sendto(_ip_header(opt, payload=_tcp_syn()), ("127.0.0.1", 0))
        sent[name] = 3
    # and a well-formed one, which is not counted
    sock.sendto(_ip_header(good, payload=_tcp_syn()), ("127.0.0.1", 0))
    sock.close()
    time.sleep(0.5)
    after = netstat()
    dmesg_after = sh("dmesg")
    new = dmesg_after[len(dmesg_before):] if dmesg_after.startswith(dmesg_before) \
        else dmesg_after
    RESULTS["malformed"] = {
        "sent": sent,
        "bad_counted": after.get("TcpExtNGWABadOption", -1)
        - before.get("TcpExtNGWABadOption", 0),
        "dmesg_new": new,
        "alive": Path("/proc/version").read_text().startswith("Linux"),
    }


def _ngwa_values(events):
    return [e["ngwa_window"] for e in events if e.get("ngwa_window")]


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
        "mss_snd": read_sysctl("snd", "net.ipv4.tcp_ngwa"),
    }
    teardown()


def case_insert():
    """A sender without NGWA: the router inserts the option (small segments)."""
    testbed(r1_limit=60000, r2_limit=200000)
    sysctls("rcv", tcp_ngwa=1)
    cap = Capture("rcv", "eth0", OUT / "insert_rcv.pcap")
    doc = iperf(seconds=3, extra=("-M", "1200"))
    cap.stop()
    RESULTS["insert"] = {"iperf": iperf_summary(doc),
                         "r1_stats": qdisc_stats("r1", "eth1")}
    teardown()


def case_fd():
    """Flow division: one flow, then two, through r1 with fd (mode 5)."""
    out = {}
    for flows in (1, 2):
        testbed(r1_limit=60000, r2_ngwa=False, r1_fd=True)
        ngwa_mode(5)
        cap = Capture("r2", "eth0", OUT / f"fd_{flows}.pcap")
        got = bulk(seconds=4, flows=flows)
        cap.stop()
        out[flows] = {"bytes": got, "r1_stats": qdisc_stats("r1", "eth1")}
        teardown()
    RESULTS["fd"] = out


def case_modes():
    """Every mode of Table 1 for a short two-flow run."""
    out = {}
    for mode in range(1, 9):
        fd = MODES[mode][2]
        testbed(r1_limit=60000, r2_ngwa=False, r1_fd=fd)
        ngwa_mode(mode)
        probe = Probe()
        doc = iperf(seconds=3, parallel=2)
        events = probe.stop()
        snd = [e for e in events if e.get("dest", "").endswith(f":{PORT}")]
        rcv = [e for e in events if e.get("src", "").endswith(f":{PORT}")]
        out[mode] = {
            "iperf": iperf_summary(doc),
            "sysctls": {k: read_sysctl("snd", f"net.ipv4.{k}")
                        for k in ("tcp_ngwa", "tcp_ngwa_cwnd", "tcp_ngwa_smooth")},
            "rcv_smooth": read_sysctl("rcv", "net.ipv4.tcp_ngwa_smooth"),
            "r1_stats": qdisc_stats("r1", "eth1"),
            "snd_over_cwnd": sum(1 for e in snd if in_flight(e) > e["snd_cwnd"]),
            "snd_events": len(snd),
            "rcv_ngwa": _ngwa_values(rcv)[:400],
        }
        teardown()
    RESULTS["modes"] = out


def case_wbrto():
    """Many flows over a small bottleneck, WB-RTO on (unit 1 s) and off."""
    out = {}
    for on in (1, 0):
        testbed(rate="1mbit", delay_ms=20, r1_qdisc="bfifo", r1_limit=15000,
                r2_ngwa=False)
        for n in ("snd", "rcv"):
            sysctls(n, tcp_wbrto=on, tcp_congestion_control="reno")
        probe = Probe()
        doc = iperf(seconds=int(os.environ.get("WBRTO_SECONDS", "12")),
                    parallel=int(os.environ.get("WBRTO_FLOWS", "12")))
        events = probe.stop()
        snd = [e for e in events if e.get("dest", "").endswith(f":{PORT}")]
        keep = ("src", "srtt", "rttvar", "rto", "snd_cwnd", "wbrto_max_cwnd",
                "wbrto_awnd", "wbrto_c10", "wbrto_a10", "retransmits", "backoff",
                "total_retrans")
        out[on] = {"iperf": iperf_summary(doc),
                   "probe_snd": [{k: e[k] for k in keep} for e in snd][-3000:],
                   "unit_ms": read_sysctl("snd", "net.ipv4.tcp_wbrto_unit_ms"),
                   "scale": read_sysctl("snd", "net.ipv4.tcp_wbrto_scale")}
        teardown()
    RESULTS["wbrto"] = out


def _drops(stats: str) -> int:
    m = re.search(r"dropped (\d+)", stats)
    return int(m.group(1)) if m else -1


def case_compare():
    """The paper's Linux experiment scaled to the VM: New Reno through a
    drop-tail FIFO against NGWA modes, one and two flows, queues of 100 and
    1000 packets (of 1514 bytes) at 10 Mbit/s, 20 ms of RTT."""
    seconds = int(os.environ.get("COMPARE_SECONDS", "10"))
    modes = [int(m) for m in os.environ.get("COMPARE_MODES", "1,2,3,4,5,6,7,8").split(",")]
    out = []
    for packets in (100, 1000):
        limit = packets * 1514
        for flows in (1, 2):
            for mode in [0, *modes]:
                if mode == 0:
                    testbed(r1_qdisc="bfifo", r1_limit=limit, r2_ngwa=False)
                    for n in ("snd", "rcv"):
                        sysctls(n, tcp_congestion_control="reno")
                else:
                    testbed(r1_limit=limit, r2_ngwa=False, r1_fd=MODES[mode][2])
                    ngwa_mode(mode)
                doc = iperf(seconds=seconds, parallel=flows)
                stats = qdisc_stats("r1", "eth1")
                out.append({"queue_packets": packets, "flows": flows, "mode": mode,
                            "iperf": iperf_summary(doc), "drops": _drops(stats.split("qdisc")[-1]),
                            "stats": stats})
                teardown()
    RESULTS["compare"] = out


CASES = {"compare": case_compare, "basic": case_basic, "malformed": case_malformed,
         "ngwa": case_ngwa, "insert": case_insert, "fd": case_fd, "modes": case_modes,
         "wbrto": case_wbrto}


def main():
    if sys.argv[1] == "--sink":
        return _sink(int(sys.argv[2]))
    if sys.argv[1] == "--source":
        return _source(int(sys.argv[2]), float(sys.argv[3]))
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "started").write_text("")
    for name in sys.argv[3:]:
        try:
            CASES[name]()
        except Exception as exc:  # report it to the host, keep going
            RESULTS.setdefault("errors", {})[name] = f"{type(exc).__name__}: {exc}"
            teardown()
    (OUT / "results.json").write_text(json.dumps(RESULTS))


if __name__ == "__main__":
    main()
