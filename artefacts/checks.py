"""The shape of what a run folder's JSON files hold, checked where they are
read (docs/security.md): a run folder may be somebody else's, and every
field ingest and report use is checked for its type and range before any
of it is used, so a malformed one is one line naming the file and the
field (InputError, exit status 3), never a failure halfway through.

  read_json          a JSON file of a run folder: size, nesting, syntax
  check_manifest     manifest.json (run_folder.read_manifest)
  stored_params      a run's params as a store holds them (analyzers/)
  check_iperf        iperf-<flow>.json, iperf-<flow>-server.json
  check_tc_stats     tc-stats.json
"""
from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path

from tcpvar.errors import InputError

# a run's manifest is a few kB and its iperf3 reports a few MB (a day's run
# at 1 s intervals): a file larger than this is not one tcpvar wrote
MAX_JSON_BYTES = 64 << 20
# steps of a bandwidth schedule (`--bw-schedule`, a study's bw_schedule, a
# manifest's params.schedule); the seed papers' have 3
MAX_SCHEDULE_STEPS = 1000
MAX_HOPS = 8                    # a parking lot's bottlenecks (`--hops`)
MAX_LATENCY_SAMPLES = 100_000   # a run's latency probe: its duration over its interval
MAX_BACKLOG_SAMPLES = 200_000   # the bottleneck's sampled backlog, 10 a second: 5.5 h
_BIGINT = 1 << 63               # the store's BIGINT columns
_INTEGER = 1 << 31              # and its INTEGER ones


def open_regular(path: Path):
    """@path opened to read bytes, if it is a regular file: a FIFO or a
    device planted under a file's name would hang or never end the read.
    FileNotFoundError when there is none; InputError otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)   # a FIFO's open waits without it
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputError(f"{path}: not a regular file")
    return os.fdopen(fd, "rb")


def read_bounded(path: Path, limit: int, what: str) -> bytes:
    """@path's bytes, if it is a regular file of at most @limit bytes;
    FileNotFoundError when there is none; else InputError, saying it is not
    @what."""
    with open_regular(path) as f:
        try:
            data = f.read(limit + 1)
        except OSError as exc:
            raise InputError(f"{path}: cannot be read ({exc.strerror})") from None
    if len(data) > limit:
        raise InputError(f"{path}: larger than {limit >> 20} MB, not {what}")
    return data


def read_json(path: Path, cut_short_ok: bool = False):
    """The JSON document of @path; InputError (one line) when it is not a
    regular file, too large, nested too deeply or not JSON. With
    @cut_short_ok, a missing file or one that is not JSON (a run stopped
    while writing it) is None instead."""
    try:
        data = read_bounded(path, MAX_JSON_BYTES, "one tcpvar wrote")
    except FileNotFoundError:
        if cut_short_ok:
            return None
        raise InputError(f"{path}: no such file") from None
    try:
        return json.loads(data)
    except RecursionError:
        raise InputError(f"{path}: not valid JSON (nested too deeply)") from None
    except ValueError as exc:           # UnicodeDecodeError too
        if cut_short_ok:
            return None
        raise InputError(f"{path}: not valid JSON ({exc})") from None


# --- types ---------------------------------------------------------------------

def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) \
        and abs(v) < _BIGINT


def _integer(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -_BIGINT <= v < _BIGINT


def _count(v) -> bool:
    return _integer(v) and v >= 0


KINDS = {   # name in the message -> test
    "a number": _number,
    "an integer": _integer,
    "a count (an integer, 0 or more)": _count,
    "a positive integer": lambda v: _integer(v) and 1 <= v < _INTEGER,
    "a port (0 to 65535)": lambda v: _integer(v) and 0 <= v <= 65535,
    "a text": lambda v: isinstance(v, str),
    "an object": lambda v: isinstance(v, dict),
    "a list": lambda v: isinstance(v, list),
    "true or false": lambda v: isinstance(v, bool),
}
_NUM, _INT, _CNT, _POS, _PORT, _TEXT, _OBJ, _LIST, _BOOL = KINDS


class _Bad(Exception):
    """A field that is not what it should be: where, and what it should be."""


def shown(v) -> str:
    """A short quote of a bad value (the message is one line; the terminal
    escapes its control characters)."""
    text = json.dumps(v) if isinstance(v, (str, int, float, bool)) or v is None else \
        type(v).__name__
    return text if len(text) <= 40 else text[:37] + "..."


def _field(doc: dict, key: str, kind: str, where: str, required: bool = False):
    """doc[key] when it is of @kind; an optional field may be missing or null."""
    name = f"{where}{key}"
    if key not in doc:
        if required:
            raise _Bad(f"{name}: missing")
        return None
    v = doc[key]
    if v is None and not required:
        return None
    if not KINDS[kind](v):
        if kind == _NUM and isinstance(v, (int, float)) and not isinstance(v, bool):
            raise _Bad(f"{name}: {shown(v)} is out of range")     # NaN, infinity, 1e300
        raise _Bad(f"{name}: {shown(v)} is not {kind}")
    return v


def _fields(doc: dict, spec: dict, where: str = "") -> None:
    """Each field of @spec ({key: (kind, required)}) checked in @doc."""
    for key, (kind, required) in spec.items():
        _field(doc, key, kind, where, required=required)


def _checked(path: Path, what: str, check, doc):
    """@doc once @check passed; else InputError: @path, what it is not, the field."""
    try:
        check(doc)
    except _Bad as exc:
        raise InputError(f"{path}: not {what} ({exc})") from None
    return doc


def is_count(v) -> bool:
    """Whether @v is a whole number the store's BIGINT holds, 0 or more."""
    return _count(v)


