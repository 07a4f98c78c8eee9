"""tcpvar kernel: build the patched kernel of kernel-patches/ and its tc."""
from __future__ import annotations

import click


@click.group(short_help="Build the kernel with NGWA, WB-RTO and the extended tcp_probe.")
def kernel():
    """The patched kernel of kernel-patches/: Debian's linux-source-6.1 with
    NGWA (endpoints and the ngwa qdisc), WB-RTO and an extended tcp:tcp_probe,
    built into a bzImage that `tcpvar run --kernel patched` boots in the
    micro-VM, and the tc that configures the ngwa qdisc.

    \b
    Examples:
      tcpvar kernel build
      tcpvar kernel path
    """


@kernel.command(short_help="Build (or find in the cache) the bzImage and tc.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), metavar="N",
              help="Parallel make jobs (default: CPUs + 1).")
@click.option("--no-tc", is_flag=True, help="Build the kernel only, not tc.")
@click.option("--debug", is_flag=True,
              help="Build the kernel with KASAN, UBSAN, lockdep and kmemleak (the one the "
                   "tests boot; `tcpvar run --kernel patched-debug`) instead.")
def build(jobs, no_tc, debug):
    """Unpack the pinned linux-source-6.1, apply the patch series with git am,
    build a bzImage with everything tcpvar needs built in, and build tc from
    Debian's iproute2 source with the ngwa qdisc. Results are cached by the
    hash of the series and the configuration: a second call is instant.

    \b
    Examples:
      tcpvar kernel build
      tcpvar kernel build -j 3 --no-tc
      tcpvar kernel build --debug
    """
    import time

    from tcpvar.capture.kernel_build import elapsed, run_build
    from tcpvar.report import terminal

    kernel_target = "kernel-debug" if debug else "kernel"
    for target in (kernel_target,) if no_tc else (kernel_target, "tc"):
        start = time.monotonic()
        with _status(f"{target}: starting") as update:

            def show(event, target=target, start=start):
                update(f"{target}: {event.phase} [{elapsed(start)}] {event.line[:60]}")
                if not event.line:
                    terminal.note(f"{target}: {event.phase}")

            path = run_build(target, show, jobs=jobs)
        terminal.data(f"{target}: {path}")


@kernel.command(short_help="Print the paths of the built bzImage and tc.")
def path():
    """Print the cached bzImages (kernel, kernel-debug) and tc, or say which
    is not built yet.

    \b
    Example:
      tcpvar kernel path
    """
    from tcpvar.capture.kernel_build import TARGETS, cached
    from tcpvar.errors import KernelBuildError
    from tcpvar.report import terminal

    found = {target: cached(target) for target in TARGETS}
    for target, where in found.items():
        if where is not None:
            terminal.data(f"{target}: {where}")
    missing = [t for t in ("kernel", "tc") if found[t] is None]
    if found["kernel-debug"] is not None and "kernel" in missing:
        missing.remove("kernel")
    if missing:
        raise KernelBuildError(f"not built yet: {', '.join(missing)} (run `tcpvar kernel build`)")


def _status(first: str):
    """A transient Rich status line on a terminal; nothing when piped."""
    import contextlib
    import sys

    from tcpvar.report import terminal

    if not sys.stderr.isatty():
        return contextlib.nullcontext(lambda text: None)

    @contextlib.contextmanager
    def show():
        with terminal.err().status(first) as status:
            yield lambda text: status.update(text)

    return show()
