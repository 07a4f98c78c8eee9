"""The one progress event of long work: a run or a session, reading a
capture, a probe recording, a kernel build (and the studies to come). The
work calls a Reporter with Progress events; what shows them (report/) decides
how: a live table, a byte bar, a line per phase.

    progress(Progress("building the dumbbell", done=3, total=8, unit="hosts"))
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Callable


@dataclass(frozen=True)
class Progress:
    phase: str                      # one line: what is happening now
    done: float | None = None       # how far, in `unit`, where it can be counted
    total: float | None = None
    unit: str = ""                  # "bytes", "s", "hosts"
    line: str = ""                  # the step's latest output line (make's log)
    data: dict = field(default_factory=dict)   # beside it: a run's flow samples

    def to_json(self) -> dict:
        """For a JSON line: the micro-VM's guest sends its events this way."""
        return asdict(self)

    @classmethod
    def from_json(cls, doc: dict) -> Progress:
        return cls(**doc)


Reporter = Callable[[Progress], None]


def span_text(guest_s: float, host_s: float) -> str:
    """A micro-VM's pace: '20 s of the run in 103 s, 5.2x real time'."""
    return f"{guest_s:.0f} s of the run in {host_s:.0f} s, " \
           f"{host_s / max(guest_s, 1e-9):.1f}\u00d7 real time"


def ignore(_: Progress) -> None:
    """The reporter of work nobody watches."""
