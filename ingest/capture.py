"""Ingest one capture file: a single native pass over it (libpcap, decoding
and per-connection analysis in C) feeding DuckDB batch by batch.

Two threads share the work: one runs the native scanner (which releases the
GIL), the other loads the previous batch into DuckDB (which releases it
too). The queue between them is short and each batch is committed, so memory
stays flat however large the capture is. A capture counts once its row in
`captures` says complete; a failed or interrupted load removes its rows.
"""
from __future__ import annotations

import contextlib
import gzip
import hashlib
import os
import queue
import shutil
import signal
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tcpvar import __version__
from tcpvar.errors import InputError, NoTcpError
from tcpvar.progress import Progress, Reporter, ignore
from tcpvar.store.db import one

from . import _pcapscan

BATCH_ROWS = 1 << 19      # packets per batch: ~40 MB of columns; DuckDB writes
                          # inserts this large straight to disk
QUEUE_DEPTH = 1           # batches parsed ahead of the loader
HEAD_TAIL = 1 << 16       # bytes hashed at each end for the fingerprint
LOAD_MEMORY = "512MB"     # DuckDB's cache while loading: bounds the peak



@dataclass
class CaptureResult:
    capture_id: int
    path: str
    reused: bool              # already in the store, unchanged: not read again
    frames: int
    tcp_packets: int
    connections: int
    truncated: bool
    warning: str | None


@dataclass
class ScanOptions:
    packets: bool = True      # fill the packets table (False: statistics only)
    rto_min_ms: float = 200.0
    hwdup_us: float = 0.0     # 0: no hardware-duplicate detection


def fingerprint(path: Path) -> str:
    """Size, mtime and a hash of both ends: cheap, and changes when the file does."""
    st = path.stat()
    h = hashlib.blake2b(digest_size=16)
    with path.open("rb") as f:
        h.update(f.read(HEAD_TAIL))
        if st.st_size > HEAD_TAIL:
            f.seek(max(HEAD_TAIL, st.st_size - HEAD_TAIL))
            h.update(f.read(HEAD_TAIL))
    return f"{st.st_size}:{st.st_mtime_ns}:{h.hexdigest()}"


class GzipFeed:
    """Decompress a .gz capture into a pipe that the native scanner reads:
    libpcap reads no compressed files, and nothing is unpacked on disk."""

    def __init__(self, path: Path):
        self._raw = path.open("rb")
        self.read_fd, self._write_fd = os.pipe()
        self.error: str | None = None
        self._thread = threading.Thread(target=self._pump, name="tcpvar-gunzip", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        try:
            with gzip.GzipFile(fileobj=self._raw) as src, \
                    open(self._write_fd, "wb", closefd=True) as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
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


def check_readable(path: Path) -> None:
    """The one-line reasons a path cannot be a capture, before libpcap sees it."""
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if path.is_dir():
        raise InputError(f"{path}: is a directory, not a capture file")
    if not os.access(path, os.R_OK):
        raise InputError(f"{path}: permission denied")
    if path.stat().st_size == 0:
        raise InputError(f"{path}: empty file")


def _scan_error(path: Path, message: str) -> InputError:
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
    if msg.startswith("unsupported link type"):
        return InputError(f"{path}: {msg}; tcpvar reads Ethernet, Linux SLL/SLL2, raw IP, "
                          f"loopback, PPP, C-HDLC and FDDI")
    return InputError(f"{path}: {msg}")


def _hand_over(out: queue.Queue, item: tuple, stop: threading.Event) -> None:
    """Queue @item for the loader, unless the loader has stopped taking any."""
    while not stop.is_set():
        try:
            out.put(item, timeout=0.1)
            return
        except queue.Full:
            continue


def _producer(scanner, feed, out: queue.Queue, stop: threading.Event) -> None:
    """Run the native scanner, handing each batch to the loader."""
    try:
        while not stop.is_set():
            status, batch = scanner.step()
            _hand_over(out, ("batch", status, batch, (feed or scanner).position), stop)
            if status != "more":
                return
    except _pcapscan.ScanError as exc:
        _hand_over(out, ("error", str(exc), None, None), stop)
    except BaseException as exc:          # reported by the loader thread
        _hand_over(out, ("crash", exc, None, None), stop)


def _load_packets(con, capture_id: int, scanner, feed, read: Callable[[int], None],
                  stop: threading.Event | None) -> str:
    """Drain the scanner into the packets table; return the final status."""
    q: queue.Queue = queue.Queue(maxsize=QUEUE_DEPTH)
    loader_done = threading.Event()
    worker = threading.Thread(target=_producer, args=(scanner, feed, q, loader_done),
                              name="tcpvar-scan", daemon=True)
    worker.start()
    try:
        with _interrupt_between_batches(stop) as interrupted:
            while True:
                status = _load_next(con, capture_id, q, read)
                if interrupted():           # the last batch's too
                    raise KeyboardInterrupt
                if status != "more":
                    return status
    finally:
        loader_done.set()
        worker.join()


def _load_next(con, capture_id: int, q: queue.Queue, read: Callable[[int], None]) -> str:
    """Insert the next batch the scanner handed over, tell @read how many
    bytes of the file are behind; return its status."""
    kind, status, batch, position = q.get()
    if kind == "error":
        raise _pcapscan.ScanError(status)
    if kind == "crash":
        raise status
    if batch is not None and batch.rows:
        from .arrow import batch_table  # pyarrow: only when packets are kept

        table = batch_table(batch)
        con.register("_tv_batch", table)
        con.execute("INSERT INTO packets SELECT $1, * FROM _tv_batch", [capture_id])
        con.unregister("_tv_batch")
    if position is not None and position >= 0:
        read(position)
    return status


@contextlib.contextmanager
def _interrupt_between_batches(stop: threading.Event | None):
    """Ctrl-C while loading takes effect between two batches: raised inside
    DuckDB's scan of a batch, it would come back as a DuckDB error. Away from
    the main thread, @stop says when to end (the main thread took the Ctrl-C)."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) == signal.SIG_IGN:     # nohup, a script's job
        yield stop.is_set if stop else lambda: False
        return
    hit = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda signum, frame: hit.set())
    try:
        yield hit.is_set
    finally:
        signal.signal(signal.SIGINT, previous)


def _columns(columns: dict) -> tuple[str, list]:
    """SQL selecting the scanner's record columns ({name: (type, bytes) or
    list}) as a relation, with the values bound as list parameters. The names
    are the scanner's own field names; values are never formatted into SQL."""
    names, params = [], []
    for name, col in columns.items():
        params.append(_values(col))
        names.append(f"unnest(${len(params) + 1}) AS {name}")
    return "SELECT " + ", ".join(names), params


