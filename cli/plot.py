"""tcpvar plot: one figure of a run or a capture."""
from __future__ import annotations

import click

from tcpvar.analyzers.figures import KINDS

from .options import Finite, db_option, json_option, quiet_option


@click.command(short_help="Draw a figure of a run or a capture (PNG, SVG or PDF).")
@click.argument("kind", type=click.Choice(KINDS), metavar="KIND")
@click.argument("target", metavar="TARGET")
@click.option("-o", "--output", type=click.Path(dir_okay=False), metavar="FILE",
              help="Where to write it; .png, .svg or .pdf  [default: NAME-KIND.png]")
@click.option("--conn", "conns", multiple=True, type=click.IntRange(min=1), metavar="N",
              help="A connection of the capture, or a flow of the run, to show "
                   "(repeatable; default: every flow of a run, a capture's bulk flows).")
@click.option("--from", "from_s", type=Finite(min=0), metavar="S",
              help="Start of the time window, seconds on the figure's axis.")
@click.option("--to", "to_s", type=Finite(min=0), metavar="S",
              help="End of the time window.")
@click.option("--bin", "bin_ms", type=Finite(min=0.001, max=3_600_000),
              metavar="MS", help="Bin width of throughput and fairness "
                                 "[default: the flows' RTT, rounded up]")
@click.option("--dpi", default=150, show_default=True, type=click.IntRange(30, 1200), metavar="N",
              help="Resolution of a PNG (SVG and PDF are vector drawings).")
@db_option("to read (and to store TARGET into)")
@json_option("Also print the figure's data (series, marks, title) as JSON.")
@quiet_option()
def plot(kind, target, output, conns, from_s, to_s, bin_ms, dpi, db_path, as_json, quiet):
    """Draw the KIND figure of TARGET: a run (run:ID, or its folder) or a
    capture file (analysed first if the store does not have it).

    \b
    KIND is one of:
      tsg         time-sequence graph (tcptrace -S): segments, ACK and
                  receive-window lines, SACK blocks, retransmissions,
                  duplicate ACKs and zero windows (one connection)
      cwnd        tcp_probe cwnd and ssthresh of each sender, bytes in flight
                  from the capture, congestion states shaded
      throughput  goodput per flow and in total, the bottleneck's rate
      rtt         RTT samples of the capture, srtt from tcp_probe
      rto         the kernel's RTO over time, timeouts and their backoff
      fairness    Jain's index per interval
      ngwa        the NGWA window beside the advertised window
      window      the advertised window beside the outstanding data

    Probe, capture and iperf3 series share one time axis: 0 is the first
    record of the (sender) capture. Series are reduced in the store to one
    point range per pixel column, so any capture size draws quickly.

    \b
    Examples:
      tcpvar plot throughput run:3
      tcpvar plot cwnd runs/20261121-130245-single-cubic-eeae5b-r1 -o cwnd.pdf
      tcpvar plot tsg trace.pcapng --conn 2 --from 1.5 --to 2.5 -o tsg.svg
    """
    from tcpvar.pipelines.plot import PlotOptions, plot
    from tcpvar.report import figures, tabular, terminal

    if output:
        figures.check_format(output)
    options = PlotOptions(list(conns) or None, from_s, to_s, bin_ms / 1e3 if bin_ms else None)
    with terminal.file_progress(f"reading {target}", quiet) as progress:
        doc, default = plot(db_path, target, kind, options, progress)
    path = figures.save(doc, output or default, dpi)
    terminal.note(f"wrote {path}")
    if as_json:
        terminal.data(tabular.to_json(doc))
