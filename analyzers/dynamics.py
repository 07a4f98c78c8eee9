"""RFC 5166's metrics of a run's dynamics, from its flows' goodput per
interval (the sender capture's throughput series, 1 s bins: the
resolution of every time below): how much a flow's rate oscillates, how
long a flow that joins a busy link takes to reach its fair share, and how
long the flows take to fill the link again after a step of --bw-schedule.
docs/compare.md defines them."""
from __future__ import annotations

import statistics

from tcpvar.artefacts.checks import stored_params

from .sqlfiles import sql

FAIR_WITHIN = 0.10          # within 10 % of the fair share (RFC 5166 §2.3)
FILLED = 0.90               # the link is filled again at 90 % of its new rate


def oscillation(rates: list[float]) -> float | None:
    """The coefficient of variation of a flow's goodput over its whole
    bins: all but its first and last with data (partial ones). None with
    fewer than three, or none above zero."""
    inner = rates[1:-1]
    if len(inner) < 3 or statistics.fmean(inner) <= 0:
        return None
    return statistics.stdev(inner) / statistics.fmean(inner)


def convergence_s(own: dict[int, float], active: dict[int, int], rates: dict[int, float],
                  bin_s: float, first_data_s: float) -> float | None:
    """From a flow's first data to the end of the first bin in which its
    goodput is within FAIR_WITHIN of its fair share (the link's rate in
    that bin, @rates, over the flows with data in it); None when it never
    is."""
    for b in sorted(own):
        share = rates[b] / active[b]
        if abs(own[b] - share) <= FAIR_WITHIN * share:
            return (b + 1) * bin_s - first_data_s
    return None


def refill_s(total: dict[int, float], step_s: float, rate_bps: float,
             bin_s: float) -> float | None:
    """From a step of the link's rate to the end of the first bin starting
    at or after it whose total goodput is at least FILLED of the new rate;
    None when none is."""
    for b in sorted(total):
        if b * bin_s >= step_s - 1e-9 and total[b] >= FILLED * rate_bps:
            return (b + 1) * bin_s - step_s
    return None


def run_dynamics(con, run_id: int) -> dict:
    """The run's oscillation (mean over its flows' coefficients), mean
    convergence time of the flows that start after the first, and mean
    time to fill the link after each later step of its schedule: None
    where there is nothing to measure."""
    row = con.execute("SELECT params, started_ns, c.first_ns FROM runs r LEFT JOIN captures c "
                      "ON c.capture_id = r.sender_capture WHERE run_id = $1",
                      [run_id]).fetchone()
    p = stored_params(row[0], f"run {run_id} of the store") if row else None
    out = {"oscillation_cov": None, "convergence_s": None, "refill_s": None}
    series: dict[int, dict] = {}
    bin_s = None            # the series' interval (a stored run's: 1 s)
    for flow, start_s, first_s, b, t_s, goodput in con.execute(
            sql("run_dynamics"), {"run_id": run_id}).fetchall():
        f = series.setdefault(flow, {"start_s": start_s, "first_s": first_s, "bins": {}})
        f["bins"][b] = goodput or 0.0
        if b > 0:
            bin_s = t_s / b
    if not p or bin_s is None or row[1] is None or row[2] is None:
        return out
    offset = (row[2] - row[1]) / 1e9        # the capture's first packet, in run time
    covs = [c for f in series.values()
            if (c := oscillation([f["bins"][b] for b in sorted(f["bins"])])) is not None]
    active: dict[int, int] = {}
    total: dict[int, float] = {}
    for f in series.values():
        for b, g in f["bins"].items():
            if g > 0:
                active[b] = active.get(b, 0) + 1
            total[b] = total.get(b, 0.0) + g
    # the link's rate in each bin: the schedule's step in force at its middle
    steps = [(s["t_s"] - offset, s["bw_bps"]) for s in p["schedule"]] or [(0.0, p["bw_bps"])]
    rates = {b: _rate_at(steps, (b + 0.5) * bin_s) for b in total}
    joined = [convergence_s({b: g for b, g in f["bins"].items() if g > 0}, active,
                            rates, bin_s, f["first_s"])
              for f in series.values() if f["start_s"] > 0 and f["first_s"] is not None]
    refills = [refill_s(total, t, rate, bin_s) for t, rate in steps[1:]]
    out["oscillation_cov"] = statistics.fmean(covs) if covs else None
    out["convergence_s"] = _mean(joined)
    out["refill_s"] = _mean(refills)
    return out


def _rate_at(steps: list[tuple[float, float]], t: float) -> float:
    """The rate of the last step at or before @t (the first before them all)."""
    return next((r for at, r in reversed(steps) if at <= t), steps[0][1])


def _mean(xs: list[float | None]) -> float | None:
    known = [x for x in xs if x is not None]
    return statistics.fmean(known) if known else None
