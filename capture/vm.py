"""The vm backend: boot a kernel in a QEMU micro-VM through virtme-ng over
a read-only snapshot of the host's filesystem, with the output folder
writable, and carry out the session's runs there (capture/guest.py).
KVM is used when it boots a guest here, TCG otherwise; the answer is
remembered in the cache. Before the first KVM boot, a firmware of a few
hundred bytes run under KVM with the CPU virtme-ng asks for, which goes to
64-bit mode as Linux does and runs a short loop there, tells in a fraction
of a second (at most KVM_PROBE_S) whether a guest gets going at all."""
from __future__ import annotations

import compileall
import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from tcpvar import tools
from tcpvar.artefacts import run_folder as layout
from tcpvar.errors import TcpvarError, TestbedError, VmError
from tcpvar.progress import Progress, span_text
from tcpvar.resources import cache_dir

from . import clock as clocks
from . import owners
from .cpu import WaitMeter
from .kernels import Kernel

VM_CPUS = 2
VM_MEMORY = "2G"
KVM_TRIAL_S = 45          # a KVM boot that says nothing by then is taken as not working
KVM_PROBE_S = 5           # the probe takes 0.3-0.4 s under TCG here, a working KVM well under that;
                          # a hang, or a guest too slow to finish by then, is not a start
# the q35 machine without the SATA controller (and QEMU's default CD-ROM on
# it), the SMBus and the PS/2 controller, which no run uses: their drivers'
# probes took 2 s of each TCG boot
LEAN_MACHINE = "-machine sata=off,smbus=off,i8042=off"
# modules udev loads for the emulated CPU that no run uses: KVM's, the AES
# driver (whose self-tests idle the guest for seconds) and the AMD cpufreq
# driver; together 5-7 s of each TCG boot. A run's own modprobe still loads
# them (the blacklist holds only for udev's aliases)
UNUSED_MODULES = ("kvm", "kvm_amd", "kvm_intel", "aesni_intel", "powernow_k8")
SILENCE_S = 90            # a running guest reports every second; this long without a word is a hang


# what the host needs before a guest can boot and report: virtme-ng, QEMU,
# udevd (the guest's init runs the host's to create /dev/virtio-ports, the
# channel the guest reports through) and file (virtme-ng inspects busybox)
VM_TOOLS = ("vng", "qemu-system-x86_64", "udevd", "file", "busybox")


def need_vm_tools() -> None:
    """A missing piece is one line before any VM starts, not a silent guest."""
    for tool in VM_TOOLS:
        if tools.find(tool) is None:
            raise VmError(tools.not_installed(tool, "by the micro-VM"))


def kvm_state_file() -> Path:
    return cache_dir() / "kvm.json"


