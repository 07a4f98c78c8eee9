"""Options that several commands share, defined once."""
from __future__ import annotations

import click


def session_options(command):
    """Where a capture session's runs go: the boot limit of the micro-VM,
    the folder of the run folders and the store (tcpvar run and sweep)."""
    for option in reversed((
        click.option("--boot-timeout", default=180.0, show_default=True, type=float,
                     metavar="S", help="Give up on a micro-VM that has not booted by then."),
        click.option("--out", "out_dir", default="runs", show_default=True,
                     type=click.Path(file_okay=False), help="Folder the run folders go into."),
        click.option("--db", "db_path", default="tcpvar.duckdb", show_default=True,
                     type=click.Path(), help="DuckDB store to write into."),
    )):
        command = option(command)
    return command
