"""Application-limited flows (`tcpvar run --rate`, netns backend): one
flow as fast as TCP goes beside one held to 5 Mbit/s. iperf3 was asked for
that rate (its own report says so) and tshark sees the flow carry it."""
from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

import tshark_truth as truth

from run_helpers import tcpvar_run

pytestmark = pytest.mark.slow


def test_a_flow_held_to_its_rate(tmp_path):
    rc, doc, err = tcpvar_run(tmp_path, "--backend", "netns", "--cc", "cubic,cubic", "--rate",
                              "0,5mbit", "--duration", 5, "--rtt", 0, "--bw", "20mbit",
                              "--buffer", 100)
    assert rc == 0, err
    (run,) = doc["runs"]
    folder = Path(run["dir"])
    asked = [json.loads((folder / f"iperf-{f}.json").read_text())["start"]["test_start"]
             ["target_bitrate"] for f in (1, 2)]
    assert asked == [0, 5_000_000]
    con = duckdb.connect(str(tmp_path / "t.duckdb"), read_only=True)
    assert con.execute("SELECT list(rate_bps ORDER BY flow) FROM flows").fetchone()[0] == \
        [None, 5e6]
    cap = truth.read(folder / "sender.pcap")
    rates = {}
    for f in run["flows"]:
        host, port = f["src"].rsplit(":", 1)
        sender = (host, int(port))
        rates[f["flow"]] = 8 * truth.sent_once(cap.segments[sender]) / cap.data_s(sender)
    assert rates[2] == pytest.approx(5e6, rel=0.05)
    assert rates[1] > 2 * rates[2]         # the unlimited flow takes the rest
    assert [f["rate_bps"] for f in run["flows"]] == [None, 5e6]
