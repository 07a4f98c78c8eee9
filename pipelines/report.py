"""`tcpvar report` and the report `tcpvar run` leaves in each run folder:
gather, per run or capture, its summary, the facts of its header and the
data of its figures; report.html draws them into one self-contained page."""
from __future__ import annotations

from pathlib import Path

from tcpvar.analyzers.compare import KEYS, METRICS, parse_keys, select_runs
from tcpvar.analyzers.compare import compare as group_runs
from tcpvar.analyzers.connections import capture_info, connections
from tcpvar.analyzers.runs import run_summary
from tcpvar.analyzers.significance import pairwise
from tcpvar.artefacts.run_folder import FIGURES, read_manifest
from tcpvar.errors import InputError, UsageError
from tcpvar.pipelines.plot import PlotOptions, figure, subject
from tcpvar.store import Store


def kinds_for(subj) -> list[str]:
    """The figures worth showing: fairness with two flows or more, NGWA
    when the run had it switched on or the capture carries the option,
    queueing delay when a run captured its bottleneck, latency under load
    when it had the latency probe, completion times when it had short flows."""
    out = ["throughput", "cwnd", "rtt", "rto", "tsg", "window"]
    if subj.bottleneck_id is not None:
        out.append("queue")
    if len(subj.senders) > 1:
        out.append("fairness")
    if subj.ngwa:
        out.append("ngwa")
    if subj.latency:
        out.append("latency")
    if subj.short:
        out.append("fct")
    return out


def part(store, target: str, progress) -> dict:
    """One section of a report: a run or a capture, with its figures' data."""
    subj = subject(store, target, None, progress)
    docs = [figure(store, subj, kind, PlotOptions()) for kind in kinds_for(subj)]
    if subj.run_id is not None:
        summary = run_summary(store.con, subj.run_id)
        return {"kind": "run", "summary": summary, "facts": _run_facts(summary),
                "figures": docs}
    info = capture_info(store.con, subj.capture_id)
    cap = {"path": info["path"], "connections": connections(store.con, subj.capture_id)}
    facts = {"link type": info["link_type"], "frames": info["frames"],
             "TCP segments": info["tcp_packets"], "duration": f"{info['duration_s']:.3f} s",
             "flows shown": len(subj.senders)}
    return {"kind": "capture", "summary": cap, "facts": facts, "figures": docs}


def _run_facts(s: dict) -> dict:
    """The run's host, kernel, tools and settings, from its manifest."""
    try:
        m = read_manifest(Path(s["dir"]))
    except InputError:
        m = {}
    p = s["params"] or {}
    return {"backend": s["backend"], "kernel": s["kernel"],
            "kernel build": m.get("kernel_version"), "host": m.get("hostname"),
            "tcpvar": m.get("tcpvar_version"), "seed, repetition": f"{s['seed']}, "
                                                                    f"{s['repetition']}",
            "buffer": (p.get("buffer") or {}).get("text"), "shaper": p.get("shaper"),
            "schedule": p.get("schedule") or None,
            "tools": "; ".join(f"{k}: {v}" for k, v in (m.get("tools") or {}).items()),
            "sysctls": "; ".join(f"{k}={v}" for k, v in (m.get("sysctls") or {}).items()
                                 if v is not None),      # None: not in this kernel
            "tcp_probe": (m.get("probe") or {}).get("reason"),
            "capture drops": _drops_words(m.get("capture_drops")), "folder": s["dir"]}


def _drops_words(drops: dict | None) -> str | None:
    """The manifest's packets tcpdump's kernel buffer dropped, per capture,
    as words: 'none', or 'sender 0, bottleneck 12' (None: not counted)."""
    if not drops:
        return None
    if all(n == 0 for n in drops.values()):
        return "none"
    return ", ".join(f"{name} {'not counted' if n is None else n}" for name, n in drops.items())