def kvm_state() -> bool | None:
    """True/False once known, None when KVM is present but untried."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False
    try:
        return json.loads(kvm_state_file().read_text())["boots"]
    except (OSError, ValueError, KeyError):
        return None


def _remember_kvm(boots: bool) -> None:
    kvm_state_file().parent.mkdir(parents=True, exist_ok=True)
    kvm_state_file().write_text(json.dumps({"boots": boots}))


# The probe guest: a 64 KiB BIOS image, which QEMU maps just below 4 GiB
# and again at 0xF0000. Its reset vector (its last 16 bytes, run first, in
# real mode with CS base 0xFFFF0000) jumps to its start at 0xF0000, which does
# what Linux does after its real-mode setup: 32-bit protected mode (GDT,
# CR0.PE, far jump), then long mode (identity-mapped page tables with PAE,
# EFER.LME, CR0.PG, far jump to a 64-bit code segment). In 64-bit mode it
# writes 14 MiB of RAM and runs a loop of 100 million instructions, work of
# the kind the kernel's decompressor does, and only then writes 0x2a to the
# isa-debug-exit device at port 0xf4, which ends QEMU with status
# (0x2a << 1) | 1.
# Why not less: a real-mode-only probe (`mov al, 0x2a; out 0xf4, al; hlt`)
# exited at once under a KVM on which Linux stalled after its real-mode
# setup. On that KVM every step above works within 0.1 s, but guest code runs
# at about a million instructions a second, in every mode, some 500 times
# slower than TCG: Linux stalls in its decompressor, in long mode. The loop
# should take a working KVM some tens of milliseconds; it takes TCG 0.3 s,
# that KVM minutes.
# The descriptors have their accessed bit set: loading one with it clear
# makes the CPU write it into the GDT, here read-only firmware, and that
# KVM then hangs on the far jump (Linux keeps its GDT in RAM).
_PROBE_CODE = bytes.fromhex(
    # 16-bit real mode, at 0xF0000 = CS 0xF000
    "fa"                              # 00 cli
    "2e 0f 01 16 d8 00"               # 01 lgdt cs:[0xd8]             the GDT below
    "0f 20 c0"                        # 07 mov eax, cr0
    "66 83 c8 01"                     # 0a or eax, 1                  CR0.PE
    "0f 22 c0"                        # 0e mov cr0, eax
    "66 ea 19 00 0f 00 08 00"         # 11 jmp dword 0x08:0xf0019     to 32-bit code
    # 32-bit protected mode
    "b8 10 00 00 00"                  # 19 mov eax, 0x10
    "8e d8"                           # 1e mov ds, eax
    "8e c0"                           # 20 mov es, eax
    "8e d0"                           # 22 mov ss, eax
    "bf 00 10 00 00"                  # 24 mov edi, 0x1000            zero the page tables:
    "31 c0"                           # 29 xor eax, eax               PML4 0x1000, PDPT 0x2000,
    "b9 00 0c 00 00"                  # 2b mov ecx, 0xc00             PD 0x3000
    "f3 ab"                           # 30 rep stosd
    "c7 05 00 10 00 00 03 20 00 00"   # 32 mov dword [0x1000], 0x2003 PML4[0]: PDPT, present+write
    "c7 05 00 20 00 00 03 30 00 00"   # 3c mov dword [0x2000], 0x3003 PDPT[0]: PD, present+write
    "bf 00 30 00 00"                  # 46 mov edi, 0x3000            PD: 512 2 MiB pages, the
    "b8 83 00 00 00"                  # 4b mov eax, 0x83              first 1 GiB (2 MiB page,
    "b9 00 02 00 00"                  # 50 mov ecx, 512               present+write)
    "89 07"                           # 55 1: mov [edi], eax
    "05 00 00 20 00"                  # 57 add eax, 0x200000
    "83 c7 08"                        # 5c add edi, 8
    "e2 f4"                           # 5f loop 1b
    "0f 20 e0"                        # 61 mov eax, cr4
    "83 c8 20"                        # 64 or eax, 0x20               CR4.PAE
    "0f 22 e0"                        # 67 mov cr4, eax
    "b8 00 10 00 00"                  # 6a mov eax, 0x1000
    "0f 22 d8"                        # 6f mov cr3, eax
    "b9 80 00 00 c0"                  # 72 mov ecx, 0xc0000080        EFER
    "0f 32"                           # 77 rdmsr
    "0d 00 01 00 00"                  # 79 or eax, 0x100              EFER.LME
    "0f 30"                           # 7e wrmsr
    "0f 20 c0"                        # 80 mov eax, cr0
    "0d 00 00 00 80"                  # 83 or eax, 0x80000000         CR0.PG: long mode
    "0f 22 c0"                        # 88 mov cr0, eax
    "ea 92 00 0f 00 18 00"            # 8b jmp 0x18:0xf0092           to 64-bit code
    # 64-bit long mode
    "bf 00 00 10 00"                  # 92 mov edi, 0x100000          write 1 MiB .. 15 MiB
    "48 89 3f"                        # 97 2: mov [rdi], rdi
    "48 83 c7 08"                     # 9a add rdi, 8
    "81 ff 00 00 f0 00"               # 9e cmp edi, 0xf00000
    "72 f1"                           # a4 jb 2b
    "b9 80 f0 fa 02"                  # a6 mov ecx, 50000000
    "ff c9"                           # ab 3: dec ecx
    "75 fc"                           # ad jnz 3b
    "b0 2a"                           # af mov al, 0x2a
    "e6 f4"                           # b1 out 0xf4, al
    "f4"                              # b3 hlt
    "f4 f4 f4 f4"                     # b4 hlt (the GDT is 8-byte aligned)
    # the GDT at 0xf00b8, and its descriptor at 0xf00d8
    "00 00 00 00 00 00 00 00"         # b8 null
    "ff ff 00 00 00 9b cf 00"         # c0 0x08 code, 32-bit, base 0, 4 GiB, accessed
    "ff ff 00 00 00 93 cf 00"         # c8 0x10 data, base 0, 4 GiB, accessed
    "ff ff 00 00 00 9b af 00"         # d0 0x18 code, 64-bit, accessed
    "1f 00 b8 00 0f 00"               # d8 limit 0x1f, base 0xf00b8
)
_RESET_JUMP = bytes.fromhex("ea 00 00 00 f0")   # jmp 0xf000:0x0000, to _PROBE_CODE
PROBE_EXIT = (0x2A << 1) | 1


def probe_firmware() -> bytes:
    image = bytearray(b"\xf4" * 0x10000)     # hlt everywhere else
    image[:len(_PROBE_CODE)] = _PROBE_CODE
    image[-16:-16 + len(_RESET_JUMP)] = _RESET_JUMP
    return bytes(image)


def kvm_starts_guest() -> tuple[bool, str]:
    """Whether QEMU starts a guest under KVM with the CPU virtme-ng asks for
    (`-cpu host,topoext=on`), and why not. A host whose KVM refuses that CPU
    (QEMU aborts setting its MSRs), never gets the probe guest to 64-bit mode,
    or runs it far slower than TCG would fails here within KVM_PROBE_S,
    instead of in a full boot that may take KVM_TRIAL_S."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False, "/dev/kvm is missing or not usable by this user"
    qemu = tools.find("qemu-system-x86_64")
    if qemu is None:
        return False, tools.not_installed("qemu-system-x86_64")
    with tempfile.NamedTemporaryFile(prefix="tcpvar-kvm-probe-", suffix=".bin") as bios:
        bios.write(probe_firmware())
        bios.flush()
        args = [qemu, "-accel", "kvm", "-cpu", "host,topoext=on", "-machine", "pc",
                "-m", "16", "-bios", bios.name, "-display", "none", "-nodefaults",
                "-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"]
        try:
            done = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True,
                                  timeout=KVM_PROBE_S)
        except subprocess.TimeoutExpired:
            return False, (f"a KVM guest did not reach 64-bit mode and run a short loop "
                           f"there within {KVM_PROBE_S} s")
    if done.returncode == PROBE_EXIT:
        return True, ""
    said = [ln.strip() for ln in done.stderr.decode(errors="replace").splitlines()
            if ln.strip() and "warning" not in ln]
    how = f"was ended by {signal.Signals(-done.returncode).name}" if done.returncode < 0 \
        else f"exited with status {done.returncode}"
    return False, f"QEMU under KVM {how}" + (f": {said[0]}" if said else "")


