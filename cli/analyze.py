"""tcpvar analyze: offline analysis of pcap and pcapng files."""
from __future__ import annotations

import click

from tcpvar.errors import UsageError

from .options import Finite, db_option, json_option, quiet_option


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
@db_option("to write into")
@json_option("Print JSON (docs/analyze.md) instead of tables.")
@click.option("--csv", "as_csv", is_flag=True,
              help="Print CSV: one row per connection and direction.")
@click.option("--interval", "interval_ms", default=100.0, show_default=True,
              type=Finite(min=0.001, max=3_600_000), metavar="MS",
              help="Width of the throughput series' intervals, in ms.")
@click.option("--fairness", is_flag=True,
              help="Print Jain's index over the flows, whole capture and per interval.")
@click.option("--conn", "conns", multiple=True, type=click.IntRange(min=1), metavar="N",
              help="A connection to include in --fairness (repeatable; default: every "
                   "connection with at least 1% of the largest one's bytes).")
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
@quiet_option()
def analyze(files, db_path, as_json, as_csv, interval_ms, fairness, conns, pair, stats_only,
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
    if as_json and as_csv:
        raise UsageError("choose one of --json and --csv")
    if stats_only and plot_dir:
        raise UsageError("--plot needs the time series, which --stats-only skips")
    from tcpvar.store.db import Opening

    with Opening(db_path) as opening:       # while the rest of the command is imported
        from tcpvar.ingest.capture import ScanOptions
        from tcpvar.pipelines.analyze import AnalyzeOptions, analyze_files
        from tcpvar.report import terminal

        options = AnalyzeOptions(
            scan=ScanOptions(packets=not stats_only, rto_min_ms=rto_min_ms, hwdup_us=hwdup_us),
            interval_ms=interval_ms, force=force, fairness=fairness,
            conns=list(conns) or None, pair=pair, brief=not (as_json or as_csv),
            read_back=as_json or as_csv)
        shown = _shown if as_json or as_csv else _shown_with_table
        with terminal.file_progress(f"reading {files[0]}", quiet) as progress:
            done = analyze_files(opening, files, options, jobs, progress, shown,
                                 plot_dir, _draw if plot_dir else None)
    speed = done.summary
    if len(files) > 1 and not quiet:
        terminal.note(f"read {speed['captures_read']} captures, {speed['packets']:,} packets "
                      f"in {speed['seconds']:.2f} s ({speed['packets_per_s'] or 0:,} packets/s, "
                      f"{done.workers} worker{'s' if done.workers > 1 else ''})")
    if as_json or as_csv:
        from tcpvar.report import tabular  # json and csv: only for these

        terminal.data(tabular.to_json(done.to_json()) if as_json
                      else tabular.connections_csv(done.captures))
    return done.status


def _shown(outcome, store=None) -> None:
    """A file's error or warnings, as each file is done."""
    from tcpvar.report import terminal

    if outcome.error:
        terminal.error(str(outcome.error))
    for warning in outcome.warnings:
        terminal.warn(f"{outcome.path}: {warning}")


# a terminal gets a Rich table up to this many connections, plain text beyond
# (Rich lays out a table in memory: slow and large for a scan's million)
RICH_MAX = 2_000
# plain text is laid out in Python up to this many connections, by DuckDB
# beyond: its query costs 15 ms to plan and run for a handful of rows (a
# tenth of a short command) but lays out a million in seconds; at 1,000
# connections the two take the same time
LAID_OUT_HERE = 500


def _shown_with_table(outcome, store) -> None:
    """_shown(), then the file's table of connections, read from the store a
    batch at a time (memory stays flat whatever their number), and its
    fairness."""
    from tcpvar.analyzers.connections import connection_batches, connection_count, connection_lines
    from tcpvar.report import tables, terminal

    _shown(outcome)
    cap = outcome.doc
    if cap is None:
        return
    count = len(cap["connections"]) if cap["connections"] is not None else \
        connection_count(store.con, cap["capture_id"])
    rich = terminal.stdout_is_terminal() and count <= RICH_MAX
    if rich or count <= LAID_OUT_HERE:
        conns = cap["connections"] if cap["connections"] is not None else \
            [c for batch in connection_batches(store.con, cap["capture_id"], brief=True)
             for c in batch]
    if rich:
        terminal.show(tables.connections_table({**cap, "connections": conns}))
    else:   # piped, or too many for Rich: plain aligned text
        batches = [tables.laid_out(conns)] if count <= LAID_OUT_HERE else \
            connection_lines(store.con, cap["capture_id"], tables.heading_widths())
        for text in tables.connections_lines(cap["path"], count, batches):
            terminal.data(text)
    if "fairness" in cap:
        terminal.show(tables.fairness_table(cap["path"], cap["fairness"]))
        for line in tables.fairness_lines(cap["fairness"]):
            terminal.data(line)


def _draw(fig: dict) -> None:
    from tcpvar.report import figures, terminal

    terminal.note(f"wrote {figures.save(fig, fig['path'])}")
