"""Rates and sizes as run options spell them."""
from __future__ import annotations

import re

from tcpvar.errors import UsageError

MAX_RATE_BPS = 100e9
_RATE_UNITS = {"": 1, "bit": 1, "bps": 1, "k": 1e3, "kbit": 1e3, "kbps": 1e3,
               "m": 1e6, "mbit": 1e6, "mbps": 1e6, "g": 1e9, "gbit": 1e9, "gbps": 1e9}
SIZE_UNITS = {"b": 1, "kb": 1000, "k": 1000, "kib": 1024, "mb": 1_000_000,
              "m": 1_000_000, "mib": 1 << 20}


def parse_rate(text: str) -> float:
    """'100mbit', '1gbit', '500M', '2.5gbps' -> bits per second."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-z]*)\s*", text.lower())
    if not m or m.group(2) not in _RATE_UNITS:
        raise UsageError(f"cannot read rate {text!r} (use e.g. 100mbit, 1gbit, 500kbit)")
    bps = float(m.group(1)) * _RATE_UNITS[m.group(2)]
    if not 8_000 <= bps <= MAX_RATE_BPS:
        raise UsageError(f"rate {text!r} is outside 8kbit..100gbit")
    return bps


def parse_size(text: str, option: str) -> int:
    """'100kb', '1mb', '1500b', '64kib' -> bytes (at least 1)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-z]*)\s*", text.lower())
    if not m or m.group(2) not in SIZE_UNITS:
        raise UsageError(f"{option}: cannot read size {text!r} (use e.g. 1500b, 100kb, 1mb)")
    size = int(float(m.group(1)) * SIZE_UNITS[m.group(2)])
    if size < 1:
        raise UsageError(f"{option}: size {text!r} is below one byte")
    return size
