"""capture/nsctl.py writes sysctls and offloads from tcpvar's own process:
read back here with the real `sysctl` and `ethtool -k` in the namespaces,
on a testbed of the host."""
from __future__ import annotations

import re
import subprocess

import pytest

from tcpvar import errors
from tcpvar.capture import nsctl
from tcpvar.capture.runner import RECORDED_SYSCTLS
from tcpvar.capture.testbed import Testbed, existing_namespaces

FEATURES = {"tso": "tcp-segmentation-offload", "gso": "generic-segmentation-offload",
            "gro": "generic-receive-offload", "lro": "large-receive-offload"}


def in_ns(ns: str, *args: str) -> str:
    return subprocess.run(["ip", "netns", "exec", ns, *args], capture_output=True, text=True,
                          check=True).stdout


def features(ns: str, dev: str) -> dict[str, str]:
    text = in_ns(ns, "ethtool", "-k", dev)
    return {short: re.search(rf"^{name}: (\w+)", text, re.M).group(1)
            for short, name in FEATURES.items()}


def pair(offloads, sysctls=None) -> Testbed:
    bed = Testbed("tcpvar-test")
    bed.node("a", sysctls=sysctls)
    bed.node("b")
    bed.link("a", "eth0", ["10.9.0.1/24"], "b", "eth0", ["10.9.0.2/24"])
    try:
        bed.up(offloads=offloads)
    except BaseException:
        bed.close()
        raise
    return bed


@pytest.mark.parametrize("on", [False, True])
def test_offloads_as_ethtool_reads_them(on):
    with pair(on) as bed:
        for role in ("a", "b"):
            got = features(bed.ns(role), "eth0")
            want = "on" if on else "off"
            assert (got["tso"], got["gso"], got["gro"]) == (want, want, want), got
            assert got["lro"] == "off"


def test_sysctls_as_sysctl_reads_them():
    values = {"net.ipv4.tcp_rmem": "4096 131072 7340032", "net.ipv4.tcp_no_metrics_save": "1",
              "net.ipv4.tcp_congestion_control": "reno"}
    with pair(False, values) as bed:
        a, b = bed.ns("a"), bed.ns("b")
        assert in_ns(a, "sysctl", "-n", "net.ipv4.tcp_rmem").split() == ["4096", "131072",
                                                                          "7340032"]
        assert in_ns(a, "sysctl", "-n", "net.ipv4.tcp_no_metrics_save").strip() == "1"
        assert in_ns(b, "sysctl", "-n", "net.ipv4.tcp_no_metrics_save").strip() == "0"
        read = nsctl.read_sysctls(a, RECORDED_SYSCTLS)
        for key, value in read.items():
            proc = subprocess.run(["ip", "netns", "exec", a, "sysctl", "-n", key],
                                  capture_output=True, text=True)
            assert value == (proc.stdout.strip() or None if proc.returncode == 0 else None), key
        assert read["net.ipv4.tcp_congestion_control"] == "reno"


def test_a_key_the_kernel_lacks_is_named_and_nothing_is_left():
    why = r"^sysctl net\.ipv4\.no_such_key=1 in tcpvar-test-"
    with pytest.raises(errors.TestbedError, match=why):
        with pair(False, {"net.ipv4.no_such_key": "1"}):
            pass
    assert not existing_namespaces("tcpvar-test-")


def test_a_namespace_that_is_not_there():
    with pytest.raises(errors.TestbedError, match="^no network namespace tcpvar-test-none"):
        nsctl.write_sysctls("tcpvar-test-none", {"net.ipv4.tcp_sack": "1"})
