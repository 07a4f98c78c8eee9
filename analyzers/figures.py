"""The data behind every figure kind (report/figures draws it). A figure is
of a subject: an analysed capture, or a run with its sender and bottleneck
captures, tcp_probe record and iperf3 reports, all on one time axis (t = 0
at the first record of the subject's capture). Per-packet and per-event
series come decimated in SQL to one row per time column (min/max per
column), so a figure costs the same for a thousand packets or millions."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from tcpvar.artefacts.checks import stored_params
from tcpvar.errors import UsageError
from tcpvar.store.db import one

from .connections import connections
from .fairness import choose, flows, jain
from .sqlfiles import sql

KINDS = ("tsg", "cwnd", "throughput", "rtt", "rto", "fairness", "ngwa", "window", "latency",
         "queue", "fct")
# what only a run has: the latency probe, two captures around its queue, short flows
RUN_KINDS = ("latency", "queue", "fct")
COLUMNS = 1500              # time columns of a figure (its pixel width at 150 dpi)
PANELS = 8                  # cwnd's panels (one per sender) unless --conn chose more
CA_STATES = ("Open", "Disorder", "CWR", "Recovery", "Loss")
NO_NGWA = 4294967295


@dataclass
class Sender:
    """One flow's sending side as figures show it."""
    label: str                          # legend: variant and role, or the endpoints
    conn: int                           # its connection in the subject's capture
    dir: int                            # its data direction there
    flow: int | None = None             # the run's flow
    rtt_ms: float | None = None         # average RTT the capture measured
    bottleneck: tuple[int, int] | None = None   # (conn, dir) in the bottleneck capture
    iperf_start_ns: int | None = None   # first data packet: iperf3's interval 0
    reverse: bool = False               # through the reverse bottleneck
    hop: int | None = None              # a parking lot's cross flow: its one hop


@dataclass
class Subject:
    name: str                           # run folder or capture file name
    title: str                          # name, variants, RTT, bandwidth, loss
    capture_id: int
    origin_ns: int                      # t = 0
    end_ns: int
    senders: list[Sender]
    run_id: int | None = None
    bottleneck_id: int | None = None
    rate: list[tuple[float, float]] = field(default_factory=list)  # (t_s, bps) steps
    probe: bool = False                 # the run has tcp_probe events of its senders
    ngwa: bool = False                  # NGWA was on, or the capture carries its option
    others: int = 0                     # connections left out by the default choice
    chosen: bool = False                # the senders were named (--conn)
    latency: str | None = None          # the run's latency probe (--latency): irtt or ping
    short: bool = False                 # the run had short flows (--short)


@dataclass
class Window:
    """The time span a figure shows, in ns, and its column width."""
    t0_ns: int
    t1_ns: int
    col_ns: int

    def params(self, origin_ns: int) -> dict:
        return {"origin_ns": origin_ns, "t0_ns": self.t0_ns, "t1_ns": self.t1_ns,
                "col_ns": self.col_ns}


# --- subjects -------------------------------------------------------------

def capture_subject(con, capture_id: int, name: str, conns: list[int] | None) -> Subject:
    """An analysed capture: its bulk flows, or the connections @conns."""
    first, last, with_packets = one(con, "SELECT first_ns, last_ns, with_packets FROM captures "
                                         "WHERE capture_id = $1", [capture_id])
    if not with_packets:
        raise UsageError(f"{name}: the store has no packets of it (read with --stats-only)")
    docs = connections(con, capture_id)
    everything = flows(docs)
    chosen = choose(everything, conns)
    by_id = {c["id"]: c for c in docs}
    senders = []
    for f in chosen:
        c = by_id[f["conn"]]
        d = "a2b" if f["dir"] == 0 else "b2a"
        receiver = c["b"] if d == "a2b" else c["a"]
        senders.append(Sender(f"#{f['conn']} {f['sender']} \u2192 {receiver}", f["conn"],
                              f["dir"], rtt_ms=c[d]["rtt_avg_ms"]))
    rtts = [s.rtt_ms for s in senders if s.rtt_ms]
    n = len(senders)
    title = (f"{name}: {n} connection{'s' if n != 1 else ''}"
             + (f", RTT {min(rtts):.3g}-{max(rtts):.3g} ms (measured)" if rtts else ""))
    ngwa = one(con, "SELECT count(ngwa_window) > 0 FROM packets WHERE capture_id = $1",
               [capture_id])[0]
    return Subject(name, title, capture_id, first, last, senders, ngwa=ngwa,
                   others=len(everything) - n if not conns else 0, chosen=bool(conns))


