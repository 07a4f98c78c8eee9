"""The fidelity check of a run (docs/run.md, "Fidelity check"): did the
emulation deliver what was asked? Eight items, each 'pass', 'fail', 'not
applicable' or 'unknown' (its data is missing):

  bottleneck  the rate the shaper delivered while its queue was backlogged,
              against --bw (the rate in force, per step of a schedule)
  rtt         the smallest RTT any flow saw, against --rtt (and --jitter)
  loss        the forward netem's drops, against --loss (binomial test)
  capture     packets tcpdump's kernel buffer dropped
  probe       tcp_probe events lost
  cpu         CPUs saturated while the flows ran: a failure in real time
              (the emulator may have been the bottleneck); in virtual time
              (time stretches instead) only when the bottleneck's queue was
              not backlogged, so the emulated hosts' CPU limited the flows
  softnet     packets the testbed's kernel dropped from a full CPU backlog
              (a loss outside the bottleneck that no path of the dumbbell has)
  emulator    of the host CPU time the micro-VM wanted while the flows ran,
              the share it waited for a CPU: in real time the guest's clock
              ran on meanwhile (a busy host starved the emulation, which the
              guest's own CPU figures cannot show); not applicable in
              virtual time (time waits too) and on the host (no emulator)

The verdict is 'fail' when an item failed, else 'pass' when one passed,
else 'unknown'. The thresholds are the constants below, and only here."""
from __future__ import annotations

import json
import math

from tcpvar.artefacts.checks import stored_params

from .sqlfiles import sql

# --- thresholds (docs/run.md says why each is what it is) -------------------
RATE_LOW = 0.95                 # delivered / asked while backlogged, at least
RATE_HIGH = 1.05                # and at most
MIN_BACKLOGGED = 100            # fewer backlogged departures in a step: not applicable
STEP_GUARD_S = (0.1, 0.5)       # left out before and after a rate change of a schedule
RTT_BELOW_MS = 0.05             # the minimum RTT may be this much below --rtt
RTT_ABOVE_MS = 2.0              # and above --rtt by at most this,
RTT_ABOVE_FRAC = 0.05           # or this fraction of --rtt when larger,
                                # plus one full frame's time at the slowest rate
LOSS_P_MIN = 0.001              # a two-sided binomial p-value below this fails
CAPTURE_DROPS_MAX = 0           # packets tcpdump may drop
PROBE_LOST_MAX_FRAC = 0.01      # tcp_probe events lost, of those recorded
CPU_SATURATED_MAX = 0.5         # seconds with every CPU >= 95 % busy, fraction (real time)
HOST_WAIT_MAX = 0.4             # of the host CPU time the micro-VM wanted, waited (real time)
FRAME_BYTES = 1514              # a full frame on the testbed's links (capture/aqm.FRAME)

ITEMS = ("bottleneck", "rtt", "loss", "capture", "probe", "cpu", "softnet", "emulator")
PASS, FAIL, NA, UNKNOWN = "pass", "fail", "not applicable", "unknown"


def check(con, run_id: int) -> dict:
    """The fidelity of run @run_id, from what the store holds of it, as the
    row of the `fidelity` table (column -> value)."""
    cur = con.execute("SELECT params, sender_capture, bottleneck_capture, started_ns, "
                      "probe_events, probe_lost, capture_drops, cpu_busy_frac, "
                      "cpu_saturated_frac, clock, softnet_dropped, host_wait_frac, "
                      "backend FROM runs "
                      "WHERE run_id = $1", [run_id])
    names = [d[0] for d in cur.description]
    run = dict(zip(names, cur.fetchone()), run_id=run_id)
    p = stored_params(run["params"], f"run {run_id} of the store") or {}
    row = {"run_id": run_id}
    row.update(_bottleneck(con, run, p))
    row.update(_rtt(con, run_id, p))
    row.update(_loss(con, run_id, p))
    row.update(_capture(run))
    row.update(_probe(run))
    row.update(_cpu(run, row["bottleneck_status"]))
    row.update(_softnet(run))
    row.update(_emulator(run))
    statuses = [row[f"{i}_status"] for i in ITEMS]
    row["verdict"] = FAIL if FAIL in statuses else PASS if PASS in statuses else UNKNOWN
    row["reasons"] = "; ".join(reasons(row)) or None
    return row


