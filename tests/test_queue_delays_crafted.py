"""Queueing delays of a crafted capture pair, written here byte for byte: a
run folder whose sender.pcap has one flow's packets entering the router
and whose bottleneck.pcap has them leaving a queue that serves a packet
every 500 µs. One data packet is dropped and sent again later, with the
same bytes; another leaves at the instant the next arrives. Every delay
and backlog is known before tcpvar reads the folder."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import duckdb
import pytest

from conftest import tcpvar_main
from shapes import ACK, MSS, SYN, _frame

SERVICE_US = 500
T0_US = 1_700_000_000 * 10**6
# (arrival µs after T0, segment number; 0 is the SYN, -1 the handshake's ACK)
ARRIVALS = [(0, 0), (2000, -1), (3000, 1), (3100, 2), (3200, 3), (3300, 4), (3400, 5),
            (4500, 6), (9000, 4)]
DROPPED = {(3300, 4)}               # the queue was full for the first copy of segment 4


def _departures() -> dict[tuple[int, int], int]:
    """The queue's FIFO service by hand: each packet left SERVICE_US after
    it arrived or after the packet before it left, whichever was later."""
    out, free = {}, 0
    for a in ARRIVALS:
        if a in DROPPED:
            continue
        free = max(free, a[0]) + SERVICE_US
        out[a] = free
    return out


def _segment(n: int) -> tuple[int, int, int, int]:
    """(seq, ack, flags, length) of segment @n from the sender."""
    if n == 0:
        return 0, 0, SYN, 0
    if n == -1:
        return 1, 1, ACK, 0
    return 1 + (n - 1) * MSS, 1, ACK, MSS


def _write(path: Path, records: list[tuple[int, bytes, int]]) -> None:
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 54, 1))
        for us, data, wire in sorted(records, key=lambda r: r[0]):
            f.write(struct.pack("<IIII", us // 10**6, us % 10**6, len(data), wire) + data)


@pytest.fixture(scope="module")
def crafted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("crafted-queue")
    folder = tmp / "20261127-120000-single-cubic-c0ffee-r1"
    folder.mkdir()
    sender, bottleneck = [], []
    for ipid, (t, n) in enumerate(ARRIVALS, start=1):
        data, wire = _frame(True, *_segment(n)[:3], _segment(n)[3], ipid)
        sender.append((T0_US + t, data, wire))
        if (t, n) in _departures():
            bottleneck.append((T0_US + _departures()[(t, n)], data, wire))
    synack = _frame(False, 0, 1, SYN | ACK, 0, 100)
    sender.append((T0_US + 1000, *synack))
    # ACKs back, not through the queue: of 1-3, again (4 is missing), and of all
    for i, (t, up_to) in enumerate(((6100, 3), (6200, 3), (10000, 6)), start=1):
        sender.append((T0_US + t, *_frame(False, 1, 1 + up_to * MSS, ACK, 0, 100 + i)))
    _write(folder / "sender.pcap", sender)
    _write(folder / "bottleneck.pcap", bottleneck)
    params = {"ccs": ["cubic"], "rtt_ms": 0.0, "loss_pct": 0.0, "bw_bps": 8 * 1514 * 2000.0,
              "buffer": {"text": "5", "packets": 5, "bytes": None}, "duration_s": 1.0,
              "flows": 1, "mode": "single", "start_gap_s": 0.0, "schedule": [], "repeat": 1,
              "seed": 0, "shaper": "htb", "wbrto_unit_ms": 1000}
    flow = {"flow": 1, "role": "test", "cc": "cubic", "src_addr": "198.18.10.1",
            "src_port": 40000, "dst_addr": "198.18.20.2", "dst_port": 5201, "start_s": 0.0,
            "duration_s": 1.0}
    (folder / "manifest.json").write_text(json.dumps({
        "params": params, "flows": [flow], "status": "complete", "backend": "netns",
        "started_ns": T0_US * 1000, "ended_ns": (T0_US + 10_000) * 1000}))
    res = tcpvar_main("load", folder, "--db", tmp / "t.duckdb", "-q")
    assert res.returncode == 0, res.stderr
    return tmp


def _expected() -> list[tuple[int, int, int, int]]:
    """Per data packet that left: (arrived µs, left µs, delay µs, the packets
    that had arrived by then and left after it)."""
    dep = _departures()
    out = []
    for a, d in dep.items():
        if a[1] <= 0:
            continue                    # the SYN and the pure ACK carry no data
        behind = sum(1 for b, e in dep.items() if b[0] <= d < e)
        out.append((a[0], d, d - a[0], behind))
    return sorted(out)


def test_delays_and_backlogs_are_the_known_ones(crafted):
    con = duckdb.connect(str(crafted / "t.duckdb"), read_only=True)
    rows = con.execute("SELECT arrived_ns, departed_ns, delay_us, backlog_packets FROM "
                       "queue_delays WHERE flow = 1 ORDER BY arrived_ns").fetchall()
    con.close()
    got = [((a - T0_US * 1000) // 1000, (d - T0_US * 1000) // 1000, delay, n)
           for a, d, delay, n in rows]
    want = _expected()
    assert got == [(a, d, pytest.approx(delay), n) for a, d, delay, n in want]
    # by hand: 1 leaves at 3500 with 2, 3 and 5 behind it (the first 4 was
    # dropped); 3 leaves at 4500 as 6 arrives, which counts; 5 waits behind
    # 2 and 3; the resent 4 is served at once
    assert want[0] == (3000, 3500, 500, 3)
    assert (3200, 4500, 1300, 2) in want and (3400, 5000, 1600, 1) in want
    assert want[-1] == (9000, 9500, 500, 0)


def test_the_summary_and_the_figure_agree(crafted):
    want = sorted(delay for _, _, delay, _ in _expected())
    res = tcpvar_main("plot", "queue", "run:1", "--db", crafted / "t.duckdb", "--json", "-q",
                      "-o", crafted / "q.png")
    assert res.returncode == 0, res.stderr
    (flow,) = json.loads(res.stdout)["senders"]
    assert sorted(ms for _, ms in flow["delay"]) == pytest.approx([d / 1e3 for d in want])
    res = tcpvar_main("load", next(crafted.glob("2026*")), "--db", crafted / "t.duckdb",
                      "--json")
    assert res.returncode == 0, res.stderr
    (run,) = json.loads(res.stdout)["runs"]
    q = run["queue_delay"]
    assert q["packets"] == len(want) and q["max_ms"] == pytest.approx(max(want) / 1e3)
    assert q["p50_ms"] == pytest.approx((want[2] + want[3]) / 2 / 1e3)     # six: between 3rd, 4th


@pytest.mark.parametrize("line", ['{"id": 1, "planned_s": 0, "bytes": 10, "sent": 10, '
                                  '"outcome": "complete\\u001b[2J"}',
                                  '{"id": 99999999999, "planned_s": 0, "bytes": 10, "sent": 10, '
                                  '"outcome": "complete"}',
                                  '{"id": 1, "planned_s": 1e400, "bytes": 10, "sent": 10, '
                                  '"outcome": "cut"}', "[1, 2]\n{}"])
def test_a_hostile_short_flow_record_is_one_line(crafted, tmp_path, line):
    """A short.jsonl no client wrote: one line naming the file (its escape
    shown as text), exit 3, and nothing of the folder stored."""
    import shutil

    folder = tmp_path / next(crafted.glob("2026*")).name
    shutil.copytree(next(crafted.glob("2026*")), folder)
    (folder / "short.jsonl").write_text(line + "\n")
    store = tmp_path / "t.duckdb"
    shutil.copy(crafted / "t.duckdb", store)
    res = tcpvar_main("load", folder, "--db", store, "-q")
    assert res.returncode == 3, res.stderr
    (msg,) = res.stderr.strip().splitlines()
    assert "short.jsonl" in msg and "\x1b" not in msg
    con = duckdb.connect(str(store), read_only=True)
    assert con.execute("SELECT count(*) FROM runs").fetchone() == (1,)      # the crafted one
    assert con.execute("SELECT count(*) FROM short_flows").fetchone() == (0,)
    con.close()
