"""`tcpvar probe`: one recording session of live tcp_probe events, kept in
its folder (tcp_probe.csv/.json) and loaded into the store as a run of kind
'probe'."""
from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

from tcpvar import __version__
from tcpvar.errors import UsageError
from tcpvar.progress import Progress


def _default_dir() -> Path:
    return Path(time.strftime("probe-%Y%m%d-%H%M%S"))


def record_session(db_path, ports: list[int], addrs: list[str], cookie: int | None,
                   duration: float | None, source: str, out_dir=None, progress=None) -> dict:
    """Record until `duration` elapses or Ctrl-C/SIGTERM, then load. Returns
    {"session": {...}, "sockets": [per-socket statistics], "timeouts": [...]}."""
    from tcpvar.analyzers.probe import rto_stats, timeouts
    from tcpvar.capture import probe
    from tcpvar.ingest.probe import load_probe
    from tcpvar.ingest.run_row import insert_run, new_run_id
    from tcpvar.store import Store

    out = Path(out_dir) if out_dir else _default_dir()
    try:
        if out.exists() and not out.is_dir():
            raise UsageError(f"--dir {out}: exists and is not a folder")
        if out.is_dir() and (out / probe.CSV_NAME).exists():
            raise UsageError(f"--dir {out}: already holds a {probe.CSV_NAME}; "
                             "choose another folder")
    except OSError as exc:
        raise UsageError(f"--dir {out}: {exc.strerror}") from None
    problem = probe.filter_problem(ports, addrs)
    if problem:
        raise UsageError(problem)
    probe.need_root()                   # before the store is opened or created
    with Store(db_path) as store:      # a bad store fails before anything is recorded
        rec = probe.open_probe(out, ports, prefer=source, addrs=addrs, cookie=cookie)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"--dir {out}: cannot create it: {exc.strerror}") from None
        params = {"ports": ports, "addrs": addrs, "cookie": cookie, "duration": duration,
                  "source": source}
        run_id = new_run_id(store.con)
        rec.start()
        started_ns = rec.started_ns or time.time_ns()
        if progress:
            progress(Progress(f"recording tcp_probe events from {rec.source} ({rec.reason}) "
                              f"into {out}; "
                              f"{'for %gs' % duration if duration else 'Ctrl-C to stop'}"))
        status = "complete"
        stop = threading.Event()
        old_term = signal.signal(signal.SIGTERM, lambda *a: stop.set())
        try:
            stop.wait(duration)     # None: until a signal
        except KeyboardInterrupt:
            pass                    # Ctrl-C is how a session ends
        finally:
            signal.signal(signal.SIGTERM, old_term)
            stats = rec.stop()
        ended_ns = time.time_ns()
        with store.transaction() as con:
            insert_run(con, run_id=run_id, kind="probe", name=out.resolve().name,
                       dir=str(out.resolve()), kernel=os.uname().release,
                       params=json.dumps(params), started_ns=started_ns, ended_ns=ended_ns,
                       status=status,
                       error=f"{stats.lost} events lost" if stats.lost else None,
                       probe_source=stats.source, probe_events=stats.events,
                       probe_lost=stats.lost, tcpvar_version=__version__)
            loaded = load_probe(con, run_id, out / probe.CSV_NAME, [])
        session = {"run_id": run_id, "dir": str(out.resolve()), "source": stats.source,
                   "reason": rec.reason, "events": stats.events, "lost": stats.lost,
                   "loaded": loaded, "started_ns": started_ns, "ended_ns": ended_ns,
                   "status": status}
        return {"session": session, "sockets": rto_stats(store, run_id),
                "timeouts": timeouts(store, run_id)}
