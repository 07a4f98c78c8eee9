"""`tcpvar doctor`: every part tcpvar uses, grouped by what needs it, and for
each missing one what that disables and the command that installs it; then
whether the README's main job (`tcpvar run --cc cubic --rtt 100`, backend
auto) can run here, and on which backend.

Checks never raise: a check that errors is a failed check with the error's
text. They run in a few threads, since some wait on subprocesses."""
from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

from tcpvar import tools
from tcpvar.capture.netns import TESTBED_TOOLS
from tcpvar.capture.params import PAPER_VARIANTS

MAIN_JOB = "tcpvar run --cc cubic --rtt 100"
MAIN_CC = "cubic"

# id -> (title, what needs the group), in the order they are shown
GROUPS = {
    "analyze": ("analyze", "tcpvar analyze, query and the store"),
    "netns": ("run on the host kernel", "tcpvar run --backend netns"),
    "vm": ("run in the micro-VM", "tcpvar run --backend vm"),
    "probe": ("probe", "tcpvar probe, and the tcp_probe events of tcpvar run"),
    "kernel": ("kernel build", "tcpvar kernel build; run --ngwa, --wbrto, --kernel patched"),
    "wireshark": ("Wireshark", "the NGWA dissector in Wireshark and tshark"),
    "spark": ("Spark", "tcpvar spark: many captures on Apache Spark"),
    "peers": ("peer tools", "the tests and bench/, which compare tcpvar with them"),
}

# what each of the testbed's programs (capture.netns.TESTBED_TOOLS) is for
RUN_TOOL_USE = {
    "ip": "the namespaces and veth pairs",
    "tc": "the bottleneck queue and netem",
    "ss": "waiting for iperf3's servers",
    "iperf3": "the flows",
    "tcpdump": "the captures",
}
VM_TOOL_USE = {
    "vng": "virtme-ng boots the guest",
    "qemu-system-x86_64": "QEMU runs the guest",
    "udevd": "the guest's init runs the host's udevd to create the channel it reports through",
    "file": "virtme-ng inspects busybox with it",
    "busybox": "virtme-ng's guest init",
}
HOOK_TOOLS = ("make", "clang", "llvm-strip", "bpftool", "cc")
KERNEL_TOOLS = ("gcc", "make", "bc", "bison", "flex", "pahole", "git", "xz")
# headers the kernel build compiles against -> the Debian package with them
KERNEL_HEADERS = {"gelf.h": "libelf-dev", "openssl/ssl.h": "libssl-dev"}
STOCK_FETCH_TOOLS = ("apt-get", "apt-cache", "dpkg-deb", "depmod")
LINUX_SOURCE = "linux-source-6.1"
LINUX_SOURCE_TARBALL = Path("/usr/src/linux-source-6.1.tar.xz")
TSHARK_MIN = (4, 0)         # the Lua dissector's API
JAVA_MIN = 17               # Spark 4's
VERSION_TIMEOUT_S = 5
# how a program tells its version, where `--version` does not
VERSION_ARGS = {"tcptrace": ["-v"], "ip": ["-V"], "tc": ["-V"], "ss": ["-V"], "busybox": [],
                "java": ["-version"]}
_VERSION = re.compile(r"(?<![\d.])\d+(?:\.\d+)+")
_AS_ROOT = "run tcpvar as root, with sudo"
_REINSTALL = "reinstall tcpvar: its package ships them (./bootstrap.sh in a checkout)"
_VM_INSTEAD = ("none for this kernel: --backend vm (auto picks it) boots Debian's kernel, "
               "which has it")


@dataclass
class Check:
    """One part tcpvar uses, and what was found."""

    group: str
    name: str
    ok: bool
    detail: str = ""                 # path, version, what was found or why not
    version: str | None = None
    state: str | None = None         # how it passes or fails, where there are ways (docs)
    required: bool = True            # False: the group works without it, with less
    disables: str = ""               # what does not work while it is missing
    install: str | None = None       # the command that installs or builds it (when missing)
    hint: str | None = None          # what to do instead, when no command installs it


