"""The programs tcpvar runs and where each comes from: one table, so every
"not installed" message and `tcpvar doctor` name the same package."""
from __future__ import annotations

import os
import shutil
import sys

# program -> the Debian package that provides it (bootstrap.sh installs them all)
DEBIAN_PACKAGES = {
    "ip": "iproute2", "tc": "iproute2", "ss": "iproute2", "ethtool": "ethtool",
    "sysctl": "procps", "tcpdump": "tcpdump", "iperf3": "iperf3",
    "irtt": "irtt", "ping": "iputils-ping",
    "tshark": "tshark", "tcptrace": "tcptrace",
    "qemu-system-x86_64": "qemu-system-x86", "udevd": "udev", "file": "file",
    "busybox": "busybox-static", "depmod": "kmod", "dpkg-deb": "dpkg", "apt-get": "apt",
    "apt-cache": "apt",
    "make": "make", "cc": "gcc", "clang": "clang", "llvm-strip": "llvm",
    "bpftool": "bpftool", "pahole": "dwarves", "git": "git", "flex": "flex",
    "bison": "bison", "bc": "bc", "xz": "xz-utils", "java": "openjdk-17-jre-headless",
}
# program -> the PyPI distribution that provides it (a dependency of tcpvar)
PYPI_PACKAGES = {"vng": "virtme-ng"}

# where virtme-ng's guest init looks for udevd, which creates the
# /dev/virtio-ports links the guest reports through
UDEVD_PATHS = ("/usr/lib/systemd/systemd-udevd", "/lib/systemd/systemd-udevd")


def find(tool: str) -> str | None:
    """The path of @tool as tcpvar (or virtme-ng's guest init) would find it."""
    if tool == "udevd":
        for path in UDEVD_PATHS:
            if os.access(path, os.X_OK):
                return path
    if tool in PYPI_PACKAGES:
        # installed with tcpvar: beside its interpreter, which may be a
        # virtual environment's that is not on PATH
        beside = os.path.join(os.path.dirname(sys.executable), tool)
        if os.access(beside, os.X_OK):
            return beside
    return shutil.which(tool)


def install_command(tool: str) -> str:
    """The command that installs @tool."""
    if tool in PYPI_PACKAGES:
        return pip_install(PYPI_PACKAGES[tool])
    return f"apt-get install {DEBIAN_PACKAGES.get(tool, tool)}"


def pip_install(distribution: str) -> str:
    """The command that installs @distribution beside tcpvar (in its virtual
    environment, when it has one)."""
    pip = os.path.join(os.path.dirname(sys.executable), "pip")
    return f"{pip if sys.prefix != sys.base_prefix else 'pip'} install {distribution}"


def not_installed(tool: str, needed_for: str = "") -> str:
    """The one-line message for a missing @tool."""
    why = f", needed {needed_for}" if needed_for else ""
    return f"{tool} is not installed{why} ({install_command(tool)}, or run ./bootstrap.sh)"