class Guest:
    """One vng process and the lines its guest program prints. Its owner
    file (owners.py) lets the next tcpvar end it if this one is killed."""

    def __init__(self, args: list[str], log: Path, tag: str):
        self.log = open(log, "wb")
        self.tag = tag
        owners.claim(tag)
        try:
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=self.log, start_new_session=True,
                                         env=owners.marked(tag, guest_env(args)))
        except OSError as exc:
            self.log.close()
            owners.release(tag)
            raise VmError(f"cannot start {args[0]}: {exc.strerror}") from None
        owners.add_process(tag, self.proc.pid)
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

    def kill(self) -> int:
        """End vng and the QEMU it started (the session we created); its exit status."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        status = self.proc.wait()
        self.log.close()
        owners.release(self.tag)
        return status


def vng_args(image: Path, command: list[str], kvm: bool, name: str,
             rw_dir: Path | None = None, append: list[str] = (),
             kernel_log: bool = False, clock: str = "real") -> list[str]:
    """The vng command line that boots @image and runs @command in the guest
    on @clock (real or virtual, capture/clock.py); @kernel_log puts the
    kernel's messages on the console too."""
    cpus = clocks.VIRTUAL_CPUS if clock == "virtual" else VM_CPUS
    args = [tools.find("vng") or "vng", "--name", name, "-r", str(image), "--cpus", str(cpus),
            "--memory", VM_MEMORY]
    for option in (*clocks.qemu_options(clock), LEAN_MACHINE):
        args += [f"--qemu-opts={option}"]
    # Debian's virtiofsd refuses virtme-ng's arguments: vng waited 3.5 s for
    # it on every boot before it fell back to 9p
    args.append("--force-9p")
    if kernel_log:
        args.append("--verbose")
    if rw_dir is not None:
        args += [f"--rwdir={rw_dir}", "--cwd", str(rw_dir)]
    for arg in (*append, f"modprobe.blacklist={','.join(UNUSED_MODULES)}"):
        args += ["--append", arg]
    if not kvm:
        args.append("--disable-kvm")
    return [*args, "--", *command]


def guest_env(args: list[str]) -> dict:
    """The environment for vng: it runs virtme-ng's other programs by name,
    and they sit beside it (in tcpvar's virtual environment, maybe not on PATH)."""
    return dict(os.environ, PATH=os.pathsep.join([os.path.dirname(args[0]),
                                                  os.environ.get("PATH", "")]))


