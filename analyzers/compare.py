"""Tables across runs (`tcpvar compare`): the runs chosen by study or id,
grouped by any of their parameters, and per group n, the mean and the 95 %
confidence interval (Student's t, n - 1 degrees of freedom) of each metric
of sql/run_metrics.sql. Only complete runs count: an interrupted or failed
run is listed as left out, never averaged in. A run whose fidelity check
failed (analyzers/fidelity.py) is counted and flagged per group, or, with
faithful_only, left out too."""
from __future__ import annotations

import math
import statistics

from tcpvar.artefacts.checks import stored_params
from tcpvar.errors import UsageError

from .dynamics import run_dynamics
from .fidelity import verdicts
from .significance import t975
from .sqlfiles import sql

METRICS = ("throughput_mbps", "goodput_mbps", "system_goodput_mbps", "iperf3_mbps",
           "retransmissions", "rtt_ms", "rtt_p95_ms", "jain", "friendliness",
           "background_mbps", "test_mbps", "flow_mbps", "through_mbps", "cross_mbps",
           "utilization_pct", "bottleneck_drops",
           "bottleneck_marks", "ce_packets", "latency_p50_ms", "latency_p95_ms",
           "latency_p99_ms", "latency_loss_pct", "queue_delay_p50_ms", "queue_delay_p95_ms",
           "queue_delay_p99_ms", "oscillation_cov", "convergence_s", "refill_s",
           "fct_p50_ms", "fct_p95_ms", "fct_p99_ms")


def _schedule(p: dict) -> str:
    return ",".join(f"{s['t_s']:g}:{s['bw_bps'] / 1e6:g}mbit" for s in p.get("schedule") or ())


def _per_flow(values: list[str]) -> str:
    """A per-flow option as `tcpvar run` takes it: one value, or one per flow
    joined by "+" (as a study's cc = "cubic+reno")."""
    return values[0] if len(set(values)) == 1 else "+".join(values)


def _queue(p: dict) -> str:
    """The bottleneck's qdisc, also of runs before --aqm."""
    if p.get("aqm"):
        return p["aqm"]
    if p.get("ngwa_mode") is not None:
        return "ngwa"
    return "pfifo" if p["buffer"]["packets"] is not None else "bfifo"


# a grouping key: the name of the run option (as `tcpvar run` and `sweep`
# spell it) and its value in the stored params (docs/run.md)
KEYS = {
    "cc": lambda p: "+".join(p["ccs"]),
    "rtt": lambda p: _per_flow([f"{r:g}" for r in p["flow_rtts_ms"]]) if p.get("flow_rtts_ms")
    else p["rtt_ms"],
    "loss": lambda p: p["loss_pct"],
    "jitter": lambda p: p.get("jitter_ms", 0.0),
    "bw": lambda p: f"{p['bw_bps'] / 1e6:g}mbit",
    "buffer": lambda p: p["buffer"]["text"],
    "duration": lambda p: p["duration_s"],
    "flows": lambda p: p["flows"],
    "mode": lambda p: p["mode"],
    "start_gap": lambda p: p["start_gap_s"],
    "bw_schedule": _schedule,
    "shaper": lambda p: p["shaper"],
    "ngwa": lambda p: p["ngwa_mode"],
    "wbrto": lambda p: p["wbrto"],
    "wbrto_unit": lambda p: p["wbrto_unit_ms"],
    "seed": lambda p: p["seed"],
    "clock": lambda p: p.get("clock", "auto"),
    "aqm": _queue,
    "aqm_params": lambda p: ",".join(k if v is None else f"{k}={v}"
                                     for k, v in (p.get("aqm_params") or {}).items()),
    "ecn": lambda p: _per_flow(["on" if e else "off" for e in p.get("ecn") or [False]]),
    "reverse": lambda p: p.get("reverse", 0),
    "bw_reverse": lambda p: f"{p['bw_reverse_bps'] / 1e6:g}mbit" if p.get("bw_reverse_bps")
    else None,
    "topology": lambda p: p.get("topology", "dumbbell"),
    "hops": lambda p: p.get("hops", 1),
    "cross": lambda p: p.get("cross", 0),
    "rate": lambda p: _per_flow([f"{r / 1e6:g}mbit" if r else "0"
                                 for r in p.get("flow_rates_bps") or [None]]),
    "latency": lambda p: p.get("latency"),
    "latency_interval": lambda p: p.get("latency_interval_ms"),
    "size": lambda p: _per_flow([f"{n}b" if n else "0" for n in p.get("flow_sizes") or [None]]),
    "short": lambda p: ",".join(f"{c['per_s']:g}:{c['bytes']}b" for c in p.get("short") or ()),
}
RUN_COLUMNS = ("study", "backend", "kernel")     # keys read from the runs table itself


