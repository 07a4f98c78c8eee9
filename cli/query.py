"""tcpvar query: users' SQL against the store."""
from __future__ import annotations

import click

from .options import db_option, json_option


@click.command(short_help="Run SQL against the store.")
@click.argument("sql")
@db_option("to query")
@json_option("Print the rows as a JSON list of objects.")
@click.option("--csv", "as_csv", is_flag=True, help="Print the rows as CSV with a header.")
def query(sql, db_path, as_json, as_csv):
    """Run SQL against the store and print the result.

    The tables and views (captures, packets, connections, conn_stats,
    throughput, cwnd_estimate, rtt_samples, rto_timeline, packet_marks...)
    are described in docs/schema.md. The store is opened read-only.

    \b
    Examples:
      tcpvar query "SELECT conn, dir, goodput_bps FROM conn_stats"
      tcpvar query --csv "SELECT t_s, bps FROM throughput WHERE conn = 1 AND dir = 0"
    """
    from tcpvar.errors import UsageError
    from tcpvar.report import tables, tabular, terminal
    from tcpvar.store import Store

    if as_json and as_csv:
        raise UsageError("choose one of --json and --csv")
    with Store(db_path, read_only=True) as store:
        columns, rows = store.query(sql)
    if as_json:
        terminal.data(tabular.rows_json(columns, rows))
    elif as_csv:
        terminal.data(tabular.rows_csv(columns, rows))
    elif columns:
        terminal.show(tables.rows_table(columns, rows))
