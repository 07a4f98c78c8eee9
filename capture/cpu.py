"""How busy the CPUs of the kernel a run runs on were during its flows
(the guest's in the micro-VM), from /proc/stat: under real time a
saturated CPU may have been the path's bottleneck instead of the emulated
link (the fidelity check), under virtual time it only stretches the run.
And, on the host, how long the micro-VM waited for a host CPU meanwhile."""
from __future__ import annotations

from pathlib import Path

SATURATED = 0.95          # a CPU this busy over a second has nothing to spare


def cpu_times(stat: Path = Path("/proc/stat")) -> list[tuple[int, int]]:
    """(busy, total) jiffies of each CPU since boot."""
    out = []
    for line in stat.read_text().splitlines():
        name, *fields = line.split()
        if name.startswith("cpu") and name != "cpu":
            ticks = [int(x) for x in fields[:8]]   # user nice system idle iowait irq softirq steal
            idle = ticks[3] + ticks[4]
            out.append((sum(ticks) - idle, sum(ticks)))
    return out


class CpuMeter:
    """Busy fractions per CPU between calls of sample()."""

    def __init__(self):
        self.last = cpu_times()
        self.busy: list[float] = []       # the mean of the CPUs, per sample
        self.saturated = 0                # samples with every CPU saturated

    def sample(self) -> None:
        now = cpu_times()
        fracs = [(b1 - b0) / (t1 - t0) for (b0, t0), (b1, t1) in zip(self.last, now)
                 if t1 > t0]
        self.last = now
        if fracs:
            self.busy.append(sum(fracs) / len(fracs))
            self.saturated += min(fracs) >= SATURATED

    def summary(self) -> dict:
        n = len(self.busy)
        return {"busy_frac": round(sum(self.busy) / n, 4) if n else None,
                "saturated_frac": round(self.saturated / n, 4) if n else None, "samples": n}


def session_threads(sid: int) -> dict[int, tuple[int, int]]:
    """(ran, waited) ns of each thread of the processes in session @sid
    (the micro-VM's: vng, QEMU and its helpers), from schedstat: time on a
    host CPU, and time runnable on a run queue waiting for one."""
    out = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            # the fields after the command's name: state ppid pgrp session ...
            if int((proc / "stat").read_text().rsplit(")", 1)[1].split()[3]) != sid:
                continue
            for task in (proc / "task").iterdir():
                ran, waited, _ = (task / "schedstat").read_text().split()
                out[int(task.name)] = (int(ran), int(waited))
        except (OSError, ValueError, IndexError):
            continue                      # it ended meanwhile
    return out


class WaitMeter:
    """How long the micro-VM's processes waited for a host CPU, of the time
    they wanted one, between the first call of sample() and the last. Under
    real time the guest's clock runs on while its emulator waits: a guest
    that waited was slowed where it should not have been (the fidelity
    check's `emulator` item). A thread that ends between two samples loses
    its last share."""

    def __init__(self, sid: int):
        self.sid = sid
        self.last: dict[int, tuple[int, int]] | None = None
        self.ran = self.waited = 0

    def sample(self) -> None:
        now = session_threads(self.sid)
        if self.last is not None:
            for tid, (ran, waited) in now.items():
                ran0, waited0 = self.last.get(tid, (0, 0))      # new: all of it is since
                self.ran += ran - ran0
                self.waited += waited - waited0
        self.last = now

    def waited_frac(self) -> float | None:
        wanted = self.ran + self.waited
        return round(self.waited / wanted, 4) if wanted > 0 else None
