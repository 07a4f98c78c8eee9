"""Ingest one capture file: a single native pass over it (libpcap, decoding
and per-connection analysis in C) feeding the store batch by batch.

One thread runs the native scanner (ingest/reader.py; it releases the GIL);
writer threads write the batches it made before as Parquet segments of the
packets table (ingest/writers.py; DuckDB releases the GIL too). The queue between them is
short, so memory stays flat however large the capture is. A capture counts
once its row in `captures` says complete; a failed or interrupted load
removes its rows and segments.
"""
from __future__ import annotations

import contextlib
import functools
import queue
import signal
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tcpvar import __version__
from tcpvar.beside import Beside
from tcpvar.digest import blake2b
from tcpvar.errors import InputError, NoTcpError
from tcpvar.progress import Progress, Reporter, ignore
from tcpvar.store.db import one

from . import _pcapscan
from .reader import Scan, ScanOptions, check_readable, scan_error, start_scan
from .writers import SegmentWriters

__all__ = ["CaptureResult", "ScanOptions", "Scan", "ingest", "start_scan", "stored_capture"]

_SQL = Path(__file__).resolve().parent / "sql"     # a capture's statements (the
# native front end, cli/native/, runs the same files)
HEAD_TAIL = 1 << 16       # bytes hashed at each end for the fingerprint
LOAD_MEMORY = "512MB"     # DuckDB's cache while loading: bounds the peak
RETIRED_PER_COMMIT = 1 << 16  # retired connections stored a transaction (a commit costs)


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


@functools.cache
def _sql(name: str) -> str:
    return (_SQL / f"{name}.sql").read_text()


def fingerprint(path: Path) -> str:
    """Size, mtime and a hash of both ends: cheap, and changes when the file does."""
    st = path.stat()
    h = blake2b(digest_size=16)
    with path.open("rb") as f:
        h.update(f.read(HEAD_TAIL))
        if st.st_size > HEAD_TAIL:
            f.seek(max(HEAD_TAIL, st.st_size - HEAD_TAIL))
            h.update(f.read(HEAD_TAIL))
    return f"{st.st_size}:{st.st_mtime_ns}:{h.hexdigest()}"


def _load_packets(store, capture_id: int, scan: Scan, read: Callable[[int], None],
                  stop: threading.Event | None) -> tuple[str, list[tuple]]:
    """Drain the scan into the capture's packet segments, and the
    connections that retired during it into their tables; return the final
    status and the retired connections' hardware copies (_copies_warnings)."""
    copies: list[tuple] = []
    pending: list[tuple] = []           # retired connections' tables, stored together

    def store_pending() -> None:
        with store.transaction() as con:
            for conns, stats in pending:
                copies.extend(_insert_connections(con, capture_id, conns, stats))
        pending.clear()

    with _interrupt_between_batches(stop) as interrupted, \
            SegmentWriters(store.packets, capture_id) as writers:
        while True:
            status, gone = _load_next(writers, scan.queue, read)
            if gone is not None:
                pending.append(gone)
            if pending and (status != "more" or
                            sum(conns.rows for conns, _ in pending) >= RETIRED_PER_COMMIT):
                store_pending()
            if interrupted():           # the last batch's too
                raise KeyboardInterrupt
            if status != "more":
                return status, copies


def _load_next(writers: SegmentWriters, q: queue.Queue, read: Callable[[int], None]):
    """Hand the next batch the scanner made to the writers, tell @read how
    many bytes of the file are behind; return its status and the tables of
    the connections that retired with it (or None)."""
    kind, status, batch, position, gone = q.get()
    if kind == "error":
        raise _pcapscan.ScanError(status)
    if kind == "crash":
        raise status
    if batch is not None and batch.rows:
        writers.submit(batch)
    if position is not None and position >= 0:
        read(position)
    return status, gone


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


def _store_connections(con, capture_id: int, scanner,
                       copies: list[tuple]) -> tuple[int, list[str]]:
    """The connections still live at the end, their raw per-direction
    counters, and the retransmission episodes: a few rows per connection,
    which DuckDB reads from the scanner's Arrow streams. Returns the
    capture's number of connections and what the counters (with @copies,
    the retired connections') warn of."""
    conns, stats = scanner.connections()
    if conns.rows:
        copies = copies + _insert_connections(con, capture_id, conns, stats)
    events = scanner.events()
    try:
        con.register("_tv_events", events)
        con.execute(_sql("capture_events"), [capture_id])
    finally:
        con.unregister("_tv_events")
    n = one(con, "SELECT count(*) FROM connections WHERE capture_id = $1", [capture_id])[0]
    return n, _copies_warnings(sorted(copies))