@dataclass
class Found:
    """What a probe saw; install/hint override the spec's when given."""

    ok: bool
    detail: str = ""
    version: str | None = None
    install: str | None = None
    hint: str | None = None
    state: str | None = None


@dataclass(frozen=True)
class _Spec:
    group: str
    name: str
    disables: str
    probe: Callable[[], Found]
    required: bool = True
    install: str | None = None
    hint: str | None = None


@dataclass
class Verdict:
    """Whether the main job can run here, on which backend, and why."""

    ready: bool
    backend: str | None
    reason: str
    blocking: list[Check] = field(default_factory=list)


# ---------------------------------------------------------------- running

def run_checks() -> list[Check]:
    """Every check, in the order of GROUPS."""
    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(_run, _specs()))


def _run(spec: _Spec) -> Check:
    try:
        found = spec.probe()
    except Exception as exc:  # a check that breaks is a failed check, never a crash
        found = Found(False, f"the check failed: {type(exc).__name__}: {exc}")
    check = Check(spec.group, spec.name, found.ok, found.detail, found.version, found.state,
                  spec.required, spec.disables)
    if not found.ok:
        check.install = found.install or spec.install
        check.hint = found.hint or (spec.hint if check.install is None else None)
    return check


def ready_groups(checks: list[Check]) -> dict[str, bool]:
    """group id -> every required check of it passes."""
    return {g: all(c.ok for c in checks if c.group == g and c.required) for g in GROUPS}


def main_job(checks: list[Check]) -> Verdict:
    """Can `tcpvar run --cc cubic --rtt 100` (backend auto) run here? As
    backend.choose decides: root and the run tools for either backend, the
    store to load into; then netns when the host kernel has netem and cubic
    (and there the run needs tcp:tcp_probe), else the micro-VM with its
    tools and Debian's kernel, cached or fetchable."""
    by = {(c.group, c.name): c for c in checks}
    common = [by[("netns", "root")], *(by[("netns", t)] for t in TESTBED_TOOLS),
              by[("analyze", "native pcap reader")], by[("analyze", "duckdb")]]
    netns = [by[("netns", "netem")], by[("netns", MAIN_CC)]]
    vm = [*(by[("vm", t)] for t in VM_TOOL_USE), by[("vm", "stock kernel")]]
    missing = [c for c in common if not c.ok]
    if missing:
        return Verdict(False, None, "; ".join(_why(c, with_hint=True) for c in missing),
                       missing)
    netns_gaps = [c for c in netns if not c.ok]
    if not netns_gaps:
        # auto picks netns then, and the run records tcp_probe on the host
        tracepoint = by[("probe", "tcp:tcp_probe")]
        if not tracepoint.ok:
            return Verdict(False, None, f"auto picks the host kernel (it has netem and "
                                        f"{MAIN_CC}), but {_why(tracepoint, with_hint=True)}",
                           [tracepoint])
        return Verdict(True, "netns", f"the host kernel has netem and {MAIN_CC}")
    vm_gaps = [c for c in vm if not c.ok]
    no_netns = f"the host kernel cannot serve it ({_why(netns_gaps[0])})"
    if vm_gaps:
        return Verdict(False, None, f"{no_netns}, and the micro-VM cannot either "
                                    f"({'; '.join(map(_why, vm_gaps))})", netns_gaps + vm_gaps)
    kernel = ("Debian's kernel is cached" if by[("vm", "stock kernel")].state == "cached"
              else "Debian's kernel is fetched first (about 10 s)")
    guest = {"boots": "the guest runs under KVM", "untried": "KVM is tried first, else TCG"
             }.get(by[("vm", "KVM")].state, "the guest runs under TCG (software emulation)")
    return Verdict(True, "vm", f"{no_netns}, so auto picks the micro-VM: {kernel}, {guest}")


def _why(c: Check, with_hint: bool = False) -> str:
    fix = c.install or (c.hint if with_hint else None)
    return f"{c.name}: {c.detail}" + (f" ({fix})" if fix else "")