def store(con, row: dict) -> None:
    """The run's row of `fidelity`, replacing one it had."""
    con.execute("DELETE FROM fidelity WHERE run_id = $1", [row["run_id"]])
    names = list(row)
    con.execute(f"INSERT INTO fidelity ({', '.join(names)}) VALUES "
                f"({', '.join(f'${i}' for i in range(1, len(names) + 1))})",
                [json.dumps(v) if k == "bottleneck_steps" and v is not None else v
                 for k, v in row.items()])


def stored(con, run_id: int) -> dict | None:
    """The run's fidelity as the JSON summary gives it; None when the store
    has not checked it (a run stored before the check, a store read only)."""
    if not _checked_any(con):
        return None
    cur = con.execute("SELECT * FROM fidelity WHERE run_id = $1", [run_id])
    found = cur.fetchone()
    if found is None:
        return None
    row = dict(zip([d[0] for d in cur.description], found))
    return document(row)


def verdicts(con, run_ids: list[int]) -> dict[int, str]:
    """run_id -> verdict, for the runs the store has checked."""
    if not run_ids or not _checked_any(con):
        return {}
    return dict(con.execute("SELECT run_id, verdict FROM fidelity "
                            "WHERE list_contains($1::INTEGER[], run_id)", [run_ids]).fetchall())


def _checked_any(con) -> bool:
    """The store has the fidelity table (one opened read only, written
    before the check, has not)."""
    return con.execute("SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'main' "
                       "AND table_name = 'fidelity' AND database_name = current_database()"
                       ).fetchone()[0] > 0


def document(row: dict) -> dict:
    """A `fidelity` row as the run's JSON summary shows it."""
    steps = row.get("bottleneck_steps")
    steps = json.loads(steps) if isinstance(steps, str) else steps
    return {
        "verdict": row["verdict"],
        "failed": [r for r in (row["reasons"] or "").split("; ") if r],
        "unknown": [i for i in ITEMS if row.get(f"{i}_status") == UNKNOWN],
        "bottleneck": {"status": row["bottleneck_status"], "mbps": row["bottleneck_mbps"],
                       "asked_mbps": row["bottleneck_asked_mbps"],
                       "backlogged_departures": row["backlogged_departures"],
                       "steps": steps or []},
        "rtt": {"status": row["rtt_status"], "min_ms": row["rtt_min_ms"],
                "asked_ms": row["rtt_asked_ms"], "low_ms": row["rtt_low_ms"],
                "high_ms": row["rtt_high_ms"], "source": row["rtt_source"]},
        "loss": {"status": row["loss_status"], "asked_pct": row["loss_asked_pct"],
                 "netem_packets": row["netem_packets"], "netem_drops": row["netem_drops"],
                 "p_value": row["loss_p_value"]},
        "capture": {"status": row["capture_status"], "drops": row["capture_drops"]},
        "probe": {"status": row["probe_status"], "lost": row["probe_lost"],
                  "events": row["probe_events"]},
        "cpu": {"status": row["cpu_status"], "busy_frac": row["cpu_busy_frac"],
                "saturated_frac": row["cpu_saturated_frac"], "clock": row["clock"]},
        "softnet": {"status": row["softnet_status"], "dropped": row["softnet_dropped"]},
        # a store checked before this item, opened read-only, lacks its columns
        "emulator": {"status": row.get("emulator_status"),
                     "host_wait_frac": row.get("host_wait_frac")},
    }


