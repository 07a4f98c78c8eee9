"""Building tcpvar's patched kernel and the tc that configures its qdisc.

kernel-patches/build.sh does the work: it unpacks the pinned
linux-source-6.1, applies the patch series with git am, merges the
configuration fragment and builds a bzImage (target `kernel`; `kernel-debug`
adds the sanitizers of debug.config: the kernel the tests run); with `tc` it
fetches Debian's iproute2 source, applies the tc patch and builds tc. Each is
cached by the hash of what goes into it, so asking again costs nothing. This
module runs it, reports its stages, and turns a failure into one line.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from tcpvar.errors import KernelBuildError
from tcpvar.progress import Progress, Reporter, ignore
from tcpvar.resources import cache_dir, source_dir

CACHED_MISSING = 2          # build.sh --cached: not built yet
TARGETS = ("kernel", "kernel-debug", "tc")


def patches_dir() -> Path:
    """kernel-patches/ of this tcpvar (or $TCPVAR_KERNEL_PATCHES)."""
    where = Path(os.environ.get("TCPVAR_KERNEL_PATCHES") or source_dir("kernel-patches"))
    if not (where / "build.sh").is_file():
        raise KernelBuildError(f"{where}/build.sh not found: reinstall tcpvar, or set "
                               f"TCPVAR_KERNEL_PATCHES to a kernel-patches/ folder")
    return where


def _script() -> list[str]:
    return ["sh", str(patches_dir() / "build.sh")]


def _env() -> dict[str, str]:
    """build.sh caches where the rest of tcpvar does (resources.cache_dir);
    its own default is for running it by hand."""
    return {**os.environ, "TCPVAR_CACHE": str(cache_dir())}


def cached(target: str = "kernel") -> Path | None:
    """The built bzImage (target 'kernel' or 'kernel-debug') or tc ('tc') if
    it is in the cache."""
    try:
        done = subprocess.run([*_script(), target, "--cached"], capture_output=True,
                              text=True, check=False, timeout=60, env=_env())
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise KernelBuildError(f"cannot run kernel-patches/build.sh: {exc}") from None
    if done.returncode == CACHED_MISSING:
        return None
    if done.returncode != 0:
        raise KernelBuildError(_last_error(done.stderr, f"build.sh {target} --cached failed"))
    return _result_path(done.stdout, target)


def run_build(target: str = "kernel", progress: Reporter | None = None,
              jobs: int | None = None) -> Path:
    """Build @target (one of TARGETS) unless cached; return the result's path.

    @progress gets each stage of build.sh ("unpacking ...", "building ...")
    as a phase and, about once a second while make runs, the last line of
    its log as the event's `line`.
    """
    report = progress or ignore
    if target not in TARGETS:
        raise KernelBuildError(f"unknown build target {target!r} ({', '.join(TARGETS)})")
    env = _env()
    if jobs is not None:
        if jobs < 1:
            raise KernelBuildError(f"--jobs {jobs}: must be at least 1")
        env["JOBS"] = str(jobs)
    try:
        # a group of its own: an interrupt ends make and its compilers too,
        # not only build.sh
        proc = subprocess.Popen([*_script(), target], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env,
                                start_new_session=True)
    except OSError as exc:
        raise KernelBuildError(f"cannot run kernel-patches/build.sh: {exc}") from None

    stderr: list[str] = []
    reader = threading.Thread(target=lambda: stderr.extend(proc.stderr), daemon=True)
    reader.start()
    log: list[Path] = []
    stage = ["starting"]
    stop = threading.Event()
    tailer = threading.Thread(target=_tail, args=(log, stage, report, stop), daemon=True)
    tailer.start()
    out: list[str] = []
    try:
        for line in proc.stdout:
            out.append(line)
            if line.startswith("== "):
                text = line[3:].strip()
                if ", log: " in text:
                    text, _, path = text.partition(", log: ")
                    log.append(Path(path))
                stage[0] = text
                report(Progress(text))
        status = proc.wait()
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()          # build.sh removes its work tree first
        raise
    finally:
        stop.set()
        reader.join(timeout=5)
    if status != 0:
        raise KernelBuildError(_last_error("".join(stderr), f"build.sh {target} failed "
                                                            f"(exit status {status})"))
    return _result_path("".join(out), target)


def _tail(log: list[Path], stage: list[str], report: Reporter,
          stop: threading.Event) -> None:
    """Report the last line of make's log until stop is set."""
    last = ""
    while not stop.wait(1.0):
        if not log:
            continue
        try:
            with open(log[-1], "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - 4096))
                lines = f.read().decode(errors="replace").splitlines()
        except OSError:
            continue
        line = lines[-1].strip() if lines else ""
        if line and line != last:
            last = line
            report(Progress(stage[0], line=line))


def _last_error(stderr: str, fallback: str) -> str:
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if ln.startswith("error: "):
            return "kernel build: " + ln[len("error: "):]
    return fallback + (f": {lines[-1]}" if lines else "")


def _result_path(stdout: str, target: str) -> Path:
    lines = [ln.strip() for ln in stdout.splitlines() if ln.strip()]
    path = Path(lines[-1]) if lines else None
    if path is None or not path.is_file():
        raise KernelBuildError(f"build.sh {target} did not name a built file")
    return path


def patched_kernel(build: bool = True, progress=None, debug: bool = False) -> Path:
    """The bzImage of the patched kernel (@debug: with the sanitizers), built
    first if missing and @build (its stages reported to @progress, as
    `tcpvar run` phases).

    Without @build, a missing image is an error telling to run
    `tcpvar kernel build`.
    """
    return _built("kernel-debug" if debug else "kernel", build, progress)


def patched_tc(build: bool = True, progress=None) -> Path:
    """The tc binary that knows the ngwa qdisc, built first if missing and @build."""
    return _built("tc", build, progress)


def _built(target: str, build: bool, progress) -> Path:
    found = cached(target)
    if found is not None:
        return found
    if not build:
        how = "tcpvar kernel build --debug" if target == "kernel-debug" else \
            "tcpvar kernel build"
        raise KernelBuildError(f"the patched {target} is not built yet: run `{how}`")

    def relabel(event: Progress) -> None:
        if not event.line:
            progress(Progress(f"building the patched {target} (once; minutes): {event.phase}"))

    return run_build(target, relabel if progress else None)


def elapsed(start: float) -> str:
    s = int(time.monotonic() - start)
    return f"{s // 60}:{s % 60:02d}"
