"""One row of the `runs` table, written by both kinds of run: a run folder's
(ingest/run.py) and a probe session's (pipelines/probe.py), which
needs none of the pcap ingest."""
from __future__ import annotations


def new_run_id(con) -> int:
    """The next run_id of the store's sequence."""
    return con.execute("SELECT nextval('run_ids')").fetchone()[0]


def insert_run(con, **columns) -> None:
    """One row of `runs`, by column name; the columns not given stay NULL."""
    names = ", ".join(columns)
    marks = ", ".join(f"${i}" for i in range(1, len(columns) + 1))
    con.execute(f"INSERT INTO runs ({names}) VALUES ({marks})", list(columns.values()))
