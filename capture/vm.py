"""The vm backend: boot a kernel in a QEMU micro-VM through virtme-ng over
a read-only snapshot of the host's filesystem, with the output folder
writable, and run the session's experiments there (capture/guest.py).
KVM is used when it boots a guest here, TCG otherwise; the answer is
remembered in the cache."""
from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tcpvar.errors import TestbedError, VmError

from .kernels import Kernel, cache_dir
from .runner import STOP_FILE

VM_CPUS = 2
VM_MEMORY = "2G"
KVM_TRIAL_S = 45          # a KVM boot that says nothing by then is taken as not working
SILENCE_S = 90            # a running guest reports every second; this long without a word is a hang


def need_vm_tools() -> None:
    for tool, how in (("vng", "pip install virtme-ng"),
                      ("qemu-system-x86_64", "apt-get install qemu-system-x86")):
        if shutil.which(tool) is None:
            raise VmError(f"the vm backend needs {tool} ({how}, or run ./bootstrap.sh)")


def _kvm_state_file() -> Path:
    return cache_dir() / "kvm.json"


def kvm_state() -> bool | None:
    """True/False once known, None when KVM is present but untried."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False
    try:
        return json.loads(_kvm_state_file().read_text())["boots"]
    except (OSError, ValueError, KeyError):
        return None


def _remember_kvm(boots: bool) -> None:
    _kvm_state_file().parent.mkdir(parents=True, exist_ok=True)
    _kvm_state_file().write_text(json.dumps({"boots": boots}))


class Guest:
    """One vng process and the lines its guest program prints."""

    def __init__(self, args: list[str], log: Path):
        self.log = open(log, "ab")
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=self.log, start_new_session=True)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            self.log.write(raw)
            self.log.flush()
            if line.startswith("TCPVAR "):
                try:
                    self.lines.put(json.loads(line[7:]))
                except ValueError:
                    pass
        self.lines.put(None)    # end of output

    def next(self, timeout: float):
        """The next message; None at the end; raises queue.Empty on silence."""
        return self.lines.get(timeout=timeout)

    def kill(self) -> None:
        # vng and the QEMU it started form the session we created
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()
        self.log.close()


def _vng_args(kernel: Kernel, out_dir: Path, spec: Path, name: str, kvm: bool) -> list[str]:
    args = ["vng", "--name", name, "-r", str(kernel.image), "--cpus", str(VM_CPUS),
            "--memory", VM_MEMORY, f"--rwdir={out_dir}", "--cwd", str(out_dir)]
    if kernel.kind != "stock":
        # a kernel with the extended tracepoint is recorded through tracefs:
        # switching the event on at run time patches kernel text
        # (text_poke_bp), which under TCG with two vCPUs now and then oopses;
        # on from boot, the recorder's start and stop patch nothing
        args += ["--append", "trace_event=tcp:tcp_probe"]
    if not kvm:
        args.append("--disable-kvm")
    return args + ["--", sys.executable, "-m", "tcpvar.capture.guest", str(spec)]


def run_session(kernel: Kernel, spec: dict, out_dir: Path, tag: str, progress,
                boot_timeout: float) -> dict:
    """Boot once, run every experiment of @spec; returns the guest's 'ready'
    message (kernel release, whether KVM was used)."""
    need_vm_tools()
    spec_path = out_dir / f".tcpvar-vm-{tag}.json"
    spec_path.write_text(json.dumps(spec))
    log = out_dir / f".tcpvar-vm-{tag}.log"
    try:
        kvm = kvm_state()
        guest, ready = None, None
        if kvm is not False:
            progress({"phase": "booting the micro-VM (trying KVM)"})
            trial = min(boot_timeout, KVM_TRIAL_S)
            guest, ready = _boot(kernel, out_dir, spec_path, tag, True, log, trial)
            kvm = ready is not None
            if kvm or trial == KVM_TRIAL_S:     # a shortened trial proves nothing
                _remember_kvm(kvm)
        if ready is None:
            progress({"phase": "booting the micro-VM (TCG)"})
            guest, ready = _boot(kernel, out_dir, spec_path, tag, False, log, boot_timeout)
        if ready is None:
            raise VmError(f"the micro-VM did not boot within {boot_timeout:g} s "
                          f"(kernel {kernel.image}; its console is in {log})")
        ready["kvm"] = kvm
        try:
            _follow(guest, progress, spec)
        finally:
            guest.kill()
        return ready
    finally:
        spec_path.unlink(missing_ok=True)


def _boot(kernel, out_dir, spec_path, tag, kvm, log, timeout):
    guest = Guest(_vng_args(kernel, out_dir, spec_path, f"tcpvar-{tag}", kvm), log)
    deadline = time.monotonic() + timeout
    try:
        while True:
            msg = guest.next(max(0.1, deadline - time.monotonic()))
            if msg is None:
                break
            if msg["kind"] == "ready":
                return guest, msg
    except queue.Empty:
        pass
    except BaseException:
        guest.kill()
        raise
    guest.kill()
    return None, None


def _follow(guest: Guest, progress, spec: dict) -> None:
    """Relay the guest's progress until it ends. Ctrl-C asks the guest to
    stop (so its captures are closed properly) before the VM goes."""
    try:
        while True:
            try:
                msg = guest.next(SILENCE_S)
            except queue.Empty:
                raise VmError(f"the micro-VM said nothing for {SILENCE_S} s; "
                              f"stopped it") from None
            if msg is None:
                return
            if msg["kind"] == "error":
                raise TestbedError(f"in the micro-VM: {msg['message']}")
            progress(msg if msg["kind"] != "progress" else
                     {k: v for k, v in msg.items() if k != "kind"})
    except KeyboardInterrupt:
        for run in spec["runs"]:
            Path(run["dir"], STOP_FILE).touch()
        deadline = time.monotonic() + 30
        while guest.proc.poll() is None and time.monotonic() < deadline:
            try:
                if guest.next(1.0) is None:
                    break
            except queue.Empty:
                pass
            except KeyboardInterrupt:
                break
        raise