def check_short(where: str, rec) -> dict:
    """@rec, a line of short.jsonl, if its fields have their types and its
    outcome is one the client writes; else InputError naming @where and
    the field."""
    def check(r):
        if not isinstance(r, dict):
            raise _Bad(f"{shown(r)} is not an object")
        _fields(r, SHORT)
        if r["outcome"] not in SHORT_OUTCOMES:
            raise _Bad(f"outcome: {shown(r['outcome'])} is not one of "
                       f"{', '.join(SHORT_OUTCOMES)}")
    return _checked(where, "a short flow's record", check, rec)


# --- manifest.json -------------------------------------------------------------

# What ingest, the summary, the figures, the report and the studies read of
# a manifest (capture/runner.py writes it). Required: what every manifest
# tcpvar wrote has; the rest may be missing (older tcpvar) or null.
MANIFEST = {
    "params": (_OBJ, True), "flows": (_LIST, True), "status": (_TEXT, True),
    "backend": (_TEXT, False), "kernel": (_TEXT, False), "kernel_version": (_TEXT, False),
    "hostname": (_TEXT, False), "tcpvar_version": (_TEXT, False), "tag": (_TEXT, False),
    "error": (_TEXT, False), "seed": (_INT, False), "repetition": (_POS, False),
    "created_ns": (_INT, False), "started_ns": (_INT, False), "ended_ns": (_INT, False),
    "probe": (_OBJ, False), "study": (_OBJ, False), "tools": (_OBJ, False),
    "sysctls": (_OBJ, False), "capture_drops": (_OBJ, False),
    "clock": (_OBJ, False), "cpu": (_OBJ, False), "softnet_dropped": (_INT, False),
}
PARAMS = {      # capture/params.py RunParams.to_json()
    "ccs": (_LIST, True), "rtt_ms": (_NUM, True), "loss_pct": (_NUM, True),
    "jitter_ms": (_NUM, False),         # runs before --jitter lack it
    "bw_bps": (_NUM, True), "buffer": (_OBJ, True), "duration_s": (_NUM, True),
    "flows": (_POS, True), "mode": (_TEXT, True), "start_gap_s": (_NUM, True),
    "schedule": (_LIST, True), "repeat": (_POS, True), "seed": (_INT, True),
    "shaper": (_TEXT, True), "ngwa_mode": (_INT, False), "wbrto": (_TEXT, False),
    "wbrto_unit_ms": (_INT, True),
    "clock": (_TEXT, False),            # runs before --clock lack it
    "aqm": (_TEXT, False), "aqm_params": (_OBJ, False),      # and before --aqm
    "ecn": (_LIST, False), "flow_rtts_ms": (_LIST, False),   # --ecn, --rtt lists
    "reverse": (_CNT, False), "bw_reverse_bps": (_NUM, False),   # --reverse, --bw-reverse
    "topology": (_TEXT, False), "hops": (_POS, False), "cross": (_CNT, False),  # parking lot
    "latency": (_TEXT, False), "latency_interval_ms": (_NUM, False),  # --latency
    "flow_rates_bps": (_LIST, False),   # --rate
    "short": (_LIST, False),            # --short
    "flow_sizes": (_LIST, False),       # --size
}
SHORT_CLASS = {"per_s": (_NUM, True), "bytes": (_POS, True)}
BUFFER = {"text": (_TEXT, True), "packets": (_CNT, False), "bytes": (_CNT, False)}
STEP = {"t_s": (_NUM, True), "bw_bps": (_NUM, True)}
FLOW = {        # run_folder.FLOW_KEYS, each with its type
    "flow": (_POS, True), "role": (_TEXT, True), "cc": (_TEXT, True),
    "src_addr": (_TEXT, True), "src_port": (_PORT, True), "dst_addr": (_TEXT, True),
    "dst_port": (_PORT, True), "start_s": (_NUM, True), "duration_s": (_NUM, True),
    "rtt_ms": (_NUM, False), "ecn": (_BOOL, False),     # runs before --rtt lists lack them
    "direction": (_TEXT, False),                        # and before --reverse
    "hop": (_POS, False),                               # a parking lot's cross flow
    "outcome": (_TEXT, False),          # how its client ended; runs before it lack it
    "rate_bps": (_NUM, False),          # --rate
    "size_bytes": (_POS, False),        # --size
}
# how a flow's iperf3 client ended (capture/runner.py outcome())
OUTCOMES = ("complete", "cut", "never connected")
# a short flow's line of short.jsonl (capture/shortflows.py), and how it ended
SHORT = {"id": (_POS, True), "planned_s": (_NUM, True), "bytes": (_POS, True),
         "start_ns": (_CNT, False), "connected_ns": (_CNT, False), "end_ns": (_CNT, False),
         "sport": (_PORT, False), "sent": (_CNT, True), "outcome": (_TEXT, True),
         "error": (_TEXT, False)}
