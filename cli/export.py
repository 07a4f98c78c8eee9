"""tcpvar export: the store's tables as Parquet."""
from __future__ import annotations

import click

from .options import db_option


@click.command(short_help="Write the store's tables as Parquet, for Spark, Trino or pandas.")
@click.option("--parquet", "out", required=True, type=click.Path(file_okay=False),
              metavar="DIR", help="A new folder: one sub-folder per table.")
@click.option("--study", "studies", multiple=True, metavar="NAME",
              help="Only the runs of this study, and their captures (repeatable).")
@click.option("--run", "run_ids", multiple=True, type=click.IntRange(min=1), metavar="ID",
              help="Only this run, and its captures (repeatable).")
@db_option("to read")
def export(out, studies, run_ids, db_path):
    """Write the store's tables to DIR as Parquet (zstd), Hive-partitioned:
    runs by study, a run's tables (flows, qdisc_stats, iperf_intervals,
    probe_events, fidelity, hops, latency, queue_delays, backlog_samples,
    short_flows) by run_id, a capture's tables (captures, packets,
    connections, dir_counters, retransmit_events, throughput) by
    capture_id; columns as in docs/schema.md. Without --study or --run, the
    whole store. `tcpvar merge DIR` reads such a folder back into a store.

    \b
    Examples:
      tcpvar export --parquet out/ --db study.duckdb
      tcpvar export --parquet rtts/ --study rtts
      spark.read.parquet("out/packets").groupBy("capture_id").count()
    """
    from tcpvar.report import terminal
    from tcpvar.store import Store
    from tcpvar.store.parquet import export as export_store

    with Store(db_path, read_only=True) as store:
        rows = export_store(store, out, list(studies), list(run_ids))
    terminal.note(f"{out}: " + ", ".join(f"{t} {n:,}" for t, n in rows.items() if n))
