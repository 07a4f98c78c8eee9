"""The bottleneck's sampled backlog in a run folder (backlog.jsonl, the
runner's `tc -s` every 100 ms) -> the backlog_samples table: per sample
the queue under the rate limiter (the qdisc whose parent is 1:1). The file
is untrusted: checked line by line, bounded."""
from __future__ import annotations

import json
from pathlib import Path

from tcpvar.artefacts import checks
from tcpvar.artefacts import run_folder as layout
from tcpvar.errors import InputError

MAX_BYTES = 160 << 20               # tc prints about 600 bytes a sample
QUEUE_PARENT = "1:1"                # the bottleneck queue under HTB's class or TBF


def read_backlog(run_dir: Path) -> dict[str, list] | None:
    """Columns t_ns, packets, bytes, drops of the run's samples; None when
    the folder has none; InputError (one line) when it is not the runner's."""
    path = run_dir / layout.BACKLOG
    try:
        data = checks.read_bounded(path, MAX_BYTES, "tcpvar's backlog samples")
    except FileNotFoundError:
        return None
    out: dict[str, list] = {"t_ns": [], "packets": [], "bytes": [], "drops": []}
    for i, line in enumerate(data.splitlines(), start=1):
        if i > checks.MAX_BACKLOG_SAMPLES:
            raise InputError(f"{path}: more than {checks.MAX_BACKLOG_SAMPLES} samples")
        try:
            sample = json.loads(line)
        except (ValueError, RecursionError):
            if i == len(data.splitlines()):
                break                   # the last line, cut short by a stopped run
            raise InputError(f"{path}: line {i} is not JSON") from None
        queue = _queue(sample)
        values = [sample.get("t_ns") if isinstance(sample, dict) else None,
                  *(queue.get(k) for k in ("qlen", "backlog", "drops"))]
        if not all(checks.is_count(v) for v in values):
            raise InputError(f"{path}: line {i} is not a sample of the bottleneck's queue")
        for key, v in zip(out, values):
            out[key].append(v)
    return out


def _queue(sample) -> dict:
    qdiscs = sample.get("qdiscs") if isinstance(sample, dict) else None
    for q in qdiscs if isinstance(qdiscs, list) else ():
        if isinstance(q, dict) and q.get("parent") == QUEUE_PARENT:
            return q
    return {}


def insert_backlog(con, run_id: int, cols: dict[str, list]) -> None:
    con.execute("INSERT INTO backlog_samples SELECT $run_id, unnest($t_ns), unnest($packets), "
                "unnest($bytes), unnest($drops)", {"run_id": run_id, **cols})
