#!/usr/bin/env python3
"""Atheris targets for what tcpvar reads from other people (docs/fuzzing.md):
run folders and stores. TCPVAR_FUZZ_INPUT names the target:

  folder  a real run folder, copied, its files changed as the input says
          (JSON keys deleted, values of another type, huge, negative or nan
          numbers, text with control characters, Rich markup or $mathtext$,
          deep nesting; CSV rows and cells; symlinks, FIFOs, folders and
          '../' names planted where a file or a name is read), loaded into a
          fresh store by `tcpvar load` and then, as the input says, one
          figure and the report's text of it, or `tcpvar plot` into the
          working folder
  store   the store that run left, copied, changed with DuckDB as the
          input says (macros named like built-in functions, views named like
          tcpvar's, sequences, columns renamed or added with hostile names,
          hostile values, objects tcpvar does not make, packet segments),
          then `tcpvar merge` into a fresh store, `tcpvar query "SELECT *
          FROM conn_stats"` and one of analyze --json, report, plot, load,
          compare, export then merge

The base run folder and its store are made by tests/fuzz/run.sh (tcpvar run
over network namespaces, 1 s at 5 Mbit/s) and named by TCPVAR_FUZZ_BASE.
A crash is anything but what tcpvar promises: an exception other than a
TcpvarError (commands run in this process with --traceback, so an internal
error propagates), an exit status other than 0, 2, 3, 4 or 5, a control
character in what a command printed, a file written outside the input's
own folder, store and outputs (a victim file that planted names point at,
and the target of a COPY hidden in a column's name, are checked after each
input), or a store's own code running (its macros' and views' marker text
printed; other conn_stats rows from a store whose code alone was changed).

The input is read with atheris' FuzzedDataProvider: its choices (integers)
from the end, the bytes of a file it writes from the start. `python3
fuzz_inputs.py --seeds DIR` writes the seed corpus of the target into DIR:
the base folder's own files, each as the input that writes it whole, and
inputs of most kinds of change.

TCPVAR_FUZZ_FINDINGS=DIR keeps going after a crash: each distinct one (by
its exception and where tcpvar raised it) is written to DIR as the input
(.bin) and its traceback (.txt); an input that runs longer than
TCPVAR_FUZZ_INPUT_TIMEOUT seconds (default 60) or takes more than 4 GB is
one too. TCPVAR_FUZZ_SHOW=1 says what each input changed (a replay).
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import signal
import stat
import struct
import sys
import tempfile
import traceback
from pathlib import Path

import atheris

TARGET = os.environ.get("TCPVAR_FUZZ_INPUT", "folder")
ALLOWED_STATUS = {0, 2, 3, 4, 5}  # usage, input, no TCP, store: tcpvar's own refusals
SECRET = "a file of the victim's, outside the folder\n"

with atheris.instrument_imports(include=["tcpvar"]):
    import duckdb

    from tcpvar.cli.main import main as tcpvar_main
    from tcpvar.errors import TcpvarError
    from tcpvar.pipelines.report import report_parts
    from tcpvar.report import html
    from tcpvar.store import Store
    # what the commands import when they run: instrumented too
    for _name in ("tcpvar.cli.load", "tcpvar.cli.merge", "tcpvar.cli.query",
                  "tcpvar.cli.analyze", "tcpvar.cli.report", "tcpvar.cli.plot",
                  "tcpvar.cli.compare", "tcpvar.cli.export", "tcpvar.pipelines.run",
                  "tcpvar.pipelines.load", "tcpvar.pipelines.plot", "tcpvar.pipelines.report",
                  "tcpvar.pipelines.analyze", "tcpvar.ingest.run", "tcpvar.ingest.probe",
                  "tcpvar.ingest.iperf", "tcpvar.ingest.capture", "tcpvar.store.merge",
                  "tcpvar.store.parquet", "tcpvar.capture.probe.tracefs",
                  "tcpvar.report.figures.kernel", "tcpvar.report.figures.rates",
                  "tcpvar.report.figures.tsg", "tcpvar.report.figures.windows",
                  "tcpvar.report.runs", "tcpvar.report.tables", "tcpvar.report.tabular",
                  "tcpvar.report.compare", "tcpvar.analyzers.compare"):
        try:
            __import__(_name)
        except ModuleNotFoundError:
            pass

KINDS = ("throughput", "cwnd", "rtt", "rto", "tsg", "window", "fairness", "ngwa")


# ---------------------------------------------------------------------------
# The input's choices


class Choices:
    """What the input chooses, read with atheris' FuzzedDataProvider:
    integers from its end, bytes from its start."""

    def __init__(self, data: bytes):
        self.fdp = atheris.FuzzedDataProvider(data)

    def int(self, lo: int, hi: int) -> int:
        return self.fdp.ConsumeIntInRange(lo, hi)

    def raw(self, n: int) -> bytes:
        return self.fdp.ConsumeBytes(n)

    def bytes(self, limit: int) -> bytes:
        return self.raw(self.int(0, limit))

    def pick(self, seq):
        return seq[self.int(0, len(seq) - 1)]

    def bool(self) -> bool:
        return bool(self.int(0, 1))

    def text(self, limit: int) -> str:
        return self.bytes(limit).decode("utf-8", "surrogateescape")

    def float(self) -> float:
        """Any double: nan, infinities, subnormals included."""
        return struct.unpack("<d", self.int(0, (1 << 64) - 1).to_bytes(8, "little"))[0]


class Scripted(Choices):
    """Choices from a script (seeds): each int() takes the script's next
    integer (lo once it is used up), each bytes() its next bytes; what was
    taken is recorded, and encode() makes the input that chooses the same."""

    def __init__(self, script):
        self.script = list(script)
        self.taken = []

    def int(self, lo: int, hi: int) -> int:
        v = self.script.pop(0) if self.script and isinstance(self.script[0], int) else lo
        v = min(max(v, lo), hi)
        self.taken.append(("i", lo, hi, v))
        return v

    def bytes(self, limit: int) -> bytes:
        b = self.script.pop(0) if self.script and isinstance(self.script[0], bytes) else b""
        b = b[:limit]
        self.taken.append(("i", 0, limit, len(b)))
        self.taken.append(("b", b))
        return b

    def raw(self, n: int) -> bytes:
        raise AssertionError("scripts give bytes through bytes()")

    def encode(self) -> bytes:
        front, back = bytearray(), []
        for t in self.taken:
            if t[0] == "b":
                front += t[1]
                continue
            _, lo, hi, v = t
            span, v = hi - lo, v - lo
            n = 0
            while span >> (8 * n):
                n += 1
            back.extend((v >> (8 * i)) & 255 for i in reversed(range(n)))
        return bytes(front) + bytes(reversed(back))


# ---------------------------------------------------------------------------
# Hostile values


class Paths:
    """The scratch folder of one fuzzing process: the victim file planted
    names point at, the input's folder and store, its outputs."""

    def __init__(self):
        top = Path(os.environ.get("TCPVAR_FUZZ_WORK") or tempfile.gettempdir())
        top.mkdir(parents=True, exist_ok=True)
        for old in top.glob(f"{TARGET}-*-*"):         # of processes gone (libFuzzer
            pid = old.name.split("-")[1]               # exits without Python's atexit)
            if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                shutil.rmtree(old, ignore_errors=True)
        self.work = Path(tempfile.mkdtemp(prefix=f"{TARGET}-{os.getpid()}-", dir=top)).resolve()
        self.victim_dir = self.work / "victim"
        self.victim = self.victim_dir / "secret.txt"
        self.canary = self.work / "pwned.csv"          # a COPY hidden in a name writes here
        self.template = self.work / "template"         # an empty store, copied for each input
        self.inputs = self.work / "in"
        self.db_dir = self.work / "db"
        self.out = self.work / "out"
        self.victim_dir.mkdir()
        self.victim.write_text(SECRET)
        self.template.mkdir()
        with Store(self.template / "empty.duckdb"):
            pass
        self.template_files = _tree(self.template)

    def fresh_store(self, name: str) -> Path:
        """A copy of the empty store, as a new store would be."""
        db = self.db_dir / name
        shutil.copyfile(self.template / "empty.duckdb", db)
        shutil.copytree(self.template / "empty.duckdb.packets", f"{db}.packets")
        return db

    def reset(self) -> None:
        self.rows_changed = False
        for d in (self.inputs, self.db_dir, self.out):
            _remove(d)
            d.mkdir()
        _remove(self.canary)

    def subst(self, text: str) -> str:
        return (text.replace("{victim}", str(self.victim))
                .replace("{victim_dir}", str(self.victim_dir))
                .replace("{canary}", str(self.canary).replace("'", "''")))

    def check(self, expected_db: set[str]) -> None:
        """Nothing written outside the input's folder, store and outputs."""
        if os.path.lexists(self.canary):
            raise AssertionError("a COPY hidden in the store was run: wrote the canary "
                                 f"{self.canary}")
        if sorted(os.listdir(self.victim_dir)) != ["secret.txt"]:
            raise AssertionError(f"written beside the victim: "
                                 f"{sorted(os.listdir(self.victim_dir))}")
        st = os.lstat(self.victim)
        if not stat.S_ISREG(st.st_mode) or self.victim.read_text() != SECRET:
            raise AssertionError("the victim file outside the folder was changed")
        top = set(os.listdir(self.work)) - {"victim", "template", "in", "db", "out"}
        if top:
            raise AssertionError(f"written outside the folder: {sorted(top)}")
        if _tree(self.template) != self.template_files:
            raise AssertionError("the template store changed")
        extra = {n for n in os.listdir(self.db_dir)
                 if not any(n == e or n.startswith(e + ".") for e in expected_db)}
        if extra:
            raise AssertionError(f"written beside the store: {sorted(extra)}")


