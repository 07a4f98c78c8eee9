"""Work on a thread of its own while the caller goes on: opening the store,
DuckDB's instance, the throughput series. DuckDB and the native scanner
release Python's lock, so on a second core the work is hidden."""
from __future__ import annotations

import threading
from typing import Callable

from tcpvar import signals


class Beside:
    """@work() on a thread named @name, started by start(). wait() waits
    for it with a Ctrl-C held until it is done (an Event, not
    Thread.join(): a join that Ctrl-C interrupts marks the thread as ended
    while it runs, Python 3.11's bpo-45274 handling); result() then returns
    what it returned, or raises what it raised. A daemon thread unless
    @daemon is false (Python's exit then waits for it)."""

    def __init__(self, work: Callable[[], object], name: str, daemon: bool = True):
        self.value: object = None
        self.error: BaseException | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(work,), name=name,
                                        daemon=daemon)

    def _run(self, work: Callable[[], object]) -> None:
        try:
            self.value = work()
        except BaseException as exc:    # raised where the result is wanted
            self.error = exc
        finally:
            self._done.set()

    def start(self) -> Beside:
        self._thread.start()
        return self

    @property
    def started(self) -> bool:
        return self._thread.ident is not None

    def wait(self) -> None:
        with signals.held():
            self._done.wait()

    def result(self):
        self.wait()
        if self.error is not None:
            raise self.error
        return self.value
