"""Reproductions (`tcpvar reproduce`): a seed paper's tables as a study.

A reproduction file (studies/papers/NAME.toml) holds the paper's tables:
each names the runs behind it (fixed run options, one run per row and
column) and the paper's rows as printed, with the line of the seed file
they come from. A scale (smoke, small, full) maps the paper's rates and
durations to what the backend carries and sets the repeats; the runs of all
chosen tables form one study, `NAME-SCALE`, so `tcpvar sweep`'s resuming,
sharding and progress apply, and a run two tables share (the same
parameters) runs once. The result puts tcpvar's mean and 95 % confidence
interval beside the paper's value in every cell.
"""
from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from tcpvar.analyzers.compare import metrics_by_cell
from tcpvar.capture.clock import check as check_clock
from tcpvar.capture.params import MAX_FLOWS, parse_rate, parse_schedule
from tcpvar.errors import InputError, UsageError
from tcpvar.pipelines.sweep import OPTIONS, Study, cells, preview, sweep
from tcpvar.resources import source_dir

SCALES = ("smoke", "small", "full", "paper")
OPTIONAL_SCALES = ("paper",)           # the paper's own rates, on virtual time
ROW_KEYS = ("label", "skip", "of")      # a row's or column's keys that are not run options

# layout -> the measures of each column: heading, metric of analyzers/compare
LAYOUTS = {
    "throughput": (("throughput", "iperf3_mbps"),),
    "fairness": (("connection 1", "background_mbps"), ("connection 2", "test_mbps"),
                 ("Jain's index", "jain")),
    "friendliness": (("Reno", "background_mbps"), ("variant", "test_mbps")),
    "intervals": (),        # one per interval of the bandwidth schedule, then the mean
}


@dataclass
class Measure:
    heading: str
    metric: str                         # a metric of analyzers/compare (or interval_N)
    factor: float = 1.0                 # into the paper's unit (Mbit/s -> kB/s: 125)


@dataclass
class Scale:
    name: str
    repeat: int
    max_duration: float
    rates: dict[float, str]             # the paper's rate (bit/s) -> this scale's
    max_flows: int = MAX_FLOWS
    rows: list[str] | None = None       # None: all of the paper's
    tables: list[str] | None = None
    columns: int | None = None          # the first N columns of each table
    clock: str | None = None            # the runs' --clock (None: auto)


@dataclass
class PaperTable:
    id: str
    title: str
    seed_line: int
    layout: str
    run: dict                           # run options every cell of the table shares
    columns: list[dict]                 # label, and the run options of the column
    rows: list[dict]                    # label, and the run options of the row (or skip)
    paper: dict[str, list[float]]       # row label -> the row as printed
    measures: list[Measure]
    note: str | None = None


@dataclass
class Reproduction:
    name: str
    paper: str
    seed: str
    paper_repeats: int
    row_heading: str
    scales: dict[str, Scale]
    tables: list[PaperTable]
    kernel: str | None = None           # every run's kernel ("patched": the mechanism's
    #                                     baseline rows run on it with the mechanism off)


@dataclass
class Planned:
    """One cell of a paper table at a scale: its row, its column and the
    run options of its runs."""
    table: PaperTable
    row: str
    column: int
    values: dict = field(default_factory=dict)


# --- reading a reproduction file ---------------------------------------------

def available() -> list[str]:
    return sorted(p.stem for p in (source_dir("studies") / "papers").glob("*.toml"))


def load(name: str) -> Reproduction:
    path = source_dir("studies") / "papers" / f"{name}.toml"
    if not path.is_file():
        raise UsageError(f"no reproduction {name!r} (one of {', '.join(available())})")
    try:
        doc = tomllib.loads(path.read_text())
        return _reproduction(name, doc)
    except (tomllib.TOMLDecodeError, KeyError, TypeError, ValueError, UsageError) as exc:
        raise InputError(f"{path}: not a reproduction file ({exc})") from None


