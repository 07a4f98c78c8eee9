"""iperf3 `--json` reports -> the flows and iperf_intervals tables."""
from __future__ import annotations

from pathlib import Path

from tcpvar.artefacts import checks


def read_report(path: Path) -> dict | None:
    """An iperf3 JSON report, or None when the flow never wrote one (an
    interrupted run) or it is cut short; InputError (one line, naming the
    field) when it is not a report iperf3 writes (checks.check_iperf)."""
    doc = checks.read_json(path, cut_short_ok=True)
    return None if doc is None else checks.check_iperf(path, doc)


def flow_summary(client: dict | None, server: dict | None) -> dict:
    """Bytes and rates of one flow: sent and retransmitted by the client,
    received as the server counted them."""
    end = (client or {}).get("end", {})
    sent = end.get("sum_sent", {})
    # a client ended before the results exchange has no receiver's count
    received = ((server or {}).get("end", {}).get("sum_received") if (client or {}).get("error")
                else None) or end.get("sum_received") or \
        (server or {}).get("end", {}).get("sum_received", {})
    return {"bytes_sent": sent.get("bytes"), "iperf_retransmits": sent.get("retransmits"),
            "bytes_received": received.get("bytes"),
            "iperf_bps": received.get("bits_per_second"),
            "sender_cc": end.get("sender_tcp_congestion"),
            "error": (client or {}).get("error")}


def interval_rows(run_id: int, flow: int, client: dict | None) -> list[tuple]:
    rows = []
    for interval in (client or {}).get("intervals", []):
        for s in interval.get("streams", [])[:1]:
            rows.append((run_id, flow, s.get("start"), s.get("end"), s.get("bytes"),
                         s.get("bits_per_second"), s.get("retransmits"), s.get("snd_cwnd"),
                         s.get("rtt"), s.get("rttvar")))
    return rows