def run_subject(con, run_id: int, picked: list[int] | None) -> Subject:
    """A stored run: its flows (or the flows @picked) on its sender capture's axis."""
    row = one(con, "SELECT name, params, sender_capture, bottleneck_capture, started_ns, "
                   "backend, kernel FROM runs WHERE run_id = $1", [run_id])
    if row is None:
        raise UsageError(f"the store has no run {run_id}")
    name, params, sender_capture, bottleneck, started, backend, kernel = row
    if sender_capture is None:
        raise UsageError(f"run {run_id} ({name}) has no stored sender capture")
    params = stored_params(params, f"run {run_id} of the store") or {}
    first, last = one(con, "SELECT first_ns, last_ns FROM captures WHERE capture_id = $1",
                      [sender_capture])
    rows = con.execute(
        "SELECT f.flow, f.role, f.cc, f.src_port, f.dst_port, f.conn, c.a_port, "
        "  s.rtt_avg_ms, s.data_first_ns, f.direction = 'reverse', f.hop "
        "FROM flows f JOIN connections c ON c.capture_id = $2 AND c.conn = f.conn "
        "JOIN conn_stats s ON s.capture_id = $2 AND s.conn = f.conn "
        "  AND s.dir = CASE WHEN c.a_port = f.src_port THEN 0 ELSE 1 END "
        "WHERE f.run_id = $1 ORDER BY f.flow", [run_id, sender_capture]).fetchall()
    known = {r[0] for r in rows}
    missing = [f for f in picked or () if f not in known]
    if missing:
        raise UsageError(f"run {run_id} has no flow {missing[0]} "
                         f"(its flows: {', '.join(map(str, sorted(known))) or 'none'})")
    senders = []
    for flow, role, cc, sport, dport, conn, a_port, rtt, data_first, reverse, hop in rows:
        if picked and flow not in picked:
            continue
        label = f"flow {flow} {cc} ({role}{', reverse' if reverse else ''}" \
                f"{f', hop {hop}' if hop else ''})"
        senders.append(Sender(label, conn, 0 if a_port == sport else 1,
                              flow=flow, rtt_ms=rtt, iperf_start_ns=data_first,
                              bottleneck=_bottleneck_conn(con, bottleneck, sport, dport),
                              reverse=bool(reverse), hop=hop))
    probe = bool(one(con, "SELECT count(*) > 0 FROM probe_events "
                          "WHERE run_id = $1 AND side = 'sender'", [run_id])[0])
    latency = one(con, "SELECT any_value(tool) FROM latency WHERE run_id = $1", [run_id])[0]
    short = one(con, "SELECT count(*) > 0 FROM short_flows WHERE run_id = $1", [run_id])[0]
    return Subject(name, _run_title(name, params, backend, kernel, rows),
                   sender_capture, first, last, senders, run_id=run_id,
                   bottleneck_id=bottleneck, rate=_rate(params, started, first), probe=probe,
                   ngwa=params.get("ngwa_mode") is not None, chosen=bool(picked),
                   latency=latency, short=short)


def _bottleneck_conn(con, capture_id, sport: int, dport: int):
    if capture_id is None:
        return None
    row = one(con, "SELECT conn, CASE WHEN a_port = $2 THEN 0 ELSE 1 END FROM connections "
                   "WHERE capture_id = $1 AND ((a_port = $2 AND b_port = $3) "
                   "OR (a_port = $3 AND b_port = $2)) ORDER BY packets DESC LIMIT 1",
              [capture_id, sport, dport])
    return tuple(row) if row else None


