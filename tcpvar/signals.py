"""Ctrl-C, SIGTERM and SIGHUP end tcpvar's work one way: a KeyboardInterrupt
that unwinds through the `with` blocks removing testbeds and VMs. The
signal is also remembered, since a library may turn the exception into an
error of its own (DuckDB reports "Query interrupted"), and bookkeeping that
must not stop half way holds it until it is done (held())."""
from __future__ import annotations

import contextlib
import signal
import threading

UNWINDING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
received: int | None = None
_holding = 0                 # blocks in held(), in any thread
_pending: int | None = None
_lock = threading.RLock()     # also taken by the handler, in the main thread


def unwind_on_signals() -> None:
    """Install the handlers (a program that owns its process calls this).
    A signal ignored when tcpvar starts stays ignored, as a shell means it:
    `nohup` ignores SIGHUP so a sweep outlives its terminal, and a script's
    background job ignores SIGINT so the script's Ctrl-C is not its own."""
    def on_signal(signum, _frame):
        global received, _pending
        received = signum
        with _lock:
            if _holding:
                _pending = signum
                return
        raise KeyboardInterrupt(f"signal {signum}")

    for sig in UNWINDING:
        if signal.getsignal(sig) != signal.SIG_IGN:
            signal.signal(sig, on_signal)


@contextlib.contextmanager
def held():
    """A signal arriving in the block interrupts once the block is done:
    blocked in this thread, and deferred by the handlers of
    unwind_on_signals when it reaches another thread (Python runs them in
    the main thread whichever thread the signal reached)."""
    global _holding, _pending
    with _lock:
        _holding += 1
    old = signal.pthread_sigmask(signal.SIG_BLOCK, UNWINDING)   # and whatever the handler
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        with _lock:
            _holding -= 1
            sig = _pending if not _holding else None
            if sig is not None:
                _pending = None
    if sig is not None:
        raise KeyboardInterrupt(f"signal {sig}")