def reasons(row: dict) -> list[str]:
    """A short reason per failed item."""
    out = []
    if row["bottleneck_status"] == FAIL:
        steps = row.get("bottleneck_steps") or []
        steps = json.loads(steps) if isinstance(steps, str) else steps
        failed = sorted({queue_name(s) for s in steps if s["status"] == FAIL} - {None})
        out.append(f"bottleneck {row['bottleneck_mbps']:.4g} of "
                   f"{row['bottleneck_asked_mbps']:.4g} Mbit/s while backlogged"
                   + (f" (failed: {', '.join(failed)})" if failed else ""))
    if row["rtt_status"] == FAIL:
        out.append(f"min RTT {row['rtt_min_ms']:.3g} ms, outside {row['rtt_low_ms']:.3g}-"
                   f"{row['rtt_high_ms']:.3g} ms for --rtt {row['rtt_asked_ms']:g}")
    if row["loss_status"] == FAIL:
        out.append(f"netem dropped {row['netem_drops']} of {row['netem_packets']} packets "
                   f"for --loss {row['loss_asked_pct']:g} % (p = {row['loss_p_value']:.2g})")
    if row["capture_status"] == FAIL:
        out.append(f"captures dropped {row['capture_drops']} packets")
    if row["probe_status"] == FAIL:
        out.append(f"tcp_probe lost {row['probe_lost']} of {row['probe_events']} events")
    if row["cpu_status"] == FAIL:
        out.append(f"CPUs saturated {100 * row['cpu_saturated_frac']:.0f} % of the time "
                   + ("in real time" if row["clock"] != "virtual" else
                      "with the bottleneck not backlogged: the hosts' CPU limited the flows"))
    if row["softnet_status"] == FAIL:
        out.append(f"the testbed's kernel dropped {row['softnet_dropped']} packets from full "
                   f"CPU backlogs")
    if row["emulator_status"] == FAIL:
        out.append(f"the micro-VM waited for a host CPU {100 * row['host_wait_frac']:.0f} % of "
                   f"the time it wanted one, in real time")
    return out


# --- the items ------------------------------------------------------------------

def _steps(p: dict) -> list[tuple[float, float]]:
    """(start s, rate bit/s) of each step: the schedule, else --bw throughout."""
    steps = [(float(s["t_s"]), float(s["bw_bps"])) for s in p.get("schedule") or []]
    if not steps or steps[0][0] > 0:
        steps.insert(0, (0.0, float(p["bw_bps"])))
    return sorted(steps)


def _bottleneck(con, run: dict, p: dict) -> dict:
    """The service rate of each bottleneck queue (queues), judged per step
    of its rate; its steps name the queue when there is more than one."""
    out = {"bottleneck_status": UNKNOWN, "bottleneck_mbps": None, "bottleneck_asked_mbps": None,
           "backlogged_departures": None, "bottleneck_steps": None}
    if not p or run["started_ns"] is None:
        return out
    shown = []
    for name, arrivals, departures, through, steps in queues(con, run, p):
        if arrivals is None or departures is None:
            return out
        shown += [{**name, **step} for step in
                  _service(con, run, p, arrivals, departures, through, steps)]
    out["backlogged_departures"] = sum(s["departures"] for s in shown)
    out["bottleneck_steps"] = shown
    judged = [s for s in shown if s["status"] != NA]
    if not judged:
        out["bottleneck_status"] = NA
        return out
    worst = min(judged, key=lambda s: s["bps"] / s["asked_bps"] if s["bps"] <= s["asked_bps"]
                else s["asked_bps"] / s["bps"])
    out.update(bottleneck_status=FAIL if any(s["status"] == FAIL for s in judged) else PASS,
               bottleneck_mbps=worst["bps"] / 1e6, bottleneck_asked_mbps=worst["asked_bps"] / 1e6)
    return out


def queue_name(step: dict) -> str | None:
    """The queue a step of the check measured, when the run has more than
    one: `hop 2`, `forward`, `reverse`."""
    return f"hop {step['hop']}" if step.get("hop") else step.get("queue")


def queues(con, run: dict, p: dict) -> list[tuple]:
    """Each queue the check measures: (its name in the steps, the capture
    of what entered its router, the capture of what left it, the source
    ports of the packets through it (None: all), the steps of its rate).
    A parking lot's hops; else the forward bottleneck and, with reverse
    flows, the reverse one: the bottleneck capture then holds both queues'
    departures, the forward one's sent from the left (a forward flow's
    client's port, a reverse flow's server's), the reverse one's from the
    right, at --bw-reverse throughout."""
    hops = con.execute("SELECT hop, arrivals_capture, departures_capture FROM hops "
                       "WHERE run_id = $1 ORDER BY hop", [run["run_id"]]).fetchall()
    if hops:
        return [({"hop": hop}, a, d, None, _steps(p)) for hop, a, d in hops]
    sender, bottleneck = run["sender_capture"], run["bottleneck_capture"]
    if not p.get("reverse"):
        return [({}, sender, bottleneck, None, _steps(p))]
    ports = con.execute("SELECT if(direction = 'reverse', dst_port, src_port), "
                        "if(direction = 'reverse', src_port, dst_port) FROM flows "
                        "WHERE run_id = $1", [run["run_id"]]).fetchall()
    back = float(p.get("bw_reverse_bps") or p["bw_bps"])
    return [({"queue": "forward"}, sender, bottleneck, [r for r, _ in ports], _steps(p)),
            ({"queue": "reverse"}, sender, bottleneck, [left for _, left in ports], [(0.0, back)])]


