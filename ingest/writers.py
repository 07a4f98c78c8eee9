"""Packet batches written as a capture's segment files (store/segments.py)
beside the native scan: a few writer threads, so Parquet encoding uses the
cores the scan leaves. The scanner writes each batch itself
(ingest/native/parquet.c) and releases Python's lock while it does. Plain
threads, not concurrent.futures: importing that (and the logging it
brings) is a few ms of every command's start-up, and `--stats-only` writes
nothing."""
from __future__ import annotations

import queue
import threading
from pathlib import Path

from tcpvar.store import segments

# batches written at once. The scanner writes a batch in about half the
# time it takes to read it, so one writer keeps up; the second is slack for
# a slow disk. Measured on 2 cores, 5 alternating rounds: bulk 0.650 s with
# 1 writer, 0.677 s with 2, 0.672 s with 3; lossy 0.417, 0.402, 0.401 s
# (bench/RESULTS.md "levers"). Memory grows by a batch (~10 MB) per writer.
WRITERS = 2


class SegmentWriters:
    """Write batches as part-K.parquet in capture @capture_id's folder under
    @top (segments.own_folder), at most WRITERS at a time
    (submit() waits for a free one); leaving the block waits for every
    write, and raises the first error."""

    def __init__(self, top: Path, capture_id: int):
        self.top, self.capture_id = top, capture_id
        self.folder: Path | None = None     # made with the first batch
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.free = threading.Semaphore(WRITERS)    # batches submitted and not yet written
        self.threads: list[threading.Thread] = []
        self.error: BaseException | None = None
        self.cancelled = False
        self.written = 0

    def submit(self, batch) -> None:
        self.free.acquire()
        if self.error is not None:
            self.free.release()
            raise self.error
        if not self.threads:            # the first batch: the writers start
            self.folder = segments.own_folder(self.top, self.capture_id)
            self.threads = [threading.Thread(target=self._work, name=f"tcpvar-write-{i}",
                                             daemon=True)
                            for i in range(WRITERS)]
            for thread in self.threads:
                thread.start()
        self.jobs.put((batch, self.written))
        self.written += 1

    def _work(self) -> None:
        while (job := self.jobs.get()) is not None:
            batch, k = job
            try:
                if not (self.cancelled or self.error):
                    segments.write_batch(batch, self.folder / f"part-{k}.parquet")
            except BaseException as exc:    # raised by submit() or on leaving
                self.error = self.error or exc
            finally:
                self.free.release()

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        self.cancelled = kind is not None   # a failed load: what is queued is not written
        for _ in self.threads:
            self.jobs.put(None)
        for thread in self.threads:
            thread.join()
        if kind is None and self.error is not None:
            raise self.error

