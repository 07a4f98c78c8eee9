"""Packet batches written as a capture's segment files (store/segments.py)
beside the native scan: a few writer threads, each with a DuckDB connection
of its own, so Parquet encoding uses the cores the scan leaves. DuckDB reads
a batch's columns in place (the native Batch is an Arrow C stream) and
releases Python's lock while it writes."""
from __future__ import annotations

import collections
import os
import queue
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from tcpvar.store import segments

# batches written at once: one more than the cores (measured on 2 cores: 3
# writers beat 2 by 3-6 %, 1 is 25 % slower; bench/RESULTS.md "levers");
# memory grows by a batch (~10 MB) per writer
WRITERS = max(2, min(4, len(os.sched_getaffinity(0)) + 1))


class SegmentWriters:
    """Write batches as part-K.parquet in @folder, at most WRITERS at a time;
    leaving the block waits for every write (and raises the first error)."""

    def __init__(self, store, folder: Path):
        self.folder = folder
        self.pool = ThreadPoolExecutor(WRITERS, thread_name_prefix="tcpvar-write")
        self.pending: collections.deque[Future] = collections.deque()
        self.cursors: queue.SimpleQueue = queue.SimpleQueue()
        self.opened = [store.con.cursor() for _ in range(WRITERS)]
        for cursor in self.opened:
            self.cursors.put(cursor)
        self.written = 0

    def submit(self, batch) -> None:
        while len(self.pending) >= WRITERS:
            self.pending.popleft().result()
        self.pending.append(self.pool.submit(self._write, batch, self.written))
        self.written += 1

    def _write(self, batch, k: int) -> None:
        con = self.cursors.get()
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            con.register("_tv_batch", batch)
            segments.write(con, "SELECT * FROM _tv_batch", self.folder / f"part-{k}.parquet")
        finally:
            con.unregister("_tv_batch")
            self.cursors.put(con)

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        try:
            if kind is None:
                while self.pending:
                    self.pending.popleft().result()
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)
            for cursor in self.opened:
                cursor.close()
