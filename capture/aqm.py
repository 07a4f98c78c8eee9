"""The bottleneck's queue discipline (`--aqm`, `--aqm-params`): drop-tail
FIFOs and the AQMs of Linux, checked before anything is set up and turned
into the `tc qdisc` arguments of the queue under the rate limiter.

--buffer keeps its meaning for every queue: the qdisc's own limit, in the
unit the qdisc counts (packets or bytes; CAKE's memory limit), so the
limit is never one of --aqm-params. With ECN asked for on any flow the
AQMs that can mark are told to (`ecn`), unless --aqm-params says `noecn`.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from tcpvar.errors import UsageError

from .units import SIZE_UNITS, parse_rate

# a full packet on the emulated Ethernet links (MTU 1500 and the header): a
# packet limit from a --buffer in bytes counts these
FRAME = 1514

_TIME = r"[0-9]*\.?[0-9]+(us|ms|s)"
_SIZE = r"[0-9]*\.?[0-9]+\s*(b|kb|k|kib|mb|m|mib)?"
_RATE = r"[0-9]*\.?[0-9]+\s*(bit|kbit|mbit|gbit|bps|kbps|mbps|gbps)"
_INT = r"[0-9]{1,9}"
_PROB = r"(0?\.[0-9]+|[01](\.0*)?)"
# value kinds of --aqm-params: what each accepts (tc's own syntax), in words
KINDS = {"time": (_TIME, "a time such as 5ms or 500us"),
         "size": (_SIZE, "a size in bytes such as 1514 or 64kb"),
         "rate": (_RATE, "a rate such as 10mbit"),
         "int": (_INT, "a whole number"),
         "prob": (_PROB, "a probability from 0 to 1"),
         "pct": (r"[0-9]{1,2}(\.[0-9]+)?|100", "a percentage from 0 to 100")}

_FQ_CODEL = {"flows": "int", "target": "time", "interval": "time", "quantum": "size",
             "ce_threshold": "time", "memory_limit": "size", "drop_batch": "int",
             "ecn": None, "noecn": None}
_PIE = {"target": "time", "tupdate": "time", "alpha": "int", "beta": "int",
        "ecn": None, "noecn": None, "bytemode": None, "nobytemode": None,
        "dq_rate_estimator": None, "no_dq_rate_estimator": None}
_CAKE_FLAGS = ("besteffort", "diffserv3", "diffserv4", "diffserv8", "precedence",
               "flowblind", "srchost", "dsthost", "hosts", "flows", "dual-srchost",
               "dual-dsthost", "triple-isolate", "nat", "nonat", "wash", "nowash",
               "ack-filter", "ack-filter-aggressive", "no-ack-filter", "split-gso",
               "no-split-gso", "raw", "ingress", "egress")


@dataclass(frozen=True)
class Aqm:
    """A queue discipline: the unit its limit counts, its --aqm-params (each
    a value kind of KINDS, or None for a flag), and whether it marks
    ECN-capable packets when told to (`ecn`), always, or never (None)."""
    name: str
    limit: str                  # 'packets' or 'bytes'
    params: dict
    marks: str | None = None    # 'ecn', 'always' or None
    limit_key: str = "limit"    # its option that takes --buffer


AQMS = {a.name: a for a in (
    Aqm("bfifo", "bytes", {}),
    Aqm("pfifo", "packets", {}),
    # limit, min, max and avpkt in bytes; burst in packets (tc-red(8))
    Aqm("red", "bytes", {"min": "size", "max": "size", "avpkt": "size", "burst": "int",
                         "probability": "prob", "bandwidth": "rate", "ecn": None,
                         "harddrop": None, "adaptive": None, "nodrop": None}, marks="ecn"),
    Aqm("codel", "packets", {"target": "time", "interval": "time", "ce_threshold": "time",
                             "ecn": None, "noecn": None}, marks="ecn"),
    Aqm("fq_codel", "packets", _FQ_CODEL, marks="ecn"),
    Aqm("pie", "packets", _PIE, marks="ecn"),
    Aqm("fq_pie", "packets", {**_PIE, "flows": "int", "quantum": "size",
                              "memory_limit": "size", "ecn_prob": "pct"}, marks="ecn"),
    # CAKE under the rate limiter: its own shaper off unless bandwidth is given
    Aqm("cake", "bytes", {"bandwidth": "rate", "rtt": "time", "overhead": "int",
                          "mpu": "int", **dict.fromkeys(_CAKE_FLAGS)},
        marks="always", limit_key="memlimit"),
    Aqm("fq", "packets", {"flow_limit": "int", "quantum": "size", "initial_quantum": "size",
                          "maxrate": "rate", "buckets": "int", "ce_threshold": "time",
                          "pacing": None, "nopacing": None}),
    Aqm("sfq", "packets", {"perturb": "int", "quantum": "size", "divisor": "int",
                           "flows": "int", "depth": "int", "headdrop": None}),
)}
MAX_PARAMS_CHARS = 1000
MAX_SIZE = (1 << 32) - 1


def offered(qdiscs: set[str]) -> list[str]:
    """Of tcpvar's queues, those in @qdiscs (what a kernel offers), in order."""
    return [q for q in AQMS if q in qdiscs]


