"""Completion times from the sender capture, once a run is stored: the
short flows' (--short, sql/short_fct.sql) and the finite flows' (--size,
sql/flow_fct.sql); and the short flows' percentiles per size class for
the summary and compare (sql/run_short_flows.sql)."""
from __future__ import annotations

from tcpvar.artefacts.run_folder import SHORT_PORT

from .sqlfiles import sql


def build_fct(con, run_id: int) -> None:
    sender = con.execute("SELECT sender_capture FROM runs WHERE run_id = $1",
                         [run_id]).fetchone()
    if sender is None or sender[0] is None:
        return
    con.execute(sql("short_fct"), {"run_id": run_id, "sender": sender[0], "port": SHORT_PORT})
    con.execute(sql("flow_fct"), {"run_id": run_id})


def short_classes(con, run_id: int) -> list[dict]:
    """Per size class: the transfers, how they ended, and the percentiles of
    the completion times of those that completed; [] without short flows."""
    cur = con.execute(sql("run_short_flows"), {"run_id": run_id})
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]
