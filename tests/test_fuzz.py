"""A short run of the libFuzzer targets (ASan + UBSan) over the native
reader; tests/fuzz/run.sh SECONDS runs them for longer (docs/fuzzing.md)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

FUZZ = Path(__file__).resolve().parent / "fuzz"


def test_fuzz_targets_find_nothing():
    seconds = os.environ.get("TCPVAR_FUZZ_SECONDS", "20")
    res = subprocess.run([str(FUZZ / "run.sh"), seconds], capture_output=True, text=True,
                         timeout=int(seconds) * 4 + 300)
    tail = res.stderr[-3000:]
    assert res.returncode == 0, tail
    assert res.stderr.count("\nDone ") == 2, tail   # both targets ran to the end
    assert "ERROR: AddressSanitizer" not in res.stderr
    assert "runtime error:" not in res.stderr        # UBSan
