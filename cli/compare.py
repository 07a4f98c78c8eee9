"""tcpvar compare: tables across runs, grouped by their parameters, with CIs."""
from __future__ import annotations

import click

from .options import db_option, json_option


@click.command(short_help="Compare runs grouped by their parameters: means and 95 % CIs.")
@click.option("--study", "studies", multiple=True, metavar="NAME",
              help="The runs of a study (repeatable; default: every run in the store).")
@click.option("--run", "run_ids", multiple=True, type=click.IntRange(min=1), metavar="ID",
              help="A run by its id (repeatable).")
@click.option("--by", "by", default="cc", show_default=True, metavar="KEY,...",
              help="Parameters to group by: cc, rtt, loss, bw, buffer, duration, flows, mode, "
                   "ngwa, wbrto, ... and study, backend, kernel.")
@db_option("to read")
@click.option("--layout", default="groups", show_default=True,
              type=click.Choice(["groups", "variants", "fairness", "friendliness"]),
              help="groups: a row per group, every metric. As the papers' tables: variants "
                   "(a row per variant, a column per value of the other keys, one --metric), "
                   "fairness (connection 1, connection 2, Jain), friendliness (Reno, "
                   "variant, ratio).")
@click.option("--metric", default="iperf3_mbps", show_default=True, metavar="NAME",
              help="The metric of --layout variants, --test and --plot-kind cdf|box "
                   "(docs/compare.md names them).")
@click.option("--test", "test", is_flag=True,
              help="Also test every pair of groups on --metric: Welch's t-test (Mann-Whitney "
                   "U where a group's values do not look normal), p-values Holm-corrected "
                   "over the pairs, the repeats per group that would tell them apart (power "
                   "0.8), and whether their 95 % intervals overlap.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="Also draw a figure across runs (.png, .svg or .pdf): see --plot-kind.")
@click.option("--plot-kind", default="scatter", show_default=True,
              type=click.Choice(["scatter", "cdf", "box"]),
              help="scatter: throughput against the 95th-percentile RTT, a point per run and "
                   "each group's mean with its CI; cdf, box: how --metric spreads across "
                   "each group's runs.")
@click.option("--fct-size", "fct_size", metavar="SIZE",
              help="The short flows' class whose completion times the fct metrics give "
                   "(100kb, 1mb)  [default: each run's smallest]")
@click.option("--faithful-only", is_flag=True,
              help="Leave out the runs whose fidelity check failed (docs/run.md); without it "
                   "they are counted and flagged.")
@json_option("Print JSON (docs/compare.md).", format_choice=True)
@click.option("--csv", "fmt", flag_value="csv",
              help="Print CSV, one row per group (per pair of groups with --test).")
@click.option("--markdown", "fmt", flag_value="markdown", help="Print a Markdown table.")
def compare(studies, run_ids, by, db_path, layout, metric, test, plot_path, plot_kind,
            fct_size, faithful_only, fmt):
    """Group complete runs by parameters and give, per group, the number of
    runs and the mean and 95 % confidence interval (Student's t) of
    throughput, goodput, iperf3's rate, retransmitted packets, RTT, Jain's
    index and friendliness against Reno. Interrupted and failed runs are
    named and left out; runs whose fidelity check failed are flagged per
    group (left out with --faithful-only).

    \b
    Examples:
      tcpvar compare --study rtts --by cc,rtt
      tcpvar compare --study rtts --by cc --markdown
      tcpvar compare --run 4 --run 5 --by kernel --json
      tcpvar compare --study rtts --by cc,rtt --layout variants
      tcpvar compare --study fair --by cc --layout fairness --markdown
      tcpvar compare --study rtts --by cc --plot rtts.png
      tcpvar compare --study rtts --by cc,rtt --faithful-only
      tcpvar compare --study rtts --by cc --test --metric jain
      tcpvar compare --study aqm --by aqm --metric latency_p50_ms --plot l.png --plot-kind box
    """
    from tcpvar.analyzers.compare import check_layout, parse_keys, select_runs
    from tcpvar.analyzers.compare import compare as group_runs
    from tcpvar.analyzers.significance import pairwise
    from tcpvar.capture.units import parse_size
    from tcpvar.report import compare as render
    from tcpvar.report import figures, tabular, terminal
    from tcpvar.store import Store

    keys = parse_keys(by)
    check_layout(layout, keys, metric)
    if plot_path:
        figures.check_format(plot_path)
    Store(db_path, read_only=True).close()      # no such store: say so, create none
    with Store(db_path) as store:               # older stores get the study columns
        doc = group_runs(store.con, select_runs(store.con, list(studies), list(run_ids)), keys,
                         faithful_only, parse_size(fct_size, "--fct-size") if fct_size else None)
    if test:
        doc["tests"] = pairwise(doc["groups"], metric)
    title = f"{', '.join(studies) or 'runs'} by {', '.join(keys)}"
    if plot_path:
        figures.save({**doc, "kind": plot_kind, "title": title, "metric": metric}, plot_path)
    if fmt == "json":
        terminal.data(tabular.to_json(doc))
    elif fmt == "csv":
        terminal.data(render.tests_csv(doc["tests"]) if test else render.to_csv(doc))
    elif fmt == "markdown":
        terminal.data(render.markdown(doc, layout, metric)
                      + ("\n" + render.tests_markdown(doc["tests"]) if test else ""))
    else:
        terminal.show(render.table(doc, title, layout, metric))
        if test:
            terminal.show(render.tests_table(doc["tests"]))
        for line in render.notes(doc):
            terminal.note(line)
    if plot_path:
        terminal.note(f"figure: {plot_path}")
