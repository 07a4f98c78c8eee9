"""Studies (`tcpvar sweep`): the product of values over run options ×
repeats, each a run of its own in the store, tagged with the study's name
and its cell (a digest of the run's parameters without the repetition).

A study comes from command-line options (each a comma-separated list of
values) or a study file (TOML: a list sweeps, a single value is fixed):

    name = "cubic-vs-reno"
    repeat = 3
    cc = ["cubic", "reno"]
    rtt = [50, 100]
    duration = 20

Within one value, "+" joins the variants of a run's flows: cc = "cubic+reno"
is one run with a CUBIC and a Reno flow, cc = "cubic,reno" (or a list) two
runs. Runs go sequentially, repetition by repetition (every cell once, then
again), so a slow drift of the machine spreads over all cells; the runs of
one kernel share one micro-VM boot. A run the store holds already (same
study, cell and repetition, complete) is skipped, so an interrupted study
resumes where it stopped."""
from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from tcpvar.analyzers.compare import KEYS
from tcpvar.analyzers.runs import complete_study_runs
from tcpvar.artefacts.checks import read_bounded
from tcpvar.artefacts.run_folder import read_manifest
from tcpvar.capture.params import MAX_RUNS, RunParams, make_params
from tcpvar.capture.session import PlannedRun
from tcpvar.errors import InputError, TcpvarError, UsageError
from tcpvar.progress import Progress
from tcpvar.store import Store

# study key -> make_params keyword, the type of one value, the value of `tcpvar run`
OPTIONS = {
    "cc": ("cc", str, "cubic"),
    "rtt": ("rtt_ms", float, 100.0),        # or one per flow: "20+80"
    "loss": ("loss_pct", float, 0.0),
    "jitter": ("jitter_ms", float, 0.0),
    "bw": ("bw", str, "20mbit"),
    "buffer": ("buffer", str, "bdp"),
    "duration": ("duration_s", float, 20.0),
    "flows": ("flows", int, None),
    "mode": ("mode", str, "single"),
    "start_gap": ("start_gap_s", float, None),
    "bw_schedule": ("schedule", str, None),
    "shaper": ("shaper", str, "htb"),
    "ngwa": ("ngwa", int, None),
    "wbrto": ("wbrto", str, None),
    "wbrto_unit": ("wbrto_unit_ms", int, 1000),
    "seed": ("seed", int, 0),
    "clock": ("clock", str, "auto"),
    "aqm": ("aqm", str, None),
    "aqm_params": ("aqm_params", str, None),
    "ecn": ("ecn", str, None),
    "reverse": ("reverse", int, 0),
    "bw_reverse": ("bw_reverse", str, None),
    "topology": ("topology", str, "dumbbell"),
    "hops": ("hops", int, None),
    "cross": ("cross", int, None),
    "rate": ("rate", str, None),
    "latency": ("latency", str, None),
    "latency_interval": ("latency_interval_ms", float, None),
    "short": ("short", str, None),
    "size": ("size", str, None),
}
assert set(OPTIONS) <= set(KEYS)    # every swept option can group a comparison
PER_FLOW = ("cc", "rtt", "ecn", "rate", "size")     # a value per flow: "cubic+reno", "20+80"
MAX_FILE_BYTES = 1 << 20            # a study file is a few kB (callegari2011's: 10)


@dataclass
class Study:
    name: str
    values: dict[str, list]             # key -> its values, in the order given
    repeat: int = 1
    shard: tuple[int, int] = (1, 1)     # this machine's part i of n (--shard i/n)
    grid: list[dict] | None = None      # the cells, when not the product of values
    name_generated: bool = False        # no --name, no file: named by generated_name()

    def swept(self) -> list[str]:
        """The keys given more than one value."""
        return [k for k, v in self.values.items() if len(v) > 1]


@dataclass
class Cell:
    values: dict                        # the swept keys' values of this cell
    params: RunParams
    key: str                            # digest of the params without the repetition


@dataclass
class Entry:
    """One run of the study: done before (skipped) or to run now."""
    cell: Cell
    repetition: int
    run_id: int | None = None           # once stored
    skipped: bool = False
    summary: dict | None = None
    index: int = 0                      # k of the n runs to run now
    elsewhere: bool = False             # another shard's run


