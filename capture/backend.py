"""Which backend a run goes on: `netns` on the host kernel when it has
what the run needs (netem for delay or loss, the variants), else `vm`."""
from __future__ import annotations

import platform
import subprocess
from functools import cache
from pathlib import Path

from tcpvar.errors import TestbedError, UsageError

from .kernels import loaded_variants, module_variants
from .netns import TESTBED_TOOLS, need_root, need_tools
from .params import RunParams
from .testbed import new_tag

BACKENDS = ("auto", "netns", "vm")


def available_variants() -> set[str]:
    """The host kernel's congestion controls: loaded, built in, or as modules."""
    return loaded_variants() | module_variants(Path("/lib/modules") / platform.release())


_PROBE_ARGS = {"netem": ["delay", "1ms"],
               "red": ["limit", "60000", "min", "10000", "max", "30000", "avpkt", "1000"]}


@cache
def host_has_qdisc(kind: str) -> bool:
    """Try it: a qdisc of @kind on the loopback of a throwaway namespace
    (the kernel loads its module, where it has modules); RED has no
    defaults for its thresholds."""
    ns = f"tcpvar-{new_tag()}-qdisc"
    try:
        if subprocess.run(["ip", "netns", "add", ns], capture_output=True).returncode != 0:
            return False
        proc = subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo",
                               "root", kind, *_PROBE_ARGS.get(kind, [])],
                              capture_output=True)
        return proc.returncode == 0
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def host_has_netem() -> bool:
    return host_has_qdisc("netem")


def netns_gaps(params: RunParams) -> list[str]:
    """What the host kernel lacks for this run (empty: netns can serve)."""
    gaps = []
    if (params.max_rtt_ms > 0 or params.loss_pct > 0) and not host_has_netem():
        gaps.append("the host kernel has no netem (needed for --rtt, --loss and --jitter)")
    if params.aqm and not host_has_qdisc(params.aqm):
        gaps.append(f"the host kernel has no {params.aqm} qdisc (--aqm)")
    offered = available_variants()
    missing = [c for c in params.needed_ccs() if c not in offered]
    if missing:
        gaps.append(f"the host kernel lacks {', '.join(missing)} "
                    f"(it offers {', '.join(sorted(offered))})")
    return gaps


def choose(requested: str, params: RunParams, kernel: str | None) -> tuple[str, str]:
    """(backend, why) for --backend, or UsageError when the choice cannot serve;
    a piece the chosen backend lacks is an error before anything starts."""
    chosen, why = _choose(requested, params, kernel)
    if chosen == "vm":
        from .vm import need_vm_tools

        need_vm_tools()
    return chosen, why


def _choose(requested: str, params: RunParams, kernel: str | None) -> tuple[str, str]:
    if requested not in BACKENDS:
        raise UsageError(f"unknown backend {requested!r} (one of {', '.join(BACKENDS)})")
    need_root()
    need_tools(*TESTBED_TOOLS)
    if params.needs_patched_kernel:
        option = "--ngwa" if params.ngwa_mode is not None else "--wbrto"
        if requested == "netns" or kernel == "stock":
            raise UsageError(f"{option} needs the patched kernel of kernel-patches/, "
                             f"which runs in the micro-VM: use --backend vm or auto, "
                             f"--kernel patched (or patched-debug), or a bzImage built "
                             f"from it")
        return "vm", f"{option} needs the patched kernel, which boots in the micro-VM"
    if params.clock == "virtual":
        if requested == "netns":
            raise UsageError("--clock virtual is the micro-VM's (QEMU's instruction "
                             "counting): use --backend vm or auto")
        return "vm", "--clock virtual runs in the micro-VM"
    if kernel is not None:
        if requested == "netns":
            raise UsageError("--kernel chooses the micro-VM's kernel: use --backend vm or auto")
        return "vm", f"--kernel {kernel} boots in the micro-VM"
    gaps = netns_gaps(params)
    if requested == "netns":
        if gaps:
            raise TestbedError(f"the netns backend cannot serve: {gaps[0]}; "
                               f"use --backend vm")
        return "netns", "chosen with --backend netns"
    if requested == "vm":
        return "vm", "chosen with --backend vm"
    if gaps:
        return "vm", f"{gaps[0]}, so the run goes to the micro-VM"
    return "netns", "the host kernel has everything this run needs"
