"""tcpvar run: iperf3 flows over the emulated dumbbell, a run per repetition."""
from __future__ import annotations

import click

from tcpvar.errors import ExitStatus

from .options import (
    backend_option,
    clock_option,
    json_option,
    kernel_option,
    quiet_option,
    session_options,
)


@click.command(short_help="Run iperf3 flows over an emulated path; capture, probe, summarise.")
@click.option("--cc", default="cubic", show_default=True, metavar="NAME[,NAME...]",
              help="Variant of the flows: one for all, or one per flow.")
@click.option("--rtt", "rtt_ms", default="100", show_default=True, metavar="MS[,MS...]",
              help="Base round-trip time (netem delay, half each way): one for every "
                   "flow, or one per flow.")
@click.option("--loss", "loss_pct", default=0.0, show_default=True, type=float, metavar="PCT",
              help="Random loss on the forward path, in percent.")
@click.option("--jitter", "jitter_ms", default=0.0, show_default=True, type=float, metavar="MS",
              help="The forward path's delay varies by up to this much either way "
                   "(netem, uniform), packets kept in order.")
@click.option("--bw", default="20mbit", show_default=True, metavar="RATE",
              help="Bottleneck rate (e.g. 100mbit, 1gbit).")
@click.option("--buffer", default="bdp", show_default=True, metavar="SIZE",
              help="Bottleneck queue: packets (100), bytes (64kb) or bandwidth-delay "
                   "products (bdp, 2bdp).")
@click.option("--duration", "duration_s", default=20.0, show_default=True, type=float,
              metavar="S", help="Length of the run (the paper's short runs: 20 s, long: 300 s).")
@click.option("--flows", type=int, metavar="N",
              help="Number of flows (default: 1, 2 for fairness and friendliness, the "
                   "length of the --cc list, or a parking lot's one flow plus its cross "
                   "flows).")
@click.option("--mode", default="single", show_default=True,
              type=click.Choice(["single", "fairness", "friendliness"]),
              help="fairness: N flows of one variant, the background flow first; "
                   "friendliness: the variant against a Reno background flow.")
@click.option("--start-gap", "start_gap_s", type=float, metavar="S",
              help="Seconds between flow starts (default: 0 for single, else 2).")
@click.option("--bw-schedule", metavar="T:RATE,...",
              help="Bottleneck rate over time, e.g. 0:1gbit,60:500mbit,120:1gbit.")
@click.option("--aqm", metavar="QDISC",
              help="Bottleneck queue: bfifo, pfifo, red, codel, fq_codel, pie, fq_pie, "
                   "cake, fq or sfq (default: pfifo or bfifo by --buffer's unit). Its limit "
                   "is --buffer.")
@click.option("--aqm-params", metavar="K=V,...",
              help="The queue's own parameters, as tc names them: target=5ms,interval=100ms, "
                   "flags such as ecn or noecn.")
@click.option("--ecn", metavar="on|off[,...]",
              help="Senders ask for ECN: one for every flow, or one per flow (default: on "
                   "for dctcp, else off). A marking AQM is told to mark.")
@click.option("--reverse", default=0, show_default=True, type=click.IntRange(0), metavar="N",
              help="The last N flows send the other way, from the receivers' side, through "
                   "a bottleneck of their own.")
@click.option("--bw-reverse", metavar="RATE",
              help="Rate of the reverse bottleneck, where the forward flows' ACKs queue "
                   "behind the reverse flows' data (default: --bw; the same queue and "
                   "--buffer). Without it and --reverse, the way back has no bottleneck.")
@click.option("--topology", default="dumbbell", show_default=True,
              metavar="dumbbell|parking-lot",
              help="parking-lot: --hops bottlenecks in a row, each with the rate, queue and "
                   "--buffer of the dumbbell's; the first flows cross them all, the last "
                   "--cross per hop enter before one hop and leave after it.")
@click.option("--hops", type=click.IntRange(1), metavar="N",
              help="Bottlenecks of the parking lot, 2 to 8 (default 2).")
@click.option("--cross", type=click.IntRange(0), metavar="M",
              help="Cross flows per hop of the parking lot (default 1): the last hops x M "
                   "flows, hop 1's first.")
@click.option("--rate", metavar="RATE[,RATE...]",
              help="Application-limited senders: iperf3 sends at most this (-b), one for "
                   "every flow or one per flow; 0 leaves a flow unlimited.")
@click.option("--size", metavar="SIZE[,SIZE...]",
              help="Finite flows: each sends SIZE bytes (100kb, 10mb) and ends, one for every "
                   "flow or one per flow (0: runs its duration); their completion times go "
                   "into the summary.")
@click.option("--short", metavar="RATE:SIZE[,...]",
              help="Short flows beside the long ones: SIZE-byte transfers (100kb, 1mb) "
                   "arriving RATE a second (Poisson), each a new connection from the first "
                   "flow's sender to its receiver with its variant; a class per RATE:SIZE. "
                   "Their flow completion times go into the summary.")
@click.option("--latency", type=click.Choice(["irtt", "ping"]),
              help="Latency under load: irtt (UDP, one-way delays too) or ping (ICMP) from "
                   "the first flow's sender to its receiver, through the bottleneck, for the "
                   "whole run.")
@click.option("--latency-interval", "latency_interval_ms", type=float, metavar="MS",
              help="Between the latency probe's packets (default: 10 for irtt, as Flent's "
                   "VoIP test; 200 for ping).")
