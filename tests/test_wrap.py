"""Statistics stay right when a flow wraps the 32-bit sequence space: a real
4.6 GB flow captured here (iperf_wrap.pcap.gz) and a crafted one whose
retransmission and SACK blocks straddle the wrap (seq_wrap.pcap)."""
from __future__ import annotations

from conftest import FIXTURES


def _data_conn(doc):
    return max(doc["connections"], key=lambda c: c["a2b"]["data_bytes"])


def test_real_flow_wraps_and_stays_consistent(analyzed, store):
    doc = analyzed(FIXTURES / "iperf_wrap.pcap.gz")
    conn = _data_conn(doc)
    s = conn["a2b"]
    assert s["data_bytes"] > 2**32                       # it did wrap
    # nothing is mistaken for a resend, a reordering or a gap at the wrap
    assert s["retransmitted_packets"] == 0
    assert s["out_of_order_packets"] == 0
    assert s["missed_bytes"] == 0
    assert s["unique_bytes"] == s["data_bytes"] == s["stream_bytes"]
    con, cid = store.con, doc["capture_id"]
    isn = con.execute("SELECT a_isn FROM connections WHERE capture_id = $1 AND conn = $2",
                      [cid, conn["id"]]).fetchone()[0]
    # the raw 32-bit numbers go down at the wrap, the stored ones never do
    raw_drops, rel_drops, last_seq, inflight_max = con.execute("""
        WITH d AS (
            SELECT frame, seq, (seq + $3) % 4294967296 AS raw, inflight
            FROM packets WHERE capture_id = $1 AND conn = $2 AND dir = 0 AND len > 0)
        SELECT count(*) FILTER (WHERE raw < lag_raw), count(*) FILTER (WHERE seq < lag_seq),
               max(seq), NULL
        FROM (SELECT *, lag(raw) OVER w AS lag_raw, lag(seq) OVER w AS lag_seq
              FROM d WINDOW w AS (ORDER BY frame))""", [cid, conn["id"], isn]).fetchone()
    assert raw_drops == 1 and rel_drops == 0
    assert last_seq > 2**32
    # bytes in flight stay in the window's range through the wrap (no 4 GB jumps)
    assert con.execute("SELECT max(inflight) FROM packets WHERE capture_id = $1 AND conn = $2 "
                       "AND dir = 1", [cid, conn["id"]]).fetchone()[0] < 2**26
    assert s["rtt_samples"] > 1000


def test_crafted_wrap(analyzed, store):
    doc = analyzed(FIXTURES / "seq_wrap.pcap")
    s = doc["connections"][0]["a2b"]
    assert s["retransmitted_packets"] == 1
    assert s["retransmitted_bytes"] == 1448           # the segment straddling the wrap, once
    assert s["unique_bytes"] == s["stream_bytes"]
    # the D-SACK block straddling the wrap is unwrapped like the sequence numbers
    sacks = store.con.execute(
        "SELECT sack_l, sack_r, ack FROM packets WHERE capture_id = $1 AND len(sack_l) > 0",
        [doc["capture_id"]]).fetchall()
    assert sacks
    for lefts, rights, ack in sacks:
        for left, right in zip(lefts, rights):
            assert 0 < right - left <= 65535 and abs(left - ack) < 2**20
