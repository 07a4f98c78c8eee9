"""A short run of the fuzzing targets (ASan + UBSan) over the native reader
and its Python boundary; tests/fuzz/run.sh SECONDS runs them for longer
(docs/fuzzing.md)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

FUZZ = Path(__file__).resolve().parent / "fuzz"


def test_fuzz_targets_find_nothing():
    seconds = os.environ.get("TCPVAR_FUZZ_SECONDS", "20")
    res = subprocess.run([str(FUZZ / "run.sh"), seconds], capture_output=True, text=True,
                         timeout=int(seconds) * 6 + 300,
                         env={**os.environ, "PYTHON": sys.executable})   # atheris' Python
    tail = res.stderr[-3000:]
    assert res.returncode == 0, tail
    assert res.stderr.count("\nDone ") == 3, tail   # the three targets ran to the end
    assert "ERROR: AddressSanitizer" not in res.stderr
    assert "runtime error:" not in res.stderr        # UBSan
