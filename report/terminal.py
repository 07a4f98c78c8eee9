"""The one place that writes to the terminal: data to stdout, diagnostics
(progress, warnings, errors) to stderr, so `tcpvar ... --json | jq` works."""
from __future__ import annotations

import contextlib
import sys

from rich.console import Console
from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn,
                           TimeRemainingColumn, TransferSpeedColumn)

out = Console(highlight=False)
if not out.is_terminal:  # piped tables keep their columns instead of folding to 80
    out = Console(highlight=False, width=200)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def warn(message: str) -> None:
    err.print(f"[yellow]warning:[/] {message}", markup=True)


def error(message: str) -> None:
    # one line, with markup off: file names may contain brackets
    err.print("tcpvar: error: ", style="bold red", end="")
    err.print(message, markup=False)


def data(text: str) -> None:
    """Machine-readable output, written as is."""
    sys.stdout.write(text)
    if not text.endswith("\n"):
        sys.stdout.write("\n")
    sys.stdout.flush()


@contextlib.contextmanager
def file_progress(label: str, quiet: bool = False):
    """A transient byte progress bar on stderr; yields update(done, total)."""
    if quiet or not err.is_terminal:
        yield lambda done, total: None
        return
    with Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                  TransferSpeedColumn(), TimeRemainingColumn(), console=err,
                  transient=True) as progress:
        task = progress.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        yield update
