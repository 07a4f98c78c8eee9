"""The tcp_probe record is defined once, in artefacts/probe_record.py. Every
other place that writes or reads it is held to that definition here, read
from its own source: the eBPF hook's C header line and writer, the extended
tracepoint's format in kernel-patches/, the host kernel's stock tracepoint,
store/schema.sql (created by DuckDB) and docs/probe.md."""
from __future__ import annotations

import re
from pathlib import Path

from tcpvar.artefacts import probe_record as record
from tcpvar.capture import probe
from tcpvar.capture.probe.trace_text import parse_trace_line
from tcpvar.store import Store

ROOT = Path(__file__).resolve().parent.parent
HOOK_C = ROOT / "hooks" / "tcp_probe_ext" / "tcp_probe_ext.c"
HOOK_H = ROOT / "hooks" / "tcp_probe_ext" / "tcp_probe_ext.h"
PATCHES = sorted((ROOT / "kernel-patches" / "patches").glob("0*.patch"))


def c_function(text: str, name: str) -> str:
    start = text.index(f"static int {name}(")
    return text[start:text.index("\n}\n", start)]


def test_hook_header_line_is_the_record():
    text = HOOK_C.read_text()
    define = re.search(r"#define CSV_HEADER((?:.*\\\n)*.*\n)", text).group(1)
    assert "".join(re.findall(r'"([^"]*)"', define)).replace("\\n", "\n") == record.header()


def test_hook_writer_fills_the_columns_in_order():
    """on_event() writes ts_ns, then the event's fields in the header's order,
    then one empty value per column only the patched kernel has."""
    body = c_function(HOOK_C.read_text(), "on_event")
    fields = []
    for name in re.findall(r"e->(\w+)", body):
        if name not in fields and name not in ("family", "ts_ns"):
            fields.append(name)
    empties = re.search(r'memcpy\(p, "(,*)\\n"', body).group(1).count(",")
    assert ["ts_ns", *fields] == list(record.NAMES[:1 + len(fields)])
    assert 1 + len(fields) + empties == len(record.NAMES)


def test_hook_filter_limits_are_the_recorders():
    text = HOOK_H.read_text()
    assert int(re.search(r"#define TPE_MAX_PORTS (\d+)", text).group(1)) == probe.MAX_PORTS
    assert int(re.search(r"#define TPE_MAX_ADDRS (\d+)", text).group(1)) == probe.MAX_ADDRS


def test_schema_probe_events_is_the_record(tmp_path):
    with Store(tmp_path / "t.duckdb") as store:
        got = store.con.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_name = 'probe_events' ORDER BY ordinal_position").fetchall()
    assert got[:2] == [("run_id", "INTEGER"), ("flow", "INTEGER")]
    assert got[2:-1] == [(c.name, c.type) for c in record.COLUMNS]
    assert got[-1] == ("side", "VARCHAR")     # given by ingest, not recorded


def sample_line(fmt: str) -> str:
    """A trace_pipe line as the kernel prints one with this TP_printk format."""
    values = {"%s": "AF_INET", "%pISpc": "10.0.1.1:5201", "%#x": "0x1f", "%llx": "2a",
              "%d": "7", "%u": "7", "%llu": "7", "%p": "00000000c0ffee00"}
    body = re.sub(r"%(?:pISpc|#x|llx|llu|[sdup])", lambda m: values[m.group(0)], fmt)
    return f"  iperf3-412 [001] ..s1.  8.500000: tcp_probe: {body}"


def parsed_columns(fmt: str) -> set[str]:
    row = parse_trace_line(sample_line(fmt), 0)
    assert all(v != "" for v in row.values())
    return set(row) - record.TRACEPOINT_DROPPED


def test_extended_tracepoint_fills_every_column():
    """The last patch that changes tcp_probe's TP_printk gives the format of
    the kernel tcpvar builds; parsed, its fields are exactly the record."""
    formats = [m.group(1) for p in PATCHES
               for m in re.finditer(r'^\+\s*TP_printk\("([^"]*)"', p.read_text(), re.M)
               if "sock_cookie=" in m.group(1)]
    assert len(formats) >= 3        # the tracepoint, then NGWA and WB-RTO state
    assert parsed_columns(formats[-1]) == set(record.NAMES)


def test_stock_tracepoint_fills_columns_only():
    """The host's stock tcp:tcp_probe: each field lands in a column."""
    fmt_file = probe.tracefs_root() / "events" / "tcp" / "tcp_probe" / "format"
    fmt = re.search(r'print fmt: "([^"]*)"', fmt_file.read_text()).group(1)
    cols = parsed_columns(fmt)
    assert cols <= set(record.NAMES)
    assert {"ts_ns", "saddr", "sport", "snd_cwnd", "srtt_us", "cookie"} <= cols


def test_docs_name_every_column():
    table = (ROOT / "docs" / "probe.md").read_text()
    documented = set(re.findall(r"^\| `(\w+)`|, `(\w+)`", table, re.M))
    names = {a or b for a, b in documented}
    assert set(record.NAMES) <= names
