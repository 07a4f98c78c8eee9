"""Ground truth from tshark's fields, computed by hand: what a flow sent
once (the sequence space it covered), per connection elapsed time, and
Jain's index whole and per interval. Tests hold tcpvar's values to these."""
from __future__ import annotations

import bisect
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

Sender = tuple[str, int]            # (source address, source port)


def fields(path: Path, display: str, *names: str) -> list[list[str]]:
    """tshark's @names fields of the packets of @path that match @display."""
    out = subprocess.run(["tshark", "-r", str(path), "-Y", display, "-T", "fields",
                          *[a for f in names for a in ("-e", f)]],
                         capture_output=True, text=True, check=True).stdout
    return [line.split("\t") for line in out.splitlines()]


def count(path: Path, display: str) -> int:
    """The packets of @path that match @display (tshark)."""
    return len(fields(path, display, "frame.number"))


@dataclass
class Capture:
    first_ns: int = 0                                    # the first record's time
    segments: dict[Sender, list[tuple[int, int, int]]] = field(default_factory=dict)
    spans: dict[frozenset, tuple[int, int]] = field(default_factory=dict)

    def elapsed_s(self, sender: Sender) -> float:
        """The sender's connection, first packet to last, either direction."""
        lo, hi = next(v for c, v in self.spans.items() if sender in c)
        return (hi - lo) / 1e9

    def data_s(self, sender: Sender) -> float:
        """The sender's first data segment to its last."""
        segs = self.segments[sender]
        return (max(t for t, _, _ in segs) - min(t for t, _, _ in segs)) / 1e9


def read(path: Path) -> Capture:
    """Per sender its data segments as (time ns, relative sequence number,
    payload bytes) in capture order, and each connection's time span."""
    out = subprocess.run(["tshark", "-r", str(path), "-T", "fields", "-e", "frame.time_epoch",
                          "-e", "ip.src", "-e", "tcp.srcport", "-e", "ip.dst", "-e",
                          "tcp.dstport", "-e", "tcp.seq", "-e", "tcp.len"],
                         capture_output=True, text=True, check=True).stdout
    cap = Capture()
    for k, line in enumerate(out.splitlines()):
        t, src, sport, dst, dport, seq, n = line.split("\t")
        secs, _, frac = t.partition(".")
        ns = int(secs) * 10**9 + int(frac.ljust(9, "0")[:9])
        if k == 0:
            cap.first_ns = ns
        if not sport:                   # not TCP over IPv4
            continue
        conn = frozenset({(src, int(sport)), (dst, int(dport))})
        lo, hi = cap.spans.get(conn, (ns, ns))
        cap.spans[conn] = (min(lo, ns), max(hi, ns))
        if int(n or 0) > 0:
            cap.segments.setdefault((src, int(sport)), []).append((ns, int(seq), int(n)))
    return cap


def sent_once(segs) -> int:
    """Bytes of the sequence space the segments cover: the union of their
    [seq, seq + len) ranges (a byte sent again counts once)."""
    total, end = 0, None
    for _, seq, n in sorted(segs, key=lambda s: s[1]):
        start = seq if end is None else max(seq, end)
        total += max(0, seq + n - start)
        end = seq + n if end is None else max(end, seq + n)
    return total


def fresh_segments(segs):
    """Each segment with whether it carries only bytes never sent before
    (a segment overlapping earlier ones is a retransmission, whole)."""
    starts, ends = [], []           # disjoint ranges sent so far, sorted
    for t, seq, n in segs:
        i = bisect.bisect_right(starts, seq)
        fresh = (i == 0 or ends[i - 1] <= seq) and (i == len(starts) or starts[i] >= seq + n)
        lo, hi, j = seq, seq + n, i
        if i and ends[i - 1] >= seq:            # merge with the range before
            i -= 1
            lo = starts[i]
        while j < len(starts) and starts[j] <= hi:
            hi = max(hi, ends[j])
            j += 1
        starts[i:j], ends[i:j] = [lo], [max(hi, ends[i] if i < j else hi)]
        yield t, seq, n, fresh


def jain(xs) -> float:
    xs = list(xs)
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))


def interval_jain(cap: Capture, senders: list[Sender], bin_ns: int) -> dict[int, float]:
    """Jain's index per interval (from the capture's first record) of the
    senders' goodput, the bytes of their segments that send nothing twice,
    over the intervals in which each of them sent data: from the latest
    first such interval to the earliest last one."""
    bins: dict[Sender, dict[int, int]] = {}
    for s in senders:
        per = bins[s] = {}
        for t, _, n, fresh in fresh_segments(cap.segments[s]):
            b = (t - cap.first_ns) // bin_ns
            per[b] = per.get(b, 0) + (n if fresh else 0)
    lo = max(min(v) for v in bins.values())
    hi = min(max(v) for v in bins.values())
    return {b: jain(8 * bins[s].get(b, 0) / (bin_ns / 1e9) for s in senders)
            for b in range(lo, hi + 1)}


def data_bins(path: Path, bin_ns: int) -> dict[tuple[Sender, Sender], set[int]]:
    """Per (sender, receiver) the intervals, from the capture's first record,
    in which tshark sees the sender send data."""
    out = subprocess.run(["tshark", "-r", str(path), "-T", "fields", "-e", "frame.time_epoch",
                          "-e", "ip.src", "-e", "tcp.srcport", "-e", "ip.dst", "-e",
                          "tcp.dstport", "-e", "tcp.len"],
                         capture_output=True, text=True, check=True).stdout
    first, bins = None, {}
    for line in out.splitlines():
        t, src, sport, dst, dport, n = line.split("\t")
        secs, _, frac = t.partition(".")
        ns = int(secs) * 10**9 + int(frac.ljust(9, "0")[:9])
        first = ns if first is None else first
        if sport and int(n or 0) > 0:
            key = ((src, int(sport)), (dst, int(dport)))
            bins.setdefault(key, set()).add((ns - first) // bin_ns)
    return bins
