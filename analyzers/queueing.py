"""The bottleneck's queueing delay and occupancy, packet by packet
(sql/queue_delays.sql), from the captures on either side of its queue: the
forward bottleneck's, a parking lot's first hop's. Built once when a run
is stored; the summary, compare and `tcpvar plot queue` read the
queue_delays table."""
from __future__ import annotations

from tcpvar.artefacts.checks import stored_params

from .fidelity import queues
from .sqlfiles import sql


def build_queue_delays(con, run_id: int) -> None:
    cur = con.execute("SELECT params, sender_capture, bottleneck_capture FROM runs "
                      "WHERE run_id = $1", [run_id])
    names = [d[0] for d in cur.description]
    run = dict(zip(names, cur.fetchone()), run_id=run_id)
    p = stored_params(run["params"], f"run {run_id} of the store") or {}
    if not p:
        return
    _, arrivals, departures, through, _ = queues(con, run, p)[0]
    if arrivals is None or departures is None:
        return
    flows = con.execute("SELECT flow, src_port FROM flows WHERE run_id = $1 AND "
                        "direction IS DISTINCT FROM 'reverse' ORDER BY flow", [run_id]).fetchall()
    con.execute(sql("passages"), {"sender": arrivals, "bottleneck": departures,
                                  "through": through})
    con.execute(sql("queue_delays"), {"run_id": run_id, "numbers": [f for f, _ in flows],
                                      "flows": [port for _, port in flows]})