def _session_args(kernel: Kernel, out_dir: Path, spec: Path, name: str, kvm: bool,
                  clock: str) -> list[str]:
    # a kernel with the extended tracepoint is recorded through tracefs:
    # switching the event on at run time patches kernel text (text_poke_bp),
    # which under TCG with two vCPUs now and then oopses; on from boot, the
    # recorder's start and stop patch nothing
    append = ["trace_event=tcp:tcp_probe"] if kernel.kind != "stock" else []
    # Debian's kernel zeroes every page and slab object it allocates
    # (init_on_alloc, a hardening default): 13 % of the guest's instructions
    # at a gigabit, spent on the packets' buffers. The guest runs tcpvar only
    append.append("init_on_alloc=0")
    return vng_args(kernel.boot_image(), [sys.executable, "-m", "tcpvar.capture.guest", str(spec)],
                    kvm, name, out_dir, append, clock=clock)


def decide_kvm(progress) -> bool | None:
    """The remembered verdict; else, where the probe guest cannot start,
    False at once (and remembered); None leaves it to a KVM boot."""
    kvm = kvm_state()
    if kvm is None:
        starts, why = kvm_starts_guest()
        if not starts:
            progress(Progress(f"KVM cannot start a guest here ({why}): using TCG"))
            _remember_kvm(False)
            kvm = False
    return kvm


def compile_guest_modules() -> None:
    """Byte-compile the packages the guest's program imports, where they are
    not already: the guest reads the host's files read-only over 9p, so it
    can write no .pyc of its own, and under TCG compiling them took 4 s of
    each boot. A source folder that is not writable is left as it is."""
    import tcpvar
    import tcpvar.artefacts
    import tcpvar.capture

    for package in (tcpvar, tcpvar.capture, tcpvar.artefacts):
        with contextlib.suppress(OSError):
            compileall.compile_dir(Path(package.__file__).parent, quiet=2)


def run_session(kernel: Kernel, spec: dict, out_dir: Path, tag: str, progress,
                boot_timeout: float, clock: str = "auto") -> dict:
    """Boot once, carry out every run of @spec; returns the guest's 'ready'
    message (kernel release, whether KVM was used, the clock). Virtual time
    needs TCG, so `--clock virtual` never tries KVM; @boot_timeout is in the
    guest's seconds."""
    spec_path = out_dir / f".tcpvar-vm-{tag}.json"
    log = out_dir / f".tcpvar-vm-{tag}.log"
    name = f"tcpvar-{tag}"

    def attempt(kvm: bool, timeout: float, log: Path):
        chosen = clocks.resolve(clock, kvm)
        spec_path.write_text(json.dumps({**spec, "clock": clocks.describe(chosen)}))
        return (*boot(_session_args(kernel, out_dir, spec_path, name, kvm, chosen), log,
                      timeout, tag, chosen), chosen)

    compile_guest_modules()
    try:
        kvm = False if clock == "virtual" else decide_kvm(progress)
        guest, ready = None, None
        if kvm is not False:
            progress(Progress("booting the micro-VM (trying KVM)"))
            trial = min(boot_timeout, KVM_TRIAL_S)
            guest, ready, _, chosen = attempt(True, trial, log.with_suffix(".kvm.log"))
            if ready is not None:
                kvm = True
                _remember_kvm(True)
        if ready is None:
            progress(Progress(f"booting the micro-VM (TCG, "
                              f"{clocks.resolve(clock, False)} time)"))
            guest, ready, why, chosen = attempt(False, boot_timeout, log)
            if ready is None:
                raise VmError(f"the micro-VM {why} (kernel {kernel.image}; console: {log})")
            if kvm is None and trial == KVM_TRIAL_S:   # TCG booted where KVM did not
                _remember_kvm(False)
            kvm = False
        ready.update(kvm=kvm, clock=chosen)
        try:
            _follow(guest, progress, spec, chosen)
        finally:
            guest.kill()
        return ready
    finally:
        spec_path.unlink(missing_ok=True)


def _event(msg: dict) -> Progress:
    """A guest's message as the progress event it stands for."""
    if msg["kind"] == "progress":
        return Progress.from_json({k: v for k, v in msg.items() if k != "kind"})
    if msg["kind"] == "done":
        span = msg.get("clock")
        return Progress(f"run finished: {msg['status']}"
                        + (f" ({msg['error']})" if msg.get("error") else "")
                        + (f"; {span_text(span['guest_s'], span['host_s'])}"
                           if span else ""))
    return Progress(f"the micro-VM says: {msg}")


