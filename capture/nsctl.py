"""Settings made from tcpvar's own process inside a network namespace:
sysctls and segmentation offloads. In the emulated VM every process start
costs about 0.2 s, and a 32-flow dumbbell has 67 namespaces; entering one
with setns(2) costs microseconds. What this writes is what `sysctl` and
`ethtool -K` would write (tests/test_nsctl.py reads it back with them)."""
from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import re
import socket
import struct
from pathlib import Path

from tcpvar.errors import TestbedError

CLONE_NEWNET = 0x40000000
NETNS_DIR = Path("/run/netns")            # where `ip netns add` binds them
SIOCETHTOOL = 0x8946
# the ethtool ioctl (include/uapi/linux/ethtool.h): the feature names the
# kernel offers (they differ between kernels: 6.18 has AccECN segmentation),
# then one request setting them all, as `ethtool -K` does
ETHTOOL_GSTRINGS, ETHTOOL_SSET_INFO, ETHTOOL_SFEATURES = 0x1b, 0x37, 0x3b
ETH_SS_FEATURES = 4
ETH_GSTRING_LEN = 32
# what `ethtool -K` calls tso, gso and gro (the names of the kernel's features)
OFFLOAD_FEATURES = re.compile(r"tx-tcp[-a-z0-9]*-segmentation|tx-generic-segmentation|rx-gro")
NO_LRO = "rx-lro"          # never on: it merges what the captures should show as sent

_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


@contextlib.contextmanager
def inside(ns: str):
    """The calling thread in network namespace @ns for the block (setns
    moves one thread; the others stay where they are)."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        try:
            target = os.open(NETNS_DIR / ns, os.O_RDONLY)
        except OSError as exc:
            raise TestbedError(f"no network namespace {ns}: {exc.strerror}") from None
        try:
            _setns(target)
        finally:
            os.close(target)
        try:
            yield
        finally:
            _setns(home)
    finally:
        os.close(home)


def _sysctl_path(key: str) -> Path:
    return Path("/proc/sys", *key.split("."))


def write_sysctls(ns: str, values: dict[str, str]) -> None:
    """`sysctl -w` of every key in @ns; a key the kernel lacks is an error
    naming it."""
    with inside(ns):
        for key, value in values.items():
            try:
                _sysctl_path(key).write_text(str(value))
            except OSError as exc:
                raise TestbedError(f"sysctl {key}={value} in {ns} failed: "
                                   f"{exc.strerror}") from None


def read_sysctls(ns: str, keys) -> dict[str, str | None]:
    """`sysctl -n` of each key in @ns; None for a key the namespace lacks
    (net.core.default_qdisc exists in the initial namespace only)."""
    out: dict[str, str | None] = {}
    with inside(ns):
        for key in keys:
            try:
                out[key] = _sysctl_path(key).read_text().strip() or None
            except OSError:
                out[key] = None
    return out


def _ethtool(sock: socket.socket, dev: str, request: bytes) -> bytes:
    """One SIOCETHTOOL request on @dev; the buffer as the kernel left it."""
    buf = ctypes.create_string_buffer(request, len(request))
    ifreq = struct.pack("16sP", dev.encode(), ctypes.addressof(buf)).ljust(40, b"\0")
    fcntl.ioctl(sock.fileno(), SIOCETHTOOL, ifreq)
    return buf.raw


def _feature_names(sock: socket.socket, dev: str) -> list[str]:
    info = _ethtool(sock, dev, struct.pack("=IIQI", ETHTOOL_SSET_INFO, 0,
                                            1 << ETH_SS_FEATURES, 0))
    count = struct.unpack_from("=I", info, 16)[0]
    raw = _ethtool(sock, dev, struct.pack("=III", ETHTOOL_GSTRINGS, ETH_SS_FEATURES, count)
                   + bytes(count * ETH_GSTRING_LEN))
    return [raw[12 + k * ETH_GSTRING_LEN:12 + (k + 1) * ETH_GSTRING_LEN].split(b"\0")[0]
            .decode() for k in range(count)]


def set_offloads(ns: str, devs: list[str], on: bool) -> None:
    """`ethtool -K DEV tso|gso|gro on|off lro off` for every device of @ns.
    What the device fixes (veth's LRO, say) stays as it is, as with ethtool."""
    with inside(ns), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for dev in devs:
            try:
                names = _feature_names(sock, dev)
                blocks = [[0, 0] for _ in range((len(names) + 31) // 32)]
                for bit, name in enumerate(names):
                    if name == NO_LRO or OFFLOAD_FEATURES.fullmatch(name):
                        blocks[bit // 32][0] |= 1 << bit % 32
                        if on and name != NO_LRO:
                            blocks[bit // 32][1] |= 1 << bit % 32
                _ethtool(sock, dev, struct.pack("=II", ETHTOOL_SFEATURES, len(blocks))
                         + b"".join(struct.pack("=II", *b) for b in blocks))
            except OSError as exc:
                raise TestbedError(f"ethtool -K {dev} in {ns} failed: "
                                   f"{exc.strerror}") from None
