"""A run folder -> the store: the run and its flows (manifest and iperf3
reports), iperf3's intervals, both pcaps (through the capture ingest) and
a parking lot's hops' own, the tcp_probe events, the routers' queue
statistics, the short flows, and each flow's connection in the sender
capture."""
from __future__ import annotations

import json
import math
from pathlib import Path

from tcpvar import __version__
from tcpvar.artefacts import checks, probe_record
from tcpvar.artefacts import run_folder as layout
from tcpvar.artefacts.run_folder import read_manifest
from tcpvar.errors import InputError, NoTcpError
from tcpvar.store.db import one

from .backlog import insert_backlog, read_backlog
from .capture import ScanOptions, ingest
from .iperf import flow_summary, interval_rows, read_report
from .latency import insert_latency, read_latency
from .reader import check_storable
from .run_row import insert_run, new_run_id
from .shortflows import insert_short, read_finite, read_short


def stored_run(con, run_dir: Path) -> int | None:
    """The run_id under which the store already holds the run folder, if it does."""
    check_storable(run_dir)
    row = one(con, "SELECT max(run_id) FROM runs WHERE kind = 'run' AND dir = $1",
              [str(Path(run_dir).resolve())])
    return row[0]


def load_run(store, run_dir: Path, progress=None) -> int:
    """Everything the run folder holds; returns the new run_id. A capture or
    probe log that cannot be read is noted in the run's error, never fatal:
    what was captured stays."""
    run_dir = Path(run_dir).resolve()
    m = read_manifest(run_dir)
    # the small files first: one that is malformed (InputError) stops the
    # folder before its captures are read into the store
    reports = {f["flow"]: (read_report(run_dir / layout.iperf_report(f["flow"])),
                           read_report(run_dir / layout.iperf_report(f["flow"], server=True)))
               for f in m["flows"]}
    finite = {f["flow"]: read_finite(run_dir, f["flow"]) for f in m["flows"]
              if f.get("size_bytes")}
    qdiscs = qdisc_rows(run_dir)
    latency = read_latency(run_dir)
    backlog = read_backlog(run_dir)
    short = read_short(run_dir)
    notes = [m["error"]] if m.get("error") else []
    con = store.con
    run_id = new_run_id(con)
    captures = {}
    hops = m["params"].get("hops") or 1         # checked: at most checks.MAX_HOPS
    names = list(layout.CAPTURES)
    if hops > 1:        # a parking lot's hops' own captures (hop 1's arrivals: sender.pcap)
        names += [layout.hop_capture(hop) for hop in range(1, hops + 1)]
        names += [layout.hop_capture(hop, arrivals=True) for hop in range(2, hops + 1)]
    for name in names:
        path = run_dir / layout.pcap(name)
        if not path.exists() or path.stat().st_size == 0:
            continue
        try:
            res = ingest(store, path, ScanOptions(), progress=progress)
        except (InputError, NoTcpError) as exc:
            notes.append(f"{name}.pcap: {exc}")
            continue
        captures[name] = res.capture_id
    probe = m.get("probe") or {}
    with store.transaction() as c:
        insert_run(c, run_id=run_id, kind="run", name=run_dir.name, dir=str(run_dir),
                   backend=m.get("backend"), kernel=m.get("kernel"),
                   params=json.dumps(m.get("params")), seed=m.get("seed"),
                   repetition=m.get("repetition"),
                   started_ns=m.get("started_ns") or m.get("created_ns"),
                   ended_ns=m.get("ended_ns"), status=m.get("status"),
                   error="; ".join(notes) or None, probe_source=probe.get("source"),
                   probe_events=probe.get("events"), probe_lost=probe.get("lost"),
                   sender_capture=captures.get("sender"),
                   bottleneck_capture=captures.get("bottleneck"),
                   tcpvar_version=m.get("tcpvar_version") or __version__,
                   study=(m.get("study") or {}).get("name"),
                   cell=(m.get("study") or {}).get("cell"), **conditions(m))
        for f in m["flows"]:
            _load_flow(c, run_id, f, reports[f["flow"]], captures.get("sender"),
                       m["params"].get("rtt_ms"), finite.get(f["flow"]))
        if hops > 1:
            c.executemany("INSERT INTO hops VALUES ($1, $2, $3, $4, $5)", [
                [run_id, hop, layout.hop_router(hop),
                 captures.get("sender" if hop == 1 else layout.hop_capture(hop, True)),
                 captures.get(layout.hop_capture(hop))] for hop in range(1, hops + 1)])
        if latency:
            insert_latency(c, run_id, *latency)
        if backlog:
            insert_backlog(c, run_id, backlog)
        if short:
            insert_short(c, run_id, short)
        if qdiscs:
            c.executemany("INSERT INTO qdisc_stats VALUES ($1, $2, $3, $4, $5, $6, $7, $8, "
                          "$9, $10, $11, $12, $13, $14, $15)", [[run_id, *q] for q in qdiscs])
    try:
        _load_probe(store, run_id, run_dir, m)
    except InputError as exc:     # e.g. a record cut short: the run stays, with the reason
        notes.append(str(exc))
        con.execute("UPDATE runs SET error = $2 WHERE run_id = $1", [run_id, "; ".join(notes)])
    return run_id