def boot(args: list[str], log: Path, timeout: float, tag: str, clock: str = "real"):
    """Start a guest and wait for its 'ready' message: (guest, message, '')
    once it is up; (None, None, what happened) with the guest stopped when
    it exits without a word (QEMU refusing to start, the guest's program
    failing) or says nothing for @timeout seconds of its @clock."""
    guest = Guest(args, log, tag)
    deadline = time.monotonic() + clocks.host_limit(timeout, clock)
    try:
        while True:
            msg = guest.next(max(0.1, deadline - time.monotonic()))
            if msg is None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    guest.proc.wait(10)     # its own exit status, rather than our kill's
                status = guest.kill()
                return None, None, f"exited (status {status}) before it reported" \
                                   f"{_last_words(log)}{_udev_hint()}"
            if msg["kind"] == "ready":
                return guest, msg, ""
    except queue.Empty:
        guest.kill()
        stretched = "" if clock == "real" else \
            f" (on virtual time: {clocks.host_limit(timeout, clock):g} s of the host's)"
        return None, None, f"did not boot within {timeout:g} s{stretched}{_last_words(log)}"
    except BaseException:
        guest.kill()
        raise


def _last_words(log: Path, lines: int = 3, width: int = 300) -> str:
    """The last lines of a guest's console, as a clause of a one-line error."""
    try:
        text = log.read_bytes().replace(b"\0", b"").decode(errors="replace")
    except OSError:
        return ""
    tail = [ln.strip() for ln in text.splitlines() if ln.strip()][-lines:]
    if not tail:
        return "; its console is empty"
    said = " | ".join(tail)
    return f"; its console ends: {said[-width:]}"


def _udev_hint() -> str:
    if tools.find("udevd") is None:
        return ("; the host has no udevd, which the guest's init needs to create "
                "the channel it reports through (apt-get install udev)")
    return ""


class _Span:
    """Host and guest seconds of the run in progress, from the guest's
    samples (each says how long its flows have run, in guest seconds):
    the dilation; and how long the micro-VM (session @sid) waited for a
    host CPU meanwhile."""

    def __init__(self, sid: int):
        self.first: tuple[float, float] | None = None    # (host, guest) at its first sample
        self.last: tuple[float, float] | None = None
        self.waits = WaitMeter(sid)

    def see(self, msg: dict) -> dict | None:
        """The clock's figures so far for a running sample, else None."""
        if msg.get("kind") != "progress" or msg.get("phase") != "running" \
                or not isinstance(msg.get("done"), (int, float)):
            return None
        now = (time.monotonic(), float(msg["done"]))
        self.first = self.first or now
        self.last = now
        self.waits.sample()
        return self.figures()

    def figures(self) -> dict | None:
        if self.first is None or self.last[1] - self.first[1] < 1.0:
            return None
        host, guest = self.last[0] - self.first[0], self.last[1] - self.first[1]
        return {"guest_s": round(guest, 2), "host_s": round(host, 2),
                "dilation": round(host / guest, 3), "host_wait_frac": self.waits.waited_frac()}


def _follow(guest: Guest, progress, spec: dict, clock: str) -> None:
    """Relay the guest's progress until it ends, with each run's dilation;
    once a run is done its manifest gets the dilation (the guest has closed
    it). Ctrl-C asks the guest to stop (so its captures are closed
    properly) before the VM goes."""
    silence = clocks.host_limit(SILENCE_S, clock)
    span = _Span(guest.proc.pid)
    try:
        while True:
            try:
                msg = guest.next(silence)
            except queue.Empty:
                raise VmError(f"the micro-VM said nothing for {silence:g} s; "
                              f"stopped it") from None
            if msg is None:
                return
            if msg["kind"] == "error":
                raise TestbedError(f"in the micro-VM: {msg['message']}")
            figures = span.see(msg)
            if figures is not None:
                msg.setdefault("data", {})["clock"] = {"kind": clock, **figures}
            if msg["kind"] == "done":
                _note_dilation(Path(msg["dir"]), clock, span.figures())
                msg["clock"] = span.figures()
                span = _Span(guest.proc.pid)
            progress(_event(msg))
    except KeyboardInterrupt:
        for run in spec["runs"]:
            Path(run["dir"], layout.STOP_FILE).touch()
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


def _note_dilation(run_dir: Path, clock: str, figures: dict | None) -> None:
    """The run's dilation into its manifest (capture/clock.py)."""
    if figures is None:
        return
    try:
        manifest = layout.read_manifest(run_dir)
    except TcpvarError:
        return
    manifest["clock"] = {**clocks.describe(clock), **(manifest.get("clock") or {}),
                         "dilation": figures["dilation"], "run_host_s": figures["host_s"],
                         "host_wait_frac": figures["host_wait_frac"]}
    layout.write_manifest(run_dir, manifest)
