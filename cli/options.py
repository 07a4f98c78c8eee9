"""Options that several commands share, defined once."""
from __future__ import annotations

import math

import click


class Finite(click.FloatRange):
    """click.FloatRange that also refuses nan and infinities: nan passes
    every range check, and neither has a place on a time axis or in C."""

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value} is not a finite number", param, ctx)
        return number


def session_options(command):
    """Where a capture session's runs go: the boot limit of the micro-VM,
    the folder of the run folders and the store (tcpvar run and sweep)."""
    for option in reversed((
        click.option("--boot-timeout", default=180.0, show_default=True,
                     type=Finite(min=0, min_open=True),
                     metavar="S", help="Give up on a micro-VM that has not booted by then."),
        click.option("--out", "out_dir", default="runs", show_default=True,
                     type=click.Path(file_okay=False), help="Folder the run folders go into."),
        click.option("--db", "db_path", default="tcpvar.duckdb", show_default=True,
                     type=click.Path(), help="DuckDB store to write into."),
    )):
        command = option(command)
    return command