def parse_keys(text: str) -> list[str]:
    keys = [k.strip().replace("-", "_") for k in text.split(",") if k.strip()]
    known = [*KEYS, *RUN_COLUMNS]
    for k in keys:
        if k not in known:
            raise UsageError(f"--by {k}: not a run option (one of {', '.join(known)})")
    return keys


def check_layout(layout: str, keys: list[str], metric: str) -> None:
    """--layout variants needs the variants among the keys, and a metric."""
    if layout == "variants" and "cc" not in keys:
        raise UsageError("--layout variants puts a variant on each row: add cc to --by")
    if metric not in METRICS:
        raise UsageError(f"--metric {metric}: one of {', '.join(METRICS)}")


def select_runs(con, studies: list[str], run_ids: list[int]) -> list[dict]:
    """The runs of the studies and the ids (all runs when neither is given)."""
    rows = con.execute(
        "SELECT run_id, name, study, backend, kernel, status, params FROM runs "
        "WHERE kind = 'run' AND (($studies = [] AND $ids = []) "
        "  OR list_contains($studies, study) OR list_contains($ids, run_id)) "
        "ORDER BY run_id", {"studies": studies, "ids": run_ids}).fetchall()
    found = {r[2] for r in rows}
    missing = [s for s in studies if s not in found]
    if missing:
        raise UsageError(f"the store has no run of study {missing[0]!r}")
    missing_ids = sorted(set(run_ids) - {r[0] for r in rows})
    if missing_ids:
        raise UsageError(f"the store has no run {missing_ids[0]}")
    names = ("run_id", "name", "study", "backend", "kernel", "status", "params")
    out = [dict(zip(names, r)) for r in rows]
    for r in out:
        r["params"] = stored_params(r["params"], f"run {r['run_id']} of the store") or {}
    checked = verdicts(con, [r["run_id"] for r in out])
    for r in out:
        r["fidelity"] = checked.get(r["run_id"])     # None: never checked
    return out


def _left_out(r: dict, faithful_only: bool) -> bool:
    return r["status"] != "complete" or (faithful_only and r.get("fidelity") == "fail")


def compare(con, runs: list[dict], keys: list[str], faithful_only: bool = False,
            fct_bytes: int | None = None) -> dict:
    """Per group of @keys: n, the runs, those whose fidelity check failed
    (`unfaithful`), and per metric its mean and the half-width of its 95 %
    confidence interval (None with one run). With @faithful_only the
    unfaithful runs are left out, as incomplete ones are. The fct metrics
    are of the short flows of @fct_bytes, or of each run's smallest class."""
    done = [r for r in runs if not _left_out(r, faithful_only)]
    metrics = _metrics(con, [r["run_id"] for r in done], fct_bytes)
    groups: dict[tuple, list[dict]] = {}
    for r in done:
        key = tuple(r[k] if k in RUN_COLUMNS else KEYS[k](r["params"]) for k in keys)
        groups.setdefault(key, []).append(r)
    out = []
    for key, members in sorted(groups.items(), key=lambda kv: [_order(v) for v in kv[0]]):
        ids = [r["run_id"] for r in members]
        values = {m: [metrics.get(i, {}).get(m) for i in ids] for m in METRICS}
        out.append({"key": dict(zip(keys, key)), "n": len(ids), "runs": ids,
                    "unfaithful": [r["run_id"] for r in members if r.get("fidelity") == "fail"],
                    **_mean_ci95(values), "values": values})
    return {"by": keys, "groups": out, "metrics": list(METRICS), "faithful_only": faithful_only,
            "left_out": [{"run_id": r["run_id"], "name": r["name"], "status": r["status"],
                          "fidelity": r.get("fidelity")}
                         for r in runs if _left_out(r, faithful_only)]}


