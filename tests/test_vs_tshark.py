"""Frame counts per TCP conversation and direction agree with
`tshark -q -z conv,tcp`. tshark keys a conversation on its 4-tuple only,
so tcpvar's connections on one 4-tuple (port reuse) are added up."""
from __future__ import annotations

from collections import Counter

import pytest

import peers
from conftest import OWN_CAPTURES, SHARED_CAPTURES, capture_id

# capture -> reason tshark's conversations differ from the packets' addresses
KNOWN = {
    "suricata__detect-ipopts.pcap":
        "tshark keys source-routed packets on the route's final address",
    "suricata__detect-ipopts.rawip.pcap": "the same capture relabelled as raw IP",
    "pcapng_mixed_linktypes.pcapng": "libpcap refuses interfaces of different link types",
    "pcapplusplus__many_interfaces-1.pcapng": "libpcap refuses interfaces of different link types",
    "tcptrace__ipfrags.dmp": "no TCP header in any frame",
}
# capture -> (frames tshark leaves out, why)
LEFT_OUT = {
    "suricata__tcp-empty-sack.pcap": (1, "tshark calls frame 24 malformed (a SACK option of "
                                         "length 2) and keeps it out of its conversations"),
}
CAPTURES = [p for p in OWN_CAPTURES + SHARED_CAPTURES if p.name not in KNOWN]


@pytest.mark.parametrize("path", CAPTURES, ids=capture_id)
def test_frames_agree_with_tshark(path, analyzed):
    ours: Counter = Counter()
    for c in analyzed(path)["connections"]:
        a, b = peers.endpoint(c["a"]), peers.endpoint(c["b"])
        ours[(a, b)] += c["a2b"]["packets"]
        ours[(b, a)] += c["b2a"]["packets"]
    theirs: Counter = Counter()
    for conv in peers.tshark_conversations(str(path)):
        theirs[(conv["a"], conv["b"])] += conv["frames_a2b"]
        theirs[(conv["b"], conv["a"])] += conv["frames_b2a"]
    assert theirs, "tshark saw no TCP conversation"
    left_out, why = LEFT_OUT.get(path.name, (0, ""))
    assert set(ours) == set(theirs)
    assert sum((ours - theirs).values()) == left_out, why
    assert not theirs - ours
