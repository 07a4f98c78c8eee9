"""tcpvar report: one self-contained HTML page of runs and captures."""
from __future__ import annotations

import click

from .options import db_option, quiet_option


@click.command(short_help="Write an HTML report of runs and captures.")
@click.argument("targets", nargs=-1, required=True, metavar="TARGET...")
@click.option("-o", "--output", default="report.html", show_default=True,
              type=click.Path(dir_okay=False), metavar="FILE.html",
              help="Where to write the page.")
@click.option("--title", help="The page's title  [default: what it reports on]")
@db_option("to read (and to store TARGETs into)")
@quiet_option()
def report(targets, output, title, db_path, quiet):
    """Write a report of each TARGET (a run: run:ID or its folder; or a
    capture file) into one HTML page: its parameters, host, kernel and tools,
    its summary table, the bottleneck and tcp_probe accounting, and its
    figures. The page holds everything (figures embedded as PNG): it opens
    offline and can be archived or sent as one file. `tcpvar run` leaves
    one in every run folder.

    \b
    Examples:
      tcpvar report run:3
      tcpvar report run:3 run:4 -o cubic-vs-bbr.html
      tcpvar report trace.pcapng -o trace.html
    """
    from tcpvar.pipelines.report import report_parts
    from tcpvar.report import html, terminal

    with terminal.file_progress("reading", quiet) as progress:
        parts = report_parts(db_path, targets, progress)
    path = html.write(title or "tcpvar report: " + ", ".join(targets), parts, output)
    terminal.note(f"wrote {path}")
