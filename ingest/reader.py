"""Reading a capture: the native scanner in a thread of its own, its
batches queued for whoever stores them (ingest/capture.py). A scan may start
before the store is open, so reading begins at once; gzip'd files are read
through a decompressing pipe."""
from __future__ import annotations

import os
import queue
import threading
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from tcpvar.errors import InputError, UsageError
from tcpvar.store import segments

from . import _pcapscan

BATCH_ROWS = segments.ROWS  # packets per batch (~10 MB of columns), one segment file
QUEUE_DEPTH = 4           # batches read ahead of the writers (and while the store opens)
STATS_STEP = 1 << 21      # segments analysed per step without packets (a progress step)

# Live connections tracked per capture: each costs about 5 kB at the peak
# (1.5 kB in the scanner, the rest as it is stored), so a capture of a
# million SYNs that never end (a 56-70 MB file) cannot take gigabytes: at the
# limit, about 0.6 GB. 25 times the ~4,000 of the bench's "many" capture;
# TCPVAR_MAX_CONNECTIONS raises it.
MAX_CONNECTIONS = 100_000
MAX_CONNECTIONS_ENV = "TCPVAR_MAX_CONNECTIONS"
# Beyond this many live connections, those that ended (a RST, or a FIN each
# way) a second of capture time ago retire: their rows are stored while the
# scan goes on and the scanner frees them (flows.h), so a capture of a
# million short connections keeps about this many in memory, not a million.
RETIRE_ABOVE = 50_000


def max_connections() -> int:
    """The connection limit: $TCPVAR_MAX_CONNECTIONS, else MAX_CONNECTIONS."""
    value = os.environ.get(MAX_CONNECTIONS_ENV, "").strip()
    if not value:
        return MAX_CONNECTIONS
    try:
        n = int(value.replace("_", ""))
    except ValueError:
        n = 0
    if not 1 <= n <= 0xFFFFFFFF:
        raise UsageError(f"{MAX_CONNECTIONS_ENV}={value}: not a number of connections "
                         f"from 1 to 4294967295")
    return n


@dataclass
class ScanOptions:
    packets: bool = True      # fill the packets table (False: statistics only)
    rto_min_ms: float = 200.0
    hwdup_us: float = 0.0     # 0: no hardware-duplicate detection
    series_ms: float = 0.0    # the throughput series' interval, summed during the scan (0: not)
    max_connections: int = field(default_factory=max_connections)  # more: an InputError
    retire_above: int = RETIRE_ABOVE


class GzipFeed:
    """Decompress a .gz capture into a pipe that the native scanner reads:
    libpcap reads no compressed files, and nothing is unpacked on disk."""

    def __init__(self, path: Path):
        # imported only for .gz files, and on this thread, not the pump's
        # (store.db.Opening says why)
        import gzip
        import shutil

        self._raw = path.open("rb")
        self.read_fd, self._write_fd = os.pipe()
        self.error: str | None = None
        self._thread = threading.Thread(target=self._pump, name="tcpvar-gunzip", daemon=True,
                                        args=(gzip.GzipFile, shutil.copyfileobj))
        self._thread.start()

    def _pump(self, unzipped, copy) -> None:
        try:
            with unzipped(fileobj=self._raw) as src, \
                    open(self._write_fd, "wb", closefd=True) as dst:
                copy(src, dst, 1 << 20)
        except BrokenPipeError:
            pass                      # the scanner stopped reading: fine
        except (OSError, EOFError, zlib.error) as exc:
            self.error = f"corrupt gzip stream ({exc})"

    @property
    def position(self) -> int:
        """Compressed bytes consumed, for progress."""
        try:
            return self._raw.tell()
        except ValueError:
            return -1

    def close(self) -> None:
        self._thread.join()
        self._raw.close()