def to_json(checks: list[Check], verdict: Verdict) -> dict:
    """The --json document (docs/doctor.md)."""
    from tcpvar import __version__

    ready = ready_groups(checks)
    return {
        "tcpvar": __version__,
        "main_job_ready": verdict.ready,
        "main_job": {"command": MAIN_JOB, "ready": verdict.ready, "backend": verdict.backend,
                     "reason": verdict.reason,
                     "blocking": [f"{c.group}/{c.name}" for c in verdict.blocking]},
        "groups": [{"id": g, "title": title, "needed_by": needed_by, "ready": ready[g],
                    "missing": [c.name for c in checks if c.group == g and not c.ok]}
                   for g, (title, needed_by) in GROUPS.items()],
        "checks": [asdict(c) for c in checks],
    }


# ---------------------------------------------------------------- the checks

def _specs() -> list[_Spec]:
    from tcpvar.capture import probe

    run_use = "tcpvar run, on either backend (the micro-VM runs the host's programs): "
    vm_use = "the micro-VM (--backend vm, and auto when the host kernel lacks netem or a variant): "
    hook = ("the eBPF hook (rto, rttvar, loss counters on stock kernels); "
            "the stock tracepoint is recorded instead")
    kbuild = "tcpvar kernel build, so --ngwa, --wbrto and --kernel patched"
    return [
        _Spec("analyze", "native pcap reader", "tcpvar analyze, and loading runs' captures",
              _native, install="./bootstrap.sh"),
        _module_spec("analyze", "duckdb", "the store: analyze, query, run, probe"),
        _module_spec("analyze", "matplotlib", "figures: analyze --plot"),
        _module_spec("analyze", "scipy", "statistics: compare's intervals and --test"),

        _Spec("netns", "root", "tcpvar run and tcpvar probe (namespaces, qdiscs, tracefs)",
              _root, hint=_AS_ROOT),
        *(_tool_spec("netns", t, run_use + RUN_TOOL_USE[t]) for t in TESTBED_TOOLS),
        *(_tool_spec("netns", t, f"tcpvar run --latency {t} (latency under load)",
                     required=False) for t in ("irtt", "ping")),
        _Spec("netns", "netem", "--rtt and --loss on the host kernel (auto sends such runs "
              "to the micro-VM)", _netem, hint=_VM_INSTEAD),
        _Spec("netns", MAIN_CC, f"--cc {MAIN_CC} on the host kernel (auto sends it to the "
              "micro-VM)", _host_cc, hint=_VM_INSTEAD),
        _Spec("netns", "paper variants", "those variants on the host kernel (auto sends "
              "them to the micro-VM)", _paper_variants, required=False,
              hint="none for this kernel: the micro-VM's Debian kernel has all 13"),
        _Spec("netns", "AQMs", "--aqm on the host kernel (auto sends such runs to the "
              "micro-VM)", _host_qdiscs, required=False,
              hint="none for this kernel: the micro-VM's Debian kernel has them all"),

        *(_tool_spec("vm", t, vm_use + use) for t, use in VM_TOOL_USE.items()),
        _Spec("vm", "KVM", "fast guests: without KVM the micro-VM runs under TCG "
              "(software emulation, slower)", _kvm, required=False,
              hint="nothing needed: runs use TCG; for KVM, a host with /dev/kvm"),
        _Spec("vm", "stock kernel", vm_use + "its default kernel (--kernel stock)", _stock),

        _Spec("probe", "tcp:tcp_probe", "tcpvar probe, and the tcp_probe events of runs on "
              "the host kernel", _tracefs, hint="a kernel with tracefs and the "
              "tcp:tcp_probe tracepoint (the micro-VM's has them)"),
        _Spec("probe", "BTF", hook, _btf, required=False,
              hint="a kernel built with CONFIG_DEBUG_INFO_BTF=y (the micro-VM's has it)"),
        _Spec("probe", "BPF system call", hook, _bpf, required=False,
              hint="a kernel built with CONFIG_BPF_SYSCALL=y (the micro-VM's has it)"),
        *(_tool_spec("probe", t, "building " + hook, required=False) for t in HOOK_TOOLS),
        _Spec("probe", "eBPF hook sources", hook, partial(_hook_sources, probe),
              required=False, hint=_REINSTALL),
        _Spec("probe", "eBPF hook", hook, partial(_hook, probe), required=False),

        _Spec("kernel", "kernel-patches", kbuild, _patches, hint=_REINSTALL),
        _Spec("kernel", LINUX_SOURCE, kbuild, _linux_source),
        *(_tool_spec("kernel", t, kbuild) for t in KERNEL_TOOLS),
        *(_Spec("kernel", package, kbuild, partial(_header, header),
                install=f"apt-get install {package}")
          for header, package in KERNEL_HEADERS.items()),
        _Spec("kernel", "deb-src entry", "building tc with the ngwa qdisc (`apt-get source "
              "iproute2`), so --ngwa", _deb_src, required=False, install="./bootstrap.sh"),
        _Spec("kernel", "patched kernel", "an instant start for --ngwa, --wbrto and --kernel "
              "patched (the first such run builds it, about 6 minutes on 2 cores)",
              partial(_built, "kernel"), required=False, install="tcpvar kernel build"),
        _Spec("kernel", "patched tc", "an instant start for --ngwa (the first such run "
              "builds it)", partial(_built, "tc"), required=False,
              install="tcpvar kernel build"),

        _Spec("wireshark", "tshark", "the NGWA dissector in tshark; tcpvar wireshark install "
              "asks tshark whether it loads it", _tshark, install=tools.install_command("tshark")),
        _Spec("wireshark", "NGWA dissector", "decoding NGWA without -X lua_script:ngwa.lua",
              _dissector, required=False, install="tcpvar wireshark install"),

        _module_spec("spark", "pyspark", "tcpvar spark (the driver and its Python workers)",
                     "'pyspark>=4'"),
        _Spec("spark", "java", f"tcpvar spark: Spark runs on Java {JAVA_MIN} or later", _java,
              install=tools.install_command("java")),

        _tool_spec("peers", "tshark", "the tests and bench/ that compare tcpvar with tshark"),
        _tool_spec("peers", "tcptrace", "the tests and bench/ that compare tcpvar with tcptrace"),
        _tool_spec("peers", "chromium", "the test that opens report.html in a browser"),
    ]


