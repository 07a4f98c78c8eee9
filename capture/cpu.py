"""How busy the CPUs of the kernel a run runs on were during its flows
(the guest's in the micro-VM), from /proc/stat: under real time a
saturated CPU may have been the path's bottleneck instead of the emulated
link (the fidelity check), under virtual time it only stretches the run."""
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
