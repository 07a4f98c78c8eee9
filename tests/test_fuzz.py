"""A short run of the fuzzing targets: the native reader and its Python
boundary (ASan + UBSan), and the readers of run folders and stores;
tests/fuzz/run.sh SECONDS runs them for longer (docs/fuzzing.md)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

FUZZ = Path(__file__).resolve().parent / "fuzz"


def run(targets: tuple[str, ...], seconds: str, **env) -> None:
    res = subprocess.run([str(FUZZ / "run.sh"), seconds], capture_output=True, text=True,
                         timeout=int(seconds) * 2 * len(targets) + 300,
                         env={**os.environ, "PYTHON": sys.executable,   # atheris' Python
                              "TARGETS": " ".join(targets), **env})
    tail = res.stderr[-3000:] + res.stdout[-3000:]   # atheris prints a traceback on stdout
    assert res.returncode == 0, tail
    assert res.stderr.count("\nDone ") == len(targets), tail   # each ran to the end
    assert "ERROR: AddressSanitizer" not in res.stderr
    assert "runtime error:" not in res.stderr        # UBSan


def test_native_targets_find_nothing():
    run(("pcap", "decode", "module"), os.environ.get("TCPVAR_FUZZ_SECONDS", "20"))


def test_folder_and_store_seeds_find_nothing():
    """The run-folder and store targets replay their seeds (each kind of
    attack once; about a second each, after the base run's 10 s): a few
    seconds of their mutations, at one or two inputs a second, would make
    this test pass or fail by chance. Their campaigns run outside CI
    (docs/fuzzing.md)."""
    run(("folder", "store"), "60", RUNS="0")