def _values(col) -> list:
    if isinstance(col, tuple):
        typ, buf = col
        return memoryview(buf).cast("d" if typ == "float64" else "q").tolist()
    return col


def _store_connections(con, capture_id: int, scanner) -> tuple[int, list[str]]:
    """Connections, their raw per-direction counters and the retransmission
    episodes: a few rows per connection, bound as lists (no Arrow needed).
    Returns their number and what the counters warn of."""
    conns, stats = scanner.connections()
    n = len(conns["a_addr"])
    if not n:
        return 0, []
    warnings = _copies_warnings(_values(stats.pop("hw_copies")), _values(stats["hw_dups"]))
    select, params = _columns(conns)
    con.execute(f"""
        INSERT INTO connections
        SELECT $1, id, family, a_addr, a_port, b_addr, b_port, first_ns, last_ns,
               packets, a_isn, b_isn, handshake <> 0, closed <> 0, reset <> 0
        FROM ({select})""", [capture_id, *params])
    stats["conn"] = [i // 2 + 1 for i in range(2 * n)]
    stats["dir"] = [i % 2 for i in range(2 * n)]
    select, params = _columns(stats)
    con.execute(f"INSERT INTO dir_counters BY NAME SELECT $1 AS capture_id, * FROM ({select})",
                [capture_id, *params])
    events = scanner.events()
    if events["conn"][1]:
        select, params = _columns(events)
        con.execute(f"""
            INSERT INTO retransmit_events
            SELECT $1, conn, dir, frame, ts_ns,
                   CASE kind WHEN 1 THEN 'timeout' ELSE 'fast' END,
                   seq, len, silence_ns / 1e6, dupacks, backoff
            FROM ({select})""", [capture_id, *params])
    return n, warnings


def _copies_warnings(copies: list[int], dropped: list[int]) -> list[str]:
    """Segments that repeat the sequence number and IP ID of a recent one
    (tcptrace's "hardware dups"): copies made by the capture, which count as
    retransmissions unless --hw-dups drops them."""
    out = []
    for i, (n, gone) in enumerate(zip(copies, dropped)):
        if n:
            where = f"connection {i // 2 + 1} {('a2b', 'b2a')[i % 2]}"
            fate = (f"--hw-dups dropped {gone}" if gone else
                    "they count as retransmissions; --hw-dups US drops copies closer than US µs")
            what = "segment repeats" if n == 1 else "segments repeat"
            out.append(f"{where}: {n} {what} the sequence number and IP ID of one of "
                       f"the 8 before (hardware duplicates); {fate}")
    return out


def _options_warning(n: int) -> list[str]:
    what = "segment has its" if n == 1 else "segments have their"
    return [f"{n} TCP {what} options cut short (a bad option length, or the capture "
            f"ends inside them); the options after the cut are not read"] if n else []


def stored_capture(store, path: str | Path) -> int | None:
    """The capture_id of @path when the store holds it unchanged with its
    packets, whatever options it was read with (a run's captures keep theirs)."""
    path = Path(path)
    check_readable(path)
    old = _existing(store.con, str(path.resolve()))
    return old[0] if old and old[6] and old[1] == fingerprint(path) else None


def _existing(con, path: str):
    return one(con, "SELECT capture_id, fingerprint, frames, tcp_packets, truncated, warning, "
                    "with_packets, rto_min_ms, hwdup_us FROM captures "
                    "WHERE path = $1 AND complete", [path])


def _open_scanner(path: Path, options: ScanOptions):
    """The native scanner, reading through a gunzip pipe when needed."""
    feed = GzipFeed(path) if is_gzip(path) else None
    try:
        scanner = _pcapscan.Scanner(str(path), packets=options.packets,
                                    batch_rows=BATCH_ROWS, rto_min_ms=options.rto_min_ms,
                                    hwdup_us=options.hwdup_us,
                                    fd=feed.read_fd if feed else -1)
    except _pcapscan.ScanError as exc:
        if feed:                        # its read end went with the Scanner
            feed.close()
            if feed.error:
                raise InputError(f"{path}: {feed.error}") from None
        raise _scan_error(path, str(exc)) from None
    return scanner, feed


def _load(store, capture_id: int, path: Path, scanner, feed, options: ScanOptions,
          progress: Reporter | None, stop: threading.Event | None) -> CaptureResult:
    """Packets batch by batch, each committed (memory stays flat), then the
    statistics and the capture's row in one transaction that completes it."""
    con = store.con
    size = path.stat().st_size
    report = progress or ignore

    def read(done: int) -> None:
        report(Progress(f"reading {path}", done, size, "bytes"))

    try:
        with store.memory_limit(LOAD_MEMORY):
            status = _load_packets(con, capture_id, scanner, feed, read, stop)
    except _pcapscan.ScanError as exc:
        raise _scan_error(path, str(exc)) from None
    if feed and feed.error:
        raise InputError(f"{path}: {feed.error}")
    counters = scanner.counters
    if counters["tcp"] == 0:
        raise NoTcpError(f"{path}: no TCP segments in {counters['frames']} frames")
    truncated = status == "truncated"
    warnings = [f"the file ends inside a record; the {counters['frames']} "
                f"records before it were analysed"] if truncated else []
    warnings += _options_warning(counters["options_cut"])
    with store.transaction():
        nconn, conn_warnings = _store_connections(con, capture_id, scanner)
        warning = "; ".join(warnings + conn_warnings) or None
        con.execute("""
            UPDATE captures SET link_type = $2, link_name = $3, frames = $4, tcp_packets = $5,
                non_tcp = $6, ip_fragments = $7, too_short = $8, malformed = $9,
                first_ns = $10, last_ns = $11, truncated = $12, warning = $13,
                complete = true
            WHERE capture_id = $1""",
            [capture_id, scanner.link_type, scanner.link_name, counters["frames"],
             counters["tcp"], counters["non_tcp"], counters["ip_fragments"],
             counters["too_short"], counters["malformed"], counters["first_ns"],
             counters["last_ns"], truncated, warning])
    return CaptureResult(capture_id, str(path.resolve()), False, counters["frames"],
                         counters["tcp"], nconn, truncated, warning)


def ingest(store, path: str | Path, options: ScanOptions | None = None, *,
           force: bool = False, progress: Reporter | None = None,
           stop: threading.Event | None = None) -> CaptureResult:
    """Read a capture into the store; a file already there, unchanged and read
    with the same options, is reused. Setting @stop ends the load as Ctrl-C
    does, for loads outside the main thread.

    Until the capture's row says complete, its rows are partial: any failure
    or interruption deletes them, and the store drops what a killed process
    left behind the next time it opens the database."""
    options = options or ScanOptions()
    path = Path(path)
    check_readable(path)
    apath = str(path.resolve())
    fp = fingerprint(path)
    con = store.con

    old = _existing(con, apath)
    if (old and old[1] == fp and not force and (old[6] or not options.packets)
            and (old[7], old[8]) == (options.rto_min_ms, options.hwdup_us)):
        n = one(con, "SELECT count(*) FROM connections WHERE capture_id = $1", [old[0]])[0]
        return CaptureResult(old[0], apath, True, old[2], old[3], n, old[4], old[5])

    scanner, feed = _open_scanner(path, options)
    capture_id = None
    try:
        if old:
            store.delete_capture(old[0])
        with store.transaction():
            capture_id = one(con, "SELECT nextval('capture_ids')")[0]
            st = path.stat()
            con.execute("""
                INSERT INTO captures (capture_id, path, size_bytes, mtime_ns, fingerprint,
                    with_packets, rto_min_ms, hwdup_us, analyzed_at, tcpvar_version, complete)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, now(), $9, false)""",
                [capture_id, apath, st.st_size, st.st_mtime_ns, fp, options.packets,
                 options.rto_min_ms, options.hwdup_us, __version__])
        return _load(store, capture_id, path, scanner, feed, options, progress, stop)
    except BaseException:
        if capture_id is not None:      # also when Ctrl-C came as its row was written
            store.delete_capture(capture_id)
        raise
    finally:
        scanner.close()
        if feed:
            feed.close()
