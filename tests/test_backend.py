"""Which backend `tcpvar run` picks. Whether the host kernel has netem is
its real answer (held to a netem qdisc set up by hand, below), and each test
expects what follows from that answer, so the tests pass on a host with
netem and on one without; what does not hang on netem (no delay, no loss, a
variant, a kernel) is driven by the run's parameters."""
from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

from tcpvar import errors
from tcpvar.capture import backend
from tcpvar.capture.params import make_params


def params(cc="cubic", rtt_ms=100.0, loss_pct=0.0, **kw):
    return make_params(cc=cc, rtt_ms=rtt_ms, loss_pct=loss_pct, bw="20mbit", buffer="bdp",
                       duration_s=10, flows=None, mode="single", start_gap_s=None,
                       schedule=None, repeat=1, seed=0, **kw)


@pytest.fixture(scope="module")
def netem():
    """Whether this host's kernel has netem, as tcpvar finds it."""
    return backend.host_has_netem()


def test_auto_with_and_without_netem(netem):
    chosen, why = backend.choose("auto", params(cc="cubic"), None)
    if netem:
        assert (chosen, why) == ("netns", "the host kernel has everything this run needs")
    else:
        assert chosen == "vm" and why.startswith("the host kernel has no netem")


def test_auto_needs_no_netem_without_delay_or_loss(netem):
    assert backend.choose("auto", params(rtt_ms=0), None)[0] == "netns"
    expected = "netns" if netem else "vm"
    assert backend.choose("auto", params(rtt_ms=0, loss_pct=1), None)[0] == expected


def test_a_variant_the_host_lacks_goes_to_the_vm(netem):
    lacking = "nosuchcc"
    assert lacking not in backend.available_variants()
    chosen, why = backend.choose("auto", params(cc=lacking, rtt_ms=0), None)
    assert chosen == "vm" and f"lacks {lacking}" in why


def test_netns_when_asked(netem):
    if netem:
        assert backend.choose("netns", params(), None) == ("netns", "chosen with --backend netns")
    else:
        with pytest.raises(errors.TestbedError, match="no netem"):
            backend.choose("netns", params(), None)


def test_vm_and_kernels_whatever_the_host(netem):
    assert backend.choose("vm", params(), None)[0] == "vm"
    assert backend.choose("auto", params(), "stock")[0] == "vm"
    assert backend.choose("auto", params(ngwa=5), None)[0] == "vm"
    with pytest.raises(errors.UsageError, match="--kernel chooses the micro-VM's kernel"):
        backend.choose("netns", params(), "stock")


def test_host_variants_are_the_kernels():
    offered = set(Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
                  .read_text().split())
    assert offered <= backend.available_variants()


def test_netem_probe_tells_the_truth():
    """The probe against a netem qdisc set up here by hand."""
    ns = f"tcpvar-test-{uuid.uuid4().hex[:6]}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        done = subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo",
                               "root", "netem", "loss", "1%"], capture_output=True)
        assert backend.host_has_netem() is (done.returncode == 0)
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=True)