def _run_title(name: str, p: dict, backend, kernel, rows) -> str:
    ccs = [r[2] for r in rows]
    variants = ", ".join(dict.fromkeys(ccs)) if ccs else "no flows"
    if len(ccs) > 1 and len(set(ccs)) == 1:
        variants = f"{len(ccs)} \u00d7 {ccs[0]}"
    parts = [variants]
    if p.get("flow_rtts_ms"):
        parts.append(f"RTT {'/'.join(f'{r:g}' for r in p['flow_rtts_ms'])} ms")
    elif "rtt_ms" in p:
        parts.append(f"RTT {p['rtt_ms']:g} ms")
    if "bw_bps" in p:
        parts.append(f"{p['bw_bps'] / 1e6:g} Mbit/s")
    if "loss_pct" in p:
        parts.append(f"loss {p['loss_pct']:g} %")
    if p.get("reverse") or p.get("bw_reverse_bps"):
        back = p.get("bw_reverse_bps") or p.get("bw_bps") or 0
        parts.append(f"{p.get('reverse') or 0} reverse at {back / 1e6:g} Mbit/s")
    if p.get("topology") == "parking-lot":
        parts.append(f"parking lot of {p.get('hops')} hops")
    if p.get("jitter_ms"):
        parts.append(f"jitter {p['jitter_ms']:g} ms")
    if p.get("aqm"):
        parts.append(p["aqm"])
    if any(p.get("ecn") or []):
        parts.append("ECN " + "/".join("on" if e else "off" for e in p["ecn"])
                     if len(set(p["ecn"])) > 1 else "ECN")
    if p.get("ngwa_mode") is not None:
        parts.append(f"NGWA mode {p['ngwa_mode']}")
    if p.get("wbrto"):
        parts.append(f"WB-RTO {p['wbrto']}")
    where = " on ".join(str(x) for x in (backend, kernel) if x)
    return f"{name}: {', '.join(parts)}" + (f" ({where})" if where else "")


def _rate(p: dict, started_ns, origin_ns: int) -> list[tuple[float, float]]:
    """The bottleneck's rate over time: the run's rate, then its schedule
    (seconds after the run's start) moved onto the capture's axis."""
    if "bw_bps" not in p:
        return []
    shift = (started_ns - origin_ns) / 1e9 if started_ns else 0.0
    return [(0.0, p["bw_bps"])] + [(step["t_s"] + shift, step["bw_bps"])
                                   for step in p.get("schedule") or ()]


# --- time --------------------------------------------------------------------

def window(s: Subject, from_s: float | None, to_s: float | None) -> Window:
    span = max(s.end_ns - s.origin_ns, 1)
    t0 = s.origin_ns + int((from_s or 0.0) * 1e9)
    t1 = s.origin_ns + (int(to_s * 1e9) if to_s is not None else span)
    if t1 <= t0:
        raise UsageError(f"--from {from_s:g} s is not before --to "
                         f"{(t1 - s.origin_ns) / 1e9:g} s (the capture lasts {span / 1e9:g} s)")
    return Window(t0, t1, max(1, math.ceil((t1 - t0) / COLUMNS)))


def default_bin_s(s: Subject, w: Window) -> float:
    """A throughput bin follows the flows' RTT: the largest average RTT,
    rounded up to 1, 2 or 5 x 10^k ms (at least 10 ms; 100 ms without RTT
    samples), so a bin never cuts a round trip's burst in two; widened when
    the figure would get more bins than columns."""
    rtt = max((x.rtt_ms for x in s.senders if x.rtt_ms), default=100.0)
    return max(_nice(max(rtt, 10.0)) / 1e3, _nice((w.t1_ns - w.t0_ns) / 1e6 / COLUMNS) / 1e3)


def _nice(ms: float) -> float:
    exp = 10 ** math.floor(math.log10(ms))
    return next(m * exp for m in (1, 2, 5, 10) if m * exp >= ms * (1 - 1e-9))


# --- kinds ---------------------------------------------------------------------

def figure(con, kind: str, s: Subject, w: Window, bin_s: float | None = None) -> dict:
    """The data of one figure: title, window, and per sender its series;
    `empty` says why a panel has nothing to show."""
    doc = {"kind": kind, "title": s.title, "name": s.name,
           "from_s": (w.t0_ns - s.origin_ns) / 1e9, "to_s": (w.t1_ns - s.origin_ns) / 1e9,
           "origin_ns": s.origin_ns, "column_ns": w.col_ns, "others": s.others}
    doc.update(_KINDS[kind](con, s, w, bin_s))
    return doc