def conditions(m: dict) -> dict:
    """What the manifest says of the run's conditions, as columns of `runs`
    (NULL where it says nothing or what it says is not the kind of value
    tcpvar writes): the packets the captures' kernel buffers dropped,
    summed; the mean busy fraction of the CPUs during the flows and the
    fraction of seconds with every CPU saturated; the clock the run ran on,
    and how long the micro-VM waited for a host CPU."""
    drops = m.get("capture_drops")
    counts = list(drops.values()) if isinstance(drops, dict) and drops else []
    cpu = m.get("cpu") if isinstance(m.get("cpu"), dict) else {}
    clock = m.get("clock") if isinstance(m.get("clock"), dict) else {}
    kind = clock.get("kind")
    return {
        "capture_drops": sum(counts) if counts and all(_count(n) for n in counts)
        and _count(sum(counts)) else None,
        "cpu_busy_frac": _fraction(cpu.get("busy_frac")),
        "cpu_saturated_frac": _fraction(cpu.get("saturated_frac")),
        # a host run (netns) runs on the host's own clock, whatever it says
        "clock": "real" if m.get("backend") == "netns" else
        kind if kind in ("real", "virtual") else None,
        "icount_shift": clock.get("icount_shift") if _count(clock.get("icount_shift"))
        and clock["icount_shift"] < 64 else None,
        "dilation": clock.get("dilation") if _number(clock.get("dilation"))
        and clock["dilation"] > 0 else None,
        "softnet_dropped": m.get("softnet_dropped") if _count(m.get("softnet_dropped"))
        else None,
        "host_wait_frac": _fraction(clock.get("host_wait_frac")),
    }


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 62


def _fraction(v) -> float | None:
    return float(v) if _number(v) and 0 <= v <= 1 else None


def _load_flow(con, run_id: int, f: dict, reports: tuple, sender_capture: int | None,
               rtt_ms: float | None, finite: dict | None) -> None:
    """One flow; @rtt_ms is the run's, for manifests written before each flow
    had its own; @finite, a finite flow's record by its sender (--size)."""
    n = f["flow"]
    client, server = reports
    s = flow_summary(client, server)
    if finite:          # tcpvar's sender: what it wrote, all of it read if complete
        s.update(bytes_sent=finite["sent"], bytes_received=finite["bytes"]
                 if finite["outcome"] == "complete" else None)
    conn = None
    if sender_capture is not None:
        row = one(con, "SELECT conn FROM connections WHERE capture_id = $1 AND "
                       "((a_port = $2 AND b_port = $3) OR (a_port = $3 AND b_port = $2)) "
                       "ORDER BY packets DESC LIMIT 1",
                  [sender_capture, f["src_port"], f["dst_port"]])
        conn = row[0] if row else None
    row = {"run_id": run_id, "flow": n, **{k: f[k] for k in (
               "role", "cc", "src_addr", "src_port", "dst_addr", "dst_port", "start_s",
               "duration_s")}, "conn": conn,
           **{k: s[k] for k in ("bytes_sent", "bytes_received", "iperf_bps", "iperf_retransmits")},
           "base_rtt_ms": f.get("rtt_ms", rtt_ms), "ecn": f.get("ecn"),
           "direction": f.get("direction", "forward"), "hop": f.get("hop"),
           "outcome": f.get("outcome"), "rate_bps": f.get("rate_bps"),
           "size_bytes": f.get("size_bytes")}
    con.execute(f"INSERT INTO flows ({', '.join(row)}) "
                f"VALUES ({', '.join(f'${i}' for i in range(1, len(row) + 1))})",
                list(row.values()))
    rows = interval_rows(run_id, n, client)
    if rows:
        con.executemany("INSERT INTO iperf_intervals VALUES "
                        "($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)", rows)


# what `tc -s -j qdisc` prints of every qdisc; the rest is the qdisc's xstats
_QDISC_KEYS = {"router", "dev", "kind", "handle", "parent", "root", "refcnt", "options",
               "bytes", "packets", "drops", "overlimits", "requeues", "backlog", "qlen",
               "offloaded", "ingress_block", "egress_block"}


def qdisc_rows(run_dir: Path) -> list[list]:
    """tc-stats.json (the runner's `tc -s -j qdisc` of each router link), a
    row of qdisc_stats but its run_id per qdisc: none when the run wrote
    none or it is cut short; InputError when it is not what the runner
    writes (checks.check_tc_stats)."""
    path = run_dir / layout.TC_STATS_JSON
    qdiscs = checks.read_json(path, cut_short_ok=True)
    if qdiscs is None:
        return []
    checks.check_tc_stats(path, qdiscs)
    rows = []
    for q in qdiscs:
        xstats = {k: v for k, v in q.items() if k not in _QDISC_KEYS}
        rows.append([q.get("router"), q.get("dev"), q.get("kind"), q.get("handle"),
                     q.get("parent"), q.get("bytes"), q.get("packets"), q.get("drops"),
                     q.get("overlimits"), q.get("requeues"), q.get("backlog"), q.get("qlen"),
                     json.dumps(q.get("options") or {}), json.dumps(xstats) if xstats else None])
    return rows


def _load_probe(store, run_id: int, run_dir: Path, m: dict) -> None:
    path = run_dir / probe_record.CSV_NAME
    if not path.exists():
        return
    from .probe import load_probe


    flows = [(f["flow"], f["src_addr"], f["src_port"], f["dst_addr"], f["dst_port"])
             for f in m["flows"]]
    load_probe(store, run_id, path, flows)
