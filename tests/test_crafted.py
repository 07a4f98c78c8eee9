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
