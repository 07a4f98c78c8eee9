"""`tcpvar run` and `tcpvar load` for people: the live display while flows
run, and the end-of-run table with Jain's index and friendliness."""
from __future__ import annotations

import sys
import time

from rich import box
from rich.table import Table

from tcpvar.progress import Progress, span_text

from .tables import integer, ms, si
from .untrusted import printable

RUN_COLUMNS = ("flow", "cc", "role", "base RTT ms", "throughput iperf3", "throughput pcap",
               "rexmit pkts", "RTT avg ms", "RTT min ms", "cwnd max", "RTO events")


def flow_row(f: dict) -> tuple:
    role = printable(f["role"]) + (" (reverse)" if f.get("direction") == "reverse" else
                                   f" (hop {f['hop']})" if f.get("hop") else "")
    return (str(f["flow"]), printable(f["cc"]), role, ms(f.get("base_rtt_ms")),
            si(f["throughput_bps"]["iperf3"], "bit/s"),
            si(f["throughput_bps"]["pcap"], "bit/s"),
            integer(f["retransmitted_packets"]),
            ms(f["rtt_avg_ms"]), ms(f["rtt_min_ms"]),
            integer(f["cwnd_max"]),
            "-" if f["rto_events"] is None else f"{f['rto_events']} ({f['rto_events_source']})")


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _g(value) -> str:
    """A parameter's number; anything else (a store of somebody else's) as text."""
    return f"{value:g}" if _number(value) else "?" if value is None else str(value)


def run_title(s: dict) -> str:
    p = s["params"] if isinstance(s["params"], dict) else {}
    bw = p.get("bw_bps")
    bw = si(bw, "bit/s") if bw is None or _number(bw) else str(bw)
    rtts = p.get("flow_rtts_ms") or [p.get("rtt_ms")]
    title = (f"run {s['run_id']} ({s['name']}): {p.get('mode')} on {s['backend']}, "
             f"kernel {s['kernel']}, RTT {'/'.join(_g(r) for r in rtts)} ms, "
             f"loss {_g(p.get('loss_pct'))}%, bottleneck {bw}, {_g(p.get('duration_s'))} s")
    if p.get("reverse") or p.get("bw_reverse_bps"):
        back = p.get("bw_reverse_bps") or p.get("bw_bps")
        n = p.get("reverse") or 0
        title += (f", reverse {si(back, 'bit/s') if _number(back) else str(back)}"
                  f" ({_g(n)} flow{'' if n == 1 else 's'})")
    if p.get("topology") == "parking-lot":
        title += (f", parking lot of {_g(p.get('hops'))} hops, {_g(p.get('cross'))} cross "
                  f"flow(s) each")
    if p.get("jitter_ms"):
        title += f", jitter {_g(p['jitter_ms'])} ms"
    if p.get("aqm"):
        title += f", queue {p['aqm']}" + "".join(
            f" {k}" if v is None else f" {k}={v}" for k, v in (p.get("aqm_params") or {}).items())
    if p.get("ngwa_mode") is not None:
        title += f", NGWA mode {p['ngwa_mode']}"
    if p.get("wbrto") is not None:
        title += f", WB-RTO {p['wbrto']} (unit {p.get('wbrto_unit_ms')} ms)"
    if s["status"] != "complete":
        # 'running' in a finished folder: the run never ended (its host or guest went away)
        title += " — " + ("INCOMPLETE" if s["status"] == "running" else
                          str(s["status"]).upper())
    return printable(title)       # names, kernel, mode: a run folder may be anyone's


# RFC 5166's dynamics (analyzers/dynamics.py), as the summary says them
DYNAMICS = (("oscillation_cov", "oscillation (CoV of each flow's 1 s goodput) {:.3f}"),
            ("convergence_s", "a joining flow reached its fair share in {:.1f} s"),
            ("refill_s", "the flows filled the link {:.1f} s after a rate step"))