def _tsg(con, s: Subject, w: Window, _bin) -> dict:
    if not s.senders:
        return {"sender": None, "marks": {}, "empty": "no connection carried data"}
    x = s.senders[0]
    syn = one(con, "SELECT syn FROM dir_counters WHERE capture_id = $1 AND conn = $2 "
                   "AND dir = $3", [s.capture_id, x.conn, x.dir])[0]
    rows = con.execute(sql("fig_tsg"), {"capture_id": s.capture_id, "conn": x.conn,
                                        "dir": x.dir, "shift": 0 if syn else 1,
                                        **w.params(s.origin_ns)}).fetchall()
    marks: dict[str, list] = {}
    for mark, t, lo, hi, n in rows:
        marks.setdefault(mark, []).append((t, lo, hi, n))
    return {"sender": x.label, "conn": x.conn, "dir": x.dir, "marks": marks,
            "more_senders": len(s.senders) - 1,
            "empty": None if marks else "no packets of this connection in the window"}


def _pcap_columns(con, capture_id, senders: list[tuple[int, int]], s: Subject,
                  w: Window) -> dict[tuple[int, int], list[dict]]:
    """The decimated packet series of the senders (conn, dir): one scan."""
    cur = con.execute(sql("fig_pcap_columns"), {
        "capture_id": capture_id, "conns": [c for c, _ in senders],
        "dirs": [d for _, d in senders], **w.params(s.origin_ns)})
    return _rows_by(cur, 2)


def _probe_columns(con, s: Subject, w: Window) -> dict[int, list[dict]]:
    """The decimated tcp_probe series of the senders' flows: one scan."""
    flows = [x.flow for x in s.senders if x.flow]
    if not (s.probe and flows):
        return {}
    cur = con.execute(sql("fig_probe_columns"), {"run_id": s.run_id, "flows": flows,
                                                 **w.params(s.origin_ns)})
    return _rows_by(cur, 1)


def _rows_by(cur, keys: int) -> dict[tuple, list[dict]]:
    """Rows as dicts, grouped by their first @keys columns (the key a tuple
    of them, or the one value)."""
    names = [d[0] for d in cur.description][keys:]
    out: dict = {}
    for r in cur.fetchall():
        key = tuple(r[:keys]) if keys > 1 else r[0]
        out.setdefault(key, []).append(dict(zip(names, r[keys:])))
    return out


def _series(rows: list[dict], *names: str) -> list[tuple]:
    """(t, value, ...) of the columns that have the first named value."""
    return [(r["t_s"], *(r[n] for n in names)) for r in rows if r[names[0]] is not None]


def _states(rows: list[dict], end_s: float) -> list[tuple[float, float, str]]:
    """Spans of columns in one congestion state other than Open: (from, to, name)."""
    spans: list[list] = []
    for r in rows:
        state = r["ca_state"]
        if not state:
            continue
        if spans and spans[-1][2] == state and spans[-1][1] >= r["t_s"] - 1e-9:
            spans[-1][1] = r["t_s"]
        else:
            spans.append([r["t_s"], r["t_s"], state])
    step = rows[1]["t_s"] - rows[0]["t_s"] if len(rows) > 1 else 0.0
    return [(a, min(b + step, end_s) if step else b, CA_STATES[st]) for a, b, st in spans]


def _no_probe(s: Subject) -> str:
    if s.run_id is None:
        return "a capture has no tcp_probe record: plot a run for the kernel's view"
    return "this run recorded no tcp_probe events of its senders"


