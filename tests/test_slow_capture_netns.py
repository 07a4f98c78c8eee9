"""A capture that is slow to stop is waited for (netns): in a starved
micro-VM tcpdump took longer than the 3 s the testbed gives a process to
end, and its SIGKILL cut sender.pcap in the middle of a packet. Here every
tcpdump of the run is a tcpdump on PATH that waits 4 s before it passes the
stop on to the real one; each capture still ends by itself, with its
closing counts, and holds every packet it says it captured (tshark)."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tshark_truth import count

from run_helpers import assert_nothing_left, tcpvar_run, tool_on_path

DELAY_S = 4         # more than the testbed's 3 s

SLOW_STOP = """#!/bin/sh
# a capturing tcpdump (-i) that begins to stop {delay} s after it is asked
case " $* " in
*" -i "*) ;;
*) exec {tcpdump} "$@" ;;
esac
{tcpdump} "$@" &
child=$!
trap 'sleep {delay}; kill -TERM $child' INT TERM
wait $child
wait $child
"""


@pytest.mark.slow
def test_a_slow_capture_is_waited_for(tmp_path):
    env = tool_on_path(tmp_path, "tcpdump",
                       SLOW_STOP.format(delay=DELAY_S, tcpdump=shutil.which("tcpdump")))
    rc, doc, err = tcpvar_run(tmp_path, "--backend", "netns", "--cc", "cubic",
                              "--duration", 3, "--rtt", 0, env=env)
    assert rc == 0, err
    (run,) = doc["runs"]
    folder = Path(run["dir"])
    for name in ("sender", "bottleneck"):
        log = (folder / f"{name}.tcpdump.log").read_text()
        captured = re.search(r"(\d+) packets captured", log)
        assert captured, log
        assert count(folder / f"{name}.pcap", "frame") == int(captured.group(1)) > 100
    assert_nothing_left(run)
