"""Offline analysis of captures, all stages but presentation: ingest each
file into the store, build its series, and gather the results; several
files at once, one worker thread per file."""
from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Iterator

from tcpvar.analyzers import fairness as fairness_mod
from tcpvar.analyzers.connections import capture_counts, connections
from tcpvar.analyzers.series import build_throughput, throughput_rows
from tcpvar.errors import ExitStatus, TcpvarError
from tcpvar.ingest.capture import Scan, ScanOptions, ingest, start_scan
from tcpvar.progress import Progress, Reporter, ignore
from tcpvar.store.db import Opening


@dataclass
class AnalyzeOptions:
    scan: ScanOptions = field(default_factory=ScanOptions)
    interval_ms: float = 100.0
    force: bool = False
    fairness: bool = False
    conns: list[int] | None = None          # connections for Jain's index (default: bulk)
    pair: tuple[int, int] | None = None     # (variant, reference) for friendliness
    brief: bool = False     # read back only what a summary table shows (not with fairness)
    # read the connections back into the document; False: the caller reads
    # them from the store while it is open (shown(), connection_batches())
    read_back: bool = True

    def __post_init__(self):
        # the scan sums the throughput series at this interval as it reads
        if self.scan.packets:
            self.scan = replace(self.scan, series_ms=self.interval_ms)


def analyze_capture(store, path: str, options: AnalyzeOptions, progress=None,
                    stop: threading.Event | None = None, scan: Scan | None = None) -> dict:
    """One capture's results as a JSON-ready dict; @scan, its reading
    started before (start_reading)."""
    res = ingest(store, path, options.scan, force=options.force, progress=progress, stop=stop,
                 scan=scan, series=throughput_rows)
    with store.transaction() as con:    # a new capture has its series already (ingest)
        has_series = build_throughput(con, res.capture_id, options.interval_ms)
    con = store.con
    cap = capture_counts(con, res.capture_id)
    doc = {
        "path": res.path,
        "capture_id": res.capture_id,
        "reused": res.reused,
        "link_type": cap[0],
        "frames": cap[1],
        "tcp_packets": cap[2],
        "non_tcp_frames": cap[3],
        "ip_fragments": cap[4],
        "too_short": cap[5],
        "malformed": cap[6],
        "duration_s": cap[7],
        "truncated": res.truncated,
        "warning": cap[8],             # the scan's, and the series' (throughput_rows)
        "interval_ms": options.interval_ms if has_series else None,
        "connections": connections(con, res.capture_id,
                                   options.brief and not (options.fairness or options.pair))
        if options.read_back or options.fairness or options.pair else None,
    }
    if options.fairness or options.pair:
        doc["fairness"] = fairness_mod.fairness(con, res.capture_id, doc["connections"],
                                                options.conns, options.pair)
    return doc


@dataclass
class Outcome:
    """What became of one of the files given: its results or its error."""
    path: str
    doc: dict | None = None
    error: TcpvarError | None = None

    @property
    def warnings(self) -> list[str]:
        """The capture's and its fairness's warnings."""
        if self.doc is None:
            return []
        return [w for w in [self.doc["warning"],
                            *self.doc.get("fairness", {}).get("warnings", [])] if w]


def workers(jobs: int, paths: list[str]) -> int:
    """Worker threads for @paths: @jobs, or one per core when 0, at most
    one per file."""
    return max(1, min(jobs or len(os.sched_getaffinity(0)), len({_key(p) for p in paths})))


def start_reading(paths: list[str], options: AnalyzeOptions, jobs: int) -> Scan | None:
    """With one worker, the first capture's scan, started while the store
    is opened (store.db.Opening); analyze_captures() takes it over."""
    return start_scan(paths[0], options.scan) if jobs <= 1 else None


def analyze_captures(store, paths: list[str], options: AnalyzeOptions, jobs: int,
                     progress: Reporter | None = None,
                     first: Scan | None = None) -> Iterator[Outcome]:
    """Each capture's outcome, in the order given, analysing up to @jobs
    files at once. Each worker thread has its own connection to the store:
    the native scan and DuckDB's loading release the GIL, and DuckDB lets a
    process's connections append at once. A file named twice is read once.
    Ctrl-C stops every worker between two batches; each removes its
    unfinished capture, and the captures already complete stay. @first:
    the first capture's scan (start_reading)."""
    meter = _Meter(paths, progress or ignore)
    if jobs <= 1:
        for i, path in enumerate(paths):
            run = partial(analyze_capture, store, path, options, scan=first if i == 0 else None)
            yield _outcome(path, partial(meter.run, path, run))
        return
    from concurrent.futures import ThreadPoolExecutor  # only for several files at once

    stop = threading.Event()
    with ThreadPoolExecutor(jobs, thread_name_prefix="tcpvar-analyze") as pool:
        futures = {}
        for path in paths:
            if _key(path) not in futures:
                futures[_key(path)] = pool.submit(
                    meter.run, path, partial(_worker, store, path, options, stop))
        try:
            for path in paths:
                yield _outcome(path, partial(_result, futures[_key(path)]))
        finally:                # Ctrl-C, or the caller stopped reading
            stop.set()
            for future in futures.values():
                future.cancel()


