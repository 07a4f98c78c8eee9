"""The end-of-run summary of `tcpvar run`: per-flow figures (iperf3, the
sender capture, tcp_probe), Jain's index over the flows and, in
friendliness runs, each variant against the Reno background flow."""
from __future__ import annotations

import json

from tcpvar.artefacts.checks import stored_params
from tcpvar.capture.aqm import AQMS
from tcpvar.store.db import one

from . import fidelity
from .dynamics import run_dynamics
from .fairness import friendliness, jain
from .shortflows import short_classes
from .sqlfiles import sql

RUN_FIELDS = ("run_id", "name", "dir", "backend", "kernel", "status", "error", "seed",
              "repetition", "probe_source", "probe_events", "probe_lost",
              "sender_capture", "bottleneck_capture")


def complete_study_runs(con, study: str) -> dict[tuple[str, int], dict]:
    """The study's complete runs by (cell, repetition): the latest of each,
    its run_id, name and folder."""
    rows = con.execute(
        "SELECT cell, repetition, arg_max(run_id, run_id), arg_max(name, run_id), "
        "arg_max(dir, run_id) FROM runs WHERE study = $1 AND status = 'complete' "
        "GROUP BY ALL", [study]).fetchall()
    return {(c, r): {"run_id": i, "name": n, "dir": d, "status": "complete"}
            for c, r, i, n, d in rows}


def run_summary(con, run_id: int) -> dict:
    cur = con.execute(f"SELECT {', '.join(RUN_FIELDS)}, params FROM runs WHERE run_id = $1",
                      [run_id])
    row = cur.fetchone()
    doc = dict(zip(RUN_FIELDS, row[:-1]))
    doc["params"] = stored_params(row[-1], f"run {run_id} of the store")
    cur = con.execute(sql("run_flows"), {"run_id": run_id})
    names = [d[0] for d in cur.description]
    doc["flows"] = [_flow(dict(zip(names, r))) for r in cur.fetchall()]
    doc["bottleneck"] = _bottleneck(con, run_id)
    doc["reverse_bottleneck"] = _bottleneck(con, run_id, "rr")
    # a parking lot's queues, hop by hop (hop 1's is the bottleneck above)
    doc["hops"] = [{"hop": hop, "router": router, "queue": _bottleneck(con, run_id, router)}
                   for hop, router in con.execute("SELECT hop, router FROM hops WHERE "
                                                  "run_id = $1 ORDER BY hop", [run_id]).fetchall()]
    # fairness among the flows that share a bottleneck: each direction's own
    doc["jain"] = _jain(con, doc, "forward")
    doc["jain_reverse"] = _jain(con, doc, "reverse")
    if doc["params"] and doc["params"].get("mode") == "friendliness":
        doc["friendliness"] = _friendliness(doc["flows"])
    doc["fidelity"] = fidelity.stored(con, run_id)
    doc["latency"] = _one_row(con, "run_latency", run_id)
    doc["queue_delay"] = _one_row(con, "run_queue_delay", run_id)
    doc["short_flows"] = short_classes(con, run_id)
    doc["dynamics"] = run_dynamics(con, run_id)
    return doc


def _one_row(con, name: str, run_id: int) -> dict | None:
    """The row of sql/@name for the run, by column; None without one."""
    cur = con.execute(sql(name), {"run_id": run_id})
    row = cur.fetchone()
    return dict(zip([d[0] for d in cur.description], row)) if row else None


