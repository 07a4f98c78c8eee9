"""The `cwnd_estimate` view on captures of real iperf3 transfers, held to
tshark's tcp.analysis.bytes_in_flight: tshark gives, at each data segment,
the bytes sent and not yet acknowledged; tcpvar gives them at each ACK of
the receiver. From one to the other: the view's value at the receiver's
last ACK, plus the new bytes the sender sent since, is tshark's value at
that data segment."""
from __future__ import annotations

import subprocess

import duckdb
import pytest

from conftest import FIXTURES, tcpvar_main


def _tshark(path) -> list[list[str]]:
    fields = ["frame.number", "tcp.stream", "tcp.srcport", "tcp.dstport", "tcp.len", "tcp.seq",
              "tcp.analysis.bytes_in_flight", "tcp.options.sack_le"]
    out = subprocess.run(["tshark", "-n", "-r", str(path), "-T", "fields", "-E", "separator=,",
                          *sum((["-e", f] for f in fields), [])],
                         capture_output=True, text=True, check=True).stdout
    return [line.split(",", len(fields) - 1) for line in out.splitlines()]


@pytest.mark.parametrize("name", ["iperf_rto.pcap", "iperf_4flows.pcap", "iperf_bulk_loss.pcap"])
def test_bytes_in_flight_as_tshark_counts_them(name, tmp_path):
    path = FIXTURES / name
    db = tmp_path / "t.duckdb"
    res = tcpvar_main("analyze", "--db", db, "-q", path)
    assert res.returncode == 0, res.stderr
    con = duckdb.connect(str(db), read_only=True)
    at_ack = dict(con.execute("SELECT frame, bytes_in_flight FROM cwnd_estimate").fetchall())
    con.close()
    flight: dict[tuple, int] = {}       # per (stream, sender's port): since the last ACK
    sacked: dict[tuple, bool] = {}
    highest: dict[tuple, int] = {}
    same, other = 0, []
    for frame, stream, sport, dport, n, seq, tshark_flight, sack in _tshark(path):
        if not sport:
            continue                                        # not TCP
        if int(frame) in at_ack:                            # an ACK of the receiver's
            flight[(stream, dport)] = at_ack[int(frame)]
            # tshark takes SACKed bytes out of flight; the view, as docs/schema.md
            # says, is the highest sequence sent less the cumulative ACK
            sacked[(stream, dport)] = bool(sack)
        key = (stream, sport)
        if int(n) == 0:
            continue
        end = int(seq) + int(n)
        new = end - highest[key] if key in highest else int(n)
        highest[key] = max(highest.get(key, end), end)
        if new <= 0 or key not in flight or sacked[key] or not tshark_flight:
            continue                                        # a resend, or after SACKs
        flight[key] += new
        if flight[key] == int(tshark_flight):
            same += 1
        else:
            other.append((int(frame), int(tshark_flight), flight[key]))
    assert same > 3000 and other == [], other[:5]
