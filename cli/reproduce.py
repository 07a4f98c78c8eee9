"""tcpvar reproduce: a seed paper's tables, tcpvar's values beside the paper's."""
from __future__ import annotations

import click

from tcpvar.errors import ExitStatus

from .options import (
    backend_option,
    clock_option,
    jobs_option,
    json_option,
    quiet_option,
    session_options,
)


@click.command(short_help="Reproduce a seed paper's tables, the paper's numbers beside.")
@click.argument("study", metavar="STUDY")
@click.option("--scale", default="small", show_default=True,
              type=click.Choice(["smoke", "small", "full", "paper"]),
              help="How far rates, durations, repeats (and, for smoke, variants and "
                   "columns) are cut down; paper keeps the paper's rates on virtual time. "
                   "The output says what changed.")
@click.option("--table", "only", multiple=True, metavar="ID",
              help="Only this table of the paper (repeatable; default: the scale's).")
@backend_option
@clock_option
@jobs_option
@session_options
@click.option("--faithful-only", is_flag=True,
              help="Leave out of the means the runs whose fidelity check failed (docs/run.md); "
                   "without it they are counted and marked.")
@click.option("--dry-run", is_flag=True,
              help="Show the tables and the runs they need, with what the store holds; "
                   "run none.")
@json_option("Print JSON (docs/reproduce.md).", format_choice=True)
@click.option("--markdown", "fmt", flag_value="markdown", help="Print Markdown tables.")
@quiet_option()
def reproduce(study, scale, only, backend, clock, jobs, boot_timeout, out_dir, db_path,
              faithful_only, dry_run, fmt, quiet):
    """Run the study behind a seed paper's tables and print each table with
    tcpvar's mean and 95 % confidence interval beside the paper's value.

    STUDY is callegari2011 (Callegari et al., Tables 2-11: 13 variants),
    ngwa (Talau & Wille, Table 2: NGWA modes), wbrto (Psaras &
    Tsaoussidis, Tables 3 and 5: WB-RTO scales) or kinicki (Table 1: a
    mixed run of high-speed variants). The runs are a study of their own in
    the store (STUDY-SCALE): run the same command again to resume it, or
    with more tables; tcpvar compare reads it too.

    \b
    Examples:
      tcpvar reproduce callegari2011 --scale smoke
      tcpvar reproduce callegari2011 --table 8 --table 9
      tcpvar reproduce callegari2011 --scale full --dry-run
      tcpvar reproduce callegari2011 --scale paper --table 3 --jobs 2
      tcpvar reproduce wbrto --scale smoke
      tcpvar reproduce callegari2011 --markdown > callegari.md
    """
    from pathlib import Path

    from tcpvar.pipelines.reproduce import reproduce as run_it
    from tcpvar.report import compare, html, runs, tabular, terminal
    from tcpvar.report import reproduce as render
    from tcpvar.store import Store

    with runs.LiveProgress(quiet=quiet or dry_run) as progress:
        outcome = run_it(study, scale, list(only), db_path=db_path, dry_run=dry_run,
                         backend=backend, out_dir=Path(out_dir), boot_timeout_s=boot_timeout,
                         progress=progress, draw=html.write_run_folder, clock=clock,
                         jobs=jobs, faithful_only=faithful_only)
    if Path(db_path).exists():
        with Store(db_path, read_only=True) as store:
            doc = outcome.doc(store.con)
    else:
        doc = outcome.doc(None)
    if fmt == "json":
        terminal.data(tabular.to_json(doc))
    elif fmt == "markdown":
        terminal.data(render.markdown(doc))
    else:
        if dry_run:
            terminal.show(compare.sweep_table(outcome.study.name, doc["runs"], dry_run))
        for table in render.tables(doc):
            terminal.show(table)
        for line in render.notes(doc):
            terminal.note(line)
    if outcome.sweep.interrupted:
        terminal.error("interrupted; the finished runs are stored: run the same command to "
                       "resume")
        return ExitStatus.INTERRUPTED
    if any(r["status"] == "failed" for r in doc["runs"]):
        terminal.error("a run failed (its row says which); run the same command to retry "
                       "what is missing")
        return ExitStatus.TESTBED
    return ExitStatus.OK
