"""Run the peer tools (tcptrace, tshark) and parse what they print, so tests
compare tcpvar's numbers with theirs on the same capture."""
from __future__ import annotations

import ipaddress
import os
import re
import subprocess

_PAIR = re.compile(r"^\s*(?P<k1>[^:]+?):\s*(?P<v1>.*?)\s{2,}(?P<k2>[^:]+?):\s*(?P<v2>.*?)\s*$")
_HOST = re.compile(r"^\s*host ([a-z]+):\s+(\S+)")
_CONN = re.compile(r"^TCP connection (\d+):")


def endpoint(text: str) -> tuple[str, int]:
    """'addr:port' as tcptrace or tshark print it -> (canonical addr, port)."""
    addr, port = text.rsplit(":", 1)
    return str(ipaddress.ip_address(addr.strip("[]"))), int(port)


def number(value: str) -> float | None:
    m = re.match(r"^-?\d+(\.\d+)?", value.strip())
    return float(m.group(0)) if m else None


def tcptrace(path: str) -> list[dict]:
    """`tcptrace -l -r -n FILE`: one dict per connection with 'a', 'b' and
    per-direction dicts 'a2b', 'b2a' of {line label: text value}."""
    proc = subprocess.run(["tcptrace", "-l", "-r", "-n", path], capture_output=True,
                          text=True, env={**os.environ, "TZ": "UTC"}, check=False)
    conns: list[dict] = []
    for line in proc.stdout.splitlines():
        if _CONN.match(line):
            conns.append({"a2b": {}, "b2a": {}})
            continue
        if not conns:
            continue
        host = _HOST.match(line)
        if host:
            # tcptrace letters the hosts a/b, c/d, ...: first is a, second b
            conns[-1]["b" if "a" in conns[-1] else "a"] = endpoint(host.group(2))
            continue
        m = _PAIR.match(line)
        if m and m.group("k1") == m.group("k2"):
            conns[-1]["a2b"][m.group("k1")] = m.group("v1")
            conns[-1]["b2a"][m.group("k2")] = m.group("v2")
    return conns


def tcptrace_option_warnings(path: str) -> int:
    """How many segments `tcptrace -w` says it could not parse all options of."""
    proc = subprocess.run(["tcptrace", "-w", "-n", path], capture_output=True, text=True,
                          check=False)
    return sum("ParseOptions:" in line for line in proc.stderr.splitlines())


_CONV = re.compile(r"^(?P<a>\S+)\s+<->\s+(?P<b>\S+)\s+(?P<f_ba>\d+)\s+(?P<by_ba>\d+ \S+)\s+"
                   r"(?P<f_ab>\d+)\s+(?P<by_ab>\d+ \S+)\s+(?P<f>\d+)\s+")


def tshark_conversations(path: str) -> list[dict]:
    """`tshark -q -z conv,tcp`: per conversation the endpoints and frame counts
    in each direction (a -> b is tshark's '->' column)."""
    proc = subprocess.run(["tshark", "-n", "-r", path, "-q", "-z", "conv,tcp"],
                          capture_output=True, text=True, check=False)
    out = []
    for line in proc.stdout.splitlines():
        m = _CONV.match(line)
        if m:
            out.append({"a": endpoint(m.group("a")), "b": endpoint(m.group("b")),
                        "frames_a2b": int(m.group("f_ab")), "frames_b2a": int(m.group("f_ba")),
                        "frames": int(m.group("f"))})
    return out
