"""Many captures on Apache Spark (`tcpvar spark`): one task per capture runs
tcpvar's own analysis on an executor (the native scanner, in a store of its
own in the executor's temporary folder), and moves the capture's tables into
the output folder laid out as `tcpvar export --parquet` lays out a store:

    OUT/meta.parquet
    OUT/TABLE/capture_id=N/*.parquet     captures, packets, connections,
                                         dir_counters, retransmit_events, throughput

so `tcpvar merge OUT` reads it into a store, and Spark, Trino and DuckDB read
it as it is. A capture's id is its place (from 1) in the sorted list of every
capture given, so the shards of one list (--shard i/n) never share an id.
Executors read the captures and write OUT by path: on a cluster both live on
a file system every node mounts (docs/scale.md)."""
from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from functools import partial
from importlib import resources
from pathlib import Path

from tcpvar.errors import SparkError, TcpvarError, UsageError
from tcpvar.pipelines.analyze import AnalyzeOptions, analyze_capture
from tcpvar.store import Store
from tcpvar.store.parquet import META, export

CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap", ".dmp", ".gz")
STAGING = "_staging"            # tasks' unfinished output, inside OUT
LOG4J = "spark-log4j2.properties"


@dataclass(frozen=True)
class Task:
    capture_id: int
    path: str
    size: int


@dataclass
class SparkOutcome:
    captures: list[dict]            # per capture: its figures, or its error
    seconds: float
    cores: int                      # Spark's default parallelism
    skipped: int = 0                # other shards' captures
    summary: dict = field(default_factory=dict)


def plan(paths: list[str], shard: tuple[int, int] = (1, 1)) -> tuple[list[Task], int]:
    """The tasks of shard i of n, and how many captures other shards take.
    Folders stand for the captures under them; a file named twice is read once."""
    found = set()
    for path in map(Path, paths):
        if path.is_dir():
            found |= {os.path.realpath(p) for p in path.rglob("*")
                      if p.suffix in CAPTURE_SUFFIXES and p.is_file()}
        else:
            found.add(os.path.realpath(path))
    if not found:
        raise UsageError(f"no captures in {', '.join(paths)}")
    i, n = shard
    tasks = [Task(k, p, _size(p)) for k, p in enumerate(sorted(found), 1) if (k - 1) % n == i - 1]
    if not tasks:
        raise UsageError(f"--shard {i}/{n}: no capture of the {len(found)} falls to this shard")
    return tasks, len(found) - len(tasks)


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:                 # the task reports it
        return 0


def analyse(task: Task, out: str, options: AnalyzeOptions) -> dict:
    """One capture, on an executor: its tables moved into @out under its id.
    A capture that cannot be read is reported, not raised: the other tasks go on."""
    start = time.monotonic()
    staging = Path(out) / STAGING / f"{task.capture_id}-{uuid.uuid4().hex}"
    row = {"capture_id": task.capture_id, "path": task.path, "host": socket.gethostname()}
    try:
        with tempfile.TemporaryDirectory(prefix="tcpvar-spark-") as tmp, \
                Store(Path(tmp) / "task.duckdb") as store:
            doc = analyze_capture(store, task.path, options)
            export(store, staging)
        _publish(staging, Path(out), doc["capture_id"], task.capture_id)
    except TcpvarError as exc:
        return {**row, "error": str(exc), "status": int(exc.status)}
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return {**row, "frames": doc["frames"], "tcp_packets": doc["tcp_packets"],
            "connections": len(doc["connections"]), "truncated": doc["truncated"],
            "warning": doc["warning"], "seconds": round(time.monotonic() - start, 3)}


def _publish(staging: Path, out: Path, local_id: int, capture_id: int) -> None:
    """Each table's partition of the task's store into @out, renamed to the
    capture's id (a retried task's earlier copy replaced)."""
    for table in staging.iterdir():
        part = table / f"capture_id={local_id}"
        if part.is_dir():
            final = out / table.name / f"capture_id={capture_id}"
            final.parent.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(final, ignore_errors=True)
            os.replace(part, final)
    os.replace(staging / META, out / META)


def run(paths: list[str], out: str | Path, options: AnalyzeOptions, master: str,
        shard: tuple[int, int] = (1, 1), progress: bool = False) -> SparkOutcome:
    """Analyse the captures of shard @shard on the Spark cluster @master,
    one task per capture, into the new folder @out."""
    tasks, skipped = plan(paths, shard)
    out = Path(out).resolve()
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"{out}: exists and is not empty (tcpvar spark writes a new folder)")
    start = time.monotonic()
    spark = _session(master, len(tasks), progress)
    out.mkdir(parents=True, exist_ok=True)
    try:
        sc = spark.sparkContext
        cores = sc.defaultParallelism
        # largest first: the long tasks start early and the cores end together
        ordered = sorted(tasks, key=lambda t: -t.size)
        rows = sc.parallelize(ordered, len(ordered)).map(
            partial(analyse, out=str(out), options=options)).collect()
    except Exception as exc:
        raise SparkError(f"the Spark job failed: {_first_line(exc)}") from None
    finally:
        spark.stop()
        shutil.rmtree(out / STAGING, ignore_errors=True)
    seconds = time.monotonic() - start
    rows.sort(key=lambda r: r["capture_id"])
    done = [r for r in rows if "error" not in r]
    packets = sum(r["frames"] for r in done)
    summary = {"captures_read": len(done), "failed": len(rows) - len(done),
               "other_shards": skipped, "packets": packets, "seconds": round(seconds, 3),
               "packets_per_s": round(packets / seconds) if seconds > 0 else None,
               "cores": cores, "master": master, "out": str(out)}
    return SparkOutcome(rows, seconds, cores, skipped, summary)


def _session(master: str, tasks: int, progress: bool):
    """A Spark session on @master; its Python workers run this Python."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise SparkError(f"pyspark is not installed, needed by tcpvar spark ({sys.executable} "
                         f"-m pip install 'pyspark>=4', or ./bootstrap.sh)") from None
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if not shutil.which("java") and not os.environ.get("JAVA_HOME"):
        raise SparkError("java is not installed, needed by Spark (apt-get install "
                         "openjdk-17-jre-headless, or ./bootstrap.sh)")
    # Spark's logging: errors only (its defaults print a screenful of start-up)
    logging = f"-Dlog4j2.configurationFile=file:{resources.files('tcpvar.pipelines') / LOG4J}"
    try:
        spark = (SparkSession.builder.master(master)
                 .appName(f"tcpvar: {tasks} captures")
                 .config("spark.ui.showConsoleProgress", "true" if progress else "false")
                 .config("spark.ui.enabled", "false")
                 .config("spark.driver.extraJavaOptions", logging)
                 .config("spark.executor.extraJavaOptions", logging)
                 .getOrCreate())
    except Exception as exc:
        raise SparkError(f"Spark cannot start on {master}: {_first_line(exc)}") from None
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _first_line(exc: Exception) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return lines[0] if lines else type(exc).__name__
