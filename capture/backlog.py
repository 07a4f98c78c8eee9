"""The bottleneck queue's backlog sampled while the flows run: `tc -s -j`
in batch mode (one process for the whole run, as starting one per sample
would cost the micro-VM more than the sampling rate allows), asked every
SAMPLE_S for the qdiscs of the bottleneck router's link. A series of the
queue independent of the captures' (queue_delays), written as tc printed
it: one line per sample, {"t_ns": wall clock, "qdiscs": tc's array}."""
from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

from tcpvar.artefacts.checks import MAX_BACKLOG_SAMPLES

from .testbed import Testbed

SAMPLE_S = 0.1


class BacklogSampler:
    def __init__(self, bed: Testbed, role: str, dev: str, path: Path) -> None:
        self.proc = bed.start("backlog", role, ["tc", "-s", "-j", "-batch", "-"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.ask = f"qdisc show dev {dev}\n"
        self.path = path
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self) -> None:
        due = time.monotonic()
        with open(self.path, "w") as out:
            for _ in range(MAX_BACKLOG_SAMPLES):
                at = time.time_ns()
                try:
                    self.proc.stdin.write(self.ask)
                    self.proc.stdin.flush()
                except OSError:             # tc ended
                    return
                line = self.proc.stdout.readline().strip()
                if not line:
                    return
                out.write(f'{{"t_ns": {at}, "qdiscs": {line}}}\n')
                due += SAMPLE_S
                if self.done.wait(max(0.0, due - time.monotonic())):
                    return

    def stop(self) -> None:
        self.done.set()
        self.thread.join()
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
