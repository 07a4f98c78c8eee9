"""Ctrl-C, SIGTERM and SIGHUP end tcpvar's work one way: a KeyboardInterrupt
that unwinds through the `with` blocks removing testbeds and VMs. The
signal is also remembered, since a library may turn the exception into an
error of its own (DuckDB reports "Query interrupted")."""
from __future__ import annotations

import signal

UNWINDING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
received: int | None = None


def unwind_on_signals() -> None:
    """Install the handlers (a program that owns its process calls this)."""
    def on_signal(signum, _frame):
        global received
        received = signum
        raise KeyboardInterrupt(f"signal {signum}")

    for sig in UNWINDING:
        signal.signal(sig, on_signal)