def _reproduction(name: str, doc: dict) -> Reproduction:
    default_rows = [{"label": v, "cc": v} for v in doc.get("variants", [])]
    tables = [_table(t, default_rows) for t in doc["table"]]
    scales = {s: _scale(s, doc["scale"][s]) for s in SCALES
              if s in doc["scale"] or s not in OPTIONAL_SCALES}
    kernel = doc.get("kernel")
    if kernel not in (None, "stock", "patched"):
        raise ValueError(f"kernel = {kernel!r}: stock or patched")
    return Reproduction(name, doc["paper"], doc["seed"], int(doc["paper_repeats"]),
                        doc.get("row_heading", "variant"), scales, tables, kernel)


def _table(t: dict, default_rows: list[dict]) -> PaperTable:
    run = t.get("run", {})
    if "measures" in t:
        measures = [Measure(*m) for m in t["measures"]]
    elif t["layout"] == "intervals":
        steps = len(parse_schedule(run["bw_schedule"]))
        measures = [*(Measure(f"interval {i}", f"interval_{i}") for i in range(1, steps + 1)),
                    Measure("mean", "iperf3_mbps")]
    else:
        measures = [Measure(*m) for m in LAYOUTS[t["layout"]]]
    table = PaperTable(id=str(t["id"]), title=t["title"], seed_line=int(t["seed_line"]),
                       layout=t["layout"], run=run, columns=t["columns"],
                       rows=[r for r in t.get("rows", default_rows) if r["label"] in t["paper"]],
                       paper=t["paper"], measures=measures, note=t.get("note"))
    width = len(table.columns) * len(measures)
    for label, values in table.paper.items():
        if len(values) != width:
            raise ValueError(f"table {table.id}, {label}: {len(values)} values, the layout "
                             f"has {width}")
    keys = {k for c in (*table.columns, *table.rows) for k in c if k not in ROW_KEYS}
    unknown = sorted((keys | set(run)) - set(OPTIONS) - {"mix"})
    if unknown:
        raise ValueError(f"table {table.id}: unknown run option {unknown[0]!r}")
    return table


def _scale(name: str, d: dict) -> Scale:
    return Scale(name, int(d["repeat"]), float(d["max_duration"]),
                 {parse_rate(k): v for k, v in d.get("rates", {}).items()},
                 int(d.get("max_flows", MAX_FLOWS)), d.get("rows"), d.get("tables"),
                 d.get("columns"),
                 d.get("clock") and check_clock(d["clock"]))


# --- the runs of a scale -------------------------------------------------------

def chosen_tables(repro: Reproduction, scale: Scale, only: list[str]) -> list[PaperTable]:
    ids = [t.id for t in repro.tables]
    for t in only:
        if t not in ids:
            raise UsageError(f"--table {t}: {repro.name} has tables {', '.join(ids)}")
    wanted = only or scale.tables or ids
    return [t for t in repro.tables if t.id in wanted]


def planned(scale: Scale, tables: list[PaperTable]) -> list[Planned]:
    """Every cell of the tables at this scale (the scale's rows that the
    table has and tcpvar can run, and its first columns)."""
    out = []
    for t in tables:
        for row in t.rows:
            if "skip" in row or (scale.rows and row["label"] not in scale.rows):
                continue
            for i, col in enumerate(t.columns[:scale.columns]):
                values = {**t.run, **_options(row), **_options(col)}
                out.append(Planned(t, row["label"], i, scaled(values, scale)))
    return out


def _options(d: dict) -> dict:
    return {k: v for k, v in d.items() if k not in ROW_KEYS}


def scaled(values: dict, scale: Scale) -> dict:
    """A cell's run options at the scale: rates mapped, the duration and the
    flows capped, a bandwidth schedule's step times shrunk with the run."""
    out = dict(values)
    if scale.clock:
        out["clock"] = scale.clock
    if "mix" in out:
        out.update(_mix(out.pop("mix"), scale.max_flows))
    duration = float(values.get("duration", OPTIONS["duration"][2]))
    out["duration"] = min(duration, scale.max_duration)
    if "bw" in values:
        out["bw"] = _rate(values["bw"], scale)
    if "flows" in values:
        out["flows"] = min(int(values["flows"]), scale.max_flows)
    if "bw_schedule" in values:
        shrink = out["duration"] / duration
        out["bw_schedule"] = ",".join(f"{t * shrink:g}:{_rate_bps(r, scale)}"
                                      for t, r in parse_schedule(values["bw_schedule"]))
    return out


