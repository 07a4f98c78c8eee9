"""JSON and CSV renderings of analysis results (field names: docs/analyze.md)."""
from __future__ import annotations

import csv
import io
import json
import math

from tcpvar.analyzers.connections import DIRECTIONS


def _clean(value):
    """JSON has no NaN or infinity: those become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def to_json(document: dict) -> str:
    return json.dumps(_clean(document), indent=2)


def connections_csv(captures: list[dict]) -> str:
    """One row per connection and direction: capture, conn, a, b, direction,
    then every statistic of that direction."""
    buf = io.StringIO()
    writer = None
    for cap in captures:
        for conn in cap["connections"]:
            for direction in DIRECTIONS:
                stats = conn[direction]
                row = {"capture": cap["path"], "conn": conn["id"], "a": conn["a"],
                       "b": conn["b"], "direction": direction, **stats}
                if writer is None:
                    writer = csv.DictWriter(buf, fieldnames=list(row), lineterminator="\n")
                    writer.writeheader()
                writer.writerow(row)
    return buf.getvalue()


def rows_csv(columns: list[str], rows: list[tuple]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(rows)
    return buf.getvalue()


def rows_json(columns: list[str], rows: list[tuple]) -> str:
    return json.dumps(_clean([dict(zip(columns, r)) for r in rows]), indent=2, default=str)
