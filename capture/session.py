"""capture's one entry: a session of runs. Parameters (or a study's plan of
runs), backend, kernel, out dir and progress in; run folders out. It
chooses the backend, checks once that the kernel offers the congestion
controls, and runs the repetitions on the host or in one micro-VM boot.

    session = capture(prepare(SessionRequest(params)), progress)
    session.run_dirs        # the folders the runs wrote (artefacts.run_folder)
"""
from __future__ import annotations

import contextlib
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from tcpvar.artefacts import run_folder as layout
from tcpvar.errors import UsageError
from tcpvar.progress import Progress

from . import aqm as aqms
from . import backend as backends
from . import owners
from .params import RunParams
from .runner import Run, tool_versions
from .testbed import new_tag


@dataclass
class PlannedRun:
    """One run of a session: its parameters and repetition, and for a
    study's run the study's name and the run's cell (pipelines/sweep.py)."""
    params: RunParams
    repetition: int = 1
    study: dict | None = None        # {"name", "cell", "index", "of"}


@dataclass
class SessionRequest:
    params: RunParams                # the runs' parameters (a plan's first run's)
    backend: str = "auto"
    kernel: str | None = None        # None: the host's (netns) or Debian's stock (vm)
    out_dir: Path = Path("runs")
    boot_timeout_s: float = 180.0
    plan: list[PlannedRun] | None = None     # None: params' repetitions

    def planned(self) -> list[PlannedRun]:
        if self.plan is not None:
            return self.plan
        return [PlannedRun(self.params, r) for r in range(1, self.params.repeat + 1)]


@dataclass
class Session:
    backend: str
    reason: str                       # why this backend, in one line
    run_dirs: list[Path] = field(default_factory=list)   # written (with a manifest)
    interrupted: bool = False         # Ctrl-C
    failure: Exception | None = None  # what ended the session early


def _out_folder(path) -> Path:
    """The folder the run folders go into, made before anything starts."""
    out_dir = Path(path).resolve()
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {path}: cannot be made ({exc.strerror})") from None
    if not os.access(out_dir, os.W_OK | os.X_OK):
        raise UsageError(f"--out {path}: cannot be written (permissions, or a read-only "
                         f"file system)")
    return out_dir


@dataclass
class Prepared:
    """A request that can be served: its runs, their folders and backend."""
    req: SessionRequest
    plan: list[PlannedRun]
    backend: str
    reason: str                       # why this backend, in one line
    tag: str = ""
    runs: list[dict] = field(default_factory=list)    # the guest's spec of each run


def prepare(req: SessionRequest) -> Prepared:
    """The plan and backend of a request, or the error that stops it before
    anything is made (not root, a missing tool, an unknown variant)."""
    plan = req.planned()
    chosen, reason = _backend(req, plan)
    tag = new_tag()
    out_dir = Path(req.out_dir).resolve()
    runs = []
    for i, p in enumerate(plan, 1):     # numbered through the session (-r1, -r2, ...)
        ccs = [f.cc for f in p.params.flow_plan()]
        runs.append({"dir": str(out_dir / layout.folder_name(p.params.mode, ccs, tag, i)),
                     "tag": f"{tag}{i}", "repetition": p.repetition,
                     "params": p.params.to_json(), "study": p.study})
    return Prepared(req, plan, chosen, reason, tag, runs)


def planned_dirs(prepared: Prepared) -> list[Path]:
    """The folders the session's runs will write (a stop file there ends them)."""
    return [Path(r["dir"]) for r in prepared.runs]


def capture(prepared: Prepared, progress) -> Session:
    """Run the session. The out folder is made first; a failure once runs
    have started is kept in Session.failure, so the caller can still store
    what they wrote."""
    req, plan, chosen, reason = prepared.req, prepared.plan, prepared.backend, prepared.reason
    out_dir = _out_folder(req.out_dir)
    progress(Progress(f"backend {chosen}: {reason}"))
    for r in owners.reap():
        progress(Progress(str(r)))
    session = Session(chosen, reason)
    tag, runs = prepared.tag, prepared.runs
    try:
        if chosen == "netns":
            _on_host(runs, progress)
        else:
            _in_vm(req, plan, runs, out_dir, tag, progress)
    except KeyboardInterrupt:
        session.interrupted = True
    except Exception as exc:    # kept: what the runs wrote is still worth storing
        session.failure = exc
    session.run_dirs = [Path(r["dir"]) for r in runs
                        if Path(r["dir"], layout.MANIFEST).exists()]
    return session


