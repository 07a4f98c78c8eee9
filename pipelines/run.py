"""`tcpvar run`, all stages but presentation: capture a session of runs
(capture.session), store and summarise every run folder it wrote (the
load pipeline), and gather each run's report for the command to draw."""
from __future__ import annotations

import contextlib
import queue
import threading
from dataclasses import dataclass
from pathlib import Path

from tcpvar import safe_write
from tcpvar.artefacts.run_folder import FIGURES, REPORT, STOP_FILE
from tcpvar.capture.session import SessionRequest, capture, planned_dirs, prepare
from tcpvar.errors import TcpvarError
from tcpvar.pipelines.load import STORE_WAIT_S, note_report, store_written
from tcpvar.pipelines.report import run_outputs
from tcpvar.progress import Progress
from tcpvar.store import Store
from tcpvar.store.db import check_writable


@dataclass
class RunOutcome:
    backend: str
    reason: str
    summaries: list[dict]
    interrupted: bool


def execute(db_path: str, req: SessionRequest, progress, draw=None) -> RunOutcome:
    """Capture, then store and summarise what the runs wrote, even when the
    session ended in a failure. The store is opened once the runs are done
    (a user may query it while the flows run); one that cannot be written
    fails before anything starts, as does a request that cannot be served.
    @draw(name, sections, path), given by the command, draws each run's
    figures and report.html (report/ is presentation: a pipeline hands it
    data); without it the runs get none."""
    prepared = prepare(req)
    check_writable(db_path)
    return _stored(db_path, capture(prepared, progress), progress, draw)


def execute_side_by_side(db_path: str, reqs: list[SessionRequest], progress,
                         draw=None) -> list[RunOutcome]:
    """Sessions at once, each in a thread of its own (a micro-VM each),
    stored one after another as they end: the store has one writer. Ctrl-C
    asks every session's runs to stop (their stop files), so each keeps and
    stores what it captured. The outcomes in the order of @reqs."""
    prepared = [prepare(r) for r in reqs]
    check_writable(db_path)
    ended: queue.Queue = queue.Queue()
    shared = _Serialised(progress)

    def one(i: int, p) -> None:
        try:
            ended.put((i, capture(p, shared)))
        except BaseException as exc:    # refused before its runs started: the others go on
            ended.put((i, exc))

    workers = [threading.Thread(target=one, args=(i, p), daemon=True)
               for i, p in enumerate(prepared)]
    for w in workers:
        w.start()
    outcomes: list[RunOutcome | None] = [None] * len(reqs)
    interrupted, failure = False, None
    for _ in workers:
        while True:
            try:
                i, session = ended.get(timeout=0.5)
                break
            except queue.Empty:
                continue
            except KeyboardInterrupt:
                interrupted = True
                _stop_all(prepared)
        try:
            if isinstance(session, BaseException):
                raise session
            outcomes[i] = _stored(db_path, session, shared, draw)
        except TcpvarError as exc:      # one session's loss is not the others'
            failure = failure or exc
    if failure is not None:
        raise failure
    for o in outcomes:
        o.interrupted = o.interrupted or interrupted
    return outcomes


def _stop_all(prepared) -> None:
    """The stop file in every run folder the sessions made (the runs, and
    the micro-VM's guest before each run, look for it)."""
    for p in prepared:
        for run_dir in planned_dirs(p):
            if run_dir.is_dir():
                with contextlib.suppress(OSError):
                    (run_dir / STOP_FILE).touch()


class _Serialised:
    """One reporter for several threads: one event at a time."""

    def __init__(self, progress):
        self.progress, self.lock = progress, threading.Lock()

    def __call__(self, event) -> None:
        with self.lock:
            self.progress(event)


def _stored(db_path: str, session, progress, draw) -> RunOutcome:
    written = [str(d) for d in session.run_dirs]
    summaries = [s.summary for s in store_written(db_path, written, session.failure,
                                                    progress)]
    if draw is not None:
        _write_reports(db_path, summaries, progress, draw)
    interrupted = session.interrupted or any(s["status"] == "interrupted" for s in summaries)
    return RunOutcome(session.backend, session.reason, summaries, interrupted)


def _write_reports(db_path: str, summaries: list[dict], progress, draw) -> None:
    """Each run's figures (figures/KIND.png) and report.html into its folder,
    drawn by @draw; the summary gets the report's path. A run without a
    capture to draw gets none, and nothing else changes."""
    with Store(db_path, wait_s=STORE_WAIT_S, progress=progress) as store:
        for s in summaries:
            run_dir = Path(s["dir"])
            progress(Progress(f"drawing the figures of {run_dir.name}"))
            try:
                parts = run_outputs(store, s["run_id"], run_dir)
                safe_write.inner_folder(run_dir, FIGURES)
            except TcpvarError:
                continue
            draw(s["name"], parts, run_dir / REPORT)
            note_report(s)