def check_name(name: str) -> str:
    name = name.strip().lower()
    if name not in AQMS:
        raise UsageError(f"--aqm {name!r}: one of {', '.join(AQMS)}")
    return name


def parse_params(name: str, text: str | None) -> dict[str, str | None]:
    """'target=5ms,interval=100ms,ecn' -> {'target': '5ms', 'interval': '100ms',
    'ecn': None}, every key and value checked against the qdisc's own."""
    if not text:
        return {}
    if len(text) > MAX_PARAMS_CHARS:
        raise UsageError(f"--aqm-params: {len(text)} characters, at most {MAX_PARAMS_CHARS}")
    aqm, out = AQMS[name], {}
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        key, eq, value = (s.strip().lower() for s in item.partition("="))
        if key in ("limit", aqm.limit_key):
            raise UsageError(f"--aqm-params {key}: the queue's limit is --buffer")
        if key not in aqm.params:
            known = ", ".join(aqm.params) or "none"
            raise UsageError(f"--aqm-params: {name} has no parameter {key!r} "
                             f"(it takes: {known})")
        kind = aqm.params[key]
        if kind is None:
            if eq:
                raise UsageError(f"--aqm-params {key}: a flag, given without a value")
            out[key] = None
            continue
        pattern, words = KINDS[kind]
        if not re.fullmatch(pattern, value):
            raise UsageError(f"--aqm-params {key}={value!r}: {name} wants {words}")
        out[key] = _plain(kind, value)
    return out


def _plain(kind: str, value: str) -> str:
    """Sizes and rates as tc reads them unambiguously (bytes, bits per
    second), in tcpvar's units: kb is 1000 bytes, as in --buffer (tc's
    own kb is 1024)."""
    if kind == "size":
        m = re.fullmatch(r"([0-9]*\.?[0-9]+)\s*([a-z]*)", value)
        n = int(float(m[1]) * SIZE_UNITS[m[2] or "b"])
        if n > MAX_SIZE:
            raise UsageError(f"--aqm-params: size {value!r} is above 4 GB")
        return str(n)
    if kind == "rate":
        return f"{int(parse_rate(value))}bit"
    return value


def limit_value(aqm: Aqm, packets: int | None, nbytes: int | None) -> int:
    """--buffer in the unit @aqm counts: whole frames for a packet limit."""
    if aqm.limit == "packets":
        return packets if packets is not None else max(1, nbytes // FRAME)
    return nbytes if nbytes is not None else packets * FRAME


def tc_args(name: str, params: dict[str, str | None], packets: int | None,
            nbytes: int | None, ecn: bool, rate_bps: float) -> list[str]:
    """The `tc qdisc add ... <these>` of the bottleneck queue."""
    aqm = AQMS[name]
    limit = limit_value(aqm, packets, nbytes)
    args = [name, aqm.limit_key, str(limit)]
    given = dict(params)
    if name == "red":
        given = _red(given, limit, rate_bps)
    if ecn and aqm.marks == "ecn" and "noecn" not in given:
        given.setdefault("ecn", None)
    for key, value in given.items():
        args += [key] if value is None else [key, value]
    return args


def _red(given: dict, limit: int, rate_bps: float) -> dict:
    """RED's thresholds where --aqm-params leaves them: the average queue
    marks or drops from a sixth of --buffer on, with probability 0.1 at
    half of it (ns-2's max_p), Floyd's max = 3 x min; the burst as tc-red(8)
    computes it."""
    out = dict(given)
    out.setdefault("min", str(max(limit // 6, FRAME)))
    out.setdefault("max", str(max(3 * int(out["min"]), 2 * FRAME)))
    out.setdefault("avpkt", str(FRAME))
    out.setdefault("probability", "0.1")
    out.setdefault("bandwidth", f"{int(rate_bps)}bit")
    lo, hi, avpkt = int(out["min"]), int(out["max"]), int(out["avpkt"])
    if not 0 < lo < hi <= limit or avpkt == 0:
        raise UsageError(f"red: the thresholds must be 0 < min ({lo}) < max ({hi}) <= the "
                         f"--buffer of {limit} bytes, avpkt above 0")
    out.setdefault("burst", str(max(1, math.ceil((2 * lo + hi) / (3 * avpkt)))))
    return out