def _mix(mix: dict[str, int], max_flows: int) -> dict:
    """`mix = { cubic = 20, bic = 20 }`: a run of that many flows of each
    variant (in that order), each variant's count cut in proportion when
    all of them are more than max_flows."""
    total = sum(mix.values())
    counts = dict(mix)
    if total > max_flows:
        counts = {cc: max(1, n * max_flows // total) for cc, n in mix.items()}
        for cc in list(counts)[:max_flows - sum(counts.values())]:
            counts[cc] += 1     # the remainder, to the first variants
    ccs = [cc for cc, n in counts.items() for _ in range(n)]
    return {"cc": ",".join(ccs), "flows": len(ccs)}


def _rate(text: str, scale: Scale) -> str:
    return scale.rates.get(parse_rate(text), text)


def _rate_bps(bps: float, scale: Scale) -> str:
    """The scale's rate for @bps, else @bps in words parse_rate reads."""
    if bps in scale.rates:
        return scale.rates[bps]
    for unit, size in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)):
        if bps >= size and bps % size == 0:
            return f"{bps / size:g}{unit}"
    return f"{bps:.0f}bit"


def study_of(repro: Reproduction, scale: Scale, cells_: list[Planned]) -> Study:
    grid: list[dict] = []
    for c in cells_:
        if c.values not in grid:
            grid.append(c.values)
    return Study(f"{repro.name}-{scale.name}", {}, scale.repeat, grid=grid)


def scaling_notes(repro: Reproduction, scale: Scale, tables: list[PaperTable]) -> list[str]:
    """What the scale changes, in words, for the output."""
    runs = [{**t.run, **_options(r), **_options(c)} for t in tables for r in t.rows
            for c in t.columns]
    notes = []
    if scale.rates:
        rates = ", ".join(f"{_mbit(bps)} → {_mbit(parse_rate(text))}"
                          for bps, text in scale.rates.items())
        notes.append(f"rates: {rates} (the paper's; the micro-VM under TCG carries about "
                     f"90 Mbit/s in real time)")
    else:
        notes.append("rates, RTTs, loss and buffers: the paper's")
    if scale.clock == "virtual":
        notes.append("clock: virtual time (QEMU's instruction counting): the paper's rates "
                     "whatever the host's speed, at some cost in wall time")
    durations = sorted({float(r.get("duration", OPTIONS["duration"][2])) for r in runs})
    capped = [f"{d:g} s → {scale.max_duration:g} s" for d in durations if d > scale.max_duration]
    notes.append(f"durations: {', '.join(capped) if capped else 'as in the paper'}")
    flows = sorted({n for n in map(_flows, runs) if n > scale.max_flows})
    if flows:
        notes.append(f"flows: {', '.join(map(str, flows))} → {scale.max_flows} "
                     + f"(this scale's limit; tcpvar runs up to {MAX_FLOWS})")
    notes.append(f"repeats: {scale.repeat} per cell (the paper: {repro.paper_repeats})")
    if scale.rows:
        notes.append(f"rows: {', '.join(scale.rows)} only")
    if scale.columns:
        notes.append(f"columns: the first {scale.columns} of each table")
    return notes


def _flows(values: dict) -> int:
    return int(values["flows"]) if "flows" in values else \
        sum(values["mix"].values()) if "mix" in values else 1


def _mbit(bps: float) -> str:
    return f"{bps / 1e9:g} Gbit/s" if bps >= 1e9 else f"{bps / 1e6:g} Mbit/s" \
        if bps >= 1e6 else f"{bps / 1e3:g} kbit/s"


