"""`tcpvar run`, all stages but presentation: choose the backend, run the
repetitions (on the host, or in one micro-VM boot), ingest every run folder
into the store and summarise each run."""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path

from tcpvar.analyzers.runs import run_summary
from tcpvar.capture import backend as backends
from tcpvar.capture.params import RunParams
from tcpvar.capture.runner import Experiment
from tcpvar.capture.topology import new_tag
from tcpvar.errors import UsageError
from tcpvar.ingest.run import load_run, read_manifest
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
    interrupted = False
    try:
        if backend == "netns":
            _on_host(params, runs, progress)
        else:
            _in_vm(req, runs, out_dir, tag, progress)
    except KeyboardInterrupt:
        interrupted = True
    summaries = []
    with Store(db_path) as store:
        for run in runs:
            run_dir = Path(run["dir"])
            if not (run_dir / "manifest.json").exists():
                continue
            interrupted |= read_manifest(run_dir).get("status") == "interrupted"
            progress({"phase": f"loading {run_dir.name} into the store"})
            run_id = load_run(store, run_dir)
            summaries.append(run_summary(store.con, run_id))
    return RunOutcome(backend, reason, summaries, interrupted)


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