def _service(con, run: dict, p: dict, arrivals: int, departures: int,
             through: list[int] | None, steps: list[tuple[float, float]]) -> list[dict]:
    """Per step of @steps, the rate of the queue between capture @arrivals
    (what entered its router) and @departures (what left it)."""
    con.execute(sql("passages"), {"sender": arrivals, "bottleneck": departures,
                                  "through": through})
    rows = con.execute(sql("fidelity_service"), {
        "charged_after": p.get("shaper", "htb") == "htb",
        "started_ns": run["started_ns"], "starts": [t for t, _ in steps],
        "guard_before": STEP_GUARD_S[0], "guard_after": STEP_GUARD_S[1]}).fetchall()
    got = {step: (n, nbytes, gap_ns) for step, n, nbytes, gap_ns in rows}
    shown = []
    for i, (t_s, asked) in enumerate(steps, start=1):
        n, nbytes, gap_ns = got.get(i, (0, 0, 0))
        bps = 8e9 * nbytes / gap_ns if gap_ns else None
        if n < MIN_BACKLOGGED or bps is None:
            status = NA
        else:
            status = PASS if RATE_LOW <= bps / asked <= RATE_HIGH else FAIL
        shown.append({"t_s": t_s, "asked_bps": asked, "bps": bps, "departures": n,
                      "status": status})
    return shown


def rtt_range(p: dict) -> tuple[float, float]:
    """The range (ms) a run's minimum RTT should fall in: netem delays each
    direction by half of --rtt (jitter on the forward one), and a sample
    taken at the bottleneck router includes the data packet's own time
    through the shaper, or a parking lot's shapers."""
    rtt, jitter = float(p["rtt_ms"]), float(p.get("jitter_ms") or 0.0)
    slowest = min(bw for _, bw in _steps(p))
    # a frame's time through each hop's shaper (a parking lot's every hop)
    frame_ms = (p.get("hops") or 1) * 8e3 * FRAME_BYTES / slowest if slowest > 0 else 0.0
    return (max(0.0, rtt - jitter - RTT_BELOW_MS),
            rtt + jitter + max(RTT_ABOVE_MS, RTT_ABOVE_FRAC * rtt) + frame_ms)


def _rtt(con, run_id: int, p: dict) -> dict:
    pcap_ms, probe_ms = con.execute(sql("fidelity_rtt"), {"run_id": run_id}).fetchone()
    source = "pcap" if pcap_ms is not None else "probe" if probe_ms is not None else None
    value = pcap_ms if pcap_ms is not None else probe_ms
    out = {"rtt_status": UNKNOWN, "rtt_min_ms": value, "rtt_source": source,
           "rtt_asked_ms": p.get("rtt_ms"), "rtt_low_ms": None, "rtt_high_ms": None}
    if not p:
        return out
    low, high = rtt_range(p)
    out.update(rtt_low_ms=low, rtt_high_ms=high)
    if value is not None:
        out["rtt_status"] = PASS if low <= value <= high else FAIL
    return out


def _loss(con, run_id: int, p: dict) -> dict:
    asked = p.get("loss_pct")
    out = {"loss_status": UNKNOWN, "loss_asked_pct": asked, "netem_packets": None,
           "netem_drops": None, "loss_p_value": None}
    row = con.execute("SELECT packets, drops, qlen FROM qdisc_stats WHERE run_id = $1 "
                      "AND router = 'rd' AND dev = 'right' AND kind = 'netem' "
                      "AND parent IS NULL", [run_id]).fetchone()
    if row is None:
        # no netem on the forward path: none is set up without --rtt or --loss
        if p and not p.get("rtt_ms") and not asked:
            out["loss_status"] = NA
        return out
    sent, drops, queued = (int(v or 0) for v in row)
    n = sent + drops + queued          # every packet netem took: sent, dropped, still queued
    out.update(netem_packets=n, netem_drops=drops)
    if asked is None or n == 0:
        return out
    pv = binomial_p_value(drops, n, asked / 100)
    out.update(loss_p_value=pv, loss_status=PASS if pv >= LOSS_P_MIN else FAIL)
    return out


