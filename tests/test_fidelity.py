"""The fidelity check (analyzers/fidelity.py, docs/run.md): a real run
passes, and the bottleneck rate while backlogged is the one tshark's packets
give by hand; a run folder edited to ask for what it did not get fails on
that item; the loss test is the binomial a hand sum gives; compare flags
and, with --faithful-only, leaves out the runs that failed."""
from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest

from conftest import copy_of, tcpvar_main


def _load(folder: Path, db: Path) -> dict:
    res = tcpvar_main("load", "--json", "-q", "--db", db, folder)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)["runs"][0]


def _edit(folder: Path, change) -> None:
    path = folder / "manifest.json"
    m = json.loads(path.read_text())
    change(m)
    path.write_text(json.dumps(m))


def _tshark(pcap: Path) -> list[tuple]:
    """(time ns, frame length, packet key) per TCP packet, by tshark."""
    fields = ["frame.time_epoch", "frame.len", "ip.src", "tcp.srcport", "ip.dst", "tcp.dstport",
              "tcp.seq_raw", "tcp.ack_raw", "tcp.len", "tcp.flags", "tcp.options.timestamp.tsval"]
    out = subprocess.run(["tshark", "-n", "-r", str(pcap), "-Y", "tcp", "-T", "fields",
                          *(a for f in fields for a in ("-e", f))],
                         capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        t, size, *key = line.split("\t")
        sec, _, frac = t.partition(".")
        rows.append((int(sec) * 10**9 + int((frac + "000000000")[:9]), int(size), tuple(key)))
    return rows


def _rate_by_hand(folder: Path) -> tuple[float, int]:
    """The definition of docs/run.md computed from tshark's fields: each
    departure matched to the latest arrival of the same packet before it;
    Σ frame bytes / Σ gaps over consecutive departures whose later packet
    had arrived by the earlier one's departure, the bytes of the packet
    the gap paid for: HTB's the earlier one, TBF's the later. (bit/s, such
    pairs)"""
    htb = json.loads((folder / "manifest.json").read_text())["params"]["shaper"] == "htb"
    arrivals: dict[tuple, list[int]] = {}
    for t, _, key in _tshark(folder / "sender.pcap"):
        arrivals.setdefault(key, []).append(t)
    departed = _tshark(folder / "bottleneck.pcap")
    nbytes = gaps = n = 0
    for (t0, size0, _), (t1, size1, key) in zip(departed, departed[1:]):
        arrived = max((a for a in arrivals.get(key, ()) if a <= t1), default=None)
        if arrived is not None and arrived < t0:
            nbytes, gaps, n = nbytes + (size0 if htb else size1), gaps + t1 - t0, n + 1
    return 8e9 * nbytes / gaps, n


def test_a_real_run_passes(their_run, tmp_path):
    folder = copy_of(their_run, tmp_path)
    s = _load(folder, tmp_path / "t.duckdb")
    f = s["fidelity"]
    assert f["verdict"] == "pass", f["failed"]
    bps, pairs = _rate_by_hand(folder)
    b = f["bottleneck"]
    assert b["status"] == "pass"
    assert b["backlogged_departures"] == pairs
    assert b["mbps"] == pytest.approx(bps / 1e6, rel=1e-6)
    assert b["mbps"] == pytest.approx(20, rel=0.05)      # what --bw 20mbit asked
    # no netem on a path without --rtt or --loss; tcpdump counted no drops
    assert f["loss"]["status"] == "not applicable"
    assert f["capture"] == {"status": "pass", "drops": 0}
    assert f["rtt"]["status"] == "pass" and f["rtt"]["min_ms"] < 2


def test_a_run_asking_more_than_it_got_fails(their_run, tmp_path):
    """The folder says --bw was 100 Mbit/s; the shaper ran at 20."""
    folder = copy_of(their_run, tmp_path)
    _edit(folder, lambda m: m["params"].update(bw_bps=5 * m["params"]["bw_bps"]))
    res = tcpvar_main("load", "--db", tmp_path / "t.duckdb", folder)
    assert res.returncode == 0, res.stderr
    line = next(x for x in res.stdout.splitlines() if x.startswith("fidelity:"))
    assert line.startswith("fidelity: FAIL (bottleneck rate)")
    s = _load(folder, tmp_path / "t.duckdb")        # stored already: the store's summary
    f = s["fidelity"]
    assert f["verdict"] == "fail"
    assert f["bottleneck"]["asked_mbps"] == 100
    assert f["bottleneck"]["mbps"] == pytest.approx(20, rel=0.05)
    assert len(f["failed"]) == 1 and f["failed"][0].startswith("bottleneck 2")


def test_capture_drops_and_a_saturated_cpu(their_run, tmp_path):
    """tcpdump's counted drops fail; CPUs saturated fail in real time; in
    virtual time only where the link did not deliver what was asked (the
    hosts' CPU, not the link, held the flows)."""
    folders = {kind: copy_of(their_run, tmp_path, kind) for kind in ("real", "virtual", "short")}
    for kind, folder in folders.items():
        _edit(folder, lambda m, kind=kind: m.update(
            backend="vm", capture_drops={"sender": 0, "bottleneck": 12},
            cpu={"busy_frac": 0.99, "saturated_frac": 0.8, "samples": 3},
            clock={"kind": "real" if kind == "real" else "virtual",
                   "icount_shift": None if kind == "real" else 0, "dilation": 1.0}))
    # the link asked for 5 times what the shaper delivered
    _edit(folders["short"], lambda m: m["params"].update(bw_bps=5 * m["params"]["bw_bps"]))
    f = _load(folders["real"], tmp_path / "t.duckdb")["fidelity"]
    assert f["capture"] == {"status": "fail", "drops": 12}
    assert f["cpu"]["status"] == "fail"
    g = _load(folders["virtual"], tmp_path / "t.duckdb")["fidelity"]
    assert g["bottleneck"]["status"] == "pass"
    assert g["cpu"]["status"] == "pass" and g["cpu"]["clock"] == "virtual"
    assert g["verdict"] == "fail" and g["failed"] == ["captures dropped 12 packets"]
    h = _load(folders["short"], tmp_path / "t.duckdb")["fidelity"]
    assert h["bottleneck"]["status"] == "fail" and h["cpu"]["status"] == "fail"
    assert h["failed"][-1].endswith("the hosts' CPU limited the flows")


@pytest.mark.parametrize("kind, waited, status", [
    ("real", 0.45, "fail"), ("real", 0.3, "pass"), ("virtual", 0.45, "not applicable")])
def test_an_emulator_that_waited_for_the_host(their_run, tmp_path, kind, waited, status):
    """A micro-VM that waited for host CPUs beyond the threshold (40 %) fails
    in real time, where the guest's clock ran on meanwhile; in virtual time
    it waited too. (The other items are the real run's: only this one's
    reason is looked for.)"""
    folder = copy_of(their_run, tmp_path)
    _edit(folder, lambda m: m.update(backend="vm", clock={
        "kind": kind, "icount_shift": 0 if kind == "virtual" else None, "dilation": 1.0,
        "host_wait_frac": waited}))
    f = _load(folder, tmp_path / "t.duckdb")["fidelity"]
    assert f["emulator"] == {"status": status, "host_wait_frac": waited}
    reason = "the micro-VM waited for a host CPU 45 % of the time it wanted one, in real time"
    assert (reason in f["failed"]) == (status == "fail"), f["failed"]
    if status == "fail":
        assert f["verdict"] == "fail"


def _binomial_by_hand(k: int, n: int, p: float) -> float:
    """Every outcome no more likely than k, summed term by term."""
    pmf = [math.comb(n, j) * p**j * (1 - p)**(n - j) for j in range(n + 1)]
    return min(1.0, sum(x for x in pmf if x <= pmf[k] * (1 + 1e-7)))


@pytest.mark.parametrize("drops, verdict", [(12, "pass"), (30, "fail"), (0, "fail")])
def test_loss_is_a_binomial_test(their_run, tmp_path, drops, verdict):
    """A forward netem of 800 packets for --loss 1 %: 12 drops are
    plausible, 30 and none are not (p < 0.001 by the hand sum)."""
    folder = copy_of(their_run, tmp_path)
    _edit(folder, lambda m: m["params"].update(loss_pct=1.0))
    stats = json.loads((folder / "tc-stats.json").read_text())
    stats = [q for q in stats if not (q.get("router") == "rd" and q.get("kind") == "netem")]
    stats.append({"router": "rd", "dev": "right", "kind": "netem", "handle": "8001:",
                  "root": True, "options": {"limit": 1000}, "bytes": 0,
                  "packets": 800 - drops, "drops": drops, "overlimits": 0, "requeues": 0,
                  "backlog": 0, "qlen": 0})
    (folder / "tc-stats.json").write_text(json.dumps(stats))
    f = _load(folder, tmp_path / "t.duckdb")["fidelity"]["loss"]
    truth = _binomial_by_hand(drops, 800, 0.01)
    assert (truth >= 0.001) == (verdict == "pass")
    assert f["status"] == verdict
    assert (f["netem_packets"], f["netem_drops"]) == (800, drops)
    assert f["p_value"] == pytest.approx(truth, rel=1e-6)


def test_compare_flags_and_leaves_out_unfaithful_runs(their_run, tmp_path):
    db = tmp_path / "t.duckdb"
    good = _load(copy_of(their_run, tmp_path, "good"), db)
    bad_folder = copy_of(their_run, tmp_path, "bad")
    _edit(bad_folder, lambda m: m["params"].update(bw_bps=m["params"]["bw_bps"] * 5))
    bad = _load(bad_folder, db)
    res = tcpvar_main("compare", "--db", db, "--by", "mode", "--json")
    group, = json.loads(res.stdout)["groups"]
    assert group["n"] == 2 and group["unfaithful"] == [bad["run_id"]]
    res = tcpvar_main("compare", "--db", db, "--by", "mode", "--json", "--faithful-only")
    doc = json.loads(res.stdout)
    assert doc["groups"][0]["runs"] == [good["run_id"]]
    assert [r["run_id"] for r in doc["left_out"]] == [bad["run_id"]]
    text = tcpvar_main("compare", "--db", db, "--by", "mode").stdout
    assert "2 (1 unfaithful)" in text