def _worker(store, path: str, options: AnalyzeOptions, stop: threading.Event,
            progress: Reporter) -> dict:
    if stop.is_set():
        raise KeyboardInterrupt
    view = store.worker()
    try:
        return analyze_capture(view, path, options, progress, stop)
    except KeyboardInterrupt:   # a signal held until this thread's transaction ended
        stop.set()
        raise
    finally:
        view.close()


def _result(future):
    """The future's result, waiting in short steps: a signal may reach any
    of the process's threads, and the main thread runs its handler only once
    it wakes."""
    from concurrent.futures import TimeoutError as FutureTimeout

    while True:
        try:
            return future.result(timeout=0.1)
        except FutureTimeout:
            continue


def _outcome(path: str, result) -> Outcome:
    try:
        return Outcome(path, doc=result())
    except TcpvarError as exc:
        return Outcome(path, error=exc)


def _key(path: str) -> str:
    return os.path.realpath(path)


class _Meter:
    """One progress line for all the files: bytes read of their total."""

    def __init__(self, paths: list[str], progress: Reporter):
        self.sizes = {}
        for path in paths:
            try:
                self.sizes[_key(path)] = Path(path).stat().st_size
            except OSError:         # reported by the file's own analysis
                self.sizes[_key(path)] = 0
        self.done = dict.fromkeys(self.sizes, 0)
        self.phase = f"reading {paths[0]}" if len(self.sizes) == 1 else \
            f"reading {len(self.sizes)} captures"
        self.progress = progress
        self.lock = threading.Lock()

    def run(self, path: str, work):
        """@work(reporter) for @path; the file counts as read once it returns."""
        key = _key(path)
        doc = work(lambda event: self._moved(key, event.done or 0))
        self._moved(key, self.sizes[key])
        return doc

    def _moved(self, key: str, done: float) -> None:
        with self.lock:
            self.done[key] = done
            done = sum(self.done.values())
        self.progress(Progress(self.phase, done, sum(self.sizes.values()), "bytes"))


def summary(outcomes: list[Outcome], seconds: float, workers: int) -> dict:
    """How fast this call read its captures: packets (frames) per second of
    wall time over all workers; captures the store already had don't count."""
    read = {o.doc["capture_id"]: o.doc for o in outcomes if o.doc and not o.doc["reused"]}
    packets = sum(d["frames"] for d in read.values())
    return {"captures_read": len(read), "packets": packets, "seconds": round(seconds, 3),
            "packets_per_s": round(packets / seconds) if seconds > 0 else None,
            "workers": workers}


@dataclass
class Analysis:
    """What one `tcpvar analyze` found: each file's outcome in the order given."""
    outcomes: list[Outcome]
    summary: dict                   # summary(): how fast the captures were read
    workers: int

    @property
    def captures(self) -> list[dict]:
        return [o.doc for o in self.outcomes if o.doc is not None]

    @property
    def status(self) -> ExitStatus:
        """The first failed file's exit status, else OK."""
        return next((o.error.status for o in self.outcomes if o.error), ExitStatus.OK)

    def to_json(self) -> dict:
        """`analyze --json` (docs/analyze.md): the speed, each capture, and
        every connection with the path of its capture."""
        return {"summary": self.summary,
                "captures": [{k: v for k, v in c.items() if k != "connections"}
                             for c in self.captures],
                "connections": [dict(conn, capture=c["path"]) for c in self.captures
                                for conn in c["connections"]]}


def analyze_files(opening: Opening, paths: list[str], options: AnalyzeOptions, jobs: int = 0,
                  progress: Reporter | None = None, shown=None, plot_dir: str | None = None,
                  draw=None) -> Analysis:
    """`tcpvar analyze`: @paths into the store @opening opens (the caller
    closes it), @jobs at once (0: one per core). A single file's error is
    raised: it is the command's error. Of several, each failed file is its
    outcome's error and the others go on. @shown(outcome, store), given by
    the command, sees each outcome as it completes, with the store open.
    With @plot_dir, every figure kind of each capture (with its file under
    @plot_dir) is handed to @draw(figure), while the store is open."""
    paths = list(paths)
    n = workers(jobs, paths)
    outcomes: list[Outcome] = []
    taken: set[str] = set()
    start = time.monotonic()
    first = start_reading(paths, options, n)          # while the store opens
    with contextlib.closing(first) if first else contextlib.nullcontext():
        store = opening.store()
        for outcome in analyze_captures(store, paths, options, n, progress, first):
            if outcome.error and len(paths) == 1:
                raise outcome.error
            outcomes.append(outcome)
            if shown is not None:
                shown(outcome, store)
            if outcome.doc is not None and plot_dir:
                _figures(store, outcome.doc, Path(plot_dir), taken, draw)
    return Analysis(outcomes, summary(outcomes, time.monotonic() - start, n), n)


def _figures(store, doc: dict, plot_dir: Path, taken: set[str], draw) -> None:
    from tcpvar.pipelines.plot import capture_figures

    for fig in capture_figures(store, doc["capture_id"], Path(doc["path"]), plot_dir, taken):
        draw(fig)
