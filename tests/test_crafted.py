"""The crafted captures carry their ground truth (fixtures/pcaps/
crafted_expected.json, written by fixtures/craft.py): which frames are
retransmissions, timeouts, fast retransmits, out of order, duplicate ACKs,
zero windows and window probes. tcpvar must find exactly those, except where
OVERRIDE says why its definition gives another answer (docs/analysis.md)."""
from __future__ import annotations

import json

import pytest

import peers
from conftest import FIXTURES

EXPECTED = json.loads((FIXTURES / "crafted_expected.json").read_text())["files"]
CRAFTED = sorted(name for name, f in EXPECTED.items()
                 if f.get("connections") and (FIXTURES / name).exists()
                 and name != "pcapng_mixed_linktypes.pcapng")

# packets.ev bit for each list of frames in the ground truth
MARKS = {
    "retransmissions": 1,
    "out_of_order": 2,
    "duplicate_acks": 4,
    "zero_window": 8,
    "window_probes": 16,
    "fast_retransmissions": 32,
    "timeout_retransmissions": 64,
}

# (file, direction, list) -> (frames tcpvar reports, why)
OVERRIDE = {
    ("sack_recovery.pcap", "c2s", "retransmissions"): (
        [], "the first send of frame 14's segment was lost before the capture point: it fills "
            "a gap the capture never saw, so it is out of order (as in tcptrace); the fast "
            "retransmit is still recognised"),
    ("sack_recovery.pcap", "c2s", "out_of_order"): ([14], "see above"),
    ("truncated_last.pcap", "c2s", "packets"): (
        5, "the file ends inside the last record (a pure ACK): what is before it is read"),
    ("truncated_last.pcap", "c2s", "pure_acks"): (2, "see above"),
    ("zero_window.pcap", "c2s", "unique_data_bytes"): (
        7300, "as in tcptrace, window probe bytes are never unique data, the accepted one "
              "included (tcptrace's 'ttl stream length' is the 7301)"),
}


def _frames(con, capture_id, conn, direction, bit):
    return [r[0] for r in con.execute(
        "SELECT frame FROM packets WHERE capture_id = $1 AND conn = $2 AND dir = $3 "
        "AND ev & $4 <> 0 ORDER BY frame", [capture_id, conn, direction, bit]).fetchall()]


@pytest.mark.parametrize("name", CRAFTED)
def test_crafted_ground_truth(name, analyzed, store):
    doc = analyzed(FIXTURES / name)
    expected = EXPECTED[name]
    assert len(doc["connections"]) == expected["tcp_connections"]
    problems = []
    for exp, ours in zip(expected["connections"], doc["connections"]):
        assert peers.endpoint(ours["a"]) == peers.endpoint(exp["c2s"]["src"])
        for side, direction in (("c2s", "a2b"), ("s2c", "b2a")):
            want, got = exp[side], ours[direction]
            for field, mine in (("packets", "packets"), ("data_packets", "data_packets"),
                                ("data_bytes", "data_bytes"), ("pure_acks", "pure_acks")):
                target = OVERRIDE.get((name, side, field), (want.get(field), ""))[0]
                if target is not None and target != got[mine]:
                    problems.append(f"{side} {field}: want {target}, got {got[mine]}")
            for listname, bit in MARKS.items():
                frames = _frames(store.con, doc["capture_id"], ours["id"],
                                 0 if side == "c2s" else 1, bit)
                target = OVERRIDE.get((name, side, listname), (want[listname], ""))[0]
                if frames != target:
                    problems.append(f"{side} {listname}: want {target}, got {frames}")
    assert not problems, "\n".join(problems)


def test_overrides_are_explained():
    for key, (_, why) in OVERRIDE.items():
        assert key[0] in EXPECTED and why


@pytest.mark.parametrize("name", CRAFTED)
def test_relative_sequence_numbers(name, analyzed, store):
    """seq and ack relative to each side's ISN (SYN = 0), as tshark shows them,
    for every frame whose ground truth has them; unwrapped across 2^32."""
    doc = analyzed(FIXTURES / name)
    rows = dict((r[0], r[1:]) for r in store.con.execute(
        "SELECT frame, seq, ack, flags FROM packets WHERE capture_id = $1",
        [doc["capture_id"]]).fetchall())
    checked = 0
    for f in EXPECTED[name].get("frame_table", []):
        if f["frame"] not in rows:
            continue                      # cut off (truncated_last) or not TCP
        seq, ack, flags = rows[f["frame"]]
        if f.get("seq_rel") is not None:
            assert seq == f["seq_rel"], f"frame {f['frame']} seq"
            checked += 1
        if f.get("ack_rel") is not None and flags & 0x10:
            assert ack == f["ack_rel"], f"frame {f['frame']} ack"
    assert checked or name == "no_handshake.pcap"