def _tool_spec(group: str, tool: str, disables: str, required: bool = True) -> _Spec:
    return _Spec(group, tool, disables, partial(_tool, tool), required,
                 install=tools.install_command(tool))


def _module_spec(group: str, module: str, disables: str, requirement: str = "") -> _Spec:
    return _Spec(group, module, disables, partial(_module, module),
                 install=tools.pip_install(requirement or module))


def _header(name: str) -> Found:
    """A C header in the compiler's default include path."""
    path = Path("/usr/include") / name
    return Found(True, str(path)) if path.is_file() else Found(False, f"no {path}")


def _tool(tool: str) -> Found:
    path = tools.find(tool)
    if path is None:
        return Found(False, "not installed")
    return Found(True, path, tool_version(path, VERSION_ARGS.get(tool, ["--version"])))


def tool_version(path: str, args: list[str]) -> str | None:
    """The first dotted version number in the first lines a program prints."""
    try:
        done = subprocess.run([path, *args], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=VERSION_TIMEOUT_S,
                              errors="replace")
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [ln for ln in (done.stdout or done.stderr).splitlines() if ln.strip()]
    for line in lines[:3]:
        m = _VERSION.search(line)
        if m:
            return m.group(0)
    return None


def _module(name: str) -> Found:
    import importlib
    from importlib import metadata

    try:
        mod = importlib.import_module(name)
    except ImportError as exc:
        return Found(False, f"cannot import it: {exc}")
    version = getattr(mod, "__version__", None)
    try:
        version = version or metadata.version(name)
    except metadata.PackageNotFoundError:
        pass
    return Found(True, os.path.dirname(mod.__file__ or ""), version)