SHORT_OUTCOMES = ("complete", "cut", "never connected", "failed")
PROBE = {"source": (_TEXT, False), "reason": (_TEXT, False), "events": (_CNT, False),
         "lost": (_CNT, False), "error": (_TEXT, False)}
STUDY = {"name": (_TEXT, True), "cell": (_TEXT, True)}
CLOCK = {"kind": (_TEXT, True), "icount_shift": (_INT, False), "dilation": (_NUM, False),
         "run_host_s": (_NUM, False), "workspace": (_TEXT, False),
         "host_wait_frac": (_NUM, False)}
CPU = {"busy_frac": (_NUM, False), "saturated_frac": (_NUM, False), "samples": (_CNT, False)}


def check_manifest(path: Path, m) -> dict:
    """@m, the manifest read from @path, if every field tcpvar uses has its
    type; else InputError naming the field."""
    if not isinstance(m, dict):
        raise InputError(f"{path}: not the manifest of a tcpvar run (not a JSON object)")
    return _checked(path, "the manifest of a tcpvar run", _manifest, m)


def stored_params(text: str | None, where: str) -> dict | None:
    """A run's params as a store holds them (JSON text; a store may be
    somebody else's), if every field tcpvar uses has its type; None for a
    run without (a probe session); else InputError naming @where and the
    field."""
    if not text:
        return None
    try:
        p = json.loads(text)
    except (ValueError, RecursionError):
        raise InputError(f"{where}: its params are not JSON") from None
    if not isinstance(p, dict):
        raise InputError(f"{where}: its params are not a JSON object")
    return _checked(where, "the params of a tcpvar run", _params, p)


def _manifest(m: dict) -> None:
    _fields(m, MANIFEST)
    _params(m["params"])
    _flows(m["flows"])
    for key, spec in (("probe", PROBE), ("study", STUDY), ("clock", CLOCK), ("cpu", CPU)):
        if m.get(key) is not None:
            _fields(m[key], spec, key + ".")
    for key in ("tools", "sysctls"):
        for k, v in (m.get(key) or {}).items():
            if v is not None and not isinstance(v, (str, int, float)):
                raise _Bad(f"{key}.{k}: {shown(v)} is not a text or a number")


def _params(p: dict) -> None:
    _fields(p, PARAMS, "params.")
    for i, cc in enumerate(p["ccs"]):
        if not isinstance(cc, str):
            raise _Bad(f"params.ccs[{i}]: {shown(cc)} is not a text")
    _fields(p["buffer"], BUFFER, "params.buffer.")
    for key, kind in (("ecn", _BOOL), ("flow_rtts_ms", _NUM)):
        for i, v in enumerate(p.get(key) or []):
            if not KINDS[kind](v):
                raise _Bad(f"params.{key}[{i}]: {shown(v)} is not {kind}")
    for i, c in enumerate(p.get("short") or []):
        if not isinstance(c, dict):
            raise _Bad(f"params.short[{i}]: {shown(c)} is not an object")
        _fields(c, SHORT_CLASS, f"params.short[{i}].")
    for k, v in (p.get("aqm_params") or {}).items():
        if v is not None and not isinstance(v, str):
            raise _Bad(f"params.aqm_params.{k}: {shown(v)} is not a text")
    if p.get("topology", "dumbbell") not in ("dumbbell", "parking-lot"):
        raise _Bad(f"params.topology: {shown(p['topology'])} is neither dumbbell nor "
                   f"parking-lot")
    if p.get("hops", 1) > MAX_HOPS:      # each hop's captures are read
        raise _Bad(f"params.hops: {p['hops']}, more than a parking lot may have ({MAX_HOPS})")
    if len(p["schedule"]) > MAX_SCHEDULE_STEPS:
        raise _Bad(f"params.schedule: {len(p['schedule'])} steps, more than a bandwidth "
                   f"schedule may have ({MAX_SCHEDULE_STEPS})")
    for i, step in enumerate(p["schedule"]):
        where = f"params.schedule[{i}]"
        if not isinstance(step, dict):
            raise _Bad(f"{where}: {shown(step)} is not an object")
        _fields(step, STEP, where + ".")


