"""A short run of the fuzzing targets: the native reader and its Python
boundary (ASan + UBSan), and the readers of run folders and stores;
tests/fuzz/run.sh SECONDS runs them for longer (docs/fuzzing.md)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

FUZZ = Path(__file__).resolve().parent / "fuzz"
TARGETS = ("pcap", "decode", "module", "folder", "store")


def test_fuzz_targets_find_nothing():
    seconds = os.environ.get("TCPVAR_FUZZ_SECONDS", "20")
    # folder and store also make their base run folder (about 10 s) and
    # replay their seeds (about a second each) before fuzzing
    res = subprocess.run([str(FUZZ / "run.sh"), seconds], capture_output=True, text=True,
                         timeout=int(seconds) * 2 * len(TARGETS) + 300,
                         env={**os.environ, "PYTHON": sys.executable,   # atheris' Python
                              "TARGETS": " ".join(TARGETS)})
    tail = res.stderr[-3000:] + res.stdout[-3000:]   # atheris prints a traceback on stdout
    assert res.returncode == 0, tail
    assert res.stderr.count("\nDone ") == len(TARGETS), tail   # each ran to the end
    assert "ERROR: AddressSanitizer" not in res.stderr
    assert "runtime error:" not in res.stderr        # UBSan
