"""Recording with the eBPF hook hooks/tcp_probe_ext on stock kernels: the
loader attaches to the stock tracepoint and writes the CSV itself."""
from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from pathlib import Path

from tcpvar.capture.probe.recorder import ProbeStats, Recorder
from tcpvar.errors import ProbeError

READY_TIMEOUT_S = 60        # loading under TCG emulation takes seconds
STOP_TIMEOUT_S = 30


class BpfRecorder(Recorder):
    """hooks/tcp_probe_ext: the loader writes the CSV itself."""

    source = "bpf"

    def __init__(self, *args, tool: Path, attach: str = "auto", **kw):
        super().__init__(*args, **kw)
        self.tool = Path(tool)
        self.attach = attach
        self.proc: subprocess.Popen | None = None
        self.ready: dict = {}
        self._err_lines: list[str] = []
        self._reader: threading.Thread | None = None

    def argv(self, *extra: str) -> list[str]:
        args = [str(self.tool), "--attach", self.attach]
        for p in self.ports:
            args += ["--port", str(p)]
        for a in self.addrs:
            args += ["--addr", a]
        if self.cookie:
            args += ["--cookie", str(self.cookie)]
        return args + list(extra)

    def check(self) -> dict:
        """Load and attach once without recording: can this kernel run it?"""
        try:
            res = subprocess.run(self.argv("--check"), capture_output=True, text=True,
                                 timeout=READY_TIMEOUT_S)
        except (OSError, subprocess.SubprocessError) as exc:
            raise ProbeError(f"the eBPF hook does not run: {exc}") from None
        if res.returncode != 0:
            raise ProbeError(_tool_error(res.stderr, res.returncode))
        return json.loads(res.stdout)

    def start(self) -> None:
        if self.started:
            return
        self.out_dir.mkdir(parents=True, exist_ok=True)
        try:
            self.proc = subprocess.Popen(self.argv("--output", str(self.csv_path)),
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.PIPE, text=True,
                                         start_new_session=True)
        except OSError as exc:
            raise ProbeError(f"cannot run the eBPF hook {self.tool}: {exc.strerror}") from None
        ready = threading.Event()

        def read_stderr():
            for line in self.proc.stderr:
                line = line.rstrip("\n")
                if line.startswith("READY "):
                    self.ready = json.loads(line[6:])
                    ready.set()
                else:
                    self._err_lines.append(line)
            ready.set()

        self._reader = threading.Thread(target=read_stderr, daemon=True)
        self._reader.start()
        if not ready.wait(READY_TIMEOUT_S) or not self.ready:
            self._kill()
            raise ProbeError(_tool_error("\n".join(self._err_lines), self.proc.returncode))
        self.started_ns = time.time_ns()
        self.started = True

    def _kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
        if self.proc:
            self.proc.wait()
        if self._reader:
            self._reader.join(5)

    def stop(self) -> ProbeStats:
        if self.stats is not None:
            return self.stats
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._kill()
        self._reader.join(5)
        self.stopped_ns = time.time_ns()
        self.started = False
        stats = next((json.loads(ln[6:]) for ln in self._err_lines if ln.startswith("STATS ")),
                     None)
        if stats is None:
            raise ProbeError(_tool_error("\n".join(self._err_lines), self.proc.returncode))
        detail = {k: v for k, v in stats.items() if k not in ("events", "lost")}
        detail["offset_ns"] = self.ready.get("offset_ns")
        self.stats = ProbeStats("bpf", int(stats["events"]), int(stats["lost"]), detail)
        self._write_json(self.stats)
        return self.stats


def _tool_error(stderr: str, status) -> str:
    lines = [ln for ln in (stderr or "").splitlines() if ln.strip()]
    errs = [ln for ln in lines if "error:" in ln]
    msg = (errs or lines or [f"exited with status {status}"])[-1]
    msg = msg.split("error: ", 1)[-1] if "error: " in msg else msg
    return f"the eBPF hook failed: {msg}"