def _tree(top: Path) -> dict:
    return {str(p.relative_to(top)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(top.rglob("*"))}


def _remove(path: Path) -> None:
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        shutil.rmtree(path)
    else:
        path.unlink()        # a file, a symlink, a FIFO (never opened)


# text as someone else's files may hold it; {victim} and {canary} are
# replaced by the paths of this process's scratch folder
STRINGS = (
    "", " ", "\x1b]0;retitled\x07", "\x1b[2J\x1b[H", "\x1b[31mred", "[bold red]markup[/]",
    "[link=https://example.com]x[/link]", "[/]", "$\\frac{1}{0}$", "$x^$", "$\\undefined$", "$",
    "a $b$ c", "line\nbreak\r\n", "\t", "\u202e\u2066evil\u2069", "\ud800", "\udcff", "\x00nul",
    "\x7f\x85\x9b", "x" * 70000, "%s%n%x", "{0}{name}", "'; DROP TABLE runs; --", '"', "\\",
    "../../victim/secret.txt", "../victim/secret.txt", "{victim}", "{victim_dir}/new.txt",
    "/dev/zero", "/proc/self/environ", "..", ".", "../", "tcp_probe.trace", "sender.pcap",
    "manifest.json", "complete", "running", "failed", "interrupted", "cubic", "bbr", "reno",
    "test", "background", "netns", "vm", "htb", "tbf", "ngwa", "netem", "NaN", "-1", "1e999",
    "0x10", "198.18.1.2", "::1", "300.1.1.1", "bpf", "tracefs", "tracefs-ext", "run:1",
    "COPY (SELECT 1) TO '{canary}'", "ü€𝄞", "\ufeffbom", "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
)
MARKUP = ("<script>alert", "<img src=x")    # in report.html only if an input's text got in
CONSTANTS = (
    None, True, False, 0, -1, 1, 2, 255, 256, 65535, 65536, 2**31 - 1, 2**31, 2**32,
    2**63 - 1, 2**63, 2**64, -2**63, -2**63 - 1, 10**20, 10**300, 0.5, -0.0, 1e-300, 5e-324,
    1.7976931348623157e308, float("inf"), float("-inf"), float("nan"), [], {}, [[]],
    {"": None}, [1, "x", None],
)
# JSON text put in as it is: what json.dumps would not write
RAW_JSON = ("1" + "0" * 5000, "1e400", "-1e400", "NaN", "Infinity", "-Infinity",
            "[" * 100000 + "]" * 100000, "{\"a\":" * 50000 + "1" + "}" * 50000,
            '"\\ud800"', '"\\u0000"', "-0", "1E-400", "123456789012345678901234567890.5",
            '{"a": 1, "a": "x"}', "[1,]", "tru")
NEST = "\x00fuzz:raw\x00"       # a string json.dumps writes, replaced by raw JSON text


def value(c: Choices, paths: Paths, depth: int = 0):
    kind = c.int(0, 5)
    if kind == 0:
        return c.pick(CONSTANTS)
    if kind == 1:
        return paths.subst(c.pick(STRINGS))
    if kind == 2:
        return c.int(-(1 << 64), 1 << 64)
    if kind == 3:
        return c.float()
    if kind == 4 or depth > 3:
        return c.text(300)
    if c.bool():
        return [value(c, paths, depth + 1) for _ in range(c.int(0, 3))]
    return {c.pick(("x", "flows", "trace", "error", "", "\x1b[2J")): value(c, paths, depth + 1)}


def _nodes(doc) -> list[tuple]:
    """(container, key) of every value in @doc, the document itself first."""
    out, todo = [(None, None)], [doc]
    while todo:
        v = todo.pop()
        items = v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else ()
        for k, child in items:
            out.append((v, k))
            todo.append(child)
    return out


def mutate_json(c: Choices, paths: Paths, doc):
    """One change somewhere in @doc; the document (changed in place or new)
    and raw JSON text to put where NEST is."""
    parent, key = c.pick(_nodes(doc))
    old = doc if parent is None else parent[key]
    action = c.int(0, 7)
    raw = None
    if action == 0:                      # a key, or an item, gone
        if parent is None:
            return {}, None
        del parent[key]
        return doc, None
    if action == 1:                      # a value of another type, or hostile
        new = value(c, paths)
    elif action == 2:                    # the same, wrapped
        new = [old] if c.bool() else {"value": old}
    elif action == 3:                    # raw JSON text there
        new, raw = NEST, c.pick(RAW_JSON)
    elif action == 4:                    # nested deeply
        n = c.int(1, 200000)
        new, raw = NEST, "[" * n + json.dumps(old if not isinstance(old, (dict, list)) else 0,
                                              allow_nan=True) + "]" * n
    elif action == 5:                    # a key added beside it
        target = old if isinstance(old, dict) else parent if isinstance(parent, dict) else None
        if target is None:
            return doc, None
        name = c.pick(("trace", "error", "flows", "probe", "study", "params", "status",
                       "cell", "name", "events", "offset_ns", "filter", "flow", "dir",
                       "\x1b[2J", "", "../x")) if c.bool() else c.text(40)
        target[name] = value(c, paths)
        return doc, None
    elif action == 6:                    # a list or text repeated (to a few MB), or emptied
        n = min(c.int(0, 2000), (1 << 22) // max(1, len(json.dumps(old, allow_nan=True))))
        new = old * n if isinstance(old, (list, str)) else str(old)
    else:                                # a number or text as the other
        if isinstance(old, (int, float)) and not isinstance(old, bool):
            new = str(old)
        elif isinstance(old, str):
            try:
                new = json.loads(old)
            except (ValueError, RecursionError):
                new = len(old)
        else:
            new = None
    if parent is None:
        return new, raw
    parent[key] = new
    return doc, raw


def dump_json(doc, raw: str | None) -> bytes:
    text = json.dumps(doc, indent=1, allow_nan=True)
    if raw is not None:
        text = text.replace(json.dumps(NEST), raw, 1)
    return text.encode("utf-8", "surrogatepass")


def load_json(data: bytes):
    try:
        return json.loads(data.decode("utf-8", "surrogatepass"))
    except (ValueError, RecursionError):
        return None


# ---------------------------------------------------------------------------
# The folder target


JSON_FILES = ("manifest.json", "tcp_probe.json", "iperf-1.json", "iperf-1-server.json",
              "tc-stats.json", "progress.jsonl")
FILES = (*JSON_FILES, "tcp_probe.csv", "sender.pcap", "bottleneck.pcap", "tcp_probe.trace",
         "tc-stats.txt", "figures", "report.html", "sender.tcpdump.log", "iperf-2.json",
         "iperf-1.err", ".stop", "figures/throughput.png")
# a run folder's name as someone may have chosen it
FOLDER_NAMES = ("20261125-143846-single-cubic-d808f71-r1", "run \x1b]0;retitled\x07",
                "[bold red]run", "$\\frac{a}{b}$ run", "run\nnext line", "-r", "--db",
                "run:1", "\u202erun", "run\udcff", ".hidden", "x" * 200, "run'quote\"",
                "run;rm -rf", "sender.pcap")
SPECIALS = ("missing", "folder", "fifo", "symlink to the victim", "relative symlink out",
            "symlink to /dev/zero", "dangling symlink", "symlink loop", "hard link to the victim",
            "empty", "symlink to the folder", "symlink to /proc/self/mem")
TRACE_LINE = ("          iperf3-412     [001] ..s1.   {t}: tcp_probe: family=AF_INET "
              "src={src}:{sport} dest=198.19.1.2:26401 mark=0x0 data_len={len} snd_nxt=0x{nxt} "
              "snd_una=0x1 snd_cwnd={cwnd} ssthresh=2147483647 snd_wnd=64240 srtt={srtt} "
              "rcv_wnd=64240 sock_cookie=2a\n")
TRACE_FIELDS = ("1.000001", "0", "-5", "99999999999999999999.5", "x.y", "1.", ".5", "nan",
                "1e5", "18446744073709551616", "ffffffff", "zz", "", "198.18.1.2",
                "[::1]", "::ffff:1.2.3.4", "1.2.3.4.5")
CSV_VALUES = ("", "-1", "0", "18446744073709551616", "4294967296", "256", "65536", "1e309",
              "nan", "inf", "-inf", "abc", '"', '"a,b"', "0x10", " 5", "-0", "1.5", "\x00",
              "\r", "\x1b[2J", "[bold]x[/]", "$x$", "9" * 400, "198.18.1.2", "::1")


def plant(path: Path, kind: str, paths: Paths) -> None:
    _remove(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "missing":
        return
    if kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink to the victim":
        path.symlink_to(paths.victim)
    elif kind == "relative symlink out":
        path.symlink_to(os.path.relpath(paths.victim, path.parent))
    elif kind == "symlink to /dev/zero":
        path.symlink_to("/dev/zero")
    elif kind == "dangling symlink":
        path.symlink_to(paths.victim_dir / "new.txt")
    elif kind == "symlink loop":
        path.symlink_to(path.name)
    elif kind == "hard link to the victim":
        os.link(paths.victim, path)
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "symlink to the folder":
        path.symlink_to(".")
    else:
        path.symlink_to("/proc/self/mem")


def _regular(path: Path) -> bool:
    """A file of the folder's own, which the fuzzer may change in place (not
    a link: writing through it would change the victim itself)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_nlink == 1


def edit_json_file(c: Choices, paths: Paths, path: Path) -> None:
    if not _regular(path):
        return
    data = path.read_bytes()
    if path.suffix == ".jsonl":
        lines = data.split(b"\n")
        i = c.int(0, len(lines) - 1)
        doc = load_json(lines[i])
        doc, raw = mutate_json(c, paths, doc) if doc is not None else (value(c, paths), None)
        lines[i] = dump_json(doc, raw).replace(b"\n", b"")
        path.write_bytes(b"\n".join(lines))
        return
    doc = load_json(data)
    if doc is None:
        return
    for _ in range(c.int(1, 4)):
        doc, raw = mutate_json(c, paths, doc)
        if raw is not None:
            break                       # raw text is written as it is, not parsed again
    path.write_bytes(dump_json(doc, raw))


def edit_csv_file(c: Choices, paths: Paths, path: Path) -> None:
    if not _regular(path):
        return
    lines = path.read_bytes().decode("utf-8", "surrogateescape").split("\n")
    for _ in range(c.int(1, 4)):
        i = c.int(0, len(lines) - 1)
        cells = lines[i].split(",")
        action = c.int(0, 7)
        if action == 0:                  # a cell's value
            j = c.int(0, len(cells))
            v = c.pick(CSV_VALUES) if c.bool() else (str(c.int(-(1 << 65), 1 << 65))
                                                     if c.bool() else repr(c.float()))
            cells[j:j + 1] = [v]
            lines[i] = ",".join(cells)
        elif action == 1:                # a cell gone
            del cells[c.int(0, len(cells) - 1)]
            lines[i] = ",".join(cells)
        elif action == 2:                # a row gone
            del lines[i]
        elif action == 3:                # a row repeated
            lines[i:i + 1] = [lines[i]] * c.int(1, 5000)
        elif action == 4:                # a row of the input's own
            lines.insert(i, c.text(200))
        elif action == 5:                # cut there
            lines = lines[:i] + [lines[i][:c.int(0, len(lines[i]))]]
        elif action == 6:                # a column named otherwise
            j = c.int(0, len(cells) - 1)
            cells[j] = c.pick(("ts_ns", "saddr", "flow", "", "ts_ns ", "\x1b[2J", "a\"b",
                               "run_id", "x; COPY (SELECT 1) TO '{canary}'"))
            lines[i] = paths.subst(",".join(cells))
        else:                            # two rows swapped: time runs back
            k = c.int(0, len(lines) - 1)
            lines[i], lines[k] = lines[k], lines[i]
        if not lines:
            lines = [""]
    path.write_bytes("\n".join(lines).encode("utf-8", "surrogateescape"))


def pend_trace(c: Choices, paths: Paths, folder: Path) -> None:
    """tcp_probe.json names a trace left to convert (a micro-VM's killed
    tcpvar leaves one), and the trace is there, or something else is."""
    json_path = folder / "tcp_probe.json"
    doc = load_json(json_path.read_bytes()) if _regular(json_path) else None
    doc = doc if isinstance(doc, dict) else {}
    doc["trace"] = paths.subst(c.pick(("tcp_probe.trace", "../../victim/secret.txt",
                                        "{victim}", "sender.pcap", "manifest.json", "../x",
                                        "/dev/zero", ".", "", "tcp_probe.trace/..",
                                        "./tcp_probe.trace"))) if c.int(0, 3) else c.text(60)
    doc["offset_ns"] = c.pick((0, 1795617038925949925, -1, 2**63, 2**64, "0", None, 1.5,
                               float("nan")))
    doc["filter"] = c.pick(({"ports": [], "addrs": [], "cookie": None},
                            {"addrs": ["198.18.1.2"]}, {"addrs": [1]}, {"addrs": "x"}, None,
                            "x", {}))
    _remove(json_path)
    json_path.write_text(json.dumps(doc, allow_nan=True))
    trace = folder / "tcp_probe.trace"
    how = c.int(0, 3)
    if how == 0:
        lines = []
        for _ in range(c.int(0, 40)):
            fields = {k: str(d) for k, d in (("t", f"{1 + len(lines) / 10:.6f}"),
                                             ("src", "198.18.1.2"), ("sport", 52666),
                                             ("len", 1448), ("nxt", "1a2b"),
                                             ("cwnd", 10 + len(lines)), ("srtt", 100))}
            if c.bool():
                fields[c.pick(list(fields))] = c.pick(TRACE_FIELDS)
            lines.append(TRACE_LINE.format(**fields))
        _remove(trace)
        trace.write_text("".join(lines))
    elif how == 1:
        _remove(trace)
        trace.write_bytes(c.bytes(4096))
    elif how == 2:
        plant(trace, c.pick(SPECIALS), paths)


FOLDER_OPS = ("json", "csv", "whole file", "cut", "special", "pending trace")


def folder_name(c: Choices) -> str:
    i = c.int(0, len(FOLDER_NAMES))
    if i < len(FOLDER_NAMES):
        return FOLDER_NAMES[i]
    name = os.fsdecode(c.bytes(200).replace(b"/", b"_").replace(b"\0", b"_"))
    return name if name not in ("", ".", "..") else "run"


def change_folder(c: Choices, paths: Paths, folder: Path) -> None:
    for _ in range(c.int(0, 6)):
        try:
            change_file(c, paths, folder)
        except OSError:
            pass        # a change the folder as it is now cannot take (a file under a file)


def _under(folder: Path, path: Path) -> bool:
    """@path's folders up to @folder are real folders (not symlinks): what
    the fuzzer writes there stays in the run folder."""
    for parent in path.relative_to(folder).parents:
        d = folder / parent
        if d != folder and (d.is_symlink() or not d.is_dir()):
            return False
    return True


def change_file(c: Choices, paths: Paths, folder: Path) -> None:
    """One change of one file of the folder, as the input chooses."""
    op = c.pick(FOLDER_OPS)
    if op == "json":
        edit_json_file(c, paths, folder / c.pick(JSON_FILES))
    elif op == "csv":
        edit_csv_file(c, paths, folder / "tcp_probe.csv")
    elif op == "whole file":
        path = folder / c.pick(FILES)
        data = c.bytes(1 << 16)
        if not _under(folder, path):
            return
        _remove(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    elif op == "cut":
        path = folder / c.pick(FILES)
        if _under(folder, path) and _regular(path):
            data = path.read_bytes()
            path.write_bytes(data[:c.int(0, len(data))])
    elif op == "special":
        path, kind = folder / c.pick(FILES), c.pick(SPECIALS)
        if _under(folder, path):
            plant(path, kind, paths)
    else:
        pend_trace(c, paths, folder)


class FolderTarget:
    def __init__(self, base: Path):
        runs = sorted(p for p in (base / "runs").iterdir() if (p / "manifest.json").is_file())
        if not runs:
            raise SystemExit(f"fuzz_inputs.py: no run folder under {base}/runs (run.sh makes it)")
        self.base = runs[0]
        self.paths = Paths()

    def run(self, c: Choices, commands: bool = True) -> None:
        p = self.paths
        p.reset()
        name = folder_name(c)
        as_json = c.bool()
        after = c.int(0, 2)               # nothing, the report of it, plot into the cwd
        kind = c.pick(KINDS)
        folder = p.inputs / name
        shutil.copytree(self.base, folder, symlinks=True,
                        ignore=shutil.ignore_patterns("figures", "report.html"))
        change_folder(c, p, folder)
        if SHOW:
            show_changes(self.base, folder)
        if not commands:
            return
        db = p.fresh_store("s.duckdb")
        step(command, "load", "-q", *(["--json"] if as_json else []), "--db", db, folder)
        if after == 1:
            step(section, db, folder, c)
        elif after == 2:
            step(command, "plot", "-q", "--dpi", 30, "--db", db, kind, folder, cwd=p.out)
        p.check({"s.duckdb"})
        if sorted(os.listdir(p.inputs)) != [name]:
            raise AssertionError(f"written beside the run folder: {sorted(os.listdir(p.inputs))}")


def section(db: Path, folder: Path, c: Choices) -> None:
    """The report's section of the folder, with one of its figures (as
    `tcpvar report` gathers and draws it)."""
    try:
        parts = report_parts(str(db), [str(folder)], lambda event: None)
    except TcpvarError:
        return
    for part in parts:
        if part["figures"]:
            part["figures"] = [c.pick(part["figures"])]
            part["figures"][0]["path"] = None
    check_page(html.render(f"tcpvar report: {folder}", parts))


def check_page(page: str) -> None:
    if MARK in page:
        raise AssertionError("report.html shows that a macro or view of the store ran")
    for markup in MARKUP:
        if markup in page:
            raise AssertionError(f"report.html shows an input's text as HTML: {markup!r}")


# ---------------------------------------------------------------------------
# The store target


BUILTINS = ("sqrt", "avg", "count", "stddev_samp", "sum", "min", "max", "greatest", "least",
            "nullif", "coalesce", "round", "abs", "ln", "exp", "quantile_cont", "median",
            "first", "list", "string_agg", "epoch_ms", "now", "current_setting", "nextval",
            "regexp_matches", "lower", "json_extract", "json_extract_string", "concat",
            "list_contains", "length", "floor", "ceil", "var_samp", "stddev", "corr",
            "count_star", "arg_max", "bit_count", "hash", "struct_pack", "unnest")
TABLE_FUNCTIONS = ("duckdb_functions", "read_parquet", "duckdb_tables", "duckdb_columns",
                   "duckdb_views", "duckdb_schemas", "duckdb_sequences", "duckdb_indexes",
                   "duckdb_types", "duckdb_constraints", "glob", "range", "read_csv",
                   "read_text", "pragma_table_info")
# what a macro or a view of the store says when it runs: never in tcpvar's output
MARK = "fuzz-store-code-ran"
MACRO_BODIES = (f"error('{MARK}')", "42", "NULL", f"'{MARK}'", "'[bold]x\x1b[2J'",
                "x", "1/0", "(SELECT count(*) FROM runs)", "getenv('HOME')", "'nan'::DOUBLE",
                "[1, 2]", "{'a': 1}", "x || x", "-x")
TABLE_BODIES = ("SELECT * FROM system.main.{name}() WHERE false",    # the same, empty
                f"SELECT error('{MARK}') AS x", "SELECT 1 AS x",
                "SELECT * FROM runs", "SELECT 'x' AS table_name, 'main' AS schema_name, "
                "'memory' AS database_name, 'x' AS column_name")
VIEWS = ("conn_stats", "cwnd_estimate", "rtt_samples", "rto_timeline", "packet_marks",
         "ngwa_windows", "probe_timeline", "probe_timeouts", "probe_rto_stats", "flow_rates",
         "packets", "runs", "flows", "captures", "connections", "dir_counters", "meta",
         "probe_events", "capture_map", "run_map", "export_runs")
VIEW_BODIES = (f"SELECT error('{MARK}') AS capture_id", f"SELECT '{MARK}' AS x",
               "SELECT 1 AS x",
               "SELECT * FROM dir_counters", "SELECT * FROM read_text('{victim}')",
               "SELECT '\x1b]0;retitled\x07' AS conn, 'x' AS dir", "SELECT * FROM range(10)")
TABLES = ("runs", "flows", "captures", "connections", "dir_counters", "retransmit_events",
          "throughput", "qdisc_stats", "iperf_intervals", "probe_events", "meta")
IDENTS = ('x"y', "a b", "x; COPY (SELECT 42) TO '{canary}'; --",
          "x\" FROM src.runs s; COPY (SELECT 42) TO '{canary}'; --",
          "\") ; COPY (SELECT 1) TO '{canary}' --", "run_id", "capture_id", "sender_capture",
          "conn", "dir", "packets", "[bold]col", "\x1b[2Jcol", "$x$", "ü", "select", "from",
          "'", "''", "--", "/*", "x\ny", "m_run_id", "s", "t", "rowid", "new", "old", "fresh",
          "x" * 300)
TYPES = ("VARCHAR", "BIGINT", "HUGEINT", "DOUBLE", "BOOLEAN", "BLOB", "JSON", "INTEGER[]",
         "STRUCT(a INTEGER)", "MAP(VARCHAR, INTEGER)", "UNION(a INTEGER, b VARCHAR)",
         "TIMESTAMP", "INTERVAL", "UTINYINT", "DECIMAL(4,1)", "UUID", "BIT", "DATE")
SQL_VALUES = ("NULL", "'nan'::DOUBLE", "'inf'::DOUBLE", "-0.0", "1e308", "-1", "0",
              "9223372036854775807", "-9223372036854775808",
              "170141183460469231731687303715884105727",
              "'x'", "''", "'\x1b]0;retitled\x07'", "'[bold]x[/]'", "'$\\frac{1}{0}$'",
              "'{victim}'", "'../../victim/secret.txt'", "'{\"rtt_ms\": \"x\"}'", "'[]'",
              "'null'", "'{'", "'{\"buffer\": 5, \"ccs\": 7}'", "true", "[1,2]",
              "{'a': 1}", "'\\ud800'", "repeat('x', 100000)", "'\u202eevil'",
              "'2026-11-25'::DATE", "INTERVAL 1 DAY", "'deadbeef'::BLOB",
              "'<script>alert(1)</script>'")
SEGMENT_SPECIALS = ("missing", "empty", "symlink to the victim", "folder", "garbage",
                    "other columns", "fifo", "symlink to /dev/zero")


def ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _columns(con, table: str) -> list[tuple[str, str]]:
    return con.execute("SELECT column_name, data_type FROM duckdb_columns() WHERE "
                       "database_name = current_database() AND schema_name = 'main' AND "
                       "table_name = $1 ORDER BY column_index", [table]).fetchall()


def store_change(c: Choices, paths: Paths, con, db: Path) -> list[str]:
    """One change of the store as the input chooses; the SQL it runs."""
    op = c.int(0, 11)
    name_or = lambda seq: paths.subst(c.pick(seq)) if c.int(0, 3) else c.text(40)  # noqa: E731
    # what changes the rows tcpvar reads, not only the code around them
    paths.rows_changed |= op not in (0, 1, 2, 3, 8)
    if op == 0:                              # a macro named like a built-in
        name = name_or(BUILTINS)
        params = c.pick(("x", "x, y", "x, y, z", "", "x := NULL"))
        schema = c.pick(("", "main.", "temp."))
        return [f"CREATE OR REPLACE MACRO {schema}{ident(name)}({params}) AS "
                f"{paths.subst(c.pick(MACRO_BODIES))}"]
    if op == 1:                              # a table macro named like a table function
        name = name_or(TABLE_FUNCTIONS)
        params = c.pick(("", "p", "p, hive_partitioning := NULL, hive_types := NULL, "
                                  "union_by_name := NULL", "a := NULL, b := NULL"))
        return [f"CREATE OR REPLACE MACRO {ident(name)}({params}) AS TABLE "
                f"{c.pick(TABLE_BODIES).replace('{name}', ident(name))}"]
    if op == 2:                              # a view named like tcpvar's, or a table's
        name = name_or(VIEWS)
        paths.rows_changed |= name in TABLES
        if c.bool():                         # tcpvar's columns, one of another type
            cols = _columns(con, name) if name in TABLES else [
                (col,) for (col,) in con.execute(
                    "SELECT column_name FROM duckdb_columns() WHERE table_name = $1",
                    [name]).fetchall()]
            if cols:
                col = c.pick(cols)[0]
                rows = ident(f"fuzz_rows_{name}")
                return [f"CREATE OR REPLACE TABLE {rows} AS SELECT * FROM {ident(name)}",
                        f"DROP TABLE IF EXISTS {ident(name)}",
                        f"CREATE OR REPLACE VIEW {ident(name)} AS SELECT * REPLACE "
                        f"({paths.subst(c.pick(SQL_VALUES))} AS {ident(col)}) FROM {rows}"]
        drop = [f"DROP TABLE IF EXISTS {ident(name)}"] if c.bool() else []
        return [*drop, f"CREATE OR REPLACE VIEW {ident(name)} AS "
                       f"{paths.subst(c.pick(VIEW_BODIES))}"]
    if op == 3:                              # a sequence
        name = name_or(("run_ids", "capture_ids", "fuzz_ids"))
        start = c.pick((1, 0, -1, 2**31 - 1, 2**31, 2**62, 1))
        step = c.pick((1, 0, -1, 2**31, 1000))
        opts = c.pick(("", f" MAXVALUE {start}", " CYCLE", f" MINVALUE {start - 10}"))
        inc = "" if step == 0 else f" INCREMENT BY {step}"
        return [f"DROP SEQUENCE IF EXISTS {ident(name)}",
                f"CREATE SEQUENCE {ident(name)} START {start}{inc}{opts}"]
    table = c.pick(TABLES)
    cols = _columns(con, table)
    if not cols:
        return []
    col, typ = c.pick(cols)
    if op == 4:                              # a column renamed, added, dropped, retyped
        action = c.int(0, 4)
        new = name_or(IDENTS)
        if action == 0:
            return [f"ALTER TABLE {table} RENAME COLUMN {ident(col)} TO {ident(new)}"]
        if action == 1:
            return [f"ALTER TABLE {table} ADD COLUMN {ident(new)} {c.pick(TYPES)} "
                    f"DEFAULT {paths.subst(c.pick(SQL_VALUES))}"]
        if action == 2:
            return [f"ALTER TABLE {table} DROP COLUMN {ident(col)}"]
        if action == 3:
            return [f"ALTER TABLE {table} ALTER COLUMN {ident(col)} TYPE {c.pick(TYPES)}"]
        kept = ", ".join(ident(n) if n != col else
                         f"TRY_CAST({ident(n)} AS {c.pick(TYPES)}) AS {ident(n)}"
                         for n, _ in cols)
        return [f"CREATE OR REPLACE TABLE {table} AS SELECT {kept} FROM {table}"]
    if op == 5:                              # a value
        rows = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        where = (f" WHERE rowid IN (SELECT rowid FROM {table} LIMIT 1 OFFSET "
                 f"{c.int(0, max(rows - 1, 0))})") if c.bool() else ""
        if typ == "JSON" and c.bool():       # the JSON of a run's params, changed
            text = con.execute(f"SELECT {ident(col)}::VARCHAR FROM {table} "
                               f"WHERE {ident(col)} IS NOT NULL LIMIT 1").fetchone()
            doc = load_json(text[0].encode()) if text else None
            doc, raw = mutate_json(c, paths, doc if doc is not None else {})
            return [f"UPDATE {table} SET {ident(col)} = "
                    f"{literal(dump_json(doc, raw).decode('utf-8', 'surrogatepass'))}{where}"]
        if c.bool():
            v = paths.subst(c.pick(SQL_VALUES))
        elif "CHAR" in typ or typ == "JSON":
            v = literal(paths.subst(c.pick(STRINGS)) if c.bool() else c.text(200))
        else:
            v = repr(c.float()) if "DOUBLE" in typ else str(c.int(-(1 << 64), 1 << 64))
            v = {"nan": "'nan'::DOUBLE", "inf": "'inf'::DOUBLE",
                 "-inf": "'-inf'::DOUBLE"}.get(v, v)
        return [f"UPDATE {table} SET {ident(col)} = TRY_CAST({v} AS {typ}){where}"
                if c.bool() else f"UPDATE {table} SET {ident(col)} = {v}{where}"]
    if op == 6:                              # rows gone, repeated or empty
        action = c.int(0, 3)
        if action == 0:
            return [f"DELETE FROM {table} WHERE rowid IN (SELECT rowid FROM {table} "
                    f"LIMIT {c.int(1, 3)})"]
        if action == 1:
            return [f"INSERT INTO {table} SELECT * FROM {table} LIMIT {c.int(1, 3)}"]
        if action == 2:
            return [f"INSERT INTO {table} DEFAULT VALUES"]
        return [f"DELETE FROM {table}"]
    if op == 7:                              # the store's own facts
        key = c.pick(("schema_version", "schema_digest", "\x1b[2J", "x"))
        v = c.pick(("1", "2", "3", "", "x", None, "\x1b]0;retitled\x07", "0" * 32))
        return [f"INSERT OR REPLACE INTO meta VALUES ({literal(key)}, "
                f"{'NULL' if v is None else literal(v)})"]
    if op == 8:                              # objects tcpvar does not make
        name = name_or(IDENTS)
        return [c.pick((
            f"CREATE SCHEMA IF NOT EXISTS {ident(name)}",
            f"CREATE TYPE {ident(name)} AS ENUM ('a', '\x1b[2J')",
            f"CREATE INDEX {ident(name)} ON {table} ({ident(col)})",
            f"CREATE TABLE {ident(name)} (x INTEGER DEFAULT sqrt(4), "
            f"y VARCHAR CHECK (y <> 'z'))",
            f"CREATE TABLE {ident(name)} (run_id INTEGER, capture_id INTEGER, "
            f"{ident(name + '2')} VARCHAR DEFAULT {literal(paths.subst(c.pick(STRINGS)))})",
            f"CREATE TABLE {ident(name)} (x INTEGER, y AS (x * 2))",
            f"CREATE SCHEMA IF NOT EXISTS s2; CREATE MACRO s2.{ident(name)}(x) AS x",
            "CREATE TABLE conn_stats_x AS SELECT * FROM conn_stats",
            f"ALTER TABLE {table} ADD COLUMN {ident(name)} INTEGER DEFAULT 7",
            f"CREATE VIEW {ident(name)} AS SELECT 1",
        ))]
    if op == 11:                             # a name that ends its quote: SQL after it
        # valid up to its end where tcpvar puts it between double quotes
        # unescaped (s."NAME" in merge's copy): the last column's place taken
        last = cols[-1][0]
        refs = {"run_id": "run_map", "capture_id": "capture_map",
                "sender_capture": "capture_map", "bottleneck_capture": "capture_map"}
        joins = "".join(f", {m} m_{n}" for n, m in refs.items() if n in dict(cols))
        name = (f'{cols[0][0]}" AS {last} FROM src.{table} s{joins} WHERE false; '
                f"COPY (SELECT 42) TO '{paths.subst('{canary}')}'; --")
        return [f"ALTER TABLE {table} DROP COLUMN {ident(last)}",
                f"ALTER TABLE {table} ADD COLUMN {ident(name)} VARCHAR"]
    if op == 9:                              # a packets table: a version 1 store
        return ["DROP VIEW IF EXISTS packets",
                f"CREATE TABLE packets AS SELECT * REPLACE ({paths.subst(c.pick(SQL_VALUES))} "
                f"AS {c.pick(('frame', 'ts_ns', 'conn', 'seq', 'flags', 'sack_l'))}) FROM "
                f"read_parquet('{db}.packets/*/*.parquet', hive_partitioning = true)",
                "UPDATE meta SET value = '1' WHERE key = 'schema_version'"]
    # a packet segment beside the store
    segments = sorted(p for p in Path(f"{db}.packets").rglob("*") if p.suffix == ".parquet")
    target = c.pick([*segments, Path(f"{db}.packets/capture_id=1/part-x.parquet"),
                     Path(f"{db}.packets/capture_id=99/part-0.parquet"),
                     Path(f"{db}.packets/capture_id=1"), Path(f"{db}.packets")])
    how = c.pick(SEGMENT_SPECIALS)
    show(f"store: packet segment {target.relative_to(db.parent)}: {how}")
    if how == "garbage":
        _remove(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(c.bytes(2048))
    elif how == "other columns":
        _remove(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        return [f"COPY (SELECT 'x' AS frame, -1 AS conn, {paths.subst(c.pick(SQL_VALUES))} "
                f"AS ts_ns) TO {literal(str(target))} (FORMAT parquet)"]
    elif how == "symlink to /dev/zero":
        plant(target, "symlink to /dev/zero", paths)
    else:
        plant(target, how, paths)
    return []


CONN_STATS = "SELECT * FROM conn_stats"
STORE_NAMES = ("s.duckdb", "s'q.duckdb", "s\x1b]0;retitled\x07.duckdb", "s [bold].duckdb",
               "s $x$.duckdb")
STORE_NEXT = ("nothing", "analyze", "report", "plot", "load", "compare", "export-and-merge",
              "query-the-merged")


class StoreTarget:
    def __init__(self, base: Path):
        self.base = base / "t.duckdb"
        runs = sorted(p for p in (base / "runs").iterdir() if (p / "manifest.json").is_file())
        if not self.base.is_file() or not runs:
            raise SystemExit(f"fuzz_inputs.py: no store {self.base} (run.sh makes it)")
        self.run_dir = runs[0]
        self.run_files = _tree(self.run_dir)
        self.paths = Paths()
        # conn_stats of the store as it is: a store whose code alone was
        # changed shows the same rows, or is refused
        self.paths.reset()
        db = self.paths.db_dir / "s.duckdb"
        shutil.copyfile(self.base, db)
        shutil.copytree(f"{self.base}.packets", f"{db}.packets")
        command("query", "--json", "--db", db, CONN_STATS)
        self.rows = _rows(OUTPUT["stdout"])

    def run(self, c: Choices, commands: bool = True) -> None:
        p = self.paths
        p.reset()
        mode = c.pick(((), ("--json",), ("--csv",)))
        then = c.pick(STORE_NEXT)
        kind = c.pick(KINDS)
        name = c.pick(STORE_NAMES)        # given to the commands as a relative path
        db = p.db_dir / name
        shutil.copyfile(self.base, db)
        shutil.copytree(f"{self.base}.packets", f"{db}.packets", symlinks=True)
        con = duckdb.connect(str(db))
        try:
            for _ in range(c.int(0, 6)):
                try:
                    change = store_change(c, p, con, db)
                except (duckdb.Error, OSError):
                    change = []         # the store as changed so far cannot take it
                for sql in change:
                    try:
                        con.execute(sql)
                        show(f"store: {sql[:400]!r}")
                    except (duckdb.Error, RuntimeError) as exc:
                        show(f"store: {sql[:400]!r} failed: {str(exc).splitlines()[0][:200]}")
        finally:
            con.close()
        if os.path.lexists(p.canary):
            raise RuntimeError("the fuzzer's own change wrote the canary (its bug)")
        if not commands:
            return
        with contextlib.chdir(p.db_dir):      # the store by its relative name
            self.commands(name, mode, then, kind)
        p.check({name, "merged.duckdb", "merged2.duckdb"})
        if _tree(self.run_dir) != self.run_files:
            raise AssertionError(f"the run folder {self.run_dir} changed")

    def same_rows(self) -> None:
        if _rows(OUTPUT["stdout"]) != self.rows:
            raise AssertionError("conn_stats of a store whose macros, views or objects alone "
                                 "were changed shows other rows: the store's code ran")

    def commands(self, db: str, mode: tuple, then: str, kind: str) -> None:
        p = self.paths
        step(command, "merge", "--db", p.fresh_store("merged.duckdb"), db)
        status = step(command, "query", *mode, "--db", db, CONN_STATS)
        if status == 0 and not p.rows_changed:
            if mode != ("--json",):
                status = step(command, "query", "--json", "--db", db, CONN_STATS)
            if status == 0:
                step(self.same_rows)
        if then == "analyze":
            step(command, "analyze", "--json", "-q", "--db", db, self.run_dir / "sender.pcap")
        elif then == "report":
            if step(command, "report", "-q", "--db", db, "-o", p.out / "r.html", "run:1") == 0:
                step(check_page, (p.out / "r.html").read_text())
        elif then == "plot":
            step(command, "plot", "-q", "--dpi", 30, "--db", db, "-o", p.out / "f.png", kind,
                 "run:1")
        elif then == "load":
            step(command, "load", "-q", "--json", "--db", db, self.run_dir)
        elif then == "compare":
            step(command, "compare", "--db", db, "--by", "cc")
        elif then == "export-and-merge":
            if step(command, "export", "--db", db, "--parquet", p.out / "pq") == 0:
                step(command, "merge", "--db", p.fresh_store("merged2.duckdb"), p.out / "pq")
        elif then == "query-the-merged":
            step(command, "query", "--db", p.db_dir / "merged.duckdb", CONN_STATS)


# ---------------------------------------------------------------------------
# Running tcpvar


# what tcpvar prints must show an input's text as text: no terminal escapes,
# controls or reordering marks (report/untrusted.py)
UNSAFE_OUTPUT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f"
                           "\u202a-\u202e\u2066-\u2069]")


def output_text(text: str, what: str) -> None:
    if MARK in text:
        raise AssertionError(f"{what} shows that a macro or view of the store ran: "
                             f"{text[max(0, text.index(MARK) - 200):text.index(MARK) + 40]!r}")
    m = UNSAFE_OUTPUT.search(text)
    if m:
        raise AssertionError(f"{what} shows a control character as it is: {m.group()!r} in "
                             f"{text[max(0, m.start() - 60):m.end() + 20]!r}")


KEEPER = None      # Findings, when TCPVAR_FUZZ_FINDINGS asks to keep going
SHOW = bool(os.environ.get("TCPVAR_FUZZ_SHOW"))     # say what each input changed


def show(text: str) -> None:
    if SHOW:
        for line in text.split("\n"):
            print(line.encode("unicode_escape").decode()[:300], file=sys.stderr, flush=True)


def show_changes(base: Path, folder: Path) -> None:
    """How @folder differs from @base: names, kinds, a diff of text."""
    import difflib

    show(f"folder: named {folder.name!r}")
    names = {p.name for p in base.iterdir()} | {p.name for p in folder.iterdir()}
    for n in sorted(names - {"figures", "report.html"}):
        a, b = base / n, folder / n
        if not os.path.lexists(b):
            show(f"folder: {n} removed")
        elif b.is_symlink():
            show(f"folder: {n} -> symlink to {os.readlink(b)!r}")
        elif not b.is_file():
            show(f"folder: {n} is a {'folder' if b.is_dir() else 'special file'}")
        elif not a.exists():
            show(f"folder: {n} added, {b.stat().st_size} bytes: {b.read_bytes()[:300]!r}")
        elif a.read_bytes() != b.read_bytes():
            old = a.read_bytes().decode("utf-8", "replace").splitlines()
            new = b.read_bytes().decode("utf-8", "replace").splitlines()
            diff = list(difflib.unified_diff(old, new, n, n, n=0, lineterm=""))[2:]
            show(f"folder: {n} changed ({len(diff)} diff lines):\n" +
                 "\n".join(line[:200] for line in diff[:12]))


def step(fn, *args, **kwargs):
    """fn(...); when keeping going, a crash in it is kept and the input goes
    on with its next step (so one input can show the faults of several
    commands)."""
    if KEEPER is None:
        return fn(*args, **kwargs)
    try:
        return fn(*args, **kwargs)
    except InputTimeout:
        raise
    except Exception as exc:   # noqa: BLE001 - every kind is a finding
        KEEPER.keep(exc, KEEPER.data)
        return None


OUTPUT = {"stdout": "", "stderr": ""}      # of the last command


def _rows(text: str) -> list[str]:
    """The rows of `tcpvar query --json`, in an order of their own."""
    return sorted(json.dumps(row, sort_keys=True) for row in json.loads(text))


def command(*args, cwd: Path | None = None) -> int:
    """`tcpvar ARGS` in this process, with --traceback: an internal error
    raises here. Its output goes through UTF-8 text streams as a pipe's
    would (a lone surrogate fails to print)."""
    argv = ["--traceback", *map(str, args)]
    out, err = io.BytesIO(), io.BytesIO()
    out_text = io.TextIOWrapper(out, encoding="utf-8", errors="strict", write_through=True)
    err_text = io.TextIOWrapper(err, encoding="utf-8", errors="strict", write_through=True)
    with contextlib.redirect_stdout(out_text), contextlib.redirect_stderr(err_text), \
            contextlib.chdir(cwd or os.getcwd()):
        status = tcpvar_main(argv)
    for name, stream in (("stdout", out), ("stderr", err)):
        OUTPUT[name] = stream.getvalue().decode("utf-8")
        output_text(OUTPUT[name], f"`tcpvar {args[0]}` on {name}")
    if status not in ALLOWED_STATUS:
        raise AssertionError(f"`tcpvar {args[0]}` exited {status}: "
                             f"{err.getvalue().decode('utf-8', 'replace')[-500:]}")
    return status


# ---------------------------------------------------------------------------
# Seeds


def folder_seeds(target: FolderTarget) -> dict[str, bytes]:
    """The base folder's files, each as the input that writes it whole (the
    CSV's first rows), and one input of each other kind of change."""
    files = {n: (target.base / n).read_bytes() for n in JSON_FILES}
    # each a little changed, so libFuzzer keeps it: it reads otherwise than the base
    files["manifest.json"] = files["manifest.json"].replace(b'"complete"', b'"running"')
    for n in ("iperf-1.json", "iperf-1-server.json"):
        files[n] = files[n].replace(b'"end"', b'"End"')
    files["tcp_probe.json"] = files["tcp_probe.json"].replace(
        b'"source"', b'"trace": "tcp_probe.trace", "source"', 1)
    files["tc-stats.json"] = files["tc-stats.json"].replace(b'"qlen"', b'"xstat"')
    csv = (target.base / "tcp_probe.csv").read_bytes().split(b"\n")
    files["tcp_probe.csv"] = b"\n".join(csv[:25]) + b"\n"
    ops, seeds = list(FOLDER_OPS), {"unchanged": [0]}
    for n in ("manifest.json", "iperf-1.json", "tcp_probe.json", "tcp_probe.csv"):
        seeds[f"whole-{n}"] = [0, 0, 0, 0, 1, ops.index("whole file"), FILES.index(n), files[n]]
    # few, as each costs about a second: CI replays them within its 20 s
    seeds["json-manifest"] = [0, 1, 0, 0, 1, ops.index("json"), 0, 1, 5, 1, 0, 1]
    seeds["csv"] = [0, 0, 0, 0, 1, ops.index("csv"), 1, 3, 0, 5, 1, 7]
    seeds["symlink-manifest"] = [0, 0, 0, 0, 1, ops.index("special"), 0, 3]
    seeds["pending-trace"] = [0, 0, 0, 0, 1, ops.index("pending trace"), 1, 0, 0, 0, 0, 0, 10]
    seeds["pending-trace-out"] = [0, 0, 0, 0, 1, ops.index("pending trace"), 1, 1, 0, 0, 2, 4]
    seeds["name-escape"] = [1]
    seeds["report"] = [2, 0, 1, 0, 0]
    return encode_seeds(target, seeds)


def store_seeds(target: StoreTarget) -> dict[str, bytes]:
    """Inputs of most kinds of change, each command after one of them."""
    then = {n: i for i, n in enumerate(STORE_NEXT)}
    # (query's output, the command after it, the store's name, the scripts of
    # store_change()); few, as each costs one or two seconds: CI replays them
    # within its 20 s
    seeds = {
        "macro-sqrt": (0, "analyze", 0, [[0, 1, 0, 0, 0, 0]]),
        "table-macro": (1, "plot", 0, [[1, 1, 2, 2, 1]]),
        # a macro named sqrt, and the catalog's listing of functions emptied
        "catalog-blind": (1, "nothing", 0, [[0, 1, 0, 0, 0, 0], [1, 1, 0, 0, 0]]),
        "view-conn_stats": (1, "load", 0, [[2, 1, 0, 0, 0, 1]]),
        "column-rename": (1, "compare", 0, [[4, 0, 1, 0, 1, 2]]),
        "value-params": (2, "nothing", 0, [[5, 0, 6, 0, 1, 3, 1, 1, 12]]),
        "meta": (1, "export-and-merge", 0, [[7, 0, 0, 0, 0]]),
        "object": (1, "nothing", 1, [[8, 0, 0, 1, 0, 3]]),
        "version-1": (1, "query-the-merged", 0, [[9, 0, 0, 0, 0]]),
        "segment": (1, "nothing", 0, [[10, 0, 0, 0, 4]]),
        "quote-break": (1, "nothing", 0, [[11, 0, 0]]),
    }
    seeds = {k: [mode, then[n], 0, name, len(scripts), *sum(scripts, [])]
             for k, (mode, n, name, scripts) in seeds.items()}
    return encode_seeds(target, seeds)


def encode_seeds(target, scripts: dict) -> dict[str, bytes]:
    out = {}
    for name, script in scripts.items():
        c = Scripted(script)
        target.run(c, commands=False)      # the changes only: they choose as tcpvar runs
        out[name] = c.encode()
    return out


# ---------------------------------------------------------------------------
# Keeping going after a crash (TCPVAR_FUZZ_FINDINGS)


class InputTimeout(Exception):
    pass


def _on_alarm(signum, frame):
    raise InputTimeout(f"the input ran longer than {INPUT_TIMEOUT} s")


INPUT_TIMEOUT = int(os.environ.get("TCPVAR_FUZZ_INPUT_TIMEOUT", "60"))
MEMORY_LIMIT = 4 << 30      # address space, when keeping going (about 1 GB is used)


class Findings:
    def __init__(self, folder: Path):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.seen = {p.stem.rsplit("-", 1)[-1] for p in folder.glob(f"{TARGET}-*.txt")}
        self.alarm = False
        # an input that would take all memory (a symlink to /dev/zero) fails
        # with MemoryError, kept as a finding, rather than ending the run
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, resource.RLIM_INFINITY))

    def run(self, fn, data: bytes) -> None:
        self.data = data
        if not self.alarm:           # after libFuzzer's own SIGALRM handler, once
            signal.signal(signal.SIGALRM, _on_alarm)
            self.alarm = True
        signal.alarm(INPUT_TIMEOUT)
        try:
            fn(data)
        except Exception as exc:   # noqa: BLE001 - every kind is a finding
            signal.alarm(0)
            self.keep(exc, data)
        finally:
            signal.alarm(0)

    def keep(self, exc: BaseException, data: bytes) -> None:
        frames = traceback.extract_tb(exc.__traceback__)
        ours = [f for f in frames if "/tests/fuzz/" not in f.filename] or frames
        where = f"{Path(ours[-1].filename).name}:{ours[-1].lineno}" if ours else "?"
        first = str(exc).split("\n")[0]
        if isinstance(exc, AssertionError):    # the oracle's: by its kind of message
            message = re.sub(r"[:(].*", "", first)
        else:                                  # by its words, not the names it quotes
            message = re.sub(r"(\"[^\"]*\"|'[^']*'|\d+)", "_", first)[:60]
        key = hashlib.sha1(f"{type(exc).__name__}|{where}|{message}".encode()).hexdigest()[:10]
        if key in self.seen:
            return
        self.seen.add(key)
        stem = self.folder / f"{TARGET}-{key}"
        stem.with_suffix(".bin").write_bytes(data)
        text = "".join(traceback.format_exception(exc))
        stem.with_suffix(".txt").write_text(text, errors="backslashreplace")
        print(f"\nfuzz_inputs.py: finding {stem.name} at {where}: {type(exc).__name__}: "
              f"{first[:300]!r}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------


def main() -> None:
    base = Path(os.environ.get("TCPVAR_FUZZ_BASE",
                               Path(__file__).resolve().parent / "build" / "base-run"))
    target = {"folder": FolderTarget, "store": StoreTarget}[TARGET](base)
    if len(sys.argv) == 3 and sys.argv[1] == "--seeds":
        out = Path(sys.argv[2])
        out.mkdir(parents=True, exist_ok=True)
        seeds = folder_seeds(target) if TARGET == "folder" else store_seeds(target)
        for name, data in seeds.items():
            (out / f"seed-{name}").write_bytes(data)
        shutil.rmtree(target.paths.work, ignore_errors=True)
        return

    def one_input(data: bytes) -> None:
        target.run(Choices(data))

    global KEEPER
    findings = os.environ.get("TCPVAR_FUZZ_FINDINGS")
    if findings:
        keeper = KEEPER = Findings(Path(findings))
        atheris.Setup(sys.argv, lambda data: keeper.run(one_input, data))
    else:
        atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
