"""tcpvar report: one self-contained HTML page of runs and captures."""
from __future__ import annotations

import click


@click.command(short_help="Write an HTML report of runs and captures.")
@click.argument("targets", nargs=-1, required=True, metavar="TARGET...")
@click.option("-o", "--output", default="report.html", show_default=True,
              type=click.Path(dir_okay=False), metavar="FILE.html",
              help="Where to write the page.")
@click.option("--title", help="The page's title  [default: what it reports on]")
@click.option("--db", "db_path", default="tcpvar.duckdb", show_default=True,
              type=click.Path(), help="DuckDB store to read (and to store TARGETs into).")
@click.option("-q", "--quiet", is_flag=True, help="No progress display.")
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
    from tcpvar.report import html, terminal
    from tcpvar.reporting import report_parts
    from tcpvar.store import Store

    with Store(db_path) as store:
        with terminal.file_progress("reading", quiet) as progress:
            parts = report_parts(store, targets, progress)
    path = html.write(title or "tcpvar report: " + ", ".join(targets), parts, output)
    terminal.note(f"wrote {path}")