# --- running and reading back ------------------------------------------------

@dataclass
class Outcome:
    repro: Reproduction
    scale: Scale
    study: Study
    tables: list[PaperTable]
    cells: list[Planned]
    sweep: object                       # study.SweepOutcome
    faithful_only: bool = False         # runs that failed the fidelity check left out

    def doc(self, con) -> dict:
        """The tables, paper beside tcpvar, as `tcpvar reproduce --json` gives them."""
        by_cell = metrics_by_cell(con, self.study.name, self.faithful_only) \
            if con is not None else {}
        # cells() keeps the grid's order; a grid entry is a planned cell's values
        digest = {json.dumps(g, sort_keys=True): c.key
                  for g, c in zip(self.study.grid, cells(self.study))}
        keys = {(c.table.id, c.row, c.column): digest[json.dumps(c.values, sort_keys=True)]
                for c in self.cells}
        return {
            "reproduction": self.repro.name, "paper": self.repro.paper,
            "seed": self.repro.seed, "paper_repeats": self.repro.paper_repeats,
            "scale": self.scale.name, "study": self.study.name,
            "scaling": scaling_notes(self.repro, self.scale, self.tables),
            "faithful_only": self.faithful_only,
            "tables": [self._table(t, by_cell, keys) for t in self.tables],
            "runs": self.sweep.rows(),
        }

    def _table(self, t: PaperTable, by_cell: dict, keys: dict) -> dict:
        rows = []
        for row in t.rows:
            if self.scale.rows and row["label"] not in self.scale.rows:
                continue
            cells_ = []
            for i, column in enumerate(t.columns[:self.scale.columns]):
                got = by_cell.get(keys.get((t.id, row["label"], i)),
                                  {"runs": [], "unfaithful": [], "mean": {}, "ci95": {}})
                for j, m in enumerate(t.measures):
                    # a row `of` a variant reads that variant's part of the run
                    metric = f"{row['of']}:{m.metric}" if "of" in row else m.metric
                    mean, ci = got["mean"].get(metric), got["ci95"].get(metric)
                    cells_.append({
                        "column": column["label"], "measure": m.heading, "metric": m.metric,
                        "paper": t.paper[row["label"]][i * len(t.measures) + j],
                        "tcpvar": {"n": len(got["runs"]),
                                   "mean": None if mean is None else mean * m.factor,
                                   "ci95": None if ci is None else ci * m.factor},
                        "runs": got["runs"], "unfaithful": got.get("unfaithful", [])})
            rows.append({"row": row["label"], "skip": row.get("skip"), "cells": cells_})
        return {"id": t.id, "title": t.title, "seed_line": t.seed_line, "layout": t.layout,
                "note": t.note, "row_heading": self.repro.row_heading,
                "measures": [m.heading for m in t.measures], "rows": rows,
                "columns": [c["label"] for c in t.columns[:self.scale.columns]]}


def reproduce(name: str, scale_name: str, only: list[str], *, db_path: str, dry_run: bool,
              backend: str = "auto", out_dir: Path = Path("runs"),
              boot_timeout_s: float = 180.0, progress=None, draw=None,
              clock: str | None = None, jobs: int | None = None,
              faithful_only: bool = False) -> Outcome:
    """The reproduction @name at @scale_name; @clock overrides the scale's."""
    repro = load(name)
    if scale_name not in repro.scales:
        raise UsageError(f"--scale {scale_name}: {name} has the scales "
                         f"{', '.join(repro.scales)}")
    scale = repro.scales[scale_name]
    if clock is not None:
        scale = replace(scale, clock=check_clock(clock))
    tables = chosen_tables(repro, scale, only)
    cells_ = planned(scale, tables)
    study = study_of(repro, scale, cells_)
    if dry_run:
        result = preview(db_path, study)
    else:
        result = sweep(db_path, study, backend, repro.kernel, out_dir, boot_timeout_s, progress,
                       draw, jobs)
    return Outcome(repro, scale, study, tables, cells_, result, faithful_only)
