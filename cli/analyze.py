"""tcpvar analyze: offline analysis of pcap and pcapng files."""
from __future__ import annotations

import click

from tcpvar.errors import ExitStatus, UsageError

from .options import Finite


def _pair(ctx, param, value):
    if value is None:
        return None
    try:
        variant, reference = (int(x) for x in value.split(":"))
    except ValueError:
        raise click.BadParameter(
            "expected VARIANT:REFERENCE connection numbers, e.g. 2:1") from None
    return variant, reference


@click.command(short_help="Analyse the TCP connections of pcap and pcapng captures.")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=True))
@click.option("--db", "db_path", default="tcpvar.duckdb", show_default=True,
              type=click.Path(), help="DuckDB store to write into.")
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON (docs/analyze.md) instead of tables.")
@click.option("--csv", "as_csv", is_flag=True,
              help="Print CSV: one row per connection and direction.")
@click.option("--interval", "interval_ms", default=100.0, show_default=True,
              type=Finite(min=0.001, max=3_600_000), metavar="MS",
              help="Width of the throughput series' intervals, in ms.")
@click.option("--fairness", is_flag=True,
              help="Print Jain's index over the flows, whole capture and per interval.")
@click.option("--flow", "flows", multiple=True, type=click.IntRange(min=1), metavar="N",
              help="A connection to include in --fairness (repeatable; default: every "
                   "flow with at least 1% of the largest flow's bytes).")
@click.option("--pair", callback=_pair, metavar="VARIANT:REFERENCE",
              help="Friendliness of connection VARIANT against connection REFERENCE "
                   "(e.g. the Reno background flow).")
@click.option("--stats-only", is_flag=True,
              help="Skip the packets table: fastest, but no time series.")
@click.option("--rto-min", "rto_min_ms", default=200.0, show_default=True,
              type=Finite(min=0, max=3_600_000), metavar="MS",
              help="Least silence before a resend counts as a timeout (Linux: 200 ms).")
@click.option("--hw-dups", "hwdup_us", default=0.0, type=Finite(min=0, max=1_000_000),
              metavar="US",
              help="Treat identical copies of a segment closer than US microseconds as "
                   "capture artefacts, not retransmissions.")
@click.option("--plot", "plot_dir", type=click.Path(file_okay=False), metavar="DIR",
              help="Write every kind of `tcpvar plot` figure of each capture to "
                   "DIR/NAME-KIND.png.")
@click.option("--force", is_flag=True, help="Read files again even if the store has them.")
@click.option("-j", "--jobs", default=0, type=click.IntRange(min=0), metavar="N",
              help="Files read at once, each by a worker thread  [default: one per core].")
@click.option("-q", "--quiet", is_flag=True, help="No progress display.")
def analyze(files, db_path, as_json, as_csv, interval_ms, fairness, flows, pair, stats_only,
            rto_min_ms, hwdup_us, plot_dir, force, jobs, quiet):
    """Analyse TCP connections in capture FILES, in the spirit of tcptrace -l -r.

    Reads pcap and pcapng (Ethernet, Linux SLL/SLL2, raw IP, 802.1Q, loopback,
    PPP; IPv4 and IPv6) with libpcap, stores every segment and statistic in the
    DuckDB store, and prints per-connection statistics: packets, data and
    unique bytes, retransmissions, reordering, duplicate ACKs, RTT samples
    (Karn's rule), inferred timeouts and fast retransmits, throughput and
    goodput. Analysing a file again reuses what the store has. Several files
    are read at once, one per core (--jobs), each stored as its own capture.

    \b
    Examples:
      tcpvar analyze trace.pcapng
      tcpvar analyze --fairness --interval 500 two_flows.pcap
      tcpvar analyze --pair 2:1 --json vegas_vs_reno.pcap
      tcpvar analyze --plot plots/ bulk.pcap
      tcpvar analyze -q --jobs 8 captures/*.pcapng
    """
    import contextlib
    import time

    from tcpvar import analysis
    from tcpvar.ingest.capture import ScanOptions
    from tcpvar.report import export, tables, terminal
    from tcpvar.store import Store

    if as_json and as_csv:
        raise UsageError("choose one of --json and --csv")
    if stats_only and plot_dir:
        raise UsageError("--plot needs the time series, which --stats-only skips")
    table_only = not (as_json or as_csv or fairness or pair)
    options = analysis.AnalyzeOptions(
        scan=ScanOptions(packets=not stats_only, rto_min_ms=rto_min_ms, hwdup_us=hwdup_us),
        interval_ms=interval_ms, force=force, fairness=fairness,
        flows=list(flows) or None, pair=pair, stats=tables.CONN_STATS if table_only else None)

    workers = analysis.workers(jobs, files)
    captures, outcomes, taken = [], [], set()
    start = time.monotonic()
    first = analysis.start_reading(list(files), options, workers)   # before the store opens
    with contextlib.closing(first) if first else contextlib.nullcontext(), \
            Store(db_path) as store, \
            terminal.file_progress(f"reading {files[0]}", quiet) as progress:
        for outcome in analysis.analyze_captures(store, list(files), options, workers,
                                                 progress, first):
            outcomes.append(outcome)
            if outcome.error:
                if len(files) == 1:
                    raise outcome.error
                terminal.error(str(outcome.error))
                continue
            doc = outcome.doc
            for warning in [doc["warning"], *doc.get("fairness", {}).get("warnings", [])]:
                if warning:
                    terminal.warn(f"{outcome.path}: {warning}")
            if plot_dir:
                _plot(store, doc, plot_dir, taken)
            captures.append(doc)
    speed = analysis.summary(outcomes, time.monotonic() - start, workers)
    if len(files) > 1 and not quiet:
        terminal.note(f"read {speed['captures_read']} captures, {speed['packets']:,} packets "
                      f"in {speed['seconds']:.2f} s ({speed['packets_per_s'] or 0:,} packets/s, "
                      f"{workers} worker{'s' if workers > 1 else ''})")
    failures = [o.error.status for o in outcomes if o.error]

    if as_json:
        terminal.data(export.to_json({"summary": speed, "captures": [
            {k: v for k, v in c.items() if k != "connections"} for c in captures],
            "connections": [dict(conn, capture=c["path"]) for c in captures
                            for conn in c["connections"]]}))
    elif as_csv:
        terminal.data(export.connections_csv(captures))
    else:
        _print_tables(captures)
    return failures[0] if failures else ExitStatus.OK


def _plot(store, doc: dict, plot_dir: str, taken: set[str]) -> None:
    from pathlib import Path

    from tcpvar.plot import capture_figures
    from tcpvar.report import figures, terminal

    for fig in capture_figures(store, doc["capture_id"], Path(doc["path"]), Path(plot_dir),
                               taken):
        terminal.note(f"wrote {figures.save(fig, fig['path'])}")


def _print_tables(captures: list[dict]) -> None:
    from tcpvar.report import tables, terminal

    for cap in captures:
        if terminal.stdout_is_terminal():
            terminal.show(tables.connections_table(cap))
        else:   # piped: plain aligned text, quick for any number of rows
            terminal.data(tables.connections_text(cap))
        if "fairness" in cap:
            terminal.show(tables.fairness_table(cap["path"], cap["fairness"]))
            for line in tables.fairness_lines(cap["fairness"]):
                terminal.data(line)
