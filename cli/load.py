"""tcpvar load: run folders into the store, and their summaries."""
from __future__ import annotations

import click

from tcpvar.errors import ExitStatus

from .options import db_option, json_option, quiet_option


@click.command(short_help="Load run folders into the store; print their summaries.")
@click.argument("run_dirs", nargs=-1, required=True, metavar="RUN_DIR...",
                type=click.Path())
@db_option("to write into")
@json_option("Print JSON (docs/run.md) instead of tables.")
@quiet_option()
def load(run_dirs, db_path, as_json, quiet):
    """Load the run folders RUN_DIR... into the store and summarise each run.

    Loads what `tcpvar run` wrote into a run folder (manifest, pcaps,
    tcp_probe events, iperf3 reports, queue statistics) and prints the same
    summary as `tcpvar run`: for a run whose storing failed, a run to put in
    another store, or run folders from another machine. A folder the store
    already holds is not loaded again: its stored summary is printed. A
    folder that is not a run folder is reported (exit status 3) and the
    others still load.

    \b
    Examples:
      tcpvar load runs/20261121-130245-single-cubic-eeae5b-r1
      tcpvar load --db study.duckdb runs/*
      tcpvar load --json runs/20261121-130245-single-cubic-eeae5b-r1
    """
    from tcpvar.pipelines.load import store_runs
    from tcpvar.report import runs, terminal

    with runs.LiveProgress(quiet=quiet) as progress:
        stored = store_runs(db_path, run_dirs, progress)
    for s in stored:
        if s.error is not None:
            terminal.error(str(s.error))
        elif s.already_stored:
            terminal.note(f"{s.dir}: already in the store as run {s.summary['run_id']}; "
                          f"not loaded again")
        elif s.summary["status"] == "running":
            terminal.warn(f"{s.dir}: the run is incomplete (its manifest says running: it "
                          f"never finished); loaded what is there")
    summaries = [s.summary for s in stored if s.summary is not None]
    if summaries or as_json:
        runs.print_runs(summaries, as_json)
    failed = [s.error for s in stored if s.error is not None]
    return failed[0].status if failed else ExitStatus.OK