@click.option("--shaper", default="htb", show_default=True, type=click.Choice(["htb", "tbf"]),
              help="Rate limiter of the bottleneck.")
@click.option("--repeat", default=1, show_default=True, type=int, metavar="N",
              help="Repetitions, each a run of its own.")
@click.option("--seed", default=0, show_default=True, type=int,
              help="Seed of the run's port choice, recorded with the run.")
@backend_option
@kernel_option
@clock_option
@click.option("--ngwa", type=click.IntRange(1, 8), metavar="MODE",
              help="NGWA mode 1-8 (Talau & Wille, Table 1) on every host, and the ngwa "
                   "qdisc as the bottleneck queue. Needs the patched kernel.")
@click.option("--wbrto", type=click.Choice(["small", "medium", "wide"]),
              help="WB-RTO on every host with this weight scale. Needs the patched kernel.")
@click.option("--wbrto-unit", "wbrto_unit_ms", default=1000, show_default=True,
              type=click.IntRange(1, 60000), metavar="MS",
              help="WB-RTO's unit: the RTO is drawn in (srtt, c x a_i x unit].")
@session_options
@json_option("Print JSON (docs/run.md) instead of tables.")
@quiet_option()
def run(cc, rtt_ms, loss_pct, jitter_ms, bw, buffer, duration_s, flows, mode, start_gap_s,
        bw_schedule, aqm, aqm_params, ecn, reverse, bw_reverse, topology, hops, cross, rate,
        size, short, latency, latency_interval_ms, shaper,
        repeat, seed, backend, kernel, clock, ngwa, wbrto, wbrto_unit_ms, boot_timeout, out_dir,
        db_path, as_json, quiet):
    """Run iperf3 flows over an emulated dumbbell (or parking lot) and summarise them.

    Builds the topology of Callegari et al. (senders, a router with the
    bottleneck queue, a router with netem delay and loss, receivers) in
    network namespaces, on the host kernel or inside a QEMU micro-VM, runs
    the flows, captures pcaps at the sender side and the bottleneck and the
    tcp_probe events of the flows, keeps every artefact in a run folder and
    loads it all into the DuckDB store. It ends with per-flow throughput
    (iperf3 and pcap), retransmissions, RTT, cwnd and RTO events, Jain's
    index and friendliness. Needs root.

    With --ngwa or --wbrto the run boots the kernel of kernel-patches/
    (built on first use, in minutes) with NGWA or WB-RTO switched on; the
    NGWA modes with a congestion window are the paper's with New Reno
    (--cc reno).

    \b
    Examples:
      tcpvar run --cc cubic --rtt 100
      tcpvar run --cc reno --mode fairness --duration 60
      tcpvar run --cc vegas --mode friendliness --json
      tcpvar run --cc htcp --bw-schedule 0:20mbit,20:10mbit,40:20mbit --duration 60
      tcpvar run --cc cubic --kernel patched --backend vm
      tcpvar run --cc cubic --rtt 100 --bw 1gbit --clock virtual
      tcpvar run --cc reno --mode fairness --ngwa 5 --buffer 100
      tcpvar run --cc reno --flows 12 --bw 1mbit --wbrto medium
      tcpvar run --cc cubic,bbr --aqm fq_codel --buffer 10bdp
      tcpvar run --cc dctcp --aqm codel --aqm-params ce_threshold=1ms
      tcpvar run --cc cubic,cubic --rtt 20,80
      tcpvar run --cc cubic,cubic --reverse 1 --bw-reverse 2mbit
      tcpvar run --cc reno --topology parking-lot --hops 3
      tcpvar run --cc cubic --aqm fq_codel --buffer 10bdp --latency irtt
      tcpvar run --cc reno,reno --rate 0,500kbit
    """
    from tcpvar.capture.params import make_params
    from tcpvar.capture.session import SessionRequest
    from tcpvar.pipelines.run import execute
    from tcpvar.report import html, runs, terminal

    params = make_params(cc=cc, rtt_ms=rtt_ms, loss_pct=loss_pct, jitter_ms=jitter_ms,
                         bw=bw, buffer=buffer, duration_s=duration_s, flows=flows, mode=mode,
                         start_gap_s=start_gap_s, schedule=bw_schedule, repeat=repeat,
                         seed=seed, shaper=shaper, ngwa=ngwa, wbrto=wbrto,
                         wbrto_unit_ms=wbrto_unit_ms, clock=clock or "auto", aqm=aqm,
                         aqm_params=aqm_params, ecn=ecn, reverse=reverse,
                         bw_reverse=bw_reverse, topology=topology, hops=hops, cross=cross,
                         latency=latency, latency_interval_ms=latency_interval_ms, rate=rate,
                         short=short, size=size)
    with runs.LiveProgress(quiet=quiet) as progress:
        outcome = execute(db_path, SessionRequest(params, backend, kernel, out_dir, boot_timeout),
                          progress, html.write_run_folder)
    runs.print_runs(outcome.summaries, as_json,
                    {"backend": outcome.backend, "reason": outcome.reason})
    if outcome.interrupted:
        terminal.error("interrupted; what was captured is kept and stored")
        return ExitStatus.INTERRUPTED
    failed = [s for s in outcome.summaries if s["status"] == "failed"]
    if failed:
        terminal.error(f"run {failed[0]['name']} failed: {failed[0]['error']}")
        return ExitStatus.TESTBED
    return ExitStatus.OK
