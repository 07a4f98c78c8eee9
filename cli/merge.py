"""tcpvar merge: other stores' runs and captures into this one."""
from __future__ import annotations

import click

from .options import db_option


@click.command(short_help="Copy the runs and captures of other stores into this one.")
@click.argument("sources", nargs=-1, required=True, type=click.Path(exists=True),
                metavar="STORE...")
@db_option("to merge into")
def merge(sources, db_path):
    """Copy every run and capture of the STOREs into the store, with new ids:
    the parts of a study run on several machines (tcpvar sweep --shard)
    become one. A STORE is a DuckDB store, or a folder that `tcpvar export
    --parquet` wrote. What the store holds already (a run by its folder and
    start, a capture by its path and fingerprint) is not copied twice.

    \b
    Examples:
      tcpvar merge part1.duckdb part2.duckdb --db study.duckdb
      tcpvar merge exported/ --db study.duckdb
      tcpvar compare --db study.duckdb --study rtts --by cc,rtt
    """
    from tcpvar.report import terminal
    from tcpvar.store import Store
    from tcpvar.store.merge import merge as merge_store

    with Store(db_path) as store:
        for source in sources:
            n = merge_store(store, source)
            terminal.note(f"{source}: {n['runs']} runs and {n['captures']} captures copied"
                          + (f"; {n['runs_held']} runs and {n['captures_held']} captures "
                             f"were here already" if n["runs_held"] or n["captures_held"]
                             else ""))
