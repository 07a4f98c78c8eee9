"""The tcpvar command's process, from its first line to its exit status
(the commands themselves: cli/main.py). Kept free of Click's import, so
that DuckDB can start setting up while Click and the command are imported."""
from __future__ import annotations

import atexit
import os
import sys
import threading

# commands that open the store before anything else: DuckDB's instance is
# started for them as the process starts (store.engine.start_early())
STORE_FIRST = frozenset({"analyze", "compare", "export", "load", "plot", "query", "report"})
_NO_WORK = frozenset({"-h", "--help", "-V", "--version"})


def entry() -> None:
    """The tcpvar command: SIGTERM and SIGHUP (a `kill`, a closed terminal)
    unwind like Ctrl-C, so a run or a sweep still removes its namespaces and
    its micro-VM and stores what it finished."""
    from tcpvar import signals

    signals.unwind_on_signals()
    _exit(_command(sys.argv[1:]))   # DuckDB's instance goes with the process


def run(args: list[str]) -> int:
    """The command @args name, run as its process runs it; its exit status.
    For callers whose process goes on: DuckDB's instance is freed."""
    try:
        return _command(args)
    finally:
        from tcpvar.store import engine

        engine.end_early()


def _command(args: list[str]) -> int:
    """The command, with DuckDB's instance started first when it opens
    the store first."""
    from tcpvar.errors import ExitStatus

    try:
        if command(args) in STORE_FIRST:
            from tcpvar.store import engine

            engine.start_early()
        from tcpvar.cli.main import main
    except KeyboardInterrupt:       # Ctrl-C as Python imports: nothing began yet
        print("tcpvar: error: interrupted", file=sys.stderr)
        return ExitStatus.INTERRUPTED
    return main(args)


def command(args: list[str]) -> str | None:
    """The command @args name (their first word that is not an option:
    tcpvar's own options take no value), or None when they ask only for
    help or the version."""
    if _NO_WORK.intersection(args):
        return None
    return next((arg for arg in args if not arg.startswith("-")), None)


def _exit(status: int) -> None:
    """End the process with @status, doing what Python's own exit does
    that matters (the atexit handlers run, stdout and stderr are flushed)
    but not freeing every module and object one by one: that takes 15-30
    ms, a tenth of a short `tcpvar analyze`, and the kernel takes the
    process's memory back whole. With threads of the command still
    running, Python's exit waits for them as usual."""
    if any(t.is_alive() and not t.daemon for t in threading.enumerate()
           if t is not threading.main_thread()):
        sys.exit(status)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):   # a reader that left (`| head`), a closed stream
            pass
    os._exit(status)
