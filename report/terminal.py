"""The one place that writes to the terminal: data to stdout, diagnostics
(progress, warnings, errors) to stderr, so `tcpvar ... --json | jq` works.
Rich is imported only when something is shown with it."""
from __future__ import annotations

import contextlib
import functools
import sys

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


def show(renderable) -> None:
    """Rich output on stdout, at its natural width: a wide table is not
    squeezed into a narrow terminal (its lines wrap there instead)."""
    from rich.console import Console
    from rich.measure import Measurement

    console = out()
    natural = Measurement.get(console, console.options.update_width(10_000), renderable).maximum
    if natural > console.width:
        console = Console(highlight=False, markup=False, width=natural)
    console.print(renderable)


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


@contextlib.contextmanager
def file_progress(label: str, quiet: bool = False):
    """A transient byte progress bar on stderr; yields a progress reporter
    that moves it."""
    if quiet or not sys.stderr.isatty():
        yield ignore
        return
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    with Progress(TextColumn("{task.description}", markup=False), BarColumn(), DownloadColumn(),
                  TransferSpeedColumn(), TimeRemainingColumn(), console=err(),
                  transient=True) as progress:
        task = progress.add_task(printable(label), total=None)

        def update(event: Progress) -> None:
            progress.update(task, description=printable(event.phase or label),
                            completed=event.done, total=event.total)

        yield update