def _insert_connections(con, capture_id: int, conns, stats) -> list[tuple]:
    """Rows of connections and of their directions' counters, from the
    scanner's tables; returns their hardware copies (conn, dir, copies,
    dropped) where there were any."""
    try:
        con.register("_tv_conns", conns)
        con.register("_tv_stats", stats)
        con.execute(_sql("capture_connections"), [capture_id])
        con.execute(_sql("capture_counters"), [capture_id])
        return con.execute("SELECT conn, dir, hw_copies, hw_dups FROM _tv_stats "
                           "WHERE hw_copies > 0").fetchall()
    finally:
        for name in ("_tv_conns", "_tv_stats"):
            con.unregister(name)


def _copies_warnings(copies: list[tuple]) -> list[str]:
    """Segments that repeat the sequence number and IP ID of a recent one
    (tcptrace's "hardware dups"): copies made by the capture, which count as
    retransmissions unless --hw-dups drops them."""
    out = []
    for conn, direction, n, gone in copies:
        where = f"connection {conn} {('a2b', 'b2a')[direction]}"
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


def _length_warning(zero: int, capped: int) -> list[str]:
    """Segments whose IP length field is 0, as segmentation offload leaves
    it: their length is the record's, at most what the field can hold."""
    if not zero:
        return []
    what = "segment has" if zero == 1 else "segments have"
    out = (f"{zero} TCP {what} an IP length of 0 (segmentation offload); the record's "
           f"length stands in for it, at most 65,535 bytes")
    if capped:
        out += f" ({capped} record{' claims' if capped == 1 else 's claim'} more)"
    return [out]


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


def _load(store, capture_id: int, path: Path, scan: Scan, progress: Reporter | None,
          stop: threading.Event | None, series: SeriesRows | None) -> CaptureResult:
    """Packets batch by batch, each committed (memory stays flat), then the
    statistics and the capture's row in one transaction that completes it,
    the throughput series (@series) stored meanwhile on a thread of its own
    from the moment the scan has read the whole capture."""
    size = path.stat().st_size
    report = progress or ignore

    def read(done: int) -> None:
        report(Progress(f"reading {path}", done, size, "bytes"))

    interval = scan.options.series_ms if series and scan.options.packets else None
    beside = _SeriesBeside(store, series, capture_id, interval, scan) if interval else None
    try:
        return _complete(store, capture_id, path, scan, read, stop, beside)
    except BaseException:
        if beside:
            beside.cancel()             # the capture is not stored: no series,
            scan.close()                # and the end of the scan it waits for comes now
        raise
    finally:
        if beside:
            beside.wait()               # not inside DuckDB as the store closes


def _complete(store, capture_id: int, path: Path, scan: Scan, read: Callable[[int], None],
              stop: threading.Event | None, beside: _SeriesBeside | None) -> CaptureResult:
    """_load(): the packets, then the transaction that completes the capture."""
    con = store.con
    try:
        with store.memory_limit(LOAD_MEMORY):
            status, copies = _load_packets(store, capture_id, scan, read, stop)
    except _pcapscan.ScanError as exc:
        raise scan_error(path, str(exc)) from None
    scan.thread.join()                  # it handed over its last batch
    scanner = scan.scanner
    if scan.feed and scan.feed.error:
        raise InputError(f"{path}: {scan.feed.error}")
    counters = scanner.counters
    if counters["tcp"] == 0:
        raise NoTcpError(f"{path}: no TCP segments in {counters['frames']} frames")
    truncated = status == "truncated"
    warnings = [f"the file ends inside a record; the {counters['frames']} "
                f"records before it were analysed"] if truncated else []
    warnings += _options_warning(counters["options_cut"])
    warnings += _length_warning(counters["ip_len_zero"], counters["ip_len_capped"])
    if counters["bad_time"]:
        n = counters["bad_time"]
        warnings.append(f"{n} record{' has a time' if n == 1 else 's have times'} before "
                        f"1970 or after 2262, left out")
    with store.transaction():
        nconn, conn_warnings = _store_connections(con, capture_id, scanner, copies)
        words = beside.result() if beside else None
        warning = "; ".join(warnings + conn_warnings + ([words] if words else [])) or None
        con.execute(_sql("capture_complete"), [
            capture_id, scanner.link_type, scanner.link_name, counters["frames"],
            counters["tcp"], counters["non_tcp"], counters["ip_fragments"],
            counters["too_short"], counters["malformed"], counters["first_ns"],
            counters["last_ns"], truncated, warning,
            scan.options.series_ms if beside else None])
    return CaptureResult(capture_id, str(path.resolve()), False, counters["frames"],
                         counters["tcp"], nconn, truncated, warning)