def is_gzip(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(2) == b"\x1f\x8b"


def check_storable(path: Path) -> None:
    """The store keeps paths as UTF-8 text: a name that is not (bytes from
    another system's encoding) is refused in one line."""
    try:
        str(Path(path).resolve()).encode()
    except UnicodeEncodeError:
        raise InputError(f"{path}: its name is not UTF-8, and the store keeps names as "
                         f"UTF-8 text; rename it") from None


def check_readable(path: Path) -> None:
    """The one-line reasons a path cannot be a capture, before libpcap sees it."""
    check_storable(path)
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if path.is_dir():
        raise InputError(f"{path}: is a directory, not a capture file")
    if not os.access(path, os.R_OK):
        raise InputError(f"{path}: permission denied")
    if path.stat().st_size == 0:
        raise InputError(f"{path}: empty file")


def scan_error(path: Path, message: str) -> InputError:
    """libpcap's words, made into one line a user can act on."""
    msg = " ".join(message.split())
    if "unknown file format" in msg:
        return InputError(f"{path}: not a pcap or pcapng capture")
    if "truncated dump file" in msg or "truncated pcapng" in msg:
        return InputError(f"{path}: truncated capture header ({msg})")
    if "different from the type of the first interface" in msg:
        return InputError(
            f"{path}: pcapng interfaces of different link types are not supported "
            f"(libpcap reads one link type per file); split it per interface, e.g. "
            f"tshark -r FILE -Y 'frame.interface_id == 0' -w part0.pcapng")
    if msg.endswith("(the connection limit)"):
        return InputError(f"{path}: {msg}; each takes about 5 kB of memory, and "
                          f"{MAX_CONNECTIONS_ENV}=N raises the limit to N")
    if msg.startswith("unsupported link type"):
        return InputError(f"{path}: {msg}; tcpvar reads Ethernet, Linux SLL/SLL2, raw IP, "
                          f"loopback, PPP, C-HDLC and FDDI")
    return InputError(f"{path}: {msg}")


class Scan:
    """A capture being read by the native scanner in a thread of its own,
    its batches queued for the writers. It may start before the store is
    open: reading begins at once, and a file the store turns out to hold
    unchanged is closed after a few batches."""

    def __init__(self, path: Path, options: ScanOptions):
        check_readable(path)
        self.path = path
        self.options = options
        self.scanner, self.feed = _open_scanner(path, options)
        self.queue: queue.Queue = queue.Queue(maxsize=QUEUE_DEPTH)
        self.done = threading.Event()        # the loader takes no more batches
        self.read_all = False                # the scanner reached the end of the file
        self.closed = False
        self.thread = threading.Thread(target=self._produce, name="tcpvar-scan", daemon=True)
        self.thread.start()

    def _produce(self) -> None:
        """Run the native scanner, handing each batch to the loader."""
        try:
            while not self.done.is_set():
                status, batch = self.scanner.step()
                self._hand_over(("batch", status, batch, (self.feed or self.scanner).position,
                                 self.scanner.gone()))
                if status != "more":
                    self.read_all = True
                    return
        except _pcapscan.ScanError as exc:
            self._hand_over(("error", str(exc), None, None, None))
        except BaseException as exc:          # reported by the loader thread
            self._hand_over(("crash", exc, None, None, None))

    def _hand_over(self, item: tuple) -> None:
        """Queue @item for the loader, unless the loader has stopped taking any."""
        while not self.done.is_set():
            try:
                self.queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def close(self) -> None:
        """Stop reading (once: closing again does nothing)."""
        if self.closed:
            return
        self.closed = True
        self.done.set()
        self.thread.join()
        self.scanner.close()
        if self.feed:
            self.feed.close()


def start_scan(path: str | Path, options: ScanOptions) -> Scan | None:
    """The scan of @path, started before the store is open; None when the
    file cannot be read (ingest() says why)."""
    try:
        return Scan(Path(path), options)
    except InputError:
        return None


def _open_scanner(path: Path, options: ScanOptions):
    """The native scanner, reading through a gunzip pipe when needed."""
    feed = GzipFeed(path) if is_gzip(path) else None
    try:
        scanner = _pcapscan.Scanner(str(path), packets=options.packets,
                                    batch_rows=BATCH_ROWS if options.packets else STATS_STEP,
                                    rto_min_ms=options.rto_min_ms,
                                    interval_ms=options.series_ms,
                                    hwdup_us=options.hwdup_us,
                                    max_connections=options.max_connections,
                                    retire_above=options.retire_above,
                                    fd=feed.read_fd if feed else -1)
    except _pcapscan.ScanError as exc:
        if feed:                        # its read end went with the Scanner
            feed.close()
            if feed.error:
                raise InputError(f"{path}: {feed.error}") from None
        raise scan_error(path, str(exc)) from None
    return scanner, feed