def _cwnd(con, s: Subject, w: Window, _bin) -> dict:
    shown = s.senders if s.chosen else s.senders[:PANELS]
    pcaps = _pcap_columns(con, s.capture_id, [(x.conn, x.dir) for x in shown], s, w)
    probes = _probe_columns(con, s, w)
    mss = dict(((c, d), m) for c, d, m in con.execute(
        "SELECT conn, dir, seg_max FROM dir_counters WHERE capture_id = $1",
        [s.capture_id]).fetchall())
    end = (w.t1_ns - s.origin_ns) / 1e9
    out = []
    for x in shown:
        pcap = pcaps.get((x.conn, x.dir), [])
        probe = probes.get(x.flow, [])
        out.append({"label": x.label, "mss": mss.get((x.conn, x.dir)),
                    "in_flight": _series(pcap, "inflight_max"),
                    "cwnd": _series(probe, "cwnd_min", "cwnd_max"),
                    "ssthresh": _series(probe, "ssthresh_min", "ssthresh_max"),
                    "states": _states(probe, end) if probe else []})
    return {"senders": out, "more_senders": len(s.senders) - len(shown),
            "empty": {"probe": None if s.probe else _no_probe(s),
                      "pcap": None if any(f["in_flight"] for f in out)
                      else "no ACKs of the receivers in the window"}}


def _rtt(con, s: Subject, w: Window, _bin) -> dict:
    pcaps = _pcap_columns(con, s.capture_id, [(x.conn, x.dir) for x in s.senders], s, w)
    probes = _probe_columns(con, s, w)
    out = []
    for x in s.senders:
        pcap = pcaps.get((x.conn, x.dir), [])
        probe = probes.get(x.flow, [])
        out.append({"label": x.label, "samples": _series(pcap, "rtt_min_ms", "rtt_max_ms"),
                    "srtt": _series(probe, "srtt_min_ms", "srtt_max_ms")})
    return {"senders": out,
            "empty": None if any(f["samples"] or f["srtt"] for f in out)
            else "no RTT samples (Karn's rule takes them from ACKs of data sent once)"}


def _rto(con, s: Subject, w: Window, _bin) -> dict:
    """The kernel's RTO over time (tcp_probe) with its timeouts, or for a
    capture the timeouts tcpvar inferred, with the silence that ended each
    (the timer's value). Fast retransmits are not timeouts: left out."""
    probes = _probe_columns(con, s, w)
    out = []
    for x in s.senders:
        if s.probe and x.flow:
            rto = _series(probes.get(x.flow, []), "rto_min_ms", "rto_max_ms")
            timeouts = con.execute(
                "SELECT (ts_ns - $origin) / 1e9, rto_ms, max_backoff FROM probe_timeouts "
                "WHERE run_id = $run AND flow = $flow AND ts_ns BETWEEN $t0 AND $t1 "
                "ORDER BY ts_ns", {"origin": s.origin_ns, "run": s.run_id, "flow": x.flow,
                                   "t0": w.t0_ns, "t1": w.t1_ns}).fetchall()
            source = "tcp_probe"
        else:
            rto = []
            timeouts = con.execute(
                "SELECT (ts_ns - $origin) / 1e9, silence_ms, backoff FROM retransmit_events "
                "WHERE capture_id = $c AND conn = $conn AND dir = $dir AND kind = 'timeout' "
                "AND ts_ns BETWEEN $t0 AND $t1 ORDER BY ts_ns",
                {"origin": s.origin_ns, "c": s.capture_id, "conn": x.conn, "dir": x.dir,
                 "t0": w.t0_ns, "t1": w.t1_ns}).fetchall()
            source = "capture"
        out.append({"label": x.label, "rto": rto, "source": source,
                    "timeouts": [(t, ms, backoff or 0) for t, ms, backoff in timeouts]})
    empty = None
    if not any(f["rto"] or f["timeouts"] for f in out):
        fast = one(con, "SELECT count(*) FROM retransmit_events WHERE capture_id = $1 "
                        "AND kind = 'fast'", [s.capture_id])[0]
        elsewhere = one(con, "SELECT count(*) FROM retransmit_events WHERE capture_id = $1 "
                             "AND kind = 'timeout'", [s.capture_id])[0]
        empty = ("no retransmission timeout in these connections and this window"
                 + (f"; {elsewhere} in the capture (choose with --conn)" if elsewhere else "")
                 + (f"; {fast} fast retransmits are not timeouts" if fast else ""))
    return {"senders": out, "empty": empty}


