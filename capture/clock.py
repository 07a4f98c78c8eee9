"""The micro-VM's clock (`--clock`).

`real`: the guest's clock follows the host's. Under TCG the guest then runs
as fast as the host's CPU lets it, so its rate, its timers and the variants'
behaviour change with the host's speed and with whatever else runs there.

`virtual`: QEMU's instruction counting (`-icount shift=S,sleep=off`, TCG
only). The guest's clock advances 2^S ns per instruction it executes and
jumps ahead when every vCPU is idle, so a busy guest runs slower in wall
time instead of seeing time pass: the run's result does not depend
on the host. Its cost is the dilation, host seconds per guest second.

`auto`: real time under KVM, else virtual (docs/run.md: the measurements
behind the choice)."""
from __future__ import annotations

from tcpvar.errors import UsageError

CLOCKS = ("auto", "real", "virtual")
ICOUNT_SHIFT = 0        # 1 ns per instruction: docs/run.md, "The micro-VM's clock"
VIRTUAL_CPUS = 1        # icount runs every vCPU in one thread: a second adds no speed
# the host's limits on a guest (boot, silence) are guest seconds; under
# virtual time they are stretched by the largest dilation expected (a busy
# gigabit run: about 5)
DILATION_BOUND = 10.0


def check(clock: str) -> str:
    if clock not in CLOCKS:
        raise UsageError(f"unknown clock {clock!r} (one of {', '.join(CLOCKS)})")
    return clock


def resolve(clock: str, kvm: bool) -> str:
    """The clock a guest runs on: virtual time needs TCG, so under KVM
    `auto` is real time; without KVM `auto` is virtual time."""
    if clock == "auto":
        return "real" if kvm else "virtual"
    return clock


def qemu_options(clock: str) -> list[str]:
    """QEMU's options for @clock (a resolved one)."""
    if clock == "virtual":
        return [f"-icount shift={ICOUNT_SHIFT},sleep=off"]
    return []


def describe(clock: str) -> dict:
    """The manifest's `clock` before its dilation is known."""
    return {"kind": clock, "icount_shift": ICOUNT_SHIFT if clock == "virtual" else None,
            "dilation": None}


def host_limit(guest_s: float, clock: str) -> float:
    """The host's wait for @guest_s seconds of the guest's time."""
    return guest_s * (DILATION_BOUND if clock == "virtual" else 1.0)