def report_parts(db_path: str, targets, progress) -> list[dict]:
    """`tcpvar report`: one section per target, for report.html to draw."""
    with Store(db_path) as store:
        return [part(store, t, progress) for t in targets]


def run_outputs(store, run_id: int, run_dir: Path) -> list[dict]:
    """A finished run's report section, each figure with its file in the
    run folder (figures/KIND.png)."""
    section = part(store, f"run:{run_id}", None)
    for doc in section["figures"]:
        doc["path"] = run_dir / FIGURES / f"{doc['kind']}.png"
    return [section]


# what a study's page tests and draws when no --metric is given: the rates,
# fairness, delay and completion times, each where the runs have it
HEADLINE = ("iperf3_mbps", "jain", "rtt_p95_ms", "queue_delay_p95_ms", "latency_p50_ms",
            "fct_p95_ms")


def study_part(store, name: str, by: str | None, metrics: list[str]) -> dict:
    """A study's section: its runs grouped by @by (default: the fewest keys
    that tell its cells apart), the comparison table's data, the tests
    of every pair of groups on each of @metrics (default: HEADLINE's that
    some group has) and a box plot of each across the runs."""
    for m in metrics:
        if m not in METRICS:
            raise UsageError(f"--metric {m}: one of {', '.join(METRICS)}")
    runs = select_runs(store.con, [name], [])
    keys = parse_keys(by) if by else swept_keys(runs) or ["study"]
    doc = group_runs(store.con, runs, keys)
    has = [m for m in METRICS if any(g["mean"][m] is not None for g in doc["groups"])]
    chosen = list(metrics) or [m for m in HEADLINE if m in has]
    tests = [pairwise(doc["groups"], m) for m in chosen] if len(doc["groups"]) > 1 else []
    figures = [{**doc, "kind": "box", "name": name, "metric": m,
                "title": f"{name}: by {', '.join(keys)}"} for m in chosen]
    done = [r for r in runs if r["status"] == "complete"]
    facts = {"runs": f"{len(done)} complete of {len(runs)}", "grouped by": ", ".join(keys),
             "groups": len(doc["groups"]),
             "backends": ", ".join(sorted({r["backend"] or "?" for r in runs})),
             "kernels": ", ".join(sorted({r["kernel"] or "?" for r in runs}))}
    listing = [[r["run_id"], r["name"], *(_key(r, k) for k in keys), r["status"],
                r["fidelity"] or "—"] for r in runs]
    return {"kind": "study", "name": name, "facts": facts, "compare": doc, "tests": tests,
            "figures": figures, "runs": (["run", "folder", *keys, "status", "fidelity"],
                                         listing)}


def _key(run: dict, key: str):
    """A run's value of a grouping key (its params may be missing: a run
    stored before it wrote them)."""
    if key not in KEYS:
        return run[key]
    return KEYS[key](run["params"]) if run["params"] else None


# keys whose values follow from others' when not given (a mode sets the
# flows and their start gap): the first dropped from a study's grouping
IMPLIED = ("flows", "start_gap")


def swept_keys(runs: list[dict]) -> list[str]:
    """The fewest run options whose values tell the complete @runs' cells
    apart: those whose values differ, less any the others already imply."""
    done = [r["params"] for r in runs if r["status"] == "complete" and r["params"]]

    def groups(keys):
        return len({tuple(str(KEYS[k](p)) for k in keys) for p in done})

    keys = [k for k in KEYS if groups([k]) > 1]
    for k in [*(k for k in IMPLIED if k in keys), *reversed(keys)]:
        rest = [x for x in keys if x != k]
        if k in keys and rest and groups(rest) == groups(keys):
            keys = rest
    return keys


def study_report(db_path: str, name: str, by: str | None, metrics: list[str]) -> list[dict]:
    """`tcpvar report --study NAME`: the study's section."""
    Store(db_path, read_only=True).close()      # no such store: say so, create none
    with Store(db_path) as store:               # older stores get the study columns
        return [study_part(store, name, by, metrics)]