def summary_lines(s: dict) -> list[str]:
    """Jain's index, friendliness, the probe and anything that went wrong."""
    lines = []
    for key, whose in (("jain", ""), ("jain_reverse", " of the reverse flows")):
        if j := s.get(key):
            line = f"Jain's index{whose}: {_j(j['iperf3'])} (iperf3), {_j(j['pcap'])} (pcap)"
            if j.get("intervals_mean") is not None:
                line += (f"; per 1 s interval (pcap, {len(j['intervals'])} intervals with "
                         f"every flow active): mean {_j(j['intervals_mean'])}, "
                         f"min {_j(j['intervals_min'])}")
            lines.append(line)
    for fr in s.get("friendliness") or []:
        parts = []
        for source in ("iperf3", "pcap"):
            v = fr[source]
            if v and v["ratio"] is not None:
                parts.append(f"{v['ratio']:.3f} ({v['percent_difference']:.1f}% difference, "
                             f"{source})")
        lines.append(f"friendliness of flow {fr['flow']} ({fr['cc']}) against flow "
                     f"{fr['reference_flow']} ({fr['reference_cc']}): " + "; ".join(parts))
    queues = [(f"hop {h['hop']} ({h['router']})", h["queue"]) for h in s.get("hops") or []] or \
        [("bottleneck", s.get("bottleneck")), ("reverse bottleneck", s.get("reverse_bottleneck"))]
    for name, b in queues:
        if b:
            line = (f"{name} queue {b['qdisc']} (limit {b['limit']} {b['limit_unit']}): "
                    f"{b['sent_packets']} packets sent, {b['drops']} dropped")
            if b["counters"]:
                line += "; " + ", ".join(_counter(k, v) for k, v in b["counters"].items())
            lines.append(line)
    marked = [f for f in s["flows"] if (f.get("ecn") or {}).get("asked")]
    if marked:
        lines.append("ECN: " + "; ".join(
            f"flow {f['flow']} {_g(f['ecn']['ce_packets'])} CE-marked at the bottleneck, "
            f"{_g(f['ecn']['ece_packets'])} ECE, {_g(f['ecn']['cwr_packets'])} CWR"
            for f in marked))
    for kind, what in (("never connected", "never connected (carried nothing)"),
                       ("cut", "cut: still running after their planned end, ended by tcpvar")):
        if flows := [str(f["flow"]) for f in s["flows"] if f.get("outcome") == kind]:
            lines.append(f"flow{'s' if len(flows) > 1 else ''} {', '.join(flows)} {what}")
    ngwa = [f for f in s["flows"] if f.get("ngwa_window_bytes")]
    if ngwa:
        lines.append("NGWA window after the bottleneck: " + "; ".join(
            f"flow {f['flow']} median {f['ngwa_window_bytes']['median']:.0f} B, "
            f"min {f['ngwa_window_bytes']['min']} B" for f in ngwa))
    d = s.get("dynamics") or {}
    if parts := [text.format(d[key]) for key, text in DYNAMICS if d.get(key) is not None]:
        lines.append("dynamics: " + "; ".join(parts))
    if q := s.get("queue_delay"):
        lines.append(f"queueing delay at the bottleneck ({q['packets']} data packets): p50 "
                     f"{ms(q['p50_ms'])}, p95 {ms(q['p95_ms'])}, p99 {ms(q['p99_ms'])}, max "
                     f"{ms(q['max_ms'])} ms; at most {q['backlog_max_packets']} packets "
                     f"({q['backlog_max_bytes']} B) queued behind one")
    if lat := s.get("latency"):
        lines.append(latency_line(lat, (s["params"] or {}).get("latency_interval_ms")))
    if finite := [f for f in s["flows"] if f.get("size_bytes")]:
        lines.append("finite flows (SYN to the ACK of the last byte): " + "; ".join(
            f"flow {f['flow']} {size_text(f['size_bytes'])} in "
            + ("—" if f["fct_ms"] is None else f"{ms(f['fct_ms'])} ms")
            + ("" if f["outcome"] == "complete" else f" ({f['outcome']})") for f in finite))
    lines += [short_line(c) for c in s.get("short_flows") or []]
    if s["probe_source"]:
        lost = s["probe_lost"]
        lines.append(f"tcp_probe ({s['probe_source']}): {s['probe_events']} events, "
                     f"{lost} lost")
    if s.get("fidelity"):
        lines.append(fidelity_line(s["fidelity"], s["backend"]))
    if s["error"]:
        lines.append(f"note: {s['error']}")
    lines.append(f"artefacts: {s['dir']}")
    if s.get("report"):
        lines.append(f"report: {s['report']} (figures in figures/)")
    return [printable(line) for line in lines]      # variants, notes, paths: from inputs


