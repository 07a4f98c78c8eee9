#!/usr/bin/env python3
"""Atheris target for the Python boundary of the native reader (module.c).
An input is 16 control bytes, then a capture: the control bytes choose the
Scanner's arguments (flags, batch size, --rto-min, --hw-dups, the connection
limit, when connections retire, a path or a descriptor) and the order of calls to its methods and
properties, calls after close() included; the batches are read, and written
as Parquet, after the scanner is gone.

Run by tests/fuzz/run.sh against an ASan + UBSan build of the extension
(tests/fuzz/build/module/_pcapscan*.so, named by TCPVAR_FUZZ_EXTENSION) with
atheris' sanitizer runtime preloaded; see docs/fuzzing.md.
"""
import importlib.util
import os
import sys
import tempfile

import atheris

# the instrumented extension, named in the environment: libFuzzer runs this
# script again with the same arguments for -merge, -fork and -jobs
spec = importlib.util.spec_from_file_location("_pcapscan", os.environ["TCPVAR_FUZZ_EXTENSION"])
_pcapscan = importlib.util.module_from_spec(spec)
spec.loader.exec_module(_pcapscan)

CALLS = ("step", "connections", "events", "counters", "position", "link_type",
         "link_name", "message", "close", "gone")


CONTROL = 16   # bytes of the input that choose the calls and the arguments; a capture follows
# arguments a control byte picks (byte % len): the defaults first, so zero
# control bytes read the capture as `tcpvar analyze` does
RTO_MIN = (200.0, 0.0, 1e-3, 1.0, 1e6, 1e300, float("inf"), float("nan"), -1.0)
HW_DUPS = (0.0, 1.0, 1000.0, 1e9, 1e300, float("inf"), float("nan"), -1.0)
BATCH = (7, 1, 2, 64, 1 << 16, 0, -1, 1 << 24, (1 << 24) + 1)   # ingest: 1 << 19
# the connection limit, from bits 2-4 of the first byte (0: none, as the default)
MAX_CONNS = (0, 1, 2, 5, 100_000, -1, 1 << 32, 1 << 64)
# open connections beyond which ended ones retire, from bits 5-6 (0: never)
RETIRE = (0, 1, 2, 50_000)


def scanner(control: bytes, data: bytes):
    """A Scanner over @data, from a file or from a descriptor (as a gzip
    feed gives it), or None when its arguments or the file are refused."""
    kw = {"packets": not control[0] & 1, "batch_rows": BATCH[control[1] % len(BATCH)],
          "rto_min_ms": RTO_MIN[control[2] % len(RTO_MIN)],
          "hwdup_us": HW_DUPS[control[3] % len(HW_DUPS)],
          "max_connections": MAX_CONNS[control[0] >> 2 & 7],
          "retire_above": RETIRE[control[0] >> 5 & 3]}
    fd = os.memfd_create("capture")
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    try:
        if control[0] & 2:
            return _pcapscan.Scanner("<fd>", fd=fd, **kw)    # the Scanner owns fd now
        try:
            return _pcapscan.Scanner(f"/proc/self/fd/{fd}", **kw)
        finally:
            os.close(fd)
    except (ValueError, OverflowError, _pcapscan.ScanError):
        return None


# where read_batch() writes each batch as Parquet (one file at a time)
SEGMENT = os.path.join(tempfile.mkdtemp(prefix="tcpvar-fuzz-"), "batch.parquet")


def read_batch(batch) -> None:
    """Every byte of every column buffer, as pyarrow would read them, and
    the batch written as a Parquet segment (parquet.c), as ingest writes it."""
    assert batch.rows >= 0
    for column in batch.columns():
        for buf in column[2:]:
            if buf is not None:
                bytes(memoryview(buf))
    if batch.rows:
        batch.write_parquet(SEGMENT, "tcpvar fuzz")
        os.unlink(SEGMENT)


def one_input(raw: bytes) -> None:
    control = raw[:CONTROL].ljust(CONTROL, b"\0")
    s = scanner(control, raw[CONTROL:])
    if s is None:
        return
    kept = []                                      # batches outlive their scanner
    for b in control[4:]:
        name = CALLS[b % len(CALLS)]
        try:
            value = getattr(s, name)
            if callable(value):
                value = value()
            if name == "step":
                status, batch = value
                assert status in ("more", "eof", "truncated"), status
                if batch is not None:
                    kept.append(batch)
        except (_pcapscan.ScanError, ValueError, RuntimeError):
            pass
    while True:                                    # then to the end, as ingest reads
        try:
            status, _ = s.step()
            s.gone()
        except (_pcapscan.ScanError, ValueError, RuntimeError):
            break
        if status != "more":
            break
    s.close()
    for batch in kept:
        read_batch(batch)


atheris.Setup(sys.argv, one_input)
atheris.Fuzz()