def _capture(run: dict) -> dict:
    drops = run["capture_drops"]
    return {"capture_drops": drops,
            "capture_status": UNKNOWN if drops is None else
            PASS if drops <= CAPTURE_DROPS_MAX else FAIL}


def _probe(run: dict) -> dict:
    lost, events = run["probe_lost"], run["probe_events"]
    if lost is None:
        status = UNKNOWN
    elif lost == 0:
        status = PASS
    else:   # `lost` errs high (docs/probe.md): a share, not any, fails
        status = PASS if events and lost <= PROBE_LOST_MAX_FRAC * events else FAIL
    return {"probe_status": status, "probe_lost": lost, "probe_events": events}


def _cpu(run: dict, bottleneck: str) -> dict:
    saturated, clock = run["cpu_saturated_frac"], run["clock"]
    if saturated is None or clock is None:
        status = UNKNOWN
    elif saturated < CPU_SATURATED_MAX:
        status = PASS
    elif clock == "virtual":
        # time stretches instead; but a link that never queued was not what
        # held the flows back: the (virtual) CPU of the hosts was
        status = PASS if bottleneck == PASS else FAIL
    else:
        status = FAIL
    return {"cpu_status": status, "cpu_busy_frac": run["cpu_busy_frac"],
            "cpu_saturated_frac": saturated, "clock": clock}


def _softnet(run: dict) -> dict:
    n = run["softnet_dropped"]
    status = UNKNOWN if n is None else PASS if n == 0 else FAIL
    return {"softnet_status": status, "softnet_dropped": n}


def _emulator(run: dict) -> dict:
    waited = run["host_wait_frac"]
    if run["backend"] == "netns" or run["clock"] == "virtual":
        status = NA
    elif waited is None:
        status = UNKNOWN
    else:
        status = PASS if waited <= HOST_WAIT_MAX else FAIL
    return {"emulator_status": status, "host_wait_frac": waited}


# --- the binomial test ------------------------------------------------------------

def binomial_p_value(k: int, n: int, p: float) -> float:
    """Two-sided exact binomial test of @k successes in @n trials of
    probability @p: the probability of every outcome no more likely than
    @k (as R's binom.test and SciPy's binomtest define it)."""
    if p <= 0:
        return 1.0 if k == 0 else 0.0
    if p >= 1:
        return 1.0 if k == n else 0.0
    logs = (math.lgamma(n + 1), math.log(p), math.log1p(-p))

    def lp(j: int) -> float:
        return logs[0] - math.lgamma(j + 1) - math.lgamma(n - j + 1) + j * logs[1] \
            + (n - j) * logs[2]

    mode = min(n, int((n + 1) * p))
    target = lp(k) + 1e-7               # ties within rounding count as "no more likely"
    if k == mode or lp(mode) <= target:
        return 1.0
    if k < mode:        # the other side: from the first j > mode as unlikely as k
        j = _first(mode, n, lambda j: lp(j) <= target)
        total = _tail(lp, k, -1, 0) + (_tail(lp, j, 1, n) if j is not None else 0.0)
    else:
        j = _first(0, mode, lambda j: lp(mode - j) <= target)
        total = _tail(lp, k, 1, n) + (_tail(lp, mode - j, -1, 0) if j is not None else 0.0)
    return min(1.0, total)


def _first(lo: int, hi: int, ok) -> int | None:
    """The smallest j in [lo, hi] with ok(j), ok being monotone; None if none."""
    if not ok(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _tail(lp, start: int, step: int, end: int) -> float:
    """Σ exp(lp(j)) from @start towards @end (away from the mode: the
    terms fall), until they no longer change the sum."""
    total, j = 0.0, start
    while True:
        term = math.exp(lp(j))
        total += term
        if j == end or term < total * 1e-17:
            return total
        j += step
