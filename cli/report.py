"""tcpvar report: one self-contained HTML page of runs, captures or a study."""
from __future__ import annotations

import click

from tcpvar.errors import UsageError

from .options import db_option, quiet_option


@click.command(short_help="Write an HTML report of runs, captures or a study.")
@click.argument("targets", nargs=-1, metavar="[TARGET...]")
@click.option("--study", metavar="NAME",
              help="Report on a study instead: its comparison table, the tests of every "
                   "pair of groups and a box plot per metric.")
@click.option("--by", metavar="KEY[,KEY]",
              help="With --study: group its runs by these run options  [default: the "
                   "options whose values differ between its runs]")
@click.option("--metric", "metrics", multiple=True, metavar="NAME",
              help="With --study: a metric to test and draw, again for more  [default: "
                   "iperf3_mbps, jain, rtt_p95_ms, queue_delay_p95_ms, latency_p50_ms and "
                   "fct_p95_ms, those the runs have]")
@click.option("-o", "--output", default="report.html", show_default=True,
              type=click.Path(dir_okay=False), metavar="FILE.html",
              help="Where to write the page.")
@click.option("--title", help="The page's title  [default: what it reports on]")
@db_option("to read (and to store TARGETs into)")
@quiet_option()
def report(targets, study, by, metrics, output, title, db_path, quiet):
    """Write a report of each TARGET (a run: run:ID or its folder; or a
    capture file) into one HTML page: its parameters, host, kernel and tools,
    its summary table, the bottleneck and tcp_probe accounting, and its
    figures. The page holds everything (figures embedded as PNG): it opens
    offline and can be archived or sent as one file. `tcpvar run` leaves
    one in every run folder.

    With --study NAME the page is the study's: its runs grouped as
    `tcpvar compare` groups them, each group's mean and 95 % interval of
    every metric, Welch's or Mann-Whitney's test of every pair of groups
    with Holm's correction and the repeats that would tell them apart, and
    a box plot of each tested metric across the runs.

    \b
    Examples:
      tcpvar report run:3
      tcpvar report run:3 run:4 -o cubic-vs-bbr.html
      tcpvar report trace.pcapng -o trace.html
      tcpvar report --study aqm-latency --metric latency_p50_ms -o aqm.html
    """
    from tcpvar.pipelines.report import report_parts, study_report
    from tcpvar.report import html, terminal

    if bool(study) == bool(targets):
        raise UsageError("give TARGETs (runs or captures) or --study NAME, not both")
    if (by or metrics) and not study:
        raise UsageError("--by and --metric shape a study's page: give --study NAME")
    with terminal.file_progress("reading", quiet) as progress:
        parts = study_report(db_path, study, by, list(metrics)) if study else \
            report_parts(db_path, targets, progress)
    default = f"tcpvar report: study {study}" if study else \
        "tcpvar report: " + ", ".join(targets)
    path = html.write(title or default, parts, output)
    terminal.note(f"wrote {path}")
