"""`tcpvar load` and the storing every pipeline that brings run folders
into the store shares (run, sweep, plot): load a run folder, build its
series, and summarise it; a folder the store holds already is summarised
from there."""
from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

import duckdb

from tcpvar.analyzers import fidelity
from tcpvar.analyzers.queueing import build_queue_delays
from tcpvar.analyzers.runs import run_summary
from tcpvar.analyzers.series import build_run_series
from tcpvar.analyzers.shortflows import build_fct
from tcpvar.artefacts.run_folder import REPORT, read_manifest
from tcpvar.capture import probe
from tcpvar.errors import InputError, StoreError, TcpvarError
from tcpvar.ingest.run import load_run, stored_run
from tcpvar.progress import Progress
from tcpvar.store import Store

SERIES_INTERVAL_MS = 1000.0      # iperf3 reports every second: the pcap series matches

# runs that end together (two tcpvar run into one --db) store one after the
# other: each waits this long for the other to let go of the store
STORE_WAIT_S = 600


@dataclass
class StoredRun:
    """A run folder given to store_runs: its summary, or why there is none."""
    dir: Path
    summary: dict | None = None
    already_stored: bool = False        # the store held it before: summarised from there
    error: TcpvarError | None = None


def note_report(summary: dict) -> None:
    """The summary names the run folder's report, when it has one."""
    path = Path(summary["dir"]) / REPORT
    if path.is_file():
        summary["report"] = str(path)


def store_runs(db_path: str, run_dirs, progress) -> list[StoredRun]:
    """Load run folders into the store, each once: a folder the store holds
    already (by its absolute path) is summarised from there. A folder that
    is not a run folder, or fails to load, gets its error and the others
    still load. Raises StoreError when the store cannot be opened; it is not
    opened (nor created) when no folder is a run folder."""
    results = [StoredRun(Path(d).resolve()) for d in run_dirs]
    for r in results:
        try:
            read_manifest(r.dir)
        except InputError as exc:
            r.error = exc
    todo = [r for r in results if r.error is None]
    if todo:
        with Store(db_path, wait_s=STORE_WAIT_S, progress=progress) as store:
            for r in todo:
                _store_one(store, r, progress)
    return results


def store_into(store, run_dir: Path, progress) -> int:
    """Load a run folder the store does not hold yet, with its series; its run_id."""
    progress(Progress(f"loading {run_dir.name} into the store"))
    probe.convert_pending(run_dir)      # a micro-VM's trace its killed tcpvar left raw
    run_id = load_run(store, run_dir)
    with store.transaction() as con:
        build_run_series(con, run_id, SERIES_INTERVAL_MS)
        build_queue_delays(con, run_id)
        build_fct(con, run_id)
    check_fidelity(store, run_id, progress)
    return run_id


def check_fidelity(store, run_id: int, progress) -> None:
    """The run's fidelity check, into the store (a run stored before the
    check gets it when its folder is loaded again)."""
    progress(Progress(f"checking the fidelity of run {run_id}"))
    with store.transaction() as con:
        fidelity.store(con, fidelity.check(con, run_id))


def _store_one(store, r: StoredRun, progress) -> None:
    try:
        run_id = stored_run(store.con, r.dir)
        r.already_stored = run_id is not None
        if run_id is None:
            run_id = store_into(store, r.dir, progress)
        elif fidelity.stored(store.con, run_id) is None:
            check_fidelity(store, run_id, progress)
        r.summary = run_summary(store.con, run_id)
        note_report(r.summary)
    except TcpvarError as exc:
        r.error = exc
    except duckdb.Error as exc:
        r.error = StoreError(f"{r.dir}: cannot be stored: {' '.join(str(exc).split())}")


def store_written(db_path: str, written: list[str], failure, progress) -> list[StoredRun]:
    """Store what the runs wrote, even when they ended in @failure. When the
    runs or the storing failed, raise that error, its message extended by
    the folders that are stored and those to load by hand."""
    if failure is not None and not written:
        raise failure
    try:
        stored = store_runs(db_path, written, progress)
    except Exception as exc:
        raise _extend(failure or exc, _unstored(written, exc if failure else None)) from None
    good = [s for s in stored if s.error is None]
    bad = [s for s in stored if s.error is not None]
    if failure is None and not bad:
        return stored
    parts = [_stored(good)] if good else []
    if bad:
        parts.append(_unstored([str(s.dir) for s in bad], bad[0].error if failure else None))
    raise _extend(failure or bad[0].error, "; ".join(parts))


def _extend(exc: BaseException, text: str) -> BaseException:
    """The same error (same exit status), its one-line message followed by @text."""
    exc.args = (f"{exc}; {text}",)
    return exc


def _stored(stored: list[StoredRun]) -> str:
    def status(s: StoredRun) -> str:
        return "incomplete" if s.summary["status"] == "running" else s.summary["status"]

    return "what the runs wrote is stored: " + ", ".join(
        f"run {s.summary['run_id']} from {s.dir} ({status(s)})" for s in stored)


def _unstored(dirs: list[str], why: Exception | None) -> str:
    """Which folders to load by hand, and the command that does it."""
    one = len(dirs) == 1
    state = "complete" if _all_complete(dirs) else "kept"
    because = f" ({why})" if why else ""
    return (f"the run folder{'' if one else 's'} {'is' if one else 'are'} {state} but "
            f"{'was' if one else 'were'} not stored{because}: {', '.join(dirs)}; "
            f"load {'it' if one else 'them'} with "
            f"`tcpvar load {' '.join(shlex.quote(d) for d in dirs)}`")


def _all_complete(dirs: list[str]) -> bool:
    try:
        return all(read_manifest(Path(d)).get("status") == "complete" for d in dirs)
    except InputError:
        return False