def test_ngwa_option_values(analyzed, store):
    """packets.ngwa_window holds the NGWA window of a well-formed option (0xFFFFFFFF
    included: 'no constraint yet'); absent and malformed options give NULL."""
    name = "ngwa_options.pcap"
    doc = analyzed(FIXTURES / name)
    ours = dict(store.con.execute("SELECT frame, ngwa_window FROM packets WHERE capture_id = $1",
                                  [doc["capture_id"]]).fetchall())
    states = set()
    for f in EXPECTED[name]["frame_table"]:
        ngwa = f["ngwa"]
        states.add(ngwa["state"])
        want = ngwa["value"] if ngwa["state"] in ("valid", "unset") else None
        assert ours[f["frame"]] == want, f"frame {f['frame']}: {ngwa.get('case')}"
    assert states == {"valid", "unset", "absent", "malformed"}


# ground-truth list or count -> the connection field tcpvar reports it in
COUNTS = {"unique_data_bytes": "unique_bytes", "sack_packets": "sack_packets",
          "sack_blocks": "sack_blocks"}
FLAGS = {"syn": "syn", "fin": "fin", "rst": "rst"}


@pytest.mark.parametrize("name", CRAFTED)
def test_crafted_counters(name, analyzed):
    """Per direction, the counters the ground truth has besides frame lists:
    unique data bytes, SACK packets and blocks, SYN, FIN and RST segments;
    per connection the options of the handshake and its RTT."""
    doc = analyzed(FIXTURES / name)
    problems = []
    for exp, ours in zip(EXPECTED[name]["connections"], doc["connections"]):
        for side, direction in (("c2s", "a2b"), ("s2c", "b2a")):
            want, got = exp[side], ours[direction]
            pairs = [(f, want[f], got[m]) for f, m in COUNTS.items()]
            pairs += [(f, len(want[f]), got[m]) for f, m in FLAGS.items()]
            pairs += [("dsack_blocks", want["dsack_blocks"], got["dsack_packets"])]
            problems += [f"{side} {f}: want {w}, got {g}" for f, w, g in pairs
                         if OVERRIDE.get((name, side, f), (w,))[0] != g]
        negotiated = exp.get("options_negotiated") if exp["handshake"] else None
        if negotiated:
            a = ours["a2b"]
            got = {"mss": a["mss_requested"], "sack_permitted": a["sack_permitted"],
                   "timestamps": a["timestamps"],
                   "wscale": [ours["a2b"]["window_scale"], ours["b2a"]["window_scale"]]}
            want = {k: negotiated.get(k) for k in got}
            if want["wscale"] is None:
                want["wscale"] = [None, None]
            if got != want:
                problems.append(f"options: want {want}, got {got}")
            if exp.get("handshake_rtt_ns") is not None and \
                    ours["a2b"]["rtt_3whs_ms"] != pytest.approx(exp["handshake_rtt_ns"] / 1e6):
                problems.append(f"handshake RTT: want {exp['handshake_rtt_ns'] / 1e6} ms, "
                                f"got {ours['a2b']['rtt_3whs_ms']}")
    assert not problems, "\n".join(problems)


def _inflight_by_hand(table: list[dict]) -> dict[int, int]:
    """Per ACK frame, the peer's bytes in flight after it (docs/schema.md):
    the highest sequence number the peer has sent (SYN and FIN count one,
    window probes none) less the ACK, once the peer has sent data."""
    snd_max: dict[tuple, int] = {}
    sent_data: set[tuple] = set()
    out = {}
    for f in table:
        if f.get("seq_rel") is None:
            continue
        me = (f["conn"], f["dir"])
        peer = (f["conn"], "s2c" if f["dir"] == "c2s" else "c2s")
        ack = f.get("ack_rel")
        if "A" in f["flags"] and ack is not None and peer in sent_data and snd_max[peer] >= ack:
            out[f["frame"]] = snd_max[peer] - ack
        if "window_probe" in f["labels"]:
            continue
        end = f["seq_rel"] + f["len"] + ("S" in f["flags"]) + ("F" in f["flags"])
        snd_max[me] = max(snd_max.get(me, end), end)
        if f["len"]:
            sent_data.add(me)
    return out


