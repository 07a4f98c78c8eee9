"""--start-gap counts from the first flow's start, not the run's clock
(netns): the first flow's iperf3 client is made slow to start, as it is in a
busy micro-VM, by an iperf3 on PATH that waits before the real one. By
tshark's SYNs on the sender capture, the second flow still connects a whole
gap after the first."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tshark_truth import fields

from run_helpers import assert_nothing_left, tcpvar_run, tool_on_path

GAP_S = 1.0
LAG_S = 1.5         # the first client's start, longer than the gap

SLOW_FIRST = """#!/bin/sh
# the first iperf3 client waits LAG_S before it starts; servers and the rest do not
case " $* " in
*" -c "*) mkdir "{marker}" 2>/dev/null && sleep {lag} ;;
esac
exec {iperf3} "$@"
"""


@pytest.mark.slow
def test_the_gap_counts_from_the_first_flows_start(tmp_path):
    env = tool_on_path(tmp_path, "iperf3", SLOW_FIRST.format(
        marker=tmp_path / "first", lag=LAG_S, iperf3=shutil.which("iperf3")))
    rc, doc, err = tcpvar_run(tmp_path, "--backend", "netns", "--cc", "cubic", "--mode",
                              "fairness", "--start-gap", GAP_S, "--duration", 5, "--rtt", 0,
                              env=env)
    assert rc == 0, err
    assert (tmp_path / "first").is_dir()        # the wrapper ran and held the first client
    (run,) = doc["runs"]
    syns = {}
    for t, port in fields(Path(run["dir"]) / "sender.pcap",
                          "tcp.flags.syn == 1 && tcp.flags.ack == 0",
                          "frame.time_epoch", "tcp.dstport"):
        syns.setdefault(int(port), float(t))
    first, second = (syns[int(f["dst"].rsplit(":", 1)[1])] for f in run["flows"])
    assert second - first >= GAP_S, (first, second)
    assert_nothing_left(run)
