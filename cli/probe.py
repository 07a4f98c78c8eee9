"""tcpvar probe: record live tcp_probe events into the store."""
from __future__ import annotations

import click

from .options import Finite, db_option, json_option


@click.command(short_help="Record live tcp_probe events (cwnd, RTT, RTO) into the store.")
@click.option("--port", "ports", type=click.IntRange(1, 65535), multiple=True, metavar="PORT",
              help="Sockets whose local or remote port is PORT (repeatable, at most 16). "
                   "Without --port, every TCP socket.")
@click.option("--addr", "addrs", multiple=True, metavar="ADDR",
              help="Sockets whose local or remote address is ADDR (repeatable, at most 8).")
@click.option("--cookie", type=click.IntRange(1), metavar="COOKIE",
              help="Only the socket with this cookie (as `ss -e` shows it, sk:<hex>; "
                   "give it as a decimal or 0x hex number).")
@click.option("--duration", type=Finite(min=0, min_open=True), metavar="SECONDS",
              help="Stop after SECONDS (default: at Ctrl-C).")
@click.option("--source", type=click.Choice(["auto", "tracefs-ext", "bpf", "tracefs"]),
              default="auto", show_default=True,
              help="Where the events come from: the extended tracepoint of a patched "
                   "kernel, the eBPF hook, or the stock tracepoint; auto takes the first "
                   "that works, in that order.")
@click.option("--dir", "out_dir", type=click.Path(file_okay=False), metavar="DIR",
              help="Folder for tcp_probe.csv and tcp_probe.json (default "
                   "./probe-YYYYmmdd-HHMMSS).")
@db_option("to record into")
@json_option("Print the session and its per-socket statistics as JSON.")
def probe(ports, addrs, cookie, duration, source, out_dir, db_path, as_json):
    """Record the tcp:tcp_probe events of matching TCP sockets until Ctrl-C
    (or --duration), then load them into the store as a run of kind 'probe'
    (tables runs and probe_events; views probe_timeline, probe_timeouts,
    probe_rto_stats) and print per-socket cwnd, RTT and RTO statistics.

    On a kernel without tcpvar's extended tracepoint, the eBPF hook
    (hooks/tcp_probe_ext) adds rto, rttvar, the in-flight and loss counters
    and the congestion state; without BPF or BTF, the stock tracepoint gives
    cwnd, ssthresh and srtt only. Needs root.

    \b
    Examples:
      tcpvar probe --port 5201
      tcpvar probe --port 5201 --duration 30 --source bpf --dir probe-cubic
      tcpvar query "SELECT t_s, snd_cwnd, rto_ms, ca_state_name FROM probe_timeline"
    """
    from tcpvar.pipelines.probe import record_session
    from tcpvar.report import tables, tabular, terminal

    cookie_value = int(cookie) if cookie else None
    result = record_session(db_path, list(ports), list(addrs), cookie_value, duration, source,
                            out_dir, progress=terminal.note_phase)
    if as_json:
        terminal.data(tabular.to_json(result))
        return
    s = result["session"]
    terminal.note(f"{s['events']} events from {s['source']} in {s['dir']} "
                  f"(run {s['run_id']}, {s['status']})")
    if s["lost"]:
        terminal.warn(f"{s['lost']} events lost (see {s['dir']}/tcp_probe.json)")
    cols = ["cookie", "sender", "receiver", "events", "cwnd_avg", "srtt_avg_ms",
            "rto_min_ms", "rto_max_ms", "timeouts", "max_backoff", "retransmissions"]
    rows = [[r["cookie"], f"{r['saddr']}:{r['sport']}", f"{r['daddr']}:{r['dport']}",
             r["events"], _fmt(r["cwnd_avg"]), _fmt(r["srtt_avg_ms"]), _fmt(r["rto_min_ms"]),
             _fmt(r["rto_max_ms"]), r["timeouts"], r["max_backoff"], r["retransmissions"]]
            for r in result["sockets"]]
    if rows:
        terminal.show(tables.rows_table(cols, rows))


def _fmt(v):
    return "" if v is None else f"{v:.1f}" if isinstance(v, float) else v