@pytest.mark.parametrize("name", CRAFTED)
def test_crafted_frames(name, analyzed, store):
    """Per frame: its time to the nanosecond, the scaled window, the
    timestamp value, its number of SACK blocks and, after an ACK, the peer's
    bytes in flight; per ACK, the Karn RTT sample the ground truth has."""
    doc = analyzed(FIXTURES / name)
    rows = {r[0]: r[1:] for r in store.con.execute(
        "SELECT frame, ts_ns, win, tsval, len(sack_l), inflight, rtt_us FROM packets "
        "WHERE capture_id = $1", [doc["capture_id"]]).fetchall()}
    expected = EXPECTED[name]
    table = [f for f in expected.get("frame_table", []) if f["frame"] in rows]
    inflight = _inflight_by_hand(table)
    problems = []
    for f in table:
        ts, win, tsval, nsack, flight, _ = rows[f["frame"]]
        checks = [("t_ns", f["t_ns"], ts), ("tsval", f.get("tsval"), tsval),
                  ("sack blocks", len(f.get("sack_raw") or []), nsack or 0),
                  ("win_bytes", f.get("win_bytes"), win)]
        if f.get("seq_rel") is not None:
            checks.append(("bytes in flight", inflight.get(f["frame"]), flight))
        problems += [f"frame {f['frame']} {what}: want {w}, got {g}" for what, w, g in checks
                     if w != g and (w is not None or what == "bytes in flight")]
    problems += _rtt_problems(expected, [f for f in table if f.get("seq_rel") is not None],
                              {f: r[5] for f, r in rows.items()})
    assert not problems, "\n".join(problems)


def _rtt_problems(expected: dict, table: list[dict], rtt_us: dict[int, int | None]) -> list[str]:
    """tcpvar samples the RTT where Karn's rule lets it (the ground truth's
    list), except after a segment of lower sequence sent later than the one
    acked (a loss or reordering: the ACK may answer that later segment); it
    also samples the ACKs of SYNs and FINs, which the list leaves out."""
    by_frame = {f["frame"]: f for f in table}
    karn = {s["ack_frame"]: s for c in expected["connections"]
            for s in c.get("rtt_samples_karn", [])}
    problems = []
    for ack, s in karn.items():
        d = by_frame.get(s["data_frame"])     # None: the truth has no relative numbers
        later_below = d is not None and any(
            f["conn"] == d["conn"] and f["dir"] == d["dir"] and f["len"]
            and f["seq_rel"] < d["seq_rel"] and d["frame"] < f["frame"] < ack for f in table)
        want = None if later_below else s["rtt_ns"] // 1000
        if rtt_us[ack] != want:
            problems.append(f"frame {ack} RTT: want {want} us, got {rtt_us[ack]}")
    for frame, got in rtt_us.items():
        f = by_frame.get(frame)
        if got is None or frame in karn or f is None:
            continue
        acked = [g for g in table if g["conn"] == f["conn"] and g["dir"] != f["dir"]
                 and g["frame"] < frame and g["seq_rel"] is not None
                 and g["seq_rel"] + g["len"] + 1 == f["ack_rel"] and g["flags"] not in ("A", "PA")]
        if not acked:
            problems.append(f"frame {frame}: an RTT sample ({got} us) the ground truth lacks")
    return problems


def test_timeouts_of_a_blackholed_flow(analyzed, store):
    """iperf_rto.pcap: the timeouts tshark's retransmissions give after 150 ms
    or more of the sender's silence (captures_summary.json, by
    fixtures/make_captures.py) are tcpvar's timeout events, frame and sequence
    number alike. tcpvar's silence runs from when the sender last heard from
    the peer: after the first timeout that is the previous one, so the two
    silences agree; before it, the sender heard the peer earlier than it last sent."""
    summary = json.loads((FIXTURES / "captures_summary.json").read_text())["iperf_rto.pcap"]
    doc = analyzed(FIXTURES / "iperf_rto.pcap")
    ours = store.con.execute(
        "SELECT frame, seq, silence_ms FROM retransmit_events WHERE capture_id = $1 "
        "AND kind = 'timeout' ORDER BY frame", [doc["capture_id"]]).fetchall()
    want = summary["timeout_retransmissions"]
    assert [(f, s) for f, s, _ in ours] == [(e["frame"], e["rel_seq"]) for e in want]
    assert ours[0][2] >= want[0]["silence_s"] * 1e3
    assert [round(s, 3) for _, _, s in ours[1:]] == [round(e["silence_s"] * 1e3, 3)
                                                     for e in want[1:]]
