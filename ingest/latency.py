"""The latency probe's own output in a run folder (--latency) -> the
latency table: irtt's JSON (round trips with one-way delays) or ping's
timestamped lines. Both are untrusted: checked field by field, bounded."""
from __future__ import annotations

import re
from pathlib import Path

from tcpvar.artefacts import checks
from tcpvar.artefacts import run_folder as layout
from tcpvar.errors import InputError

MAX_BYTES = 160 << 20               # irtt writes about 1.1 kB a round trip
# irtt's "lost": whether the request (up), the reply (down) or either was lost
IRTT_LOST = {"false": None, "true": "unknown", "true_up": "up", "true_down": "down"}
_REPLY = re.compile(rb"\[(\d{1,12}\.\d{1,9})\] \d+ bytes from [^ ]+: icmp_seq=(\d{1,9}) "
                    rb"ttl=\d+ time=(\d{1,9}(?:\.\d{1,6})?) ms")
_UNANSWERED = re.compile(rb"\[(\d{1,12}\.\d{1,9})\] no answer yet for icmp_seq=(\d{1,9})")

Columns = dict[str, list]           # seq, sent_ns, rtt_us, up_us, down_us, lost


def read_latency(run_dir: Path) -> tuple[str, Columns] | None:
    """(tool, its samples as columns) from the run folder's latency file,
    or None when it has none; InputError (one line) when the file is not
    what irtt or ping write."""
    for tool, parse in (("irtt", _irtt), ("ping", _ping)):
        path = run_dir / layout.latency_report(tool)
        try:
            data = checks.read_bounded(path, MAX_BYTES, f"{tool}'s output")
        except FileNotFoundError:
            continue
        if not data.strip():            # a probe that wrote nothing (it failed: see its log)
            return None
        return tool, parse(path, data)
    return None


def _columns() -> Columns:
    return {k: [] for k in ("seq", "sent_ns", "rtt_us", "up_us", "down_us", "lost")}


def _irtt(path: Path, data: bytes) -> Columns:
    import json

    try:
        doc = json.loads(data)
    except RecursionError:
        raise InputError(f"{path}: not valid JSON (nested too deeply)") from None
    except ValueError as exc:
        raise InputError(f"{path}: not valid JSON ({exc})") from None
    trips = doc.get("round_trips") if isinstance(doc, dict) else None
    if not isinstance(trips, list):
        raise InputError(f"{path}: not irtt's JSON (no round_trips list)")
    if len(trips) > checks.MAX_LATENCY_SAMPLES:
        raise InputError(f"{path}: {len(trips)} round trips, more than a run has "
                         f"({checks.MAX_LATENCY_SAMPLES})")
    out = _columns()
    for i, rt in enumerate(trips):
        where = f"{path}: round_trips[{i}]"
        if not isinstance(rt, dict) or rt.get("lost") not in IRTT_LOST:
            raise InputError(f"{where}: not an irtt round trip (lost: "
                             f"{checks.shown(rt.get('lost') if isinstance(rt, dict) else rt)})")
        seq = rt.get("seqno")
        sent = _get(rt, "timestamps", "client", "send", "wall")
        delay = rt.get("delay") if isinstance(rt.get("delay"), dict) else {}
        if not _whole(seq, 1 << 31) or not (sent is None or _whole(sent, 1 << 63)):
            raise InputError(f"{where}: seqno or its send time is not a count")
        values = [delay.get(k) for k in ("rtt", "send", "receive")]
        if any(v is not None and not _whole(v, 1 << 63) for v in values):
            raise InputError(f"{where}: a delay is not a whole number of nanoseconds")
        out["seq"].append(seq)
        out["sent_ns"].append(sent)
        for key, v in zip(("rtt_us", "up_us", "down_us"), values):
            out[key].append(None if v is None else v / 1e3)
        out["lost"].append(IRTT_LOST[rt["lost"]])
    return out


def _ping(path: Path, data: bytes) -> Columns:
    """Replies (`[time] 64 bytes from ...: icmp_seq=N ttl=T time=X ms`)
    and requests ping gave up waiting for (`no answer yet for icmp_seq=N`,
    -O), a request once: a reply after its `no answer yet` counts."""
    samples: dict[int, tuple] = {}
    for line in data.splitlines():
        if m := _REPLY.search(line):
            at, seq, rtt = float(m[1]), int(m[2]), float(m[3])
            samples[seq] = (round((at - rtt / 1e3) * 1e9), rtt * 1e3, None)
        elif (m := _UNANSWERED.search(line)) and int(m[2]) not in samples:
            samples[int(m[2])] = (round(float(m[1]) * 1e9), None, "unknown")
        if len(samples) > checks.MAX_LATENCY_SAMPLES:
            raise InputError(f"{path}: more than {checks.MAX_LATENCY_SAMPLES} pings, more "
                             f"than a run has")
    if not samples and data.strip():
        raise InputError(f"{path}: not ping's output (no reply or unanswered request)")
    out = _columns()
    for seq in sorted(samples):
        sent, rtt, lost = samples[seq]
        for key, v in zip(out, (seq, sent, rtt, None, None, lost)):
            out[key].append(v)
    return out


def _get(d, *keys):
    for k in keys:
        d = d.get(k) if isinstance(d, dict) else None
    return d


def _whole(v, limit: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -limit <= v < limit


def insert_latency(con, run_id: int, tool: str, cols: Columns) -> None:
    con.execute("INSERT INTO latency SELECT $run_id, $tool, unnest($seq), unnest($sent_ns), "
                "unnest($rtt_us), unnest($up_us), unnest($down_us), unnest($lost)",
                {"run_id": run_id, "tool": tool, **cols})
