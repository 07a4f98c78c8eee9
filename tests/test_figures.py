"""`tcpvar plot` on captures: every kind renders for our fixtures and for
third-party captures, in each format; the data behind the figures is held
to tshark (the time-sequence graph, the window and in-flight series and the
RTT samples, column by column), to tcptrace (RTT, for the default bin
width), to the crafted packets (NGWA) and to the store (a figure changes
nothing in it). Runs' figures are tested in test_run_vm.py."""
from __future__ import annotations

import functools
import json
import subprocess
from decimal import Decimal

import pytest

import tshark_truth as truth
from tcpvar.analyzers.figures import KINDS

import peers
from conftest import FIXTURES, tcpvar_main

THIRDPARTY = FIXTURES / "thirdparty"
CAPTURES = [FIXTURES / "iperf_4flows.pcap", FIXTURES / "iperf_rto.pcap",
            FIXTURES / "sack_recovery.pcap", FIXTURES / "zero_window.pcap",
            THIRDPARTY / "chrissanders__tcp_zerowindowdead.pcapng",
            THIRDPARTY / "zeek__tcp__window-scale-range.pcap"]
MAGIC = {".png": b"\x89PNG", ".svg": b"<?xml", ".pdf": b"%PDF"}


def plot(db, kind, target, out, *args):
    """(exit status, the figure's JSON document, stderr)."""
    res = tcpvar_main("plot", kind, target, "--db", db, "-q", "-o", out, "--json", *args)
    return res.returncode, json.loads(res.stdout) if res.returncode == 0 else None, res.stderr


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_every_kind_renders(path, tmp_path):
    db = tmp_path / "t.duckdb"
    for kind in KINDS:
        out = tmp_path / f"{kind}.png"
        rc, doc, err = plot(db, kind, path, out)
        assert rc == 0, err
        assert out.read_bytes()[:4] == MAGIC[".png"]
        assert doc["kind"] == kind and doc["title"].startswith(path.name)
        assert doc["from_s"] == 0 and doc["to_s"] > 0


def test_formats_follow_the_extension(tmp_path):
    db = tmp_path / "t.duckdb"
    for suffix, magic in MAGIC.items():
        out = tmp_path / f"f{suffix}"
        rc, _, err = plot(db, "throughput", FIXTURES / "iperf_4flows.pcap", out)
        assert rc == 0, err
        assert out.read_bytes().lstrip()[:len(magic)] == magic
    res = tcpvar_main("plot", "tsg", FIXTURES / "iperf_4flows.pcap", "--db", db,
                      "-o", tmp_path / "f.jpg")
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and ".png, .svg, .pdf" in res.stderr


