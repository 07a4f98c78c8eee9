"""The short flows of a run folder (--short: short.jsonl, a line per
transfer as the client ended it) -> the short_flows table. The file is
untrusted: checked line by line, bounded. Their completion times from the
sender capture are added once it is stored (analyzers/shortflows.py)."""
from __future__ import annotations

import json
from pathlib import Path

from tcpvar.artefacts import checks
from tcpvar.artefacts import run_folder as layout
from tcpvar.capture.shortflows import MAX_SHORT_FLOWS
from tcpvar.errors import InputError

MAX_BYTES = 16 << 20                # about 250 bytes a transfer
COLUMNS = ("id", "bytes", "planned_s", "start_ns", "sport", "outcome", "sent", "app_fct_ms")


def read_short(run_dir: Path) -> list[tuple] | None:
    """A row per transfer (COLUMNS), or None when the run had no short
    flows; InputError (one line) when the file is not the client's."""
    path = run_dir / layout.SHORT
    try:
        data = checks.read_bounded(path, MAX_BYTES, "tcpvar's short-flow records")
    except FileNotFoundError:
        return None
    lines = data.splitlines()
    if len(lines) > MAX_SHORT_FLOWS:
        raise InputError(f"{path}: more than {MAX_SHORT_FLOWS} transfers")
    rows, seen = [], set()
    for i, line in enumerate(lines, start=1):
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            if i == len(lines):
                break                   # the last line, cut short by a stopped run
            raise InputError(f"{path}: line {i} is not JSON") from None
        r = checks.check_short(f"{path}: line {i}", rec)
        if r["id"] in seen:
            raise InputError(f"{path}: line {i}: transfer {r['id']} is there twice")
        seen.add(r["id"])
        done = r["outcome"] == "complete" and r.get("start_ns") is not None \
            and r.get("end_ns") is not None and r["end_ns"] >= r["start_ns"]
        rows.append((r["id"], r["bytes"], r["planned_s"], r.get("start_ns"), r.get("sport"),
                     r["outcome"], r["sent"],
                     (r["end_ns"] - r["start_ns"]) / 1e6 if done else None))
    return rows


def read_finite(run_dir: Path, flow: int) -> dict | None:
    """A finite flow's (--size) record by its sender, checked; None when its
    sender wrote none (it was killed, or the run stopped)."""
    path = run_dir / layout.finite_record(flow)
    try:
        data = checks.read_bounded(path, 64 << 10, "a finite flow's record")
    except FileNotFoundError:
        return None
    line = data.strip()
    if not line:
        return None
    try:
        rec = json.loads(line)
    except (ValueError, RecursionError):
        raise InputError(f"{path}: not JSON") from None
    return checks.check_short(str(path), rec)


def insert_short(con, run_id: int, rows: list[tuple]) -> None:
    con.executemany(f"INSERT INTO short_flows (run_id, {', '.join(COLUMNS)}) "
                    f"VALUES ({', '.join(['?'] * (len(COLUMNS) + 1))})",
                    [(run_id, *r) for r in rows])