@dataclass
class SweepOutcome:
    study: Study
    entries: list[Entry]
    backends: list[dict] = field(default_factory=list)   # per session: backend, reason
    interrupted: bool = False

    def rows(self) -> list[dict]:
        """Each run of the study as `tcpvar sweep --json` gives it (docs/sweep.md)."""
        return [{"cell": e.cell.values, "repetition": e.repetition, "skipped": e.skipped,
                 "other_shard": e.elsewhere,
                 "variants": [f.cc for f in e.cell.params.flow_plan()],
                 "run_id": e.run_id, **{k: (e.summary or {}).get(k)
                                        for k in ("status", "name", "dir")}}
                for e in self.entries]


# --- defining a study -------------------------------------------------------

def study_from(name: str | None, file: str | None, given: dict[str, str | None],
               repeat: int | None, shard: str | None = None) -> Study:
    """A study from a file and/or options; an option given overrides the
    file's value of that key. @given holds comma-separated lists by key."""
    doc: dict = _read_file(file) if file else {}
    name = name or doc.pop("name", None) or (Path(file).stem if file else None)
    doc.pop("name", None)
    if name is not None and not name.strip():
        raise UsageError("--name: a study's name cannot be empty")
    repeat = repeat or doc.pop("repeat", 1)
    doc.pop("repeat", None)
    try:
        values = {k: _as_list(k, v) for k, v in doc.items()}
    except UsageError as exc:           # the file's value: the file is named
        raise InputError(f"{file}: {exc}") from None
    for k, text in given.items():
        if text is not None:
            values[k] = [_one(k, v) for v in split(k, text)]
    if not isinstance(repeat, int) or isinstance(repeat, bool) or repeat < 1:
        raise UsageError(f"repeat {repeat!r}: a study repeats every cell 1 or more times")
    study = Study(name or generated_name(values, repeat), values, repeat,
                  parse_shard(shard) if shard else (1, 1), name_generated=name is None)
    try:
        check_size(study)
    except UsageError as exc:
        raise (InputError(f"{file}: {exc}") if file else exc) from None
    return study


NAME_WORDS_MAX = 40     # the readable part of a generated name; the digest follows


def generated_name(values: dict[str, list], repeat: int) -> str:
    """A study's name from its options, for a sweep given no --name: the
    values given (cc's bare, others after their key) and a digest of the
    values and repeat. The same values, in any order, give the same name,
    so the same command resumes its study and every --shard of it shares
    it; other values give another name."""
    words = []
    for key in (k for k in OPTIONS if k in values):
        texts = [f"{v:g}" if isinstance(v, float) else str(v) for v in values[key]]
        for text in sorted(set(texts)):
            text = "".join(c if c.isascii() and c.isalnum() or c == "." else "_"
                           for c in text.lower().replace(",", "_"))
            words.append(text if key == "cc" else f"{key.replace('_', '')}{text}")
    readable = ""
    for word in words:      # whole words, as many as fit
        if len(readable) + 1 + len(word) > NAME_WORDS_MAX:
            break
        readable = f"{readable}-{word}" if readable else word
    readable = readable.strip("_.") or "study"
    same = {k: sorted({str(v) for v in vals}) for k, vals in values.items()}
    digest = hashlib.sha256(json.dumps({"values": same, "repeat": repeat},
                                       sort_keys=True).encode()).hexdigest()[:6]
    return f"{readable}-r{repeat}-{digest}"


def check_size(study: Study) -> int:
    """The runs the study plans, counted before any is planned: UsageError
    beyond MAX_RUNS (a study file's repeat = 1000000000 would plan until the
    memory runs out)."""
    n_cells = len(study.grid) if study.grid is not None else \
        math.prod(len(v) for v in study.values.values())
    runs = n_cells * study.repeat
    if runs > MAX_RUNS:
        raise UsageError(f"study {study.name}: {n_cells} cells x {study.repeat} repeats = "
                         f"{runs} runs, more than a study may plan ({MAX_RUNS})")
    return runs


def parse_shard(text: str) -> tuple[int, int]:
    """--shard i/n as (i, n)."""
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise UsageError(f"--shard {text!r}: give it as i/n, e.g. 1/3") from None
    if not 1 <= i <= n:
        raise UsageError(f"--shard {text}: i must be 1 to n")
    return i, n