def _native() -> Found:
    try:
        from tcpvar.ingest import _pcapscan
    except ImportError as exc:
        if "libpcap" in str(exc):
            return Found(False, f"cannot import tcpvar.ingest._pcapscan: {exc}",
                         install="apt-get install libpcap0.8")
        return Found(False, f"cannot import tcpvar.ingest._pcapscan: {exc}")
    lib = _libpcap_version()
    return Found(True, f"{_pcapscan.__file__}" + (f", on {lib}" if lib else ""),
                 _VERSION.search(lib).group(0) if lib and _VERSION.search(lib) else None)


def _libpcap_version() -> str | None:
    """pcap_lib_version() of the libpcap the extension loaded (the module
    does not expose it); the soname Debian ships when the map does not say."""
    import ctypes

    lib = "libpcap.so.0.8"
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1]
                if "/libpcap.so" in path:
                    lib = path
                    break
        pcap = ctypes.CDLL(lib)
    except OSError:
        return None
    pcap.pcap_lib_version.restype = ctypes.c_char_p
    return pcap.pcap_lib_version().decode(errors="replace")


def _root() -> Found:
    uid = os.geteuid()
    return Found(uid == 0, "running as root" if uid == 0 else f"running as uid {uid}")


def _netem() -> Found:
    from tcpvar.capture import backend

    if os.geteuid() != 0:
        return Found(False, "unknown: trying netem needs root", hint=_AS_ROOT)
    if tools.find("ip") is None or tools.find("tc") is None:
        return Found(False, "unknown: trying netem needs ip and tc")
    if backend.host_has_netem():
        return Found(True, "a netem qdisc works in a throwaway namespace")
    module = _module_file("net/sched/sch_netem.ko")
    return Found(False, "none in the host kernel, not even as a module",
                 install="modprobe sch_netem" if module else None)


def _module_file(rel: str) -> Path | None:
    import platform

    base = Path("/lib/modules") / platform.release() / "kernel"
    return next(iter(base.glob(rel + "*")), None)


def _host_cc() -> Found:
    from tcpvar.capture import backend

    offered = backend.available_variants()
    if MAIN_CC in offered:
        return Found(True, f"the host kernel offers {', '.join(sorted(offered))}")
    return Found(False, f"not in the host kernel, which offers {', '.join(sorted(offered))}")


def _host_qdiscs() -> Found:
    from tcpvar.capture import backend
    from tcpvar.capture.aqm import AQMS

    if os.geteuid() != 0:
        return Found(False, "unknown: trying qdiscs needs root", hint=_AS_ROOT)
    if tools.find("ip") is None or tools.find("tc") is None:
        return Found(False, "unknown: trying qdiscs needs ip and tc")
    have = [q for q in AQMS if backend.host_has_qdisc(q)]
    missing = [q for q in AQMS if q not in have]
    if not missing:
        return Found(True, f"the host kernel has all {len(AQMS)}: {', '.join(have)}")
    return Found(False, f"the host kernel has {', '.join(have) or 'none'}; it lacks "
                        f"{', '.join(missing)}")


def _paper_variants() -> Found:
    from tcpvar.capture import backend

    offered = backend.available_variants()
    missing = [v for v in PAPER_VARIANTS if v not in offered]
    if not missing:
        return Found(True, f"the host kernel has all {len(PAPER_VARIANTS)}")
    return Found(False, f"the host kernel lacks {', '.join(missing)}")