def check_variants(needed: list[str], offered: set[str] | None, kernel: str) -> None:
    """The one check that the kernel offers the congestion controls (None:
    unknown until it boots, as for a kernel given by path)."""
    missing = [c for c in needed if offered is not None and c not in offered]
    if missing:
        raise UsageError(f"unknown variant {missing[0]!r}: the {kernel} "
                         f"kernel offers {', '.join(sorted(offered))} (for another, boot a "
                         f"kernel that has it with --kernel PATH)")


def check_qdiscs(needed: list[str], offered: set[str] | None, kernel: str) -> None:
    """--aqm's qdiscs in the kernel (None: unknown until it boots)."""
    missing = [q for q in needed if offered is not None and q not in offered]
    if missing:
        raise UsageError(f"--aqm {missing[0]}: the {kernel} kernel has no such qdisc (of "
                         f"tcpvar's, it offers {', '.join(aqms.offered(offered))})")


def _backend(req: SessionRequest, plan: list[PlannedRun]) -> tuple[str, str]:
    """One backend for every run of the session: the micro-VM when any run
    needs it."""
    if len({p.params.clock for p in plan}) > 1:     # one boot, one clock
        raise UsageError("the runs of one session share one --clock")
    distinct = {json.dumps(p.params.to_json(), sort_keys=True): p.params for p in plan}
    choices = [backends.choose(req.backend, params, req.kernel)
               for params in distinct.values()]
    return next((c for c in choices if c[0] == "vm"), choices[0])


_PREPARING = threading.Lock()


def run_of(run: dict, backend: str, progress) -> Run:
    """The Run of one entry of a session's runs (on the host or in the guest)."""
    return Run(RunParams.from_json(run["params"]), Path(run["dir"]), run["tag"],
               run["repetition"], backend=backend, progress=progress, study=run.get("study"),
               clock=run.get("clock"), tools=run.get("tools"))


def _on_host(runs: list[dict], progress) -> None:
    for run in runs:
        manifest = run_of(run, "netns", progress).execute()
        if manifest["status"] == "interrupted":
            raise KeyboardInterrupt
        if manifest["status"] != "complete":
            break


def _in_vm(req: SessionRequest, plan: list[PlannedRun], runs: list[dict], out_dir: Path,
           tag: str, progress) -> None:
    from . import kernels, probe, vm

    patched = any(p.params.needs_patched_kernel for p in plan)
    # the guest runs the host's programs; asked here, as a guest on virtual
    # time waiting for them to load from the host would skip past a timeout
    spec = {"runs": runs, "path": [], "tools": tool_versions()}
    with _PREPARING:    # sessions side by side fetch and build into one cache
        kernel = kernels.resolve(req.kernel or ("patched" if patched else "stock"), progress)
        check_variants(sorted({c for p in plan for c in p.params.needed_ccs()}),
                       kernel.variants(), kernel.kind)
        check_qdiscs(sorted({p.params.aqm for p in plan if p.params.aqm}), kernel.qdiscs(),
                     kernel.kind)
        probe.prepare()     # the guest sees the host's files read-only: build before boot
        if any(p.params.ngwa_mode is not None for p in plan):
            from .kernel_build import patched_tc

            # Debian's tc with the ngwa qdisc, first on the guest's PATH
            spec["path"].append(str(patched_tc(build=True, progress=progress).parent))
    for run in runs:
        Path(run["dir"]).mkdir(parents=True, exist_ok=True)
    try:
        vm.run_session(kernel, spec, out_dir, tag, progress, req.boot_timeout_s,
                       plan[0].params.clock)
    finally:
        for run in runs:
            with contextlib.suppress(OSError):  # the folders of runs the guest never started
                Path(run["dir"]).rmdir()
            if Path(run["dir"]).is_dir():       # the trace the guest left to convert here
                # not over the session's own error: a trace that cannot be
                # converted now (a full disk) stays for tcpvar load to convert
                with contextlib.suppress(OSError):
                    probe.convert_pending(Path(run["dir"]))