def _throughput_rows(con, s: Subject, w: Window, bin_s: float) -> dict:
    rows = con.execute(sql("fig_throughput"), {
        "capture_id": s.capture_id, "conns": [x.conn for x in s.senders],
        "dirs": [x.dir for x in s.senders], "origin_ns": s.origin_ns,
        "bin_ns": int(bin_s * 1e9), "t0_ns": w.t0_ns, "t1_ns": w.t1_ns}).fetchall()
    per: dict[tuple, list] = {}
    for conn, d, t, bps, good in rows:
        per.setdefault((conn, d), []).append((t, bps, good))
    return per


def _throughput(con, s: Subject, w: Window, bin_s: float | None) -> dict:
    bin_s = bin_s or default_bin_s(s, w)
    per = _throughput_rows(con, s, w, bin_s)
    out, total = [], {}
    for x in s.senders:
        rows = per.get((x.conn, x.dir), [])
        for t, _, good in rows:
            # the total is one bottleneck's, as its rate: the forward one's,
            # a parking lot's first hop's
            if not x.reverse and x.hop in (None, 1):
                total[t] = total.get(t, 0.0) + good
        out.append({"label": x.label, "goodput": [(t, good) for t, _, good in rows],
                    "iperf3": _iperf3(con, s, x)})
    whose = "hop 1" if any(x.hop for x in s.senders) else \
        "forward" if any(x.reverse for x in s.senders) else None
    return {"bin_s": bin_s, "senders": out, "total": sorted(total.items()),
            "total_label": f"total ({whose})" if whose else "total",
            "rate": s.rate, "empty": None if out and any(o["goodput"] for o in out)
            else "no data packets in the window"}


def _iperf3(con, s: Subject, x: Sender) -> list[tuple[float, float, float]]:
    """iperf3's reports (start, end, bps), its clock started at the flow's
    first data packet."""
    if s.run_id is None or x.iperf_start_ns is None:
        return []
    shift = (x.iperf_start_ns - s.origin_ns) / 1e9
    return [(shift + a, shift + b, bps) for a, b, bps in con.execute(
        "SELECT start_s, end_s, bps FROM iperf_intervals WHERE run_id = $1 AND flow = $2 "
        "ORDER BY start_s", [s.run_id, x.flow]).fetchall()]


def _latency(con, s: Subject, w: Window, bin_s: float | None) -> dict:
    """Flent's RRUL view: the throughput figure's data, and beside it on
    the same time axis the latency probe's round trips (lost requests at
    their send time)."""
    doc = _throughput(con, s, w, bin_s)
    rows = [] if s.latency is None else con.execute(sql("fig_latency"), {
        "run_id": s.run_id, "origin_ns": s.origin_ns, "t0_ns": w.t0_ns,
        "t1_ns": w.t1_ns}).fetchall()
    doc.update(tool=s.latency, rtt=[(t, ms) for t, ms, _ in rows if ms is not None],
               lost=[t for t, ms, _ in rows if ms is None])
    if s.latency is None:
        doc["latency_empty"] = "the run had no latency probe (tcpvar run --latency)"
    elif not rows:
        doc["latency_empty"] = "no latency probe request in the window"
    else:
        doc["latency_empty"] = None
    return doc


def _queue(con, s: Subject, w: Window, _bin) -> dict:
    """The bottleneck's queueing delay of each sender's data packets, at
    their departure, and the packets queued behind each (queue_delays);
    beside them the queue as `tc -s` said it every 100 ms."""
    window = {"run_id": s.run_id, "origin_ns": s.origin_ns, "t0_ns": w.t0_ns, "t1_ns": w.t1_ns}
    rows = [] if s.run_id is None else con.execute(sql("fig_queue"), window).fetchall()
    sampled = [] if s.run_id is None else con.execute(sql("fig_backlog"), window).fetchall()
    by_flow: dict[int, list] = {}
    for flow, t, delay, _ in rows:
        by_flow.setdefault(flow, []).append((t, delay))
    return {"senders": [{"label": x.label, "delay": by_flow.get(x.flow, [])}
                        for x in s.senders if x.flow in by_flow],
            "backlog": [(t, n) for _, t, _, n in rows], "sampled": sampled,
            "empty": None if rows else "queueing delays are a stored run's, from both its "
            "captures" if s.run_id is None else "no packet of the run's flows matched in "
            "both captures in the window"}