def _kvm() -> Found:
    from tcpvar.capture import vm

    if not os.path.exists("/dev/kvm"):
        return Found(False, "no /dev/kvm: the micro-VM runs under TCG", state="absent")
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return Found(False, "/dev/kvm is not usable by this user: the micro-VM runs under TCG",
                     state="absent", hint="nothing needed: runs use TCG; for KVM, read and "
                                          "write access to /dev/kvm (the kvm group)")
    state = vm.kvm_state()
    if state is True:
        return Found(True, "/dev/kvm; KVM booted a guest here", state="boots")
    if state is None:
        return Found(True, "/dev/kvm; not tried yet: the first vm run tries KVM, then TCG",
                     state="untried")
    where = vm.kvm_state_file()
    return Found(False, f"/dev/kvm, but KVM did not boot a guest here (remembered in {where}); "
                        f"the micro-VM runs under TCG", state="fails",
                 hint=f"nothing needed: runs use TCG; delete {where} to try KVM again")


def _stock() -> Found:
    from tcpvar.capture import aqm, kernels

    k = kernels.cached_stock_kernel()
    if k is not None:
        offered = k.variants() or set()
        return Found(True, f"cached at {k.image}: variants {', '.join(sorted(offered))}; "
                           f"queues for --aqm {', '.join(aqm.offered(k.qdiscs() or set()))}",
                     k.release, state="cached")
    for tool in STOCK_FETCH_TOOLS:
        if tools.find(tool) is None:
            return Found(False, f"not fetched yet, and {tool} (needed to fetch it) is "
                                f"not installed", install=tools.install_command(tool))
    try:
        package = kernels.stock_package()
    except Exception as exc:
        return Found(False, f"not fetched yet, and cannot be: {exc}", install="apt-get update")
    return Found(True, f"not fetched yet; the first vm run fetches it (about 10 s): {package}",
                 state="fetchable")


def _tracefs() -> Found:
    from tcpvar.capture import probe

    if os.geteuid() != 0:
        return Found(False, "unknown: reading tracefs needs root", hint=_AS_ROOT)
    for root in probe.TRACEFS_MOUNTS:
        if (root / "events" / "tcp" / "tcp_probe").is_dir():
            ext = probe.has_extended_tracepoint(root)
            return Found(True, f"{root}/events/tcp/tcp_probe"
                               + (" (extended fields)" if ext else " (stock fields)"),
                         state="extended" if ext else "mounted")
    root = probe.TRACEFS_MOUNTS[0]
    if "tracefs" not in Path("/proc/filesystems").read_text():
        return Found(False, "the kernel has no tracefs")
    if root.is_dir() and not (root / "events").exists():
        return Found(True, f"tracefs not mounted on {root}; tcpvar mounts it when it records",
                     state="mountable")
    return Found(False, "this kernel has no tcp:tcp_probe tracepoint")


def _btf() -> Found:
    from tcpvar.capture import probe

    return Found(probe.BTF.exists(), str(probe.BTF) if probe.BTF.exists()
                 else f"no {probe.BTF}")


def _bpf() -> Found:
    ok = Path("/proc/sys/kernel/unprivileged_bpf_disabled").exists()
    return Found(ok, "present" if ok else "the kernel has no bpf() system call")


def _hook_sources(probe) -> Found:
    missing = [n for n in probe.HOOK_SOURCES if not (probe.HOOK_DIR / n).is_file()]
    if missing:
        return Found(False, f"{', '.join(missing)} missing in {probe.HOOK_DIR}")
    return Found(True, str(probe.HOOK_DIR))


def _hook(probe) -> Found:
    tool = probe.tool_path()
    if tool is not None:
        return Found(True, f"built: {tool}", state="built")
    if os.environ.get("TCPVAR_PROBE_TOOL"):
        return Found(False, "TCPVAR_PROBE_TOOL is not an executable",
                     hint="unset TCPVAR_PROBE_TOOL or point it at a built loader")
    if _hook_sources(probe).ok and probe.BTF.exists():
        missing = [t for t in HOOK_TOOLS if tools.find(t) is None]
        if not missing:
            return Found(True, "not built yet; built on first use (seconds)", state="buildable")
        return Found(False, f"cannot be built: {', '.join(missing)} not installed",
                     install=tools.install_command(missing[0]))
    return Found(False, "cannot be built without its sources and BTF",
                 hint="see the eBPF hook sources and BTF above")


