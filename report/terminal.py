"""The one place that writes to the terminal: data to stdout, diagnostics
(progress, warnings, errors) to stderr, so `tcpvar ... --json | jq` works.
Rich is imported only when something is shown with it."""
from __future__ import annotations

import contextlib
import functools
import sys
import threading

from tcpvar.progress import Progress, ignore

from .untrusted import printable, printable_lines


@functools.cache
def out():
    """Rich console on stdout; piped, tables keep their columns (200 wide).
    Markup off: a cell or title that came from an input is shown as it is."""
    from rich.console import Console

    console = Console(highlight=False, markup=False)
    return console if console.is_terminal else Console(highlight=False, markup=False, width=200)


@functools.cache
def err():
    from rich.console import Console

    return Console(stderr=True, highlight=False, markup=False, soft_wrap=True)


def stdout_is_terminal() -> bool:
    return sys.stdout.isatty()


# wider than any table's natural width
WIDE = 10_000


def show(renderable) -> None:
    """Rich output on stdout, at its natural width: a wide table is not
    squeezed into a narrow terminal (its lines wrap there instead)."""
    from rich.console import Console
    from rich.measure import Measurement
    from rich.table import Table

    if isinstance(renderable, Table) and not renderable.expand:
        # a table takes its natural width on any wider console: printed
        # there, it is laid out once rather than measured first (10-20 ms)
        _wide().print(renderable)
        return
    console = out()
    natural = Measurement.get(console, console.options.update_width(WIDE), renderable).maximum
    if natural > console.width:
        console = Console(highlight=False, markup=False, width=natural)
    console.print(renderable)


@functools.cache
def _wide():
    from rich.console import Console

    return Console(highlight=False, markup=False, width=WIDE)


def note(message: str) -> None:
    """A plain line on stderr (messages quote paths and fields of inputs:
    their control characters are shown escaped, and it stays one line)."""
    print(printable(message), file=sys.stderr)


def warn(message: str) -> None:
    print(f"warning: {printable(message)}", file=sys.stderr)


def error(message: str) -> None:
    """One line on stderr: `tcpvar: error: ...`."""
    print(f"tcpvar: error: {printable(message)}", file=sys.stderr)


def data(text: str) -> None:
    """Machine-readable output, written as is into a pipe; on a terminal
    with control characters escaped (a CSV cell of somebody's store)."""
    if stdout_is_terminal():
        text = printable_lines(text)
    sys.stdout.write(text)
    if not text.endswith("\n"):
        sys.stdout.write("\n")
    sys.stdout.flush()


def note_phase(event: Progress) -> None:
    """A progress reporter that notes each event's phase on a line."""
    note(event.phase)


# a bar for work that lasts: a command done sooner shows none, and neither
# imports Rich's progress display nor starts its refresh thread
BAR_AFTER_S = 0.5


@contextlib.contextmanager
def file_progress(label: str, quiet: bool = False):
    """A transient byte progress bar on stderr once the block has lasted
    BAR_AFTER_S; yields a progress reporter that moves it."""
    if quiet or not sys.stderr.isatty():
        yield ignore
        return
    bar = _LateBar(printable(label))
    try:
        yield bar.update
    finally:
        bar.close()


class _LateBar:
    """The bar of file_progress(), started on a timer's thread with the
    last progress reported until then."""

    def __init__(self, label: str):
        self.label = label
        self.lock = threading.Lock()
        self.last: Progress | None = None
        self.shown = None           # (Rich's Progress, its task) once started
        self.closed = False
        self.timer = threading.Timer(BAR_AFTER_S, self._start)
        self.timer.daemon = True
        self.timer.start()

    def _start(self) -> None:
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )
        from rich.progress import Progress as Bar

        bar = Bar(TextColumn("{task.description}", markup=False), BarColumn(), DownloadColumn(),
                  TransferSpeedColumn(), TimeRemainingColumn(), console=err(), transient=True)
        with self.lock:
            if self.closed:
                return
            bar.start()
            self.shown = bar, bar.add_task(self.label, total=None)
            if self.last is not None:
                self._show(self.last)

    def _show(self, event: Progress) -> None:
        bar, task = self.shown
        bar.update(task, description=printable(event.phase or self.label),
                   completed=event.done, total=event.total)

    def update(self, event: Progress) -> None:
        with self.lock:
            self.last = event
            if self.shown is not None:
                self._show(event)

    def close(self) -> None:
        self.timer.cancel()
        with self.lock:
            self.closed = True
            shown, self.shown = self.shown, None
        if shown is not None:
            shown[0].stop()
