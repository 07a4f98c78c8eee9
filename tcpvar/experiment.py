"""`tcpvar run`, all stages but presentation: choose the backend, run the
repetitions (on the host, or in one micro-VM boot), ingest every run folder
into the store and summarise each run; and `tcpvar load`, the last two
stages for run folders written before."""
from __future__ import annotations

import contextlib
import shlex
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb

from tcpvar.analyzers.runs import run_summary
from tcpvar.capture import backend as backends
from tcpvar.capture.params import RunParams
from tcpvar.capture.runner import Experiment
from tcpvar.capture.testbed import new_tag
from tcpvar.errors import InputError, StoreError, TcpvarError, UsageError
from tcpvar.ingest.run import load_run, read_manifest, stored_run
from tcpvar.store import Store


@dataclass
class RunRequest:
    params: RunParams
    backend: str = "auto"
    kernel: str | None = None        # None: the host's (netns) or Debian's stock (vm)
    out_dir: Path = Path("runs")
    boot_timeout_s: float = 180.0


@dataclass
class RunOutcome:
    backend: str
    reason: str
    summaries: list[dict]
    interrupted: bool


@dataclass
class StoredRun:
    """A run folder given to store_runs: its summary, or why there is none."""
    dir: Path
    summary: dict | None = None
    already_stored: bool = False        # the store held it before: summarised from there
    error: TcpvarError | None = None


def folder_name(params: RunParams, tag: str, repetition: int) -> str:
    ccs = list(dict.fromkeys(f.cc for f in params.flow_plan()))
    ccs = "-".join(ccs) if len(ccs) <= 3 else f"{len(ccs)}variants"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{params.mode}-{ccs}-{tag}-r{repetition}"


def execute(db_path: str, req: RunRequest, progress) -> RunOutcome:
    """Check, run, store. The store is opened once the run can go ahead, and
    stays closed while the flows run (a user may query it meanwhile)."""
    params = req.params
    backend, reason = backends.choose(req.backend, params, req.kernel)
    progress({"phase": f"backend {backend}: {reason}"})
    out_dir = Path(req.out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    tag = new_tag()
    runs = [{"dir": str(out_dir / folder_name(params, tag, r)), "tag": f"{tag}{r}",
             "repetition": r} for r in range(1, params.repeat + 1)]
    interrupted, failure = False, None
    try:
        if backend == "netns":
            _on_host(params, runs, progress)
        else:
            _in_vm(req, runs, out_dir, tag, progress)
    except KeyboardInterrupt:
        interrupted = True
    except Exception as exc:    # raised below, once what the runs wrote is stored
        failure = exc
    written = [r["dir"] for r in runs if Path(r["dir"], "manifest.json").exists()]
    summaries = [s.summary for s in _store_written(db_path, written, failure, progress)]
    interrupted |= any(s["status"] == "interrupted" for s in summaries)
    return RunOutcome(backend, reason, summaries, interrupted)


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
        with Store(db_path) as store:
            for r in todo:
                _store_one(store, r, progress)
    return results


def _store_one(store, r: StoredRun, progress) -> None:
    try:
        run_id = stored_run(store.con, r.dir)
        r.already_stored = run_id is not None
        if run_id is None:
            progress({"phase": f"loading {r.dir.name} into the store"})
            run_id = load_run(store, r.dir)
        r.summary = run_summary(store.con, run_id)
    except TcpvarError as exc:
        r.error = exc
    except duckdb.Error as exc:
        r.error = StoreError(f"{r.dir}: cannot be stored: {' '.join(str(exc).split())}")


def _store_written(db_path: str, written: list[str], failure, progress) -> list[StoredRun]:
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


def _on_host(params: RunParams, runs: list[dict], progress) -> None:
    for run in runs:
        manifest = Experiment(params, Path(run["dir"]), run["tag"], run["repetition"],
                              backend="netns", progress=progress).execute()
        if manifest["status"] == "interrupted":
            raise KeyboardInterrupt
        if manifest["status"] != "complete":
            break


def _in_vm(req: RunRequest, runs: list[dict], out_dir: Path, tag: str, progress) -> None:
    from tcpvar.capture import kernels, vm

    params = req.params
    kernel = kernels.resolve(req.kernel or ("patched" if params.needs_patched_kernel
                                            else "stock"), progress)
    offered = kernel.variants()
    missing = [c for c in params.needed_ccs() if offered is not None and c not in offered]
    if missing:
        raise UsageError(f"unknown congestion control {missing[0]!r}: the {kernel.kind} "
                         f"kernel offers {', '.join(sorted(offered))} (for another, boot a "
                         f"kernel that has it with --kernel PATH)")
    from tcpvar.capture import probe

    probe.prepare()     # the guest sees the host's files read-only: build before boot
    for run in runs:
        Path(run["dir"]).mkdir(parents=True, exist_ok=True)
    spec = {"params": params.to_json(), "runs": runs, "path": []}
    if params.ngwa_mode is not None:
        from tcpvar.capture.kernel_build import patched_tc

        # Debian's tc with the ngwa qdisc, first on the guest's PATH
        spec["path"].append(str(patched_tc(build=True, progress=progress).parent))
    try:
        vm.run_session(kernel, spec, out_dir, tag, progress, req.boot_timeout_s)
    finally:
        for run in runs:        # the folders of runs the guest never started
            with contextlib.suppress(OSError):
                Path(run["dir"]).rmdir()
