"""Rich tables for people: connections, fairness, query results. Rich is
imported by the tables that use it: plain text (a pipe) starts without it."""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from tcpvar.analyzers.connections import DIRECTIONS

from .untrusted import printable

if TYPE_CHECKING:
    from rich.table import Table


def _table(**kw) -> Table:
    from rich import box
    from rich.table import Table

    return Table(box=box.SIMPLE_HEAVY, **kw)


def si(value, unit: str = "", digits: int = 3) -> str:
    """1234567 -> '1.23 M' + unit; None -> '-'."""
    if value is None:
        return "-"
    size = abs(value)
    if size >= 1e9:
        return f"{value / 1e9:.{digits}g} G{unit}"
    if size >= 1e6:
        return f"{value / 1e6:.{digits}g} M{unit}"
    if size >= 1e3:
        return f"{value / 1e3:.{digits}g} k{unit}"
    return f"{float(value):.{digits}g} {unit}".rstrip()


def ms(value) -> str:
    return "-" if value is None else f"{value:.1f}"


CONN_COLUMNS = (  # header, alignment
    ("#", ">"), ("from → to", "<"), ("pkts", ">"), ("data pkts", ">"), ("data bytes", ">"),
    ("unique", ">"), ("rexmit pkts", ">"), ("rexmit bytes", ">"), ("ooo", ">"),
    ("dupacks", ">"), ("RTO/fast", ">"), ("RTT avg ms (n)", ">"), ("throughput", ">"),
    ("goodput", ">"))


def conn_rows(capture: dict):
    """Two rows a connection: the statistics analyzers.connections.SUMMARY_STATS names."""
    return _rows(capture["connections"])


def integer(value) -> str:
    """A count as it is; None -> '-'."""
    return "-" if value is None else str(value)


def _rows(conns):
    for conn in conns:
        for i, direction in enumerate(DIRECTIONS):
            s = conn[direction]
            ends = (conn["a"], conn["b"]) if direction == "a2b" else (conn["b"], conn["a"])
            yield (str(conn["id"]) if i == 0 else "", f"{ends[0]} → {ends[1]}",
                   integer(s["packets"]), integer(s["data_packets"]), si(s["data_bytes"], "B"),
                   si(s["unique_bytes"], "B"), integer(s["retransmitted_packets"]),
                   si(s["retransmitted_bytes"], "B"), integer(s["out_of_order_packets"]),
                   integer(s["duplicate_acks"]),
                   f"{integer(s['rto_events'])}/{integer(s['fast_retransmits'])}",
                   f"{ms(s['rtt_avg_ms'])} ({integer(s['rtt_samples'])})",
                   si(s["throughput_bps"], "bit/s"), si(s["goodput_bps"], "bit/s"))


def connections_table(capture: dict) -> Table:
    """The same figures as a Rich table, for a terminal: it fits the columns
    to the screen's width (slow to lay out for thousands of rows)."""
    t = _table(title=printable(f"{capture['path']}: {len(capture['connections'])} TCP "
                               f"connections"),
               title_justify="left")
    for header, align in CONN_COLUMNS:
        t.add_column(header, justify="right" if align == ">" else "left",
                     no_wrap=header != "from → to")
    for i, row in enumerate(conn_rows(capture)):    # endpoints from somebody's store
        t.add_row(*map(printable, row), end_section=bool(i % 2))
    return t


def heading_widths() -> list[int]:
    """The least width of each column of connections_lines(): its heading's."""
    return [len(h) for h, _ in CONN_COLUMNS]


def laid_out(conns: list[dict]) -> tuple[list[str], list[int]]:
    """@conns as the lines and widths of one batch of
    analyzers.connections.connection_lines(), laid out here from
    conn_rows()'s cells: for a few connections, in less time than DuckDB
    takes to plan that query."""
    rows = list(_rows(conns))
    widths = [max([len(head), *(len(row[i]) for row in rows)])
              for i, (head, _) in enumerate(CONN_COLUMNS)]
    return ["  ".join(f"{cell:{align}{w}}" for cell, (_, align), w
                      in zip(row, CONN_COLUMNS, widths)).rstrip() for row in rows], widths


def connections_lines(path: str, count: int, batches) -> Iterator[str]:
    """Per connection and direction, the figures people compare first, as
    plain aligned text under a heading, a batch at a time: @batches of
    (lines, the columns' widths) as analyzers.connections.connection_lines()
    lays them out, the heading as wide as the first batch's columns (a later
    batch may widen them), a blank line after each connection's two."""
    for n, (lines, widths) in enumerate(batches):
        out = [""] if n else [
            printable(f"{path}: {count} TCP connections"), "",
            "  ".join(f"{h:{a}{w}}" for (h, a), w in zip(CONN_COLUMNS, widths)).rstrip(),
            "  ".join("-" * w for w in widths)]
        for i, line in enumerate(lines):
            out.append(line)
            if i % 2:
                out.append("")
        text = "\n".join(out)
        yield text if text.endswith("\n") else text + "\n"


def fairness_table(capture_path: str, result: dict) -> Table:
    t = _table(title=printable(f"{capture_path}: fairness"), title_justify="left")
    t.add_column("flow", justify="right")
    t.add_column("sender")
    t.add_column("unique bytes", justify="right")
    t.add_column("goodput", justify="right")
    for f in result["flows"]:
        t.add_row(str(f["conn"]), printable(f["sender"]), si(f["unique_bytes"], "B"),
                  si(f["goodput_bps"], "bit/s"))
    return t


def fairness_lines(result: dict) -> list[str]:
    """The summary under the fairness table."""
    def num(v, fmt="{:.3f}"):
        return "-" if v is None else fmt.format(v)

    lines = [f"Jain's index over {len(result['flows'])} flows: {num(result['jain'])}"]
    if result["intervals"]:
        lines.append(f"per interval ({len(result['intervals'])} intervals with every flow "
                     f"active): mean {num(result.get('jain_intervals_mean'))}, "
                     f"min {num(result.get('jain_intervals_min'))}")
    fr = result.get("friendliness")
    if fr:
        lines.append(f"friendliness of flow {fr['variant']} against flow {fr['reference']}: "
                     f"ratio {num(fr['ratio'])}, difference "
                     f"{num(fr['percent_difference'], '{:.1f}')}%")
    return lines


def rows_table(columns: list[str], rows: list[tuple]) -> Table:
    t = _table()
    for c in columns:
        t.add_column(printable(c))
    for r in rows:      # a store may be anyone's: its texts are shown as text
        t.add_row(*("NULL" if v is None else printable(v) for v in r))
    return t
