"""Named mutations of the analyzers, applied in the pytest process only
(nothing on disk changes, so others working in the same checkout are not
disturbed). Loaded as a pytest plugin (`-p mutants`, tests/mutation on the
path) with TCPVAR_MUTANT=NAME; run.py runs them one at a time.

A mutant changes what tcpvar computes or prints, the way a plausible bug
would: a text replacement in the SQL of store/views.sql or analyzers/sql/,
or a change of the output a command prints. Each names the tests that
should catch it (run.py runs those unless told otherwise)."""
from __future__ import annotations

import csv
import importlib
import io
import os
import pkgutil
import re
import sys
from dataclasses import dataclass, field
from typing import Callable

STATS = ["tests/test_vs_tcptrace.py::test_agrees_with_tcptrace",
         "tests/test_cli.py::test_csv_is_the_json_and_tcptrace",
         "tests/test_cli.py::test_table_agrees_with_tcptrace"]
SERIES = ["tests/test_series.py"]
CSV = ["tests/test_cli.py::test_csv_is_the_json_and_tcptrace"]
FAIRNESS = ["tests/test_fairness.py"]


@dataclass
class Mutant:
    name: str
    what: str
    tests: list[str]
    views: tuple[str, str] | None = None        # (old, new) in the views' SQL
    sql: dict[str, tuple[str, str]] = field(default_factory=dict)   # file -> (old, new)
    output: Callable[[], None] | None = None    # patches an output function


def _zero_csv_cells() -> None:
    """Every numeric statistic of `analyze --csv` becomes 0 (the columns
    after capture, conn, a, b and direction)."""
    number = re.compile(r"-?\d+(\.\d+)?(e-?\d+)?")

    def zero(text: str) -> str:
        rows = list(csv.reader(io.StringIO(text)))
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(rows[0])
        for row in rows[1:]:
            writer.writerow(row[:5] + ["0" if number.fullmatch(c) else c for c in row[5:]])
        return out.getvalue()

    for mod in _modules("tcpvar.report"):
        render = getattr(mod, "connections_csv", None)
        if callable(render):
            mod.connections_csv = lambda *a, _render=render, **kw: zero(_render(*a, **kw))
            return
    raise LookupError("no connections_csv in tcpvar.report: where does --csv render now?")


def _swap(text: str, a: str, b: str) -> tuple[str, str]:
    return text, text.replace(a, "\0").replace(b, a).replace("\0", b)


MUTANTS = {m.name: m for m in [
    Mutant("triple_dupacks+1", "conn_stats: triple dupacks + 1", STATS,
           views=("d.triple_dupacks,", "d.triple_dupacks + 1 AS triple_dupacks,")),
    Mutant("pure_acks+1", "conn_stats: pure ACKs + 1 (control)", STATS,
           views=("d.pure_acks,", "d.pure_acks + 1 AS pure_acks,")),
    Mutant("duplicate_acks+1", "conn_stats: duplicate ACKs + 1", STATS,
           views=("d.dupacks AS duplicate_acks", "d.dupacks + 1 AS duplicate_acks")),
    Mutant("unique_bytes+1", "conn_stats: unique bytes + 1", STATS,
           views=("d.data_bytes, d.unique_bytes,", "d.data_bytes, d.unique_bytes + 1 AS "
                                                  "unique_bytes,")),
    Mutant("rtt_min=0", "conn_stats: RTT minimum 0 wherever there are samples", STATS,
           views=("THEN d.rtt_min / 1e3 END", "THEN 0 END")),
    Mutant("rtt_min<->max", "conn_stats: RTT minimum and maximum swapped", STATS,
           views=_swap("d.rtt_min / 1e3 END AS rtt_min_ms", "d.rtt_min", "d.rtt_max")),
    Mutant("window_min<->max", "conn_stats: window minimum and maximum swapped", STATS,
           views=_swap("d.win_min AS window_min, d.win_max AS window_max",
                       "d.win_min", "d.win_max")),
    Mutant("goodput*2", "conn_stats: goodput doubled", STATS,
           views=("8 * d.unique_bytes / nullif", "16 * d.unique_bytes / nullif")),
    Mutant("csv_zero", "analyze --csv: every numeric cell 0", CSV, output=_zero_csv_cells),
    Mutant("series*2", "throughput series: bytes and bps doubled", SERIES,
           sql={"throughput": ("sum(bytes) AS bytes", "2 * sum(bytes) AS bytes")}),
    Mutant("series_bps*2", "throughput series: bps doubled, bytes kept", SERIES,
           sql={"throughput": ("8 * coalesce(s.bytes, 0) /", "16 * coalesce(s.bytes, 0) /")}),
    Mutant("series_bin+1", "throughput series: every interval one later", SERIES,
           sql={"throughput": ("g.bin::INTEGER,", "g.bin::INTEGER + 1,")}),
    Mutant("jain_interval_sqrt", "Jain per interval: its square root", FAIRNESS,
           sql={"jain_intervals": ("sum(x) * sum(x) / nullif(count(*) * sum(x * x), 0)",
                                   "sqrt(sum(x) * sum(x) / nullif(count(*) * sum(x * x), 0))")}),
]}


def _modules(package: str):
    """@package and its submodules, imported."""
    pkg = importlib.import_module(package)
    yield pkg
    for info in pkgutil.walk_packages(pkg.__path__, package + "."):
        try:
            yield importlib.import_module(info.name)
        except ImportError:
            continue


def _replace(text: str, old: str, new: str, where: str) -> str:
    if old not in text:         # the SQL moved on: the mutant must follow it
        raise LookupError(f"mutant's text not found in {where}: {old!r}")
    return text.replace(old, new)


def apply(mutant: Mutant) -> None:
    if mutant.views:
        from tcpvar.store import db

        views = db._views
        db._views = lambda: _replace(views(), *mutant.views, "the views")
        db._views()                 # fail now, not in a test, when the text is gone
    if mutant.sql:
        from tcpvar.analyzers import sqlfiles

        original = sqlfiles.sql

        def sql(name: str) -> str:
            text = original(name)
            if name in mutant.sql:
                text = _replace(text, *mutant.sql[name], f"analyzers/sql/{name}.sql")
            return text
        for name, (old, new) in mutant.sql.items():
            _replace(original(name), old, new, f"analyzers/sql/{name}.sql")
        # every module that imported sql() by name (the folders of the checkout
        # are mapped into tcpvar one by one: walk each)
        for package in ("tcpvar.analyzers", "tcpvar.pipelines", "tcpvar.store",
                        "tcpvar.ingest"):
            for _ in _modules(package):
                pass
        patched = [name for name, mod in list(sys.modules.items())
                   if name.startswith("tcpvar.") and getattr(mod, "sql", None) is original]
        for name in patched:
            sys.modules[name].sql = sql
        if patched == ["tcpvar.analyzers.sqlfiles"]:
            raise LookupError("no module calls analyzers.sqlfiles.sql(): where is the SQL read?")
    if mutant.output:
        mutant.output()


def pytest_configure(config) -> None:
    name = os.environ.get("TCPVAR_MUTANT")
    if name:
        apply(MUTANTS[name])


def pytest_report_header(config) -> str | None:
    name = os.environ.get("TCPVAR_MUTANT")
    return f"mutant: {name} ({MUTANTS[name].what})" if name else None