# how a caller stores the throughput series beside ingest: (connection,
# capture_id, interval_ms, the scan's sums or None) -> words for the warning
SeriesRows = Callable[[object, int, float, object], "str | None"]


class _SeriesBeside(Beside):
    """@series(connection, capture_id, interval_ms, the scan's sums) in a
    transaction of its own, on a thread and a connection of its own, once
    the scan has read the whole capture: while the packets' last segments
    are written and the connections stored (DuckDB releases Python's lock).
    result() waits for it and returns what it returned, or raises what it
    raised; cancel() skips it if it has not begun. A Ctrl-C meanwhile is
    held until it is done."""

    def __init__(self, store, series: SeriesRows, capture_id: int, interval_ms: float,
                 scan: Scan):
        self.view = store.worker()
        self.cancelled = threading.Event()
        super().__init__(functools.partial(self._series, series, capture_id, interval_ms, scan),
                         name="tcpvar-series")
        self.start()

    def _series(self, series: SeriesRows, capture_id: int, interval_ms: float, scan: Scan):
        try:
            scan.thread.join()          # outside the transaction: a Ctrl-C is not held
            if not scan.read_all or self.cancelled.is_set():
                return None
            with self.view.transaction() as con:
                return series(con, capture_id, interval_ms, scan.scanner.series())
        finally:
            self.view.close()

    def cancel(self) -> None:
        self.cancelled.set()


def ingest(store, path: str | Path, options: ScanOptions | None = None, *,
           force: bool = False, progress: Reporter | None = None,
           stop: threading.Event | None = None, scan: Scan | None = None,
           series: SeriesRows | None = None) -> CaptureResult:
    """Read a capture into the store; a file already there, unchanged and read
    with the same options, is reused. Setting @stop ends the load as Ctrl-C
    does, for loads outside the main thread. @scan: its scan, started before
    (start_scan), which ingest closes. @series: stores the throughput series
    at options.series_ms from the scan's sums while the connections are
    stored; the capture's row then has that interval, and its words join the
    capture's warning.

    Until the capture's row says complete, its rows are partial: any failure
    or interruption deletes them, and the store drops what a killed process
    left behind the next time it opens the database."""
    try:
        return _ingest(store, Path(path), options or ScanOptions(), force, progress, stop,
                       scan, series)
    finally:
        if scan:
            scan.close()


def _ingest(store, path: Path, options: ScanOptions, force: bool, progress: Reporter | None,
            stop: threading.Event | None, scan: Scan | None,
            series: SeriesRows | None) -> CaptureResult:
    check_readable(path)
    apath = str(path.resolve())
    fp = fingerprint(path)
    con = store.con

    old = _existing(con, apath)
    if (old and old[1] == fp and not force and (old[6] or not options.packets)
            and (old[7], old[8]) == (options.rto_min_ms, options.hwdup_us)):
        n = one(con, "SELECT count(*) FROM connections WHERE capture_id = $1", [old[0]])[0]
        return CaptureResult(old[0], apath, True, old[2], old[3], n, old[4], old[5])

    if scan is None or scan.path != path or scan.options != options:
        if scan:
            scan.close()
        scan = Scan(path, options)
    capture_id = None
    try:
        if old:
            store.delete_capture(old[0])
        with store.transaction():
            st = path.stat()
            capture_id = one(con, _sql("capture_row"), [
                apath, st.st_size, st.st_mtime_ns, fp, options.packets,
                options.rto_min_ms, options.hwdup_us, __version__])[0]
        return _load(store, capture_id, path, scan, progress, stop, series)
    except BaseException:
        if capture_id is not None:      # also when Ctrl-C came as its row was written
            store.delete_capture(capture_id)
        raise
    finally:
        scan.close()