def _flows(flows: list) -> None:
    numbers = set()
    for i, f in enumerate(flows):
        where = f"flows[{i}]"
        if not isinstance(f, dict):
            raise _Bad(f"{where}: {shown(f)} is not an object")
        _fields(f, FLOW, where + ".")
        if f["flow"] in numbers:
            raise _Bad(f"{where}.flow: flow {f['flow']} is there twice")
        if (f.get("hop") or 0) > MAX_HOPS:
            raise _Bad(f"{where}.hop: {f['hop']}, more than a parking lot has ({MAX_HOPS})")
        if f.get("direction", "forward") not in ("forward", "reverse"):
            raise _Bad(f"{where}.direction: {shown(f['direction'])} is neither forward "
                       f"nor reverse")
        if f.get("outcome", "complete") not in OUTCOMES:
            raise _Bad(f"{where}.outcome: {shown(f['outcome'])} is not one of "
                       f"{', '.join(OUTCOMES)}")
        numbers.add(f["flow"])


# --- iperf3 reports --------------------------------------------------------------

# what ingest/iperf.py reads of a report (iperf3 --json)
SUM = {"bytes": (_NUM, False), "retransmits": (_NUM, False),
       "bits_per_second": (_NUM, False)}
STREAM = {"start": (_NUM, False), "end": (_NUM, False), "bytes": (_NUM, False),
          "bits_per_second": (_NUM, False), "retransmits": (_NUM, False),
          "snd_cwnd": (_NUM, False), "rtt": (_NUM, False), "rttvar": (_NUM, False)}


def check_iperf(path: Path, doc):
    """@doc, an iperf3 report read from @path, if what tcpvar reads of it
    has its type; else InputError naming the field."""
    if not isinstance(doc, dict):
        raise InputError(f"{path}: not an iperf3 report (not a JSON object)")
    return _checked(path, "an iperf3 report", _iperf, doc)


def _iperf(doc: dict) -> None:
    _field(doc, "error", _TEXT, "")
    end = _field(doc, "end", _OBJ, "") or {}
    for key in ("sum_sent", "sum_received"):
        _fields(_field(end, key, _OBJ, "end.") or {}, SUM, f"end.{key}.")
    _field(end, "sender_tcp_congestion", _TEXT, "end.")
    for i, interval in enumerate(_field(doc, "intervals", _LIST, "") or []):
        where = f"intervals[{i}]"
        if not isinstance(interval, dict):
            raise _Bad(f"{where}: {shown(interval)} is not an object")
        streams = _field(interval, "streams", _LIST, where + ".") or []
        if streams:                     # the first stream is the one read
            if not isinstance(streams[0], dict):
                raise _Bad(f"{where}.streams[0]: {shown(streams[0])} is not an object")
            _fields(streams[0], STREAM, f"{where}.streams[0].")


# --- tc-stats.json ---------------------------------------------------------------

QDISC = {"router": (_TEXT, False), "dev": (_TEXT, False), "kind": (_TEXT, False),
         "handle": (_TEXT, False), "parent": (_TEXT, False), "options": (_OBJ, False),
         **{k: (_NUM, False) for k in ("bytes", "packets", "drops", "overlimits", "requeues",
                                       "backlog", "qlen")}}


def check_tc_stats(path: Path, doc):
    """@doc, the qdiscs read from @path, if each is an object whose fields
    tcpvar stores have their types; else InputError naming the field."""
    if not isinstance(doc, list):
        raise InputError(f"{path}: not the runner's queue statistics (not a JSON list)")
    return _checked(path, "the runner's queue statistics", _tc_stats, doc)


def _tc_stats(doc: list) -> None:
    for i, q in enumerate(doc):
        if not isinstance(q, dict):
            raise _Bad(f"[{i}]: {shown(q)} is not an object")
        _fields(q, QDISC, f"[{i}].")