def metrics_by_cell(con, study: str, faithful_only: bool = False) -> dict[str, dict]:
    """Per cell of a study: its complete runs, those whose fidelity check
    failed (`unfaithful`: counted, or with @faithful_only left out), and per
    metric (with iperf3's rate in each interval of a bandwidth schedule,
    `interval_1`, ..., and a variant's part of the run,
    `VARIANT:iperf3_mbps` and `VARIANT:utilization_pct`) the mean and the
    half-width of its 95 % confidence interval."""
    rows = con.execute("SELECT cell, run_id FROM runs WHERE study = $1 AND kind = 'run' "
                       "AND status = 'complete' ORDER BY run_id", [study]).fetchall()
    failed = {r for r, v in verdicts(con, [r for _, r in rows]).items() if v == "fail"}
    unfaithful: dict[str, list[int]] = {}
    for cell, run_id in rows:
        if run_id in failed:
            unfaithful.setdefault(cell, []).append(run_id)
    if faithful_only:
        rows = [(c, r) for c, r in rows if r not in failed]
    ids = [r for _, r in rows]
    metrics = _metrics(con, ids)
    if ids:
        for run_id, i, mbps in con.execute(sql("schedule_intervals"), {"run_ids": ids}).fetchall():
            metrics.setdefault(run_id, {})[f"interval_{i}"] = mbps
        for run_id, cc, mbps, util in con.execute(sql("run_variant_metrics"),
                                                  {"run_ids": ids}).fetchall():
            metrics.setdefault(run_id, {}).update({f"{cc}:iperf3_mbps": mbps,
                                                   f"{cc}:utilization_pct": util})
    runs: dict[str, list[int]] = {}
    for cell, run_id in rows:
        runs.setdefault(cell, []).append(run_id)
    out = {}
    for cell, members in runs.items():
        names = {m for r in members for m in metrics.get(r, {})} - {"run_id"}
        out[cell] = {"runs": members, "unfaithful": unfaithful.get(cell, []), **_mean_ci95(
            {m: [metrics.get(r, {}).get(m) for r in members] for m in names})}
    for cell, left in unfaithful.items():       # every run of the cell left out
        out.setdefault(cell, {"runs": [], "unfaithful": left, "mean": {}, "ci95": {}})
    return out


def _mean_ci95(values: dict[str, list]) -> dict:
    """Per metric, the mean of its values and its CI half-width."""
    stats = {m: mean_ci95(v) for m, v in values.items()}
    return {"mean": {m: s[0] for m, s in stats.items()},
            "ci95": {m: s[1] for m, s in stats.items()}}


def _metrics(con, run_ids: list[int], fct_bytes: int | None = None) -> dict[int, dict]:
    """Per run, sql/run_metrics.sql's metrics and its dynamics (dynamics.py)."""
    if not run_ids:
        return {}
    cur = con.execute(sql("run_metrics"), {"run_ids": run_ids, "fct_bytes": fct_bytes})
    names = [d[0] for d in cur.description]
    out = {r[0]: dict(zip(names, r)) for r in cur.fetchall()}
    for run_id, metrics in out.items():
        metrics.update(run_dynamics(con, run_id))
    return out


def _order(v):
    """Groups sort by their values, numbers as numbers, None first."""
    return (v is not None, isinstance(v, str), v if v is not None else 0)


def mean_ci95(values) -> tuple[float | None, float | None]:
    """The mean of the values that are known, and the half-width of its 95 %
    confidence interval: t(0.975, n - 1) * s / sqrt(n)."""
    xs = [float(v) for v in values if v is not None]
    if not xs:
        return None, None
    if len(xs) == 1:
        return xs[0], None
    return statistics.fmean(xs), t975(len(xs) - 1) * statistics.stdev(xs) / math.sqrt(len(xs))