def _read_file(path: str) -> dict:
    """The study file's keys, each checked for its type (a study file may be
    anyone's: every problem is one line naming the file and the key)."""
    try:
        data = read_bounded(Path(path), MAX_FILE_BYTES, "a study file")
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror})") from None
    try:
        doc = tomllib.loads(data.decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a study file (TOML): {exc}") from None
    except RecursionError:
        raise InputError(f"{path}: not a study file (TOML): nested too deeply") from None
    for k, v in doc.items():
        if k not in OPTIONS and k not in ("name", "repeat"):
            raise InputError(f"{path}: unknown key {k!r} (study keys: name, repeat, "
                             f"{', '.join(OPTIONS)})")
        if k == "name" and not (isinstance(v, str) and v.strip()):
            raise InputError(f"{path}: name: {_quoted(v)} is not a text")
        if k == "repeat" and not (isinstance(v, int) and not isinstance(v, bool)):
            raise InputError(f"{path}: repeat: {_quoted(v)} is not an integer")
        if k in OPTIONS and not all(isinstance(x, (str, int, float)) and not isinstance(x, bool)
                                    for x in (v if isinstance(v, list) else [v])):
            raise InputError(f"{path}: {k}: {_quoted(v)} is not a value or a list of values")
    return doc


def _quoted(v, width: int = 40, show=repr) -> str:
    """A short quote of a value (a schedule of 1000 steps), for a one-line message."""
    text = show(v)
    return text if len(text) <= width else text[:width - 3] + "..."


def _as_list(key: str, value) -> list:
    """A file's value as a list: a list, or a text split as on the command line."""
    values = value if isinstance(value, list) else split(key, str(value))
    return [_one(key, v) for v in values]


def split(key: str, text: str) -> list[str]:
    """The values of an option: comma-separated, but ";" between bandwidth
    schedules, between sets of --aqm-params and between sets of --short
    classes (each is comma-separated)."""
    return [v for v in text.split(";" if key in ("bw_schedule", "aqm_params", "short") else ",")
            if v.strip()]


def _one(key: str, value):
    kind = OPTIONS[key][1]
    text = str(value).strip()
    if key in PER_FLOW and "+" in text or key == "cc":
        return text.replace("+", ",")   # "+" joins a run's flows; make_params reads ","
    try:
        return kind(text) if kind is not str else text
    except ValueError:
        raise UsageError(f"{key} = {text!r}: not a {kind.__name__}") from None


def cells(study: Study) -> list[Cell]:
    """The study's grid, else the product of its values, the first key
    outermost; each cell checked as `tcpvar run` checks its options."""
    check_size(study)
    keys = list(study.values)
    grid = [{k: _one(k, v) for k, v in g.items()} for g in study.grid] if study.grid else \
        [dict(zip(keys, combo)) for combo in itertools.product(*(study.values[k] for k in keys))]
    out = []
    for chosen in grid:
        kwargs = {kw: chosen.get(k, default) for k, (kw, _, default) in OPTIONS.items()}
        try:
            params = make_params(repeat=study.repeat, **kwargs)
        except UsageError as exc:
            raise UsageError(f"cell {_describe(chosen)}: {exc}") from None
        shown = {k: v.replace(",", "+") if k in PER_FLOW and isinstance(v, str) else v
                 for k, v in chosen.items()}
        out.append(Cell(shown, params, cell_key(params)))
    return out


def cell_key(params: RunParams) -> str:
    d = params.to_json()
    d.pop("repeat")
    if not d["jitter_ms"]:
        d.pop("jitter_ms")      # as before --jitter existed: stored studies keep their cells
    if d["clock"] == "auto":
        d.pop("clock")          # and before --clock
    for key, default in (("aqm", None), ("aqm_params", {}), ("ecn", []), ("flow_rtts_ms", []),
                         ("reverse", 0), ("bw_reverse_bps", None), ("topology", "dumbbell"),
                         ("hops", 1), ("cross", 0), ("latency", None),
                         ("latency_interval_ms", None), ("flow_rates_bps", []),
                         ("short", []), ("flow_sizes", [])):
        if d[key] == default:
            d.pop(key)          # and before --aqm, --ecn, RTT lists, --reverse, parking
            # lots, --latency, --short, --size
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def _describe(values: dict) -> str:
    return " ".join(f"{k}={_quoted(v, 60, str).replace(',', '+')}"
                    for k, v in values.items()) or "(one)"


# --- running it ---------------------------------------------------------------

def plan(store, study: Study) -> list[Entry]:
    """Every run of the study, repetition by repetition; those the store
    (None: no store yet) holds complete are marked skipped, with their run_id."""
    done = {} if store is None else complete_study_runs(store.con, study.name)
    entries = []
    grid = cells(study)
    i, n = study.shard
    for rep in range(1, study.repeat + 1):
        for cell in grid:
            stored = done.get((cell.key, rep))
            # shard i takes every n-th run of the whole plan from the i-th on
            elsewhere = len(entries) % n != i - 1
            entries.append(Entry(cell, rep, stored and stored["run_id"],
                                 skipped=stored is not None, summary=stored,
                                 elsewhere=elsewhere and stored is None))
    return entries


def preview(db_path: str, study: Study) -> SweepOutcome:
    """The study's runs, and which the store holds, without running any
    (nor creating the store)."""
    if not Path(db_path).exists():
        return SweepOutcome(study, plan(None, study))
    with Store(db_path) as store:
        return SweepOutcome(study, plan(store, study))


def sweep(db_path: str, study: Study, backend: str, kernel: str | None, out_dir: Path,
          boot_timeout_s: float, progress, draw=None, jobs: int | None = None) -> SweepOutcome:
    """Run what the store lacks, one capture session per kernel and clock
    (a stock and a patched one boot once each), or @jobs sessions side by
    side (None: as many as the host has cores where the runs are on virtual
    time, else one); each session's runs are stored when it ends, also when
    it ends in Ctrl-C or a failure. @draw as for run's execute: what draws
    each run's report."""
    from tcpvar.capture.session import SessionRequest
    from tcpvar.pipelines.load import STORE_WAIT_S
    from tcpvar.pipelines.run import execute, execute_side_by_side

    with Store(db_path, wait_s=STORE_WAIT_S, progress=progress) as store:
        entries = plan(store, study)
        if _store_left(store, study.name, entries, out_dir, progress):
            entries = plan(store, study)
    todo = [e for e in entries if not (e.skipped or e.elsewhere)]
    outcome = SweepOutcome(study, entries)
    held = sum(e.skipped for e in entries)
    shard = f" (shard {study.shard[0]} of {study.shard[1]})" if study.shard[1] > 1 else ""
    progress(Progress(f"study {study.name}: {len(entries)} runs, {held} in the store already, "
                      f"{len(todo)} to run here{shard}"))
    for i, e in enumerate(todo, 1):
        e.index = i
    watch = _Eta(study.name, todo, progress)
    for group in _sessions(todo, kernel):
        n = min(len(group), side_by_side(jobs, group[0].cell.params, backend, kernel))
        if n > 1:
            progress(Progress(f"study {study.name}: {n} sessions side by side" + (
                "" if on_virtual_time(group[0].cell.params, backend, kernel) else
                " (on a real clock they disturb each other's results)")))
        parts = [group[k::n] for k in range(n)]
        reqs = [SessionRequest(part[0].cell.params, backend, kernel, out_dir, boot_timeout_s,
                               plan=[PlannedRun(e.cell.params, e.repetition,
                                                {"name": study.name, "cell": e.cell.key,
                                                 "index": e.index, "of": len(todo)})
                                     for e in part]) for part in parts]
        results = execute_side_by_side(db_path, reqs, watch, draw) if n > 1 else \
            [execute(db_path, reqs[0], watch, draw)]
        for result in results:
            outcome.backends.append({"backend": result.backend, "reason": result.reason})
            by_key = {(cell_key(RunParams.from_json(s["params"])), s["repetition"]): s
                      for s in result.summaries}
            for e in group:
                s = by_key.get((e.cell.key, e.repetition))
                if s is not None:
                    e.summary, e.run_id = s, s["run_id"]
        if any(r.interrupted for r in results):
            outcome.interrupted = True
            break
    return outcome


def side_by_side(jobs: int | None, params: RunParams, backend: str,
                 kernel: str | None) -> int:
    """Sessions to run at once: @jobs when given; else, where the runs are
    on virtual time (their results cannot move with the host's load), one
    per core of the host; else one (real-time runs side by side would
    disturb each other)."""
    if jobs is not None:
        return jobs
    return (os.cpu_count() or 1) if on_virtual_time(params, backend, kernel) else 1


def on_virtual_time(params: RunParams, backend: str, kernel: str | None) -> bool:
    """Whether the runs go to a micro-VM on virtual time: asked for, or
    `auto` where they go to the micro-VM and KVM does not serve."""
    from tcpvar.capture.backend import choose
    from tcpvar.capture.vm import kvm_state

    return params.clock == "virtual" or (
        params.clock == "auto" and choose(backend, params, kernel)[0] == "vm"
        and not kvm_state())


def _store_left(store, name: str, entries: list[Entry], out_dir: Path, progress) -> bool:
    """Store the complete run folders under @out_dir of the runs of study
    @name that @entries (this shard's plan) has yet to run: a session stores
    its runs when it ends, so a sweep killed (SIGKILL, a power cut) before
    that left finished runs behind unstored. Stored now, they are skipped
    like any stored run. Whether any was stored."""
    from tcpvar.pipelines.load import store_into

    todo = {(e.cell.key, e.repetition) for e in entries if not (e.skipped or e.elsewhere)}
    left = _left_behind(name, todo, out_dir)
    if left:
        progress(Progress(f"study {name}: storing {len(left)} finished runs that an "
                          f"ended sweep left in {out_dir} unstored"))
    for run_dir in left:
        try:
            store_into(store, run_dir, progress)
        except TcpvarError as exc:     # run again instead
            progress(Progress(f"{run_dir}: not stored ({exc}); its run is run again"))
    return bool(left)


def _left_behind(name: str, todo: set[tuple[str, int]], out_dir: Path) -> list[Path]:
    """Run folders under @out_dir whose manifest says complete, of study
    @name and a (cell, repetition) in @todo; one for each."""
    if not todo or not out_dir.is_dir():
        return []
    left = {}
    for run_dir in sorted(out_dir.resolve().iterdir()):
        try:
            m = read_manifest(run_dir)
        except InputError:
            continue
        tag = m.get("study") or {}
        run = (tag.get("cell"), m.get("repetition"))
        if tag.get("name") == name and m.get("status") == "complete" and run in todo:
            left.setdefault(run, run_dir)
    return list(left.values())


def _sessions(entries: list[Entry], kernel: str | None) -> list[list[Entry]]:
    """The runs of one micro-VM boot together, order kept: those that need
    the patched kernel apart from the others (unless the study gives one
    @kernel), and each clock apart."""
    groups: dict[tuple, list[Entry]] = {}
    for e in entries:
        p = e.cell.params
        groups.setdefault((kernel is None and p.needs_patched_kernel, p.clock), []).append(e)
    return list(groups.values())


class _Eta:
    """Passes a session's progress on, with a line when the next run of the
    study starts: run k of n, its cell, and the time left at the pace of
    the runs so far."""

    def __init__(self, name: str, todo: list[Entry], progress):
        self.name, self.todo, self.progress = name, todo, progress
        self.current = 0
        self.t0 = time.monotonic()

    def __call__(self, event: Progress) -> None:
        k = (event.data.get("study") or {}).get("index")
        if k and k != self.current:
            self.current = k
            e = self.todo[k - 1]
            self.progress(Progress(f"study {self.name}: run {k} of {len(self.todo)}: "
                                   f"{_describe(e.cell.values)}, repetition {e.repetition}"
                                   f"{self._left(k)}", done=k - 1, total=len(self.todo),
                                   unit="runs"))
        self.progress(event)

    def _left(self, k: int) -> str:
        if k == 1:
            return ""
        per_run = (time.monotonic() - self.t0) / (k - 1)
        left = per_run * (len(self.todo) - k + 1)
        return f" (about {left / 60:.0f} min left)" if left >= 90 else \
            f" (about {left:.0f} s left)"
