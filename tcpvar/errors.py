"""The errors tcpvar reports to its users, each with the exit status it maps to.

The command line prints the message of a TcpvarError on one line and exits
with its status; anything else is a bug and is reported as such.
"""
from enum import IntEnum


class ExitStatus(IntEnum):
    OK = 0
    ERROR = 1           # an unexpected failure (a bug): run again with --traceback
    USAGE = 2           # bad command-line usage (Click's own status)
    BAD_INPUT = 3       # a file that cannot be analysed: missing, empty, not a capture...
    NO_TCP = 4          # the input was read but holds no TCP connection
    STORE = 5           # the DuckDB store cannot be opened or queried
    INSTALL = 6         # a file tcpvar installs cannot be written where it belongs
    TESTBED = 7         # the emulated testbed cannot be set up or run here
    VM = 8              # the micro-VM cannot be prepared or does not boot
    PROBE = 9           # tcp_probe events cannot be recorded as asked (tracefs, BPF, root)
    NO_SPACE = 10       # a device is full: the store's or a run folder's
    SPARK = 11          # tcpvar spark: Spark cannot start, or its job failed
    INTERRUPTED = 130   # Ctrl-C


class TcpvarError(Exception):
    """An error with a one-line message meant for the user."""

    status = ExitStatus.ERROR


class InputError(TcpvarError):
    """A capture file that cannot be read or understood."""

    status = ExitStatus.BAD_INPUT


class NoTcpError(TcpvarError):
    """A readable capture without any TCP segment."""

    status = ExitStatus.NO_TCP


class StoreError(TcpvarError):
    """The store cannot be opened, or a user's query failed."""

    status = ExitStatus.STORE


class InstallError(TcpvarError):
    """A file tcpvar installs (the Wireshark dissector) cannot be written."""

    status = ExitStatus.INSTALL


class UsageError(TcpvarError):
    """Options that do not fit together or name what does not exist."""

    status = ExitStatus.USAGE


class TestbedError(TcpvarError):
    """The testbed cannot run here: not root, a tool or kernel feature missing,
    a command of the setup failing."""

    status = ExitStatus.TESTBED


class VmError(TcpvarError):
    """The micro-VM's kernel cannot be prepared, or the guest does not boot or run."""

    status = ExitStatus.VM


class KernelBuildError(VmError):
    """The patched kernel (kernel-patches/) or its tc cannot be built."""


class ProbeError(TcpvarError):
    """tcp_probe events cannot be recorded as asked: no tracefs or tracepoint,
    no BPF or BTF for the eBPF hook, not root."""

    status = ExitStatus.PROBE


class SparkError(TcpvarError):
    """Spark cannot start (no pyspark, no Java, a master that does not
    answer), or its job failed."""

    status = ExitStatus.SPARK