def _patches() -> Found:
    from tcpvar.capture import kernel_build
    from tcpvar.errors import KernelBuildError

    try:
        return Found(True, str(kernel_build.patches_dir()))
    except KernelBuildError as exc:
        return Found(False, str(exc))


def _linux_source() -> Found:
    from tcpvar.capture import kernel_build
    from tcpvar.errors import KernelBuildError

    try:
        pinned = (kernel_build.patches_dir() / "VERSION").read_text().strip()
    except KernelBuildError:
        return Found(False, "unknown: kernel-patches/ (and its VERSION) not found",
                     hint="see kernel-patches above")
    fix = f"apt-get install {LINUX_SOURCE}={pinned}"
    try:
        done = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", LINUX_SOURCE],
                              capture_output=True, text=True, timeout=VERSION_TIMEOUT_S)
    except FileNotFoundError:
        return Found(False, "dpkg-query is not installed: not a Debian system?", install=fix)
    installed = done.stdout.strip() if done.returncode == 0 else ""
    if not installed:
        return Found(False, f"not installed (kernel-patches pins {pinned})", install=fix)
    if installed != pinned:
        return Found(False, f"{installed} installed, but kernel-patches pins {pinned}",
                     installed, install=fix)
    if not LINUX_SOURCE_TARBALL.is_file():
        return Found(False, f"{LINUX_SOURCE_TARBALL} is missing", installed,
                     install=f"apt-get install --reinstall {LINUX_SOURCE}={pinned}")
    return Found(True, str(LINUX_SOURCE_TARBALL), installed)


def _deb_src() -> Found:
    """A deb-src line (sources.list) or a Types: entry naming deb-src (deb822)."""
    apt = Path("/etc/apt")
    files = [apt / "sources.list", *sorted((apt / "sources.list.d").glob("*.list")),
             *sorted((apt / "sources.list.d").glob("*.sources"))]
    for f in files:
        try:
            text = f.read_text(errors="replace")
        except OSError:
            continue
        if re.search(r"^\s*(deb-src\s|Types:.*\bdeb-src\b)", text, re.M):
            return Found(True, str(f))
    return Found(False, "no deb-src entry in /etc/apt: `apt-get source iproute2` cannot work")


def _built(target: str) -> Found:
    from tcpvar.capture import kernel_build
    from tcpvar.errors import KernelBuildError

    try:
        path = kernel_build.cached(target)
    except KernelBuildError as exc:
        return Found(False, str(exc))
    return Found(True, str(path)) if path else Found(False, "not built yet")


def tshark_version() -> tuple[str | None, str | None]:
    """(path, version) of tshark, from `tshark --version`."""
    path = tools.find("tshark")
    return path, (tool_version(path, ["--version"]) if path else None)


def _tshark() -> Found:
    path, version = tshark_version()
    if path is None:
        return Found(False, "not installed")
    if version is None:
        return Found(False, f"{path} does not say its version")
    if tuple(int(p) for p in version.split(".")[:2]) < TSHARK_MIN:
        return Found(False, f"{path} is {version}; the Lua dissector needs "
                            f"{'.'.join(map(str, TSHARK_MIN))} or later (Debian 12's)", version)
    return Found(True, path, version)


def _java() -> Found:
    path = tools.find("java")
    if path is None:
        return Found(False, "not installed")
    version = tool_version(path, VERSION_ARGS["java"])
    if version is None or int(version.split(".")[0]) < JAVA_MIN:
        return Found(False, f"{path} is {version or 'of an unknown version'}; Spark needs "
                            f"{JAVA_MIN} or later", version)
    return Found(True, path, version)


def _dissector() -> Found:
    from tcpvar.pipelines import wireshark

    where = wireshark.personal_plugin_dir() / wireshark.LUA_NAME
    if not where.is_file():
        return Found(False, f"not in {where.parent}")
    if where.read_bytes() != wireshark.dissector_text():
        return Found(False, f"{where} differs from this tcpvar's (an older copy?)")
    return Found(True, str(where))