def tshark_frames(path) -> list[dict]:
    fields = ["frame.time_epoch", "tcp.srcport", "tcp.dstport", "tcp.seq", "tcp.len",
              "tcp.ack", "tcp.window_size", "tcp.flags.ack", "tcp.analysis.retransmission",
              "tcp.analysis.fast_retransmission", "tcp.analysis.spurious_retransmission",
              "tcp.analysis.zero_window"]
    out = subprocess.run(["tshark", "-n", "-r", str(path), "-T", "fields", "-E", "separator=,",
                          *sum((["-e", f] for f in fields), [])],
                         capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        v = line.split(",")
        if not v[1]:
            continue        # not TCP
        rows.append({"ns": int(Decimal(v[0]) * 10**9), "sport": int(v[1]), "dport": int(v[2]),
                     "seq": int(v[3]), "len": int(v[4]), "ack": int(v[5]), "win": int(v[6]),
                     "is_ack": v[7] == "1", "rexmit": any(v[8:11]), "zero_window": bool(v[11])})
    return rows


@pytest.mark.parametrize("path", [FIXTURES / "sack_recovery.pcap", FIXTURES / "iperf_rto.pcap",
                                  FIXTURES / "zero_window.pcap",
                                  THIRDPARTY / "chrissanders__tcp_zerowindowdead.pcapng"],
                         ids=lambda p: p.name)
def test_tsg_agrees_with_tshark(path, tmp_path):
    """Per time column: the span of the sender's segments, the receiver's
    cumulative ACK and window edge, and where retransmissions and zero
    windows are, computed here from tshark's tcp.seq, tcp.ack,
    tcp.window_size and tcp.analysis fields."""
    rc, doc, err = plot(tmp_path / "t.duckdb", "tsg", path, tmp_path / "tsg.svg")
    assert rc == 0, err
    frames = tshark_frames(path)
    origin = min(f["ns"] for f in frames)
    assert origin >= doc["origin_ns"]
    col = doc["column_ns"]
    src = peers.endpoint(doc["sender"].split()[1])[1]
    dst = peers.endpoint(doc["sender"].split()[3])[1]

    def columns(rows, lo, hi):
        out = {}
        for f in rows:
            c = (f["ns"] - doc["origin_ns"]) // col
            a, b = out.get(c, (lo(f), hi(f)))
            out[c] = (min(a, lo(f)), max(b, hi(f)))
        return out

    def ours(*marks):
        out = {}
        for mark in marks:
            for t, lo, hi, _ in doc["marks"].get(mark, []):
                c = round(t * 1e9 / col)
                a, b = out.get(c, (lo, hi))
                out[c] = (min(a, lo), max(b, hi))
        return out

    sent = [f for f in frames if (f["sport"], f["dport"]) == (src, dst) and f["len"] > 0]
    acks = [f for f in frames if (f["sport"], f["dport"]) == (dst, src) and f["is_ack"]]
    assert sent and acks
    assert ours("data", "retransmission") == columns(sent, lambda f: f["seq"],
                                                     lambda f: f["seq"] + f["len"])
    assert ours("ack") == columns(acks, lambda f: f["ack"], lambda f: f["ack"])
    assert ours("window") == columns(acks, lambda f: f["ack"] + f["win"],
                                     lambda f: f["ack"] + f["win"])
    # tshark also calls a segment that fills a hole after duplicate ACKs a
    # (fast) retransmission when the capture never saw it sent before;
    # tcpvar marks only data the capture saw twice
    resent = [f for i, f in enumerate(sent) if f["rexmit"] and any(
        g["seq"] < f["seq"] + f["len"] and f["seq"] < g["seq"] + g["len"] for g in sent[:i])]
    assert set(ours("retransmission")) == set(columns(resent, lambda f: 0, lambda f: 0))
    assert set(ours("zero_window")) == set(columns([f for f in acks if f["zero_window"]],
                                                   lambda f: 0, lambda f: 0))


def test_window_and_connection_choice(tmp_path):
    db, path = tmp_path / "t.duckdb", FIXTURES / "iperf_4flows.pcap"
    _, whole, _ = plot(db, "tsg", path, tmp_path / "a.png")
    _, part, _ = plot(db, "tsg", path, tmp_path / "b.png", "--from", "1.45", "--to", "1.8")
    assert (part["from_s"], part["to_s"]) == (1.45, 1.8)
    times = [t for rows in part["marks"].values() for t, *_ in rows]
    assert times and 1.45 - part["column_ns"] / 1e9 <= min(times) and max(times) <= 1.8
    _, other, _ = plot(db, "tsg", path, tmp_path / "c.png", "--conn", "4")
    assert other["conn"] == 4 != whole["conn"]
    assert other["marks"]["data"] != whole["marks"]["data"]
    rc, _, err = plot(db, "tsg", path, tmp_path / "d.png", "--conn", "40")
    assert rc == 2 and "no connection 40" in err


def test_empty_panels_say_why(tmp_path):
    db = tmp_path / "t.duckdb"
    _, doc, _ = plot(db, "ngwa", FIXTURES / "iperf_4flows.pcap", tmp_path / "n.png")
    assert "no NGWA option" in doc["empty"]
    _, doc, _ = plot(db, "cwnd", FIXTURES / "iperf_4flows.pcap", tmp_path / "c.png")
    assert "no tcp_probe record" in doc["empty"]["probe"] and doc["senders"][0]["in_flight"]
    _, doc, _ = plot(db, "fairness", FIXTURES / "sack_recovery.pcap", tmp_path / "f.png")
    assert "two flows" in doc["empty"]


def test_rto_shows_timeouts_not_fast_retransmits(tmp_path):
    """rto_vs_fast.pcap holds both; tshark marks every resend, the figure
    only the timeouts, each at the silence that preceded it."""
    _, doc, _ = plot(tmp_path / "t.duckdb", "rto", FIXTURES / "rto_vs_fast.pcap",
                     tmp_path / "r.png")
    timeouts = [t for f in doc["senders"] for t in f["timeouts"]]
    resent = [f for f in tshark_frames(FIXTURES / "rto_vs_fast.pcap") if f["rexmit"]]
    assert 0 < len(timeouts) < len(resent)
    assert all(ms >= 200 for _, ms, _ in timeouts)      # Linux's least RTO


def test_bins_follow_the_rtt(tmp_path):
    """A 585 ms path gets bins no shorter than its RTT (tcptrace's average)."""
    path = THIRDPARTY / "tcptrace__long_rtt.dmp"
    _, doc, _ = plot(tmp_path / "t.duckdb", "throughput", path, tmp_path / "t.png")
    rtts = [peers.number(c[d]["RTT avg"]) for c in peers.tcptrace(str(path))
            for d in ("a2b", "b2a") if "RTT avg" in c[d]]
    assert rtts and doc["bin_s"] * 1e3 >= max(rtts)
    _, doc, _ = plot(tmp_path / "t.duckdb", "throughput", path, tmp_path / "t.png",
                     "--bin", "250")
    assert doc["bin_s"] == 0.25


def test_plotting_changes_nothing_stored(tmp_path):
    db, path = tmp_path / "t.duckdb", FIXTURES / "iperf_4flows.pcap"
    assert tcpvar_main("analyze", "--db", db, "-q", "--interval", "1000", path).returncode == 0

    def stored():
        import duckdb

        con = duckdb.connect(str(db), read_only=True)
        rows = con.execute("SELECT * FROM throughput ORDER BY ALL").fetchall(), \
            con.execute("SELECT capture_id, interval_ms FROM captures").fetchall()
        con.close()
        return rows
    before = stored()
    for kind in ("throughput", "fairness"):
        assert plot(db, kind, path, tmp_path / "x.png", "--bin", "100")[0] == 0
    assert stored() == before


def test_ngwa_points_are_what_the_packets_carry(tmp_path):
    from test_dissector import _truth

    _, doc, _ = plot(tmp_path / "t.duckdb", "ngwa", FIXTURES / "ngwa_flows.pcap",
                     tmp_path / "n.png")
    carried = {v for f in _truth("ngwa_flows.pcap") if f["ngwa"]["state"] == "valid"
               for v in f["ngwa"].get("values", [f["ngwa"].get("value")])}
    points = {v for f in doc["senders"] for _, v in f["ngwa"]}
    assert doc["empty"] is None and points and points <= carried


def test_analyze_plot_writes_every_kind(tmp_path):
    """Two captures with one name do not overwrite each other."""
    twin = tmp_path / "other" / "iperf_rto.pcap"
    twin.parent.mkdir()
    twin.write_bytes((FIXTURES / "iperf_rto.pcap").read_bytes())
    res = tcpvar_main("analyze", "--db", tmp_path / "t.duckdb", "-q", "--plot",
                      tmp_path / "plots", FIXTURES / "iperf_rto.pcap", twin)
    assert res.returncode == 0, res.stderr
    names = sorted(p.name for p in (tmp_path / "plots").iterdir())
    kinds = [k for k in KINDS if k not in ("latency", "queue", "fct")]     # a run's only
    assert names == sorted([f"iperf_rto.pcap-{k}.png" for k in kinds]
                           + [f"other-iperf_rto.pcap-{k}.png" for k in kinds])


def test_fairness_figure_against_tshark(tmp_path):
    """The fairness figure's Jain index per bin, over the four iperf3 flows,
    equals the hand computation from tshark's sequence numbers (goodput: the
    segments that send nothing twice; bins from the capture's first record,
    where every flow has sent)."""
    path = FIXTURES / "iperf_4flows.pcap"
    rc, doc, err = plot(tmp_path / "t.duckdb", "fairness", path, tmp_path / "f.svg")
    assert rc == 0, err
    cap = truth.read(path)
    senders = [s for s in cap.segments if len(cap.segments[s]) > 100]   # the bulk flows
    assert len(senders) == len(doc["labels"]) == 4
    want = truth.interval_jain(cap, senders, round(doc["bin_s"] * 1e9))
    assert len(doc["jain"]) == len(want) > 100
    assert doc["jain"] == [[pytest.approx(b * doc["bin_s"]), pytest.approx(j, rel=1e-9)]
                           for b, j in want.items()]


@functools.cache
def _receiver_fields(path) -> list[str]:
    fields = ["frame.time_epoch", "tcp.srcport", "tcp.dstport", "tcp.flags.syn",
              "tcp.flags.ack", "tcp.window_size", "tcp.seq", "tcp.len", "tcp.ack",
              "tcp.analysis.ack_rtt"]
    return subprocess.run(["tshark", "-n", "-r", str(path), "-T", "fields", "-E",
                           "separator=,", *sum((["-e", f] for f in fields), [])],
                          capture_output=True, text=True, check=True).stdout.splitlines()


def _receiver_columns(path, doc: dict, label: str) -> dict[str, dict]:
    """Per time column of @doc, from tshark's fields for the sender in
    @label and its receiver: the advertised window (tcp.window_size of the
    receiver's SYNs and ACKs, min and max), the data in flight at each of
    its ACKs (the highest tcp.seq + tcp.len the sender had sent, less
    tcp.ack; max), and tshark's tcp.analysis.ack_rtt in ms (min and max),
    Karn's rule applied here: none from an ACK that covers bytes sent
    twice."""
    src = peers.endpoint(label.split()[1])[1]
    dst = peers.endpoint(label.split()[3])[1]
    cols: dict[str, dict] = {"advertised": {}, "in_flight": {}, "rtt": {}}

    def widen(name, c, v):
        lo, hi = cols[name].get(c, (v, v))
        cols[name][c] = (min(lo, v), max(hi, v))

    resent: list[tuple[int, int]] = []
    highest, acked = None, None
    for line in _receiver_fields(path):
        t, sport, dport, syn, is_ack, win, seq, n, ack, rtt = line.split(",")
        if not sport:
            continue                                    # not TCP
        c = (int(Decimal(t) * 10**9) - doc["origin_ns"]) // doc["column_ns"]
        if (int(sport), int(dport)) == (src, dst) and int(n) > 0:
            seg = (int(seq), int(seq) + int(n))
            if highest is not None and seg[0] < highest:    # a sender's bytes are contiguous
                resent.append(seg)
            highest = seg[1] if highest is None else max(highest, seg[1])
        if (int(sport), int(dport)) != (dst, src):
            continue
        if "1" in (syn, is_ack):
            widen("advertised", c, int(win))
        if is_ack != "1":
            continue
        if highest is not None:
            widen("in_flight", c, max(0, highest - int(ack)))
        karn = any(a < int(ack) and (acked is None or b > acked) for a, b in resent)
        acked = int(ack) if acked is None else max(acked, int(ack))
        resent = [r for r in resent if r[1] > acked]
        if rtt and not karn:
            widen("rtt", c, float(rtt) * 1e3)
    return cols


@pytest.mark.parametrize("path", [FIXTURES / "iperf_rto.pcap", FIXTURES / "iperf_4flows.pcap",
                                  FIXTURES / "sack_recovery.pcap",
                                  FIXTURES / "iperf_bulk_loss.pcap"], ids=lambda p: p.name)
def test_window_figure_against_tshark(path, tmp_path):
    """Each sender's advertised window and data in flight, column by
    column, as computed from tshark's fields."""
    rc, doc, err = plot(tmp_path / "t.duckdb", "window", path, tmp_path / "w.svg")
    assert rc == 0, err
    assert doc["senders"]
    for sender in doc["senders"]:
        want = _receiver_columns(path, doc, sender["label"])
        col = doc["column_ns"]
        assert {round(t * 1e9 / col): (lo, hi) for t, lo, hi in sender["advertised"]} == \
            want["advertised"]
        assert {round(t * 1e9 / col): hi for t, hi in sender["in_flight"]} == \
            {c: hi for c, (_, hi) in want["in_flight"].items()}
        assert len(want["advertised"]) > 5


def test_rtt_figure_against_tshark(tmp_path):
    """The RTT samples per column are tshark's tcp.analysis.ack_rtt, less
    the ACKs Karn's rule leaves out (iperf_rto.pcap resends after a
    timeout: 4 columns of tshark's have no sample of tcpvar's)."""
    path = FIXTURES / "iperf_rto.pcap"
    rc, doc, err = plot(tmp_path / "t.duckdb", "rtt", path, tmp_path / "r.svg")
    assert rc == 0, err
    (sender,) = doc["senders"]
    want = _receiver_columns(path, doc, sender["label"])["rtt"]
    col = doc["column_ns"]
    got = {round(t * 1e9 / col): (lo, hi) for t, lo, hi in sender["samples"]}
    assert len(got) > 800
    assert got == {c: (pytest.approx(lo, abs=1e-3), pytest.approx(hi, abs=1e-3))
                   for c, (lo, hi) in want.items()}