def short_line(c: dict) -> str:
    """A size class of the short flows (--short): how they ended and their
    completion times from the sender capture."""
    ended = ", ".join(f"{c[k]} {what}" for k, what in (("cut", "cut"),
                                                        ("not_connected", "never connected"))
                      if c[k])
    head = f"short flows of {size_text(c['bytes'])}: {c['complete']} of {c['transfers']} complete"
    head += f" ({ended})" if ended else ""
    if c["fct_p50_ms"] is None:
        return head
    return (f"{head}; completion time p50 {ms(c['fct_p50_ms'])}, p95 {ms(c['fct_p95_ms'])}, "
            f"p99 {ms(c['fct_p99_ms'])}, max {ms(c['fct_max_ms'])} ms (SYN to the ACK of the "
            f"last byte, {c['measured']} in the capture)")


def size_text(n: int) -> str:
    for unit, k in (("MB", 1_000_000), ("kB", 1000)):
        if n >= k and n % (k // 100) == 0:
            return f"{n / k:g} {unit}"
    return f"{n} B"


def latency_line(lat: dict, interval_ms) -> str:
    """The latency probe in one line: round trips' percentiles, loss, and
    irtt's one-way medians."""
    every = f" every {_g(interval_ms)} ms" if _number(interval_ms) else ""
    line = (f"latency under load ({lat['tool']}{every}, {lat['samples']} requests): RTT "
            f"p50 {ms(lat['rtt_p50_ms'])}, p95 {ms(lat['rtt_p95_ms'])}, p99 "
            f"{ms(lat['rtt_p99_ms'])} ms (min {ms(lat['rtt_min_ms'])}), "
            f"{lat['loss_pct']:.2f} % unanswered")
    if lat["up_p50_ms"] is not None:
        line += (f"; one way p50 {ms(lat['up_p50_ms'])} ms there, {ms(lat['down_p50_ms'])} ms "
                 f"back (lost {lat['lost_up']} there, {lat['lost_down']} back)")
    return line


def _counter(name: str, value) -> str:
    """A queue's counter; a list of its parts (CAKE's tins) as their number
    and their drops and marks summed (the rest is in qdisc_stats.xstats)."""
    if not isinstance(value, list):
        return f"{name} {value}"
    parts = [t for t in value if isinstance(t, dict)]
    sums = [f"{k} {sum(t[k] for t in parts if _number(t.get(k)))}"
            for k in ("drops", "ecn_mark") if any(_number(t.get(k)) for t in parts)]
    return f"{name} {len(value)}" + (f" ({', '.join(sums)} over them)" if sums else "")


def fidelity_line(f: dict, backend: str | None) -> str:
    """The fidelity check in one line: its verdict, what failed, and what
    was measured against what was asked (analyzers/fidelity.py)."""
    failed = [name for key, name in FIDELITY_NAMES.items() if f[key]["status"] == "fail"]
    head = f"FAIL ({', '.join(failed)})" if f["verdict"] == "fail" else str(f["verdict"])
    return f"fidelity: {head} — " + ", ".join(fidelity_parts(f, backend))


# the items of the fidelity check, as the summary names them
FIDELITY_NAMES = {"bottleneck": "bottleneck rate", "rtt": "min RTT", "loss": "loss",
                  "capture": "captures", "probe": "probe losses", "cpu": "CPU",
                  "softnet": "backlog drops", "emulator": "emulator"}


def _num(x, fmt: str) -> str:
    return format(x, fmt) if _number(x) else "?"


def fidelity_parts(f: dict, backend: str | None) -> list[str]:
    """Per item of the check, what it measured, as words."""
    b, r, lo, c, p, cpu = (f[k] for k in ("bottleneck", "rtt", "loss", "capture", "probe", "cpu"))
    out = []
    if b["status"] in ("pass", "fail"):
        # a parking lot's hops or both directions' queues name their steps
        steps, named = len(b["steps"]), len({st.get("hop") or st.get("queue")
                                             for st in b["steps"]} - {None})
        of = f"{named} queues" if named else f"{steps} steps"
        out.append(f"bottleneck {_num(b['mbps'], '.4g')} of {_num(b['asked_mbps'], '.4g')} "
                   f"Mbit/s while backlogged" + (f" (the worst of {of})" if steps > 1 else ""))
    else:
        out.append("bottleneck rate not checked (" + (
            f"queue backlogged for {b['backlogged_departures']} departures only)"
            if b["status"] == "not applicable" else "no captures)"))
    out.append(f"min RTT {_num(r['min_ms'], '.4g')} ms (asked {_g(r['asked_ms'])})"
               if r["min_ms"] is not None else "min RTT unknown")
    if lo["netem_packets"]:
        out.append(f"loss {_num(100 * lo['netem_drops'] / lo['netem_packets'], '.3g')} % "
                   f"(asked {_g(lo['asked_pct'])}; {lo['netem_drops']} of "
                   f"{lo['netem_packets']} packets)")
    else:
        out.append("no loss asked" if lo["status"] == "not applicable" else "loss unknown")
    out.append("capture drops not counted" if c["drops"] is None else
               "no capture drops" if c["drops"] == 0 else f"captures dropped {c['drops']} packets")
    out.append("probe losses unknown" if p["lost"] is None else
               "no probe loss" if p["lost"] == 0 else
               f"probe lost {p['lost']} of {p['events']} events")
    who = "guest CPU" if backend == "vm" else "CPU"
    if cpu["busy_frac"] is None:
        out.append(f"{who} not recorded")
    else:
        text = f"{who} {_num(100 * cpu['busy_frac'], '.0f')} % busy"
        if cpu["saturated_frac"]:
            text += f", saturated {_num(100 * cpu['saturated_frac'], '.0f')} % of the time"
        out.append(text + (f" ({cpu['clock']} time)" if cpu["clock"] else ""))
    dropped = f["softnet"]["dropped"]
    out.append("backlog drops not counted" if dropped is None else
               "no backlog drops" if dropped == 0 else
               f"{dropped} packets dropped from full CPU backlogs")
    out.append(_emulator_part(f["emulator"], backend, cpu["clock"]))
    return out


def _emulator_part(e: dict, backend: str | None, clock: str | None) -> str:
    if backend == "netns":
        return "no emulator"
    if e["host_wait_frac"] is None:
        return "emulator's waits not recorded"
    text = f"emulator waited for host CPUs {_num(100 * e['host_wait_frac'], '.0f')} % of its time"
    return text + (" (no effect in virtual time)" if clock == "virtual" else "")


def _j(x) -> str:
    return "-" if x is None else f"{x:.3f}"


def run_table(s: dict) -> Table:
    t = Table(title=run_title(s), box=box.SIMPLE_HEAVY, title_justify="left")
    for header in RUN_COLUMNS:
        t.add_column(header, justify="left" if header in ("cc", "role") else "right")
    for f in s["flows"]:
        t.add_row(*flow_row(f))
    return t


def run_text(s: dict) -> str:
    """The same table as plain aligned text, for pipes and logs."""
    rows = [RUN_COLUMNS] + [flow_row(f) for f in s["flows"]]
    widths = [max(len(r[i]) for r in rows) for i in range(len(RUN_COLUMNS))]
    out = [run_title(s)]
    for r in rows:
        out.append("  ".join(c.rjust(w) if i not in (1, 2) else c.ljust(w)
                             for i, (c, w) in enumerate(zip(r, widths))))
    return "\n".join(out)


def print_runs(summaries: list[dict], as_json: bool, head: dict | None = None) -> None:
    """The end of `tcpvar run` and `tcpvar load`: the JSON document (@head's
    fields, then `runs`), or per run its table (plain text when piped) and
    the lines below it."""
    from . import tabular, terminal

    if as_json:
        terminal.data(tabular.to_json({**(head or {}), "runs": summaries}))
        return
    for s in summaries:
        if terminal.stdout_is_terminal():
            terminal.show(run_table(s))
        else:
            terminal.data(run_text(s))
        terminal.data("\n".join(summary_lines(s)) + "\n")


def _count(event: Progress) -> str:
    """How far a step is, where it is counted: " (3/8 nodes)"."""
    if event.done is None or event.total is None:
        return ""
    return f" ({event.done:g}/{event.total:g} {event.unit})"


class LiveProgress:
    """The display while a run goes on: phase, elapsed / remaining, and per
    flow the current throughput, cwnd and RTT. On a terminal it is a Rich
    live table on stderr; otherwise one line per phase."""

    def __init__(self, quiet: bool = False):
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self.live = None
        self.phase = "starting"
        self.sample: dict | None = None
        self.event = Progress("starting")
        self.t0 = time.monotonic()

    def __enter__(self):
        if self.tty and not self.quiet:
            from rich.live import Live

            from .terminal import err

            self.live = Live(self._render(), console=err(), transient=True,
                             refresh_per_second=4)
            self.live.__enter__()
        return self

    def __exit__(self, *exc):
        if self.live is not None:
            self.live.__exit__(*exc)

    def __call__(self, event: Progress) -> None:
        if "flows" in event.data:
            self.sample = event.data
        elif event.phase != self.phase:
            self.phase = event.phase
            if event.phase != "running":
                self.sample = None
            rep = event.data.get("repetition", 1)
            self._line(self.phase + (f" (repetition {rep})" if rep > 1 else ""))
        self.event = event
        if self.live is not None:
            self.live.update(self._render())

    def _line(self, text: str) -> None:
        if self.quiet:
            return
        text = printable(text)          # a phase names folders, and they may be anyone's
        if self.live is not None:
            from rich.text import Text

            self.live.console.print(Text.assemble((f"{time.monotonic() - self.t0:6.1f} s",
                                                   "dim"), f" {text}"))
        else:
            print(f"{time.monotonic() - self.t0:6.1f} s  {text}", file=sys.stderr, flush=True)

    def _render(self):
        s = self.sample
        if not s:
            from rich.text import Text

            return Text(printable(f"{self.phase}{_count(self.event)} …"))
        left = max(0.0, s["total_s"] - s["elapsed_s"])
        clock = s.get("clock")      # the micro-VM's: its run's seconds took these of ours
        pace = f" ({span_text(clock['guest_s'], clock['host_s'])})" if clock else ""
        t = Table(title=f"running: {s['elapsed_s']:.0f} s of {s['total_s']:g} s, "
                        f"{left:.0f} s left{pace}", box=box.SIMPLE, title_justify="left")
        for h in ("flow", "cc", "throughput", "cwnd", "RTT ms"):
            t.add_column(h, justify="left" if h == "cc" else "right")
        for f in s["flows"]:
            t.add_row(str(f["flow"]), printable(f["cc"]),
                      si(f["bps"], "bit/s") if f["running"] else "not running",
                      "-" if f["cwnd"] is None else f"{f['cwnd']:.0f}", ms(f["rtt_ms"]))
        return t