def _fairness(con, s: Subject, w: Window, bin_s: float | None) -> dict:
    """Jain's index per bin over the senders, in the bins where all of them
    sent (a flow not started yet is not treated unfairly); with reverse
    flows, over the forward ones, which share a bottleneck (as the
    summary's index)."""
    bin_s = bin_s or default_bin_s(s, w)
    senders = [x for x in s.senders if not x.reverse] or s.senders
    if len(senders) < 2:
        return {"bin_s": bin_s, "jain": [], "labels": [x.label for x in senders],
                "empty": "Jain's index needs two flows or more (add --conn)"}
    per = _throughput_rows(con, s, w, bin_s)
    series = [dict((t, good) for t, _, good in per.get((x.conn, x.dir), []))
              for x in senders]
    if not all(series):
        return {"bin_s": bin_s, "jain": [], "labels": [x.label for x in senders],
                "empty": "not every flow sent data in the window"}
    lo, hi = max(min(x) for x in series), min(max(x) for x in series)
    bins = sorted(t for t in set().union(*series) if lo <= t <= hi)
    points = [(t, jain(x.get(t, 0.0) for x in series)) for t in bins]
    return {"bin_s": bin_s, "labels": [x.label for x in senders],
            "jain": [(t, j) for t, j in points if j is not None],
            "empty": None if bins else "the flows never sent at the same time"}


def _windows(con, s: Subject, w: Window, ngwa: bool) -> list[dict]:
    """Per sender: its receiver's advertised window and the data outstanding
    (the subject's capture), and the NGWA window its packets carried past
    the bottleneck (a run's bottleneck capture, where the router wrote it)."""
    pcaps = _pcap_columns(con, s.capture_id, [(x.conn, x.dir) for x in s.senders], s, w)
    routed = [x.bottleneck for x in s.senders if x.bottleneck]
    by_router = ngwa and s.bottleneck_id is not None
    ngwa_pcaps = _pcap_columns(con, s.bottleneck_id, routed, s, w) if by_router else {}
    out = []
    for x in s.senders:
        rows = pcaps.get((x.conn, x.dir), [])
        ngwa_rows = ngwa_pcaps.get(x.bottleneck, []) if by_router and x.bottleneck else rows
        out.append({"label": x.label, "advertised": _series(rows, "win_min", "win_max"),
                    "ngwa": _series(ngwa_rows, "ngwa_min"),
                    "in_flight": _series(rows, "inflight_max")})
    return out


def _ngwa(con, s: Subject, w: Window, _bin) -> dict:
    out = _windows(con, s, w, True)
    where = "the bottleneck capture" if s.bottleneck_id is not None else "this capture"
    return {"senders": out, "empty": None if any(f["ngwa"] for f in out) else
            f"no NGWA option with a window set in {where} (run with --ngwa MODE on the "
            f"patched kernel)"}


def _window(con, s: Subject, w: Window, _bin) -> dict:
    out = _windows(con, s, w, False)
    return {"senders": out, "empty": None if any(f["advertised"] for f in out)
            else "no window advertised by the receivers in the window"}


def _fct(con, s: Subject, w: Window, _bin) -> dict:
    """The short flows' completion times against their start, per size
    class; those that did not complete, at their start along the bottom."""
    rows = [] if s.run_id is None else con.execute(sql("fig_fct"), {
        "run_id": s.run_id, "origin_ns": s.origin_ns, "t0_ns": w.t0_ns,
        "t1_ns": w.t1_ns}).fetchall()
    classes: dict[int, dict] = {}
    for size, t, ms in rows:
        c = classes.setdefault(size, {"bytes": size, "fct": [], "unfinished": []})
        c["fct"].append((t, ms)) if ms is not None else c["unfinished"].append(t)
    why = "the run had no short flows (tcpvar run --short)" if not s.short else \
        "no short flow began in the window"
    return {"classes": list(classes.values()), "empty": None if rows else why}


_KINDS = {"tsg": _tsg, "cwnd": _cwnd, "throughput": _throughput, "rtt": _rtt, "rto": _rto,
          "fairness": _fairness, "ngwa": _ngwa, "window": _window, "latency": _latency,
          "queue": _queue, "fct": _fct}
assert tuple(_KINDS) == KINDS
