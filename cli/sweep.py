"""tcpvar sweep: a study, the product of run options' values × repeats."""
from __future__ import annotations

import click

from tcpvar.errors import ExitStatus

from .options import (
    backend_option,
    clock_option,
    jobs_option,
    json_option,
    kernel_option,
    quiet_option,
    session_options,
)


def _listed(name: str, metavar: str, text: str):
    return click.option(f"--{name.replace('_', '-')}", name, metavar=metavar, help=text)


@click.command(short_help="Run a study: variants × scenarios × repeats, resumable.")
@click.argument("study_file", required=False, type=click.Path(dir_okay=False))
@click.option("--name", metavar="NAME", help="The study's name, its runs' tag in the store "
                                             "(default: the study file's name, else one made from "
                                             "the options and printed).")
@_listed("cc", "NAME[+NAME],...", "Variants: one run each; '+' joins a run's flows "
                                  "(cubic+reno is one run of two flows).")
@_listed("rtt", "MS[+MS],...", "Base round-trip times; '+' gives a run's flows their own "
                             "(20+80).")
@_listed("loss", "PCT,...", "Random loss on the forward path, in percent.")
@_listed("jitter", "MS,...", "Delay variation of the forward path.")
@_listed("bw", "RATE,...", "Bottleneck rates (e.g. 10mbit,100mbit).")
@_listed("buffer", "SIZE,...", "Bottleneck queues: packets, bytes or bdp multiples.")
@_listed("duration", "S,...", "Lengths of the runs.")
@_listed("flows", "N,...", "Numbers of flows.")
@_listed("mode", "MODE,...", "single, fairness, friendliness.")
@_listed("start_gap", "S,...", "Seconds between flow starts.")
@_listed("bw_schedule", "T:RATE,...;...", "Bottleneck schedules, ';' between them.")
@_listed("shaper", "htb|tbf,...", "Rate limiters of the bottleneck.")
@_listed("aqm", "QDISC,...", "Bottleneck queues: bfifo, pfifo, red, codel, fq_codel, pie, "
                             "fq_pie, cake, fq, sfq.")
@_listed("aqm_params", "K=V,...;...", "The queues' own parameters, ';' between sets.")
@_listed("ecn", "on|off[+...],...", "ECN of the senders; '+' gives a run's flows their own.")
@_listed("reverse", "N,...", "Flows that send the other way (the last N of a run).")
@_listed("bw_reverse", "RATE,...", "Rates of the reverse bottleneck.")
@_listed("topology", "dumbbell|parking-lot,...", "Paths: one bottleneck, or hops in a row.")
@_listed("hops", "N,...", "Bottlenecks of the parking lot (2-8).")
@_listed("cross", "M,...", "Cross flows per hop of the parking lot.")
@_listed("rate", "RATE[+RATE],...", "Senders' rates (iperf3 -b); '+' gives a run's flows "
                                    "their own, 0 unlimited.")
@_listed("latency", "irtt|ping,...", "Latency probes beside the flows (latency under load).")
@_listed("latency_interval", "MS,...", "Gaps between the latency probe's packets.")
@_listed("size", "SIZE[+SIZE],...", "Finite flows' bytes; '+' gives a run's flows their own, "
                                    "0 runs a flow its duration.")
@_listed("short", "RATE:SIZE,...;...", "Short-flow classes beside the long flows, ';' between "
                                       "sets.")
@_listed("ngwa", "MODE,...", "NGWA modes 1-8 (the patched kernel).")
@_listed("wbrto", "SCALE,...", "WB-RTO scales: small, medium, wide (the patched kernel).")
@_listed("wbrto_unit", "MS,...", "WB-RTO units.")
@_listed("seed", "N,...", "Seeds of the runs' port choice.")
@click.option("--repeat", type=click.IntRange(1, 1000), metavar="N",
              help="Runs of every cell (default: the file's, else 1).")
@click.option("--shard", metavar="I/N",
              help="Run only part I of N of the study (every N-th run), for studies split "
                   "across machines; bring the stores together with tcpvar merge.")
@backend_option
@kernel_option
@clock_option
@jobs_option
@session_options
@click.option("--dry-run", is_flag=True,
              help="List the study's runs and those the store holds; run none.")
@json_option("Print JSON (docs/sweep.md).")
@quiet_option()
def sweep(study_file, name, repeat, shard, backend, kernel, jobs, boot_timeout, out_dir,
          db_path, dry_run, as_json, quiet, **given):
    """Run a study: every combination of the options' values, each
    repeated, every run a run of its own in the store, tagged with the
    study's name.

    Each option takes a comma-separated list of values; the options not
    given keep tcpvar run's defaults. A study file (TOML, docs/sweep.md)
    holds the same keys: a list sweeps, a single value is fixed; options
    given beside it override its values. Runs already in the store (same
    study, parameters and repetition, complete) are skipped, so running the
    same study again resumes it; Ctrl-C keeps every finished run, and after
    a sweep killed outright the next one stores the run folders it left.
    The runs of one kernel share one micro-VM boot.

    \b
    Examples:
      tcpvar sweep --name rtts --cc cubic,reno --rtt 50,100 --repeat 3
      tcpvar sweep --name mix --cc cubic+reno,bbr+reno --duration 60
      tcpvar sweep studies/rtts.toml --repeat 10
      tcpvar sweep studies/rtts.toml --shard 2/3 --db part2.duckdb
      tcpvar sweep --name gig --cc cubic,reno --bw 1gbit --clock virtual --jobs 2
      tcpvar compare --study rtts --by cc,rtt
    """
    from pathlib import Path

    from tcpvar.pipelines.sweep import preview, study_from
    from tcpvar.pipelines.sweep import sweep as run_study
    from tcpvar.report import compare, html, runs, terminal

    study = study_from(name, study_file, given, repeat, shard)
    if study.name_generated:    # the name compare --study needs, before the runs start
        terminal.note(f"sweep: study named {study.name} (give --name to choose one)")
    if dry_run:
        outcome = preview(db_path, study)
    else:
        with runs.LiveProgress(quiet=quiet) as progress:
            outcome = run_study(db_path, study, backend, kernel, Path(out_dir), boot_timeout,
                                progress, html.write_run_folder, jobs)
    entries = outcome.rows()
    if as_json:
        from tcpvar.report import tabular

        terminal.data(tabular.to_json({"study": study.name, "repeat": study.repeat,
                                      "sessions": outcome.backends, "runs": entries}))
    else:
        terminal.show(compare.sweep_table(study.name, entries, dry_run))
        if not dry_run:
            keys = ",".join(study.swept()) or "study"
            terminal.note(f"compare: tcpvar compare --db {db_path} --study {study.name} "
                          f"--by {keys}")
    if outcome.interrupted:
        terminal.error("interrupted; the finished runs are stored: run the same sweep to resume")
        return ExitStatus.INTERRUPTED
    failed = [e for e in entries if e["status"] == "failed"]
    if failed:
        terminal.error(f"run {failed[0]['name']} failed; run the same sweep to retry what is "
                       f"missing")
        return ExitStatus.TESTBED
    return ExitStatus.OK
