"""tcpvar spark: many captures analysed on Apache Spark, one task per capture."""
from __future__ import annotations

import click

from tcpvar.errors import ExitStatus

from .options import Finite, json_option, quiet_option


@click.command(short_help="Analyse many captures on Apache Spark, one task per capture.")
@click.argument("files", nargs=-1, required=True, type=click.Path(), metavar="CAPTURE...")
@click.option("--out", "out", required=True, type=click.Path(file_okay=False), metavar="DIR",
              help="A new folder for the tables, laid out as `tcpvar export --parquet` "
                   "lays them out.")
@click.option("--master", default="local[*]", show_default=True, metavar="URL",
              help="Spark master: local[N] (N cores of this machine), spark://HOST:7077, "
                   "yarn, k8s://...")
@click.option("--shard", metavar="I/N",
              help="Take every N-th capture of the sorted list from the I-th on (the other "
                   "shards run elsewhere; `tcpvar merge` joins their folders).")
@click.option("--stats-only", is_flag=True, help="Skip the packets table.")
@click.option("--interval", "interval_ms", default=100.0, show_default=True,
              type=Finite(min=0.001, max=3_600_000), metavar="MS",
              help="Width of the throughput series' intervals, in ms.")
@click.option("--rto-min", "rto_min_ms", default=200.0, show_default=True,
              type=Finite(min=0, max=3_600_000), metavar="MS",
              help="Least silence before a resend counts as a timeout (Linux: 200 ms).")
@click.option("--hw-dups", "hwdup_us", default=0.0, type=Finite(min=0, max=1_000_000),
              metavar="US", help="Treat identical copies of a segment closer than US "
                                 "microseconds as capture artefacts.")
@json_option("Print the summary and each capture as JSON.")
@quiet_option("No progress display and no summary line.")
def spark(files, out, master, shard, stats_only, interval_ms, rto_min_ms, hwdup_us, as_json,
          quiet):
    """Analyse CAPTUREs (files, or folders holding them) on Apache Spark: one
    task per capture runs tcpvar's native scanner on an executor and writes
    the capture's tables (captures, packets, connections, dir_counters,
    retransmit_events, throughput) into DIR as Hive-partitioned Parquet,
    exactly as `tcpvar export --parquet` writes a store. A capture's id is
    its place in the sorted list of all CAPTUREs. `tcpvar merge DIR` reads
    the folder into a store; Spark, Trino and DuckDB read it as it is. On a
    cluster, every node must see the captures and DIR at the same paths, and
    have tcpvar installed (docs/scale.md).

    \b
    Examples:
      tcpvar spark captures/ --out tables/
      tcpvar spark --master spark://head:7077 /data/pcaps/ --out /data/tables/
      tcpvar spark /data/pcaps/ --shard 2/4 --out /data/part2/
      tcpvar merge tables/ --db all.duckdb
    """
    import sys

    from tcpvar.ingest.capture import ScanOptions
    from tcpvar.pipelines import spark as job
    from tcpvar.pipelines.analyze import AnalyzeOptions
    from tcpvar.pipelines.sweep import parse_shard
    from tcpvar.report import tabular, terminal

    options = AnalyzeOptions(scan=ScanOptions(packets=not stats_only, rto_min_ms=rto_min_ms,
                                              hwdup_us=hwdup_us), interval_ms=interval_ms)
    if not quiet:
        terminal.note(f"starting Spark ({master})")
    outcome = job.run(list(files), out, options, master,
                      parse_shard(shard) if shard else (1, 1),
                      progress=not quiet and sys.stderr.isatty())
    failed = [c for c in outcome.captures if "error" in c]
    for c in failed:
        terminal.error(c["error"])
    s = outcome.summary
    if not quiet:
        captures = f"{s['captures_read']} capture{'s' if s['captures_read'] != 1 else ''}"
        terminal.note(f"{s['out']}: {captures}, {s['packets']:,} packets in "
                      f"{s['seconds']:.1f} s ({s['packets_per_s'] or 0:,} packets/s on "
                      f"{s['cores']} cores)" + (f"; {len(failed)} failed" if failed else ""))
    if as_json:
        terminal.data(tabular.to_json({"summary": s, "captures": outcome.captures}))
    else:
        terminal.data(_table(outcome.captures))
    return failed[0]["status"] if failed else ExitStatus.OK


def _table(captures: list[dict]) -> str:
    head = ("id", "packets", "connections", "seconds", "host", "capture")
    rows = [(str(c["capture_id"]), f"{c['frames']:,}", str(c["connections"]),
             f"{c['seconds']:.2f}", c["host"], c["path"]) for c in captures if "error" not in c]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(head)]
    return "\n".join("  ".join(f"{v:>{w}}" if i < 4 else f"{v:<{w}}"
                               for i, (v, w) in enumerate(zip(r, widths))).rstrip()
                     for r in [head, *rows])