def _flow(r: dict) -> dict:
    return {
        "flow": r["flow"], "role": r["role"], "cc": r["cc"],
        "src": f"{r['src_addr']}:{r['src_port']}", "dst": f"{r['dst_addr']}:{r['dst_port']}",
        "start_s": r["start_s"], "duration_s": r["duration_s"], "conn": r["conn"],
        "base_rtt_ms": r["base_rtt_ms"], "direction": r["direction"] or "forward",
        "hop": r["hop"], "outcome": r["outcome"] or "complete", "rate_bps": r["rate_bps"],
        "size_bytes": r["size_bytes"], "fct_ms": r["fct_ms"],
        "ecn": {"asked": bool(r["ecn"]), "ect_packets": r["ect_packets"],
                "ce_packets": r["ce_packets"], "ece_packets": r["ece_packets"],
                "cwr_packets": r["cwr_packets"]},
        "throughput_bps": {"iperf3": r["throughput_iperf3_bps"],
                           "pcap": r["throughput_pcap_bps"]},
        "retransmitted_packets": r["retransmitted_packets"],
        "retransmits_iperf3": r["retransmits_iperf3"],
        "rtt_avg_ms": r["rtt_avg_ms"], "rtt_min_ms": r["rtt_min_ms"],
        "rtt_max_ms": r["rtt_max_ms"],
        "srtt_min_ms_probe": r["srtt_min_ms"], "srtt_avg_ms_probe": r["srtt_avg_ms"],
        "cwnd_max": r["cwnd_max"], "cwnd_avg": r["cwnd_avg"],
        "rto_max_ms": r["rto_max_ms"],
        "rto_events": r["rto_events"], "rto_events_source": r["rto_events_source"],
        "probe_events": r["probe_events"],
        "queue_delay_ms": None if r["queue_delay_p50_ms"] is None else {
            "p50": r["queue_delay_p50_ms"], "p95": r["queue_delay_p95_ms"]},
        "ngwa_window_bytes": None if not r["ngwa_packets"] else {
            "packets": r["ngwa_packets"], "min": r["ngwa_min_bytes"],
            "median": r["ngwa_median_bytes"]},
    }


def _bottleneck(con, run_id: int, router: str = "rl") -> dict | None:
    """The bottleneck queue (under the rate limiter on rl; the reverse
    bottleneck's on rr) when the run ended."""
    row = con.execute("SELECT kind, options, packets, drops, backlog, xstats FROM qdisc_stats "
                      "WHERE run_id = $1 AND router = $2 AND parent = '1:1'",
                      [run_id, router]).fetchone()
    if row is None:
        return None
    kind, options, packets, drops, backlog, xstats = row
    options = json.loads(options)
    limit = options.get("limit", options.get("memlimit"))
    return {"qdisc": kind, "limit": limit, "limit_unit": limit_unit(kind),
            "sent_packets": packets,
            "drops": drops, "backlog_bytes": backlog,
            "counters": json.loads(xstats) if xstats else None}


def limit_unit(kind: str | None) -> str:
    """What a bottleneck qdisc's limit counts (its options name no unit)."""
    aqm = AQMS.get(kind or "")
    return aqm.limit if aqm else "bytes"        # ngwa's


def _jain(con, doc: dict, direction: str) -> dict | None:
    """J over the whole run from iperf3 and from the pcap, and per interval
    of the pcap's series over the intervals in which every flow was active."""
    flows = [f for f in doc["flows"] if f["direction"] == direction]
    if len(flows) < 2:
        return None
    # a finite flow (--size) is tcpvar's sender's, which iperf3 never measured
    finite = any(f["size_bytes"] for f in flows)
    out = {"iperf3": None if finite else jain(f["throughput_bps"]["iperf3"] or 0 for f in flows),
           "pcap": jain(f["throughput_bps"]["pcap"] or 0 for f in flows)}
    conns = [f["conn"] for f in flows]
    capture = doc["sender_capture"]
    if capture is not None and None not in conns:
        dirs = [_data_dir(con, capture, f) for f in flows]
        rows = con.execute(sql("jain_intervals"), {"capture_id": capture, "conns": conns,
                                                   "dirs": dirs}).fetchall()
        values = [j for _, _, j, _ in rows if j is not None]
        out["intervals"] = [{"t_s": t, "jain": j} for _, t, j, _ in rows]
        out["intervals_mean"] = sum(values) / len(values) if values else None
        out["intervals_min"] = min(values) if values else None
    return out


def _data_dir(con, capture: int, flow: dict) -> int:
    a_port = one(con, "SELECT a_port FROM connections WHERE capture_id = $1 AND conn = $2",
                 [capture, flow["conn"]])[0]
    return 0 if flow["src"].endswith(f":{a_port}") else 1


def _friendliness(flows: list[dict]) -> list[dict]:
    """Each test flow against the background (Reno) flow, from both sources."""
    reference = next((f for f in flows if f["role"] == "background"), None)
    if reference is None:
        return []
    out = []
    for f in flows:
        if f is reference:
            continue
        entry = {"flow": f["flow"], "cc": f["cc"], "reference_flow": reference["flow"],
                 "reference_cc": reference["cc"]}
        for source in ("iperf3", "pcap"):
            x, ref = f["throughput_bps"][source], reference["throughput_bps"][source]
            entry[source] = friendliness(x, ref) if x and ref else None
        out.append(entry)
    return out
